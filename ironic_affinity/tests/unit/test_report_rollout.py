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

"""What plan, explain and members say while a change rolls out."""

import dataclasses

from ironic_affinity import engine
from ironic_affinity import profile
from ironic_affinity import report
from ironic_affinity import report_group
from ironic_affinity import rollout
from ironic_affinity.cmd import render
from ironic_affinity.cmd import render_group
from ironic_affinity.tests import base

T0 = 1_800_000_000.0  # 2027-01-15T08:00:00Z


def conductor(name, **lists):
    return profile.ConductorProfile.build(name, **lists)


class RolloutReportTestCase(base.TestCase):
    """c1 changes to prefer rack2 over 60 s from T0."""

    def setUp(self):
        super().setUp()
        before = conductor('c1')
        self.after = conductor('c1', soft_affinity_tags='rack2:5')
        self.conductors = [
            dataclasses.replace(
                self.after,
                changes=(profile.ProfileChange(before, T0, 60.0),),
            ),
            conductor('c2'),
        ]
        self.nodes = [
            profile.NodeRequest.build('n%d' % i, 'rack2', uuid='u%d' % i)
            for i in range(30)
        ]
        self.paced = rollout.PacedPlacer(
            engine.PlacementEngine(self.conductors)
        )

    def test_moment(self):
        self.assertEqual('2027-01-15T08:00:00Z', render.moment(T0))
        self.assertEqual('2027-01-15T08:00:30Z', render.moment(T0 + 30.4))

    def test_plan_shows_where_nodes_are_and_their_moves(self):
        now = T0 + 20
        result = report.plan(self.conductors, self.nodes, now=now)
        placements = {p['node']: p for p in result['placements']}
        waiting = [p for p in placements.values() if 'pending' in p]
        for node in self.nodes:
            row = placements[node.name]
            self.assertEqual(self.paced.conductor(node, now), row['conductor'])
            if row['conductor'] == 'c2':
                (move,) = row['pending']
                self.assertEqual('c2', move['from'])
                self.assertEqual('c1', move['to'])
                self.assertTrue(now <= move['at'] < T0 + 60)
                self.assertEqual(0, row['score'])
            else:
                self.assertNotIn('pending', row)
                self.assertEqual(5, row['score'])
        self.assertEqual(
            {'ends_at': T0 + 60, 'nodes_to_move': len(waiting)},
            result['rollout'],
        )
        self.assertEqual(
            {'c1': 30 - len(waiting), 'c2': len(waiting)}, result['loads']
        )
        self.assertTrue(0 < len(waiting) < 30)
        text = render.render_plan(result)
        self.assertIn('NOTE', text)
        self.assertIn(
            'Rollout under way until 2027-01-15T08:01:00Z: %d node(s) '
            'still to move' % len(waiting),
            text,
        )
        self.assertIn('Pending moves\nNODE', text)
        first = min(waiting, key=lambda p: p['pending'][0]['at'])
        self.assertIn(
            'moves to c1 at %s' % render.moment(first['pending'][0]['at']),
            text,
        )

    def test_plan_without_a_moment_or_after_the_end(self):
        final = engine.PlacementEngine(
            c.without_changes() for c in self.conductors
        )
        for now in (None, T0 + 60):
            result = report.plan(self.conductors, self.nodes, now=now)
            self.assertNotIn('rollout', result)
            self.assertEqual(
                [final.place(n).conductor for n in self.nodes],
                [p['conductor'] for p in result['placements']],
            )
            self.assertNotIn('NOTE', render.render_plan(result))

    def test_under_capacity_nodes_move_at_their_turn(self):
        # c1 holds 20: the 20 rack2 nodes it takes at the end come at
        # their turns; every report says where they are now.
        limited = [
            dataclasses.replace(c, max_nodes=20) for c in self.conductors
        ]
        now = T0 + 20
        result = report.plan(limited, self.nodes, now=now)
        placements = {p['node']: p for p in result['placements']}
        waiting = [p for p in placements.values() if 'pending' in p]
        self.assertEqual(len(waiting), result['rollout']['nodes_to_move'])
        self.assertEqual(T0 + 60, result['rollout']['ends_at'])
        on_c1 = sum(1 for p in placements.values() if p['conductor'] == 'c1')
        self.assertEqual({'c1': on_c1, 'c2': 30 - on_c1}, result['loads'])
        self.assertLess(on_c1, 20)
        self.assertEqual(20, on_c1 + len(waiting))
        for row in waiting:
            (move,) = row['pending']
            self.assertEqual(
                ('c2', 'c1', 'c2'),
                (move['from'], move['to'], row['conductor']),
            )
            self.assertTrue(now < move['at'] < T0 + 60)
            explained = report.explain(
                limited,
                next(n for n in self.nodes if n.name == row['node']),
                nodes=self.nodes,
                now=now,
            )
            self.assertEqual('c2', explained['conductor'])
            self.assertEqual(row['pending'], explained['pending'])
            verdicts = {
                r['conductor']: r['verdict'] for r in explained['conductors']
            }
            self.assertEqual({'c1': 'next', 'c2': 'chosen'}, verdicts)
            self.assertEqual(
                {'c1': on_c1, 'c2': 30 - on_c1},
                {r['conductor']: r['load'] for r in explained['conductors']},
            )
        after = report.plan(limited, self.nodes, now=T0 + 60)
        self.assertNotIn('rollout', after)
        self.assertEqual({'c1': 20, 'c2': 10}, after['loads'])

    def test_explain_a_node_waiting_to_move(self):
        now = T0 + 1
        (node,) = [
            n for n in self.nodes if self.paced.conductor(n, now) == 'c2'
        ][:1]
        result = report.explain(self.conductors, node, now=now)
        self.assertEqual('c2', result['conductor'])
        (move,) = result['pending']
        self.assertEqual(('c2', 'c1'), (move['from'], move['to']))
        self.assertEqual(T0 + 60, result['rollout_ends_at'])
        self.assertEqual(['c2', 'c1'], result['fallback'])
        verdicts = {r['conductor']: r['verdict'] for r in result['conductors']}
        self.assertEqual({'c1': 'next', 'c2': 'chosen'}, verdicts)
        text = render.render_explain(result)
        self.assertIn(
            'Placed on: c2 (moves to c1 at %s; rollout under way until '
            '2027-01-15T08:01:00Z)' % render.moment(move['at']),
            text,
        )

    def test_explain_a_node_that_moved(self):
        now = T0 + 59
        (node,) = [
            n for n in self.nodes if self.paced.conductor(n, now) == 'c1'
        ][:1]
        result = report.explain(self.conductors, node, now=now)
        self.assertEqual('c1', result['conductor'])
        self.assertEqual([], result['pending'])
        self.assertIn(
            'Placed on: c1 (where it stays: rollout under way until',
            render.render_explain(result),
        )

    def test_members_show_a_rollout_with_its_end(self):
        joined = dataclasses.replace(
            conductor('c3'),
            changes=(profile.ProfileChange(None, T0 + 10, 120.0),),
        )
        found = {'c1': self.conductors[0], 'c2': conductor('c2'), 'c3': joined}
        result = report_group.members(
            found, 'file:///x', 'g', rejected={}, now=T0
        )
        by_name = {m['name']: m for m in result['members']}
        self.assertEqual(
            [
                {
                    'kind': 'changed',
                    'at': T0,
                    'period': 60.0,
                    'ends_at': T0 + 60,
                }
            ],
            by_name['c1']['changes'],
        )
        self.assertEqual(T0 + 60, by_name['c1']['rollout_ends_at'])
        self.assertEqual('joined', by_name['c3']['changes'][0]['kind'])
        self.assertIsNone(by_name['c2']['rollout_ends_at'])
        text = render_group.render_members(result)
        self.assertIn('ROLLOUT UNTIL', text)
        self.assertIn('2027-01-15T08:01:00Z (changed)', text)
        self.assertIn('2027-01-15T08:02:10Z (joined)', text)
        # Once c1's change has ended it is no longer shown.
        later = report_group.members(
            found, 'file:///x', 'g', rejected={}, now=T0 + 61
        )
        by_name = {m['name']: m for m in later['members']}
        self.assertEqual([], by_name['c1']['changes'])
        self.assertIsNone(by_name['c1']['rollout_ends_at'])

    def test_members_without_rollout_print_as_before(self):
        found = {'c2': conductor('c2')}
        text = render_group.render_members(
            report_group.members(found, 'file:///x', 'g', rejected={}, now=T0)
        )
        self.assertNotIn('ROLLOUT', text)
