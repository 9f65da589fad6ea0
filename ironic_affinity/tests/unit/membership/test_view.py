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

"""The member view's timing, on the in-memory backend and a fake clock."""

import threading
import time
from unittest import mock

from ironic_affinity import profile
from ironic_affinity.membership import capabilities
from ironic_affinity.membership import lease
from ironic_affinity.membership import levels
from ironic_affinity.membership import view
from ironic_affinity.membership import view_snapshot
from ironic_affinity.tests.unit.membership import fakes

GROUP = b'conductors'
URL = 'redis://:s3cret@h:6379'
TIMEOUT = 5
HOLD = view.HOLD_TIMEOUTS * TIMEOUT


def caps(name, rack='rack1'):
    return capabilities.encode(
        profile.ConductorProfile.build(name, soft_affinity_tags=rack)
    )


class ViewTestCase(fakes.BackendTestCase):
    LOGGER = view.__name__
    # Members here are other processes' entries: they never expire
    # unless a test removes them.
    EXPIRY = 1e9

    def setUp(self):
        super().setUp()
        self.view = self.make_view()

    def make_view(self, watch_interval=1.0, timeout=TIMEOUT):
        member_view = view.MemberView(
            URL, GROUP.decode(), watch_interval, timeout, clock=self.clock
        )
        self.addCleanup(member_view.stop, 2.0)
        return member_view

    def join(self, *names):
        for name in names:
            self.backend.add(GROUP, name.encode(), caps(name))

    def leave(self, name):
        del self.backend.groups[GROUP][name.encode()]

    def lines(self, level):
        return [
            line
            for line in self.log.output.splitlines()
            if line.startswith(level + ' ')
        ]


class ReadTestCase(ViewTestCase):
    def test_first_read(self):
        self.join('a', 'b')
        snapshot = self.view.refresh()
        self.assertEqual({'a', 'b'}, set(snapshot.members))
        self.assertEqual(
            capabilities.decode('a', caps('a')), snapshot.members['a']
        )
        self.assertEqual(1, snapshot.version)
        self.assertFalse(snapshot.stale)
        self.assertEqual(self.clock.now, snapshot.read_at)
        self.assertEqual(frozenset(), snapshot.held)
        self.assertIs(snapshot, self.view.snapshot())
        # An observer: never joins, never beats.
        self.coordinator.assert_called_once_with(URL, mock.ANY, TIMEOUT)
        (client,) = self.factory.made
        self.assertNotIn('join_group', client.calls)
        self.assertNotIn('heartbeat', client.calls)

    def test_no_group_yet_is_empty_not_stale(self):
        snapshot = self.view.refresh()
        self.assertEqual({}, dict(snapshot.members))
        self.assertFalse(snapshot.stale)
        self.assertEqual(0, snapshot.version)

    def test_version_changes_exactly_on_change(self):
        self.join('a', 'b')
        first = self.view.refresh()
        self.assertEqual(first.version, self.view.refresh().version)
        self.join('c')
        joined = self.view.refresh()
        self.assertEqual(first.version + 1, joined.version)
        self.assertEqual({'a', 'b', 'c'}, set(joined.members))
        self.leave('b')
        left = self.view.refresh()
        self.assertEqual(joined.version + 1, left.version)
        self.assertEqual({'a', 'c'}, set(left.members))
        self.backend.groups[GROUP][b'a'].capabilities = caps('a', 'rack9')
        retagged = self.view.refresh()
        self.assertEqual(left.version + 1, retagged.version)
        self.assertEqual(
            {'rack9': 1}, dict(retagged.members['a'].soft_affinity_tags)
        )
        self.assertEqual(retagged.version, self.view.refresh().version)

    def test_joins_and_leaves_are_logged_once_each(self):
        self.join('a', 'b')
        self.view.refresh()
        self.view.refresh()
        self.leave('b')
        self.join('c')
        self.view.refresh()
        # A new profile is no join: at DEBUG only.
        self.backend.groups[GROUP][b'a'].capabilities = caps('a', 'rack9')
        self.view.refresh()
        self.assertEqual(
            [
                'INFO Group %s as read by this process: 2 member(s); '
                'joined: a, b; left: -' % GROUP.decode(),
                'INFO Group %s as read by this process: 2 member(s); '
                'joined: c; left: b' % GROUP.decode(),
            ],
            self.lines('INFO'),
        )

    def test_unusable_capabilities_rejected_with_one_warning(self):
        self.join('good')
        self.backend.add(GROUP, b'rogue', {'format': 1, 'max_nodes': -1})
        for _ in range(3):
            snapshot = self.view.refresh()
        self.assertEqual({'good'}, set(snapshot.members))
        self.assertIn('max_nodes', snapshot.rejected['rogue'])
        (warning,) = self.lines('WARNING')
        self.assertIn('rogue is left out of placement', warning)
        version = snapshot.version
        # A new reason is news again.
        self.backend.groups[GROUP][b'rogue'].capabilities = {'format': 2}
        snapshot = self.view.refresh()
        self.assertIn('format version 2', snapshot.rejected['rogue'])
        self.assertEqual(2, len(self.lines('WARNING')))
        self.assertEqual(version + 1, snapshot.version)
        # Fixed: a member like any other.
        self.backend.groups[GROUP][b'rogue'].capabilities = caps('rogue')
        snapshot = self.view.refresh()
        self.assertEqual({'good', 'rogue'}, set(snapshot.members))
        self.assertEqual({}, dict(snapshot.rejected))
        self.assertEqual(version + 2, snapshot.version)

    def test_what_members_run_is_read_without_a_new_version(self):
        self.join('old')
        self.backend.add(
            GROUP,
            b'new',
            dict(caps('new'), version='2.0', reads=2, writes=1, x={'y': 1}),
        )
        first = self.view.refresh()
        self.assertEqual({'old', 'new'}, set(first.members))
        self.assertEqual(levels.Runs(None, 1, 1, None), first.runs['old'])
        self.assertEqual(levels.Runs('2.0', 2, 1, None), first.runs['new'])
        # The pin lifted: news for reports, not for placement.
        self.backend.groups[GROUP][b'new'].capabilities = dict(
            caps('new'), version='2.0', reads=2, writes=2
        )
        lifted = self.view.refresh()
        self.assertEqual(2, lifted.runs['new'].writes)
        self.assertEqual(first.version, lifted.version)
        self.assertEqual([], self.lines('WARNING'))

    def test_a_member_writing_a_newer_level_is_warned_of_once(self):
        newer = levels.LEVEL + 1
        self.backend.add(
            GROUP, b'next', dict(caps('next'), reads=newer, writes=newer)
        )
        for _ in range(3):
            snapshot = self.view.refresh()
        # Still a member: a newer key is ignored, and said once.
        self.assertEqual({'next'}, set(snapshot.members))
        (warning,) = self.lines('WARNING')
        self.assertIn(
            'next publishes format level %d and this process reads %d'
            % (newer, levels.LEVEL),
            warning,
        )
        self.assertIn('pin_format = %d' % levels.LEVEL, warning)

    def test_member_leaving_mid_read_is_absent(self):
        self.join('a', 'b')
        self.backend.after_list = lambda: self.leave('b')
        snapshot = self.view.refresh()
        self.assertEqual({'a'}, set(snapshot.members))
        self.assertFalse(snapshot.stale)


class OutageTestCase(ViewTestCase):
    def test_outage_keeps_the_last_view(self):
        self.join('a', 'b')
        before = self.view.refresh()
        self.backend.go_down()
        for _ in range(3):
            self.clock.advance(1)
            snapshot = self.view.refresh()
            self.assertTrue(snapshot.stale)
            self.assertIn('Connection refused', snapshot.error)
            self.assertEqual({'a', 'b'}, set(snapshot.members))
            self.assertEqual(before.version, snapshot.version)
            self.assertEqual(before.read_at, snapshot.read_at)
        (warning,) = self.lines('WARNING')
        self.assertIn('Cannot read group conductors', warning)
        self.assertIn('last view of 2 conductor(s)', warning)
        self.assertIn(':***@h', warning)
        self.assertNotIn('s3cret', self.log.output)
        # Nothing but the first read's members: an outage changes none.
        self.assertEqual(1, len(self.lines('INFO')))
        self.backend.come_back()
        self.clock.advance(1)
        for _ in range(2):
            snapshot = self.view.refresh()
        self.assertFalse(snapshot.stale)
        self.assertEqual(before.version, snapshot.version)
        _first, recovered = self.lines('INFO')
        self.assertIn('readable again after 3.0 s', recovered)
        self.assertEqual(1, len(self.lines('WARNING')))

    def test_members_held_after_an_outage(self):
        self.join('a', 'b')
        before = self.view.refresh()
        self.backend.go_down()
        self.view.refresh()
        # b died during the outage; its entry is gone when it is back.
        self.leave('b')
        self.backend.come_back()
        back = self.view.refresh()
        self.assertEqual({'a', 'b'}, set(back.members))
        self.assertEqual(frozenset({'b'}), back.held)
        self.assertEqual(before.version, back.version)
        self.clock.advance(HOLD - 0.1)
        self.assertEqual(frozenset({'b'}), self.view.refresh().held)
        self.clock.advance(0.2)
        released = self.view.refresh()
        self.assertEqual({'a'}, set(released.members))
        self.assertEqual(frozenset(), released.held)
        self.assertEqual(before.version + 1, released.version)

    def test_member_rejoining_during_the_hold_is_no_longer_held(self):
        self.join('a', 'b')
        self.view.refresh()
        self.backend.go_down()
        self.view.refresh()
        self.leave('b')
        self.backend.come_back()
        self.assertEqual(frozenset({'b'}), self.view.refresh().held)
        self.backend.add(GROUP, b'b', caps('b', 'rack2'))
        snapshot = self.view.refresh()
        self.assertEqual(frozenset(), snapshot.held)
        self.assertEqual(
            {'rack2': 1}, dict(snapshot.members['b'].soft_affinity_tags)
        )
        # And it stays after the hold.
        self.clock.advance(HOLD + 1)
        self.assertEqual({'a', 'b'}, set(self.view.refresh().members))

    def test_group_vanishing_holds_once(self):
        self.join('a', 'b')
        before = self.view.refresh()
        self.backend.restart_empty()
        gone = self.view.refresh()
        self.assertEqual({'a', 'b'}, set(gone.members))
        self.assertEqual(frozenset({'a', 'b'}), gone.held)
        self.assertFalse(gone.stale)
        self.assertEqual(before.version, gone.version)
        # Still missing on the reads after: not news again, so the hold
        # is not renewed and ends when the first one does.
        self.clock.advance(HOLD - 1)
        self.assertEqual(frozenset({'a', 'b'}), self.view.refresh().held)
        self.clock.advance(2)
        released = self.view.refresh()
        self.assertEqual({}, dict(released.members))
        self.assertEqual(before.version + 1, released.version)
        self.clock.advance(HOLD)
        self.assertEqual(released.version, self.view.refresh().version)

    def test_group_vanishing_then_members_rejoining(self):
        self.join('a', 'b')
        self.view.refresh()
        self.backend.restart_empty()
        self.view.refresh()
        self.join('a')
        snapshot = self.view.refresh()
        self.assertEqual(frozenset({'b'}), snapshot.held)
        self.join('b')
        self.assertEqual(frozenset(), self.view.refresh().held)

    def test_long_outage_starts_a_new_client(self):
        self.join('a')
        self.view.refresh()
        (first,) = self.factory.made
        self.backend.go_down()
        self.view.refresh()
        self.clock.advance(TIMEOUT - 1)
        self.view.refresh()
        # Not yet past the member timeout: the client is kept.
        self.assertFalse(first.stopped)
        self.assertEqual([first], self.factory.made)
        self.clock.advance(2)
        self.view.refresh()
        self.assertTrue(first.stopped)
        self.backend.come_back()
        snapshot = self.view.refresh()
        self.assertFalse(snapshot.stale)
        self.assertEqual({'a'}, set(snapshot.members))
        latest = self.factory.made[-1]
        self.assertIsNot(first, latest)
        self.assertTrue(latest.started)
        # Every client but the one in use was stopped.
        for client in self.factory.made[:-1]:
            self.assertFalse(client.started)
        self.assertEqual(1, len(self.lines('WARNING')))


class ThreadsTestCase(ViewTestCase):
    """The view's own threads, and callers' threads, never share the
    coordinator: the fake notes any call made while another thread is
    inside the same client."""

    def wait_until(self, predicate, timeout=2.0):
        deadline = time.monotonic() + timeout
        while not predicate():
            if time.monotonic() > deadline:
                self.fail('never happened')
            time.sleep(0.005)

    def readers(self):
        return [
            t
            for t in threading.enumerate()
            if t.name == 'affinity-view-read' and t.is_alive()
        ]

    def test_start_reads_then_loops(self):
        self.join('a')
        member_view = self.make_view(watch_interval=0.01)
        member_view.start()
        self.assertEqual({'a'}, set(member_view.snapshot().members))
        self.join('b')
        self.assertIsNotNone(
            member_view.wait_for(lambda s: 'b' in s.members, 2.0)
        )
        member_view.stop()
        self.assertFalse(member_view._thread.is_alive())
        for client in self.factory.made:
            self.assertTrue(client.stopped)

    def test_first_read_timing_out_is_not_shared(self):
        # The first read of start() does not answer in time (Redis
        # retrying a refused connection, say); the loop then starts, and
        # another caller asks for a read meanwhile.
        self.join('a')
        self.backend.make_slow()
        member_view = self.make_view(watch_interval=0.01, timeout=0.05)
        member_view.start()
        self.assertTrue(self.backend.blocked.is_set())
        self.assertEqual(view_snapshot.EMPTY, member_view.snapshot())
        # Give the loop time to try to read several times.
        time.sleep(0.05)
        late = member_view.refresh_within(0.02)
        self.assertEqual('no answer within 0.02 s', late.error)
        self.assertEqual(1, len(self.readers()))
        self.backend.let_through()
        snapshot = member_view.wait_for(lambda s: 'a' in s.members, 2.0)
        self.assertIsNotNone(snapshot)
        self.assertEqual(1, snapshot.version)
        # Reads go on, one thread at a time, on the one client.
        self.join('b')
        self.assertIsNotNone(
            member_view.wait_for(lambda s: 'b' in s.members, 2.0)
        )
        member_view.stop()
        self.assertEqual([], self.backend.overlaps())
        self.assertEqual(1, len(self.factory.made))

    def test_refresh_within_while_the_loop_reads(self):
        self.join('a')
        member_view = self.make_view(watch_interval=0.001)
        member_view.start()
        versions = set()
        for _ in range(20):
            snapshot = member_view.refresh_within(1.0)
            self.assertFalse(snapshot.stale)
            versions.add(snapshot.version)
        member_view.stop()
        self.assertEqual({1}, versions)
        self.assertEqual([], self.backend.overlaps())

    def test_callers_giving_up_share_one_reader(self):
        self.join('a')
        self.backend.make_slow()
        for _ in range(3):
            self.assertTrue(self.view.refresh_within(0.01).stale)
        self.assertEqual(1, len(self.readers()))
        self.backend.let_through()
        self.wait_until(lambda: not self.readers())
        self.assertEqual({'a'}, set(self.view.snapshot().members))
        self.assertEqual(1, self.view.snapshot().version)
        self.assertEqual([], self.backend.overlaps())

    def test_stop_while_a_read_is_stuck(self):
        self.join('a')
        self.backend.make_slow()
        self.view.refresh_within(0.01)
        (client,) = self.factory.made
        self.view.stop(timeout=0.02)
        # The stuck read still owns the client, and discards it when done.
        self.assertFalse(client.stopped)
        self.backend.let_through()
        self.wait_until(lambda: client.stopped)
        self.assertEqual([], self.backend.overlaps())


class StandDownTestCase(ViewTestCase):
    """A conductor whose own lease ran out leaves itself out, as the
    others' views do once the backend drops it."""

    MARGIN = 2.0

    def setUp(self):
        super().setUp()
        self.lease = lease.Lease('a', TIMEOUT, self.MARGIN, clock=self.clock)
        self.view = view.MemberView(
            URL,
            GROUP.decode(),
            1.0,
            TIMEOUT,
            clock=self.clock,
            own_lease=lambda: self.lease,
        )
        self.addCleanup(self.view.stop, 2.0)
        self.join('a', 'b')
        self.lease.renewed(self.clock.now)
        self.clock.advance(0.1)

    def test_within_its_lease_it_counts_itself(self):
        self.assertEqual({'a', 'b'}, set(self.view.refresh().members))

    def test_no_heartbeat_yet_no_placement_on_itself(self):
        fresh = lease.Lease('a', TIMEOUT, self.MARGIN, clock=self.clock)
        self.lease = fresh
        # Its entry (from a previous run, say) is there: not counted yet.
        self.assertEqual({'b'}, set(self.view.refresh().members))
        self.assertEqual([], self.lines('WARNING'))
        fresh.renewed(self.clock.now)
        self.clock.advance(0.1)
        self.assertEqual({'a', 'b'}, set(self.view.refresh().members))

    def test_cut_off_it_stands_down_before_the_others_drop_it(self):
        before = self.view.refresh()
        self.backend.go_down()
        # Its last heartbeat was acknowledged at +0; the backend keeps it
        # until +TIMEOUT at the earliest.
        self.clock.advance(TIMEOUT - self.MARGIN - 0.2)
        self.assertEqual({'a', 'b'}, set(self.view.snapshot().members))
        self.clock.advance(0.1)
        # No read needed (one may be stuck on a black-holed backend).
        snapshot = self.view.snapshot()
        self.assertEqual({'b'}, set(snapshot.members))
        self.assertNotEqual(before.version, snapshot.version)
        self.assertIs(snapshot, self.view.snapshot())
        (warning,) = self.lines('WARNING')
        self.assertIn('Conductor a has had no heartbeat acknowledged', warning)
        self.assertIn('Standing down', warning)
        # Reads that fail keep it out.
        self.clock.advance(1)
        self.assertEqual({'b'}, set(self.view.refresh().members))

    def test_back_only_once_a_read_after_a_heartbeat_shows_it(self):
        self.view.refresh()
        self.backend.go_down()
        self.clock.advance(TIMEOUT)
        self.assertEqual({'b'}, set(self.view.snapshot().members))
        self.backend.come_back()
        # Its entry is still there, but no heartbeat was acknowledged.
        self.clock.advance(1)
        self.assertEqual({'b'}, set(self.view.refresh().members))
        # A heartbeat sent now is acknowledged; a read that had begun
        # before it does not count.
        began = self.clock.now
        self.clock.advance(0.5)
        self.lease.renewed(self.clock.now)
        self.assertFalse(lease.counts_itself(self.lease, began))
        self.clock.advance(0.5)
        snapshot = self.view.refresh()
        self.assertEqual({'a', 'b'}, set(snapshot.members))
        self.assertIn(
            'Conductor a is back in the affinity group', self.log.output
        )

    def test_not_held_back_in_by_the_hold_after_an_outage(self):
        self.view.refresh()
        self.backend.go_down()
        self.clock.advance(TIMEOUT)
        self.view.refresh()
        self.backend.come_back()
        # The others hold members of the last view for a while after an
        # outage; a stood-down conductor does not hold itself.
        self.leave('a')
        self.clock.advance(1)
        snapshot = self.view.refresh()
        self.assertEqual({'b'}, set(snapshot.members))
        self.assertEqual(frozenset(), snapshot.held)

    def test_a_conductor_that_leaves_stands_down_at_once(self):
        self.view.refresh()
        self.lease.end()
        self.assertEqual({'b'}, set(self.view.snapshot().members))
        self.assertEqual([], self.lines('WARNING'))
