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

"""Membership against real coordination servers, one class per driver.

Members are separate processes (member_process.py) running with the
plugin's default timers; the view is held by the test process, i.e. a
second process, as an API service would hold it.
"""

from importlib import metadata
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
import uuid

import fixtures
from oslo_config import cfg
from testtools import content
from tooz import coordination

from ironic_affinity import conf as affinity_conf
from ironic_affinity import profile
from ironic_affinity.membership import backend
from ironic_affinity.membership import capabilities
from ironic_affinity.membership import levels
from ironic_affinity.membership import reading
from ironic_affinity.membership import service
from ironic_affinity.membership import view
from ironic_affinity.tests import base
from ironic_affinity.tests.functional import member_process
from ironic_affinity.tests.functional import servers

LOG = logging.getLogger(__name__)

# The defaults of [affinity]: tests run with what operators get.
TIMEOUT = 5
WATCH = 1.0
# A dead member must leave the view within its timeout plus a watch
# interval, a heartbeat interval and scheduling slack.
DROP_BOUND = TIMEOUT + WATCH + 1.0 + 2.0

TAGS = {
    'hard_affinity_tags': 'dc1',
    'hard_anti_affinity_tags': 'customer9',
    'soft_affinity_tags': 'rack10:3, network1',
    'soft_anti_affinity_tags': 'rack20',
}


class MemberHelpers:
    """A server, a view in this process, member processes."""

    server_class: type[servers.Server]

    def make_server(self):
        return self.server_class()

    def setUp(self):
        super().setUp()
        self.server = self.useFixture(self.make_server())
        self.group = 'test-%s' % uuid.uuid4().hex[:8]
        self.conf_dir = self.useFixture(fixtures.TempDir()).path
        self.processes = {}
        # The view's log lines, with the time: on a failure, to lay them
        # beside the members' and the server's.
        self.useFixture(
            fixtures.FakeLogger(
                name='ironic_affinity',
                level=logging.INFO,
                format='%(asctime)s %(levelname)s %(name)s %(message)s',
            )
        )
        self.addOnException(self._attach_logs)
        self.view = self._view()

    def conf_for(self, url):
        """Options for a view in this process on ``url`` and our group."""
        conf = cfg.ConfigOpts()
        affinity_conf.register_opts(conf)
        conf([], default_config_files=[])
        conf.set_override('backend_url', url, group='affinity')
        conf.set_override('group_name', self.group, group='affinity')
        return conf

    def members_command(self, config_file, *options):
        """Run ``ironic-affinity`` with a configuration file."""
        command = os.path.join(
            os.path.dirname(sys.executable), 'ironic-affinity'
        )
        return subprocess.run(
            [command, '--config-file', config_file, *options],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    def logs(self):
        """Everything the member processes logged."""
        text = ''
        for name in sorted(os.listdir(self.conf_dir)):
            if name.endswith('.log'):
                with open(os.path.join(self.conf_dir, name)) as handle:
                    text += handle.read()
        return text

    def _attach_logs(self, exc_info):
        self.addDetail('member-logs', content.text_content(self.logs()))
        server_log = os.path.join(
            getattr(self.server, 'dir', ''), 'server.log'
        )
        if os.path.exists(server_log):
            self.addDetail(
                'server-log',
                content.content_from_file(server_log, buffer_now=True),
            )

    def _view(self):
        member_view = service.member_view(self.conf_for(self.server.url))
        member_view.start()
        self.addCleanup(member_view.stop)
        return member_view

    def _write_conf(self, name, tags):
        path = os.path.join(self.conf_dir, '%s.conf' % name)
        lines = [
            '[affinity]',
            'backend_url = %s' % self.server.url,
            'group_name = %s' % self.group,
        ]
        lines += ['%s = %s' % item for item in sorted(tags.items())]
        with open(path, 'w') as handle:
            handle.write('\n'.join(lines) + '\n')
        return path

    def start_member(self, name, tags=None, extra=()):
        path = self._write_conf(name, TAGS if tags is None else tags)
        log = open(os.path.join(self.conf_dir, '%s.log' % name), 'ab')
        process, joined = member_process.spawn(path, name, *extra, stderr=log)
        log.close()
        self.addCleanup(self._reap, process)
        self.assertTrue(joined, 'member %s never joined' % name)
        self.processes[name] = process
        return process

    def _reap(self, process):
        if process.poll() is None:
            process.kill()
        process.wait(10)
        process.stdout.close()

    def members_hiding(self, password, shown):
        """Run ``ironic-affinity members`` beside a member, both with
        --debug: it lists the backend as ``shown``, and ``password`` is
        in no output and no log. The command's result."""
        self.start_member('a', extra=['--debug'])
        self.wait_view(lambda s: 'a' in s.members)
        path = os.path.join(self.conf_dir, 'a.conf')
        result = self.members_command(path, '--debug', 'members')
        self.assertEqual(0, result.returncode, result.stderr)
        self.assertIn(shown, result.stdout)
        for text in (result.stdout, result.stderr, self.logs()):
            self.assertNotIn(password, text)
        return result

    def sample_view(self):
        """The view's snapshots, taken every 0.1 s in a thread until the
        event is set: (snapshots, event, thread)."""
        samples = []
        done = threading.Event()

        def sample():
            while not done.is_set():
                samples.append(self.view.snapshot())
                time.sleep(0.1)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        self.addCleanup(done.set)
        return samples, done, sampler

    def wait_view(self, predicate, timeout=30.0):
        snapshot = self.view.wait_for(predicate, timeout)
        self.assertIsNotNone(
            snapshot, 'view never matched; last: %r' % (self.view.snapshot(),)
        )
        return snapshot


class MembershipMixin(MemberHelpers):
    """What every driver must do."""

    def test_join_with_capabilities(self):
        self.start_member(
            'host-a:8091',
            extra=[
                '--hardware-types',
                'ipmi,redfish',
                '--conductor-group',
                'Rack-A',
            ],
        )
        snapshot = self.wait_view(lambda s: 'host-a:8091' in s.members)
        self.assertEqual(
            profile.ConductorProfile.build(
                'host-a:8091',
                hardware_types=['ipmi', 'redfish'],
                conductor_group='rack-a',
                **TAGS,
            ),
            snapshot.members['host-a:8091'],
        )
        self.assertFalse(snapshot.stale)
        self.assertLess(snapshot.age(), 5)

    def test_members_command(self):
        self.start_member('host-a:8091')
        self.wait_view(lambda s: 'host-a:8091' in s.members)
        path = os.path.join(self.conf_dir, 'host-a:8091.conf')
        result = self.members_command(path, 'members', '-f', 'json')
        self.assertEqual(0, result.returncode, result.stderr)
        report = json.loads(result.stdout)
        self.assertTrue(report['readable'])
        self.assertEqual(self.group, report['group'])
        (member,) = report['members']
        self.assertEqual('host-a:8091', member['name'])
        self.assertEqual('network1, rack10:3', member['soft_affinity_tags'])
        self.assertEqual(['dc1'], member['hard_affinity_tags'])

    def test_clean_leave(self):
        process = self.start_member('a')
        self.start_member('b')
        self.wait_view(lambda s: {'a', 'b'} <= set(s.members))
        process.send_signal(signal.SIGTERM)
        process.wait(30)
        # Timed from the exit: its last heartbeat was just before, so an
        # entry left to expire would stay the member timeout from here.
        # (From the signal, a loaded machine's slow exit counted too:
        # 7.7 s in the full matrix on ba0336f.)
        exited = time.monotonic()
        self.wait_view(lambda s: set(s.members) == {'b'})
        # Leaving is immediate: no waiting for the member timeout.
        self.assertLess(time.monotonic() - exited, TIMEOUT)

    def test_sigkill_drops_member(self):
        process = self.start_member('a')
        self.start_member('b')
        before = self.wait_view(lambda s: {'a', 'b'} <= set(s.members))
        start = time.monotonic()
        process.kill()
        after = self.wait_view(lambda s: set(s.members) == {'b'}, 60)
        self.assertLess(time.monotonic() - start, DROP_BOUND)
        self.assertGreater(after.version, before.version)

    def test_tag_change_without_restart(self):
        process = self.start_member('a')
        self.start_member('b')
        before = self.wait_view(lambda s: {'a', 'b'} <= set(s.members))
        changed = dict(TAGS, soft_affinity_tags='rack11:7')
        self._write_conf('a', changed)
        process.send_signal(signal.SIGHUP)
        after = self.wait_view(
            lambda s: (
                'a' in s.members
                and dict(s.members['a'].soft_affinity_tags) == {'rack11': 7}
            )
        )
        self.assertEqual(before.members['b'], after.members['b'])
        self.assertEqual(process.poll(), None)
        self.assertEqual({'a', 'b'}, set(after.members))

    def test_rebalance_period_publishes_the_changes(self):
        # A join, then a reload of the tags: both published as changes
        # that nodes follow over the period, with what came before.
        paced = dict(TAGS, rebalance_period='60')
        started = time.time()
        process = self.start_member('a', paced)
        joined = self.wait_view(lambda s: 'a' in s.members).members['a']
        (join,) = joined.changes
        self.assertIsNone(join.before)
        self.assertEqual(60.0, join.period)
        self.assertTrue(started - 1 <= join.at <= time.time() + 1)
        self._write_conf('a', dict(paced, soft_affinity_tags='rack11:7'))
        process.send_signal(signal.SIGHUP)
        after = self.wait_view(
            lambda s: 'a' in s.members and len(s.members['a'].changes) == 2
        ).members['a']
        self.assertEqual(join, after.changes[0])
        self.assertEqual(joined.without_changes(), after.changes[1].before)
        self.assertEqual({'rack11': 7}, dict(after.soft_affinity_tags))
        self.assertLessEqual(join.at, after.changes[1].at)

    def test_bad_tags_on_reload_keep_last_profile(self):
        process = self.start_member('a')
        self.wait_view(lambda s: 'a' in s.members)
        self._write_conf('a', dict(TAGS, soft_affinity_tags='bad!tag'))
        process.send_signal(signal.SIGHUP)
        # A later good change is still taken, so the bad one was refused
        # rather than the member stuck.
        time.sleep(2 * WATCH)
        self.assertEqual(
            {'rack10': 3, 'network1': 1},
            dict(self.view.snapshot().members['a'].soft_affinity_tags),
        )
        self._write_conf('a', dict(TAGS, soft_affinity_tags='rack12'))
        process.send_signal(signal.SIGHUP)
        # The file driver republishes by leaving and joining again,
        # which a view may see as a moment's absence.
        self.wait_view(
            lambda s: (
                'a' in s.members
                and dict(s.members['a'].soft_affinity_tags) == {'rack12': 1}
            )
        )

    def test_version_changes_only_on_change(self):
        self.start_member('a')
        first = self.wait_view(lambda s: 'a' in s.members)
        time.sleep(3 * WATCH)
        self.assertEqual(first.version, self.view.snapshot().version)

    def test_restart_under_same_name_leaves_no_ghost(self):
        process = self.start_member('a')
        self.start_member('b')
        self.wait_view(lambda s: {'a', 'b'} <= set(s.members))
        process.kill()
        process.wait(10)
        self.start_member('a', dict(TAGS, soft_affinity_tags='rack99'))
        self.wait_view(
            lambda s: (
                'a' in s.members
                and dict(s.members['a'].soft_affinity_tags) == {'rack99': 1}
            ),
            60,
        )
        # Past the old entry's expiry, exactly the live members remain,
        # the restarted one with its new profile.
        time.sleep(TIMEOUT + 2 * WATCH)
        snapshot = self.wait_view(
            lambda s: (
                set(s.members) == {'a', 'b'}
                and dict(s.members['a'].soft_affinity_tags) == {'rack99': 1}
            )
        )
        self.assertEqual({}, dict(snapshot.rejected))

    def test_untrusted_capabilities_left_out(self):
        self.start_member('good')
        rogue = backend.coordinator(self.server.url, 'rogue', TIMEOUT)
        rogue.start(start_heart=False)
        self.addCleanup(rogue.stop)
        rogue.heartbeat()
        try:
            rogue.create_group(self.group.encode()).get()
        except coordination.GroupAlreadyExist:
            pass
        rogue.join_group(
            self.group.encode(), {'format': 1, 'soft_affinity_tags': 'x'}
        ).get()
        snapshot = self.wait_view(lambda s: 'rogue' in s.rejected)
        self.assertIn('soft_affinity_tags', snapshot.rejected['rogue'])
        self.assertEqual({'good'}, set(snapshot.members))

    def test_a_member_with_keys_this_reader_does_not_know_is_kept(self):
        # A newer release's entry: a key this one does not know, at the
        # top and inside a change, and what it says it runs.
        self.start_member('good')
        newer = backend.coordinator(self.server.url, 'newer', TIMEOUT)
        # Alive as long as the test: the command reads it last.
        newer.start(start_heart=True)
        self.addCleanup(newer.stop)
        try:
            newer.create_group(self.group.encode()).get()
        except coordination.GroupAlreadyExist:
            pass
        entry = capabilities.encode(
            profile.ConductorProfile.build('newer', **TAGS)
        )
        entry['future_key'] = {'any': ['shape']}
        entry.update(version='99.0', reads=levels.LEVEL, writes=levels.LEVEL)
        newer.join_group(self.group.encode(), entry).get()
        snapshot = self.wait_view(lambda s: 'newer' in s.members)
        self.assertEqual({}, dict(snapshot.rejected))
        self.assertEqual(
            profile.ConductorProfile.build('newer', **TAGS),
            snapshot.members['newer'],
        )
        self.assertEqual('99.0', snapshot.runs['newer'].version)
        # And the command lists both, with what each runs.
        path = os.path.join(self.conf_dir, 'good.conf')
        result = self.members_command(path, 'members', '-f', 'json')
        self.assertEqual(0, result.returncode, result.stderr)
        found = {m['name']: m for m in json.loads(result.stdout)['members']}
        self.assertEqual({'good', 'newer'}, set(found))
        self.assertEqual('99.0', found['newer']['version'])
        self.assertEqual(levels.plugin_version(), found['good']['version'])
        self.assertNotIn('unknown key', result.stderr)

    def test_both_read_paths_agree(self):
        # tooz 9.1.0 reads the group in one call where the driver has
        # it; older tooz lists it, then asks each member. Both must see
        # the same members with the same capabilities.
        if not hasattr(
            coordination.CoordinationDriver, 'get_members_with_capabilities'
        ):
            # Both would be list+each (master's constraints pin 9.0.1).
            self.skipTest(
                'tooz %s has no one-call read' % metadata.version('tooz')
            )
        self.start_member('a')
        self.start_member('b', dict(TAGS, soft_affinity_tags='rack7'))
        self.wait_view(lambda s: {'a', 'b'} <= set(s.members))
        reader = backend.coordinator(
            self.server.url, view.observer_id(), TIMEOUT
        )
        reader.start(start_heart=False)
        self.addCleanup(reader.stop)
        group = self.group.encode()
        installed = reading.members_with_capabilities(reader, group, TIMEOUT)
        listed = reading.members_with_capabilities(
            ListThenEach(reader), group, TIMEOUT
        )
        self.assertEqual(
            {'a', 'b'}, {backend.decode_member_id(m) for m in listed}
        )
        self.assertEqual(installed, listed)


class ListThenEach:
    """A client as tooz before 9.1.0 has it: no
    get_members_with_capabilities."""

    def __init__(self, real):
        self.real = real

    def get_members(self, group):
        return self.real.get_members(group)

    def get_member_capabilities(self, group, member):
        return self.real.get_member_capabilities(group, member)


class OutageMixin:
    """Stopping and restarting the server while members keep running."""

    def test_backend_restart(self):
        self.restart_under_members(down=3)

    def test_long_backend_restart(self):
        # Down about 19 s in all (the view takes about 5.6 s to find the
        # server gone, ZooKeeper 1 to 2 s to start), when kazoo's
        # reconnect attempts are 9 s and more apart. A member waiting for
        # its heartbeat's answer reconnected 11 s after the server was
        # back, found its session expired, and rejoined after the view's
        # hold of 10 s had ended (2 runs out of 2).
        self.restart_under_members(down=12)

    def restart_under_members(self, down):
        """Stop the server under two members, start it again ``down``
        seconds after the view found it gone: no member ever vanishes
        from the view."""
        self.start_member('a')
        self.start_member('b')
        self.wait_view(lambda s: {'a', 'b'} <= set(s.members))
        samples, done, sampler = self.sample_view()
        self.server.stop()
        LOG.info('Server stopped')
        stale = self.wait_view(lambda s: s.stale, 120)
        self.assertEqual({'a', 'b'}, set(stale.members))
        time.sleep(down)
        self.server.start()
        LOG.info('Server started')
        self.wait_view(lambda s: not s.stale, 120)
        # A fresh view, with nothing held over, sees them. On ZooKeeper
        # these may still be the entries of their old sessions, which
        # the server restored and expires a member timeout after it
        # started unless their clients reconnect: whether the members
        # carry on is what the view shows past the hold.
        fresh = self._view()
        fresh.wait_for(lambda s: {'a', 'b'} <= set(s.members), 60)
        LOG.info('A fresh view sees %s', sorted(fresh.snapshot().members))
        self.assertEqual({'a', 'b'}, set(fresh.snapshot().members))
        # Past the hold, so that the view shows them on their own merit.
        time.sleep(view.HOLD_TIMEOUTS * TIMEOUT + 2 * WATCH)
        self.assertEqual(frozenset(), self.view.snapshot().held)
        done.set()
        sampler.join(5)
        # Never, during the outage or the recovery, did a member vanish.
        for snapshot in samples + [self.view.snapshot()]:
            self.assertEqual({'a', 'b'}, set(snapshot.members), snapshot)
        for name in ('a', 'b'):
            self.assertIsNone(self.processes[name].poll())

    def test_member_dead_during_outage_is_dropped_after_hold(self):
        process = self.start_member('a')
        self.wait_view(lambda s: 'a' in s.members)
        self.server.stop()
        process.kill()
        process.wait(10)
        self.wait_view(lambda s: s.stale, 120)
        self.server.start()
        self.wait_view(lambda s: not s.stale, 120)
        # Held for a while (nothing is re-placed on the first read back),
        # then gone: the view does not keep it forever, whether the group
        # came back empty (Redis) or its entry expires (etcd, ZooKeeper).
        self.wait_view(
            lambda s: 'a' not in s.members,
            view.HOLD_TIMEOUTS * TIMEOUT + TIMEOUT + 10,
        )


class PasswordTestCase(MemberHelpers, base.TestCase):
    """Redis with requirepass: it works, and the password shows nowhere."""

    PASSWORD = 'S3cret-%s' % uuid.uuid4().hex[:8]

    def make_server(self):
        return servers.RedisServer(self.PASSWORD)

    def test_password_protected_backend(self):
        self.members_hiding(self.PASSWORD, ':***@127.0.0.1')

    def test_wrong_password_is_an_outage_without_the_password(self):
        wrong = self.server.url.replace(self.PASSWORD, 'Wr0ng-pass')
        view = service.member_view(self.conf_for(wrong))
        snapshot = view.refresh_within(5)
        self.assertTrue(snapshot.stale)
        self.assertNotIn('Wr0ng-pass', snapshot.error)


class FileMembershipTestCase(MembershipMixin, base.TestCase):
    server_class = servers.FileBackend


class RedisMembershipTestCase(MembershipMixin, OutageMixin, base.TestCase):
    server_class = servers.RedisServer

    def test_a_given_up_client_does_not_drop_its_successor(self):
        # A member's client given up on during an outage is discarded
        # when its call finally returns, after the member's next client
        # has beaten under the same member id (issue 27: the live member
        # vanished from every view, and joined the group twice).
        group = self.group.encode()
        old = backend.coordinator(self.server.url, 'c1', TIMEOUT)
        old.start(start_heart=False)
        old.create_group(group).get(timeout=TIMEOUT)
        old.heartbeat()
        old.join_group(group, {}).get(timeout=TIMEOUT)
        new = backend.coordinator(self.server.url, 'c1', TIMEOUT)
        new.start(start_heart=False)
        self.addCleanup(backend.discard, new)
        new.heartbeat()
        backend.discard(old)
        reader = backend.coordinator(self.server.url, 'reader', TIMEOUT)
        reader.start(start_heart=False)
        self.addCleanup(backend.discard, reader)
        # Redis readers drop a member whose heartbeat key is gone.
        self.assertEqual({'c1'}, reading.member_names(reader, group, TIMEOUT))


class EtcdMembershipTestCase(MembershipMixin, OutageMixin, base.TestCase):
    server_class = servers.EtcdServer


class ZooKeeperMembershipTestCase(MembershipMixin, OutageMixin, base.TestCase):
    server_class = servers.ZooKeeperServer
