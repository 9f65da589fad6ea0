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

"""The openstack client commands over a stand-in baremetal client.

Only what the commands make of the API's answers: the real client
against the real API is in tests/e2e/test_affinity_api.py.
"""

import argparse
import types

from ironic_affinity.osc import affinity
from ironic_affinity.tests import base

NODE = {
    'uuid': 'u1',
    'node': 'node1',
    'tags': ['rack10'],
    'conductor': 'c1',
    'ironic_conductor': 'c1',
    'fallback': ['c1', 'c2'],
    'conductors': [
        {
            'conductor': 'c1',
            'verdict': 'chosen',
            'score': 1,
            'breakdown': [['rack10', 1]],
        },
        {
            'conductor': 'c2',
            'verdict': 'eligible',
            'score': 0,
            'breakdown': [],
        },
        {
            'conductor': 'c3',
            'verdict': 'excluded',
            'reason': 'node lacks hard-affinity tag(s) dc2',
        },
    ],
    'not_members': [],
    'tags_error': None,
    'side': 'affinity',
    'switch_moves': [],
}
DEPLOYMENT = {
    'membership': {'readable': True, 'error': None},
    'members': [],
    'not_members': [],
    'orphans': [],
    'single_conductor': [{'node': 'n2', 'uuid': 'u2', 'conductor': 'c1'}],
}


class FakeHTTP:
    def __init__(self, answers):
        self.answers = answers
        self.asked = []

    def json_request(self, method, path):
        self.asked.append((method, path))
        return None, self.answers[path]


def _command(cls, answers):
    http = FakeHTTP(answers)
    app = types.SimpleNamespace(
        client_manager=types.SimpleNamespace(
            baremetal=types.SimpleNamespace(http_client=http)
        ),
        stdout=None,
    )
    return cls(app, argparse.Namespace()), http


class OpenStackClientTestCase(base.TestCase):
    def test_show_reads_the_node_resource(self):
        command, http = _command(
            affinity.ShowNodeAffinity, {'/v1/nodes/node%201/affinity': NODE}
        )
        fields, values = command.take_action(
            argparse.Namespace(node='node%201')
        )
        shown = dict(zip(fields, values, strict=True))
        self.assertEqual([('GET', '/v1/nodes/node%201/affinity')], http.asked)
        self.assertEqual(
            'c1: chosen, score 1 (rack10 +1)\n'
            'c2: eligible, score 0\n'
            'c3: node lacks hard-affinity tag(s) dc2',
            shown['verdicts'].human_readable(),
        )
        self.assertEqual(
            NODE['conductors'], shown['verdicts'].machine_readable()
        )
        self.assertEqual(['c1', 'c2'], shown['fallback'].machine_readable())
        self.assertEqual('c1 > c2', shown['fallback'].human_readable())
        # No rollout: nothing pending.
        self.assertEqual('', shown['pending'].human_readable())
        self.assertIsNone(shown['rollout_ends_at'])

    def test_show_the_fallback_in_its_order(self):
        # Not sorted by name, as osc_lib's ListColumn would print it.
        node = dict(NODE, fallback=['c2', 'c1', 'c3'])
        command, _http = _command(
            affinity.ShowNodeAffinity, {'/v1/nodes/node1/affinity': node}
        )
        fields, values = command.take_action(argparse.Namespace(node='node1'))
        shown = dict(zip(fields, values, strict=True))
        self.assertEqual('c2 > c1 > c3', shown['fallback'].human_readable())
        self.assertEqual(
            ['c2', 'c1', 'c3'], shown['fallback'].machine_readable()
        )

    def test_show_a_node_waiting_to_move(self):
        moving = dict(
            NODE,
            pending=[{'from': 'c1', 'to': 'c2', 'at': 1800000018.3}],
            rollout_ends_at=1800000060.0,
        )
        command, _http = _command(
            affinity.ShowNodeAffinity, {'/v1/nodes/node1/affinity': moving}
        )
        fields, values = command.take_action(argparse.Namespace(node='node1'))
        shown = dict(zip(fields, values, strict=True))
        self.assertEqual(
            'c1 -> c2 at 2027-01-15T08:00:18Z',
            shown['pending'].human_readable(),
        )
        self.assertEqual(
            moving['pending'], shown['pending'].machine_readable()
        )
        self.assertEqual('2027-01-15T08:01:00Z', shown['rollout_ends_at'])

    def test_show_a_node_switching_sides(self):
        switching = dict(
            NODE,
            side='stock',
            switch_moves=[
                {'from': 'stock', 'to': 'affinity', 'at': 1800000018.3}
            ],
        )
        command, _http = _command(
            affinity.ShowNodeAffinity, {'/v1/nodes/node1/affinity': switching}
        )
        fields, values = command.take_action(argparse.Namespace(node='node1'))
        shown = dict(zip(fields, values, strict=True))
        self.assertEqual('stock', shown['side'])
        self.assertEqual(
            'stock -> affinity at 2027-01-15T08:00:18Z',
            shown['switch_moves'].human_readable(),
        )

    def list_with(self, placement):
        """The list command against a deployment whose ``placement``
        is the one given."""
        command, _http = _command(
            affinity.ListAffinity,
            {'/v1/affinity': dict(DEPLOYMENT, placement=placement)},
        )
        return command

    def test_list_says_where_placement_stands(self):
        command = self.list_with(
            {
                'state': 'switching',
                'to': 'affinity',
                'ends_at': 1800000060.0,
                'nodes_to_move': 42,
                'stock_voters': [],
            }
        )
        with self.assertLogs(affinity.LOG.name, 'WARNING') as logs:
            command.take_action(argparse.Namespace())
        self.assertIn(
            'switching to affinity until 2027-01-15T08:01:00Z; 42 node(s)',
            logs.output[0],
        )

    def test_list_counts_takeovers_pending(self):
        command = self.list_with({'state': 'affinity', 'takeovers_pending': 7})
        with self.assertLogs(affinity.LOG.name, 'WARNING') as logs:
            command.take_action(argparse.Namespace())
        self.assertEqual(1, len(logs.output))
        self.assertIn('7 ACTIVE node(s) not taken over yet', logs.output[0])

    def test_list_names_conductors_outside_the_group_by_placement(self):
        # Given no node only once every node is placed by affinity:
        # before, Ironic's ring gives them their nodes.
        for state, until in (('affinity', False), ('stock', True)):
            command, _http = _command(
                affinity.ListAffinity,
                {
                    '/v1/affinity': dict(
                        DEPLOYMENT,
                        not_members=['c9'],
                        placement={'state': state, 'stock_voters': []},
                    )
                },
            )
            with self.assertLogs(affinity.LOG.name, 'WARNING') as logs:
                command.take_action(argparse.Namespace())
            said = logs.output[-1]
            self.assertIn('Conductor c9 is active in Ironic but not', said)
            self.assertIn('given no node', said)
            self.assertEqual(
                until, "Ironic's ring may give it nodes" in said, state
            )

    def test_list_is_quiet_once_every_node_is_taken_over(self):
        command = self.list_with({'state': 'affinity', 'takeovers_pending': 0})
        with self.assertNoLogs(affinity.LOG.name, 'WARNING'):
            command.take_action(argparse.Namespace())

    def test_check_status_is_for_monitoring(self):
        command, _http = _command(
            affinity.CheckAffinity, {'/v1/affinity': DEPLOYMENT}
        )
        _columns, rows = command.take_action(argparse.Namespace())
        self.assertEqual(
            [('n2', 'u2', 'one valid conductor', 'c1')], list(rows)
        )
        self.assertEqual(0, command.problems)
        orphaned = dict(
            DEPLOYMENT,
            orphans=[{'node': 'n3', 'uuid': 'u3', 'tags': [], 'reasons': {}}],
        )
        command, _http = _command(
            affinity.CheckAffinity, {'/v1/affinity': orphaned}
        )
        _columns, rows = command.take_action(argparse.Namespace())
        self.assertEqual(
            ('n3', 'u3', 'no valid conductor', 'no live conductor'),
            list(rows)[0],
        )
        self.assertEqual(1, command.problems)

    def test_check_names_conductors_over_capacity(self):
        # As ironic-affinity check does: a problem, exit status 1.
        full = dict(
            DEPLOYMENT,
            over_capacity={'c1': {'nodes': 3, 'max_nodes': 2}},
        )
        command, _http = _command(
            affinity.CheckAffinity, {'/v1/affinity': full}
        )
        _columns, rows = command.take_action(argparse.Namespace())
        self.assertEqual(
            ('c1', None, 'over max_nodes', '3 node(s) for max_nodes 2'),
            list(rows)[-1],
        )
        self.assertEqual(1, command.problems)

    def test_check_and_list_warn_of_a_view_not_refreshed(self):
        # The API answers from its last view when the backend is away.
        stale = dict(
            DEPLOYMENT,
            membership={'readable': False, 'error': 'Connection refused'},
        )
        for cls in (affinity.CheckAffinity, affinity.ListAffinity):
            command, _http = _command(cls, {'/v1/affinity': stale})
            with self.assertLogs(affinity.LOG.name, 'WARNING') as logs:
                command.take_action(argparse.Namespace())
            self.assertIn(
                'cannot read the membership group: Connection refused',
                logs.output[0],
                cls.__name__,
            )
