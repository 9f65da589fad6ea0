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

"""What the launchers read of Ironic's conductor service as it stops."""

import sys
import threading
import types
from unittest import mock

import fixtures
from oslo_config import cfg

from ironic_affinity.integration import conductor_lifecycle as lifecycle
from ironic_affinity.integration import launchers
from ironic_affinity.integration import process_services
from ironic_affinity.membership import service
from ironic_affinity.tests import base


class Before2026:
    """Ironic up to 2025.2: an attribute, cleared by SIGUSR1."""

    def __init__(self):
        self.deregister = True


class Since2026:
    """Ironic 2026.1: a property over a flag shared by its processes."""

    flag = True

    @property
    def deregister_on_shutdown(self):
        return self.flag


class DeregistersTestCase(base.TestCase):
    def test_each_release_says_whether_it_deregisters(self):
        old = Before2026()
        self.assertTrue(launchers._deregisters(old))
        old.deregister = False
        self.assertFalse(launchers._deregisters(old))
        new = Since2026()
        self.assertTrue(launchers._deregisters(new))
        new.flag = False
        self.assertFalse(launchers._deregisters(new))
        # Neither: deregistered, as Ironic does by default.
        self.assertTrue(launchers._deregisters(object()))


class StopBudgetTestCase(base.TestCase):
    """A stopping conductor drains within half of the service launcher's
    bound on its stop, leaving Ironic the rest to deregister."""

    def options(self, graceful=None, watch_interval=1.0):
        conf = cfg.ConfigOpts()
        conf.register_opts(
            [cfg.FloatOpt('watch_interval', default=watch_interval)],
            group='affinity',
        )
        if graceful is not None:
            conf.register_opts(
                [cfg.IntOpt('graceful_shutdown_timeout', default=graceful)]
            )
        conf([])
        return conf

    def test_default_timeout_leaves_the_whole_drain(self):
        conf = self.options(graceful=60)
        self.assertEqual(30.0, lifecycle.stop_budget(conf))
        wanted = lifecycle.drain_seconds(conf)
        self.assertEqual(2 * 1.0 + lifecycle.IN_FLIGHT_SECONDS, wanted)
        self.assertEqual(wanted, lifecycle.drain_left(conf, spent=1.0))

    def test_a_short_timeout_cuts_the_drain_to_what_is_left(self):
        # Killed at 5 s, a conductor that spent 1 s leaving and then 4 s
        # draining never deregistered (Ironic 39, end to end).
        conf = self.options(graceful=5)
        self.assertEqual(1.5, lifecycle.drain_left(conf, spent=1.0))
        self.assertEqual(0.0, lifecycle.drain_left(conf, spent=3.0))

    def test_ironics_wait_covers_the_drain_or_not_at_all(self):
        # Ironic serves on until its wait ends, a time counted from the
        # start of the stop: it covers the whole drain, or this one has to
        # drain in full (what Ironic adds then overlaps it).
        conf = self.options(graceful=60)
        wanted = lifecycle.drain_seconds(conf)
        self.assertTrue(lifecycle.covered_by_ironic(conf, 1.0, 15.0))
        self.assertTrue(lifecycle.covered_by_ironic(conf, 1.0, 1.0 + wanted))
        self.assertFalse(lifecycle.covered_by_ironic(conf, 1.0, wanted))
        self.assertFalse(lifecycle.covered_by_ironic(conf, 0.5, 0.0))

    def test_no_bound_when_waiting_for_ever_or_unknown(self):
        for conf in (self.options(graceful=0), self.options()):
            self.assertIsNone(lifecycle.stop_budget(conf))
            self.assertEqual(
                lifecycle.drain_seconds(conf),
                lifecycle.drain_left(conf, spent=100.0),
            )


class IronicServesForTestCase(base.TestCase):
    """How long an Ironic with the hooks keeps a stopping conductor
    serving after its stop hook, as the hook reads it from Ironic."""

    def serves_for(self, online=(), error=None):
        instance = mock.Mock()
        instance.get_online_conductors.return_value = list(online)
        instance.get_online_conductors.side_effect = error
        api = types.ModuleType('ironic.db.api')
        api.get_instance = lambda: instance
        db = types.ModuleType('ironic.db')
        db.api = api
        conf = types.ModuleType('ironic.conf')
        conf.CONF = mock.Mock(hash_ring_reset_interval=15)
        ironic = types.ModuleType('ironic')
        ironic.conf, ironic.db = conf, db
        modules = {
            'ironic': ironic,
            'ironic.conf': conf,
            'ironic.db': db,
            'ironic.db.api': api,
        }
        with mock.patch.dict(sys.modules, modules):
            return lifecycle.ironic_serves_for('c1')

    def test_more_than_one_other_conductor_online(self):
        self.assertEqual(15.0, self.serves_for(['c1', 'c2', 'c3']))

    def test_one_other_conductor_is_not_enough_for_ironic(self):
        # Ironic counts the online conductors once this one has
        # deregistered, and waits only for more than one.
        self.assertEqual(0.0, self.serves_for(['c1', 'c2']))

    def test_an_unreadable_database_drains_in_full(self):
        self.assertEqual(0.0, self.serves_for(error=RuntimeError('gone')))


class StoppingTestCase(base.TestCase):
    """A conductor's stop, through Ironic's hook or the launcher: it
    leaves once, and drains only when it did leave."""

    def test_drains_only_after_leaving_and_only_once(self):
        drained = []
        self.useFixture(
            fixtures.MockPatchObject(
                lifecycle,
                '_drain',
                lambda name, began, ironic_serves_for: drained.append(name),
            )
        )
        left, kept = mock.Mock(), mock.Mock()
        left.stop.return_value = True
        kept.stop.return_value = False  # SIGUSR1: the entry stays
        self.useFixture(
            fixtures.MockPatchObject(
                lifecycle, '_MEMBERSHIPS', {'c1': left, 'c2': kept}
            )
        )
        self.assertFalse(lifecycle.stopping('c0'))  # never joined
        self.assertTrue(lifecycle.stopping('c1'))
        self.assertFalse(lifecycle.stopping('c2', staying_registered=True))
        left.stop.assert_called_once_with(False)
        kept.stop.assert_called_once_with(True)
        self.assertEqual(['c1'], drained)
        # The launcher's stop after Ironic's hook: done already.
        self.assertFalse(lifecycle.stopping('c1'))
        self.assertEqual(['c1'], drained)


class JoinTestCase(base.TestCase):
    """A conductor's own view counts it once it has joined: its first
    read came before the join, and a view without it has no vote for
    affinity when it is the first to join (the process would take the
    deployment to be on Ironic's ring, hard tags aside)."""

    def setUp(self):
        super().setUp()
        self.events = []
        self.joins = True
        conf = types.SimpleNamespace(
            enabled_hardware_types=['fake-hardware'],
            conductor=types.SimpleNamespace(conductor_group=''),
            affinity=types.SimpleNamespace(member_timeout=0.01),
        )
        ironic_conf = types.ModuleType('ironic.conf')
        ironic_conf.CONF = conf
        # The ring loader imports Ironic: a stand-in, without the hook.
        ring_loader = types.ModuleType(
            'ironic_affinity.integration.ring.loader'
        )
        ring_loader.ironic_has_hook = lambda: False
        patcher = mock.patch.dict(
            sys.modules,
            {'ironic.conf': ironic_conf, ring_loader.__name__: ring_loader},
        )
        patcher.start()
        self.addCleanup(patcher.stop)
        self.useFixture(
            fixtures.MockPatchObject(lifecycle, '_MEMBERSHIPS', {})
        )
        self.useFixture(
            fixtures.MockPatchObject(lifecycle, '_RAN_A_CONDUCTOR', False)
        )
        test = self

        class Membership:
            def __init__(self, *args, **kwargs):
                self.member = types.SimpleNamespace(joined=threading.Event())

            def start(self):
                if test.joins:
                    test.events.append('joined')
                    self.member.joined.set()

        self.useFixture(
            fixtures.MockPatchObject(
                service, 'ConductorMembership', Membership
            )
        )
        view = types.SimpleNamespace(
            refresh=lambda: self.events.append('view read')
        )
        self.useFixture(
            fixtures.MockPatchObject(
                process_services,
                'started',
                lambda conf: types.SimpleNamespace(view=view),
            )
        )

    def test_the_view_reads_the_group_once_joined(self):
        lifecycle._join('c1')
        self.assertEqual(['joined', 'view read'], self.events)

    def test_no_read_while_not_joined(self):
        # The backend does not answer: the view keeps reading on its own.
        self.joins = False
        lifecycle._join('c1')
        self.assertEqual([], self.events)
