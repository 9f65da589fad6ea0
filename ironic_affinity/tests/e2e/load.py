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

"""Load on a real deployment: many tagged nodes, readers, a crash.

The machinery shared by the kill-under-load test and tools/soak.py: a
Deployment tuned for thousands of nodes, nodes created through the REST
API from a few threads, reader threads recording every request's status
and latency, a conductor crashed while they read, and the API's own view
of which conductor holds each node.

Which reads ask the ring (Ironic 39, api/controllers/v1/node.py): the
node's ``conductor`` field is computed, node by node, by the API's
``ConductorAPI.get_conductor_for``, that is ``get_ring(driver,
group).get_nodes(uuid)``, whenever a response carries that field. So
``GET /v1/nodes/<node>`` makes one ring lookup, ``GET /v1/nodes/detail``
one per node listed, and the ``?conductor=NAME`` filter of the lists one
per node scanned. The plain ``GET /v1/nodes`` returns a fixed handful of
fields without ``conductor`` and never asks the ring: it measures the
API and database alone. The readers do all three kinds.
"""

import collections
from collections.abc import Callable
from collections.abc import Iterable
from collections.abc import Mapping
from collections.abc import Sequence
import dataclasses
import http.client
import json
import os
import random
import re
import threading
import time
from typing import Any

from ironic_affinity.tests.e2e import deployment
from ironic_affinity.tests.e2e import previous_build

# Above the block the other end-to-end tests use (8091-8095), so that a
# load run can go on beside them; the soak script takes another block
# (SOAK_RPC_PORT, and ten above it for its second run), so that it can
# run beside the load test too.
FIRST_RPC_PORT = 8191
SOAK_RPC_PORT = 8291

# Each node carries dc1, one network and mostly one rack. Every conductor
# requires dc1 and refuses one network, so each node is refused by exactly
# one conductor and has two eligible ones: a single crash orphans nothing.
# Soft tags spread the nodes and make some of them tie (hashed between
# the two).
CONDUCTOR_TAGS: dict[int, dict[str, str]] = {
    1: {
        'hard_affinity_tags': 'dc1',
        'hard_anti_affinity_tags': 'net3',
        'soft_affinity_tags': 'rack1 rack2 net1:2',
        'soft_anti_affinity_tags': 'rack6',
    },
    2: {
        'hard_affinity_tags': 'dc1',
        'hard_anti_affinity_tags': 'net1',
        'soft_affinity_tags': 'rack3 rack4 net2:2',
        'soft_anti_affinity_tags': 'rack2',
    },
    3: {
        'hard_affinity_tags': 'dc1',
        'hard_anti_affinity_tags': 'net2',
        'soft_affinity_tags': 'rack5 rack6 net3:2',
        'soft_anti_affinity_tags': 'rack4',
    },
}
NETWORKS = ('net1', 'net2', 'net3')
RACKS = tuple('rack%d' % i for i in range(1, 7))

# The mix of reads: kind -> relative weight.
READ_MIX = {'node': 8, 'list': 1, 'detail': 1}
# Nodes per page of the list reads.
PAGE = 100


def node_tags(index: int) -> str:
    """The tags of the index-th node: the same on every run."""
    rng = random.Random(index)
    found = ['dc1', NETWORKS[index % len(NETWORKS)]]
    if rng.random() < 0.8:
        found.append(rng.choice(RACKS))
    if rng.random() < 0.1:
        # Scored by nobody.
        found.append('gpu')
    return ' '.join(found)


def _words(text: str) -> set[str]:
    return {word.split(':')[0] for word in re.split(r'[\s,]+', text) if word}


def eligible(tag_lists: Mapping[str, str], tags: str) -> bool:
    """Whether a conductor's hard lists allow a node (the rule's steps 2
    and 3, written out here rather than taken from the engine)."""
    have = _words(tags)
    required = _words(tag_lists.get('hard_affinity_tags', ''))
    refused = _words(tag_lists.get('hard_anti_affinity_tags', ''))
    return required <= have and not refused & have


class NotRouting(AssertionError):
    """The API routes no request to any conductor, though all are up."""


class LoadDeployment(deployment.Deployment):
    """A Deployment for thousands of nodes.

    Conductors run the power sync every ``sync_interval`` seconds
    (Ironic's default, 60, rather than the 2 s of the other end-to-end
    tests, which would keep two cores busy syncing 5,000 nodes), and the
    API pages up to ``max_limit`` nodes, so that one ``?conductor=`` list
    scans every node.
    """

    def __init__(
        self,
        manager: str = 'affinity',
        timers: dict[str, int] | None = None,
        first_rpc_port: int = FIRST_RPC_PORT,
        sync_interval: int = 60,
        max_limit: int = 1000,
    ) -> None:
        super().__init__(manager, timers, first_rpc_port=first_rpc_port)
        self.sync_interval = sync_interval
        self.max_limit = max_limit
        self._tuned = False

    def _start(
        self,
        name: str,
        command: list[str],
        build: previous_build.Build | None = None,
    ) -> None:
        # Deployment writes the shared configuration and then starts the
        # API before anything else: adjust the file once, before any
        # process reads it.
        if not self._tuned:
            self._tune()
            self._tuned = True
        super()._start(name, command, build)

    def _tune(self) -> None:
        with open(self.conf) as handle:
            text = handle.read()
        text, found = re.subn(
            r'(?m)^sync_power_state_interval = .*$',
            'sync_power_state_interval = %d' % self.sync_interval,
            text,
        )
        # Fail loudly if Deployment's configuration ever changes shape.
        assert found == 1, 'no sync_power_state_interval in ' + self.conf
        text, found = re.subn(
            r'(?m)^\[api\]$', '[api]\nmax_limit = %d' % self.max_limit, text
        )
        assert found == 1, 'no [api] section in ' + self.conf
        with open(self.conf, 'w') as handle:
            handle.write(text)

    def start_all(self, count: int, routing_timeout: float = 30.0) -> None:
        """Start conductors 1..count with CONDUCTOR_TAGS (cycled), and
        wait until the API routes requests to them.

        :raises: NotRouting when the API still routes nothing
            ``routing_timeout`` seconds after Ironic lists every conductor
            as alive.
        """
        for index in range(1, count + 1):
            self.start_conductor(index, **self.tag_lists(index))
        self.wait_conductors(*range(1, count + 1), timeout=120)
        try:
            self.wait(self._routes, routing_timeout, 'the API to route')
        except AssertionError as exc:
            errors = [
                line
                for line in self.log('api').splitlines()
                if re.match(r'\S+ \S+ \d+ ERROR ', line)
            ]
            raise NotRouting(
                '%s: GET /v1/drivers/fake-hardware/properties never '
                'answered 200; last API errors: %s' % (exc, errors[-3:])
            ) from None

    def _routes(self) -> bool:
        # Ironic answers this by asking the ring for any conductor of the
        # hardware type (rpcapi.get_topic_for_driver) and calling it over
        # RPC: 200 once the API can route to a live conductor.
        try:
            status, _ = self._request(
                'GET', '/v1/drivers/fake-hardware/properties'
            )
        except OSError:
            return False
        return status == 200

    @staticmethod
    def tag_lists(index: int) -> dict[str, str]:
        return CONDUCTOR_TAGS[(index - 1) % len(CONDUCTOR_TAGS) + 1]


class Client:
    """One keep-alive connection to the API, for one thread at a time.

    A failed request closes the connection; the next one reconnects.
    With ``retry_idle``, a GET on a connection the server closed while
    idle (its keep-alive timeout) is sent once more on a new one; the
    readers never idle, and take no retry, so that every failure counts.
    """

    def __init__(
        self, port: int, timeout: float = 120.0, retry_idle: bool = False
    ) -> None:
        self.port = port
        self.timeout = timeout
        self.retry_idle = retry_idle
        self._connection: http.client.HTTPConnection | None = None

    def request(
        self, method: str, path: str, body: object = None
    ) -> tuple[int, bytes]:
        reused = self._connection is not None
        try:
            return self._request(method, path, body)
        except (http.client.RemoteDisconnected, ConnectionResetError):
            if not (reused and self.retry_idle and method == 'GET'):
                raise
        return self._request(method, path, body)

    def _request(
        self, method: str, path: str, body: object
    ) -> tuple[int, bytes]:
        if self._connection is None:
            self._connection = http.client.HTTPConnection(
                '127.0.0.1', self.port, timeout=self.timeout
            )
        headers = dict(deployment.API_VERSION)
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers['Content-Type'] = 'application/json'
        try:
            self._connection.request(method, path, data, headers)
            response = self._connection.getresponse()
            return response.status, response.read()
        except (OSError, http.client.HTTPException):
            self.close()
            raise

    def get_json(self, path: str) -> Any:
        status, body = self.request('GET', path)
        if status != 200:
            raise AssertionError('GET %s: %d %r' % (path, status, body[:500]))
        return json.loads(body)

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None


@dataclasses.dataclass(frozen=True)
class Node:
    uuid: str
    name: str
    tags: str


def create_nodes(
    port: int,
    count: int,
    threads: int = 6,
    prefix: str = 'load',
    tags: Callable[[int], str] = node_tags,
) -> list[Node]:
    """POST ``count`` tagged nodes from ``threads`` threads, in index
    order.

    :param tags: the tags of the index-th node.
    """
    created: list[Node | None] = [None] * count
    failures: list[str] = []

    def work(first: int) -> None:
        client = Client(port)
        try:
            for index in range(first, count, threads):
                if failures:
                    return
                name = '%s-%05d' % (prefix, index)
                found = tags(index)
                status, body = client.request(
                    'POST',
                    '/v1/nodes',
                    {
                        'name': name,
                        'driver': 'fake-hardware',
                        'extra': {'affinity_tags': found},
                    },
                )
                if status != 201:
                    failures.append('%s: %d %r' % (name, status, body[:300]))
                    return
                created[index] = Node(json.loads(body)['uuid'], name, found)
        except Exception as exc:
            failures.append('%s: %r' % (threading.current_thread().name, exc))
        finally:
            client.close()

    workers = [
        threading.Thread(target=work, args=(i,), name='create-%d' % i)
        for i in range(threads)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    if failures:
        raise AssertionError('node creation failed: %s' % failures[:5])
    return [node for node in created if node is not None]


# Reading under load


@dataclasses.dataclass(frozen=True)
class Sample:
    """One request of a reader."""

    kind: str
    # time.monotonic() when it was sent.
    at: float
    seconds: float
    # 0 when no HTTP answer came (connection refused, reset, timeout).
    status: int


@dataclasses.dataclass(frozen=True)
class Failure:
    kind: str
    at: float
    path: str
    status: int
    detail: str


class Readers:
    """``count`` threads reading nodes as fast as the API answers."""

    def __init__(
        self,
        port: int,
        nodes: Sequence[str],
        count: int,
        mix: Mapping[str, int] | None = None,
        seed: int = 0,
    ) -> None:
        self.port = port
        self.nodes = list(nodes)
        self.count = count
        self.mix = dict(READ_MIX if mix is None else mix)
        self.seed = seed
        self.samples: list[Sample] = []
        self.failures: list[Failure] = []
        self.started = 0.0
        self.stopped = 0.0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        self.started = time.monotonic()
        self._threads = [
            threading.Thread(target=self._run, args=(i,), name='reader-%d' % i)
            for i in range(self.count)
        ]
        for thread in self._threads:
            thread.start()

    def stop(self) -> list[Sample]:
        self._stop.set()
        for thread in self._threads:
            thread.join(180)
        self.stopped = time.monotonic()
        return self.samples

    def _path(self, kind: str, rng: random.Random) -> str:
        if kind == 'node':
            return '/v1/nodes/%s' % rng.choice(self.nodes)
        # A random page: the marker is a random node.
        marker = rng.choice(self.nodes)
        if kind == 'detail':
            return '/v1/nodes/detail?limit=%d&marker=%s' % (PAGE, marker)
        return '/v1/nodes?limit=%d&marker=%s' % (PAGE, marker)

    def _run(self, index: int) -> None:
        rng = random.Random('%s-%d' % (self.seed, index))
        kinds = list(self.mix)
        weights = [self.mix[k] for k in kinds]
        client = Client(self.port, timeout=60)
        samples: list[Sample] = []
        failures: list[Failure] = []
        while not self._stop.is_set():
            kind = rng.choices(kinds, weights)[0]
            path = self._path(kind, rng)
            start = time.monotonic()
            try:
                status, body = client.request('GET', path)
                detail = '' if status < 400 else body[:300].decode('replace')
            except (OSError, http.client.HTTPException) as exc:
                status, detail = 0, repr(exc)
                # Do not spin on a refused connection.
                time.sleep(0.05)
            samples.append(
                Sample(kind, start, time.monotonic() - start, status)
            )
            if detail:
                failures.append(Failure(kind, start, path, status, detail))
        client.close()
        with self._lock:
            self.samples.extend(samples)
            self.failures.extend(failures)


@dataclasses.dataclass(frozen=True)
class Summary:
    """Requests, answers that were not 2xx, latency percentiles (ms)."""

    requests: int
    per_second: float
    errors: dict[str, int]
    p50: float
    p90: float
    p99: float
    max: float

    @property
    def error_count(self) -> int:
        return sum(self.errors.values())

    @property
    def server_errors(self) -> int:
        """Answers 5xx, and requests with no answer at all."""
        return sum(
            n for s, n in self.errors.items() if s == 'none' or s[0] == '5'
        )


def _rank(ordered: Sequence[float], fraction: float) -> float:
    # Nearest rank: the smallest value with at least this share below it.
    if not ordered:
        return 0.0
    index = max(0, min(len(ordered) - 1, -int(-fraction * len(ordered)) - 1))
    return ordered[index]


def summarize(
    samples: Iterable[Sample],
    seconds: float,
    kind: str | None = None,
) -> Summary:
    chosen = [s for s in samples if kind is None or s.kind == kind]
    latencies = sorted(s.seconds * 1000 for s in chosen)
    errors = collections.Counter(
        'none' if s.status == 0 else str(s.status)
        for s in chosen
        if not 200 <= s.status < 300
    )
    return Summary(
        requests=len(chosen),
        per_second=len(chosen) / seconds if seconds else 0.0,
        errors=dict(sorted(errors.items())),
        p50=_rank(latencies, 0.50),
        p90=_rank(latencies, 0.90),
        p99=_rank(latencies, 0.99),
        max=latencies[-1] if latencies else 0.0,
    )


# Where the API says each node is


def on_conductor(client: Client, conductor: str, limit: int) -> set[str]:
    """The uuids of the nodes the API routes to ``conductor``.

    One ``?conductor=`` list scanning up to ``limit`` nodes (Ironic
    filters each page after reading it from the database, so the page must
    hold every node: see LoadDeployment's max_limit).
    """
    found = client.get_json(
        '/v1/nodes?conductor=%s&fields=uuid&limit=%d' % (conductor, limit)
    )
    return {node['uuid'] for node in found['nodes']}


def holders(
    client: Client, conductors: Iterable[str], limit: int
) -> dict[str, set[str]]:
    """node uuid -> every conductor whose list shows it; a node on none
    is absent."""
    found: dict[str, set[str]] = {}
    for conductor in conductors:
        for node in on_conductor(client, conductor, limit):
            found.setdefault(node, set()).add(conductor)
    return found


def planned(dep: deployment.Deployment) -> dict[str, str | None]:
    """node name -> conductor, by ``ironic-affinity plan --live``."""
    result = dep.cli('plan', '--live', '-f', 'json')
    if result.returncode != 0:
        raise AssertionError('plan --live: %s' % result.stderr[-2000:])
    return {
        p['node']: p['conductor']
        for p in json.loads(result.stdout)['placements']
    }


def wait_settled(
    dep: LoadDeployment,
    client: Client,
    nodes: Sequence[Node],
    conductors: Sequence[str],
    timeout: float,
) -> dict[str, str]:
    """Wait until the API shows every node on exactly one conductor, all
    conductors holding some, and with the plugin, each node where
    ``plan --live`` puts it; node uuid -> conductor."""
    uuids = {node.uuid for node in nodes}
    names = {node.uuid: node.name for node in nodes}
    state: dict[str, Any] = {}

    def settled() -> bool:
        found = holders(client, conductors, dep.max_limit)
        state['holders'] = found
        single = {u: next(iter(c)) for u, c in found.items() if len(c) == 1}
        if set(single) != uuids or set(single.values()) != set(conductors):
            state['why'] = '%d of %d nodes on exactly one conductor' % (
                len(set(single) & uuids),
                len(uuids),
            )
            return False
        if dep.manager == 'affinity':
            plan = planned(dep)
            wrong = [u for u, c in single.items() if plan[names[u]] != c]
            if wrong:
                state['why'] = '%d nodes off the plan' % len(wrong)
                return False
        state['placed'] = single
        return True

    try:
        dep.wait(settled, timeout, 'placements to settle')
    except AssertionError as exc:
        raise AssertionError('%s: %s' % (exc, state.get('why'))) from None
    placed: dict[str, str] = state['placed']
    return placed


def wait_rehomed(
    client: Client,
    dead: str,
    sample: Sequence[str],
    limit: int,
    since: float,
    timeout: float,
) -> tuple[float, float, float, float]:
    """Seconds from ``since`` until the API showed the first of the
    ``sample`` nodes (all on ``dead`` before) on another conductor, until
    it had shown each of them there, and when the first ``?conductor=``
    list of ``dead`` to come back empty was asked, and answered.

    The sample is asked one node at a time, a cheap request; the list
    scans every node, which takes seconds under load, so it only confirms.
    """
    seen: list[float] = []
    pending = collections.deque(sample)

    def elapsed() -> float:
        spent = time.monotonic() - since
        if spent > timeout:
            raise AssertionError(
                'nodes still routed to %s %.0f s after its crash'
                % (dead, timeout)
            )
        return spent

    while pending and elapsed():
        node = pending.popleft()
        found = client.get_json('/v1/nodes/%s?fields=uuid,conductor' % node)
        if found.get('conductor') in (None, dead):
            pending.append(node)
            time.sleep(0.05)
        else:
            seen.append(elapsed())
    while True:
        asked = elapsed()
        if not on_conductor(client, dead, limit):
            break
        time.sleep(0.2)
    done = elapsed()
    return (min(seen, default=asked), max(seen, default=asked), asked, done)


# The kill under load


@dataclasses.dataclass
class Outcome:
    """What one kill-under-load run saw."""

    manager: str
    nodes: int
    create_seconds: float
    killed: str
    live: list[str]
    samples: list[Sample]
    failures: list[Failure]
    read_seconds: float
    # time.monotonic() when the readers started.
    started: float
    # Offset of the crash from the readers' start.
    killed_at: float
    # Seconds from the crash until the API showed the first, then each,
    # of a sample of the killed conductor's nodes elsewhere, and when the
    # first empty list of the nodes on the killed conductor was asked
    # (list_asked) and answered (rehome_seconds).
    first_moved: float
    sample_moved: float
    list_asked: float
    rehome_seconds: float
    # node uuid -> conductor, as the API showed before the crash.
    before: dict[str, str]
    # node uuid -> conductors showing it, at the end.
    after: dict[str, set[str]] = dataclasses.field(default_factory=dict)
    # node uuid -> conductors whose power sync worked it, after rehoming.
    synced: dict[str, set[str]] = dataclasses.field(default_factory=dict)
    sync_window: float = 0.0
    # The 1-minute load average of the machine, every few seconds.
    loadavg: list[float] = dataclasses.field(default_factory=list)
    # CPU seconds used while reading by the API's processes, and by the
    # conductors that survived.
    api_cpu: float = 0.0
    conductors_cpu: float = 0.0

    def between(self, start: float, end: float) -> list[Sample]:
        """The samples sent from ``start`` to ``end`` seconds after the
        readers started."""
        return [s for s in self.samples if start <= s.at - self.started <= end]

    def rehoming(self) -> list[Sample]:
        """The samples sent between the crash and the rehoming."""
        return self.between(
            self.killed_at, self.killed_at + self.rehome_seconds
        )


class _LoadAverage(threading.Thread):
    def __init__(self, every: float = 5.0) -> None:
        super().__init__(name='loadavg', daemon=True)
        self.every = every
        self.values: list[float] = []
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(self.every):
            self.values.append(os.getloadavg()[0])


def kill_under_load(
    dep: LoadDeployment,
    nodes: Sequence[Node],
    conductors: int,
    readers: int,
    seconds: float,
    kill_after: float,
    victim: int = 1,
    settle: float = 3.0,
    rehome_timeout: float = 150.0,
    sample_size: int = 20,
) -> Outcome:
    """Read for ``seconds`` with ``readers`` threads, crash conductor
    ``victim`` after ``kill_after`` seconds; record what happened, and
    how soon ``sample_size`` of the victim's nodes showed elsewhere.

    Also collects each node's power-sync workers from a window starting
    ``settle`` seconds after the rehoming and lasting at least one sync
    interval and a half (the reading goes on past ``seconds`` if needed).
    """
    names = [dep.conductor_name(i) for i in range(1, conductors + 1)]
    killed = dep.conductor_name(victim)
    live = [n for n in names if n != killed]
    client = Client(dep.api_port, retry_idle=True)
    before = wait_settled(dep, client, nodes, names, 300)
    sample = [n for n, c in sorted(before.items()) if c == killed]
    sample = sample[:sample_size]
    survivors = ['conductor%d' % i for i in range(1, conductors + 1)]
    survivors.remove('conductor%d' % victim)
    api_pids = dep.pids('api')
    conductor_pids = [p for name in survivors for p in dep.pids(name)]
    api_cpu = deployment.cpu_seconds(api_pids)
    conductors_cpu = deployment.cpu_seconds(conductor_pids)
    loadavg = _LoadAverage()
    loadavg.start()
    reading = Readers(dep.api_port, [n.uuid for n in nodes], readers)
    reading.start()
    try:
        time.sleep(kill_after)
        crashed = time.monotonic()
        dep.crash(victim)
        first_moved, sample_moved, list_asked, rehome = wait_rehomed(
            client, killed, sample, dep.max_limit, crashed, rehome_timeout
        )
        time.sleep(settle)
        offsets = dep.log_offsets()
        window_start = time.monotonic()
        end = max(
            reading.started + seconds,
            window_start + dep.sync_interval * 1.5 + 2,
        )
        time.sleep(max(0.0, end - time.monotonic()))
    finally:
        samples = reading.stop()
        loadavg.done.set()
    api_cpu = deployment.cpu_seconds(api_pids) - api_cpu
    conductors_cpu = deployment.cpu_seconds(conductor_pids) - conductors_cpu
    sync_window = time.monotonic() - window_start
    synced = dep.power_synced_since(offsets)
    after = holders(client, names, dep.max_limit)
    client.close()
    return Outcome(
        manager=dep.manager,
        nodes=len(nodes),
        create_seconds=0.0,
        killed=killed,
        live=live,
        samples=samples,
        failures=reading.failures,
        read_seconds=reading.stopped - reading.started,
        started=reading.started,
        killed_at=crashed - reading.started,
        first_moved=first_moved,
        sample_moved=sample_moved,
        list_asked=list_asked,
        rehome_seconds=rehome,
        before=before,
        after=after,
        synced=synced,
        sync_window=sync_window,
        loadavg=loadavg.values,
        api_cpu=api_cpu,
        conductors_cpu=conductors_cpu,
    )


@dataclasses.dataclass
class Verdict:
    """The checks of one outcome: each list names what went wrong."""

    # Nodes not on exactly one live conductor at the end.
    not_on_one_live: list[str]
    # Nodes moved though they were not on the killed conductor.
    moved_needlessly: list[str]
    # Nodes of the killed conductor moved to one their tags refuse (the
    # stock ring ignores tags: None).
    moved_to_ineligible: list[str] | None
    # Nodes whose power sync ran elsewhere than the API says, or nowhere.
    sync_mismatch: list[str]
    # Nodes the API shows elsewhere than plan --live (plugin only).
    off_plan: list[str] | None
    # 5xx answers and requests with no answer.
    server_errors: int
    check_status: int | None

    @property
    def ok(self) -> bool:
        return (
            not self.not_on_one_live
            and not self.moved_needlessly
            and not self.moved_to_ineligible
            and not self.sync_mismatch
            and not self.off_plan
            and self.server_errors == 0
            and self.check_status in (None, 0)
        )


def verify(
    dep: LoadDeployment, nodes: Sequence[Node], outcome: Outcome
) -> Verdict:
    """Check the end state against the rule and the API's own answers."""
    by_uuid = {node.uuid: node for node in nodes}
    live = set(outcome.live)
    final: dict[str, str] = {}
    not_on_one_live = []
    for node in by_uuid:
        found = outcome.after.get(node, set())
        if len(found) == 1 and found <= live:
            final[node] = next(iter(found))
        else:
            not_on_one_live.append(node)
    moved_needlessly = [
        n
        for n, was in outcome.before.items()
        if was != outcome.killed and n in final and final[n] != was
    ]
    sync_mismatch = [
        n for n in by_uuid if outcome.synced.get(n, set()) != {final.get(n)}
    ]
    # The stock ring ignores tags: nothing to hold it to there.
    moved_to_ineligible = off_plan = None
    check_status = None
    if dep.manager == 'affinity':
        index_of = {
            dep.conductor_name(i): i for i in range(1, len(outcome.live) + 2)
        }
        moved_to_ineligible = [
            n
            for n, was in outcome.before.items()
            if was == outcome.killed
            and n in final
            and not eligible(
                dep.tag_lists(index_of[final[n]]), by_uuid[n].tags
            )
        ]
        plan = planned(dep)
        off_plan = [
            n for n, c in final.items() if plan.get(by_uuid[n].name) != c
        ]
        check_status = dep.cli('check', '-f', 'json').returncode
    return Verdict(
        not_on_one_live=not_on_one_live,
        moved_needlessly=moved_needlessly,
        moved_to_ineligible=moved_to_ineligible,
        sync_mismatch=sync_mismatch,
        off_plan=off_plan,
        server_errors=summarize(outcome.samples, 1).server_errors,
        check_status=check_status,
    )
