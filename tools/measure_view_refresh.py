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

"""Measure the cost of one member view refresh, per driver and group size.

For Redis, etcd and ZooKeeper (each server started on free loopback ports
by the functional tests' fixtures and stopped again), with 3 and 50
conductors joined, this times ``MemberView.refresh()`` (read the group,
decode every profile, publish) and counts what it sends:

- requests: counted in this process at the client library, around the
  view's own client only: Redis writes to its socket (one per command,
  one per pipelined MULTI..EXEC batch), etcd HTTP requests, ZooKeeper
  requests. Each is one round trip to the server, except that ZooKeeper
  (and nothing else here) has several in flight at once when they are
  sent before any answer is awaited.
- server: what the server says it served, where it can say it without
  counting other clients: Redis commands (``INFO commandstats``), etcd
  gRPC calls (``/metrics``, ``grpc_server_started_total``). ZooKeeper
  counts its clients' pings with their requests, so it has no column.

The conductors are plain tooz members in a child process, joined with a
long member timeout and never heartbeating, so no other client talks to
the server while the refreshes are timed. ``path`` is how the view read
the group: ``one call`` (get_members_with_capabilities, tooz >= 9.1.0)
or ``list+each`` (get_members, then every member's capabilities: older
tooz, or forced with ``--path list+each``).

Run it with ``python tools/measure_view_refresh.py [--refreshes N]
[--driver NAME]... [--conductors N]...``.
"""

import argparse
import math
import statistics
import subprocess
import sys
import time
from typing import Any
import urllib.request
import uuid

from oslo_config import cfg
import testtools
import tooz
from tooz import coordination

from ironic_affinity import conf as affinity_conf
from ironic_affinity import profile
from ironic_affinity.membership import capabilities
from ironic_affinity.membership import service
from ironic_affinity.tests.functional import servers

DRIVERS = {
    cls.driver: cls
    for cls in (
        servers.RedisServer,
        servers.EtcdServer,
        servers.ZooKeeperServer,
    )
}
ONE_CALL = 'one call'
LIST_EACH = 'list+each'
# Long enough that members need no heartbeat while they are measured.
HOLD_TIMEOUT = 600
WARM_UP = 3
_STATS: dict[int, Any] = {}


class Requests:
    """Counts requests the client libraries send, from ``start()`` on."""

    def __init__(self) -> None:
        self.count = 0
        self.counting = False

    def install(self, driver: str) -> None:
        if driver == 'redis':
            from redis import connection

            cls, name = connection.AbstractConnection, 'send_packed_command'
        elif driver.startswith('etcd3'):
            from requests import adapters

            cls, name = adapters.HTTPAdapter, 'send'
        else:
            from kazoo import client

            cls, name = client.KazooClient, '_call'
        original = getattr(cls, name)

        def counted(*args, **kwargs):  # type: ignore[no-untyped-def]
            if self.counting:
                self.count += 1
            return original(*args, **kwargs)

        setattr(cls, name, counted)


def server_count(server: servers.Server) -> int | None:
    """What the server has served so far, or None where it cannot say."""
    if server.driver == 'redis':
        import redis

        # One connection for every count: its handshake happens once,
        # before the first count is taken.
        if server.port not in _STATS:
            _STATS[server.port] = redis.Redis(port=server.port)
        client = _STATS[server.port]
        stats = client.info('commandstats')
        # Leave out our own INFO calls.
        return sum(
            value['calls']
            for key, value in stats.items()
            if key != 'cmdstat_info'
        )
    if server.driver.startswith('etcd3'):
        url = 'http://127.0.0.1:%d/metrics' % server.port
        with urllib.request.urlopen(url, timeout=10) as answer:
            text = answer.read().decode()
        return sum(
            int(float(line.rsplit(' ', 1)[1]))
            for line in text.splitlines()
            if line.startswith('grpc_server_started_total{')
        )
    return None


def hold(url: str, group: str, count: int) -> None:
    """Join ``count`` members, say so, and stay until stdin closes."""
    members = []
    for index in range(count):
        name = 'conductor-%02d.example.org:8091' % index
        member = coordination.get_coordinator(
            url, name.encode(), timeout=str(HOLD_TIMEOUT)
        )
        member.start(start_heart=False)
        if index == 0:
            try:
                member.create_group(group.encode()).get()
            except coordination.GroupAlreadyExist:
                pass
        conductor = profile.ConductorProfile.build(
            name,
            hardware_types=['ipmi', 'redfish'],
            hard_affinity_tags='dc1',
            hard_anti_affinity_tags='customer9',
            soft_affinity_tags='rack%d:3, network1' % (index % 10),
            soft_anti_affinity_tags='rack20',
        )
        member.join_group(group.encode(), capabilities.encode(conductor)).get()
        member.heartbeat()
        members.append(member)
    print('joined', flush=True)
    sys.stdin.read()
    for member in members:
        member.stop()


class ListThenEach:
    """The view's client without get_members_with_capabilities, as the
    9.1.0 base class answers it: forces the list+each path."""

    def __init__(self, real: coordination.CoordinationDriver) -> None:
        self.real = real

    def get_members_with_capabilities(self, group: bytes) -> None:
        raise tooz.NotImplemented('forced by --path')

    def __getattr__(self, name: str) -> object:
        return getattr(self.real, name)


def p95(values: list[float]) -> float:
    return sorted(values)[math.ceil(0.95 * len(values)) - 1]


def measure(
    server: servers.Server,
    counter: Requests,
    conductors: int,
    path: str | None,
    refreshes: int,
) -> dict[str, object]:
    group = 'refresh-%s' % uuid.uuid4().hex[:8]
    child = subprocess.Popen(
        [
            sys.executable,
            __file__,
            '--hold',
            server.url,
            group,
            str(conductors),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        if child.stdout.readline().strip() != 'joined':
            raise RuntimeError('members did not join')
        conf = cfg.ConfigOpts()
        affinity_conf.register_opts(conf)
        conf([], default_config_files=[])
        conf.set_override('backend_url', server.url, group='affinity')
        conf.set_override('group_name', group, group='affinity')
        view = service.member_view(conf)
        try:
            return _time(view, server, counter, conductors, path, refreshes)
        finally:
            view.stop()
    finally:
        assert child.stdin is not None
        child.stdin.close()
        child.wait(60)


def _time(view, server, counter, conductors, path, refreshes):  # type: ignore[no-untyped-def]
    # Connect and settle outside the figures.
    for _ in range(WARM_UP):
        view.refresh()
    # Overridden by the driver: the 9.1.0 base class only raises.
    native = getattr(
        type(view._coordinator), 'get_members_with_capabilities', None
    ) not in (
        None,
        getattr(
            coordination.CoordinationDriver,
            'get_members_with_capabilities',
            None,
        ),
    )
    if path == ONE_CALL and not native:
        return {}
    if path == LIST_EACH and native:
        view._coordinator = ListThenEach(view._coordinator)
    used = path or (ONE_CALL if native else LIST_EACH)
    before = server_count(server)
    times = []
    counter.count = 0
    for _ in range(refreshes):
        counter.counting = True
        start = time.perf_counter()
        snapshot = view.refresh()
        times.append(time.perf_counter() - start)
        counter.counting = False
        if snapshot.stale or len(snapshot.members) != conductors:
            raise RuntimeError(
                'refresh saw %d member(s), error %s'
                % (len(snapshot.members), snapshot.error)
            )
    after = server_count(server)
    return {
        'path': used,
        'requests': counter.count / refreshes,
        'server': None if before is None else (after - before) / refreshes,
        'mean': statistics.mean(times) * 1000,
        'p95': p95(times) * 1000,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--refreshes', type=int, default=50)
    parser.add_argument(
        '--driver', action='append', choices=sorted(DRIVERS), default=[]
    )
    parser.add_argument('--conductors', action='append', type=int, default=[])
    parser.add_argument(
        '--path',
        action='append',
        choices=(ONE_CALL, LIST_EACH),
        default=[],
        help='how the view reads; default: as the installed tooz does',
    )
    parser.add_argument('--hold', nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.hold:
        hold(args.hold[0], args.hold[1], int(args.hold[2]))
        return 0
    print(
        'tooz %s, Python %s.%s; %d refreshes after %d warm-up ones'
        % (
            _version('tooz'),
            *sys.version_info[:2],
            args.refreshes,
            WARM_UP,
        )
    )
    print(
        '%-12s %4s %-10s %9s %7s %10s %10s'
        % ('driver', 'N', 'path', 'requests', 'server', 'mean ms', 'p95 ms')
    )
    failed = False
    for driver in args.driver or list(DRIVERS):
        counter = Requests()
        counter.install(driver)
        try:
            with DRIVERS[driver]() as server:
                for conductors in args.conductors or [3, 50]:
                    for path in args.path or [None]:
                        row = measure(
                            server, counter, conductors, path, args.refreshes
                        )
                        if not row:
                            print(
                                '%-12s %4d %-10s not in this tooz'
                                % (driver, conductors, path)
                            )
                            continue
                        print(
                            '%-12s %4d %-10s %9.1f %7s %10.2f %10.2f'
                            % (
                                driver,
                                conductors,
                                row['path'],
                                row['requests'],
                                '-'
                                if row['server'] is None
                                else '%.1f' % row['server'],
                                row['mean'],
                                row['p95'],
                            )
                        )
        except testtools.TestCase.skipException as exc:
            print('%-12s skipped: %s' % (driver, exc))
        except RuntimeError as exc:
            print('%-12s FAILED: %s' % (driver, exc))
            failed = True
    return 1 if failed else 0


def _version(name: str) -> str:
    from importlib import metadata

    return metadata.version(name)


if __name__ == '__main__':
    sys.exit(main())
