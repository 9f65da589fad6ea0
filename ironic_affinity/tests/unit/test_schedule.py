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

"""The pacing rule that rebalancing and switching share. Its users'
tests (test_rollout, test_adoption) check where nodes go; these check
that a schedule's stages, moments and moves tell one story."""

from hypothesis import assume
from hypothesis import given
from hypothesis import strategies as st

from ironic_affinity import rendezvous
from ironic_affinity import schedule
from ironic_affinity.tests import base

T0 = 1_800_000_000.0

changes = st.lists(
    st.tuples(
        st.integers(0, 2**64 - 1),
        st.floats(0, 100).map(lambda offset: T0 + offset),
        st.sampled_from((0.0, 10.0, 60.0)),
    ),
    min_size=1,
    max_size=4,
).map(lambda found: sorted(found, key=lambda c: c[1]))


class ScheduleTestCase(base.TestCase):
    def test_a_change_key_reads_its_time_as_a_float(self):
        self.assertEqual(
            schedule.change_key('c1', at=T0),
            schedule.change_key('c1', at=int(T0)),
        )
        self.assertNotEqual(
            schedule.change_key('c1', at=T0),
            schedule.change_key('c1', at=T0 + 1e-6),
        )
        self.assertNotEqual(
            schedule.change_key('c1', at=T0),
            schedule.change_key('c2', at=T0),
        )

    def test_a_node_follows_at_its_moment(self):
        key = schedule.change_key('c1', at=T0)
        paced = schedule.Schedule([(key, T0, 60.0)])
        for node in range(50):
            node_hash = rendezvous.hash64(b'node-%d' % node)
            moment = T0 + 60.0 * rendezvous.weight(node_hash, key) / 2.0**64
            self.assertEqual(moment, paced.moment(node_hash, 0))
            self.assertEqual(0, paced.stage(node_hash, moment - 1e-3))
            self.assertEqual(1, paced.stage(node_hash, moment + 1e-3))
            self.assertEqual(1, paced.stage(node_hash, T0 - 1, T0))

    def test_a_change_made_at_once(self):
        paced = schedule.Schedule([(7, T0, 0.0)])
        self.assertEqual(0, paced.stage(1, T0 - 1e-3))
        self.assertEqual(1, paced.stage(1, T0))
        self.assertEqual(T0, paced.moment(1, 0))

    def test_a_switch_stops_where_it_is_when_the_next_starts(self):
        first = (schedule.change_key('a', at=T0), T0, 100.0)
        second = (schedule.change_key('b', at=T0 + 10), T0 + 10, 100.0)
        stopping = schedule.Schedule([first, second], stop_at_next=True)
        running = schedule.Schedule([first, second])
        late = [
            h
            for h in range(2000)
            if T0 + 20 < stopping.moment(h, 0) < stopping.moment(h, 1) - 1
        ]
        self.assertTrue(late)
        for node_hash in late:
            # Past its moment of the first change, before the second.
            moment = stopping.moment(node_hash, 0)
            self.assertEqual(0, stopping.stage(node_hash, moment + 1))
            self.assertEqual(1, running.stage(node_hash, moment + 1))
            self.assertNotIn(moment, stopping.moments(node_hash, T0))
            self.assertIn(moment, running.moments(node_hash, T0))

    @given(
        changes,
        st.integers(0, 2**64 - 1),
        st.booleans(),
        st.floats(-20, 200),
        st.none() | st.floats(-20, 200),
    )
    def test_stages_moments_and_moves_agree(
        self, timed, node_hash, stop_at_next, offset, created
    ):
        paced = schedule.Schedule(timed, stop_at_next=stop_at_next)
        now = T0 + offset
        created_at = None if created is None else T0 + created
        # A node exactly at its moment has not followed yet, and the
        # moment is not to come either: its moves start after it.
        assume(
            all(
                paced.moment(node_hash, index, created_at) != now
                for index in range(len(timed))
            )
        )

        def stage(moment):
            return paced.stage(node_hash, moment, created_at)

        moments = paced.moments(node_hash, now, created_at)
        self.assertTrue(all(m > now for m in moments), moments)
        moves = schedule.moves(moments, now, stage)
        where = stage(now)
        for move in moves:
            self.assertEqual(where, move.source)
            self.assertNotEqual(move.source, move.target)
            # A node never goes back to an earlier stage.
            self.assertGreater(move.target, move.source)
            where = move.target
        self.assertEqual(where, stage(paced.ends_at + 1))
        self.assertEqual(sorted(m.at for m in moves), [m.at for m in moves])
