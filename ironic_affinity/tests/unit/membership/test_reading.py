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

"""Reading members on every tooz: tooz's real file driver where the
behaviour is the driver's, a fake coordinator where it is the order and
timing of calls."""

import threading
import time

import fixtures
import tooz
from tooz import coordination

from ironic_affinity import profile
from ironic_affinity.membership import backend
from ironic_affinity.membership import capabilities
from ironic_affinity.membership import reading
from ironic_affinity.membership import view
from ironic_affinity.tests import base

GROUP = b'conductors'
CAPS = {
    name: capabilities.encode(
        profile.ConductorProfile.build(name, soft_affinity_tags=rack)
    )
    for name, rack in (('a', 'rack1'), ('b', 'rack2'), ('c', 'rack3'))
}


class Done:
    """A tooz result that is already there."""

    def __init__(self, value):
        self.value = value

    def get(self, timeout=None):
        return self.value


class ListThenCapabilities:
    """A real coordinator seen as tooz before 9.1.0 shows it: no
    get_members_with_capabilities."""

    def __init__(self, real, after_list=None):
        self.real = real
        self.after_list = after_list
        self.asked = []

    def get_members(self, group):
        members = self.real.get_members(group).get()
        if self.after_list is not None:
            self.after_list()
        return Done(members)

    def get_member_capabilities(self, group, member):
        self.asked.append(backend.decode_member_id(member))
        return self.real.get_member_capabilities(group, member)


class BaseClassOnly(ListThenCapabilities):
    """A driver of tooz 9.1.0 that does not override the new call (ipc,
    mysql, pgsql, kubernetes): the base class raises NotImplemented."""

    def get_members_with_capabilities(self, group):
        raise tooz.NotImplemented('not implemented')


class FileDriverTestCase(base.TestCase):
    def setUp(self):
        super().setUp()
        self.url = 'file://' + self.useFixture(fixtures.TempDir()).path
        self.reader = self.coordinator('observer')
        self.members = {}

    def coordinator(self, name):
        # Synchronous: recent futurist takes a second to stop a thread
        # pool, and these tests check what the driver answers, not when.
        coordinator = coordination.get_coordinator(
            self.url, name.encode(), timeout='30', executor='synchronous'
        )
        coordinator.start(start_heart=False)
        self.addCleanup(coordinator.stop)
        return coordinator

    def join(self, *names):
        for name in names:
            member = self.coordinator(name)
            try:
                member.create_group(GROUP).get()
            except coordination.GroupAlreadyExist:
                pass
            member.join_group(GROUP, CAPS[name]).get()
            self.members[name] = member

    def read(self, coordinator):
        found = reading.members_with_capabilities(coordinator, GROUP, 5)
        return {backend.decode_member_id(m): c for m, c in found.items()}

    def test_installed_tooz(self):
        # Whichever path the installed tooz takes.
        self.join('a', 'b', 'c')
        self.assertEqual(CAPS, self.read(self.reader))

    def test_without_the_call(self):
        self.join('a', 'b', 'c')
        older = ListThenCapabilities(self.reader)
        self.assertEqual(CAPS, self.read(older))
        self.assertEqual(['a', 'b', 'c'], sorted(older.asked))

    def test_base_class_not_implemented(self):
        self.join('a', 'b')
        other = BaseClassOnly(self.reader)
        self.assertEqual({'a': CAPS['a'], 'b': CAPS['b']}, self.read(other))
        self.assertEqual(['a', 'b'], sorted(other.asked))

    def test_member_leaving_between_the_calls_is_absent(self):
        self.join('a', 'b', 'c')

        def b_leaves():
            self.members['b'].leave_group(GROUP).get()

        older = ListThenCapabilities(self.reader, after_list=b_leaves)
        self.assertEqual({'a': CAPS['a'], 'c': CAPS['c']}, self.read(older))
        # It was listed, and asked for: the driver said it was gone.
        self.assertIn('b', older.asked)

    def test_empty_group(self):
        self.join('a')
        self.members['a'].leave_group(GROUP).get()
        self.assertEqual({}, self.read(self.reader))
        self.assertEqual({}, self.read(ListThenCapabilities(self.reader)))

    def test_no_group(self):
        for reader in (self.reader, ListThenCapabilities(self.reader)):
            self.assertRaises(coordination.GroupNotCreated, self.read, reader)

    def test_view_on_either_path(self):
        self.join('a', 'b')
        member_view = view.MemberView(self.url, GROUP.decode(), 1.0, 5)
        self.addCleanup(member_view.stop)
        member_view._coordinator = ListThenCapabilities(self.reader)
        snapshot = member_view.refresh()
        self.assertEqual({'a', 'b'}, set(snapshot.members))
        self.assertFalse(snapshot.stale)
        member_view._coordinator = self.reader
        self.assertEqual(snapshot.version, member_view.refresh().version)
        # The test stops the reader itself.
        member_view._coordinator = None


class Recorded:
    """A result that logs when it is collected, then answers ``value`` (or
    raises it, an exception)."""

    def __init__(self, log, name, value, delay=0.0):
        self.log = log
        self.name = name
        self.value = value
        self.delay = delay
        self.timeouts = []

    def get(self, timeout=None):
        self.timeouts.append(timeout)
        self.log.append(('collect', self.name))
        if self.delay:
            threading.Event().wait(min(self.delay, timeout))
            if self.delay > timeout:
                raise coordination.OperationTimedOut('slow')
        if isinstance(self.value, Exception):
            raise self.value
        return self.value


class FakeCoordinator:
    def __init__(self, answers, list_delay=0.0, cap_delay=0.0):
        self.answers = answers
        self.list_delay = list_delay
        self.cap_delay = cap_delay
        self.log = []
        self.results = []

    def get_members(self, group):
        self.log.append(('list', None))
        return Recorded(
            self.log, None, set(self.answers), delay=self.list_delay
        )

    def get_member_capabilities(self, group, member):
        self.log.append(('ask', member))
        result = Recorded(
            self.log, member, self.answers[member], delay=self.cap_delay
        )
        self.results.append(result)
        return result


class CallOrderTestCase(base.TestCase):
    def test_native_call_used_when_there(self):
        fake = FakeCoordinator({b'a': CAPS['a']})
        fake.get_members_with_capabilities = lambda group: Done({b'x': {}})
        self.assertEqual(
            {b'x': {}}, reading.members_with_capabilities(fake, GROUP, 5)
        )
        self.assertEqual([], fake.log)

    def test_every_member_asked_before_any_collected(self):
        fake = FakeCoordinator({b'a': 1, b'b': 2, b'c': 3})
        self.assertEqual(
            {b'a': 1, b'b': 2, b'c': 3},
            reading.members_with_capabilities(fake, GROUP, 5),
        )
        kinds = [kind for kind, _ in fake.log]
        self.assertEqual(['list', 'collect'], kinds[:2])
        self.assertEqual(['ask'] * 3 + ['collect'] * 3, kinds[2:])

    def test_other_errors_are_failures(self):
        fake = FakeCoordinator(
            {b'a': 1, b'b': tooz.ToozError('connection lost')}
        )
        self.assertRaises(
            tooz.ToozError, reading.members_with_capabilities, fake, GROUP, 5
        )

    def test_group_deleted_between_the_calls(self):
        fake = FakeCoordinator({b'a': coordination.GroupNotCreated(GROUP)})
        self.assertRaises(
            coordination.GroupNotCreated,
            reading.members_with_capabilities,
            fake,
            GROUP,
            5,
        )

    def test_one_timeout_for_the_whole_read(self):
        # The list takes 0.2 s of 0.5: the capabilities get what is left.
        fake = FakeCoordinator({b'a': 1, b'b': 2}, list_delay=0.2)
        reading.members_with_capabilities(fake, GROUP, 0.5)
        for result in fake.results:
            self.assertLessEqual(result.timeouts[0], 0.31)

    def test_slow_members_time_out_once(self):
        fake = FakeCoordinator(
            {b'a': 1, b'b': 2, b'c': 3, b'd': 4}, cap_delay=10
        )
        start = time.monotonic()
        self.assertRaises(
            coordination.OperationTimedOut,
            reading.members_with_capabilities,
            fake,
            GROUP,
            0.3,
        )
        self.assertLess(time.monotonic() - start, 1.0)
