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

"""The node tag cache on a SQLite copy of the columns it reads.

The cache's clocks are fake: ``clock.advance(s)`` moves its monotonic
clock and its wall clock together, and writers stamp rows with the wall
clock plus whatever skew a test gives them.
"""

import datetime
import json
import logging
import os
from unittest import mock

import fixtures
import sqlalchemy as sa

from ironic_affinity.integration import ironic_db
from ironic_affinity.integration import node_tags
from ironic_affinity.tests import base

NODES = ironic_db.NODES
INTERVAL = 2.0
RESCAN = 60.0


class FakeClock:
    def __init__(self) -> None:
        self.seconds = 1000.0
        self.wall = datetime.datetime(2026, 6, 1, 12, 0, 0)

    def monotonic(self) -> float:
        return self.seconds

    def utcnow(self) -> datetime.datetime:
        return self.wall

    def advance(self, seconds: float) -> None:
        self.seconds += seconds
        self.wall += datetime.timedelta(seconds=seconds)


class NodeTagCacheTestCase(base.TestCase):
    def setUp(self):
        super().setUp()
        directory = self.useFixture(fixtures.TempDir()).path
        self.url = 'sqlite:///' + os.path.join(directory, 'nodes.db')
        self.engine = sa.create_engine(self.url)
        self.addCleanup(self.engine.dispose)
        ironic_db.METADATA.create_all(self.engine)
        self.clock = FakeClock()
        with self.engine.begin() as connection:
            connection.execute(
                NODES.insert(),
                [
                    {
                        'uuid': 'node-%02d' % i,
                        'extra': json.dumps({'affinity_tags': 'rack%d' % i}),
                        # Enrolled long ago: only saves are recent.
                        'created_at': datetime.datetime(2026, 1, 1),
                    }
                    for i in range(10)
                ],
            )
        self.cache = self.make_cache(self.url)
        self.useFixture(fixtures.MockPatchObject(node_tags, 'BATCH', 3))
        self.sleep = self.useFixture(
            fixtures.MockPatchObject(node_tags.time, 'sleep', autospec=True)
        ).mock
        self.log = self.useFixture(
            fixtures.FakeLogger(
                name=node_tags.__name__,
                level=logging.INFO,
                format='%(levelname)s %(message)s',
            )
        )

    def make_cache(self, database):
        cache = node_tags.NodeTagCache(
            database,
            'affinity_tags',
            INTERVAL,
            RESCAN,
            clock=self.clock.monotonic,
            utcnow=self.clock.utcnow,
        )
        self.addCleanup(cache.stop)
        return cache

    def write(self, uuid, tags, skew=0.0):
        """Save a node as a writer whose clock is ``skew`` s off."""
        stamp = self.clock.wall + datetime.timedelta(seconds=skew)
        with self.engine.begin() as connection:
            connection.execute(
                NODES.update().where(NODES.c.uuid == uuid),
                {
                    'extra': json.dumps({'affinity_tags': tags}),
                    'updated_at': stamp,
                },
            )

    def lines(self, level):
        return [
            line
            for line in self.log.output.splitlines()
            if line.startswith(level + ' ')
        ]

    def test_reads_every_node_in_batches(self):
        self.cache.refresh()
        self.assertEqual(10, len(self.cache))
        self.assertEqual(10, self.cache.last_rows)
        self.assertTrue(self.cache.last_full)
        self.assertEqual(frozenset({'rack4'}), self.cache.get('node-04'))
        self.assertIsNone(self.cache.get('node-99'))
        # Four batches of at most 3 rows read, then four applied: the
        # thread gives up the interpreter after each.
        self.assertEqual([mock.call(0)] * 8, self.sleep.call_args_list)

    def test_accepts_a_shared_database(self):
        database = ironic_db.IronicDatabase(self.url)
        self.addCleanup(database.dispose)
        cache = self.make_cache(database)
        cache.refresh()
        self.assertEqual(frozenset({'rack4'}), cache.get('node-04'))
        self.assertIs(database, cache.database)
        with mock.patch.object(database, 'dispose', autospec=True) as gone:
            cache.stop()
        # Its owner closes it, not the cache.
        gone.assert_not_called()
        with mock.patch.object(
            self.cache.database, 'dispose', autospec=True
        ) as owned:
            self.cache.stop()
        owned.assert_called_once_with()

    def test_incremental_window(self):
        self.cache.refresh()
        self.clock.advance(INTERVAL)
        # Nothing saved: no row comes back.
        self.cache.refresh()
        self.assertFalse(self.cache.last_full)
        self.assertEqual(0, self.cache.last_rows)
        # Stamped just inside the margin before the start of the previous
        # read (now), as by a writer that committed late.
        self.write('node-04', 'dc2', skew=-29)
        # Stamped just outside it: left to the full re-read.
        self.write('node-05', 'dc2', skew=-31)
        version = self.cache.version
        self.clock.advance(INTERVAL)
        self.cache.refresh()
        self.assertFalse(self.cache.last_full)
        self.assertEqual(1, self.cache.last_rows)
        self.assertEqual(frozenset({'dc2'}), self.cache.get('node-04'))
        self.assertEqual(frozenset({'rack5'}), self.cache.get('node-05'))
        self.assertEqual(version + 1, self.cache.version)
        # A row saved now is read by every fast read for MARGIN seconds
        # after the read that follows, and never again by them.
        self.write('node-06', 'dc2')
        with self.engine.begin() as connection:
            connection.execute(
                NODES.insert(),
                {
                    'uuid': 'node-new',
                    'extra': json.dumps({'affinity_tags': 'rack1'}),
                    'created_at': self.clock.wall,
                },
            )
        rows = []
        for _ in range(20):
            self.clock.advance(INTERVAL)
            self.cache.refresh()
            self.assertFalse(self.cache.last_full)
            rows.append(self.cache.last_rows)
        self.assertEqual([2] * 16 + [0] * 4, rows)
        self.assertEqual(frozenset({'dc2'}), self.cache.get('node-06'))
        self.assertEqual(frozenset({'rack1'}), self.cache.get('node-new'))
        self.assertEqual(version + 2, self.cache.version)
        self.assertEqual(frozenset({'rack5'}), self.cache.get('node-05'))

    def test_writer_clock_lagging_five_minutes(self):
        self.cache.refresh()
        self.clock.advance(INTERVAL)
        self.write('node-04', 'dc3', skew=-300)
        # Every fast read before the full re-read is due misses it.
        while self.cache.full_due_in() > 0:
            self.cache.refresh()
            self.assertFalse(self.cache.last_full)
            self.assertEqual(frozenset({'rack4'}), self.cache.get('node-04'))
            self.clock.advance(min(INTERVAL, self.cache.full_due_in()))
        # Due RESCAN seconds after the first read began, not later.
        self.assertEqual(1000.0 + RESCAN, self.clock.seconds)
        version = self.cache.version
        self.cache.refresh()
        self.assertTrue(self.cache.last_full)
        self.assertEqual(10, self.cache.last_rows)
        self.assertEqual(frozenset({'dc3'}), self.cache.get('node-04'))
        self.assertEqual(version + 1, self.cache.version)
        self.assertEqual(RESCAN, self.cache.full_due_in())

    def test_thread_wakes_when_the_full_read_is_due(self):
        self.cache.refresh()
        self.write('node-04', 'dc3', skew=-300)
        self.clock.advance(RESCAN - 0.5)
        waits = []

        def wait(timeout):
            waits.append(timeout)
            self.clock.advance(timeout)
            return len(waits) > 2

        with mock.patch.object(self.cache._stop, 'wait', wait):
            self.cache._run()
        # Woken at the due time, then the fast pace again.
        self.assertEqual([0.5, INTERVAL, INTERVAL], waits)
        self.assertEqual(frozenset({'dc3'}), self.cache.get('node-04'))

    def test_thread_retries_at_the_fast_pace_in_an_outage(self):
        self.cache.refresh()
        self.clock.advance(RESCAN)
        waits = []

        def wait(timeout):
            waits.append(timeout)
            self.clock.advance(timeout)
            return len(waits) > 3

        gone = sa.exc.OperationalError('SELECT', {}, Exception('gone'))
        with mock.patch.object(self.cache._stop, 'wait', wait):
            with mock.patch.object(
                self.cache.database.engine, 'connect', side_effect=gone
            ):
                self.cache._run()
        # The full read is due throughout, but failing: no busy loop.
        self.assertEqual([0.0, INTERVAL, INTERVAL, INTERVAL], waits)
        self.assertEqual(1, len(self.lines('WARNING')))

    def test_deleted_nodes_forgotten(self):
        self._write_bad('node-07')
        self.cache.refresh()
        version = self.cache.version
        with self.engine.begin() as connection:
            connection.execute(
                NODES.delete().where(NODES.c.uuid.in_(['node-07', 'node-08']))
            )
        self.clock.advance(INTERVAL)
        self.cache.refresh()
        self.assertIsNotNone(self.cache.get('node-07'))
        self.clock.advance(RESCAN)
        self.cache.refresh()
        self.assertTrue(self.cache.last_full)
        self.assertIsNone(self.cache.get('node-07'))
        self.assertIsNone(self.cache.get('node-08'))
        self.assertEqual(8, len(self.cache))
        self.assertEqual(version + 1, self.cache.version)
        self.assertNotIn('node-07', self.cache._bad)

    def _write_bad(self, uuid, value=42):
        with self.engine.begin() as connection:
            connection.execute(
                NODES.update().where(NODES.c.uuid == uuid),
                {
                    'extra': json.dumps({'affinity_tags': value}),
                    'updated_at': self.clock.wall,
                },
            )

    def test_bad_tags_warned_once_per_node(self):
        self._write_bad('node-04')
        self._write_bad('node-05', 'tag!')
        # Read by the first full read, fast reads within the margin and
        # a full re-read: one warning per node.
        self.cache.refresh()
        for _ in range(3):
            self.clock.advance(INTERVAL)
            self.cache.refresh()
            self.assertEqual(2, self.cache.last_rows)
        self.clock.advance(RESCAN)
        self.cache.refresh()
        self.assertTrue(self.cache.last_full)
        warnings = self.lines('WARNING')
        self.assertEqual(2, len(warnings), warnings)
        self.assertIn('node-04', warnings[0] + warnings[1])
        self.assertIn('node-05', warnings[0] + warnings[1])
        self.assertEqual(frozenset(), self.cache.get('node-04'))
        self.assertEqual(frozenset(), self.cache.get('node-05'))
        self.assertEqual(frozenset({'rack6'}), self.cache.get('node-06'))
        # Fixed, then broken again: warned again.
        self.write('node-04', 'rack4')
        self.clock.advance(INTERVAL)
        self.cache.refresh()
        self.assertEqual(frozenset({'rack4'}), self.cache.get('node-04'))
        self._write_bad('node-04')
        self.clock.advance(INTERVAL)
        self.cache.refresh()
        self.assertEqual(3, len(self.lines('WARNING')))

    def test_database_outage_keeps_the_last_tags(self):
        self.cache.refresh()
        self.write('node-04', 'dc2')
        gone = sa.exc.OperationalError('SELECT', {}, Exception('gone'))
        with mock.patch.object(
            self.cache.database.engine, 'connect', side_effect=gone
        ):
            for _ in range(5):
                self.clock.advance(INTERVAL)
                self.cache.poll()
                self.assertEqual(
                    frozenset({'rack4'}), self.cache.get('node-04')
                )
                self.assertEqual(10, len(self.cache))
            # Longer than a rescan interval: the next read is a full one.
            self.clock.advance(RESCAN)
            self.cache.poll()
        warnings = self.lines('WARNING')
        self.assertEqual(1, len(warnings), warnings)
        self.assertIn('gone', warnings[0])
        self.assertIn('last known tags of 10 nodes', warnings[0])
        self.assertEqual([], self.lines('INFO'))
        self.clock.advance(INTERVAL)
        self.cache.poll()
        self.assertTrue(self.cache.last_full)
        self.assertEqual(frozenset({'dc2'}), self.cache.get('node-04'))
        self.cache.poll()
        self.assertEqual(
            ['INFO Node affinity tags readable again after 70 s'],
            self.lines('INFO'),
        )
        self.assertEqual(1, len(self.lines('WARNING')))

    def test_failed_read_changes_nothing(self):
        self.cache.refresh()
        version = self.cache.version
        with self.engine.begin() as connection:
            connection.execute(
                NODES.update(),
                {
                    'extra': json.dumps({'affinity_tags': 'dc3'}),
                    'updated_at': self.clock.wall,
                },
            )
        real = node_tags._batches

        def broken(connection, since):
            batches = real(connection, since)
            yield next(batches)
            raise sa.exc.OperationalError('FETCH', {}, Exception('gone'))

        self.clock.advance(INTERVAL)
        with mock.patch.object(node_tags, '_batches', broken):
            self.assertRaises(sa.exc.OperationalError, self.cache.refresh)
        self.assertEqual(frozenset({'rack4'}), self.cache.get('node-04'))
        self.assertEqual(version, self.cache.version)
        self.cache.refresh()
        self.assertEqual(frozenset({'dc3'}), self.cache.get('node-04'))
        self.assertEqual(version + 1, self.cache.version)

    def test_full_read_lets_unused_tag_sets_go(self):
        self.cache.refresh()
        for i in range(10):
            self.write('node-%02d' % i, 'dc1')
        self.clock.advance(RESCAN)
        self.cache.refresh()
        self.assertEqual({frozenset({'dc1'})}, set(self.cache._interned))
        self.assertIs(self.cache.get('node-01'), self.cache.get('node-02'))
