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
all on one fake clock."""

import json
import os

import fixtures
import sqlalchemy as sa

from ironic_affinity import exception
from ironic_affinity.integration.data import ironic_db
from ironic_affinity.integration.data import node_tags
from ironic_affinity.membership import change_notices
from ironic_affinity.membership import tag_board
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


class NodeTagCacheTestCase(fakes.BackendTestCase):
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
        self.useFixture(fixtures.MockPatchObject(node_tags, 'BATCH', 3))
        self.notices = change_notices.ChangeNotices()
        self.backend.groups[API_GROUP] = {}
        self.publish_notices()

    @staticmethod
    def uuid(index):
        return '00000000-0000-4000-8000-%012d' % index

    def cache(self, database=None, name='a', warm_timeout=10.0):
        cache = node_tags.NodeTagCache(
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

    def bucket_reads(self, cache):
        return cache.buckets_read

    def lines(self, level):
        return [
            line
            for line in self.log.output.splitlines()
            if line.startswith(level + ' ')
        ]

    def test_the_first_process_reads_the_table_and_publishes(self):
        reader = self.cache()
        reader.poll()
        self.assertTrue(reader.leading)
        self.assertTrue(reader.last_full)
        self.assertEqual(10, reader.last_rows)
        self.assertEqual(10, len(reader))
        self.assertEqual(frozenset({'rack4'}), reader.get(self.uuid(4)))
        self.assertIsNone(reader.get('not-a-node'))
        index = self.backend.members(tag_board.index_group(GROUP))
        self.assertEqual(['a'], list(index))

    def test_others_read_the_backend_never_the_table(self):
        self.cache().poll()
        follower = self.cache(RefusingDatabase(), name='b')
        follower.poll()
        self.assertFalse(follower.leading)
        self.assertEqual(0, follower.last_rows)
        self.assertTrue(follower.loaded.is_set())
        for i in range(10):
            self.assertEqual(
                frozenset({'rack%d' % i}), follower.get(self.uuid(i))
            )

    def test_an_idle_refresh_reads_no_row_and_no_bucket(self):
        reader = self.cache()
        reader.poll()
        follower = self.cache(RefusingDatabase(), name='b')
        follower.poll()
        before = self.bucket_reads(follower)
        version = follower.version
        for _ in range(5):
            self.clock.advance(INTERVAL)
            reader.poll()
            self.assertEqual(0, reader.last_rows)
            follower.poll()
        self.assertEqual(before, self.bucket_reads(follower))
        self.assertEqual(version, follower.version)

    def test_a_write_through_the_api_reads_one_row_and_moves_one_bucket(self):
        reader = self.cache()
        reader.poll()
        follower = self.cache(RefusingDatabase(), name='b')
        follower.poll()
        before = self.bucket_reads(follower)
        self.write(3, 'rack30, row2')
        self.clock.advance(INTERVAL)
        reader.poll()
        self.assertEqual(1, reader.last_rows)
        self.assertFalse(reader.last_full)
        follower.poll()
        self.assertEqual(before + 1, self.bucket_reads(follower))
        self.assertEqual(
            frozenset({'rack30', 'row2'}), follower.get(self.uuid(3))
        )
        # The others of that bucket are unchanged.
        self.assertEqual(frozenset({'rack4'}), follower.get(self.uuid(4)))

    def test_hardware_type_and_group_reach_every_process(self):
        with self.database.engine.begin() as connection:
            connection.execute(
                NODES.update().where(NODES.c.uuid == self.uuid(4)),
                {'driver': 'ipmi', 'conductor_group': 'Rack-A'},
            )
        reader = self.cache()
        reader.poll()
        follower = self.cache(RefusingDatabase(), name='b')
        follower.poll()
        expected = node_tags.NodeFacts('ipmi', 'rack-a', frozenset({'rack4'}))
        for cache in (reader, follower):
            found = dict(cache.nodes())
            self.assertEqual(10, len(found))
            self.assertEqual(expected, found[self.uuid(4)])
            self.assertEqual(
                node_tags.NodeFacts('', '', frozenset({'rack5'})),
                found[self.uuid(5)],
            )
        # A change of hardware type through the API is a notice too.
        with self.database.engine.begin() as connection:
            connection.execute(
                NODES.update().where(NODES.c.uuid == self.uuid(4)),
                {'driver': 'redfish'},
            )
        self.notices.record(self.uuid(4))
        self.publish_notices()
        self.clock.advance(INTERVAL)
        reader.poll()
        follower.poll()
        self.assertFalse(reader.last_full)
        self.assertEqual(
            'redfish', dict(follower.nodes())[self.uuid(4)].driver
        )

    def test_a_notice_by_name_is_read_by_name(self):
        reader = self.cache()
        reader.poll()
        self.write(5, 'rack50', notice=False)
        self.notices.record('node-05')
        self.publish_notices()
        self.clock.advance(INTERVAL)
        reader.poll()
        self.assertEqual(frozenset({'rack50'}), reader.get(self.uuid(5)))

    def test_a_direct_write_is_seen_by_the_full_read_within_rescan(self):
        reader = self.cache()
        reader.poll()
        follower = self.cache(RefusingDatabase(), name='b')
        follower.poll()
        self.write(2, 'rack20', notice=False)
        waited = 0.0
        while follower.get(self.uuid(2)) != frozenset({'rack20'}):
            self.assertLessEqual(waited, RESCAN + INTERVAL)
            self.clock.advance(INTERVAL)
            waited += INTERVAL
            reader.poll()
            follower.poll()
        self.assertGreaterEqual(waited, RESCAN)
        self.assertTrue(reader.last_full)

    def test_deleted_nodes_are_forgotten(self):
        reader = self.cache()
        reader.poll()
        follower = self.cache(RefusingDatabase(), name='b')
        follower.poll()
        with self.database.engine.begin() as connection:
            connection.execute(
                NODES.delete().where(
                    NODES.c.uuid.in_([self.uuid(1), self.uuid(2)])
                )
            )
        # One through the API, one behind its back.
        self.notices.record(self.uuid(1))
        self.publish_notices()
        self.clock.advance(INTERVAL)
        reader.poll()
        follower.poll()
        self.assertIsNone(follower.get(self.uuid(1)))
        self.assertEqual(frozenset({'rack2'}), follower.get(self.uuid(2)))
        self.clock.advance(RESCAN)
        reader.poll()
        follower.poll()
        self.assertIsNone(follower.get(self.uuid(2)))
        self.assertEqual(8, len(follower))

    def test_missed_notices_mean_a_full_read(self):
        reader = self.cache()
        reader.poll()
        for _ in range(change_notices.KEPT + 1):
            self.notices.record('node-09')
        self.write(7, 'rack70', notice=False)
        self.publish_notices()
        self.clock.advance(INTERVAL)
        reader.poll()
        self.assertTrue(reader.last_full)
        self.assertEqual(frozenset({'rack70'}), reader.get(self.uuid(7)))

    def test_another_process_takes_over_when_the_reader_dies(self):
        reader = self.cache()
        reader.poll()
        follower = self.cache(name='b')
        follower.poll()
        other = self.cache(RefusingDatabase(), name='c')
        other.poll()
        before = self.bucket_reads(other)
        # A write noted while the reader was alive, read by nobody yet.
        self.write(2, 'rack20')
        # The reader stops beating (SIGKILL): its lock and entries expire
        # within the member timeout, and the next refresh takes over.
        waited = 0.0
        while not follower.leading:
            self.clock.advance(INTERVAL)
            waited += INTERVAL
            self.publish_notices()  # the API process beats on
            follower.poll()
        self.assertLessEqual(waited, self.backend.timeout + INTERVAL)
        # It held every bucket the reader had published: it carries on
        # from there, reading the one noted node, not every node.
        self.assertFalse(follower.last_full)
        self.assertEqual(1, follower.last_rows)
        self.assertIn('carrying on from the previous reader', self.log.output)
        self.assertEqual(frozenset({'rack20'}), follower.get(self.uuid(2)))
        other.poll()
        # Same contents, same digests: the others read only the bucket
        # that the noted write changed.
        self.assertEqual(before + 1, self.bucket_reads(other))
        self.assertEqual(frozenset({'rack20'}), other.get(self.uuid(2)))
        self.write(6, 'rack60')
        self.clock.advance(INTERVAL)
        follower.poll()
        other.poll()
        self.assertEqual(frozenset({'rack60'}), other.get(self.uuid(6)))
        # A write behind the API's back is read by the full read that
        # falls due RESCAN after the dead reader's own, not later.
        self.write(7, 'rack77', notice=False)
        elapsed = waited + INTERVAL
        self.clock.advance(RESCAN - elapsed - 0.5)
        follower.poll()
        self.assertFalse(follower.last_full)
        self.clock.advance(0.5)
        follower.poll()
        self.assertTrue(follower.last_full)
        other.poll()
        self.assertEqual(frozenset({'rack77'}), other.get(self.uuid(7)))

    def test_a_lagging_process_rereads_what_it_missed_when_it_takes_over(
        self,
    ):
        reader = self.cache()
        reader.poll()
        follower = self.cache(name='b')
        follower.poll()
        # The reader publishes a noted change that the follower has not
        # read when the reader dies: the notice is read again.
        self.write(3, 'rack33')
        self.clock.advance(INTERVAL)
        reader.poll()
        while not follower.board.try_lead():
            self.clock.advance(INTERVAL)
            self.publish_notices()
        follower.poll()
        self.assertFalse(follower.last_full)
        self.assertEqual(frozenset({'rack33'}), follower.get(self.uuid(3)))

    def test_a_process_whose_last_read_is_too_old_reads_every_node(self):
        reader = self.cache()
        reader.poll()
        follower = self.cache(name='b')
        follower.poll()
        # The follower reads nothing for a rescan interval (stalled): the
        # reader's full read of then is not in what it holds.
        self.write(8, 'rack88', notice=False)
        self.clock.advance(RESCAN)
        reader.poll()
        self.assertTrue(reader.last_full)
        while not follower.board.try_lead():
            self.clock.advance(INTERVAL)
        follower.poll()
        self.assertTrue(follower.last_full)
        self.assertEqual(frozenset({'rack88'}), follower.get(self.uuid(8)))

    def slow_batches(self, seconds):
        """Each batch of a full read takes ``seconds`` of the clock."""
        real = node_tags._batches

        def batches(connection):
            for batch in real(connection):
                self.clock.advance(seconds)
                yield batch

        self.useFixture(
            fixtures.MockPatchObject(node_tags, '_batches', batches)
        )

    def test_a_read_longer_than_the_timeout_keeps_the_lock(self):
        reader = self.cache()
        reader.poll()
        other = self.cache(name='b')
        other.poll()
        # 4 batches of 2 s: 8 s, past the 5 s timeout of the lock.
        self.slow_batches(2.0)
        self.clock.advance(RESCAN)
        reader.poll()
        self.assertTrue(reader.last_full)
        self.assertTrue(reader.leading)
        other.poll()
        self.assertFalse(other.leading)
        self.assertFalse(other.last_full)

    def test_a_holder_that_stalls_mid_publication_steps_down(self):
        reader = self.cache()
        other = self.cache(name='b')
        real = tag_board.TagBoard._join
        stalled = []

        def join(board, group, capabilities):
            if board is reader.board and not stalled:
                # Frozen past the timeout: the other process takes over.
                stalled.append(group)
                self.clock.advance(self.EXPIRY + 1)
                self.assertTrue(other.board.try_lead())
            return real(board, group, capabilities)

        self.useFixture(
            fixtures.MockPatchObject(tag_board.TagBoard, '_join', join)
        )
        reader.poll()
        self.assertFalse(reader.leading)
        self.assertIn('Lost the lock', self.log.output)
        # The index was not published by the one that lost the lock; the
        # new holder reads every node and publishes them all.
        self.assertIsNone(reader.board.read_index())
        other.poll()
        self.assertTrue(other.last_full)
        self.assertEqual(b'b', other.board.read_index().publisher)
        self.assertEqual(frozenset({'rack3'}), other.get(self.uuid(3)))

    def test_a_clean_stop_hands_over_at_once(self):
        reader = self.cache()
        reader.poll()
        follower = self.cache(name='b')
        follower.poll()
        self.assertFalse(follower.leading)
        reader.stop()
        follower.poll()
        self.assertTrue(follower.leading)

    def test_backend_outage_keeps_the_last_tags_and_catches_up(self):
        reader = self.cache()
        reader.poll()
        follower = self.cache(RefusingDatabase(), name='b')
        follower.poll()
        self.backend.go_down()
        for _ in range(3):
            self.clock.advance(INTERVAL)
            follower.poll()
        self.assertEqual(frozenset({'rack1'}), follower.get(self.uuid(1)))
        self.assertEqual(1, len(self.lines('WARNING')), self.log.output)
        self.backend.come_back()
        self.write(1, 'rack11')
        self.clock.advance(INTERVAL)
        reader.poll()
        follower.poll()
        self.assertEqual(frozenset({'rack11'}), follower.get(self.uuid(1)))
        self.assertIn('readable from the coordination backend again',
                      self.log.output)  # fmt: skip

    def test_database_outage_keeps_the_lock_and_the_tags(self):
        reader = self.cache()
        reader.poll()
        # Written just before the outage: its notice is taken during it.
        self.write(1, 'rack12')
        failing = sa.create_engine('sqlite:////nonexistent/dir/nodes.db')
        self.addCleanup(failing.dispose)
        real = self.database.engine
        self.database.engine = failing
        for _ in range(3):
            self.clock.advance(INTERVAL)
            reader.poll()
        self.assertTrue(reader.leading)
        self.assertEqual(frozenset({'rack1'}), reader.get(self.uuid(1)))
        self.assertEqual(1, len(self.lines('WARNING')), self.log.output)
        self.database.engine = real
        self.clock.advance(INTERVAL)
        reader.poll()
        # Not left to the next full read, a minute away.
        self.assertTrue(reader.last_full)
        self.assertEqual(frozenset({'rack12'}), reader.get(self.uuid(1)))
        self.assertIn('readable from the database again', self.log.output)

    def test_bad_tags_are_warned_once_by_the_reader_alone(self):
        with self.database.engine.begin() as connection:
            connection.execute(
                NODES.update().where(NODES.c.uuid == self.uuid(8)),
                {'extra': json.dumps({'affinity_tags': 'bad tag!'})},
            )
        reader = self.cache()
        reader.poll()
        follower = self.cache(RefusingDatabase(), name='b')
        follower.poll()
        for _ in range(3):
            self.clock.advance(RESCAN)
            reader.poll()
            follower.poll()
        self.assertEqual(frozenset(), follower.get(self.uuid(8)))
        warnings = self.lines('WARNING')
        self.assertEqual(1, len(warnings), warnings)
        self.assertIn(self.uuid(8), warnings[0])

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

    def test_the_first_processes_read_for_themselves(self):
        # Another process holds the lock but has published nothing yet.
        self.backend.locks[tag_board.lock_name(GROUP)] = (b'x', 1e9)
        cache = self.cache()
        cache.poll()
        self.assertFalse(cache.leading)
        self.assertEqual(10, cache.last_rows)
        self.assertTrue(cache.loaded.is_set())

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
