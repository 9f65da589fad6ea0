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

"""Node tags reach every process, from one reader of the nodes table.

On real Ironic: a tag change through the API, and one written straight
into the database (as inspection rules in a conductor, or an operator's
SQL, would), each moves the node in the API's answers and in the
conductors' power syncs within the bound the operator guide states;
and of the API and conductors, one process alone reads the table.
"""

import json
import time

import sqlalchemy as sa

from ironic_affinity.tests.e2e import base

RESCAN = 10
# node_tags_interval's default.
INTERVAL = 2.0
# The API that took a tag change places by it at once, and whichever
# process holds the lock as soon as it reads the change (the API's notice,
# or its full read); the others within the bound the operator guide
# states, about two intervals (the holder reads, then each process reads
# what it published), and a power sync begun just before may still run.
# Which of the two intervals' phases the processes fall in decides where
# within it: 1.7 s before the conductors' membership moved into
# conductor_lifecycle, 3.5 to 5.5 s after, on the same machine.
SETTLE_TAGS = 2 * INTERVAL + 1.0
READER = 'now reads node affinity tags from the database'
WARM = 's after start, from the'
POWER_SYNC = 'for power state sync'
CONDUCTORS = {
    1: {'soft_affinity_tags': 'rack1:5'},
    2: {'soft_affinity_tags': 'rack2:5'},
}


class NodeTagsTestCase(base.TestCase):
    def test_changes_reach_every_process_from_one_reader(self):
        dep = self.deploy(
            CONDUCTORS,
            extra_conf='\n[affinity]\nnode_tags_rescan_interval = %d\n'
            % RESCAN,
        )
        node = dep.create_node('node1', 'rack1')
        self.assert_power_sync(self.wait_placed({node: {self.name(1)}}))

        # Through the API: the middleware's notice.
        started = time.monotonic()
        status, _ = dep.patch_node(node, 'affinity_tags', 'rack2')
        self.assertEqual(200, status)
        moved = self.wait_placed({node: {self.name(2)}}, timeout=4 * INTERVAL)
        through_api = time.monotonic() - started
        self.assert_power_sync(moved, settle=SETTLE_TAGS)

        # Behind the API's back: only the full read sees it.
        engine = sa.create_engine(dep.database_url)
        self.addCleanup(engine.dispose)
        with engine.begin() as connection:
            connection.execute(
                sa.text('UPDATE nodes SET extra = :extra WHERE uuid = :uuid'),
                {
                    'extra': json.dumps({'affinity_tags': 'rack1'}),
                    'uuid': node,
                },
            )
        started = time.monotonic()
        bound = RESCAN + 2 * INTERVAL + 2.0  # a full read of a few rows
        back = self.wait_placed({node: {self.name(1)}}, timeout=bound)
        direct = time.monotonic() - started
        self.assert_power_sync(back, settle=SETTLE_TAGS)

        readers = [name for name in dep.processes if READER in dep.log(name)]
        self.assertEqual(1, len(readers), readers)
        # Warm at start: every process read the tags when it started,
        # each conductor before its first power sync.
        for name in dep.processes:
            log = dep.log(name)
            self.assertIn(WARM, log, name)
            if name.startswith('conductor'):
                self.assertLess(log.index(WARM), log.index(POWER_SYNC), name)
        base.record(
            case='node tags freshness',
            through_api_seconds=round(through_api, 2),
            direct_write_seconds=round(direct, 2),
            bound_seconds=bound,
            reader=readers[0],
        )
