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

"""Switches between Ironic's ring and affinity placement, node by node."""

import dataclasses
import math

from hypothesis import given
from hypothesis import strategies as st

from ironic_affinity import adoption
from ironic_affinity import profile
from ironic_affinity import schedule
from ironic_affinity.tests import base

T0 = 1_800_000_000.0
PERIOD = 600.0
KEYS = [('node-%d' % i).encode() for i in range(3000)]


def on_affinity(found, now):
    return {k for k in KEYS if found.side(k, now) == adoption.AFFINITY}


class AdoptionTestCase(base.TestCase):
    def test_no_switch_is_stock(self):
        found = adoption.Adoption([])
        self.assertEqual(set(), on_affinity(found, T0))
        self.assertEqual(adoption.STOCK, found.final_side())
        self.assertFalse(found.active(T0))
        self.assertEqual(adoption.STOCK, found.all_on(T0))

    def test_a_switch_moves_every_node_once_over_its_period(self):
        found = adoption.Adoption([adoption.Switch('affinity', T0, PERIOD)])
        self.assertEqual(set(), on_affinity(found, T0 - 1))
        self.assertEqual(set(), on_affinity(found, T0))
        before = set()
        # In every tenth of the period about a tenth of the nodes move,
        # and none moves back.
        for step in range(1, 11):
            now = T0 + PERIOD * step / 10
            moved = on_affinity(found, now)
            self.assertLessEqual(before, moved)
            self.assertLess(abs(len(moved - before) - 300), 60, step)
            before = moved
        self.assertEqual(set(KEYS), before)
        self.assertFalse(found.active(T0 + PERIOD))
        self.assertTrue(found.active(T0 + PERIOD - 1))
        self.assertEqual(adoption.AFFINITY, found.all_on(T0 + PERIOD))
        self.assertIsNone(found.all_on(T0 + PERIOD - 1))

    def test_a_switch_at_once(self):
        found = adoption.Adoption([adoption.Switch('affinity', T0, 0)])
        self.assertEqual(set(), on_affinity(found, T0 - 0.001))
        self.assertEqual(set(KEYS), on_affinity(found, T0))

    def test_an_abort_moves_back_only_what_moved(self):
        half = T0 + PERIOD / 2
        switches = [
            adoption.Switch('affinity', T0, PERIOD),
            adoption.Switch('stock', half, PERIOD),
        ]
        found = adoption.Adoption(switches)
        moved = on_affinity(adoption.Adoption(switches[:1]), half)
        self.assertEqual(moved, on_affinity(found, half))
        previous = moved
        for step in range(1, 11):
            now = half + PERIOD * step / 10
            current = on_affinity(found, now)
            # Nothing that had not moved moves; what had moves back, at
            # the second switch's pace.
            self.assertLessEqual(current, previous)
            self.assertLess(
                abs(len(previous - current) - len(moved) / 10), 50, step
            )
            previous = current
        self.assertEqual(set(), previous)
        self.assertEqual(adoption.STOCK, found.final_side())
        self.assertIsNone(found.all_on(half + PERIOD - 1))
        self.assertEqual(adoption.STOCK, found.all_on(half + PERIOD))

    def test_a_node_created_during_a_switch_is_on_its_side_at_once(self):
        found = adoption.Adoption([adoption.Switch('affinity', T0, PERIOD)])
        created = T0 + 10
        for key in KEYS[:300]:
            for now in (created, T0 + PERIOD / 2):
                self.assertEqual(
                    adoption.AFFINITY, found.side(key, now, created)
                )
                self.assertEqual([], found.pending(key, now, created))
        # Created before it began: paced, as if its time were unknown.
        self.assertEqual(
            on_affinity(found, T0 + 60),
            {k for k in KEYS if found.side(k, T0 + 60, T0 - 1) == 'affinity'},
        )

    def test_a_node_is_keyed_by_uuid_with_its_creation_time(self):
        # side_of and pending_of: what the rings, the API and the CLI ask
        # of a node, as side and pending of its uuid (the name only
        # where there is none) and its creation time.
        found = adoption.Adoption([adoption.Switch('affinity', T0, PERIOD)])
        now = T0 + PERIOD / 2
        for index in range(300):
            uuid = '00000000-0000-0000-0000-%012d' % index
            for created_at in (None, T0 - 5, T0 + 10):
                node = dataclasses.replace(
                    profile.NodeRequest.build('name-%d' % index, uuid=uuid),
                    created_at=created_at,
                )
                key = uuid.encode()
                self.assertEqual(
                    found.side(key, now, created_at), found.side_of(node, now)
                )
                self.assertEqual(
                    found.pending(key, now, created_at),
                    found.pending_of(node, now),
                )
            late = profile.NodeRequest.build('late', uuid=uuid)
            self.assertEqual(
                adoption.AFFINITY,
                found.side_of(
                    dataclasses.replace(late, created_at=T0 + 1), T0 + 1
                ),
            )
        nameless = profile.NodeRequest.build('only-a-name')
        self.assertEqual(
            found.side(b'only-a-name', now), found.side_of(nameless, now)
        )

    def test_a_node_created_before_an_abort_moves_back_at_its_pace(self):
        half = T0 + PERIOD / 2
        found = adoption.Adoption(
            [
                adoption.Switch('affinity', T0, PERIOD),
                adoption.Switch('stock', half, PERIOD),
            ]
        )
        created = T0 + 10
        # On affinity from its creation until the abort, then back to
        # Ironic's ring at its moment in the abort, as every node is.
        self.assertEqual(
            {adoption.AFFINITY},
            {found.side(k, half - 1, created) for k in KEYS},
        )
        back = {
            k
            for k in KEYS
            if found.side(k, half + PERIOD / 2, created) == adoption.STOCK
        }
        self.assertLess(abs(len(back) - len(KEYS) / 2), 150)
        for key in KEYS[:100]:
            moves = found.pending(key, half, created)
            self.assertEqual(1, len(moves))
            self.assertEqual(adoption.STOCK, moves[0].target)
        # Created after the abort began: on Ironic's ring from the start.
        self.assertEqual(
            {adoption.STOCK}, {found.side(k, half + 1, half + 1) for k in KEYS}
        )

    def test_pending_moves_are_when_the_side_changes(self):
        switches = [
            adoption.Switch('affinity', T0, PERIOD),
            adoption.Switch('stock', T0 + PERIOD / 2, PERIOD),
        ]
        found = adoption.Adoption(switches)
        for key in KEYS[:300]:
            for move in found.pending(key, T0):
                self.assertEqual(move.source, found.side(key, move.at - 0.01))
                self.assertEqual(move.target, found.side(key, move.at + 0.01))
            # The side at the end is where the last move goes.
            moves = found.pending(key, T0)
            end = found.side(key, T0 + 2 * PERIOD)
            self.assertEqual(
                end, moves[-1].target if moves else found.side(key, T0)
            )

    def test_old_switches_are_dropped_in_order(self):
        switches = [
            adoption.Switch(
                'affinity' if i % 2 else 'stock', T0 + i * 1000, 10.0
            )
            for i in range(schedule.MAX_KEPT + 3)
        ]
        found = adoption.Adoption(reversed(switches))
        self.assertEqual(schedule.MAX_KEPT, len(found.switches))
        self.assertEqual(switches[-schedule.MAX_KEPT - 1].to, found.before)
        self.assertEqual(switches[-1].to, found.final_side())

    def test_bad_switches_are_refused(self):
        self.assertRaises(ValueError, adoption.Switch, 'tags', T0, 1.0)
        self.assertRaises(ValueError, adoption.Switch, 'stock', T0, -1.0)
        self.assertRaises(ValueError, adoption.Switch, 'stock', T0, math.nan)

    @given(
        st.lists(
            st.tuples(
                st.sampled_from(adoption.SIDES),
                st.floats(-1000, 1000),
                st.sampled_from([0.0, 10.0, 60.0, 600.0]),
            ),
            max_size=4,
        ),
        st.floats(-2000, 3000),
        st.binary(min_size=1, max_size=16),
    )
    def test_same_answer_whatever_the_order_given(self, raw, offset, key):
        switches = [adoption.Switch(to, T0 + at, p) for to, at, p in raw]
        now = T0 + offset
        forward = adoption.Adoption(switches)
        backward = adoption.Adoption(list(reversed(switches)))
        self.assertEqual(forward.side(key, now), backward.side(key, now))
        # Past every switch's end, every node is where the last one went.
        end = max((s.ends_at() for s in switches), default=now)
        self.assertEqual(
            forward.final_side(), forward.side(key, max(now, end) + 1)
        )


def vote(side, since=T0, period=PERIOD, switches=()):
    return adoption.Published(adoption.Vote(side, since, period), switches)


ORIGIN_STOCK = adoption.Switch('stock', adoption.ORIGIN_AT, 0.0)


class AgreeTestCase(base.TestCase):
    """The side every process derives from the members' votes."""

    def test_a_deployment_without_votes_stays_on_affinity(self):
        # Ran the plugin before switches existed: nothing moves, nothing
        # new is published.
        found = adoption.agree({'c1': None, 'c2': None}, ())
        self.assertEqual('affinity', found.target)
        self.assertFalse(found.adoption.active(T0))
        self.assertEqual((), found.record)
        # One of its conductors down is not a vote for Ironic's ring.
        found = adoption.agree({'c1': None}, {'c2'})
        self.assertEqual('affinity', found.target)

    def test_no_member_is_ironics_ring_unless_agreed_before(self):
        found = adoption.agree({}, {'c1', 'c2'})
        self.assertEqual('stock', found.target)
        self.assertEqual((), found.record)
        before = adoption.agree({'c1': None, 'c2': None}, ())
        kept = adoption.agree({}, {'c1', 'c2'}, previous=before)
        self.assertEqual('affinity', kept.target)

    def test_one_vote_for_stock_records_ironics_ring(self):
        found = adoption.agree({'c1': vote('stock'), 'c2': None}, {'c3'})
        self.assertEqual('stock', found.target)
        self.assertFalse(found.due)
        self.assertEqual((ORIGIN_STOCK,), found.record)
        self.assertEqual(frozenset({'c1'}), found.stock_voters)

    def test_the_last_vote_for_affinity_makes_a_switch_due(self):
        history = (ORIGIN_STOCK,)
        votes = {
            'c2': vote('affinity', T0, switches=history),
            'c1': vote('affinity', T0 + 30, switches=history),
            'c3': vote('stock', T0 + 10, switches=history),
        }
        self.assertFalse(adoption.agree(votes, ()).due)
        votes['c3'] = vote('affinity', T0 + 60, switches=history)
        # A conductor that does not run the plugin holds it there.
        self.assertFalse(adoption.agree(votes, {'c4'}).due)
        found = adoption.agree(votes, ())
        self.assertEqual(
            ('affinity', True, 'c1'), (found.target, found.due, found.recorder)
        )
        # Nothing moves until the switch is recorded.
        self.assertEqual((ORIGIN_STOCK,), found.adoption.switches)
        self.assertFalse(found.adoption.active(T0 + 100))

    def test_the_recorder_records_one_switch_ahead(self):
        history = (ORIGIN_STOCK,)
        votes = {
            name: vote('affinity', T0, switches=history)
            for name in ('c1', 'c2')
        }
        found = adoption.agree(votes, ())
        # Not the recorder: passes the history on, adds nothing.
        self.assertEqual(
            history, adoption.recorded(found, 'c2', (), T0 + 5, 5.0, 60.0)
        )
        mine = adoption.recorded(found, 'c1', (), T0 + 5, 5.0, 60.0)
        switch = adoption.Switch('affinity', T0 + 10, 60.0)
        self.assertEqual(history + (switch,), mine)
        # Its own view behind: it does not record a second one.
        self.assertEqual(
            mine, adoption.recorded(found, 'c1', mine, T0 + 6, 5.0, 60.0)
        )
        # Once published, every process follows it; missing members do
        # not hold it back, a restarted one does not move it.
        recorded = {
            'c1': vote('affinity', T0, switches=mine),
            'c2': vote('affinity', T0 + 400, switches=()),
        }
        again = adoption.agree(recorded, {'c3'})
        self.assertEqual(mine, again.adoption.switches)
        self.assertFalse(again.due)
        self.assertTrue(again.adoption.active(T0 + 9))
        self.assertFalse(again.adoption.active(T0 + 70))

    def test_an_operator_set_period_repaces_a_running_switch(self):
        history = (ORIGIN_STOCK, adoption.Switch('affinity', T0, 600.0))
        found = adoption.agree(
            {'c1': vote('affinity', T0, switches=history)}, ()
        )
        faster = adoption.recorded(
            found, 'c1', history, T0 + 100, 5.0, 60.0, repace=True
        )
        self.assertEqual(
            history + (adoption.Switch('affinity', T0 + 105, 60.0),), faster
        )
        # A sized period (repace False), or a finished switch: nothing.
        self.assertEqual(
            history,
            adoption.recorded(found, 'c1', history, T0 + 100, 5.0, 60.0),
        )
        self.assertEqual(
            history,
            adoption.recorded(
                found, 'c1', history, T0 + 700, 5.0, 60.0, repace=True
            ),
        )

    def test_the_first_vote_back_makes_the_rollback_due(self):
        history = (ORIGIN_STOCK, adoption.Switch('affinity', T0, 300.0))
        votes = {
            'c1': vote('affinity', T0, switches=history),
            'c2': vote('stock', T0 + 2000, switches=history),
        }
        found = adoption.agree(votes, ())
        self.assertEqual(('stock', True), (found.target, found.due))
        self.assertEqual(
            history + (adoption.Switch('stock', T0 + 2005, 120.0),),
            adoption.recorded(found, 'c1', (), T0 + 2000, 5.0, 120.0),
        )

    def test_a_rollback_without_history_is_paced(self):
        # A deployment that placed by affinity before switches existed:
        # the voter for Ironic's ring is the only one that publishes, so
        # it records the switch, from the side nodes are on.
        found = adoption.agree(
            {'c2': vote('stock', T0 + 5), 'c1': None, 'c3': None}, ()
        )
        self.assertEqual('c2', found.recorder)
        self.assertEqual(
            (
                adoption.Switch('affinity', adoption.ORIGIN_AT, 0.0),
                adoption.Switch('stock', T0 + 10, PERIOD),
            ),
            adoption.recorded(found, 'c2', (), T0 + 5, 5.0, PERIOD),
        )

    @given(
        st.lists(
            st.tuples(
                st.sampled_from(adoption.SIDES),
                st.floats(T0, T0 + 10**5),
                st.booleans(),
            ),
            min_size=1,
            max_size=6,
        ),
        st.frozensets(st.sampled_from(['x1', 'x2'])),
        st.randoms(),
    )
    def test_every_process_agrees_whatever_the_order(
        self, raw, outsiders, random
    ):
        votes = {
            'c%d' % i: (vote(side, since) if published else None)
            for i, (side, since, published) in enumerate(raw)
        }
        shuffled = list(votes.items())
        random.shuffle(shuffled)

        def seen(found):
            return (
                found.adoption.switches,
                found.adoption.before,
                found.target,
                found.record,
                found.due,
                found.recorder,
                found.stock_voters,
            )

        self.assertEqual(
            seen(adoption.agree(votes, outsiders)),
            seen(adoption.agree(dict(shuffled), set(outsiders))),
        )

    def test_takeover_period(self):
        # 10,000 nodes, 10 conductors: each receives 900, 8 per 180 s.
        self.assertEqual(
            113 * 180.0, adoption.takeover_period(10_000, 10, 8, 180)
        )
        self.assertEqual(0.0, adoption.takeover_period(10_000, 1, 8, 180))
        self.assertEqual(0.0, adoption.takeover_period(0, 3, 8, 180))
