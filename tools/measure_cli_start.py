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

"""How long ``ironic-affinity plan`` takes on a small scenario, start to
finish, and which service libraries it imports.

    python tools/measure_cli_start.py [--runs N] [--command PATH]

Run it with the interpreter of the environment to measure (one with
Ironic installed shows the cost of tooz pulling in eventlet). Prints the
median and the spread of N runs (20 by default) of the installed
command, and the top-level packages among tooz, SQLAlchemy, Ironic and
eventlet that one run imported.
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLE = os.path.join(HERE, '..', 'examples', 'rfe-part1.yaml')
WATCHED = ('tooz', 'sqlalchemy', 'ironic', 'eventlet')

PROBE = '''
import atexit, sys
watched = set(sys.argv.pop(1).split(','))
def _report():
    roots = {m.split('.')[0] for m in sys.modules}
    print(sorted(roots & watched), file=sys.stderr)
atexit.register(_report)
from ironic_affinity.cmd import cli
sys.exit(cli.main(sys.argv[1:]))
'''


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--runs', type=int, default=20)
    parser.add_argument(
        '--command',
        default=os.path.join(
            os.path.dirname(sys.executable), 'ironic-affinity'
        ),
    )
    args = parser.parse_args()
    command = (
        args.command
        if os.path.exists(args.command)
        else shutil.which('ironic-affinity')
    )
    times = []
    for _ in range(args.runs):
        started = time.perf_counter()
        subprocess.run(
            [command, 'plan', EXAMPLE], check=True, capture_output=True
        )
        times.append(time.perf_counter() - started)
    probe = subprocess.run(
        [sys.executable, '-c', PROBE, ','.join(WATCHED), 'plan', EXAMPLE],
        check=True,
        capture_output=True,
        text=True,
    )
    warnings = [
        line for line in probe.stderr.splitlines() if 'Warning' in line
    ]
    print(
        'ironic-affinity plan %s, %d runs'
        % (os.path.relpath(EXAMPLE), args.runs)
    )
    print(
        '  median %.3f s, min %.3f s, max %.3f s'
        % (statistics.median(times), min(times), max(times))
    )
    print(
        '  imported of %s: %s'
        % (', '.join(WATCHED), probe.stderr.splitlines()[-1])
    )
    print('  warning lines on stderr: %d' % len(warnings))


if __name__ == '__main__':
    main()
