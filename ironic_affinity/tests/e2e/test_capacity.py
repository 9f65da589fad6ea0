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

"""[affinity]max_nodes through Ironic: a full conductor refuses nodes its
soft tags would take, and takes them back when a SIGHUP raises it.

Evidence is Ironic's: the nodes' ``conductor`` field in the REST API,
and which conductor's power sync works each node.
"""

import collections
import json
import time

from ironic_affinity.tests.e2e import base

NODES = 10
LIMIT = 4


class CapacityTestCase(base.TestCase):
    def wait_loads(self, nodes, expected, timeout=60):
        """Wait until the API shows ``expected`` loads, the same node by
        node in two reads SETTLE seconds apart: while nodes are being
        read, a process places a new one by the room left in its last
        computation, and counts it at the next (a move is allowed then,
        and must have stopped); return the placement."""
        seen = {}
        last = {}

        def settled():
            placed = {n: self.dep.conductor_of(n) for n in nodes}
            seen.clear()
            seen.update(collections.Counter(placed.values()))
            if seen != expected:
                last.clear()
                return False
            if placed == last.get('placed'):
                return True
            last['placed'] = placed
            time.sleep(base.SETTLE)
            return False

        self.dep.wait(
            settled,
            timeout,
            lambda: 'loads %s, last seen %s' % (expected, dict(seen)),
        )
        return last['placed']

    def test_a_full_conductor_refuses_nodes_until_raised(self):
        dep = self.deploy(
            {
                1: {'soft_affinity_tags': 'rack10', 'max_nodes': str(LIMIT)},
                2: {},
            }
        )
        first, second = self.name(1), self.name(2)
        nodes = [dep.create_node('n%d' % i, 'rack10') for i in range(NODES)]
        # Every node prefers conductor1; it holds LIMIT of them.
        placed = self.wait_loads(nodes, {first: LIMIT, second: NODES - LIMIT})
        # And holds no more for a while: every process agrees.
        time.sleep(base.SETTLE)
        self.assertEqual(placed, {n: dep.conductor_of(n) for n in nodes})
        self.assert_power_sync(placed)

        result = dep.cli('members', '-f', 'json')
        self.assertEqual(0, result.returncode, result.stderr)
        members = {m['name']: m for m in json.loads(result.stdout)['members']}
        self.assertEqual(LIMIT, members[first]['max_nodes'])
        self.assertEqual(0, members[second]['max_nodes'])
        spilled = next(n for n, c in placed.items() if c == second)
        result = dep.cli('explain', spilled, '-f', 'json')
        self.assertEqual(0, result.returncode, result.stderr)
        explained = json.loads(result.stdout)
        self.assertEqual(
            (second, first),
            (explained['conductor'], explained['spilled_from']),
        )
        result = dep.cli('plan', '--live', '-f', 'json')
        self.assertEqual(0, result.returncode, result.stderr)
        planned = json.loads(result.stdout)
        self.assertEqual(LIMIT, planned['capacities'][first])
        self.assertEqual(NODES - LIMIT, planned['spilled'])
        # Nobody is over: conductor2 has no limit.
        result = dep.cli('check', '-f', 'json')
        self.assertEqual(0, result.returncode, result.stdout)
        self.assertEqual({}, json.loads(result.stdout)['over_capacity'])

        # Raised with SIGHUP: conductor1 takes every node back.
        dep.reload(
            1,
            keep_registered=True,
            soft_affinity_tags='rack10',
            max_nodes=str(NODES * 2),
        )
        placed = self.wait_loads(nodes, {first: NODES})
        self.assert_power_sync(placed)

        # Lowered on both below the node count: conductor1, the first
        # choice of every node, takes those nobody has room for, and
        # check says so.
        dep.reload(
            1, keep_registered=True, soft_affinity_tags='rack10', max_nodes='3'
        )
        dep.reload(2, keep_registered=True, max_nodes='3')
        self.wait_loads(nodes, {first: NODES - 3, second: 3})
        result = dep.cli('check', '-f', 'json')
        self.assertEqual(1, result.returncode, result.stdout)
        over = json.loads(result.stdout)['over_capacity']
        self.assertEqual({first: {'nodes': NODES - 3, 'max_nodes': 3}}, over)
        self.assertIn('over [affinity]max_nodes', dep.log('api'))
