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

"""A stand-in conductor for functional tests and measurements.

It does what a conductor does for membership and nothing else: reads its
[affinity] options from --config-file, joins the group under --name,
republishes its profile on SIGHUP (options reloaded), leaves on SIGTERM.
It prints "joined" once it is in the group.
"""

import signal
import subprocess
import sys
import threading
from typing import IO

from oslo_config import cfg
from oslo_log import log

from ironic_affinity import conf as affinity_conf
from ironic_affinity.membership import service

CLI_OPTS = [
    cfg.StrOpt('name', required=True),
    cfg.ListOpt('hardware-types'),
    cfg.StrOpt('conductor-group', default=''),
]


def spawn(
    config_file: str, name: str, *extra: str, stderr: int | IO[bytes]
) -> tuple['subprocess.Popen[bytes]', bool]:
    """Start a member process; return it and whether it said it joined
    within a minute."""
    process = subprocess.Popen(
        [
            sys.executable,
            '-m',
            'ironic_affinity.tests.functional.member_process',
            '--config-file',
            config_file,
            '--name',
            name,
            *extra,
        ],
        stdout=subprocess.PIPE,
        stderr=stderr,
    )
    line: list[bytes] = []
    assert process.stdout is not None
    reader = threading.Thread(
        target=lambda: line.append(process.stdout.readline()),  # type: ignore[union-attr]
        daemon=True,
    )
    reader.start()
    reader.join(60)
    return process, bool(line) and line[0].strip() == b'joined'


def main() -> int:
    conf = cfg.ConfigOpts()
    log.register_options(conf)
    conf.set_default('use_stderr', True)
    affinity_conf.register_opts(conf)
    conf.register_cli_opts(CLI_OPTS)
    conf(sys.argv[1:], project='ironic-affinity-test')
    log.setup(conf, 'member')
    membership = service.ConductorMembership(
        conf,
        conf.name,
        None
        if conf.hardware_types is None
        else frozenset(conf.hardware_types),
        conf.conductor_group,
    )
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGHUP, lambda *_: conf.mutate_config_files())
    membership.start()
    if membership.member.joined.wait(60):
        print('joined', flush=True)
    while not stop.wait(0.1):
        pass
    membership.stop()
    return 0


if __name__ == '__main__':
    sys.exit(main())
