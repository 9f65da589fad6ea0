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

"""Tagging at scale: ``openstack baremetal affinity tag`` sets the tags of
many nodes from one CSV file through Ironic's API and our door, as an
operator of a standalone Ironic runs it (the real openstack client, no
authentication: test_affinity_api.py covers http_basic).

300 nodes in the whole suite, which the 30-minute gate runs; 2,000 in
the full matrix (``tox -e e2e-tagging``), which took the gate on fe354c0
over its budget (204 s of its 1,812 s).
"""

import csv
import json
import os
import time

import fixtures

from ironic_affinity.tests.e2e import base
from ironic_affinity.tests.e2e import load
from ironic_affinity.tests.e2e import test_affinity_api

NODES = int(os.environ.get('IRONIC_AFFINITY_E2E_TAG_NODES', '300'))
# Clear of the ports of the other cases.
FIRST_RPC_PORT = 8591
# Soft tags only: an untagged node must have a conductor, since Ironic
# refuses to update a node that none may take (an orphan).
CONDUCTORS = {
    1: {'soft_affinity_tags': 'rack10'},
    2: {'soft_affinity_tags': 'rack20'},
}


def rack(index):
    return 'rack10' if index % 2 else 'rack20'


class TaggingTestCase(base.TestCase):
    def test_a_mapping_of_many_nodes(self):
        # Power sync is not what this case tests: every 2 s over 2,000
        # nodes, it took most of the case's CPU and locked the nodes the
        # writes wanted (each a 409, tried again a second later).
        dep = self.deploy(
            CONDUCTORS,
            first_rpc_port=FIRST_RPC_PORT,
            extra_conf='\n[conductor]\nsync_power_state_interval = 600\n',
        )
        nodes = load.create_nodes(
            dep.api_port, NODES, prefix='tag', tags=lambda i: ''
        )
        # Every node gets dc1 and its rack; the first one a bad tag.
        mapping = {n.name: 'dc1, %s' % rack(i) for i, n in enumerate(nodes)}
        bad = nodes[0].name
        mapping[bad] = 'dc1 bad!tag'
        path = os.path.join(self.useFixture(fixtures.TempDir()).path, 'm.csv')
        with open(path, 'w', newline='') as stream:
            writer = csv.writer(stream)
            writer.writerow(['node', 'tags'])
            writer.writerows(mapping.items())

        def tag(*args):
            started = time.monotonic()
            result = test_affinity_api.openstack(
                dep,
                'baremetal',
                'affinity',
                'tag',
                path,
                '-f',
                'json',
                *args,
                credentials=None,
                timeout=900,
            )
            # One node refused: exit status 1, the rest as asked.
            self.assertEqual(1, result.returncode, result.stderr[-2000:])
            rows = {r['Node']: r for r in json.loads(result.stdout)}
            return rows, time.monotonic() - started, result.stderr

        dry, dry_seconds, _said = tag()
        self.assertEqual(NODES, len(dry))
        self.assertIn('invalid tag', dry[bad]['Result'])
        self.assertEqual(
            NODES - 1, sum(r['Result'] == 'to change' for r in dry.values())
        )
        # A dry run writes nothing (load.create_nodes wrote no tags).
        untagged = {'affinity_tags': ''}
        self.assertEqual(
            untagged, dep._get('/v1/nodes/%s' % nodes[1].uuid)['extra']
        )

        applied, apply_seconds, said = tag('--apply')
        self.assertEqual(
            NODES - 1,
            sum(r['Result'] == 'changed' for r in applied.values()),
            (list(applied.values())[:3], said[-1000:]),
        )
        self.assertTrue(applied[bad]['Result'].startswith('refused: '))
        self.assertIn('%d changed, 0 refused' % (NODES - 1), said)
        # The refused node is untouched; the others hold their tags.
        self.assertEqual(
            untagged, dep._get('/v1/nodes/%s' % nodes[0].uuid)['extra']
        )
        for index in (1, 2, NODES - 1):
            self.assertEqual(
                {'affinity_tags': 'dc1, %s' % rack(index)},
                dep._get('/v1/nodes/%s' % nodes[index].uuid)['extra'],
            )
        # Applied again, nothing is left to write.
        again, _seconds, _said = tag('--apply')
        self.assertEqual(
            NODES - 1, sum(r['Result'] == 'unchanged' for r in again.values())
        )
        # And the nodes follow their racks.
        expected = {
            nodes[i].uuid: {self.name(1 if rack(i) == 'rack10' else 2)}
            for i in (1, 2, 3, 4)
        }
        self.wait_placed(expected, timeout=60)
        base.record(
            test='tag_mapping',
            nodes=NODES,
            dry_run_seconds=round(dry_seconds, 1),
            apply_seconds=round(apply_seconds, 1),
        )
