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

"""The reader of the nodes table: one process reads it for the
deployment, by the notices in between full reads, and another carries
on from its publication when it takes the lock over."""

import json

import fixtures
import sqlalchemy as sa

from ironic_affinity.integration.node_tags import board_format
from ironic_affinity.integration.node_tags import change_notices
from ironic_affinity.integration.node_tags import tag_board
from ironic_affinity.integration.node_tags import tag_reader
from ironic_affinity.tests.unit.integration.node_tags import (
    test_tag_cache as test_node_tags,
)

INTERVAL = test_node_tags.INTERVAL
RESCAN = test_node_tags.RESCAN
GROUP = test_node_tags.GROUP
NODES = test_node_tags.NODES
RefusingDatabase = test_node_tags.RefusingDatabase


class TagReaderTestCase(test_node_tags.CacheTestCase):
    def test_the_first_process_reads_the_table_and_publishes(self):
        reader = self.cache()
        reader.poll()
        self.assertTrue(reader.leading)
        self.assertTrue(reader.last_full)
        self.assertEqual(10, reader.last_rows)
        self.assertEqual(10, len(reader))
        self.assertEqual(frozenset({'rack4'}), reader.get(self.uuid(4)))
        self.assertIsNone(reader.get('not-a-node'))
        index = self.backend.members(board_format.index_group(GROUP))
        self.assertEqual(['a'], list(index))

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
        real = tag_reader._batches

        def batches(connection):
            for batch in real(connection):
                self.clock.advance(seconds)
                yield batch

        self.useFixture(
            fixtures.MockPatchObject(tag_reader, '_batches', batches)
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
