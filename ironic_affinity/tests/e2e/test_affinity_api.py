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

"""The affinity resources of Ironic's API, on real Ironic with
authentication on (Ironic's http_basic strategy: no Keystone needed).

Ironic enforces its policy file only with the keystone strategy (with
any other, ironic.common.policy.authorize allows every authenticated
request), so what these cases show of authorisation is authentication:
an anonymous caller and a wrong password are refused with Ironic's own
401, and the authenticated caller is answered. Refusals by policy (403)
and a node outside the caller's project (404) are shown on real Ironic
with a real Keystone in test_affinity_policy.py, and in the unit tests
(tests/unit/integration/api/test_affinity_api.py).
"""

import json
import os
import subprocess

from ironic_affinity.tests.e2e import base
from ironic_affinity.tests.e2e import deployment

# Clear of the ports 8091 and up and 8391 and up other cases use.
FIRST_RPC_PORT = 8491
CREDENTIALS = ('operator', 'op-secret')
# Two conductors: node1 (datacenter1, rack10) may go to the first only.
CONDUCTORS = {
    1: {'hard_affinity_tags': 'datacenter1', 'soft_affinity_tags': 'rack10'},
    2: {'hard_affinity_tags': 'rack20'},
}


def openstack(dep, *args, credentials=CREDENTIALS, timeout=120):
    """The openstack client, as an operator runs it against this API:
    the baremetal client's http_basic authentication, or none with
    ``credentials=None`` (a standalone Ironic), no clouds.yaml."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith('OS_')
    }
    env['OS_ENDPOINT'] = 'http://127.0.0.1:%d' % dep.api_port
    if credentials is None:
        env['OS_AUTH_TYPE'] = 'none'
    else:
        env.update(
            OS_AUTH_TYPE='http_basic',
            OS_USERNAME=credentials[0],
            OS_PASSWORD=credentials[1],
        )
    return subprocess.run(
        [deployment._bin('openstack'), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env=env,
    )


class AffinityAPITestCase(base.TestCase):
    def test_node_and_deployment_affinity_with_http_basic(self):
        dep = self.deploy(
            CONDUCTORS,
            first_rpc_port=FIRST_RPC_PORT,
            credentials=CREDENTIALS,
        )
        c1, c2 = self.name(1), self.name(2)
        uuid = dep.create_node('node1', 'datacenter1, rack10')
        dep.create_node('lost', 'datacenter9')
        self.wait_placed({'node1': {c1}})

        for path in ('/v1/nodes/node1/affinity', '/v1/affinity'):
            for caller in (None, ('operator', 'wrong')):
                status, body = dep._request('GET', path, credentials=caller)
                self.assertEqual(401, status, (path, caller, body))
                # Ironic's answer, not ours: Ironic's auth middleware's.
                self.assertNotIn('membership', str(body))

        status, found = dep._request('GET', '/v1/nodes/node1/affinity')
        self.assertEqual(200, status, found)
        self.assertEqual(
            (uuid, 'node1', c1, c1, ['datacenter1', 'rack10']),
            (
                found['uuid'],
                found['node'],
                found['conductor'],
                found['ironic_conductor'],
                found['tags'],
            ),
        )
        rows = {r['conductor']: r for r in found['conductors']}
        self.assertEqual('chosen', rows[c1]['verdict'])
        self.assertEqual([['rack10', 1]], rows[c1]['breakdown'])
        self.assertEqual('excluded', rows[c2]['verdict'])
        self.assertIn('rack20', rows[c2]['reason'])
        self.assertEqual([c1], found['fallback'])
        self.assertTrue(found['membership']['readable'])

        # By UUID too; a node Ironic does not have is Ironic's 404.
        status, by_uuid = dep._request('GET', '/v1/nodes/%s/affinity' % uuid)
        self.assertEqual((200, c1), (status, by_uuid['conductor']))
        status, missing = dep._request('GET', '/v1/nodes/nosuch/affinity')
        self.assertEqual(404, status, missing)
        self.assertIn('nosuch', missing['error_message'])

        answers = []

        def orphaned():
            answers.append(dep._request('GET', '/v1/affinity'))
            return bool(answers[-1][1].get('orphans'))

        # Until the API's tag cache has read the new node.
        dep.wait(orphaned, 30, 'lost orphaned')
        status, overview = answers[-1]
        self.assertEqual(200, status, overview)
        counts = {m['name']: m['nodes'] for m in overview['members']}
        self.assertEqual({c1: 1, c2: 0}, counts)
        self.assertEqual(['lost'], [o['node'] for o in overview['orphans']])
        self.assertEqual(
            [('node1', c1)],
            [
                (s['node'], s['conductor'])
                for s in overview['single_conductor']
            ],
        )
        self.assertEqual([], overview['not_members'])
        self.assertEqual(2, overview['nodes'])

        self.check_openstack_client(dep, c1, c2, uuid)

    def check_openstack_client(self, dep, c1, c2, uuid):
        result = openstack(
            dep, 'baremetal', 'node', 'affinity', 'show', 'node1', '-f', 'json'
        )
        self.assertEqual(0, result.returncode, result.stderr)
        shown = json.loads(result.stdout)
        self.assertEqual(
            (uuid, c1, [c1], ['datacenter1', 'rack10']),
            (
                shown['uuid'],
                shown['conductor'],
                shown['fallback'],
                shown['tags'],
            ),
        )
        verdicts = {v['conductor']: v['verdict'] for v in shown['verdicts']}
        self.assertEqual({c1: 'chosen', c2: 'excluded'}, verdicts)
        table = openstack(
            dep, 'baremetal', 'node', 'affinity', 'show', 'node1'
        )
        self.assertIn('%s: chosen, score 1 (rack10 +1)' % c1, table.stdout)

        result = openstack(dep, 'baremetal', 'affinity', 'list', '-f', 'json')
        self.assertEqual(0, result.returncode, result.stderr)
        listed = {m['Name']: m for m in json.loads(result.stdout)}
        self.assertEqual(
            {c1: 1, c2: 0}, {n: m['Nodes'] for n, m in listed.items()}
        )
        self.assertEqual(['datacenter1'], listed[c1]['Hard Affinity Tags'])
        self.assertEqual('rack10', listed[c1]['Soft Affinity Tags'])

        # An orphan: the rows, and a status monitoring can alert on.
        result = openstack(dep, 'baremetal', 'affinity', 'check', '-f', 'json')
        self.assertEqual(1, result.returncode, result.stderr)
        problems = {r['Node']: r['Problem'] for r in json.loads(result.stdout)}
        self.assertEqual(
            {'lost': 'no valid conductor', 'node1': 'one valid conductor'},
            problems,
        )

        refused = openstack(
            dep,
            'baremetal',
            'affinity',
            'list',
            credentials=('operator', 'wrong'),
        )
        self.assertNotEqual(0, refused.returncode)
        self.assertIn('401', refused.stderr)
