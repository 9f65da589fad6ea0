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
request), so what these cases can show of authorisation on real Ironic
is authentication: an anonymous caller and a wrong password are refused
with Ironic's own 401, and the authenticated caller is answered. That a
refusal by policy (403) or a node outside the caller's project (404) is
passed on as Ironic gave it is shown in the unit tests
(tests/unit/integration/test_affinity_api.py).
"""

from ironic_affinity.tests.e2e import base

# Clear of the ports 8091 and up and 8391 and up other cases use.
FIRST_RPC_PORT = 8491
CREDENTIALS = ('operator', 'op-secret')


class AffinityAPITestCase(base.TestCase):
    def test_node_and_deployment_affinity_with_http_basic(self):
        dep = self.deploy(
            {
                1: {
                    'hard_affinity_tags': 'datacenter1',
                    'soft_affinity_tags': 'rack10',
                },
                2: {'hard_affinity_tags': 'rack20'},
            },
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
