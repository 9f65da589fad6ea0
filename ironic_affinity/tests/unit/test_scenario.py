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

import json
import os

import fixtures

from ironic_affinity import exception
from ironic_affinity import scenario
from ironic_affinity.tests import base

EXAMPLES = os.path.join(
    os.path.dirname(__file__), '..', '..', '..', 'examples'
)


class ScenarioTestCase(base.TestCase):
    def setUp(self):
        super().setUp()
        self.dir = self.useFixture(fixtures.TempDir()).path

    def _write(self, text, name='s.yaml'):
        path = os.path.join(self.dir, name)
        mode = 'wb' if isinstance(text, bytes) else 'w'
        with open(path, mode) as handle:
            handle.write(text)
        return path

    def _refused(self, text, *parts, name='s.yaml'):
        path = self._write(text, name)
        exc = self.assertRaises(exception.InvalidScenario, scenario.load, path)
        message = str(exc)
        self.assertTrue(message.startswith(path + ': '), message)
        self.assertNotIn('\n', message)
        for part in parts:
            self.assertIn(part, message)
        return message

    def test_examples_load(self):
        for name in ('rfe-part1.yaml', 'rfe-edit2.yaml'):
            loaded = scenario.load(os.path.join(EXAMPLES, name))
            self.assertEqual(3, len(loaded.conductors))
            self.assertEqual(3, len(loaded.nodes))

    def test_yaml_and_json_agree(self):
        document = {
            'conductors': [
                {
                    'name': 'c1',
                    'soft_affinity_tags': ['rack1:3', 'net1'],
                    'hard_affinity_tags': 'dc1',
                    'hardware_types': 'ipmi, redfish',
                    'conductor_group': 'G1',
                }
            ],
            'nodes': [
                {
                    'name': 'n1',
                    'uuid': 'u-1',
                    'affinity_tags': 'DC1 rack1',
                    'driver': 'ipmi',
                    'conductor_group': 'g1',
                }
            ],
        }
        from_json = scenario.load(self._write(json.dumps(document), 'a.json'))
        from_yaml = scenario.load(self._write(json.dumps(document), 'a.yaml'))
        self.assertEqual(from_json.conductors, from_yaml.conductors)
        self.assertEqual(from_json.nodes, from_yaml.nodes)
        (conductor,) = from_json.conductors
        self.assertEqual({'rack1': 3, 'net1': 1}, conductor.soft_affinity_tags)
        self.assertEqual(
            frozenset({'ipmi', 'redfish'}), conductor.hardware_types
        )
        self.assertEqual('g1', conductor.conductor_group)
        (node,) = from_json.nodes
        self.assertEqual(frozenset({'dc1', 'rack1'}), node.tags)
        self.assertEqual(b'u-1', node.hash_key)
        self.assertIs(node, from_json.node('u-1'))
        self.assertIs(node, from_json.node('n1'))

    def test_unknown_key(self):
        self._refused(
            'conductors:\n- name: c1\n  soft_afinity_tags: x\n',
            "conductors[0] ('c1')",
            'soft_afinity_tags',
        )
        self._refused('conductor: []\n', 'conductor')

    def test_bad_tag_names_entry_and_option(self):
        self._refused(
            'conductors:\n- name: c1\n- name: c2\n'
            '  soft_affinity_tags: "a b!"\n',
            "conductors[1] ('c2')",
            'soft_affinity_tags',
            "'b!'",
        )
        self._refused(
            'nodes:\n- name: n1\n  affinity_tags: [rack1, 7]\n',
            "nodes[0] ('n1')",
            'affinity_tags',
        )

    def test_conflicting_hard_lists(self):
        self._refused(
            'conductors:\n- name: c1\n  hard_affinity_tags: a\n'
            '  hard_anti_affinity_tags: A\n',
            "conductors[0] ('c1')",
            'hard_anti_affinity_tags',
        )

    def test_duplicates(self):
        self._refused(
            'conductors:\n- name: c1\n- name: c1\n', 'conductors[1]', "'c1'"
        )
        self._refused('nodes:\n- name: n\n- name: n\n', 'nodes[1]')
        self._refused(
            'nodes:\n- {name: a, uuid: u}\n- {name: b, uuid: u}\n', "'u'"
        )

    def test_missing_or_bad_name(self):
        self._refused('nodes:\n- affinity_tags: x\n', 'nodes[0]', 'name')
        self._refused('nodes:\n- name: 12\n', 'nodes[0]', 'name')
        self._refused('nodes:\n- name: " "\n', 'nodes[0]', 'name')

    def test_bad_shapes(self):
        self._refused('- a\n- b\n', 'mapping')
        self._refused('nodes: {a: 1}\n', 'nodes must be a list')
        self._refused('nodes: [1]\n', 'nodes[0]')
        self._refused(
            'conductors:\n- name: c\n  hardware_types: {a: 1}\n',
            'hardware_types',
        )
        self._refused('nodes:\n- {name: n, driver: [a]}\n', 'driver')

    def test_drain(self):
        path = self._write(
            'conductors:\n- {name: a, drain: true}\n- {name: b}\n'
        )
        found = {c.name: c.draining for c in scenario.load(path).conductors}
        self.assertEqual({'a': True, 'b': False}, found)
        self._refused(
            'conductors:\n- {name: a, drain: 1}\n',
            'conductors[0]',
            'drain must be true or false',
        )

    def test_unreadable(self):
        path = os.path.join(self.dir, 'missing.yaml')
        exc = self.assertRaises(exception.InvalidScenario, scenario.load, path)
        self.assertIn(path, str(exc))
        self.assertIn('cannot read', str(exc))

    def test_not_yaml(self):
        self._refused('nodes: [\n', 'not valid YAML')
        self._refused('{"nodes": [}', 'not valid JSON', name='x.json')

    def test_syntax_errors_say_where_once(self):
        # PyYAML's own message repeats the place and quotes the line.
        message = self._refused(
            'conductors:\n- name: c1\n  soft_affinity_tags: [a\nnodes: []\n',
            'line 4, column 6: not valid YAML: expected',
        )
        self.assertNotIn('unicode string', message)
        self.assertEqual(1, message.count('line '), message)
        self._refused(
            '{"nodes":\n [}', 'line 2, column 3: not valid JSON', name='x.json'
        )

    def test_not_utf8(self):
        self._refused(b'nodes: [\xff]\n', 'UTF-8')

    def test_object_tags_not_constructed(self):
        marker = os.path.join(self.dir, 'marker')
        self._refused(
            '!!python/object/apply:os.system ["touch %s"]\n' % marker,
            'not valid YAML',
        )
        self.assertFalse(os.path.exists(marker))

    def test_deep_nesting(self):
        self._refused('[' * 100000, 'nested too deeply')
        self._refused(
            '[' * 100000 + ']' * 100000, 'nested too deeply', name='d.json'
        )

    def test_unknown_node(self):
        loaded = scenario.load(os.path.join(EXAMPLES, 'rfe-part1.yaml'))
        exc = self.assertRaises(exception.InvalidScenario, loaded.node, 'x')
        self.assertIn("'x'", str(exc))

    def test_empty_file_is_empty_scenario(self):
        loaded = scenario.load(self._write('conductors:\nnodes:\n'))
        self.assertEqual((), loaded.conductors)
        self.assertEqual((), loaded.nodes)
