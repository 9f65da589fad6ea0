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

"""What members and check say of a switch between Ironic's ring and
affinity placement."""

import dataclasses

from ironic_affinity import adoption
from ironic_affinity import profile
from ironic_affinity import report_group
from ironic_affinity.cmd import render
from ironic_affinity.cmd import render_group
from ironic_affinity.tests import base

T0 = 1_800_000_000.0  # 2027-01-15T08:00:00Z
ORIGIN = adoption.Switch('stock', adoption.ORIGIN_AT, 0.0)


def voting(name, side, switches=()):
    return dataclasses.replace(
        profile.ConductorProfile(name),
        switching=adoption.Published(
            adoption.Vote(side, T0 - 100, 60.0), tuple(switches)
        ),
    )


def nodes(count):
    return [
        profile.NodeRequest(name='n%d' % i, uuid='uuid-%d' % i)
        for i in range(count)
    ]


class SwitchingReportTestCase(base.TestCase):
    def test_a_deployment_that_never_switched_prints_as_before(self):
        found = {'c1': profile.ConductorProfile('c1')}
        result = report_group.members(
            found, 'file:///x', 'g', rejected={}, now=T0
        )
        self.assertEqual('affinity', result['placement']['state'])
        self.assertEqual('affinity', result['members'][0]['vote'])
        text = render_group.render_members(result)
        self.assertNotIn('VOTE', text)
        self.assertNotIn('Placement', text)

    def test_members_show_the_votes_and_the_stock_state(self):
        found = {
            'c1': voting('c1', 'stock', [ORIGIN]),
            'c2': voting('c2', 'affinity', [ORIGIN]),
        }
        result = report_group.members(
            found, 'file:///x', 'g', rejected={}, now=T0
        )
        self.assertEqual(
            ['stock', 'affinity'], [m['vote'] for m in result['members']]
        )
        self.assertEqual('stock', result['placement']['state'])
        text = render_group.render_members(result)
        self.assertIn('VOTE', text)
        self.assertIn("Placement: Ironic's ring (stock)", text)
        self.assertIn(
            "voting for Ironic's ring (hash_ring_manager = stock): c1", text
        )

    def test_an_empty_or_unread_group_says_no_side(self):
        # Nobody votes: "Ironic's ring" would send the operator back to
        # Ironic's commands (adoption.rst) for a wrong group name.
        found = {'c1': voting('c1', 'stock', [ORIGIN])}
        for members, error in (({}, None), ({}, 'no answer'), (found, 'x')):
            result = report_group.members(
                members, 'file:///x', 'g', rejected={}, error=error, now=T0
            )
            self.assertIsNone(result['placement'], (members, error))
            text = render_group.render_members(result)
            self.assertNotIn('Placement', text)
            self.assertNotIn('VOTE', text)

    def test_a_due_switch_names_its_recorder(self):
        found = {
            'c2': voting('c2', 'affinity', [ORIGIN]),
            'c1': voting('c1', 'affinity', [ORIGIN]),
        }
        text = render_group.render_members(
            report_group.members(found, 'file:///x', 'g', rejected={}, now=T0)
        )
        self.assertIn('a switch to affinity is due, recorded by c1', text)

    def test_a_running_switch_with_its_end_and_nodes_to_move(self):
        history = [ORIGIN, adoption.Switch('affinity', T0, 600.0)]
        agreement = adoption.agree(
            {'c1': voting('c1', 'affinity', history).switching}, {'c9'}
        )
        found = report_group.switching(agreement, T0 + 300, nodes(1000))
        self.assertEqual('switching', found['state'])
        self.assertEqual((T0, T0 + 600), (found['since'], found['ends_at']))
        # About half are still to move, halfway through.
        self.assertTrue(400 < found['nodes_to_move'] < 600, found)
        text = render.render_switching(found)
        self.assertIn(
            'switching to affinity since 2027-01-15T08:00:00Z, until '
            '2027-01-15T08:10:00Z; %d node(s) still to move'
            % found['nodes_to_move'],
            text,
        )
        # Conductors that may place by Ironic's ring, by name.
        self.assertIn("they place by Ironic's ring): c9", text)
        done = report_group.switching(agreement, T0 + 601, nodes(1000))
        self.assertEqual(
            ('affinity', 0), (done['state'], done['nodes_to_move'])
        )
        self.assertEqual('', render.render_switching(done))
        # A deployment without nodes: 0 to move, not no figure; none
        # without the nodes (explain).
        self.assertEqual(
            0, report_group.switching(agreement, T0, [])['nodes_to_move']
        )
        self.assertNotIn(
            'nodes_to_move', report_group.switching(agreement, T0)
        )

    def test_takeovers_pending_on_either_side(self):
        settled = adoption.agree({'c1': None}, ())
        found = report_group.switching(settled, T0)
        self.assertNotIn('takeovers_pending', found)
        # Every node settled on affinity, none awaiting: as before.
        done = report_group.switching(settled, T0, takeovers_pending=0)
        self.assertEqual(0, done['takeovers_pending'])
        self.assertEqual('', render.render_switching(done))
        waiting = report_group.switching(settled, T0, takeovers_pending=3)
        self.assertEqual(
            'Placement: affinity; 3 takeover(s) pending',
            render.render_switching(waiting),
        )
        history = [ORIGIN, adoption.Switch('affinity', T0, 600.0)]
        switching = adoption.agree(
            {'c1': voting('c1', 'affinity', history).switching}, ()
        )
        found = report_group.switching(switching, T0 + 300, nodes(10), 7)
        self.assertEqual(7, found['takeovers_pending'])
        self.assertIn(
            'node(s) still to move; 7 takeover(s) pending',
            render.render_switching(found),
        )
        stock = adoption.agree(
            {'c1': voting('c1', 'stock', [ORIGIN]).switching}, ()
        )
        self.assertEqual(
            "Placement: Ironic's ring (stock); 2 takeover(s) pending",
            render.render_switching(
                report_group.switching(stock, T0, takeovers_pending=2)
            ).splitlines()[0],
        )
