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

"""How the ring manager reaches Ironic: by Ironic's own option where
Ironic has the pluggable hash-ring manager (contrib/ironic/), by
replacing Ironic's class elsewhere; never both. Ironic is faked as in
test_ring_manager; the e2e-ironic-hook suite runs a patched Ironic."""

from importlib import metadata
import sys
from unittest import mock

import fixtures
from oslo_config import cfg

from ironic_affinity import exception
from ironic_affinity.integration import conductor_lifecycle
from ironic_affinity.tests import base
from ironic_affinity.tests.unit.integration.ring import test_ring_manager


class LoaderOnlyBase:
    """Ironic's base class as change A of the patch has it."""

    def __init__(self, use_groups=True, cache=True):
        self.use_groups = use_groups
        self.cache = cache


class HookedBase(LoaderOnlyBase):
    """And as change B leaves it: with the two hooks."""

    def conductor_started(self, host):
        pass

    def conductor_stopping(self, host, deregister):
        pass


class LoaderFixture(base.TestCase):
    # Ironic's base class of hash-ring managers: None, without the patch.
    base_class: type | None = None

    def setUp(self):
        super().setUp()
        modules = test_ring_manager._fake_ironic()
        self.ironic_conf = cfg.ConfigOpts()
        modules['ironic.conf'].CONF = self.ironic_conf
        self.hash_ring = modules['ironic.common.hash_ring']
        if self.base_class is not None:
            # As Ironic registers it, with the patch.
            self.ironic_conf.register_opt(
                cfg.StrOpt('hash_ring_manager', default='consistent-hash')
            )
            self.hash_ring.BaseHashRingManager = self.base_class
            self.hash_ring.HashRingManager = type(
                'HashRingManager',
                (self.base_class, test_ring_manager.FakeStockManager),
                {},
            )
            self.hash_ring.get_hash_ring_manager_class = mock.Mock()
        self.ironic_class = self.hash_ring.HashRingManager
        patcher = mock.patch.dict(sys.modules, modules)
        patcher.start()
        self.addCleanup(patcher.stop)
        self.loader, self.ring_manager = test_ring_manager.import_afresh(
            self, 'loader', 'ring_manager'
        )


class WithoutHookTestCase(LoaderFixture):
    def test_install_replaces_ironics_class(self):
        self.assertFalse(self.loader.ironic_has_hook())
        self.assertIsNone(self.loader.enabled_by())
        self.loader.install('ironic-affinity-conductor')
        self.assertIs(
            self.ring_manager.AffinityHashRingManager,
            self.hash_ring.HashRingManager,
        )
        self.assertEqual('ironic-affinity-conductor', self.loader.enabled_by())
        # The middleware, installed after the launcher, changes nothing.
        self.loader.install('[api]middleware')
        self.assertEqual('ironic-affinity-conductor', self.loader.enabled_by())
        # The stock vote still answers with Ironic's own class.
        self.assertIsInstance(
            self.loader.stock_manager(), test_ring_manager.FakeStockManager
        )


class EntryPointMissingTestCase(LoaderFixture):
    def test_a_missing_entry_point_is_named(self):
        # As in an environment where the package's metadata is stale.
        self.useFixture(
            fixtures.MockPatchObject(
                self.loader, 'NAMESPACE', 'ironic_affinity.no_such_namespace'
            )
        )
        exc = self.assertRaises(
            exception.UnknownHashRingManager,
            self.loader.install,
            'ironic-affinity-conductor',
        )
        self.assertIn('ironic_affinity.no_such_namespace', str(exc))
        self.assertIn('affinity', str(exc))
        self.assertIs(self.ironic_class, self.hash_ring.HashRingManager)


class LoaderWithoutHooksTestCase(LoaderFixture):
    """Change A alone: Ironic loads its manager by name, but does not say
    when its conductor starts or stops, which the launcher does."""

    base_class = LoaderOnlyBase

    def test_a_launcher_names_the_plugin_and_keeps_the_membership(self):
        self.assertFalse(self.loader.ironic_has_hook())
        self.loader.install('ironic-affinity-conductor')
        self.assertIs(self.ironic_class, self.hash_ring.HashRingManager)
        self.ironic_conf([])
        self.assertEqual('affinity', self.ironic_conf.hash_ring_manager)
        self.assertEqual('ironic-affinity-conductor', self.loader.enabled_by())
        self.assertTrue(
            issubclass(
                self.ring_manager.AffinityHashRingManager, LoaderOnlyBase
            )
        )

    def test_ironic_conf_alone_does_not_count(self):
        self.ironic_conf([])
        self.ironic_conf.set_override('hash_ring_manager', 'affinity')
        self.assertIsNone(self.loader.enabled_by())


class WithHookTestCase(LoaderFixture):
    base_class = HookedBase

    def test_a_launcher_names_the_plugin_in_ironics_option(self):
        self.assertTrue(self.loader.ironic_has_hook())
        self.loader.install('ironic-affinity-conductor')
        # Ironic's class stays Ironic's: the plugin is loaded once, by
        # Ironic, whatever the configuration file said.
        self.assertIs(self.ironic_class, self.hash_ring.HashRingManager)
        self.ironic_conf([])
        self.assertEqual('affinity', self.ironic_conf.hash_ring_manager)
        self.assertEqual('ironic-affinity-conductor', self.loader.enabled_by())

    def test_ironic_conf_alone(self):
        self.ironic_conf([])
        self.ironic_conf.set_override('hash_ring_manager', 'affinity')
        self.assertEqual('ironic.conf', self.loader.enabled_by())
        # The middleware, built after parsing, finds it enabled already.
        self.loader.install('[api]middleware')
        self.assertEqual('ironic.conf', self.loader.enabled_by())
        self.assertIs(self.ironic_class, self.hash_ring.HashRingManager)

    def test_not_named_is_not_enabled(self):
        self.ironic_conf([])
        self.assertIsNone(self.loader.enabled_by())

    def test_what_ironic_builds_has_the_conductor_hooks(self):
        self.ironic_conf([])
        # What Ironic's loader does with the entry point: build it with
        # its two keywords (our options are registered then, after
        # Ironic parsed its configuration).
        manager = self.ring_manager.AffinityHashRingManager(
            use_groups=False, cache=False
        )
        self.assertEqual(
            'affinity', self.ironic_conf.affinity.hash_ring_manager
        )
        self.assertFalse(manager.use_groups)
        self.assertFalse(manager.cache)
        self.assertIsInstance(manager, HookedBase)
        calls = []
        self.useFixture(
            fixtures.MockPatchObject(
                conductor_lifecycle,
                'starting',
                lambda host: calls.append(('join', host)),
            )
        )
        self.useFixture(
            fixtures.MockPatchObject(
                conductor_lifecycle,
                'stopping',
                lambda host, staying_registered, ironic_serves_for: (
                    calls.append(
                        ('leave', host, staying_registered, ironic_serves_for)
                    )
                ),
            )
        )
        self.useFixture(
            fixtures.MockPatchObject(
                conductor_lifecycle, 'ironic_serves_for', lambda host: 15.0
            )
        )
        manager.conductor_started('c9')
        manager.conductor_stopping('c9', False)
        manager.conductor_stopping('c9', True)
        self.assertEqual(
            [
                ('join', 'c9'),
                ('leave', 'c9', True, 15.0),
                ('leave', 'c9', False, 15.0),
            ],
            calls,
        )


class EntryPointTestCase(base.TestCase):
    def test_registered_in_ironics_namespace(self):
        (found,) = [
            ep
            for ep in metadata.entry_points(group='ironic.hash_ring_managers')
            if ep.name == 'affinity'
        ]
        module, _, attribute = found.value.partition(':')
        self.assertEqual(
            (
                'ironic_affinity.integration.ring.ring_manager',
                'AffinityHashRingManager',
            ),
            (module, attribute),
        )
