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

from ironic_affinity import exception
from ironic_affinity.integration.node_tags import board_format
from ironic_affinity.integration.node_tags import tag_board
from ironic_affinity.tests.unit.membership import fakes

GROUP = 'g'


class BucketTestCase(fakes.base.TestCase):
    def test_buckets_are_stable_and_spread(self):
        uuids = ['%08x-0000-4000-8000-000000000000' % i for i in range(4096)]
        buckets = [board_format.bucket_of(u) for u in uuids]
        self.assertEqual(buckets, [board_format.bucket_of(u) for u in uuids])
        counts = [buckets.count(b) for b in range(board_format.BUCKETS)]
        # 16 a bucket on average: none empty, none with four times that.
        self.assertGreater(min(counts), 0)
        self.assertLess(max(counts), 64)

    def test_digest_ignores_order(self):
        self.assertEqual(
            board_format.digest({'a': 'x', 'b': ''}),
            board_format.digest({'b': '', 'a': 'x'}),
        )
        self.assertNotEqual(
            board_format.digest({'a': 'x'}), board_format.digest({'a': 'y'})
        )

    def test_malformed_publications_are_refused(self):
        for raw in (
            None,
            b'not json',
            # A format this reader does not know.
            {'format': 2, 'nodes': {}},
            {'format': 1, 'nodes': {'a': 1}},
            {'format': 1, 'nodes': []},
            {'format': 1},
            'x' * (board_format.MAX_BUCKET_BYTES + 1),
        ):
            self.assertRaises(
                (exception.InvalidCapabilities, ValueError),
                board_format.decode_bucket,
                raw,
            )
        self.assertRaises(
            exception.InvalidCapabilities,
            board_format.decode_index,
            b'p',
            {'format': 1, 'since': 1.0, 'digests': ['x']},
        )
        # Keys a reader does not know are a newer writer's: ignored.
        self.assertEqual(
            {'n': 'text'},
            board_format.decode_bucket(
                {'format': 1, 'nodes': {'n': 'text'}, 'newer': [1]}
            ),
        )


class TagBoardTestCase(fakes.BackendTestCase):
    def board(self, name, since):
        board = tag_board.TagBoard(
            'redis://x', GROUP, name, 5, wall_clock=lambda: since
        )
        self.addCleanup(board.stop)
        return board

    def test_one_holder_at_a_time(self):
        first = self.board('a', 1.0)
        second = self.board('b', 2.0)
        self.assertTrue(first.try_lead())
        self.assertFalse(second.try_lead())
        self.assertTrue(first.try_lead())

    def test_a_holder_that_lost_the_lock_steps_down(self):
        first = self.board('a', 1.0)
        second = self.board('b', 2.0)
        self.assertTrue(first.try_lead())
        self.clock.advance(self.EXPIRY + 1)
        self.assertTrue(second.try_lead())
        self.assertFalse(first.try_lead())
        self.assertFalse(first.leading)

    def test_readers_follow_the_latest_holder(self):
        digests = [board_format.EMPTY_DIGEST] * board_format.BUCKETS
        old = self.board('a', 1.0)
        old.try_lead()
        old.publish({3: {'n': 'old'}}, digests)
        self.clock.advance(self.EXPIRY + 1)
        new = self.board('b', 2.0)
        new.try_lead()
        new.publish({3: {'n': 'new'}}, digests)
        # The old holder's entries have not expired yet: it stalled.
        self.backend.beats[b'a'] = self.clock()
        reader = self.board('r', 0.0)
        index = reader.read_index()
        self.assertEqual(b'b', index.publisher)
        self.assertEqual({'n': 'new'}, reader.read_bucket(b'b', 3))
        self.assertIsNone(reader.read_bucket(b'b', 4))

    def test_a_bucket_is_published_as_held(self):
        bucket = {'n1': 'ipmi\n\nrack1\n1700000000', 'n2': 'ipmi\n\nrack2\n'}
        digests = [board_format.EMPTY_DIGEST] * board_format.BUCKETS
        digests[3] = board_format.digest(bucket)
        board = self.board('a', 1.0)
        board.try_lead()
        board.publish({3: bucket}, digests)
        reader = self.board('r', 0.0)
        self.assertEqual(bucket, reader.read_bucket(b'a', 3))
        self.assertEqual(tuple(digests), reader.read_index().digests)
        raw = self.backend.members(board_format.bucket_group(GROUP, 3))['a']
        self.assertEqual({'format': 1, 'nodes': bucket}, raw)

    def test_nothing_published_reads_as_none(self):
        self.assertIsNone(self.board('r', 0.0).read_index())

    def test_the_file_driver_updates_by_joining_again(self):
        self.backend.updates_in_place = False
        digests = [board_format.EMPTY_DIGEST] * board_format.BUCKETS
        board = self.board('a', 1.0)
        board.try_lead()
        board.publish({0: {'n': '1'}}, digests)
        board.publish({0: {'n': '2'}}, digests)
        self.assertEqual({'n': '2'}, self.board('r', 0).read_bucket(b'a', 0))
