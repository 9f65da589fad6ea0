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

"""What every end-to-end test case shares: the RFE's conductors, a
deployment of them, and evidence read from Ironic.

Failover seconds and other figures are appended, as JSON lines, to the
file named by IRONIC_AFFINITY_E2E_RESULTS when set (.ci/run prints them).
"""

import importlib.metadata
import json
import os
import platform
import resource
import time

from ironic_affinity.tests import base
from ironic_affinity.tests.e2e import deployment
from ironic_affinity.tests.e2e import machine_share

# Conductor power sync runs every 2 s here: 3 rounds and some slack.
# The Ironic under test: its releases differ in how they stop and serve.
IRONIC_MAJOR = int(importlib.metadata.version('ironic').split('.')[0])
SYNC_WINDOW = 7.0
SETTLE = 3.0

PART1 = {
    1: {
        'soft_affinity_tags': 'rack10, rack11, network1, network2, datacenter1'
    },
    2: {
        'soft_affinity_tags': 'rack11, rack12, network1, datacenter1',
        'hard_anti_affinity_tags': 'customer1',
    },
    3: {'soft_affinity_tags': 'network1, datacenter2'},
}
EDIT2 = {
    1: {
        'hard_affinity_tags': 'datacenter1',
        'soft_anti_affinity_tags': 'rack20',
        'soft_affinity_tags': 'rack10 network1 network2',
    },
    2: {
        'hard_anti_affinity_tags': 'network3',
        'hard_affinity_tags': 'datacenter1',
        'soft_anti_affinity_tags': 'rack10',
        'soft_affinity_tags': 'rack20 network1 network2',
    },
    3: {
        'hard_anti_affinity_tags': 'network2 network3',
        'hard_affinity_tags': 'datacenter2',
        'soft_affinity_tags': 'rack30 network1 network2',
    },
}


def record(**figures):
    """Append figures, with the Ironic and Python they were measured on."""
    path = os.environ.get('IRONIC_AFFINITY_E2E_RESULTS')
    if path:
        figures = {
            'ironic': importlib.metadata.version('ironic'),
            'python': platform.python_version(),
            **figures,
        }
        with open(path, 'a') as handle:
            handle.write(json.dumps(figures) + '\n')


def _cpu_used():
    """CPU seconds of this process, of its waited-for children and of
    the orphans a deployment killed."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (
        own.ru_utime
        + own.ru_stime
        + children.ru_utime
        + children.ru_stime
        + deployment.orphans_cpu[0]
    )


class TestCase(base.TestCase):
    #: Whether the case measures seconds or rates against Ironic's
    #: timers under CPU load of its own (machine_share.py): it runs
    #: beside one other case at most, at a higher priority.
    TIMED = False
    #: Units an untimed case holds: more for one that keeps the machine
    #: busy throughout, so that fewer of them run at once.
    UNITS = 1

    def setUp(self):
        super().setUp()
        # First in, so last out: after every process of the case ended.
        self.addCleanup(self._record_cost, time.monotonic(), _cpu_used())
        # Before any fixture: released after every process is stopped.
        units = machine_share.TIMED_UNITS if self.TIMED else self.UNITS
        held, waited = machine_share.acquire(units)
        self.addCleanup(machine_share.release, held)
        if waited > 1:
            record(test=self.id(), waited_for_the_machine=round(waited, 1))
        if self.TIMED:
            restore = machine_share.raise_priority()
            if restore is not None:
                self.addCleanup(restore)

    def _record_cost(self, start, cpu):
        """The case's wall and CPU seconds (its own process, what it
        started and waited for, and the orphans it killed), so that
        what a case costs CI can be read, and cut (ci.rst)."""
        record(
            test=self.id(),
            wall_seconds=round(time.monotonic() - start, 1),
            cpu_seconds=round(_cpu_used() - cpu, 1),
        )

    def deploy(self, conductors, manager='affinity', **options):
        """Start the API and the given conductors; options go to
        deployment.Deployment."""
        dep = self.useFixture(deployment.Deployment(manager, **options))
        if manager == 'affinity':
            # Before the deployment's clean-up, while its logs are there.
            self.addCleanup(self.assert_never_placed_by_stock, dep)
        for index, tag_lists in conductors.items():
            dep.start_conductor(index, **tag_lists)
        # No wait for the group: a conductor joins it before Ironic lists
        # it (test_no_request_fails_while_conductors_start).
        dep.wait_conductors(*conductors)
        self.dep = dep
        return dep

    def assert_never_placed_by_stock(self, dep):
        """No conductor of a deployment that runs affinity everywhere
        placed by Ironic's ring, which knows no hard tags, even for a
        moment (a conductor whose view lacked its own vote did, until
        its next read of the group)."""
        for name in dep.log_offsets():  # the conductors
            found = [
                line
                for line in dep.log(name).splitlines()
                if 'Placement by stock' in line
            ]
            self.assertEqual([], found, name)

    def name(self, index):
        return self.dep.conductor_name(index)

    def placements(self):
        """Every node's conductor, as the API shows it, in one request."""
        status, body = self.dep._request('GET', '/v1/nodes/detail?limit=1000')
        self.assertEqual(200, status, body)
        return {n['uuid']: n['conductor'] for n in body['nodes']}

    def wait_placed(self, expected, timeout=30):
        """Wait until the API shows every node on its expected conductor
        (a set of acceptable ones, for tied nodes); return the mapping."""
        seen = {}

        def placed():
            for node, wanted in expected.items():
                seen[node] = self.dep.conductor_of(node)
                if seen[node] not in wanted:
                    return False
            return True

        self.dep.wait(
            placed,
            timeout,
            lambda: 'placements %s, last %s' % (expected, seen),
        )
        return dict(seen)

    def wait_power_sync(self, placed, timeout=60):
        """Wait until, for one SYNC_WINDOW, no conductor but a node's own
        runs its power sync; the seconds it took.

        The API may show a new node on its conductor before every
        conductor has read the node's tags: until then a conductor
        places the node by hashing, whatever its tags, and may sync it
        too (under Ironic 29's eventlet, on two busy cores, a conductor
        was seen 7 s behind the API while 300 nodes were created).
        """
        wrong = {}

        def settled():
            synced = self.power_synced_in_window()
            wrong.clear()
            for node, conductor in placed.items():
                others = synced.get(node, set()) - {conductor}
                if others:
                    wrong[node] = others
            return not wrong

        return self.dep.wait(
            settled,
            timeout,
            lambda: 'power sync by other conductors: %s' % wrong,
        )

    def assert_power_sync(self, placed, settle=SETTLE):
        """Each node's power sync runs on its conductor, and only there.

        :param settle: seconds from the API's answer to the conductors'
            agreement with it, which the window starts after.
        """
        # Every process converges within a watch interval or two of the
        # API: a sync started by the previous owner just before it saw
        # the change may still run meanwhile (Ironic's lock keeps the two
        # from working the node at once).
        time.sleep(settle)
        synced = self.power_synced_in_window()
        for node, conductor in placed.items():
            self.assertEqual({conductor}, synced.get(node), node)

    def power_synced_in_window(self):
        """node uuid -> conductors that ran its power sync in the next
        SYNC_WINDOW seconds."""
        offsets = self.dep.log_offsets()
        time.sleep(SYNC_WINDOW)
        return self.dep.power_synced_since(offsets)
