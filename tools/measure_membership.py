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

"""Measure how fast the member view follows joins and deaths, per driver.

For each tooz driver (file, Redis, etcd, ZooKeeper; each server started on
free loopback ports in a temporary folder and stopped again) with the
plugin's default [affinity] settings, this prints:

- join: seconds from a member process reporting that it joined the group
  to a view held by another process (this one) showing it;
- death: seconds from SIGKILL of a member process to that view dropping
  it.

Run it with ``tox -e measure`` or ``python tools/measure_membership.py
[--rounds N] [--driver NAME]...``. It needs redis-server, etcd and
ZooKeeper installed (.ci/run installs them); a missing one is reported and
skipped.
"""

import argparse
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid

from oslo_config import cfg
import testtools

from ironic_affinity import conf as affinity_conf
from ironic_affinity.membership import service
from ironic_affinity.tests.functional import member_process
from ironic_affinity.tests.functional import servers

DRIVERS = {cls.driver: cls for cls in servers.ALL}


def _view(url: str, group: str):  # type: ignore[no-untyped-def]
    conf = cfg.ConfigOpts()
    affinity_conf.register_opts(conf)
    conf([], default_config_files=[])
    conf.set_override('backend_url', url, group='affinity')
    conf.set_override('group_name', group, group='affinity')
    view = service.member_view(conf)
    view.start()
    return view, conf.affinity


def _member(url: str, group: str, name: str, folder: str):  # type: ignore[no-untyped-def]
    path = os.path.join(folder, name + '.conf')
    with open(path, 'w') as handle:
        handle.write(
            '[affinity]\nbackend_url = %s\ngroup_name = %s\n'
            'soft_affinity_tags = rack1\n' % (url, group)
        )
    process, joined = member_process.spawn(
        path, name, stderr=subprocess.DEVNULL
    )
    joined_at = time.monotonic()
    if not joined:
        process.kill()
        raise RuntimeError('member %s did not join' % name)
    return process, joined_at


def measure(driver: str, rounds: int) -> tuple[list[float], list[float]]:
    joins: list[float] = []
    deaths: list[float] = []
    with DRIVERS[driver]() as server:
        group = 'measure-%s' % uuid.uuid4().hex[:8]
        view, options = _view(server.url, group)
        folder = tempfile.mkdtemp()
        try:
            for index in range(rounds):
                name = 'conductor-%d' % index
                process, joined_at = _member(server.url, group, name, folder)
                if view.wait_for(lambda s, n=name: n in s.members, 60) is None:
                    raise RuntimeError('%s never seen' % name)
                joins.append(time.monotonic() - joined_at)
                # A random phase against the view's reads: killing right
                # after one would measure one point of the cycle only.
                time.sleep(options.heartbeat_interval * 2 + random.random())
                killed_at = time.monotonic()
                process.send_signal(signal.SIGKILL)
                process.wait(10)
                if (
                    view.wait_for(lambda s, n=name: n not in s.members, 120)
                    is None
                ):
                    raise RuntimeError('%s never dropped' % name)
                deaths.append(time.monotonic() - killed_at)
                process.stdout.close()  # type: ignore[union-attr]
        finally:
            view.stop()
    return joins, deaths


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--rounds', type=int, default=5)
    parser.add_argument(
        '--driver', action='append', choices=sorted(DRIVERS), default=[]
    )
    args = parser.parse_args()
    defaults = cfg.ConfigOpts()
    affinity_conf.register_opts(defaults)
    defaults([], default_config_files=[])
    options = defaults.affinity
    print(
        'Defaults: heartbeat_interval=%s s, watch_interval=%s s, '
        'member_timeout=%s s; %d rounds per driver'
        % (
            options.heartbeat_interval,
            options.watch_interval,
            options.member_timeout,
            args.rounds,
        )
    )
    print(
        '%-12s %18s %18s'
        % ('driver', 'join->seen mean/max', 'SIGKILL->gone mean/max')
    )
    failed = False
    for driver in args.driver or [cls.driver for cls in servers.ALL]:
        try:
            joins, deaths = measure(driver, args.rounds)
        except testtools.TestCase.skipException as exc:
            print('%-12s skipped: %s' % (driver, exc))
            continue
        except RuntimeError as exc:
            print('%-12s FAILED: %s' % (driver, exc))
            failed = True
            continue
        print(
            '%-12s %8.2f / %5.2f s  %8.2f / %5.2f s'
            % (
                driver,
                statistics.mean(joins),
                max(joins),
                statistics.mean(deaths),
                max(deaths),
            )
        )
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
