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

"""Gradual rebalancing under capacity, with a fake clock.

The start and final placements expected come from capacity.assign over
profiles written out in each test; loads are counted here from where
each node is at each moment.
"""

import collections
import dataclasses
import math
import random

from hypothesis import given
from hypothesis import strategies as st

from ironic_affinity import capacity
from ironic_affinity import engine
from ironic_affinity import profile
from ironic_affinity import rollout
from ironic_affinity import rollout_capacity
from ironic_affinity.tests import base
from ironic_affinity.tests.unit import test_capacity
from ironic_affinity.tests.unit import test_rollout as rollouts

T0 = rollouts.T0
PERIOD = rollouts.PERIOD


def timeline(published, nodes):
    placer = rollout.PacedPlacer(engine.PlacementEngine(published))
    return rollout_capacity.build(placer, nodes)


def where(found, nodes, now):
    return {n.name: found.conductor(n.name, now) for n in nodes}


def counted(placed):
    return collections.Counter(c for c in placed.values() if c is not None)


class PacedCapacityTestCase(base.TestCase):
    """c1 changes from preferring rack1 to preferring rack2, but holds
    100 nodes: of the 150 nodes of either rack that want it, 50 are
    placed on c2 and c3 (150 each) instead."""

    def setUp(self):
        super().setUp()
        self.before = rollouts.conductor(
            'c1', soft_affinity_tags='rack1:5', max_nodes=100
        )
        self.after = rollouts.conductor(
            'c1', soft_affinity_tags='rack2:5', max_nodes=100
        )
        self.others = [
            rollouts.conductor(name, soft_affinity_tags='rack3', max_nodes=150)
            for name in ('c2', 'c3')
        ]
        self.published = [
            rollouts.changed(self.after, self.before)
        ] + self.others
        self.nodes = rollouts.nodes(150, 'rack1') + rollouts.nodes(
            150, 'rack2'
        )
        self.old = dict(
            capacity.assign(
                engine.PlacementEngine([self.before] + self.others),
                self.nodes,
            ).conductors
        )
        self.new = dict(
            capacity.assign(
                engine.PlacementEngine([self.after] + self.others),
                self.nodes,
            ).conductors
        )
        self.timeline = timeline(self.published, self.nodes)
        self.limits = {'c1': 100, 'c2': 150, 'c3': 150}

    def test_capacity_binds_in_the_setup(self):
        self.assertEqual(100, counted(self.old)['c1'])
        self.assertEqual(100, counted(self.new)['c1'])
        moving = {n for n in self.old if self.old[n] != self.new[n]}
        self.assertGreater(len(moving), 150)

    def test_nothing_moves_at_the_change_everything_by_its_end(self):
        self.assertEqual(self.old, where(self.timeline, self.nodes, T0))
        self.assertEqual(
            self.new, where(self.timeline, self.nodes, T0 + PERIOD)
        )

    def test_each_node_moves_once_from_where_it_was_to_where_it_ends(self):
        moving = {n for n in self.old if self.old[n] != self.new[n]}
        self.assertEqual(moving, set(self.timeline.moves))
        previous = self.old
        seen = collections.Counter()
        for tenth in range(1, 10 * int(PERIOD) + 1):
            now = where(self.timeline, self.nodes, T0 + tenth / 10)
            for name in now:
                if now[name] != previous[name]:
                    seen[name] += 1
                    self.assertEqual(self.old[name], previous[name])
                    self.assertEqual(self.new[name], now[name])
            previous = now
        self.assertEqual({1}, set(seen.values()))
        self.assertEqual(moving, set(seen))

    def test_capacity_holds_at_every_move(self):
        for at in sorted({m.at for m in self.timeline.moves.values()}):
            loads = counted(where(self.timeline, self.nodes, at))
            for name, limit in self.limits.items():
                self.assertLessEqual(loads[name], limit, (name, at - T0))
            self.assertEqual(
                dict(loads),
                {k: v for k, v in self.timeline.loads(at).items() if v},
            )

    def test_moves_are_spread_over_the_period(self):
        moves = sorted(m.at - T0 for m in self.timeline.moves.values())
        self.assertTrue(all(0 <= at < PERIOD for at in moves))
        per_window = [
            sum(1 for at in moves if w * 10 <= at < (w + 1) * 10)
            for w in range(6)
        ]
        # A sixth a window, plus the binomial spread and the nodes that
        # leave c1 early to make room for those that come.
        for count in per_window:
            self.assertLess(count, len(moves) / 6 + 25, per_window)

    def test_a_node_moves_at_its_turn_or_earlier_for_room(self):
        change = self.published[0].changes[0]
        for name, move in self.timeline.moves.items():
            node = next(n for n in self.nodes if n.name == name)
            turn = T0 + rollouts.share(node.hash_key, 'c1', change) * PERIOD
            self.assertLessEqual(move.at, turn + 1e-6)
            if move.target == 'c1':
                # Nodes that come to c1 are never hurried.
                self.assertAlmostEqual(turn, move.at, places=6)

    def test_two_processes_agree(self):
        shuffled = list(self.published)
        random.Random(3).shuffle(shuffled)
        again = timeline(shuffled, list(reversed(self.nodes)))
        self.assertEqual(self.timeline.moves, again.moves)

    def test_without_a_full_conductor_it_is_the_rollout(self):
        roomy = [dataclasses.replace(c, max_nodes=300) for c in self.published]
        found = timeline(roomy, self.nodes)
        paced = rollout.PacedPlacer(engine.PlacementEngine(roomy))
        for at in range(0, int(PERIOD) + 1, 5):
            self.assertEqual(
                rollouts.placed(paced, self.nodes, T0 + at + 0.01),
                where(found, self.nodes, T0 + at + 0.01),
            )

    def test_a_node_over_capacity_moves_at_once(self):
        # c2's capacity drops to 60 as c1's change begins: a capacity
        # alone is no change, and is not paced.
        lowered = [
            self.published[0],
            dataclasses.replace(self.others[0], max_nodes=60),
            self.others[1],
        ]
        self.assertGreater(counted(self.old)['c2'], 60)
        found = timeline(lowered, self.nodes)
        for at in (T0, T0 + 30, T0 + PERIOD):
            self.assertLessEqual(
                counted(where(found, self.nodes, at))['c2'], 60
            )

    def test_a_forced_move_goes_at_once_where_it_ends(self):
        refusing = dataclasses.replace(
            rollouts.conductor(
                'c1',
                soft_affinity_tags='rack2:5',
                hard_anti_affinity_tags='rack1',
                max_nodes=100,
            ),
            changes=self.published[0].changes,
        )
        found = timeline([refusing] + self.others, self.nodes)
        at_change = where(found, self.nodes, T0)
        for node in self.nodes:
            if node.name.startswith('n-rack1'):
                self.assertNotEqual('c1', at_change[node.name])
                self.assertEqual(
                    found.final.conductors[node.name], at_change[node.name]
                )
        self.assertTrue(any(m.at == -math.inf for m in found.moves.values()))

    def test_a_join_under_capacity_is_paced(self):
        joining = rollouts.changed(
            rollouts.conductor(
                'c4', soft_affinity_tags='rack1:9', max_nodes=80
            ),
            None,
        )
        published = [self.before, joining] + self.others
        found = timeline(published, self.nodes)
        self.assertEqual(self.old, where(found, self.nodes, T0))
        halfway = counted(where(found, self.nodes, T0 + PERIOD / 2))['c4']
        self.assertLess(abs(halfway - 40), 20)
        self.assertEqual(
            80, counted(where(found, self.nodes, T0 + PERIOD))['c4']
        )

    def test_a_conductor_that_dies_during_the_rollout(self):
        # c2 dies a third of the way: the timeline is computed again over
        # c1 and c3 (which holds 200, so that 300 nodes fit). Nobody is
        # left on c2, and capacity still holds.
        survivors = timeline(
            [
                self.published[0],
                dataclasses.replace(self.others[1], max_nodes=200),
            ],
            self.nodes,
        )
        for at in (T0 + 20, T0 + 40, T0 + PERIOD):
            placed = where(survivors, self.nodes, at)
            self.assertNotIn('c2', placed.values())
            loads = counted(placed)
            self.assertLessEqual(loads['c1'], 100)
            self.assertLessEqual(loads['c3'], 200)
            self.assertEqual(300, sum(loads.values()))

    def test_a_second_change_of_the_conductor(self):
        # At T0 + 20 c1 changes again, to prefer rack1 once more. The
        # nodes still to move take the earlier of their two turns; a
        # node that followed the first change and that the second sends
        # elsewhere moves at once; no node is anywhere but where the
        # first change had it or where it ends.
        second = dataclasses.replace(
            self.before,
            changes=(
                profile.ProfileChange(self.before, T0, PERIOD),
                profile.ProfileChange(self.after, T0 + 20, PERIOD),
            ),
        )
        found = timeline([second] + self.others, self.nodes)
        final = dict(found.final.conductors)
        self.assertEqual(self.old, final)
        for at in (T0 + 20, T0 + 40, T0 + 80):
            for node in self.nodes:
                self.assertIn(
                    found.conductor(node.name, at),
                    (self.timeline.conductor(node.name, at), final[node.name]),
                )
        self.assertEqual(final, where(found, self.nodes, T0 + 20 + PERIOD))

    def test_pending_moves(self):
        for node in self.nodes[:60]:
            pending = self.timeline.pending(node.name, T0 + 20)
            move = self.timeline.moves.get(node.name)
            if move is None or move.at <= T0 + 20:
                self.assertEqual([], pending)
            else:
                self.assertEqual([move], pending)
                self.assertEqual(
                    move.source,
                    self.timeline.conductor(node.name, move.at - 1e-3),
                )


OFFSETS = st.floats(-60, 200, allow_nan=False)


class PropertiesTestCase(base.TestCase):
    @rollouts.props.COSTLY_SETTINGS
    @given(
        rollouts.rollouts(),
        st.lists(test_capacity.CAPACITIES, min_size=6, max_size=6),
    )
    def test_rollouts_under_capacity(self, case, limits):
        published, requests = case
        published = [
            dataclasses.replace(c, max_nodes=limit)
            for c, limit in zip(published, limits, strict=False)
        ]
        found = timeline(published, requests)
        final = engine.PlacementEngine(c.without_changes() for c in published)
        self.assertEqual(
            dict(capacity.assign(final, requests).conductors),
            dict(found.final.conductors),
        )
        shuffled = list(published)
        random.Random(len(requests)).shuffle(shuffled)
        self.assertEqual(
            found.moves, timeline(shuffled, list(reversed(requests))).moves
        )
        room = {
            c.name: max(c.max_nodes, found.final.loads[c.name])
            for c in final.conductors
            if c.max_nodes
        }
        moments = sorted({m.at for m in found.moves.values()} | {T0 - 100})
        for at in moments:
            placed = where(found, requests, at)
            loads = counted(placed)
            for name, limit in room.items():
                self.assertLessEqual(loads[name], limit, name)
            for node in requests:
                here = placed[node.name]
                # Where it was or where it ends, and never where the
                # profiles of now forbid.
                self.assertIn(
                    here,
                    (
                        found.start.conductors[node.name],
                        found.final.conductors[node.name],
                    ),
                )
                if here is not None:
                    self.assertIn(
                        here,
                        {v.conductor for v in final.evaluate(node).eligible},
                    )
        self.assertEqual(
            dict(found.final.conductors), where(found, requests, T0 + 200)
        )
