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

"""Who may read the affinity resources, on real Ironic and real Keystone.

Ironic enforces its policy only with its keystone authentication
strategy, so here Ironic runs with it, against a Keystone of the test's
own (keystone_server.py), with Ironic's default policy: an anonymous
caller, callers whom the policy refuses and callers it lets in, each
with a token of their own, ask for a node's affinity (which needs
``baremetal:node:get`` on the node, with its project scoping) and for
the deployment's (``baremetal:conductor:get``). Each answer must be the
one Ironic gives the caller for the resource it was asked, body and
all, and a refusal must carry nothing of the affinity answer. A node's
affinity also needs ``baremetal:conductor:get``, as it names every
conductor with its tags and verdict: the reader of the node's project
reads the node in Ironic but is refused its affinity.

This runs on the latest release only (``tox -e e2e``, the one
environment that installs Keystone): Keystone's set-up alone takes about
10 s (the whole case about 25 s on a 2-core machine), CI runs the
stable-release environments one after the other within its time limit,
and the policy is Ironic's, which our middleware only asks.
"""

import json
import os
import subprocess

from testtools import content

from ironic_affinity.tests.e2e import base
from ironic_affinity.tests.e2e import deployment
from ironic_affinity.tests.e2e import keystone_server
from ironic_affinity.tests.e2e import test_affinity_api

# Clear of the blocks of the other cases (8091 to 8691 and up).
FIRST_RPC_PORT = 8791
PASSWORD = 'user-secret'
NODE = '/v1/nodes/node1/affinity'
DEPLOYMENT = '/v1/affinity'
# What Ironic is asked for each, in order: the first refusal is passed
# on as it is.
IRONIC_READS = {
    NODE: ('/v1/nodes/node1', '/v1/conductors'),
    DEPLOYMENT: ('/v1/conductors',),
}
# Keys of the affinity answers, which no refusal may carry.
AFFINITY_KEYS = ('conductors', 'membership', 'members', 'orphans', 'tags')


def openstack(keystone, user, password, *args, scope=None):
    """The openstack client with Keystone password authentication, the
    baremetal endpoint found in Keystone's catalog.

    :param scope: a project name, or None for the whole system."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith('OS_')
    }
    env.update(
        OS_AUTH_TYPE='password',
        OS_AUTH_URL=keystone.url + '/v3',
        OS_IDENTITY_API_VERSION='3',
        OS_USERNAME=user,
        OS_PASSWORD=password,
        OS_USER_DOMAIN_NAME='Default',
        OS_REGION_NAME=keystone_server.REGION,
        OS_INTERFACE='public',
    )
    if scope is None:
        env['OS_SYSTEM_SCOPE'] = 'all'
    else:
        env.update(OS_PROJECT_NAME=scope, OS_PROJECT_DOMAIN_NAME='Default')
    return subprocess.run(
        [deployment._bin('openstack'), *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=env,
    )


class AffinityPolicyTestCase(base.TestCase):
    def attach_logs(self, keystone):
        """On failure, the ends of Keystone's and Ironic's API logs: the
        reason for a refusal is there, not in the answer."""

        def attach(exc_info):
            logs = {'keystone.log': keystone.log()}
            if getattr(self, 'dep', None) is not None:
                logs['ironic-api.log'] = self.dep.log('api')
            for name, text in logs.items():
                self.addDetail(name, content.text_content(text[-20000:]))

        self.addOnException(attach)

    def test_refusals_are_ironic_s_and_admin_is_answered(self):
        keystone = self.useFixture(keystone_server.KeystoneServer())
        self.attach_logs(keystone)
        owner = keystone.create_project('owner')
        other = keystone.create_project('other')
        keystone.create_user('owner-reader', PASSWORD, owner, 'reader')
        keystone.create_user('other-reader', PASSWORD, other, 'reader')
        keystone.create_user('other-member', PASSWORD, other, 'member')
        # No role assignment anywhere: Keystone gives such a user an
        # unscoped token only.
        keystone.create_user('nobody', PASSWORD)

        dep = self.deploy(
            test_affinity_api.CONDUCTORS,
            first_rpc_port=FIRST_RPC_PORT,
            keystone=keystone,
        )
        c1, c2 = self.name(1), self.name(2)
        uuid = dep.create_node('node1', 'datacenter1, rack10', owner=owner)
        self.wait_placed({'node1': {c1}})

        callers = {
            'anonymous': None,
            'unknown token': 'not-a-token',
            'nobody, unscoped': keystone.token('nobody', PASSWORD),
            'other reader': keystone.token('other-reader', PASSWORD, 'other'),
            'other member': keystone.token('other-member', PASSWORD, 'other'),
            'owner reader': keystone.token('owner-reader', PASSWORD, 'owner'),
            'system admin': keystone.admin_token,
        }
        answers = {}
        for caller, token in callers.items():
            for path in (NODE, DEPLOYMENT):
                status, body = dep._request('GET', path, credentials=token)
                answers[caller, path] = (status, body)
                if status != 200:
                    # Refused: Ironic's own answer to the first read it
                    # refuses, to the letter, and none of ours.
                    for read in IRONIC_READS[path]:
                        ironic = dep._request('GET', read, credentials=token)
                        if ironic[0] != 200:
                            break
                    self.assertEqual(ironic, (status, body), (caller, path))
                    for key in AFFINITY_KEYS:
                        self.assertNotIn(key, body, (caller, path))

        statuses = {key: answer[0] for key, answer in answers.items()}
        self.assertEqual(
            {
                # keystonemiddleware's, before Ironic is reached.
                ('anonymous', NODE): 401,
                ('anonymous', DEPLOYMENT): 401,
                ('unknown token', NODE): 401,
                ('unknown token', DEPLOYMENT): 401,
                # Ironic hides a node from whoever may not read it: it
                # answers a refusal by baremetal:node:get with the 404 of
                # a node that does not exist, so that a caller cannot
                # learn which nodes other projects have. A member has
                # the reader role too (Keystone's implied roles), but on
                # another project; an unscoped token has no project.
                ('nobody, unscoped', NODE): 404,
                ('other reader', NODE): 404,
                ('other member', NODE): 404,
                # Listing conductors is for system readers (and the
                # service project's service role): a 403 for the rest,
                # the node's own project included.
                ('nobody, unscoped', DEPLOYMENT): 403,
                ('other reader', DEPLOYMENT): 403,
                ('other member', DEPLOYMENT): 403,
                ('owner reader', DEPLOYMENT): 403,
                # The owner's reader may read the node in Ironic, not
                # the conductors its affinity describes: Ironic's 403
                # of the conductor list.
                ('owner reader', NODE): 403,
                ('system admin', NODE): 200,
                ('system admin', DEPLOYMENT): 200,
            },
            statuses,
        )
        # The project scoping: Ironic shows that reader the node.
        seen = dep._request(
            'GET', IRONIC_READS[NODE][0], credentials=callers['owner reader']
        )
        self.assertEqual((200, uuid), (seen[0], seen[1].get('uuid')))
        found = answers['system admin', NODE][1]
        self.assertEqual(
            (uuid, c1, ['datacenter1', 'rack10']),
            (found['uuid'], found['conductor'], found['tags']),
        )
        overview = answers['system admin', DEPLOYMENT][1]
        self.assertEqual(
            {c1: 1, c2: 0},
            {m['name']: m['nodes'] for m in overview['members']},
        )

        self.check_openstack_client(keystone, dep, c1)

    def check_openstack_client(self, keystone, dep, c1):
        keystone.register_endpoint(
            'baremetal', 'http://127.0.0.1:%d' % dep.api_port
        )
        shown = openstack(
            keystone,
            'admin',
            keystone_server.ADMIN_PASSWORD,
            *('baremetal', 'node', 'affinity', 'show', 'node1', '-f', 'json'),
        )
        self.assertEqual(0, shown.returncode, shown.stderr)
        self.assertEqual(c1, json.loads(shown.stdout)['conductor'])

        # A project reader: neither its node's affinity nor the
        # deployment's, both of which describe the conductors.
        for command in (
            ('baremetal', 'node', 'affinity', 'show', 'node1'),
            ('baremetal', 'affinity', 'list'),
        ):
            refused = openstack(
                keystone, 'owner-reader', PASSWORD, *command, scope='owner'
            )
            self.assertNotEqual(0, refused.returncode, command)
            self.assertIn('403', refused.stderr, command)
