#!/usr/bin/env python3
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

"""Print a transcript of the openstack client plugin on a live Ironic.

    .tox/e2e/bin/python tools/openstack_client_transcript.py

Starts the end-to-end harness's deployment (Ironic's API with http_basic
authentication and three conductors, PostgreSQL and Redis as in the
end-to-end tests), creates the RFE's first example nodes plus one that
no conductor may take, and prints each ``openstack baremetal ...
affinity`` command with its output, as the operator guide shows them.
"""

import os
import shlex
import subprocess

import fixtures

from ironic_affinity.tests.e2e import deployment

CREDENTIALS = ('operator', 'op-secret')
FIRST_RPC_PORT = 8591

CONDUCTORS = {
    1: dict(
        hard_affinity_tags='datacenter1',
        soft_affinity_tags='rack10, network1:2',
    ),
    2: dict(
        hard_affinity_tags='datacenter1',
        soft_affinity_tags='rack20',
        soft_anti_affinity_tags='network1',
    ),
    3: dict(
        hard_affinity_tags='datacenter1', hard_anti_affinity_tags='network2'
    ),
}
NODES = {
    'node1': 'datacenter1, rack10, network1',
    'node2': 'datacenter1, rack20, network2',
    'node3': 'datacenter1, rack30, network1',
    'orphan': 'datacenter2',
}
COMMANDS = (
    'openstack baremetal node affinity show node1',
    'openstack baremetal affinity list',
    'openstack baremetal affinity check',
)


def main() -> None:
    with fixtures.TempDir():
        dep = deployment.Deployment(
            first_rpc_port=FIRST_RPC_PORT, credentials=CREDENTIALS
        )
        with dep:
            for index, tags in CONDUCTORS.items():
                dep.start_conductor(index, **tags)
            dep.wait_conductors(*CONDUCTORS)
            for name, tags in NODES.items():
                dep.create_node(name, tags)
            # The API's tag cache reads new nodes within a few seconds.
            dep.wait(
                lambda: dep.get('/v1/affinity')['orphans'], 30, 'the orphan'
            )
            env = {
                k: v for k, v in os.environ.items() if not k.startswith('OS_')
            }
            env.update(
                OS_AUTH_TYPE='http_basic',
                OS_ENDPOINT='http://127.0.0.1:%d' % dep.api_port,
                OS_USERNAME=CREDENTIALS[0],
                OS_PASSWORD=CREDENTIALS[1],
            )
            print(
                '$ export OS_AUTH_TYPE=http_basic '
                'OS_ENDPOINT=http://127.0.0.1:%d' % dep.api_port
            )
            print('$ export OS_USERNAME=%s OS_PASSWORD=...' % CREDENTIALS[0])
            for line in COMMANDS:
                args = shlex.split(line)
                args[0] = deployment._bin('openstack')
                result = subprocess.run(
                    args,
                    capture_output=True,
                    text=True,
                    env=env,
                    check=False,
                )
                print('$ ' + line)
                print(result.stdout.rstrip())
                if result.stderr.strip():
                    print(result.stderr.rstrip())
                if result.returncode:
                    print('$ echo $?')
                    print(result.returncode)


if __name__ == '__main__':
    main()
