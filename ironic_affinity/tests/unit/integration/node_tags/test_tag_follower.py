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

"""The followers: every other process holds what the reader publishes,
reading only the buckets that changed, and never the nodes table."""

import calendar
import datetime

from ironic_affinity.integration.node_tags import board_format
from ironic_affinity.integration.node_tags import node_facts
from ironic_affinity.tests.unit.integration.node_tags import (
    test_tag_cache as test_node_tags,
)

INTERVAL = test_node_tags.INTERVAL
RESCAN = test_node_tags.RESCAN
GROUP = test_node_tags.GROUP
NODES = test_node_tags.NODES
RefusingDatabase = test_node_tags.RefusingDatabase


class TagFollowerTestCase(test_node_tags.CacheTestCase):
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
        expected = node_facts.NodeFacts('ipmi', 'rack-a', frozenset({'rack4'}))
        for cache in (reader, follower):
            found = dict(cache.nodes())
            self.assertEqual(10, len(found))
            self.assertEqual(expected, found[self.uuid(4)])
            self.assertEqual(
                node_facts.NodeFacts('', '', frozenset({'rack5'})),
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

    def created(self, index, at):
        with self.database.engine.begin() as connection:
            connection.execute(
                NODES.update().where(NODES.c.uuid == self.uuid(index)),
                {'created_at': at},
            )

    def test_creation_times_reach_every_process(self):
        # Naive UTC, as Ironic writes it; rounded up to the second.
        self.created(4, datetime.datetime(2026, 12, 5, 1, 2, 3, 400000))
        expected = calendar.timegm((2026, 12, 5, 1, 2, 4, 0, 0, 0))
        reader = self.cache()
        reader.poll()
        follower = self.cache(RefusingDatabase(), name='b')
        follower.poll()
        for cache in (reader, follower):
            self.assertEqual(expected, cache.created_at(self.uuid(4)))
            self.assertEqual(
                expected, dict(cache.nodes())[self.uuid(4)].created_at
            )
            # No time in the row: none known.
            self.assertIsNone(cache.created_at(self.uuid(5)))
        # Read from its row before it is published, as its tags are.
        self.add_node(10, 'rack10')
        self.created(10, datetime.datetime(2026, 12, 5, 2, 0, 0))
        other = self.cache(name='c')
        other.poll()
        self.add_node(11, 'rack11')
        self.created(11, datetime.datetime(2026, 12, 5, 2, 0, 0))
        self.assertEqual(frozenset({'rack11'}), other.lookup(self.uuid(11)))
        self.assertEqual(
            calendar.timegm((2026, 12, 5, 2, 0, 0, 0, 0, 0)),
            other.created_at(self.uuid(11)),
        )

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

    def test_the_first_processes_read_for_themselves(self):
        # Another process holds the lock but has published nothing yet.
        self.backend.locks[board_format.lock_name(GROUP)] = (b'x', 1e9)
        cache = self.cache()
        cache.poll()
        self.assertFalse(cache.leading)
        self.assertEqual(10, cache.last_rows)
        self.assertTrue(cache.loaded.is_set())
