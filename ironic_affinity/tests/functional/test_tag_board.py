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

"""The published node tags and the reader's lock on real servers, one
class per driver: what tooz's locks and group capabilities do there."""

import signal
import subprocess
import sys
import time
import uuid

from ironic_affinity.integration.node_tags import board_format
from ironic_affinity.integration.node_tags import tag_board
from ironic_affinity.tests import base
from ironic_affinity.tests.functional import servers

# [affinity]member_timeout's default: the lock's timeout too.
TIMEOUT = 5


class TagBoardMixin:
    server_class: type[servers.Server]
    #: Whether the lock goes with the holder's process at once (file
    #: locks) rather than when it expires.
    released_at_death = False

    def setUp(self):
        super().setUp()
        self.server = self.useFixture(self.server_class())
        self.group = 'tags-%s' % uuid.uuid4().hex[:8]

    def board(self, name):
        board = tag_board.TagBoard(self.server.url, self.group, name, TIMEOUT)
        self.addCleanup(board.stop)
        return board

    def digests(self, buckets):
        found = [board_format.EMPTY_DIGEST] * board_format.BUCKETS
        for number, bucket in buckets.items():
            found[number] = board_format.digest(bucket)
        return found

    def test_one_holder_publishes_and_the_others_read(self):
        holder, other = self.board('a'), self.board('b')
        self.assertTrue(holder.try_lead())
        self.assertFalse(other.try_lead())
        buckets = {0: {'u1': 'rack1'}, 255: {'u2': '', 'u3': 'a,b'}}
        holder.publish(buckets, self.digests(buckets))
        # Published again in place (the file driver leaves and joins).
        buckets[0] = {'u1': 'rack2'}
        holder.publish({0: buckets[0]}, self.digests(buckets))
        index = other.read_index()
        self.assertEqual(b'a', index.publisher)
        self.assertEqual(self.digests(buckets), list(index.digests))
        self.assertEqual({'u1': 'rack2'}, other.read_bucket(b'a', 0))
        self.assertEqual(buckets[255], other.read_bucket(b'a', 255))
        self.assertIsNone(other.read_bucket(b'a', 1))
        self.assertTrue(holder.try_lead())
        self.assertFalse(other.try_lead())

    def test_a_clean_stop_hands_over_at_once(self):
        holder, other = self.board('a'), self.board('b')
        self.assertTrue(holder.try_lead())
        holder.stop()
        self.assertTrue(other.try_lead())

    def test_a_killed_holder_is_replaced_within_the_timeout(self):
        process = subprocess.Popen(
            [
                sys.executable,
                '-m',
                'ironic_affinity.tests.functional.tag_holder_process',
                '--url',
                self.server.url,
                '--group',
                self.group,
                '--timeout',
                str(TIMEOUT),
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        self.addCleanup(process.kill)
        self.assertEqual('leading\n', process.stdout.readline())
        other = self.board('b')
        self.assertFalse(other.try_lead())
        self.assertEqual({'n': 'a'}, other.read_bucket(b'holder', 7))
        process.send_signal(signal.SIGKILL)
        process.wait()
        killed = time.monotonic()
        while not other.try_lead():
            self.assertLess(time.monotonic() - killed, TIMEOUT + 3.0)
            time.sleep(0.2)
        waited = time.monotonic() - killed
        if self.released_at_death:
            self.assertLess(waited, 1.0)
        buckets = {7: {'n': 'b'}}
        other.publish(buckets, self.digests(buckets))
        index = self.board('c').read_index()
        self.assertEqual(b'b', index.publisher)


class FileTagBoardTestCase(TagBoardMixin, base.TestCase):
    server_class = servers.FileBackend
    released_at_death = True


class RedisTagBoardTestCase(TagBoardMixin, base.TestCase):
    server_class = servers.RedisServer


class EtcdTagBoardTestCase(TagBoardMixin, base.TestCase):
    server_class = servers.EtcdServer


class ZooKeeperTagBoardTestCase(TagBoardMixin, base.TestCase):
    server_class = servers.ZooKeeperServer
