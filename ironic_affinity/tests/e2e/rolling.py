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

"""What the rolling upgrade cases share (test_upgrade,
test_ironic_upgrade): a deployment of one API and three conductors with
hard and soft tags, a max_nodes and a rebalance_period in use; its
processes restarted one at a time under reads and power actions; and
the evidence that nothing moved and that every request was answered as
on Ironic's own ring under the same restarts.

Evidence: each node's conductor in the API, sampled twice a second;
which conductor's power sync works each node (the conductors' logs);
each process's log of the group as it reads it; every request's answer.
"""

import collections
import dataclasses
import http.client
import random
import re
import threading
import time

from ironic_affinity.tests.e2e import base
from ironic_affinity.tests.e2e import deployment
from ironic_affinity.tests.e2e import load

NODES = 45
PERIOD = 20
TAGS = {
    1: {
        'hard_affinity_tags': 'dc1',
        'soft_affinity_tags': 'rack10:3',
        'max_nodes': '12',
        'rebalance_period': str(PERIOD),
    },
    2: {
        'hard_affinity_tags': 'dc1',
        'soft_affinity_tags': 'rack11:3',
        'rebalance_period': str(PERIOD),
    },
    3: {
        'hard_affinity_tags': 'dc1',
        'hard_anti_affinity_tags': 'net3',
        'rebalance_period': str(PERIOD),
    },
}
# A restart (Ironic's stop, then its start) must fit in the member
# timeout, with Ironic's heartbeat timeout above it: as in
# test_end_to_end's restart case.
MEMBER_TIMEOUT = 45
CONF = (
    """
[DEFAULT]
graceful_shutdown_timeout = 15
[affinity]
member_timeout = %d
"""
    % MEMBER_TIMEOUT
)
TIMERS = dict(deployment.CI_TIMERS, heartbeat=10, heartbeat_timeout=60)
# [affinity]watch_interval plus Ironic's hash_ring_reset_interval here.
REFRESH = 3.0
SAMPLE = 0.5
REFUSED = ConnectionRefusedError.__name__
_GROUP_LINE = re.compile(r'as read by this process: .*; left: (.*)$', re.M)


def node_tags(index: int) -> str:
    rack = ('rack10', 'rack11', 'rack12')[index % 3]
    return 'dc1 %s %s' % (rack, 'net3' if index % 5 == 0 else 'net1')


class Traffic:
    """Reads and power actions from a few threads, each answer kept:
    (time.monotonic(), kind, HTTP status or the exception's name)."""

    KINDS = ('show', 'detail', 'power')

    def __init__(self, port: int, nodes: list[str], threads: int = 3):
        self.port = port
        self.nodes = nodes
        self.answers: list[tuple[float, str, int | str]] = []
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._run, args=(i,), daemon=True)
            for i in range(threads)
        ]

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(150)

    def _run(self, index: int) -> None:
        client = load.Client(self.port, timeout=60)
        rng = random.Random(index)
        turn = index
        while not self._stop.is_set():
            kind = self.KINDS[turn % len(self.KINDS)]
            turn += 1
            node = rng.choice(self.nodes)
            try:
                if kind == 'show':
                    status, _ = client.request('GET', '/v1/nodes/%s' % node)
                elif kind == 'detail':
                    status, _ = client.request(
                        'GET', '/v1/nodes/detail?limit=1000'
                    )
                else:
                    status, _ = client.request(
                        'PUT',
                        '/v1/nodes/%s/states/power' % node,
                        {'target': rng.choice(('power on', 'power off'))},
                    )
                outcome: int | str = status
            except (OSError, http.client.HTTPException) as exc:
                outcome = type(exc).__name__
            self.answers.append((time.monotonic(), kind, outcome))
            # No API to connect to (it restarts): try again later, as a
            # client would, rather than count refusals by the hundred.
            refused = outcome == REFUSED
            self._stop.wait(0.5 if refused else 0.05)
        client.close()

    def failed(self) -> collections.Counter:
        """Requests that reached the API and failed, by (kind,
        answer): an error status, or the connection lost."""
        return collections.Counter(
            (kind, outcome)
            for _at, kind, outcome in self.answers
            if outcome not in (200, 202, REFUSED)
        )

    def refused(self) -> int:
        """Connections refused: no API process was listening."""
        return sum(1 for _a, _k, outcome in self.answers if outcome == REFUSED)


class Placements:
    """Each node's conductor as the API shows it, sampled in a thread."""

    def __init__(self, port: int):
        self.samples: list[tuple[float, dict[str, str | None]]] = []
        self._client = load.Client(port, timeout=60, retry_idle=True)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(150)
        self._client.close()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                body = self._client.get_json('/v1/nodes/detail?limit=1000')
            except (OSError, http.client.HTTPException, AssertionError):
                pass  # the API restarting: no sample
            else:
                self.samples.append(
                    (
                        time.monotonic(),
                        {n['uuid']: n['conductor'] for n in body['nodes']},
                    )
                )
            self._stop.wait(SAMPLE)

    def moved(self, placed: dict[str, str | None]) -> dict[str, set]:
        """Nodes seen anywhere but in ``placed``, with where."""
        found: dict[str, set] = {}
        for _at, seen in self.samples:
            for node, conductor in seen.items():
                if conductor != placed.get(node):
                    found.setdefault(node, set()).add(conductor)
        return found


@dataclasses.dataclass
class Answered:
    """How a deployment answered the traffic of one upgrade."""

    requests: int
    failed: collections.Counter
    refused: int

    @classmethod
    def of(cls, traffic: Traffic) -> 'Answered':
        return cls(len(traffic.answers), traffic.failed(), traffic.refused())

    def figures(self, prefix: str = '') -> dict:
        """For base.record."""
        return {
            prefix + 'requests': self.requests,
            prefix + 'failed': sum(self.failed.values()),
            prefix + 'failed_by_kind': sorted(
                '%s %s: %d' % (*k, v) for k, v in self.failed.items()
            ),
            prefix + 'refused': self.refused,
        }


class RollingTestCase(base.TestCase):
    TIMED = True

    def start(self, manager, build, extra_conf=''):
        """A deployment of the API and three conductors on ``build``,
        with NODES nodes placed and power-synced where they are:
        (the deployment, the nodes, each node's conductor)."""
        dep = self.useFixture(
            deployment.Deployment(
                manager,
                timers=TIMERS,
                extra_conf=CONF + extra_conf,
                build=build,
            )
        )
        self.dep = dep
        for index, tag_lists in TAGS.items():
            dep.start_conductor(index, build=build, **tag_lists)
        dep.wait_conductors(1, 2, 3)
        nodes = load.create_nodes(
            dep.api_port, NODES, prefix='up', tags=node_tags
        )
        uuids = [n.uuid for n in nodes]
        names = {self.name(i) for i in TAGS}
        dep.wait(
            lambda: set(self.placements().values()) == names,
            60,
            'nodes on all three conductors',
        )
        # Settled: the same placement for two refreshes (nodes created
        # after the conductors joined follow their joins at once).
        placed = self.placements()
        deadline = time.monotonic() + 2 * REFRESH
        while time.monotonic() < deadline:
            time.sleep(1)
            now = self.placements()
            if now != placed:
                placed, deadline = now, time.monotonic() + 2 * REFRESH
        self.wait_power_sync(placed)
        return dep, uuids, placed

    def roll(self, dep, build, check=None):
        """Restart the conductors, then the API, one at a time, on
        ``build``; the seconds each restart took. ``check`` runs after
        the first conductor's."""
        took = {}
        for index in TAGS:
            name = 'conductor%d' % index
            started = time.monotonic()
            dep.stop(name, keep_registered=True)
            offset = dep.log_offsets()[name]
            dep.start_conductor(index, build=build, **TAGS[index])
            dep.wait(
                lambda name=name, offset=offset: (
                    'Successfully started '
                    'conductor'
                    in dep.log_since(name, offset, dep.log_offsets()[name])
                ),
                MEMBER_TIMEOUT,
                '%s back' % name,
            )
            took[name] = round(time.monotonic() - started, 1)
            if check is not None and index == 1:
                check()
        started = time.monotonic()
        dep.stop('api')
        dep.start_api(build)
        took['api'] = round(time.monotonic() - started, 1)
        return took

    def under_load(self, dep, uuids, action):
        """Run ``action`` under traffic and sampling: (its result, the
        traffic, the placements sampled)."""
        traffic = Traffic(dep.api_port, uuids)
        sampled = Placements(dep.api_port)
        traffic.start()
        sampled.start()
        try:
            time.sleep(3)
            result = action()
            time.sleep(REFRESH + 2)
        finally:
            traffic.stop()
            sampled.stop()
        return result, traffic, sampled

    def assert_nothing_moved(self, dep, uuids, placed, sampled, offsets):
        """No node changed conductor, in the API or in the power syncs
        since ``offsets``; hard tags held; no process dropped another
        from its view of the group, nor stood down."""
        self.assertEqual({}, sampled.moved(placed))
        self.assertGreater(len(sampled.samples), 20)
        synced = dep.power_synced_since(offsets)
        self.assertEqual(
            {},
            {n: c for n, c in synced.items() if not c <= {placed[n]}},
        )
        tags_of = dict(zip(uuids, map(node_tags, range(NODES)), strict=True))
        for node, conductor in placed.items():
            index = 1 + [self.name(i) for i in TAGS].index(conductor)
            own = set(tags_of[node].split())
            self.assertIn(TAGS[index]['hard_affinity_tags'], own)
            self.assertNotIn(
                TAGS[index].get('hard_anti_affinity_tags', '-'), own
            )
        for name in [*dep.log_offsets(), 'api']:
            log = dep.log(name)
            self.assertEqual(
                {'-'}, set(_GROUP_LINE.findall(log)) | {'-'}, name
            )
            self.assertNotIn('Standing down', log, name)

    def assert_answered_as_stock(self, answered, stock):
        """Every request answered as on Ironic's own ring. (Refused
        connections, while the one API restarts, are counted apart.)

        Reads never fail: the API answers them alone. A power action on
        a node of a conductor that is restarting fails (500, "Unable to
        establish connection"), on Ironic's ring too: the node stays
        with its conductor. How many depends on how long each restart
        lasts, which is Ironic's own start and varies by some tens of
        percent from one run to the next: so as a rate, within half
        again of stock's.
        """
        self.assertEqual(
            [],
            [
                (kind, outcome)
                for kind, outcome in answered.failed
                if kind != 'power' and isinstance(outcome, int)
            ],
        )
        self.assertLessEqual(
            sum(answered.failed.values()) / answered.requests,
            1.5 * sum(stock.failed.values()) / stock.requests,
            (answered.failed, stock.failed),
        )
