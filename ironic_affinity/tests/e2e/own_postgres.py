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

"""Run an end-to-end suite on a PostgreSQL cluster of its own.

    python -m ironic_affinity.tests.e2e.own_postgres COMMAND...

Starts a throwaway cluster (postgres.PostgresServer), runs COMMAND with
IRONIC_AFFINITY_E2E_POSTGRES naming it, then stops and removes the
cluster and exits with COMMAND's status. tox runs each stable release's
suite this way, so that the suites of several releases can run side by
side: one deployment holds about 20 connections, and four of them would
fill the machine's server (100). When IRONIC_AFFINITY_E2E_POSTGRES is
set already, COMMAND runs against that server instead.
"""

import os
import signal
import subprocess
import sys

from ironic_affinity.tests.e2e import postgres

VARIABLE = 'IRONIC_AFFINITY_E2E_POSTGRES'


def main(command: list[str]) -> int:
    if not command:
        print(__doc__, file=sys.stderr)
        return 2
    if os.environ.get(VARIABLE):
        return subprocess.call(command)
    # A stopped run (tox is interrupted, CI times out) still removes
    # the cluster, whose server runs in a session of its own.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    server = postgres.PostgresServer()
    server.setUp()
    try:
        print('PostgreSQL of this suite: %s' % server.url, flush=True)
        environment = dict(os.environ, **{VARIABLE: server.url})
        return subprocess.call(command, env=environment)
    finally:
        server.cleanUp()


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
