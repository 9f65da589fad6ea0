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

import dataclasses
import threading

from ironic_affinity import adoption
from ironic_affinity import profile
from ironic_affinity.integration.ring import placement_state
from ironic_affinity.tests import base
from ironic_affinity.tests.unit.integration import fakes


class PlacementStatesTestCase(base.TestCase):
    def setUp(self):
        super().setUp()
        self.clock = fakes.booted_clock()
        self.members = fakes.Members()
        self.members.set(['c1', 'c2'])
        self.active = fakes.ActiveConductors({':x': {'c1', 'c2'}})
        self.interval = 3600.0
        self.missing = []
        self.ironics_ring = []
        self.told = []

    def observe_missing(self, names, stale, ironics_ring):
        self.missing.append((names, stale))
        self.ironics_ring.append(ironics_ring)

    def states(self, static=False):
        return placement_state.PlacementStates(
            self.members,
            self.active,
            lambda: self.interval,
            static=static,
            on_missing=self.observe_missing,
            on_agreement=self.told.append,
            clock=self.clock,
        )

    def test_a_change_of_switches_is_told_once(self):
        states = self.states()
        states.current()
        self.assertEqual(['affinity'], [a.target for a in self.told])
        # New members with the same votes: nothing to tell.
        self.members.set(['c1', 'c2', 'c3'])
        self.active.active = {':x': {'c1', 'c2', 'c3'}}
        states.reset()
        states.current()
        self.assertEqual(1, len(self.told))
        # A vote for Ironic's ring: the side due changes.
        voter = dataclasses.replace(
            profile.ConductorProfile('c1'),
            switching=adoption.Published(adoption.Vote('stock', 2e9, 60.0)),
        )
        self.members.set({'c1': voter, 'c2': profile.ConductorProfile('c2')})
        states.current()
        self.assertEqual(2, len(self.told))
        # c3, active in Ironic, is not a member: Ironic's ring from here.
        told = self.told[1]
        self.assertEqual(
            ('stock', 'stock'), (told.target, told.adoption.final_side())
        )
        # So Ironic's ring routes nodes to c3: missing-member messages say
        # nothing then (they would say that c3 is given none).
        self.assertEqual([(frozenset({'c3'}), False)], self.missing[-1:])
        self.assertEqual(
            [False, True], self.ironics_ring[:1] + self.ironics_ring[-1:]
        )

    def test_reset_rereads_whatever_the_uptime(self):
        # Contract: reset() makes the next lookup read the active
        # conductors, even on a host up for less than the interval.
        states = self.states()
        states.current()
        self.assertEqual(1, self.active.reads)
        states.current()
        self.assertEqual(1, self.active.reads)
        states.reset()
        states.current()
        self.assertEqual(2, self.active.reads)

    def test_first_lookup_reads_whatever_the_uptime(self):
        self.clock.now = 0.5
        state = self.states().current()
        self.assertEqual(1, self.active.reads)
        self.assertEqual({':x': frozenset({'c1', 'c2'})}, state.active)

    def test_active_conductors_expire_after_the_interval(self):
        self.interval = 15.0
        states = self.states()
        states.current()
        self.clock.advance(14.9)
        states.current()
        self.assertEqual(1, self.active.reads)
        self.clock.advance(0.2)
        states.current()
        self.assertEqual(2, self.active.reads)

    def test_sqlite_keeps_them_until_reset(self):
        # Contract: Ironic never re-reads them on SQLite, but on reset().
        self.interval = 15.0
        states = self.states(static=True)
        states.current()
        self.clock.advance(3600)
        self.active.active = {':x': {'c1'}}
        self.assertEqual(
            frozenset({'c1', 'c2'}), states.current().hosts('x', '', True)
        )
        self.assertEqual(1, self.active.reads)
        states.reset()
        self.assertEqual(
            frozenset({'c1'}), states.current().hosts('x', '', True)
        )
        # Membership still applies on SQLite.
        self.members.set(['c1'])
        self.assertEqual(
            frozenset({'c1'}), states.current().live('x', '', True)
        )
        self.assertEqual(2, self.active.reads)

    def test_one_object_until_something_changes(self):
        states = self.states()
        first = states.current()
        self.assertIs(first, states.current())
        self.members.set(['c1'])
        second = states.current()
        self.assertIsNot(first, second)
        self.assertEqual(
            ('c1',), tuple(c.name for c in second.placements[True].conductors)
        )
        # A new view did not make the active conductors due.
        self.assertEqual(1, self.active.reads)

    def test_unchanged_reread_keeps_the_engines(self):
        self.interval = 1.0
        states = self.states()
        first = states.current()
        self.clock.advance(2)
        second = states.current()
        self.assertEqual(2, self.active.reads)
        self.assertIsNot(first, second)
        self.assertIs(first.placements[True], second.placements[True])

    def test_rings_are_memoised_per_state(self):
        states = self.states()
        first = states.current()
        built = []
        ring = first.memo('k', lambda: built.append(1) or object())
        self.assertIs(ring, first.memo('k', lambda: built.append(1)))
        self.assertEqual([1], built)
        self.members.set(['c1'])
        second = states.current()
        # A ring of the old membership is never served for the new one.
        self.assertIsNot(ring, second.memo('k', object))

    def test_without_groups_every_group_is_one(self):
        # Contract: a ring built without groups spans every group.
        self.active.active = {':x': {'c1'}, 'rack1:x': {'c2'}}
        state = self.states().current()
        self.assertEqual(frozenset({'c1'}), state.hosts('x', '', True))
        self.assertEqual(frozenset({'c2'}), state.hosts('x', 'rack1', True))
        self.assertEqual(frozenset({'c1', 'c2'}), state.hosts('x', '', False))
        ungrouped = state.placements[False].conductors
        self.assertEqual(['', ''], [c.conductor_group for c in ungrouped])
        grouped = state.placements[True].conductors
        self.assertEqual(['', 'rack1'], [c.conductor_group for c in grouped])

    def test_a_conductor_the_view_lacks_makes_it_read_the_group(self):
        self.members.set(['c1'])
        self.members.on_refresh = lambda: self.members.set(['c1', 'c2'])
        state = self.states().current()
        self.assertEqual(1, self.members.refreshes)
        self.assertEqual(frozenset({'c1', 'c2'}), state.live('x', '', True))
        self.assertEqual([(frozenset(), False)], self.missing)

    def test_a_lasting_absence_reads_the_group_once(self):
        self.interval = 1.0
        self.members.set(['c1'])
        states = self.states()
        for _ in range(5):
            states.current()
            self.clock.advance(2)
        self.assertEqual(5, self.active.reads)
        self.assertEqual(1, self.members.refreshes)
        self.assertEqual([(frozenset({'c2'}), False)] * 5, self.missing)
        # Another conductor missing is read for again.
        self.active.active = {':x': {'c1', 'c2', 'c3'}}
        states.current()
        self.assertEqual(2, self.members.refreshes)

    def test_fresh_reads_now_and_keeps_nothing(self):
        states = self.states()
        kept = states.current()
        self.active.active = {':x': {'c1'}}
        fresh = states.fresh()
        self.assertEqual(frozenset({'c1'}), fresh.hosts('x', '', True))
        self.assertIs(kept, states.current())
        self.assertEqual(2, self.active.reads)

    def test_lookups_racing_changes_see_one_consistent_state(self):
        self.interval = 0.0
        states = self.states()
        stop = threading.Event()
        bad = []

        def look():
            while not stop.is_set():
                state = states.current()
                names = {c.name for c in state.placements[True].conductors}
                expected = set(state.members.members) & set().union(
                    *state.active.values()
                )
                if names != expected:
                    bad.append((names, expected))

        threads = [threading.Thread(target=look) for _ in range(4)]
        for thread in threads:
            thread.start()
        try:
            for i in range(300):
                self.members.set(['c1', 'c2'] if i % 2 else ['c1'])
                self.active.active = (
                    {':x': {'c1', 'c2'}} if i % 3 else {':x': {'c2'}}
                )
                self.clock.advance(1)
        finally:
            stop.set()
            for thread in threads:
                thread.join()
        self.assertEqual([], bad)
