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

"""Gradual rebalancing, with a fake clock: each test names its moments.

Expected placements come from plain engines over the profiles a node
should see (written out in each test), not from the rollout module.
"""

import dataclasses
import random

from hypothesis import given
from hypothesis import strategies as st

from ironic_affinity import engine
from ironic_affinity import profile
from ironic_affinity import rendezvous
from ironic_affinity import rollout
from ironic_affinity import schedule
from ironic_affinity.membership import capabilities
from ironic_affinity.tests import base
from ironic_affinity.tests.unit import test_properties as props

T0 = 1_800_000_000.0
PERIOD = 60.0


def conductor(name, **lists):
    return profile.ConductorProfile.build(name, **lists)


def nodes(count, rack):
    return [
        profile.NodeRequest.build(
            'n-%s-%d' % (rack, i), rack, uuid='%s-%08d' % (rack, i)
        )
        for i in range(count)
    ]


def share(node_key, conductor, change):
    """When in the change's period the node follows it, 0 to 1: the rule
    (schedule.py) stated here from rendezvous hashing, with the change's
    key as every process computes it."""
    key = rendezvous.hash64(
        b'%s\0%s' % (conductor.encode(), repr(float(change.at)).encode())
    )
    return rendezvous.weight(rendezvous.hash64(node_key), key) / 2.0**64


def elapsed(change, now):
    """The fraction of the change's period gone by ``now``, 0 to 1."""
    return min(1.0, max(0.0, (now - change.at) / change.period))


def changed(now, before, at=T0, period=PERIOD):
    """``now`` with one change from ``before``."""
    return dataclasses.replace(
        now, changes=(profile.ProfileChange(before, at, period),)
    )


def placed(placer, requests, now):
    return {n.name: placer.conductor(n, now) for n in requests}


def plain(conductors, requests):
    placer = engine.PlacementEngine(c.without_changes() for c in conductors)
    return {n.name: placer.place(n).conductor for n in requests}


class StageTestCase(base.TestCase):
    def test_shares_are_stable_and_spread(self):
        change = profile.ProfileChange(None, T0, PERIOD)
        shares = [share(b'node-%d' % i, 'c1', change) for i in range(4000)]
        self.assertEqual(shares[7], share(b'node-7', 'c1', change))
        self.assertTrue(all(0 <= s < 1 for s in shares))
        # Each tenth of [0, 1) holds about a tenth (binomial sd 19).
        for tenth in range(10):
            inside = sum(
                1 for s in shares if tenth / 10 <= s < (tenth + 1) / 10
            )
            self.assertLess(abs(inside - 400), 80, tenth)
        # Another change of the same conductor draws another order.
        later = profile.ProfileChange(None, T0 + 1, PERIOD)
        self.assertNotEqual(
            shares[:50],
            [share(b'node-%d' % i, 'c1', later) for i in range(50)],
        )

    def test_stage_follows_the_newest_change_passed(self):
        p0 = conductor('c1', soft_affinity_tags='a')
        p1 = conductor('c1', soft_affinity_tags='b')
        p2 = conductor('c1', soft_affinity_tags='c')
        first = profile.ProfileChange(p0, T0, PERIOD)
        second = profile.ProfileChange(p1, T0 + 30, PERIOD)
        now = dataclasses.replace(p2, changes=(first, second))
        key = b'some-node'
        s1 = share(key, 'c1', first)
        s2 = share(key, 'c1', second)
        for moment in (T0 - 1, T0, T0 + 20, T0 + 45, T0 + 80, T0 + 95):
            if s2 < elapsed(second, moment):
                expected = 2
            elif s1 < elapsed(first, moment):
                expected = 1
            else:
                expected = 0
            self.assertEqual(expected, rollout.stage(now, key, moment))
        self.assertEqual(2, rollout.stage(now, key, T0 + 90))
        self.assertEqual(p0, rollout.profile_at(now, 0))
        self.assertEqual(p1, rollout.profile_at(now, 1))
        self.assertEqual(p2, rollout.profile_at(now, 2))


class ComposeTestCase(base.TestCase):
    def setUp(self):
        super().setUp()
        self.old = conductor('c1', soft_affinity_tags='rack1')
        self.new = conductor('c1', soft_affinity_tags='rack2')

    def test_no_period_publishes_the_profile_alone(self):
        pending = changed(self.old, None)
        self.assertEqual(
            self.new, rollout.compose(pending, self.new, T0 + 1, 0)
        )
        self.assertEqual(self.new, rollout.compose(None, self.new, T0, 0))

    def test_a_join_is_a_change_from_nothing(self):
        joined = rollout.compose(None, self.new, T0, PERIOD)
        self.assertEqual(
            (profile.ProfileChange(None, T0, PERIOD),), joined.changes
        )
        self.assertEqual(self.new, joined.without_changes())

    def test_a_change_keeps_what_was_before(self):
        found = rollout.compose(self.old, self.new, T0, PERIOD)
        self.assertEqual(
            (profile.ProfileChange(self.old, T0, PERIOD),), found.changes
        )

    def test_capacity_alone_is_no_change(self):
        bigger = dataclasses.replace(self.old, max_nodes=10)
        self.assertEqual(
            (), rollout.compose(self.old, bigger, T0, PERIOD).changes
        )

    def test_a_finished_change_is_no_longer_published(self):
        found = rollout.compose(self.old, self.new, T0, PERIOD)
        self.assertEqual(
            found, rollout.compose(found, self.new, T0 + PERIOD - 1, PERIOD)
        )
        self.assertEqual(
            self.new, rollout.compose(found, self.new, T0 + PERIOD, PERIOD)
        )

    def test_a_second_change_is_kept_after_the_first(self):
        third = conductor('c1', soft_affinity_tags='rack3')
        first = rollout.compose(self.old, self.new, T0, PERIOD)
        second = rollout.compose(first, third, T0 + 30, 120)
        self.assertEqual(
            (
                profile.ProfileChange(self.old, T0, PERIOD),
                profile.ProfileChange(self.new, T0 + 30, 120),
            ),
            second.changes,
        )
        # The first ends: what came before it no longer matters.
        self.assertEqual(
            (profile.ProfileChange(self.new, T0 + 30, 120),),
            rollout.compose(second, third, T0 + 61, PERIOD).changes,
        )

    def test_at_most_max_changes(self):
        published = None
        for step in range(schedule.MAX_KEPT + 3):
            wanted = conductor('c1', soft_affinity_tags='rack%d' % step)
            published = rollout.compose(published, wanted, T0 + step, 600)
        self.assertEqual(schedule.MAX_KEPT, len(published.changes))
        # The newest are kept.
        self.assertEqual(T0 + schedule.MAX_KEPT + 2, published.changes[-1].at)

    def test_unfinished(self):
        a = profile.ProfileChange(None, T0, 10)
        b = profile.ProfileChange(self.old, T0 + 5, 100)
        c = profile.ProfileChange(self.new, T0 + 6, 2)
        self.assertEqual((a, b, c), rollout.unfinished((a, b, c), T0 + 7))
        self.assertEqual((), rollout.unfinished((a, b, c), T0 + 8))
        self.assertEqual((b,), rollout.unfinished((a, b), T0 + 10))


class PacedPlacerTestCase(base.TestCase):
    """Three conductors; conductor c1 changes from preferring rack1 to
    preferring rack2, so rack2 nodes move onto it and rack1 nodes off."""

    def setUp(self):
        super().setUp()
        self.before = conductor('c1', soft_affinity_tags='rack1:5')
        self.after = conductor('c1', soft_affinity_tags='rack2:5')
        self.others = [
            conductor('c2', soft_affinity_tags='rack3'),
            conductor('c3', soft_affinity_tags='rack3'),
        ]
        self.nodes = nodes(150, 'rack1') + nodes(150, 'rack2')
        self.old = plain([self.before] + self.others, self.nodes)
        self.new = plain([self.after] + self.others, self.nodes)
        self.moving = {n for n in self.old if self.old[n] != self.new[n]}
        self.paced = rollout.PacedPlacer(
            engine.PlacementEngine(
                [changed(self.after, self.before)] + self.others
            )
        )

    def test_the_setup_moves_nodes(self):
        # rack1 nodes leave c1 but for the third that the three-way tie
        # gives it; a third of rack2 nodes were on c1 already.
        self.assertLess(abs(len(self.moving) - 200), 30)

    def test_nothing_moves_at_the_change_everything_at_its_end(self):
        self.assertEqual(self.old, placed(self.paced, self.nodes, T0))
        self.assertTrue(self.paced.active(T0 + PERIOD - 0.001))
        self.assertFalse(self.paced.active(T0 + PERIOD))
        self.assertEqual(self.new, placed(self.paced, self.nodes, T0 + PERIOD))

    def test_moves_are_spread_over_the_period(self):
        previous = self.old
        per_window = []
        for window in range(1, 7):
            now = placed(self.paced, self.nodes, T0 + 10 * window)
            moved = {n for n in now if now[n] != previous[n]}
            # Every move is from the old conductor to the new one, once.
            for name in moved:
                self.assertEqual(self.old[name], previous[name])
                self.assertEqual(self.new[name], now[name])
            per_window.append(len(moved))
            previous = now
        self.assertEqual(len(self.moving), sum(per_window))
        # A sixth a window on average; binomial sd about 5.
        for count in per_window:
            self.assertLess(abs(count - len(self.moving) / 6), 20, per_window)

    def test_a_node_moves_when_its_share_is_passed(self):
        change = self.paced.rolling[0].changes[0]
        for node in self.nodes[:40]:
            moment = T0 + share(node.hash_key, 'c1', change) * PERIOD
            self.assertEqual(
                self.old[node.name], self.paced.conductor(node, moment - 0.01)
            )
            self.assertEqual(
                self.new[node.name], self.paced.conductor(node, moment + 0.01)
            )

    def test_pending_moves(self):
        for node in self.nodes[:60]:
            moves = self.paced.pending(node, T0 + 20)
            if self.paced.conductor(node, T0 + 20) == self.new[node.name]:
                self.assertEqual([], moves)
                continue
            (move,) = moves
            self.assertEqual(self.old[node.name], move.source)
            self.assertEqual(self.new[node.name], move.target)
            self.assertTrue(T0 + 20 <= move.at < T0 + PERIOD)
            self.assertEqual(
                move.source, self.paced.conductor(node, move.at - 0.01)
            )
            self.assertEqual(
                move.target, self.paced.conductor(node, move.at + 0.01)
            )

    def test_a_conductor_that_dies_during_the_rollout(self):
        # c2 dies a third of the way: its nodes go at once to where the
        # profiles they see place them; the rollout of c1 goes on.
        moment = T0 + 20
        survivors = rollout.PacedPlacer(
            engine.PlacementEngine(
                [changed(self.after, self.before), self.others[1]]
            )
        )
        found = placed(survivors, self.nodes, moment)
        self.assertNotIn('c2', found.values())
        for node in self.nodes:
            seen = (
                self.after
                if rollout.stage(survivors.rolling[0], node.hash_key, moment)
                else self.before
            )
            self.assertEqual(
                plain([seen, self.others[1]], [node])[node.name],
                found[node.name],
            )

    def test_the_changing_conductor_dies(self):
        # Its changes go with it: nothing is left to pace.
        gone = engine.PlacementEngine(self.others)
        self.assertEqual([], [c for c in gone.conductors if c.changes])
        self.assertEqual(
            plain(self.others, self.nodes),
            {n.name: gone.place(n).conductor for n in self.nodes},
        )

    def test_hard_exclusion_is_not_paced(self):
        # c1 now refuses rack1 nodes outright: they leave it at once,
        # straight to where they end up; rack2 nodes still come slowly.
        refusing = conductor(
            'c1',
            soft_affinity_tags='rack2:5',
            hard_anti_affinity_tags='rack1',
        )
        paced = rollout.PacedPlacer(
            engine.PlacementEngine(
                [changed(refusing, self.before)] + self.others
            )
        )
        final = plain([refusing] + self.others, self.nodes)
        at_change = placed(paced, self.nodes, T0)
        for node in self.nodes:
            if node.name.startswith('n-rack1'):
                self.assertEqual(final[node.name], at_change[node.name])
                self.assertNotEqual('c1', at_change[node.name])
            else:
                self.assertEqual(self.old[node.name], at_change[node.name])
        (node,) = [n for n in self.nodes if n.name == 'n-rack1-0']
        self.assertEqual((final[node.name], True), paced.explain(node, T0))

    def test_a_join_is_paced(self):
        joining = changed(conductor('c4', soft_affinity_tags='rack1:9'), None)
        paced = rollout.PacedPlacer(
            engine.PlacementEngine([self.before, joining] + self.others)
        )
        with_c4 = plain([self.before, joining] + self.others, self.nodes)
        self.assertEqual(self.old, placed(paced, self.nodes, T0))
        halfway = placed(paced, self.nodes, T0 + 30)
        on_c4 = [n for n in halfway if halfway[n] == 'c4']
        self.assertLess(abs(len(on_c4) - 75), 30)
        self.assertEqual(with_c4, placed(paced, self.nodes, T0 + PERIOD))

    def test_a_node_only_the_joining_conductor_takes_goes_at_once(self):
        joining = changed(conductor('c4', conductor_group='g9'), None)
        paced = rollout.PacedPlacer(
            engine.PlacementEngine([joining] + self.others)
        )
        (lonely,) = nodes(1, 'rack9')
        lonely = dataclasses.replace(lonely, conductor_group='g9')
        self.assertEqual(('c4', True), paced.explain(lonely, T0))

    def test_a_node_created_after_the_change_began_never_waits(self):
        # Nodes that exist since the change began, and the same nodes
        # had they been created 5 s after it: those go where the change
        # puts them at once, and have nothing pending.
        created = [
            dataclasses.replace(n, created_at=T0 + 5) for n in self.nodes
        ]
        for now in (T0 + 5, T0 + 20, T0 + 40):
            self.assertEqual(
                {n.name: self.new[n.name] for n in created},
                placed(self.paced, created, now),
            )
            for node in created:
                self.assertEqual((), self.paced.stages(node, now))
                self.assertEqual([], self.paced.pending(node, now))
        # Created before the change: paced as any other node.
        older = [dataclasses.replace(n, created_at=T0 - 1) for n in self.nodes]
        self.assertEqual(self.old, placed(self.paced, older, T0))
        self.assertEqual(
            placed(self.paced, self.nodes, T0 + 20),
            placed(self.paced, older, T0 + 20),
        )

    def test_a_node_created_between_two_changes_waits_for_the_second(self):
        third = conductor('c1', soft_affinity_tags='rack3:5')
        twice = dataclasses.replace(
            third,
            changes=(
                profile.ProfileChange(self.before, T0, PERIOD),
                profile.ProfileChange(self.after, T0 + 30, PERIOD),
            ),
        )
        paced = rollout.PacedPlacer(
            engine.PlacementEngine([twice] + self.others)
        )
        created = [
            dataclasses.replace(n, created_at=T0 + 10) for n in self.nodes
        ]
        # Before the second change: where the first one puts them.
        self.assertEqual(
            {n.name: self.new[n.name] for n in created},
            placed(paced, created, T0 + 29),
        )
        # During it, some follow it at their moments, and wait till then.
        halfway = placed(paced, created, T0 + 60)
        final = plain([third] + self.others, self.nodes)
        waiting = [n for n in created if halfway[n.name] != final[n.name]]
        self.assertTrue(waiting)
        for node in waiting:
            self.assertEqual(self.new[node.name], halfway[node.name])
            (move,) = paced.pending(node, T0 + 60)
            self.assertEqual(final[node.name], move.target)

    def test_fallback_order_starts_with_the_paced_conductor(self):
        for node in self.nodes[:30]:
            order = self.paced.fallback_order(node, T0)
            self.assertEqual(self.old[node.name], order[0])
            self.assertEqual(['c1', 'c2', 'c3'], sorted(order))


class OverlappingTestCase(base.TestCase):
    """Two conductors change at different moments, and one of them twice;
    a second process starts in the middle. Every answer is the plain
    placement over the profiles each node should see."""

    def setUp(self):
        super().setUp()
        self.c1 = [
            conductor('c1', soft_affinity_tags='rack1:3'),
            conductor('c1', soft_affinity_tags='rack2:3'),
            conductor('c1', soft_affinity_tags='rack3:3'),
        ]
        self.c2 = [
            conductor('c2', soft_affinity_tags='rack2:2'),
            conductor('c2', soft_affinity_tags='rack1:4'),
        ]
        self.c3 = conductor('c3', soft_affinity_tags='rack4')
        # c1: rack1 -> rack2 at T0 (60 s), -> rack3 at T0+20 (90 s);
        # c2: rack2 -> rack1 at T0+10 (30 s).
        c1 = rollout.compose(self.c1[0], self.c1[1], T0, 60)
        c1 = rollout.compose(c1, self.c1[2], T0 + 20, 90)
        c2 = rollout.compose(self.c2[0], self.c2[1], T0 + 10, 30)
        self.published = [c1, c2, self.c3]
        self.nodes = (
            nodes(80, 'rack1') + nodes(80, 'rack2') + nodes(80, 'rack3')
        )

    def expected(self, node, now):
        c1, c2 = self.published[0], self.published[1]
        seen_c1 = self.c1[rollout.stage(c1, node.hash_key, now)]
        seen_c2 = self.c2[rollout.stage(c2, node.hash_key, now)]
        return plain([seen_c1, seen_c2, self.c3], [node])[node.name]

    def test_every_moment_matches_the_profiles_each_node_sees(self):
        paced = rollout.PacedPlacer(engine.PlacementEngine(self.published))
        seen_stages = set()
        for moment in range(-5, 120, 5):
            now = T0 + moment
            for node in self.nodes:
                self.assertEqual(
                    self.expected(node, now), paced.conductor(node, now)
                )
                seen_stages.add(paced.stages(node, now))
        # The test saw nodes at every stage of c1 and both of c2.
        self.assertGreater(len(seen_stages), 5)
        final = plain([self.c1[2], self.c2[1], self.c3], self.nodes)
        self.assertEqual(final, placed(paced, self.nodes, T0 + 110))

    def test_a_process_that_starts_late_agrees(self):
        # Another process decodes the same capabilities, listed in
        # another order, at T0+40: same answers as the first one's.
        first = rollout.PacedPlacer(engine.PlacementEngine(self.published))
        for moment in (0, 15, 40):
            placed(first, self.nodes, T0 + moment)
        decoded = [
            capabilities.decode(c.name, capabilities.encode(c))
            for c in reversed(self.published)
        ]
        self.assertEqual(self.published, decoded[::-1])
        late = rollout.PacedPlacer(engine.PlacementEngine(decoded))
        for moment in (40, 55, 70, 100):
            self.assertEqual(
                placed(first, self.nodes, T0 + moment),
                placed(late, self.nodes, T0 + moment),
            )

    def test_pending_moves_replay_the_rollout(self):
        paced = rollout.PacedPlacer(engine.PlacementEngine(self.published))
        for node in self.nodes[::7]:
            where = paced.conductor(node, T0 + 5)
            for move in paced.pending(node, T0 + 5):
                self.assertEqual(where, move.source)
                self.assertEqual(
                    move.source, paced.conductor(node, move.at - 0.01)
                )
                self.assertEqual(
                    move.target, paced.conductor(node, move.at + 0.01)
                )
                where = move.target
            self.assertEqual(paced.conductor(node, T0 + 200), where)


class EveryConductorTestCase(base.TestCase):
    def test_every_conductor_changing_at_once(self):
        # Configuration management reloads all 30 at the same second:
        # each node sees its own mix of old and new profiles, and is
        # placed as a plain engine over that mix places it.
        old = [
            conductor('c%02d' % i, soft_affinity_tags='rack%d' % (i % 7))
            for i in range(30)
        ]
        new = [
            conductor('c%02d' % i, soft_affinity_tags='rack%d' % (i % 5))
            for i in range(30)
        ]
        published = [
            rollout.compose(before, after, T0 + i * 0.001, PERIOD)
            for i, (before, after) in enumerate(zip(old, new, strict=True))
        ]
        paced = rollout.PacedPlacer(engine.PlacementEngine(published))
        requests = [
            profile.NodeRequest.build(
                'n%d' % i, 'rack%d' % (i % 7), uuid='u-%d' % i
            )
            for i in range(150)
        ]
        mixes = set()
        for moment in (T0, T0 + 20, T0 + 40, T0 + PERIOD):
            for node in requests:
                stages = [
                    rollout.stage(c, node.hash_key, moment) for c in published
                ]
                mixes.add(tuple(stages))
                seen = [new[i] if stages[i] else old[i] for i in range(30)]
                self.assertEqual(
                    plain(seen, [node])[node.name],
                    paced.conductor(node, moment),
                )
        self.assertGreater(len(mixes), 100)


OFFSETS = st.floats(-50, 50, allow_nan=False)
PERIODS = st.floats(1, 120, allow_nan=False)


@st.composite
def rollouts(draw):
    """Conductors now, some with a change from another profile or from
    nothing (a join), and nodes."""
    specs = draw(props.conductor_lists(min_size=1, max_size=6))
    published = []
    for spec in specs:
        now = spec.build()
        kind = draw(st.sampled_from(('none', 'none', 'change', 'join')))
        if kind == 'none':
            published.append(now)
            continue
        before = None
        if kind == 'change':
            before = draw(props.conductor_specs(spec.name)).build()
        published.append(
            changed(now, before, T0 + draw(OFFSETS), draw(PERIODS))
        )
    requests = [n.build() for n in draw(props.node_lists(max_size=12))]
    return published, requests


class PropertiesTestCase(base.TestCase):
    @props.COSTLY_SETTINGS
    @given(rollouts(), st.floats(-60, 200, allow_nan=False))
    def test_paced_answers(self, case, offset):
        published, requests = case
        now = T0 + offset
        paced = rollout.PacedPlacer(engine.PlacementEngine(published))
        final = engine.PlacementEngine(c.without_changes() for c in published)
        shuffled = list(published)
        random.Random(offset).shuffle(shuffled)
        again = rollout.PacedPlacer(engine.PlacementEngine(shuffled))
        for node in requests:
            found, forced = paced.explain(node, now)
            # One answer, whatever the order conductors are listed in.
            self.assertEqual(found, again.conductor(node, now))
            # Nobody is placed where the profiles of now forbid it, and
            # a node that has a conductor now has one while pacing.
            eligible = {v.conductor for v in final.evaluate(node).eligible}
            if found is None:
                self.assertEqual(set(), eligible)
            else:
                self.assertIn(found, eligible)
            # Either the plain placement over what the node sees, or,
            # when that is forbidden now, where it ends up.
            seen = [
                rollout.profile_at(c, rollout.stage(c, node.hash_key, now))
                for c in published
            ]
            waiting = (
                engine.PlacementEngine(p for p in seen if p is not None)
                .place(node)
                .conductor
            )
            if forced:
                self.assertEqual(final.place(node).conductor, found)
                self.assertTrue(waiting is None or waiting not in eligible)
            else:
                self.assertEqual(waiting, found)
            # Once every change has ended: the placement of now.
            self.assertEqual(
                final.place(node).conductor,
                paced.conductor(node, T0 + 200),
            )
            # Created after every change began: there from the start.
            newer = dataclasses.replace(node, created_at=T0 + 100)
            self.assertEqual(
                final.place(node).conductor,
                paced.conductor(newer, max(now, T0 + 100)),
            )
            self.assertEqual([], paced.pending(newer, max(now, T0 + 100)))
