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

"""The node tag cache on a SQLite copy of the columns it reads."""

import datetime
import json
import os
from unittest import mock

import fixtures
import sqlalchemy as sa

from ironic_affinity.integration import node_tags
from ironic_affinity.tests import base

NODES = node_tags.NODES


def _utcnow():
    return datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)


class NodeTagCacheTestCase(base.TestCase):
    def setUp(self):
        super().setUp()
        directory = self.useFixture(fixtures.TempDir()).path
        url = 'sqlite:///' + os.path.join(directory, 'nodes.db')
        self.engine = sa.create_engine(url)
        self.addCleanup(self.engine.dispose)
        node_tags.METADATA.create_all(self.engine)
        self.stamp = datetime.datetime(2026, 1, 1)
        with self.engine.begin() as connection:
            connection.execute(
                NODES.insert(),
                [
                    {
                        'uuid': 'node-%02d' % i,
                        'extra': json.dumps({'affinity_tags': 'rack%d' % i}),
                        'created_at': self.stamp,
                    }
                    for i in range(10)
                ],
            )
        self.cache = node_tags.NodeTagCache(url, 'affinity_tags', 1.0, 60.0)
        self.addCleanup(self.cache.stop)
        self.useFixture(fixtures.MockPatchObject(node_tags, 'BATCH', 3))
        self.sleep = self.useFixture(
            fixtures.MockPatchObject(node_tags.time, 'sleep', autospec=True)
        ).mock

    def _write(self, **values):
        with self.engine.begin() as connection:
            connection.execute(
                NODES.update().where(NODES.c.uuid == 'node-04'), values
            )

    def test_reads_every_node_in_batches(self):
        self.cache.refresh()
        self.assertEqual(10, len(self.cache))
        self.assertEqual(10, self.cache.last_rows)
        self.assertEqual(frozenset({'rack4'}), self.cache.get('node-04'))
        # Four batches of at most 3 rows read, then four applied: the
        # thread gives up the interpreter after each.
        self.assertEqual([mock.call(0)] * 8, self.sleep.call_args_list)

    def test_changes_and_deletions(self):
        self.cache.refresh()
        version = self.cache.version
        self._write(
            extra=json.dumps({'affinity_tags': ['dc2']}),
            updated_at=_utcnow(),
        )
        self.cache.refresh()
        self.assertEqual(1, self.cache.last_rows)
        self.assertEqual(frozenset({'dc2'}), self.cache.get('node-04'))
        self.assertEqual(version + 1, self.cache.version)
        with self.engine.begin() as connection:
            connection.execute(NODES.delete().where(NODES.c.uuid == 'node-07'))
        self.cache.refresh()
        self.assertIsNotNone(self.cache.get('node-07'))
        self.cache._last_scan = 0.0  # the uuid listing is due
        self.cache.refresh()
        self.assertIsNone(self.cache.get('node-07'))
        self.assertEqual(9, len(self.cache))
        self.assertEqual(version + 2, self.cache.version)

    def test_bad_tags_read_as_none(self):
        self._write(extra=json.dumps({'affinity_tags': 42}))
        self.cache.refresh()
        self.assertEqual(frozenset(), self.cache.get('node-04'))
        self.assertEqual(frozenset({'rack5'}), self.cache.get('node-05'))

    def test_failed_read_changes_nothing(self):
        self.cache.refresh()
        version = self.cache.version
        with self.engine.begin() as connection:
            connection.execute(
                NODES.update(),
                {
                    'extra': json.dumps({'affinity_tags': 'dc3'}),
                    'updated_at': _utcnow(),
                },
            )
        real = node_tags._batches

        def broken(connection, query):
            batches = real(connection, query)
            yield next(batches)
            raise sa.exc.OperationalError('FETCH', {}, Exception('gone'))

        with mock.patch.object(node_tags, '_batches', broken):
            self.assertRaises(sa.exc.OperationalError, self.cache.refresh)
        self.assertEqual(frozenset({'rack4'}), self.cache.get('node-04'))
        self.assertEqual(version, self.cache.version)
        self.cache.refresh()
        self.assertEqual(frozenset({'dc3'}), self.cache.get('node-04'))
        self.assertEqual(version + 1, self.cache.version)
