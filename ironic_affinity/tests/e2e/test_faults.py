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

"""Faults under a running Ironic: the database goes away; two processes
see a change at different times.

The database outage runs on a PostgreSQL of the test's own, which it
stops and starts; the machine's server is left alone.
"""

import datetime
import json
import logging
import os
import subprocess
import sys
import time

import fixtures
import sqlalchemy as sa

from ironic_affinity.integration.data import ironic_db
from ironic_affinity.integration.node_tags import tag_board
from ironic_affinity.integration.node_tags import tag_cache
from ironic_affinity.tests.e2e import base
from ironic_affinity.tests.e2e import postgres

# How long the database is stopped.
DB_OUTAGE = 15.0
# The node-tag refresh interval of the processes ([affinity]
# node_tags_interval default): several refreshes must pass.
REFRESH = 2.0
# [affinity]node_tags_rescan_interval of the deployment: how soon a write
# that bypasses the API is read.
RESCAN = 10
UNUSABLE = 'has unusable affinity tags'
CANNOT_READ = 'Cannot read node affinity tags'


class DatabaseOutageTestCase(base.TestCase):
    TIMED = True

    def test_database_outage_drops_no_node(self):
        server = self.useFixture(postgres.PostgresServer())
        dep = self.deploy(
            base.PART1,
            postgres=server.url,
            extra_conf='\n[affinity]\nnode_tags_rescan_interval = %d\n'
            % RESCAN,
        )
        node1 = dep.create_node('node1', 'rack10, network1, datacenter1')
        node2 = dep.create_node('node2', 'rack11')
        node3 = dep.create_node('node3', 'rack11, customer1')
        # A value written before the plugin checked values at the API:
        # straight into the database, as an old Ironic would have.
        legacy = dep.create_node('legacy', '')
        bad = {'affinity_tags': 'rack10, bad tag!'}
        engine = sa.create_engine(dep.database_url)
        self.addCleanup(engine.dispose)
        with engine.begin() as connection:
            connection.execute(
                sa.text(
                    'UPDATE nodes SET extra = :extra, updated_at = :now '
                    'WHERE uuid = :uuid'
                ),
                {
                    'extra': json.dumps(bad),
                    'now': datetime.datetime.now(datetime.timezone.utc),
                    'uuid': legacy,
                },
            )
        engine.dispose()

        # The bad value reads as no tags: the node is placed, by the same
        # rule `explain` applies to an untagged node.
        explained = dep.cli('explain', legacy, '-f', 'json')
        self.assertEqual(0, explained.returncode, explained.stderr)
        explanation = json.loads(explained.stdout)
        self.assertEqual([], explanation['tags'])
        placed = self.wait_placed(
            {
                node1: {self.name(1)},
                node2: {self.name(1), self.name(2)},
                node3: {self.name(1)},
                legacy: {explanation['conductor']},
            }
        )

        # One warning naming the node, by the one process that reads the
        # nodes table, however many times it reads the row again: the
        # write bypassed the API, so its next full read finds it.
        def warnings():
            return {
                name: [
                    line
                    for line in dep.log(name).splitlines()
                    if UNUSABLE in line
                ]
                for name in dep.processes
            }

        dep.wait(
            lambda: any(warnings().values()),
            RESCAN + 4 * REFRESH,
            'the reader to warn of the unusable value',
        )
        time.sleep(2 * RESCAN)  # two more full reads
        found = {name: w for name, w in warnings().items() if w}
        self.assertEqual(1, len(found), found)
        (lines,) = found.values()
        self.assertEqual(1, len(lines), lines)
        self.assertIn(legacy, lines[0])
        self.assertIn('tag!', lines[0])

        # A cache of our own beside Ironic's processes, to watch it serve
        # through the outage.
        logger = self.useFixture(
            fixtures.FakeLogger(
                name=tag_cache.__name__,
                level=logging.INFO,
                format='%(message)s',
            )
        )
        # It reads what the reader publishes on the backend.
        database = ironic_db.IronicDatabase(dep.database_url)
        self.addCleanup(database.dispose)
        cache = tag_cache.NodeTagCache(
            database,
            tag_board.TagBoard(dep.redis.url, 'e2e', 'test-cache', 5),
            'affinity_tags',
            0.5,
            60,
            'e2e.api',
        )
        cache.start()
        self.addCleanup(cache.stop)
        self.assertFalse(cache.leading)
        known = {n: cache.get(n) for n in (node1, node2, node3, legacy)}
        self.assertEqual(
            frozenset({'rack10', 'network1', 'datacenter1'}), known[node1]
        )
        self.assertEqual(frozenset(), known[legacy])

        server.stop()
        deadline = time.monotonic() + DB_OUTAGE
        while time.monotonic() < deadline:
            for node, node_tags_seen in known.items():
                self.assertEqual(node_tags_seen, cache.get(node), node)
            time.sleep(0.5)
        for name, process in dep.processes.items():
            self.assertIsNone(process.poll(), '%s exited' % name)
        server.start()

        # Everything comes back by itself; no node moved or was dropped.
        dep.wait_conductors(1, 2, 3)
        self.wait_placed({node: {c} for node, c in placed.items()}, 60)
        for _ in range(5):
            for node, conductor in placed.items():
                self.assertEqual(conductor, dep.conductor_of(node), node)
            time.sleep(1)
        self.assert_power_sync(placed)
        for name in dep.processes:
            self.assertNotIn('Orphaned node', dep.log(name), name)

        # The cache reads again: a fix made through the API reaches it.
        status, _ = dep.patch_node(legacy, 'affinity_tags', 'rack12')
        self.assertEqual(200, status)
        dep.wait(
            lambda: cache.get(legacy) == frozenset({'rack12'}),
            10,
            'the fixed tags in the cache',
        )
        # It read the backend throughout, which answered: no outage of
        # its own to report.
        self.assertNotIn(CANNOT_READ, logger.output)
        # The one reader of the nodes table noticed the outage once, and
        # only once; no other process reads the table.
        noticed = {
            name: dep.log(name).count(CANNOT_READ) for name in dep.processes
        }
        self.assertEqual([1], [n for n in noticed.values() if n], noticed)
        self.assertEqual(
            1,
            sum(
                'readable from the database again' in dep.log(name)
                for name in dep.processes
            ),
        )


class ViewsConvergeTestCase(base.TestCase):
    TIMED = True

    # Processes standing for conductor1 and conductor2 each work the node
    # whenever their own view says it is theirs, as conductors' periodic
    # tasks do. Two run with the default watch interval: they show how
    # soon views converge. A third, for conductor1, reads the group only
    # every SLOW_WATCH s, so when the node moves to conductor2 it still
    # believes the node its own for several seconds: the window in which
    # only Ironic's node lock stands between two workers.
    SLOW_WATCH = 15
    RUN = 30.0
    # Seconds between every worker's first answer and the change.
    CHANGE_AFTER = 3.0

    def _worker(self, dep, tag, index, node, extra_conf=''):
        out = os.path.join(dep.dir, 'worker-%s.json' % tag)
        conf = os.path.join(dep.dir, 'worker-%s.conf' % tag)
        with open(conf, 'w') as handle:
            handle.write(extra_conf)
        log = open(os.path.join(dep.dir, 'worker-%s.log' % tag), 'wb')
        self.addCleanup(log.close)
        process = subprocess.Popen(
            [
                sys.executable,
                '-m',
                'ironic_affinity.tests.e2e.lock_worker',
                '--config-file',
                dep.conf,
                '--config-file',
                conf,
                '--identity',
                self.name(index),
                '--node',
                node,
                '--seconds',
                str(self.RUN),
                '--out',
                out,
            ],  # fmt: skip
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        self.addCleanup(lambda: process.poll() is None and process.kill())
        return process, out

    def test_views_converge_and_the_node_lock_serialises_work(self):
        dep = self.deploy({1: base.PART1[1], 2: base.PART1[2]})
        node = dep.create_node('node1', 'rack10, network1, datacenter1')
        self.wait_placed({node: {self.name(1)}})
        workers = {
            'old': self._worker(dep, 'old', 1, node),
            'new': self._worker(dep, 'new', 2, node),
            'old-slow': self._worker(
                dep,
                'old-slow',
                1,
                node,
                '[affinity]\nwatch_interval = %d\n' % self.SLOW_WATCH,
            ),
        }

        def ready():
            return all(
                'ready: first owner %s' % self.name(1)
                in dep.log('worker-%s' % tag)
                for tag in workers
            )

        dep.wait(ready, 60, 'every worker to see conductor1 own the node')
        time.sleep(self.CHANGE_AFTER)
        # conductor2 now prefers rack10 strongly: node1 is its.
        changed = time.time()
        dep.reload(
            2, **dict(base.PART1[2], soft_affinity_tags='rack10:5 network1')
        )
        self.wait_placed({node: {self.name(2)}})
        runs = {}
        for tag, (process, out) in workers.items():
            self.assertEqual(0, process.wait(self.RUN + 60), tag)
            with open(out) as handle:
                runs[tag] = json.load(handle)

        def first_seen(run):
            return min(t for t, owner in run['views'] if owner == self.name(2))

        # Every view ends on conductor2, after one change; the two with
        # default settings agree within the member timeout of each other.
        for tag, run in runs.items():
            self.assertEqual(self.name(2), run['views'][-1][1], tag)
            self.assertEqual(1, len(run['views']) - 1, (tag, run['views']))
        seen = {tag: first_seen(run) for tag, run in runs.items()}
        apart = abs(seen['old'] - seen['new'])
        member_timeout = 5.0
        self.assertLess(apart, member_timeout, seen)
        # Ironic 39 restarts the conductor's worker on SIGHUP: conductor2
        # handed its group entry to the next worker instead of leaving.
        log = dep.log('conductor2')
        self.assertIn('is being replaced: keeping its entry', log)
        self.assertNotIn('left the group', log)

        # From when the new owner's view saw the change until the slow
        # one's did, both believed the node theirs and both tried to
        # work it; Ironic refused one of them the lock...
        both_from = first_seen(runs['new'])
        both_until = first_seen(runs['old-slow'])
        self.assertGreater(both_until - both_from, 2.0, seen)
        refused = [
            t
            for run in runs.values()
            for t in run['locked_out']
            if both_from <= t <= both_until
        ]
        self.assertTrue(refused, 'no lock refused while both claimed it')
        # ...and no two periods of work on the node ever overlapped.
        periods = sorted(p for run in runs.values() for p in run['worked'])
        for (_, end), (start, _) in zip(periods, periods[1:], strict=False):
            self.assertLessEqual(end, start, periods)
        base.record(
            test='views_converge',
            sighup_to_views_seconds={
                tag: round(t - changed, 2) for tag, t in seen.items()
            },
            default_views_apart_seconds=round(apart, 2),
            both_claimed_seconds=round(both_until - both_from, 2),
            lock_refusals=len(refused),
            work_periods=len(periods),
        )
