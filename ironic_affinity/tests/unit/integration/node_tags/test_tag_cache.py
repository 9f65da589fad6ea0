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

"""The node tag cache: one reader of a SQLite copy of the nodes table,
every other process reading what it publishes on the in-memory backend,
all on one fake clock. The reader's and the followers' tests
(``test_tag_reader``, ``test_tag_follower``) run on the fixture here,
through the cache, as the rest of the plugin uses them."""

import json
import os

import fixtures
import sqlalchemy as sa

from ironic_affinity import exception
from ironic_affinity.integration import node_tags
from ironic_affinity.integration.data import ironic_db
from ironic_affinity.integration.node_tags import change_notices
from ironic_affinity.integration.node_tags import tag_board
from ironic_affinity.integration.node_tags import tag_cache
from ironic_affinity.integration.node_tags import tag_reader
from ironic_affinity.tests.unit.membership import fakes

NODES = ironic_db.NODES
INTERVAL = 2.0
RESCAN = 60.0
GROUP = 'conductors'
API_GROUP = b'conductors.api'


class RefusingDatabase:
    """A database no follower may read: any use fails the test."""

    sqlite = False

    def __init__(self):
        self.probes = 0

    def probe(self):
        self.probes += 1
        return True

    @property
    def engine(self):
        raise AssertionError('a follower read the nodes table')


class CacheTestCase(fakes.BackendTestCase):
    """Ten nodes in the table, an API process's entry for notices, and
    caches made on demand."""

    # The cache and the modules it is made of each log under their own
    # name: read the lines of them all.
    LOGGER = node_tags.__name__

    def setUp(self):
        super().setUp()
        directory = self.useFixture(fixtures.TempDir()).path
        self.url = 'sqlite:///' + os.path.join(directory, 'nodes.db')
        self.database = ironic_db.IronicDatabase(self.url)
        self.addCleanup(self.database.dispose)
        ironic_db.METADATA.create_all(self.database.engine)
        with self.database.engine.begin() as connection:
            connection.execute(
                NODES.insert(),
                [
                    {
                        'uuid': self.uuid(i),
                        'name': 'node-%02d' % i,
                        'extra': json.dumps({'affinity_tags': 'rack%d' % i}),
                    }
                    for i in range(10)
                ],
            )
        self.useFixture(fixtures.MockPatchObject(tag_reader, 'BATCH', 3))
        self.notices = change_notices.ChangeNotices()
        self.backend.groups[API_GROUP] = {}
        self.publish_notices()

    @staticmethod
    def uuid(index):
        return '00000000-0000-4000-8000-%012d' % index

    def cache(self, database=None, name='a', warm_timeout=10.0):
        cache = tag_cache.NodeTagCache(
            self.database if database is None else database,
            tag_board.TagBoard(
                'redis://x',
                GROUP,
                name,
                5,
                wall_clock=self.clock,
                clock=self.clock,
            ),
            'affinity_tags',
            INTERVAL,
            RESCAN,
            API_GROUP.decode(),
            warm_timeout=warm_timeout,
            clock=self.clock,
        )
        self.addCleanup(cache.stop)
        return cache

    def publish_notices(self):
        """The API process's entry, as its member thread publishes it."""
        self.backend.add(API_GROUP, b'api-1', self.notices.capabilities())

    def write(self, index, tags, notice=True):
        with self.database.engine.begin() as connection:
            connection.execute(
                NODES.update().where(NODES.c.uuid == self.uuid(index)),
                {'extra': json.dumps({'affinity_tags': tags})},
            )
        if notice:
            self.notices.record(self.uuid(index))
            self.publish_notices()

    def add_node(self, index, tags):
        with self.database.engine.begin() as connection:
            connection.execute(
                NODES.insert(),
                {
                    'uuid': self.uuid(index),
                    'name': 'node-%02d' % index,
                    'extra': json.dumps({'affinity_tags': tags}),
                },
            )

    def bucket_reads(self, cache):
        return cache.buckets_read

    def lines(self, level):
        return [
            line
            for line in self.log.output.splitlines()
            if line.startswith(level + ' ')
        ]


class NodeTagCacheTestCase(CacheTestCase):
    def test_start_returns_with_every_tag_read(self):
        self.cache().poll()
        follower = self.cache(RefusingDatabase(), name='b')
        follower.start()
        self.assertEqual(frozenset({'rack9'}), follower.get(self.uuid(9)))
        self.assertIn(
            'Affinity tags of 10 nodes read 0.00 s after start, from the '
            'coordination backend',
            self.log.output,
        )

    def test_start_reads_the_database_when_the_backend_is_down(self):
        self.backend.go_down()
        cache = self.cache(warm_timeout=0.01)
        cache.start()
        self.assertEqual(frozenset({'rack9'}), cache.get(self.uuid(9)))
        self.assertIn('reading them from the database', self.log.output)

    def test_a_node_not_published_yet_is_placed_by_its_row(self):
        self.cache().poll()
        follower = self.cache(name='b')
        follower.poll()
        self.add_node(10, 'datacenter2')
        # Nobody has published it: the follower reads that one row.
        self.assertIsNone(follower.get(self.uuid(10)))
        self.assertEqual(
            frozenset({'datacenter2'}), follower.lookup(self.uuid(10))
        )
        self.assertEqual(1, follower.fresh.rows_read)
        self.assertEqual(
            frozenset({'datacenter2'}), follower.lookup(self.uuid(10))
        )
        self.assertEqual(1, follower.fresh.rows_read)
        # A node of that name is not that uuid.
        self.assertIsNone(follower.lookup('node-10'))
        # A known node is never read.
        self.assertEqual(frozenset({'rack4'}), follower.lookup(self.uuid(4)))
        self.assertEqual(2, follower.fresh.rows_read)

    def test_a_write_in_this_process_is_placed_by_at_once(self):
        reader = self.cache()
        reader.poll()
        follower = self.cache(name='b')
        follower.poll()
        self.write(3, 'rack30')
        follower.written(self.uuid(3))
        self.assertEqual(frozenset({'rack30'}), follower.lookup(self.uuid(3)))
        self.assertEqual(frozenset({'rack30'}), follower.get(self.uuid(3)))
        # Once published, the entry is done with.
        self.clock.advance(INTERVAL)
        reader.poll()
        follower.poll()
        self.assertEqual(0, len(follower.fresh))
        self.assertEqual(frozenset({'rack30'}), follower.get(self.uuid(3)))

    def test_an_unreadable_row_is_never_placed_untagged(self):
        cache = self.cache()
        cache.poll()
        self.add_node(10, 'datacenter2')
        with self.database.engine.begin() as connection:
            connection.execute(sa.text('ALTER TABLE nodes RENAME TO gone'))
        error = self.assertRaises(
            exception.NodeTagsUnreadable, cache.lookup, self.uuid(10)
        )
        self.assertIn(self.uuid(10), str(error))

    def test_a_row_read_for_a_lookup_warns_of_nothing(self):
        # The reader warns of unusable tags, once for the deployment;
        # every process that reads the row for a lookup places it alike.
        self.cache().poll()
        follower = self.cache(name='b')
        follower.poll()
        self.add_node(10, 'bad tag!')
        self.assertEqual(frozenset(), follower.lookup(self.uuid(10)))
        self.assertEqual([], self.lines('WARNING'))
