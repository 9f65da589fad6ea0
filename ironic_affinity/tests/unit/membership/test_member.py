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

"""A member's heartbeat, on the in-memory backend and a fake clock.

Most tests drive the beats one by one (``_tick``, what the heartbeat
thread runs each interval); the thread itself is run for start and stop.
"""

import time

from ironic_affinity import exception
from ironic_affinity import profile
from ironic_affinity.membership import capabilities
from ironic_affinity.membership import lease
from ironic_affinity.membership import member
from ironic_affinity.tests.unit.membership import fakes

GROUP = b'conductors'
URL = 'redis://:s3cret@h:6379'
TIMEOUT = 5
NAME = 'host-a:8091'


def caps(rack):
    return capabilities.encode(
        profile.ConductorProfile.build(NAME, soft_affinity_tags=rack)
    )


class MemberTestCase(fakes.BackendTestCase):
    LOGGER = member.__name__
    EXPIRY = TIMEOUT

    def setUp(self):
        super().setUp()
        self.member = self.make_member(caps('rack1'))

    def make_member(
        self,
        published,
        heartbeat_interval=1.0,
        call_deadline=None,
        compose=None,
        routine_updates=False,
    ):
        made = member.Member(
            URL,
            GROUP.decode(),
            NAME,
            published,
            heartbeat_interval,
            TIMEOUT,
            clock=self.clock,
            call_deadline=call_deadline,
            compose=compose,
            routine_updates=routine_updates,
        )
        self.addCleanup(made.stop, 2.0)
        return made

    def published(self):
        return self.backend.members(GROUP).get(NAME)

    def lines(self, level):
        return [
            line
            for line in self.log.output.splitlines()
            if line.startswith(level + ' ')
        ]

    def beat(self, times=1, seconds=1.0):
        for _ in range(times):
            self.clock.advance(seconds)
            self.member._tick()


class JoinTestCase(MemberTestCase):
    def test_join(self):
        self.member._tick()
        self.assertEqual(caps('rack1'), self.published())
        self.assertTrue(self.member.joined.is_set())
        self.assertEqual([('join', NAME)], self.backend.history)
        (joined,) = self.lines('INFO')
        self.assertIn(
            'Conductor host-a:8091 joined group conductors on '
            'redis://:***@h:6379',
            joined,
        )
        self.coordinator.assert_called_once_with(URL, NAME, TIMEOUT)
        # Beats keep the entry without writing it again.
        self.beat(times=10)
        self.assertEqual([('join', NAME)], self.backend.history)
        self.assertEqual(1, len(self.factory.made))

    def test_beats_before_joining(self):
        # A reader takes a member without a beat for dead.
        self.member._tick()
        (client,) = self.factory.made
        self.assertLess(
            client.calls.index('heartbeat'), client.calls.index('join_group')
        )

    def test_update_publishes_new_capabilities(self):
        self.member._tick()
        self.member.update(caps('rack2'))
        self.beat()
        self.assertEqual(caps('rack2'), self.published())
        self.assertEqual(
            [('join', NAME), ('update', NAME)], self.backend.history
        )
        self.assertIn(
            'Published new capabilities of conductor host-a:8091',
            self.lines('INFO')[-1],
        )
        self.beat(times=3)
        self.assertEqual(2, len(self.backend.history))

    def test_routine_updates_are_published_without_an_info_line(self):
        # An API process's change notices change at every node written.
        self.member = self.make_member(caps('rack1'), routine_updates=True)
        self.member._tick()
        self.member.update(caps('rack2'))
        self.beat()
        self.assertEqual(caps('rack2'), self.published())
        self.assertEqual([], self.lines('INFO')[1:])

    def test_file_driver_leaves_and_joins_to_update(self):
        self.backend.updates_in_place = False
        self.member._tick()
        self.member.update(caps('rack2'))
        self.beat()
        self.assertEqual(caps('rack2'), self.published())
        self.assertEqual(
            [('join', NAME), ('leave', NAME), ('join', NAME)],
            self.backend.history,
        )

    def test_rejoins_after_the_backend_restarted_empty(self):
        self.member._tick()
        self.backend.restart_empty()
        self.beat()
        self.assertEqual(caps('rack1'), self.published())
        self.assertEqual([('join', NAME)] * 2, self.backend.history)
        self.assertTrue(self.member.joined.is_set())

    def test_rejoins_after_its_entry_expired(self):
        self.member._tick()
        # Stalled for longer than the member timeout: a reader dropped it.
        self.clock.advance(TIMEOUT + 1)
        self.assertEqual({}, self.backend.members(GROUP))
        self.member._tick()
        self.assertEqual(caps('rack1'), self.published())
        self.assertEqual([('join', NAME)] * 2, self.backend.history)

    def test_takes_over_the_entry_of_a_previous_run(self):
        self.backend.add(GROUP, NAME.encode(), caps('old'))
        self.member._tick()
        self.assertEqual(caps('rack1'), self.published())
        self.assertEqual([('update', NAME)], self.backend.history)
        (line,) = self.lines('INFO')
        self.assertIn('left by a previous run: taking the entry over', line)
        self.beat(times=3)
        self.assertEqual(1, len(self.backend.history))

    def test_name_taken_between_list_and_join(self):
        self.backend.groups[GROUP] = {}

        def other_process_joins():
            self.backend.add(GROUP, NAME.encode(), caps('other'))

        self.backend.after_list = other_process_joins
        self.member._tick()
        self.assertEqual(caps('rack1'), self.published())
        self.assertTrue(self.member.joined.is_set())
        (warning,) = self.lines('WARNING')
        self.assertIn('is already in group conductors', warning)
        self.assertIn('Taking the entry over', warning)


class ComposeTestCase(MemberTestCase):
    """What is published can depend on what was published before: the
    rollout of a change (ironic_affinity.rollout) is built that way."""

    def setUp(self):
        super().setUp()
        self.seen = []
        self.member = self.make_member(caps('rack1'), compose=self.compose)

    def compose(self, previous, wanted):
        self.seen.append(previous)
        return dict(wanted, conductor_group=self.label)

    label = 'first'

    def test_joining_composes_from_nothing(self):
        self.member._tick()
        self.assertEqual([None], self.seen)
        self.assertEqual('first', self.published()['conductor_group'])

    def test_each_beat_composes_from_what_was_published(self):
        self.member._tick()
        first = self.published()
        # The same answer again: nothing is written.
        self.beat()
        self.assertEqual([None, first], self.seen)
        self.assertEqual([('join', NAME)], self.backend.history)
        # An answer that changes with time is published at the next beat.
        self.label = 'second'
        self.beat()
        self.assertEqual('second', self.published()['conductor_group'])
        self.assertEqual(
            [('join', NAME), ('update', NAME)], self.backend.history
        )

    def test_taking_over_composes_from_the_entry(self):
        self.backend.add(GROUP, NAME.encode(), caps('old'))
        self.member._tick()
        self.assertEqual([caps('old')], self.seen)

    def test_joining_again_composes_from_what_was_published(self):
        # Our entry was lost while we ran (the backend restarted empty):
        # we were a member all along, not a new one.
        self.member._tick()
        first = self.published()
        self.backend.restart_empty()
        self.beat()
        self.assertEqual([None, first], self.seen)


class OutageTestCase(MemberTestCase):
    def test_outage_warns_once_and_recovers_once(self):
        self.member._tick()
        self.backend.go_down()
        self.beat(times=3)
        self.assertFalse(self.member.joined.is_set())
        (warning,) = self.lines('WARNING')
        self.assertIn(
            'Conductor host-a:8091 cannot reach the coordination backend '
            'redis://:***@h:6379: Error 111 connecting: Connection refused. '
            'Retrying every 1.0 s.',
            warning,
        )
        self.assertNotIn('s3cret', self.log.output)
        self.backend.come_back()
        self.beat(times=2)
        self.assertTrue(self.member.joined.is_set())
        self.assertIn(
            'reached the coordination backend again after 3.0 s',
            self.lines('INFO')[-1],
        )
        self.assertEqual(1, len(self.lines('WARNING')))
        self.assertEqual(2, len(self.lines('INFO')))
        # A short outage: the same client, the same entry.
        self.assertEqual(1, len(self.factory.made))
        self.assertEqual([('join', NAME)], self.backend.history)

    def test_a_new_outage_warns_again(self):
        self.member._tick()
        for _ in range(2):
            self.backend.go_down()
            self.beat()
            self.backend.come_back()
            self.beat()
        self.assertEqual(2, len(self.lines('WARNING')))

    def test_long_outage_starts_a_new_client(self):
        self.member._tick()
        (first,) = self.factory.made
        self.backend.go_down()
        self.beat()
        # Failing for the member timeout, not longer: the same client.
        self.beat(times=TIMEOUT)
        self.assertFalse(first.stopped)
        self.beat()
        self.assertTrue(first.stopped)
        self.backend.come_back()
        self.beat()
        self.assertTrue(self.member.joined.is_set())
        latest = self.factory.made[-1]
        self.assertIsNot(first, latest)
        self.assertTrue(latest.started)
        # The entry outlived the outage (beats are the member's, not the
        # client's): the new client carries it on, no leave, no join.
        self.assertEqual(caps('rack1'), self.published())
        self.assertEqual([('join', NAME)], self.backend.history)
        self.assertEqual(1, len(self.lines('WARNING')))

    def test_a_discarded_client_does_not_leave(self):
        # tooz's stop() leaves every group the client joined; a client
        # given up on must not take our entry with it.
        self.member._tick()
        (first,) = self.factory.made
        self.member._reset()
        self.assertTrue(first.stopped)
        self.assertEqual([('join', NAME)], self.backend.history)
        self.assertEqual(caps('rack1'), self.published())
        self.beat()
        self.assertEqual([('join', NAME)], self.backend.history)
        self.assertEqual(2, len(self.factory.made))


def wait_until(predicate, seconds=5.0):
    """Whether ``predicate()`` came true within ``seconds`` (real time)."""
    deadline = time.monotonic() + seconds
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


class DeadlineTestCase(MemberTestCase):
    """Calls that do not answer, as a ZooKeeper heartbeat waits for
    kazoo to reconnect however long the server is away."""

    DEADLINE = 0.05

    def setUp(self):
        super().setUp()
        self.member = self.make_member(
            caps('rack1'), call_deadline=self.DEADLINE
        )

    def timed_beat(self):
        started = time.monotonic()
        self.beat()
        return time.monotonic() - started

    def test_default_deadline_is_the_member_timeout(self):
        self.assertEqual(
            float(TIMEOUT), self.make_member(caps('rack1')).call_deadline
        )

    def test_a_beat_past_its_deadline_gives_the_client_up(self):
        self.member._tick()
        (first,) = self.factory.made
        first.hang()
        self.addCleanup(first.release)
        # The beat does not wait for the answer: an outage.
        self.assertLess(self.timed_beat(), 2.0)
        self.assertFalse(self.member.joined.is_set())
        (warning,) = self.lines('WARNING')
        self.assertIn(
            'Conductor host-a:8091 cannot reach the coordination backend '
            'redis://:***@h:6379: no answer within 0.05 s',
            warning,
        )
        # The next beat goes on with a new client while the old one's
        # call is still under way.
        self.beat()
        self.assertTrue(self.member.joined.is_set())
        self.assertEqual(2, len(self.factory.made))
        self.assertFalse(first.stopped)
        self.assertIn(
            'reached the coordination backend again', self.log.output
        )
        # Once its call returns, the old client is discarded by the
        # call's thread, without leaving: the entry carries on.
        first.release()
        self.assertTrue(wait_until(lambda: first.stopped))
        self.assertEqual([('join', NAME)], self.backend.history)
        self.assertEqual(caps('rack1'), self.published())
        self.assertEqual([], self.backend.overlaps())

    def test_why_a_call_given_up_on_failed_is_logged(self):
        self.member._tick()
        (first,) = self.factory.made
        first.hang()
        self.addCleanup(first.release)
        self.beat()
        self.backend.go_down()
        first.release()
        self.assertTrue(wait_until(lambda: first.stopped))
        self.assertIn(
            'A call of conductor host-a:8091 to the coordination backend '
            'redis://:***@h:6379, given up after 0.05 s, failed since: '
            'Error 111 connecting: Connection refused',
            self.lines('WARNING')[-1],
        )
        self.assertNotIn('s3cret', self.log.output)

    def test_rejoins_at_once_when_the_entry_expired_meanwhile(self):
        # ZooKeeper's case: the old client's session expired while its
        # heartbeat waited, and with it our entry. The member learns it
        # from its new client, not when the old one reconnects.
        self.member._tick()
        (first,) = self.factory.made
        first.hang()
        self.addCleanup(first.release)
        self.beat()
        self.clock.advance(TIMEOUT + 1)
        self.assertEqual({}, self.backend.members(GROUP))
        self.assertLess(self.timed_beat(), 2.0)
        self.assertEqual(caps('rack1'), self.published())
        self.assertEqual([('join', NAME)] * 2, self.backend.history)
        self.assertTrue(self.member.joined.is_set())
        self.assertEqual([], self.backend.overlaps())

    def test_a_start_past_its_deadline_gives_the_client_up(self):
        self.backend.make_slow()
        self.addCleanup(self.backend.let_through)
        self.assertLess(self.timed_beat(), 2.0)
        self.assertFalse(self.member.joined.is_set())
        (first,) = self.factory.made
        self.backend.let_through()
        # The late start is undone by the call's thread.
        self.assertTrue(wait_until(lambda: first.stopped))
        self.beat()
        self.assertTrue(self.member.joined.is_set())
        self.assertEqual(2, len(self.factory.made))
        self.assertEqual([('join', NAME)], self.backend.history)
        self.assertEqual([], self.backend.overlaps())

    def test_stop_during_a_hung_beat(self):
        running = self.make_member(
            caps('rack1'), heartbeat_interval=0.01, call_deadline=0.05
        )
        running.start()
        self.assertTrue(running.joined.wait(2.0))
        for client in self.factory.made:
            client.hang()
            self.addCleanup(client.release)
        # Stopped while a beat waits for its answer.
        self.assertTrue(self.backend.blocked.wait(2.0))
        started = time.monotonic()
        running.stop()
        self.assertLess(time.monotonic() - started, 2.0)
        self.assertFalse(running._thread.is_alive())
        # Nothing left to leave with: the entry expires on its own.
        self.assertNotIn(('leave', NAME), self.backend.history)
        self.assertEqual([], self.backend.overlaps())


class ThreadTestCase(MemberTestCase):
    def test_leaves_on_stop(self):
        running = self.make_member(caps('rack1'), heartbeat_interval=0.01)
        running.start()
        self.assertTrue(running.joined.wait(2.0))
        running.stop()
        self.assertFalse(running._thread.is_alive())
        self.assertEqual(('leave', NAME), self.backend.history[-1])
        self.assertEqual({}, self.backend.members(GROUP))
        self.assertFalse(running.joined.is_set())
        self.assertIn(
            'Conductor host-a:8091 left the group', self.lines('INFO')[-1]
        )
        for client in self.factory.made:
            self.assertTrue(client.stopped)

    def test_stop_during_an_outage_warns(self):
        running = self.make_member(caps('rack1'), heartbeat_interval=0.01)
        running.start()
        self.assertTrue(running.joined.wait(2.0))
        self.backend.go_down()
        running.stop()
        self.assertIn(
            'could not leave the group cleanly', self.lines('WARNING')[-1]
        )
        self.assertIn('it will expire in 5 s', self.lines('WARNING')[-1])

    def test_hand_over_keeps_the_entry(self):
        running = self.make_member(caps('rack1'), heartbeat_interval=0.01)
        running.start()
        self.assertTrue(running.joined.wait(2.0))
        running.update(caps('rack2'))
        running.hand_over()
        self.assertIn('is being replaced', self.log.output)
        # Beats go on, with the latest capabilities, until the process
        # exits; the entry is never left.
        for _ in range(3):
            running.joined.clear()
            self.assertTrue(running.joined.wait(2.0))
        self.assertEqual(caps('rack2'), self.published())
        self.assertNotIn(('leave', NAME), self.backend.history)


class LeaseTestCase(MemberTestCase):
    """What a member tells its own lease (membership/lease.py)."""

    def setUp(self):
        super().setUp()
        self.lease = lease.Lease(NAME, TIMEOUT, 2.0, clock=self.clock)
        self.member.lease = self.lease

    def test_no_lease_before_a_heartbeat(self):
        self.assertTrue(self.lease.lapsed())
        self.assertIsNone(self.lease.resumed_at)

    def test_each_acknowledged_beat_renews_it(self):
        self.member._tick()
        self.assertEqual(self.clock.now, self.lease.resumed_at)
        started = self.clock.now
        for _ in range(10):
            self.beat()
            self.assertFalse(self.lease.lapsed())
        # One lease all along: it never ran out.
        self.assertEqual(started, self.lease.resumed_at)

    def test_it_runs_out_a_margin_before_the_backend_drops_the_member(self):
        self.member._tick()
        self.backend.go_down()
        self.beat(times=2)
        self.assertFalse(self.lease.lapsed())
        self.beat()  # 3 s = TIMEOUT - margin after the last acknowledged
        self.assertTrue(self.lease.lapsed())
        self.assertIn(NAME.encode(), self.backend.groups[GROUP])
        self.backend.come_back()
        self.beat()
        self.assertFalse(self.lease.lapsed())
        # A new lease, from the beat that healed it.
        self.assertEqual(self.clock.now, self.lease.resumed_at)

    def test_a_beat_that_fails_renews_nothing(self):
        self.member._tick()
        acknowledged = self.clock.now
        self.backend.go_down()
        self.beat()
        self.assertEqual(1.0, self.lease.age())
        self.assertEqual(acknowledged, self.lease.resumed_at)

    def test_a_late_acknowledgement_does_not_move_it_back(self):
        self.lease.renewed(10.0)
        self.lease.renewed(9.0)
        self.assertEqual(self.clock.now - 10.0, self.lease.age())

    def test_margin_is_a_beat_and_a_second_at_most_half_the_timeout(self):
        self.assertEqual(2.0, lease.margin_for(5, 1.0))
        self.assertEqual(1.5, lease.margin_for(3, 1.0))
        self.assertEqual(1.5, lease.margin_for(30, 0.5))

    def test_a_timeout_that_leaves_no_lease_is_refused(self):
        # A lease of 1 s after each heartbeat, sent every 1 s: the
        # conductor would stand down at every heartbeat.
        error = self.assertRaises(
            exception.InvalidTimers, lease.margin_for, 2, 1.0
        )
        self.assertIn('member_timeout (2 s) must be more than', str(error))
        self.assertIn('heartbeat_interval (1.0 s)', str(error))
        self.assertRaises(exception.InvalidTimers, lease.margin_for, 10, 5.0)
        # Just above twice the interval: a lease of 0.5 s beyond it.
        self.assertEqual(5.0, lease.margin_for(10, 4.5))
