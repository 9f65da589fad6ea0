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

"""The operator docs name what the code sends and prints.

Each key or name the code produces must be in the doc that lists them,
so that a renamed key fails here rather than in an operator's runbook;
each metric the docs list must be one the code sends.
"""

import ast
import pathlib
import re

from ironic_affinity import adoption
from ironic_affinity import profile
from ironic_affinity import report
from ironic_affinity import report_group
from ironic_affinity import scenario
from ironic_affinity.cmd import cli
from ironic_affinity.cmd import live_commands
from ironic_affinity.tests import base
from ironic_affinity.tests.unit import doc_text

PACKAGE = pathlib.Path(__file__).resolve().parents[2]
EXAMPLES = PACKAGE.parent / 'examples'

_SENDS = {
    'send_gauge': 'gauge',
    'send_counter': 'counter',
    'send_timer': 'timer',
}
_DOCUMENTED_METRIC = re.compile(
    r'^``ironic_affinity\.([^`]+)`` \((gauge|counter|timer)\b'
)


def sent_metrics() -> dict[str, str]:
    """Each metric name placement_metrics.py sends (a name built from a
    conductor's as ``<conductor>``), with its kind."""
    path = PACKAGE / 'integration' / 'placement_metrics.py'
    found = {}
    for call in ast.walk(ast.parse(path.read_text())):
        if not (
            isinstance(call, ast.Call)
            and isinstance(call.func, ast.Attribute)
            and call.func.attr in _SENDS
        ):
            continue
        name = call.args[0]
        if isinstance(name, ast.BinOp):
            # 'placement.nodes.' + metric_part(conductor)
            name = name.left
            suffix = '<conductor>'
        else:
            suffix = ''
        assert isinstance(name, ast.Constant), ast.dump(call)
        found[name.value + suffix] = _SENDS[call.func.attr]
    return found


def live_keys(function: str) -> set[str]:
    """The keys cmd/live_commands.py adds to a report builder's result
    in ``function``."""
    path = PACKAGE / 'cmd' / 'live_commands.py'
    tree = ast.parse(path.read_text())
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == function:
            return {
                target.slice.value
                for assign in ast.walk(node)
                if isinstance(assign, ast.Assign)
                for target in assign.targets
                if isinstance(target, ast.Subscript)
                and isinstance(target.value, ast.Name)
                and target.value.id == 'result'
                and isinstance(target.slice, ast.Constant)
            }
    raise AssertionError('no function %s' % function)


# Objects keyed by conductor or node: their keys are names, not keys.
BY_NAME = frozenset(
    ('loads', 'capacities', 'over_capacity', 'rejected', 'reasons')
)


def keys(value, into=None, by_name=False):
    """Every key of every object in a JSON-ready value, but the names
    that key the objects of :data:`BY_NAME`."""
    into = set() if into is None else into
    if isinstance(value, dict):
        for key, item in value.items():
            if not by_name:
                into.add(key)
            keys(item, into, not by_name and key in BY_NAME)
    elif isinstance(value, list):
        for item in value:
            keys(item, into)
    return into


class MetricsDocTestCase(base.TestCase):
    def test_every_metric_sent_is_documented_with_its_kind(self):
        documented = {}
        for line in doc_text.read('admin/metrics.rst').splitlines():
            match = _DOCUMENTED_METRIC.match(line)
            if match:
                documented[match.group(1)] = match.group(2)
        sent = sent_metrics()
        self.assertGreaterEqual(len(sent), 12)
        self.assertEqual(sent, documented)


class CommandsDocTestCase(base.TestCase):
    """Each key of ``-f json`` is in its command's part of the page."""

    def setUp(self):
        super().setUp()
        page = doc_text.read('cli/index.rst')
        json_part = doc_text.between(page, 'JSON output\n', 'Exit codes\n')
        # What every live command adds, said once before the commands.
        live = doc_text.literals(
            doc_text.between(json_part, 'The live commands', '``plan``')
        )
        self.sections = {
            name: live
            | doc_text.literals(
                doc_text.between(json_part, '``%s`` prints:' % name, after)
            )
            for name, after in (
                ('plan', '``explain`` prints:'),
                ('explain', '``check`` prints:'),
                ('check', '``members`` prints:'),
                ('members', None),
            )
        }
        # The object every live command adds as 'placement'.
        self.placement = doc_text.literals(
            doc_text.between(json_part, '``placement``\n', '\n``side``')
        )
        found = scenario.load(str(EXAMPLES / 'capacity.yaml'))
        self.conductors = found.conductors
        self.nodes = found.nodes

    def assertDocumented(self, produced, command):
        missing = sorted(set(produced) - self.sections[command])
        self.assertEqual([], missing, '%s -f json' % command)

    def test_plan(self):
        down = [self.conductors[0].name]
        produced = keys(report.plan(self.conductors, self.nodes, down))
        self.assertIn('capacities', produced)
        self.assertDocumented(produced | live_keys('plan'), 'plan')

    def test_explain(self):
        produced = keys(
            report.explain(self.conductors, self.nodes[0], (), self.nodes)
        )
        self.assertIn('breakdown', produced)
        self.assertDocumented(produced | live_keys('explain'), 'explain')

    def test_check(self):
        produced = keys(report.check(self.conductors, self.nodes))
        self.assertDocumented(produced | live_keys('check'), 'check')

    def test_members(self):
        members = {c.name: c for c in self.conductors}
        produced = report_group.members(members, 'file:///x', 'g', rejected={})
        top = set(produced) | set(produced['members'][0])
        self.assertIn('vote', top)
        self.assertDocumented(top | live_keys('members'), 'members')

    def test_placement(self):
        agreement = adoption.agree({'c1': None}, ('c2',))
        produced = report_group.switching(
            agreement, 0.0, [profile.NodeRequest('n1')], takeovers_pending=0
        )
        missing = sorted(set(produced) - self.placement)
        self.assertEqual([], missing, 'placement')


class ExitCodesDocTestCase(base.TestCase):
    def test_the_statuses_the_commands_give(self):
        # The page's "Exit codes" entries are ``N`` lines of their own.
        section = doc_text.between(
            doc_text.read('cli/index.rst'), 'Exit codes\n', None
        )
        documented = {
            int(n) for n in re.findall(r'^``(\d+)``$', section, re.M)
        }
        given = {
            0,
            cli.EXIT_FAILURE,
            cli.EXIT_USAGE,
            live_commands.EXIT_PROBLEM,
        }
        self.assertEqual(given, documented)


class WorkedFiguresTestCase(base.TestCase):
    """Periods the docs work out are the code's (Ironic's defaults: 8
    nodes a takeover run, a run every 180 s)."""

    def period(self, nodes, conductors):
        return adoption.takeover_period(nodes, conductors, 8, 180)

    def test_adoption_table(self):
        table = doc_text.between(
            doc_text.read('admin/adoption.rst'),
            '* - Nodes',
            'These are computed',
        )
        rows = re.findall(r'\* - ([\d,]+)\n\s+- (\d+)\n\s+- ([\d,]+) s', table)
        self.assertGreaterEqual(len(rows), 4)
        for nodes, conductors, seconds in rows:
            self.assertEqual(
                float(seconds.replace(',', '')),
                self.period(int(nodes.replace(',', '')), int(conductors)),
                (nodes, conductors),
            )

    def test_ironic_page(self):
        text = ' '.join(doc_text.read('admin/ironic.rst').split())
        self.assertIn(
            'that is 113 x 180 s, 5.65 hours, for 10,000 nodes over 10 '
            'conductors, and 1,620 s (9 x 180 s) for 300 nodes over 3.',
            text,
        )
        self.assertEqual(113 * 180, self.period(10_000, 10))
        self.assertEqual(5.65 * 3600, self.period(10_000, 10))
        self.assertEqual(9 * 180, self.period(300, 3))

    def test_kolla_rollback(self):
        text = ' '.join(doc_text.read('install/kolla-ansible.rst').split())
        self.assertIn(
            '6,300 s, 1.75 hours, for 2,000 nodes over 6 conductors', text
        )
        self.assertEqual(6_300, self.period(2_000, 6))
        self.assertEqual(1.75 * 3600, self.period(2_000, 6))
