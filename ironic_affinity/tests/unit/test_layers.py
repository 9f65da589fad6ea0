# Licensed under the Apache License, Version 2.0 (the "License"); you may
# not use this file except in compliance with the License. You may obtain
# a copy of the License at
#
#      http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS, WITHOUT
# WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the
# License for the specific language governing permissions and limitations
# under the License.

"""The import graph runs downward only (contributor/architecture.rst).

Read from the source with ast, so that an import added anywhere, even
inside a function, is caught.
"""

import ast
import pathlib

from ironic_affinity.tests import base

PACKAGE = pathlib.Path(__file__).resolve().parents[2]

# Lowest first. A module may import from its own layer and those below.
LAYERS = (
    ('base', ('_i18n', 'exception', 'outage', 'tags')),
    (
        'model',
        (
            'profile',
            'schedule',
            'adoption',
            'rendezvous_mix',
            'rendezvous',
            'rendezvous_vector',
        ),
    ),
    (
        'placement',
        (
            'engine',
            'capacity',
            'rollout',
            'rollout_capacity',
            'placement',
            'publication',
            'active_members',
            'takeovers',
            'report',
            'report_group',
            'scenario',
        ),
    ),
    ('configuration', ('conf',)),
    ('membership', ('membership',)),
    ('integration', ('integration',)),
    ('commands', ('cmd',)),
    # The openstack client plugin: talks to the REST API only.
    ('client', ('osc',)),
)
PURE = ('base', 'model', 'placement')
# What pure modules never import: servers, databases, Ironic, services.
IO_PACKAGES = (
    'ironic',
    'oslo_config',
    'oslo_log',
    'sqlalchemy',
    'stevedore',
    'tooz',
)


def _layer(module: str) -> int:
    """The index in LAYERS of 'ironic_affinity.x.y'."""
    parts = module.split('.')[1:]
    for index, (_name, members) in enumerate(LAYERS):
        if parts and parts[0] in members:
            return index
    raise AssertionError('%s is in no layer: add it to LAYERS' % module)


def _modules():
    for path in sorted(PACKAGE.rglob('*.py')):
        relative = path.relative_to(PACKAGE.parent).with_suffix('')
        parts = relative.parts
        if 'tests' in parts or parts[-1] == '__init__':
            continue
        yield '.'.join(parts), path


# No module of the package may outgrow one sitting's reading (issues 28
# and 42).
MAX_LINES = 400


def _imports(path: pathlib.Path):
    """Every module ``path`` imports; ``from package import module``
    names the module."""
    tree = ast.parse(path.read_text(), str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name
        elif isinstance(node, ast.ImportFrom) and node.module:
            if node.module.startswith('ironic_affinity'):
                for alias in node.names:
                    full = '%s.%s' % (node.module, alias.name)
                    found = PACKAGE.parent.joinpath(*full.split('.'))
                    if found.with_suffix('.py').exists() or found.is_dir():
                        yield full
                    else:
                        yield node.module
            else:
                yield node.module


def _circles(graph):
    """The strongly connected components of ``graph`` with more than one
    module (Tarjan's algorithm, iterative: the graph has over 100
    modules)."""
    index, low, on_stack, stack, found = {}, {}, set(), [], []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            module, edges = work[-1]
            for target in edges:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(graph[target]))))
                    break
                if target in on_stack:
                    low[module] = min(low[module], index[target])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[module])
                if low[module] == index[module]:
                    component = []
                    while True:
                        top = stack.pop()
                        on_stack.discard(top)
                        component.append(top)
                        if top == module:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def _graph():
    """module -> the package's modules it imports, packages included."""
    modules = dict(_modules())
    graph = {}
    for module, path in modules.items():
        graph[module] = {
            imported
            for imported in _imports(path)
            if imported in modules and imported != module
        }
    return graph


class LayersTestCase(base.TestCase):
    def test_every_module_has_a_layer(self):
        found = list(_modules())
        self.assertGreater(len(found), 20)
        for module, _path in found:
            _layer(module)

    def test_imports_run_downward(self):
        upward = []
        for module, path in _modules():
            mine = _layer(module)
            for imported in _imports(path):
                if not imported.startswith('ironic_affinity.'):
                    continue
                if _layer(imported) > mine:
                    upward.append('%s imports %s' % (module, imported))
        self.assertEqual([], upward)

    def test_pure_modules_do_no_io(self):
        pure = {i for i, (name, _m) in enumerate(LAYERS) if name in PURE}
        found = []
        for module, path in _modules():
            if _layer(module) not in pure:
                continue
            for imported in _imports(path):
                if imported.split('.')[0] in IO_PACKAGES:
                    found.append('%s imports %s' % (module, imported))
        self.assertEqual([], found)

    def test_the_check_sees_an_upward_import(self):
        # The check itself can fail: a report importing membership would.
        self.assertGreater(
            _layer('ironic_affinity.membership.view'),
            _layer('ironic_affinity.report'),
        )

    def test_no_import_circle(self):
        self.assertEqual([], _circles(_graph()))

    def test_the_circle_check_sees_a_circle(self):
        graph = {'a': {'b'}, 'b': {'c'}, 'c': {'a'}, 'd': {'a'}, 'e': set()}
        self.assertEqual([['a', 'b', 'c']], _circles(graph))
        self.assertEqual([], _circles({'a': {'b'}, 'b': set()}))

    def test_modules_are_short(self):
        long = []
        for module, path in _modules():
            lines = len(path.read_text().splitlines())
            if lines > MAX_LINES:
                long.append('%s: %d lines' % (module, lines))
        self.assertEqual([], long)
