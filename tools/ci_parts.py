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

"""Run the parts of CI and say what each cost.

    ci_parts.py run --dir DIR --name NAME [--quiet] -- COMMAND...
    ci_parts.py report --dir DIR

``run`` runs one part, its output into DIR/<n>.log (and to the terminal
unless --quiet: parts that run side by side print their log whole when
they end instead), and writes DIR/<n>.json: exit status, wall seconds,
the CPU seconds of the part's own processes, and how busy the machine
was meanwhile.

CPU seconds are those of the part's whole process tree: tox, stestr,
its workers, the Ironic services and the servers the tests start (the
part's process is their subreaper, so that orphans such as Ironic's
forked workers, whose parent a test kills, are waited for and
counted). Servers that the machine runs for everyone (its PostgreSQL,
its Redis) are not in them; the machine's busy cores over the part's
wall time (from /proc/stat) are, and so is every part that ran at the
same time.

``report`` prints a table of the parts, the tests each ran, what is
left of the run's budget (--budget-wall, --budget-cpu), the 20 slowest
tests of the whole run, read from stestr's lines in the logs
(``{worker} test.id [12.345s] ... ok``), and the end-to-end cases that
cost the most CPU seconds (--e2e-results); then, for each failed test, the
lines of its traceback in this project's code and the error, short: a
reader of CI may see only the tail of its output.

Standard library only: it runs on the machine's python3 before any
virtual environment exists.
"""

import argparse
import ctypes
import fcntl
import json
import os
import re
import resource
import subprocess
import sys
import threading
import time
import typing

PR_SET_CHILD_SUBREAPER = 36

TEST_LINE = re.compile(
    r'^\{\d+\} (\S+) \[([\d.]+)s\] \.\.\. (ok|FAILED|SKIPPED|skip)',
    re.MULTILINE,
)
COUNT_LINE = re.compile(r'^ - (Passed|Failed|Skipped): (\d+)$', re.MULTILINE)
# subunit-trace's block after a failed test's line, up to the next
# test's line or its summary.
FAILURE = re.compile(
    r'^\{\d+\} (\S+) \[[\d.]+s\] \.\.\. FAILED\n'
    r'(.*?)(?=^\{\d+\} |^={10,}$|\Z)',
    re.MULTILINE | re.DOTALL,
)
FRAME = re.compile(r'^\s*File "([^"]+)", line (\d+), in (\S+)$')
# How much of an error's message to print: the e2e cases' messages carry
# whole logs' worth of evidence.
ERROR_CHARACTERS = 800


def busy_jiffies() -> tuple[int, int]:
    """(busy, total) jiffies of the whole machine since boot."""
    with open('/proc/stat') as handle:
        fields = [int(f) for f in handle.readline().split()[1:]]
    idle = fields[3] + fields[4]  # idle and iowait
    return sum(fields) - idle, sum(fields)


def become_subreaper() -> None:
    """Adopt the part's orphans: Ironic's forked workers outlive the
    parent the tests kill, and only a waited-for process counts in
    RUSAGE_CHILDREN. Linux only; elsewhere orphans go uncounted."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def reap_until(pid: int) -> int:
    """Wait for every child, adopted ones too, until ``pid`` ends; its
    wait status. Adopted processes still running then are not waited
    for (a server a test left behind)."""
    status = None
    while status is None:
        try:
            ended, code = os.waitpid(-1, 0)
        except ChildProcessError:
            break
        if ended == pid:
            status = code
    reap_ended()
    assert status is not None
    return status


def reap_ended() -> None:
    """Wait for the adopted processes that have ended."""
    while True:
        try:
            ended, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if ended == 0:
            return


def _copy(
    source: typing.IO[bytes], log: typing.IO[bytes], quiet: bool
) -> None:
    for line in source:
        log.write(line)
        if not quiet:
            sys.stdout.buffer.write(line)
            sys.stdout.buffer.flush()


def _next_index(directory: str) -> int:
    """The next free part number; a part claims it by creating its log."""
    index = 0
    while True:
        index += 1
        try:
            fd = os.open(
                os.path.join(directory, '%02d.log' % index),
                os.O_CREAT | os.O_EXCL | os.O_WRONLY,
            )
        except FileExistsError:
            continue
        os.close(fd)
        return index


def run(args: argparse.Namespace) -> int:
    os.makedirs(args.dir, exist_ok=True)
    index = _next_index(args.dir)
    log_path = os.path.join(args.dir, '%02d.log' % index)
    started = time.time()
    start = time.monotonic()
    busy0, total0 = busy_jiffies()
    become_subreaper()
    with open(log_path, 'wb') as log:
        process = subprocess.Popen(
            args.command,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        copier = threading.Thread(
            target=_copy, args=(process.stdout, log, args.quiet)
        )
        copier.start()
        status = reap_until(process.pid)
        process.returncode = os.waitstatus_to_exitcode(status)
        # The output ends when the last process holding it ends.
        copier.join()
        reap_ended()
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall = time.monotonic() - start
    busy1, total1 = busy_jiffies()
    code = os.waitstatus_to_exitcode(status)
    jiffies = total1 - total0
    figures = {
        'name': args.name,
        'command': args.command,
        'exit': code,
        'started': started,
        'wall': round(wall, 1),
        'cpu': round(usage.ru_utime + usage.ru_stime, 1),
        # Busy cores of the whole machine while the part ran.
        'machine_busy': round(
            (busy1 - busy0) / jiffies * (os.cpu_count() or 1), 2
        )
        if jiffies
        else 0.0,
    }
    with open(os.path.join(args.dir, '%02d.json' % index), 'w') as handle:
        json.dump(figures, handle)
    summary = 'ci part: %s: exit %d in %d s, %d CPU s\n' % (
        args.name,
        code,
        wall,
        figures['cpu'],
    )
    # One part's output at a time, whole, when parts run side by side.
    with open(os.path.join(args.dir, 'print.lock'), 'w') as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if args.quiet:
            sys.stdout.write('==== %s ====\n' % args.name)
            sys.stdout.flush()
            with open(log_path, 'rb') as log_file:
                sys.stdout.buffer.write(log_file.read())
        sys.stdout.write(summary)
        sys.stdout.flush()
    return code


def _parts(directory: str) -> list[dict]:
    parts = []
    for name in sorted(os.listdir(directory)):
        if not name.endswith('.json'):
            continue
        with open(os.path.join(directory, name)) as handle:
            part = json.load(handle)
        with open(
            os.path.join(directory, name[: -len('.json')] + '.log'),
            'rb',
        ) as handle:
            part['text'] = handle.read().decode(errors='replace')
        parts.append(part)
    return sorted(parts, key=lambda p: p['started'])


def report(args: argparse.Namespace) -> int:
    parts = _parts(args.dir)
    first = min((p['started'] for p in parts), default=time.time())
    rows = []
    durations = []
    for part in parts:
        counts = {'Passed': 0, 'Failed': 0, 'Skipped': 0}
        for kind, number in COUNT_LINE.findall(part['text']):
            counts[kind] += int(number)
        for test, seconds, _ in TEST_LINE.findall(part['text']):
            durations.append((float(seconds), test, part['name']))
        rows.append(
            (
                part['name'],
                str(part['exit']),
                '%d' % (part['started'] - first),
                '%d' % part['wall'],
                '%d' % part['cpu'],
                '%.2f' % part['machine_busy'],
                str(counts['Passed']),
                str(counts['Failed']),
                str(counts['Skipped']),
            )
        )
    header = (
        'part',
        'exit',
        'start s',
        'wall s',
        'CPU s',
        'busy cores',
        'passed',
        'failed',
        'skipped',
    )
    widths = [max(len(r[i]) for r in rows + [header]) for i in range(9)]
    print('CI parts (start: seconds after the first part began):')
    for row in [header] + rows:
        print(
            '  '.join(
                cell.ljust(w) if i == 0 else cell.rjust(w)
                for i, (cell, w) in enumerate(zip(row, widths, strict=True))
            )
        )
    end = max((p['started'] + p['wall'] for p in parts), default=first)
    cpu = sum(p['cpu'] for p in parts)
    print(
        'parts: %d s of wall time from the first start to the last end, '
        '%d CPU s in all' % (end - first, cpu)
    )
    if args.budget_wall:
        print(budget_line(end - first, cpu, args.budget_wall, args.budget_cpu))
    print('The 20 slowest tests:')
    for seconds, test, name in sorted(durations, reverse=True)[:20]:
        print('  %8.1f s  %s  (%s)' % (seconds, test, name))
    if args.e2e_results:
        print_costliest(args.e2e_results)
    for part in parts:
        for test, block in FAILURE.findall(part['text']):
            print('Why %s failed (%s):' % (test, part['name']))
            for line in why_failed(block):
                print('  ' + line)
    return 0


def budget_line(
    wall: float, cpu: float, budget_wall: int, budget_cpu: int
) -> str:
    """What is left of the run's budget: the room a new case has."""
    line = (
        'budget: %d of %d s wall, %.1f minutes left; %d of %d CPU s, %d left'
    ) % (
        wall,
        budget_wall,
        (budget_wall - wall) / 60,
        cpu,
        budget_cpu,
        budget_cpu - cpu,
    )
    if wall > budget_wall or cpu > budget_cpu:
        line += ' (OVER BUDGET: make room before adding a case)'
    return line


def print_costliest(path: str, count: int = 15) -> None:
    """The end-to-end cases that cost the most CPU seconds, from the
    figures each case appends (tests/e2e/base.py), so that what to cut
    first can be read off any run."""
    cases = []
    try:
        with open(path) as handle:
            for line in handle:
                figures = json.loads(line)
                if 'cpu_seconds' in figures:
                    cases.append(figures)
    except OSError:
        return
    print(
        'The %d costliest end-to-end cases, of %d (CPU s, wall s with '
        'any wait for the machine, Ironic):'
        % (min(count, len(cases)), len(cases))
    )
    for case in sorted(cases, key=lambda c: -c['cpu_seconds'])[:count]:
        print(
            '  %6.1f  %6.1f  %s  (%s)'
            % (
                case['cpu_seconds'],
                case['wall_seconds'],
                case['test'].rpartition('.e2e.')[2],
                case['ironic'],
            )
        )


def why_failed(block: str) -> list[str]:
    """The frames of a captured traceback in this project's files, and
    the error after the last frame, cut to ERROR_CHARACTERS."""
    _, found, traceback = block.partition('Captured traceback:')
    if not found:
        return [block.strip()[:ERROR_CHARACTERS]]
    # Other captured streams (logging, stdout) follow the traceback.
    traceback = traceback.split('\nCaptured ')[0]
    lines = [line.strip() for line in traceback.splitlines()]
    lines = [line for line in lines if line and not line.startswith('~')]
    shown = []
    last_frame = -1
    for index, line in enumerate(lines):
        match = FRAME.match(line)
        if match is None:
            continue
        last_frame = index
        path, number, function = match.groups()
        if '/ironic_affinity/' in path:
            code = lines[index + 1] if index + 1 < len(lines) else ''
            shown.append(
                '%s:%s %s: %s'
                % (path.split('/ironic_affinity/')[-1], number, function, code)
            )
    error = ' '.join(lines[last_frame + 2 :])
    shown.append(error[:ERROR_CHARACTERS])
    return shown


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    commands = parser.add_subparsers(dest='action', required=True)
    run_parser = commands.add_parser('run', help='run one part')
    run_parser.add_argument('--dir', required=True)
    run_parser.add_argument('--name', required=True)
    run_parser.add_argument(
        '--quiet',
        action='store_true',
        help='output to the log only (a part that runs beside others)',
    )
    run_parser.add_argument('command', nargs='+')
    report_parser = commands.add_parser('report', help='the table')
    report_parser.add_argument('--dir', required=True)
    report_parser.add_argument(
        '--e2e-results',
        help='the end-to-end figures (IRONIC_AFFINITY_E2E_RESULTS)',
    )
    report_parser.add_argument(
        '--budget-wall',
        type=int,
        default=0,
        help='wall seconds the run may take: print what is left',
    )
    report_parser.add_argument(
        '--budget-cpu',
        type=int,
        default=0,
        help='CPU seconds the run may use',
    )
    args = parser.parse_args()
    return run(args) if args.action == 'run' else report(args)


if __name__ == '__main__':
    sys.exit(main())
