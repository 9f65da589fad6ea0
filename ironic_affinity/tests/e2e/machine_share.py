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

"""How end-to-end cases share the machine with the suites beside them.

CI runs the suites of four Ironic releases at once (.ci/run). Most
cases spend their CPU starting Ironic's processes and then wait; a few
(TIMED cases: paced rebalancing of 300 nodes, a kill under load, a
database outage) measure seconds or rates against Ironic's timers and
need more than a core while they do. Three of those side by side were
seen to fail: 81 moves in a 10 s window against a bound of 75, a node
not power-synced in a 7 s window.

So every case holds units of one semaphore of the machine (flock on
files in the temporary folder, shared by every Python and tox
environment): an ordinary case one of UNITS (a case that keeps the
machine busy throughout, its own UNITS), a timed case TIMED_UNITS.
At most four ordinary cases run at once (one per release's suite in
CI), and a timed case runs beside one ordinary case at most, never
beside another timed case. A timed
case also starts its processes at a higher priority (nice -5, where
allowed): it keeps the CPU it needs, and what it measures is unchanged.
A suite that runs alone never waits.
"""

import fcntl
import os
import tempfile
import time
import typing

UNITS = 4
TIMED_UNITS = 3
# Nice value of a timed case's processes (lower is sooner).
TIMED_NICE = -5
_DIR = tempfile.gettempdir()  # before a test points TMPDIR elsewhere


def _open(directory: str, name: str) -> typing.IO[str]:
    path = os.path.join(directory, 'ironic-affinity-e2e-%s.lock' % name)
    return open(path, 'w')


def try_lock(name: str, directory: str = _DIR) -> typing.IO[str] | None:
    """The machine-wide lock ``name``, held until the file returned is
    closed (or the process ends); None when another holds it."""
    handle = _open(directory, name)
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.close()  # held by another, or by this process
        return None
    return handle


def acquire(
    units: int, directory: str = _DIR
) -> tuple[list[typing.IO[str]], float]:
    """Hold ``units`` units; the files that hold them and the seconds
    waited.

    One process takes units at a time, holding the turnstile: a timed
    case waiting for two units keeps later ordinary cases from taking
    each unit freed before it (no starvation), and no two processes
    each hold part of what the other waits for (no deadlock).
    """
    start = time.monotonic()
    held: list[typing.IO[str]] = []
    with _open(directory, 'turnstile') as turnstile:
        fcntl.flock(turnstile, fcntl.LOCK_EX)
        while True:
            for index in range(UNITS):
                if len(held) == units:
                    break
                handle = try_lock('unit-%d' % index, directory)
                if handle is not None:
                    held.append(handle)
            if len(held) == units:
                break
            time.sleep(0.5)
    return held, time.monotonic() - start


def release(held: list[typing.IO[str]]) -> None:
    for handle in held:
        handle.close()


def raise_priority() -> typing.Callable[[], None] | None:
    """Run this process, and the processes it starts from now on, at
    TIMED_NICE; the callable that restores the priority, or None where
    the system does not allow it (an unprivileged user)."""
    before = os.getpriority(os.PRIO_PROCESS, 0)
    try:
        os.setpriority(os.PRIO_PROCESS, 0, TIMED_NICE)
    except PermissionError:
        return None
    return lambda: os.setpriority(os.PRIO_PROCESS, 0, before)
