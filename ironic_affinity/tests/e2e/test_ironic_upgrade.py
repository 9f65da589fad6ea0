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

"""Ironic upgraded under the plugin, one process at a time, under load
(doc/source/admin/upgrade.rst, "Upgrading Ironic").

One API and three conductors (rolling.py) run Ironic of the previous
series in a virtualenv of their own (previous_build.ironic), with this
checkout's plugin. They move to the test's own Ironic the way Ironic's
upgrade guide orders it: the schema first (ironic-dbsync upgrade, the
old services running); every conductor, then the API, restarted on the
new release with [DEFAULT]pin_release_version set to the old series;
each again without the pin; then ironic-dbsync online_data_migrations.
The plugin is the same build throughout. Beforehand, the same upgrade
of Ironic's own services, under the same load, gives the baseline.
"""

import time

from ironic_affinity.tests.e2e import base
from ironic_affinity.tests.e2e import previous_build
from ironic_affinity.tests.e2e import rolling

# The previous series and its Ironic, as tox.ini's e2e-2026.1 has them.
SERIES = '2026.1'
VERSION = '35.1.0'
PIN = '[DEFAULT]\npin_release_version = %s\n' % SERIES


def _version(text):
    return tuple(int(part) for part in text.split('.'))


class IronicUpgradeTestCase(rolling.RollingTestCase):
    def setUp(self):
        super().setUp()
        self.old = previous_build.ironic(SERIES, VERSION)

    def api_version(self, dep):
        """The newest API version the API serves (Ironic caps it at the
        pinned release's)."""
        root = dep.get('/')
        self.assertIsNotNone(root)
        return _version(root['default_version']['version'])

    def upgrade(self, dep):
        """Ironic's rolling upgrade: (seconds of each step, the API's
        newest version before, while pinned and after)."""
        took = {}
        versions = {'old': self.api_version(dep)}
        started = time.monotonic()
        dep.dbsync('upgrade')
        took['schema'] = round(time.monotonic() - started, 1)
        with open(dep.conf, 'a') as handle:
            handle.write(PIN)
        took['pinned'] = self.roll(dep, None)
        versions['pinned'] = self.api_version(dep)
        with open(dep.conf) as handle:
            text = handle.read()
        with open(dep.conf, 'w') as handle:
            handle.write(text.replace(PIN, ''))
        took['unpinned'] = self.roll(dep, None)
        versions['new'] = self.api_version(dep)
        started = time.monotonic()
        dep.dbsync('online_data_migrations')
        took['data_migrations'] = round(time.monotonic() - started, 1)
        return took, versions

    def test_ironic_upgrade_moves_nothing(self):
        # Ironic's own services, upgraded the same way: the baseline.
        stock, uuids, _placed = self.start('stock', self.old)
        (stock_took, stock_versions), traffic, _ = self.under_load(
            stock, uuids, lambda: self.upgrade(stock)
        )
        stock_answered = rolling.Answered.of(traffic)
        # The next deployment has the machine to itself.
        stock.stop_all()

        dep, uuids, placed = self.start('affinity', self.old)
        offsets = dep.log_offsets()
        (took, versions), traffic, sampled = self.under_load(
            dep, uuids, lambda: self.upgrade(dep)
        )
        self.assert_nothing_moved(dep, uuids, placed, sampled, offsets)
        answered = rolling.Answered.of(traffic)
        self.assert_answered_as_stock(answered, stock_answered)
        # The new release served, pinned to the old one's API first.
        for seen in (versions, stock_versions):
            self.assertLessEqual(seen['pinned'], seen['old'], seen)
            self.assertLess(seen['old'], seen['new'], seen)

        base.record(
            test='ironic_upgrade',
            upgraded_from=VERSION,
            nodes=rolling.NODES,
            seconds=took,
            api_versions={
                k: '.'.join(map(str, v)) for k, v in versions.items()
            },
            samples=len(sampled.samples),
            nodes_moved=len(sampled.moved(placed)),
            **answered.figures(),
            stock_seconds=stock_took,
            **stock_answered.figures('stock_'),
        )
