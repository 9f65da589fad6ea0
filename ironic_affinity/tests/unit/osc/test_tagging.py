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

"""openstack baremetal affinity tag over a stand-in baremetal client;
the real client against the real API and its door is in
tests/e2e/test_tagging.py."""

import argparse
import io
import os
import types
from unittest import mock

import fixtures
from osc_lib import exceptions

from ironic_affinity.osc import tagging
from ironic_affinity.tests import base


class HTTPError(Exception):
    def __init__(self, status, message):
        super().__init__(message)
        self.http_status = status


class FakeNodes:
    """python-ironicclient's node manager, over a dict of nodes."""

    def __init__(self, nodes):
        self.nodes = {n['uuid']: dict(n) for n in nodes}
        self.patches = []
        self.failures = {}  # uuid -> errors to raise, first first

    def list(self, limit, fields):
        assert (limit, fields) == (0, ['uuid', 'name', 'extra'])
        return [types.SimpleNamespace(**n) for n in self.nodes.values()]

    def update(self, uuid, patch):
        self.patches.append((uuid, patch))
        errors = self.failures.get(uuid)
        if errors:
            raise errors.pop(0)
        [op] = patch
        key = op['path'].split('/')[-1]
        self.nodes[uuid]['extra'] = dict(
            self.nodes[uuid]['extra'], **{key: op['value']}
        )


NODES = [
    {'uuid': 'u1', 'name': 'n1', 'extra': {}},
    {'uuid': 'u2', 'name': 'n2', 'extra': {'affinity_tags': 'Rack10 dc1'}},
    {'uuid': 'u3', 'name': None, 'extra': {'affinity_tags': 'rack10'}},
    {'uuid': 'u4', 'name': 'n4', 'extra': {'affinity_tags': ['b', 'a']}},
]


class TagTestCase(base.TestCase):
    def setUp(self):
        super().setUp()
        self.dir = self.useFixture(fixtures.TempDir()).path
        self.nodes = FakeNodes(NODES)
        self.stderr = io.StringIO()
        app = types.SimpleNamespace(
            client_manager=types.SimpleNamespace(
                baremetal=types.SimpleNamespace(node=self.nodes)
            ),
            stderr=self.stderr,
        )
        self.command = tagging.TagNodes(app, argparse.Namespace())
        self.useFixture(fixtures.MockPatchObject(tagging, 'LOCKED_WAIT', 0))

    def write(self, name, text):
        path = os.path.join(self.dir, name)
        with open(path, 'w') as stream:
            stream.write(text)
        return path

    def run_tag(self, path, apply=False, key='affinity_tags'):
        args = argparse.Namespace(
            mapping=path, apply=apply, key=key, concurrency=2
        )
        _columns, rows = self.command.take_action(args)
        return {row[0]: row for row in rows}

    def test_a_dry_run_writes_nothing(self):
        path = self.write(
            'm.csv', 'node,tags\nn1,"rack20, dc1"\nn2,dc1 rack10\nu3,bad!tag\n'
        )
        rows = self.run_tag(path)
        self.assertEqual(
            ('n1', 'u1', None, 'dc1, rack20', 'to change'), rows['n1']
        )
        # Same tags in another spelling: nothing to write.
        self.assertEqual('unchanged', rows['n2'][4])
        self.assertTrue(rows['u3'][4].startswith("refused: node u3: invalid"))
        self.assertIsNone(rows['u3'][3])
        self.assertEqual([], self.nodes.patches)
        self.assertEqual(1, self.command.refused)
        # Tags stored as a list, in a file named in upper case.
        listed = self.run_tag(self.write('M.CSV', 'n4,c\n'))['n4']
        self.assertEqual(('n4', 'u4', 'b, a', 'c', 'to change'), listed)

    def test_apply_writes_each_node_once_and_refuses_the_bad(self):
        path = self.write(
            'm.yaml',
            'n1: [rack20, dc1]\nn2: dc1 rack10\nu3: "bad!tag"\n'
            'ghost: rack10\n',
        )
        rows = self.run_tag(path, apply=True)
        self.assertEqual('changed', rows['n1'][4])
        self.assertEqual(
            [
                (
                    'u1',
                    [
                        {
                            'op': 'add',
                            'path': '/extra/affinity_tags',
                            'value': 'dc1, rack20',
                        }
                    ],
                )
            ],
            self.nodes.patches,
        )
        # The refused node is untouched.
        self.assertEqual(
            {'affinity_tags': 'rack10'}, self.nodes.nodes['u3']['extra']
        )
        self.assertEqual('refused: no such node', rows['ghost'][4])
        self.assertEqual(2, self.command.refused)
        self.assertIn('1 changed, 0 refused', self.stderr.getvalue())

    def test_a_locked_node_is_tried_again_and_the_api_s_refusal_said(self):
        self.nodes.failures = {
            'u1': [HTTPError(409, 'Node n1 is locked by host c1')],
            'u2': [
                HTTPError(
                    400,
                    '{"error_message": "node n2: invalid tag\\n here"}',
                )
            ],
        }
        path = self.write('m.json', '{"n1": "rack20", "n2": "rack30"}')
        rows = self.run_tag(path, apply=True)
        self.assertEqual('changed', rows['n1'][4])
        self.assertEqual('refused: node n2: invalid tag here', rows['n2'][4])
        self.assertEqual(
            ['u1', 'u1', 'u2'], sorted(uuid for uuid, _ in self.nodes.patches)
        )

    def test_another_key(self):
        path = self.write('m.csv', 'n1,rack20\n')
        self.run_tag(path, apply=True, key='placement_tags')
        self.assertEqual(
            {'placement_tags': 'rack20'}, self.nodes.nodes['u1']['extra']
        )

    def test_a_bad_file_writes_nothing(self):
        for name, text, said in (
            ('a.csv', 'n1,rack10\nn2\n', 'line 2: expected node,tags'),
            ('b.csv', 'n1,rack10\nn1,rack20\n', "node 'n1' given twice"),
            ('c.yaml', '- n1\n', 'expected a mapping'),
            ('e.yaml', 'n1: rack10\nn1: rack20\n', "node 'n1' given twice"),
            ('f.json', '{"n1": "a", "n1": "b"}', "node 'n1' given twice"),
            ('d.yaml', 'n1: [rack10\n', 'cannot read'),
            # One node by its name and its uuid.
            ('g.csv', 'n1,rack10\nu1,rack20\n', "node 'n1' given twice"),
        ):
            error = self.assertRaises(
                exceptions.CommandError,
                self.run_tag,
                self.write(name, text),
                True,
            )
            self.assertIn(said, str(error), name)
        self.assertRaises(
            exceptions.CommandError,
            self.run_tag,
            os.path.join(self.dir, 'missing.csv'),
        )
        self.assertEqual([], self.nodes.patches)

    def test_the_exit_status_says_if_any_was_refused(self):
        path = self.write('m.csv', 'n1,rack20\n')
        with mock.patch.object(
            tagging.TagNodes, 'produce_output', autospec=True
        ):
            args = self.command.get_parser('tag').parse_args([path])
            self.assertEqual(0, self.command.run(args))
            path = self.write('m2.csv', 'n9,rack20\n')
            args = self.command.get_parser('tag').parse_args([path])
            self.assertEqual(1, self.command.run(args))


class ProgressTestCase(base.TestCase):
    def test_a_line_every_tenth_off_a_terminal(self):
        stream = io.StringIO()
        progress = tagging.Progress(20, stream)
        for _ in range(20):
            progress.one()
        progress.done(19)
        lines = stream.getvalue().splitlines()
        self.assertEqual('2/20 nodes done', lines[0])
        self.assertEqual(11, len(lines))
        self.assertTrue(lines[-1].startswith('20 node(s) in '))
        self.assertTrue(lines[-1].endswith(': 19 changed, 1 refused'))
