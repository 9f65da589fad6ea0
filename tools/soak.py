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

"""Soak: thousands of nodes read without pause while a conductor crashes.

Runs a real Ironic (API and conductors, on a scratch PostgreSQL database
and a Redis of its own) twice, with the affinity ring and then with
Ironic's stock ring, each the same way: create --nodes tagged nodes
through the REST API, read them with --readers threads for --minutes,
SIGKILL conductor 1 (worker and parent) --kill-after seconds in. Then
prints the reads of both side by side and checks each run:

* every node is on exactly one live conductor, by the API's ``?conductor=``
  lists, and its power sync ran on that conductor and no other;
* only the killed conductor's nodes moved, each to one its tags allow;
* no read answered 5xx or went unanswered;
* with the plugin, ``ironic-affinity check`` exits 0 and every node is
  where ``ironic-affinity plan --live`` puts it.

Exit status 0 when every check holds. Needs Ironic, psycopg2, PostgreSQL
and redis-server (tox -e e2e installs the Python side)::

    python tools/soak.py --nodes 5000 --conductors 3 --minutes 5 \\
        --readers 8 --kill-after 120

Conductors listen from --first-rpc-port (8291 by default, clear of the
end-to-end tests' 8091-8095 and of the load test's 8191-8193); the
second run uses the ten ports above.
"""

import argparse
import datetime
import importlib.metadata
import json
import os
import platform
import sys
import time
from typing import Any

import sqlalchemy as sa

from ironic_affinity.tests.e2e import deployment
from ironic_affinity.tests.e2e import load

KINDS = (
    ('all reads', None),
    ('GET /v1/nodes/<uuid>', 'node'),
    ('GET /v1/nodes?limit=%d' % load.PAGE, 'list'),
    ('GET /v1/nodes/detail?limit=%d' % load.PAGE, 'detail'),
)
TIMERS = {
    'default': deployment.IRONIC_DEFAULT_TIMERS,
    'ci': deployment.CI_TIMERS,
}


def _postgres_version() -> str:
    engine = sa.create_engine(deployment.POSTGRES + '/postgres')
    try:
        with engine.connect() as connection:
            text = connection.execute(
                sa.text('SHOW server_version')
            ).scalar_one()
    finally:
        engine.dispose()
    return str(text).split()[0]


def _figures(summary: load.Summary) -> dict[str, Any]:
    return {
        'requests': summary.requests,
        'per_second': round(summary.per_second, 1),
        'errors': summary.errors,
        'p50_ms': round(summary.p50, 1),
        'p90_ms': round(summary.p90, 1),
        'p99_ms': round(summary.p99, 1),
        'max_ms': round(summary.max, 1),
    }


def run(manager: str, args: argparse.Namespace, port: int) -> dict[str, Any]:
    print(
        '== %s: %d nodes, %d conductors'
        % (manager, args.nodes, args.conductors),
        flush=True,
    )
    discarded = []
    for _ in range(args.attempts):
        dep = load.LoadDeployment(
            manager,
            TIMERS[args.timers],
            first_rpc_port=port,
            sync_interval=args.sync_interval,
            max_limit=max(1000, args.nodes),
        )
        try:
            with dep:
                result = _soak(dep, args)
        except load.NotRouting as exc:
            # Said, counted and reported, never hidden: see the docs.
            print('deployment discarded: %s' % exc, flush=True)
            discarded.append(str(exc))
            continue
        result['discarded'] = len(discarded)
        result['discarded_reasons'] = discarded
        return result
    raise SystemExit(
        '%s: no deployment out of %d routed requests'
        % (manager, args.attempts)
    )


def _soak(
    dep: load.LoadDeployment, args: argparse.Namespace
) -> dict[str, Any]:
    """One run on a fresh deployment: create, read, kill, verify."""
    dep.start_all(args.conductors)
    start = time.monotonic()
    nodes = load.create_nodes(
        dep.api_port, args.nodes, threads=args.create_threads
    )
    created = time.monotonic() - start
    print('created %d nodes in %.1f s' % (len(nodes), created), flush=True)
    outcome = load.kill_under_load(
        dep,
        nodes,
        args.conductors,
        args.readers,
        args.minutes * 60,
        args.kill_after,
        victim=args.victim,
        rehome_timeout=args.rehome_timeout,
    )
    outcome.create_seconds = created
    verdict = load.verify(dep, nodes, outcome)
    print(
        'read for %.0f s; first node moved %.2f s after the crash, '
        'all %.2f s; checks %s'
        % (
            outcome.read_seconds,
            outcome.first_moved,
            outcome.rehome_seconds,
            'pass' if verdict.ok else 'FAIL',
        ),
        flush=True,
    )
    return _result(outcome, verdict)


def _timeline(outcome: load.Outcome, step: float = 5.0) -> list[Any]:
    """[seconds from the readers' start, reads, p50 ms, max ms] per step."""
    rows = []
    start = 0.0
    while start < outcome.read_seconds:
        summary = load.summarize(
            outcome.between(start, start + step - 1e-9), step
        )
        rows.append(
            [start, summary.requests, round(summary.p50), round(summary.max)]
        )
        start += step
    return rows


def _count(found: list[str] | None) -> int | None:
    return None if found is None else len(found)


def _result(outcome: load.Outcome, verdict: load.Verdict) -> dict[str, Any]:
    seconds = outcome.read_seconds
    reads = {
        kind or 'all': _figures(load.summarize(outcome.samples, seconds, kind))
        for _, kind in KINDS
    }
    rehoming = outcome.rehoming()
    reads['rehoming'] = _figures(
        load.summarize(rehoming, outcome.rehome_seconds)
    )
    victims = sum(1 for c in outcome.before.values() if c == outcome.killed)
    return {
        'ring': outcome.manager,
        'nodes': outcome.nodes,
        'create_seconds': round(outcome.create_seconds, 1),
        'read_seconds': round(seconds, 1),
        'reads': reads,
        'killed': outcome.killed,
        'killed_at_seconds': round(outcome.killed_at, 1),
        'killed_nodes': victims,
        'first_moved_seconds': round(outcome.first_moved, 2),
        'sample_moved_seconds': round(outcome.sample_moved, 2),
        'list_asked_seconds': round(outcome.list_asked, 2),
        'rehome_seconds': round(outcome.rehome_seconds, 2),
        'loads_before': '/'.join(
            str(sum(1 for v in outcome.before.values() if v == c))
            for c in sorted(set(outcome.before.values()))
        ),
        'nodes_lost': len(verdict.not_on_one_live),
        'moved_needlessly': len(verdict.moved_needlessly),
        'moved_to_ineligible': _count(verdict.moved_to_ineligible),
        'sync_window_seconds': round(outcome.sync_window, 1),
        'sync_mismatch': len(verdict.sync_mismatch),
        'off_plan': _count(verdict.off_plan),
        'check_status': verdict.check_status,
        'server_errors': verdict.server_errors,
        'failures': [
            {
                'kind': f.kind,
                'at': round(f.at - outcome.started, 2),
                'status': f.status,
                'path': f.path,
                'detail': f.detail,
            }
            for f in outcome.failures[:20]
        ],
        'timeline': _timeline(outcome),
        'loadavg_mean': round(
            sum(outcome.loadavg) / max(1, len(outcome.loadavg)), 2
        ),
        'loadavg_max': round(max(outcome.loadavg, default=0.0), 2),
        'api_cpu_seconds': round(outcome.api_cpu, 1),
        'api_cpu_ms_per_read': round(
            1000 * outcome.api_cpu / max(1, len(outcome.samples)), 2
        ),
        'conductors_cpu_seconds': round(outcome.conductors_cpu, 1),
        'ok': verdict.ok,
    }


def _row(label: str, cells: list[str]) -> str:
    return '%-34s' % label + ''.join('%-26s' % c for c in cells)


def render(results: list[dict[str, Any]], setup: dict[str, Any]) -> str:
    names = {'affinity': 'with the plugin', 'stock': 'stock ring'}
    lines = [
        'Soak on %(date)s: %(nodes)d nodes, %(conductors)d conductors, '
        '%(readers)d readers for %(minutes)s min, conductor 1 killed '
        '%(kill_after)s s in' % setup,
        'Machine: %(cores)d cores, Python %(python)s, Ironic %(ironic)s, '
        'PostgreSQL %(postgres)s; Ironic timers: %(timers)s, power sync '
        'every %(sync_interval)d s' % setup,
        '',
        _row('', [names.get(r['ring'], r['ring']) for r in results]),
        _row(
            'node creation',
            [
                '%.1f s (%.0f/s)'
                % (r['create_seconds'], r['nodes'] / r['create_seconds'])
                for r in results
            ],
        ),
    ]
    for label, kind in KINDS + (('reads while rehoming', 'rehoming'),):
        key = kind or 'all'
        lines.append(label)
        for field, shown in (
            ('requests', 'requests'),
            ('per_second', 'requests/s'),
            ('errors', 'errors by status'),
            ('p50_ms', 'p50 ms'),
            ('p90_ms', 'p90 ms'),
            ('p99_ms', 'p99 ms'),
            ('max_ms', 'max ms'),
        ):
            lines.append(
                _row(
                    '  ' + shown,
                    [
                        json.dumps(r['reads'][key][field])
                        if field == 'errors'
                        else str(r['reads'][key][field])
                        for r in results
                    ],
                )
            )
    lines.append('kill')
    for field, shown in (
        ('killed', 'killed conductor'),
        ('loads_before', 'nodes per conductor before'),
        ('killed_nodes', 'its nodes'),
        ('first_moved_seconds', 'first node moved after, s'),
        ('list_asked_seconds', 'empty list asked at, s'),
        ('rehome_seconds', 'empty list answered at, s'),
        ('nodes_lost', 'nodes lost (not on 1 live)'),
        ('moved_needlessly', 'other nodes moved'),
        ('moved_to_ineligible', 'moved to an ineligible one'),
        ('sync_mismatch', 'power sync elsewhere/nowhere'),
        ('sync_window_seconds', 'power sync window, s'),
        ('server_errors', '5xx or no answer'),
        ('off_plan', 'off plan --live'),
        ('check_status', 'ironic-affinity check exit'),
        ('api_cpu_seconds', 'API CPU while reading, s'),
        ('api_cpu_ms_per_read', 'API CPU per read, ms'),
        ('conductors_cpu_seconds', 'surviving conductors CPU, s'),
        ('loadavg_mean', 'load average, mean'),
        ('loadavg_max', 'load average, max'),
        ('discarded', 'deployments discarded'),
        ('ok', 'every check holds'),
    ):
        lines.append(
            _row(
                '  ' + shown,
                ['-' if r[field] is None else str(r[field]) for r in results],
            )
        )
    return '\n'.join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--nodes', type=int, default=5000)
    parser.add_argument('--conductors', type=int, default=3)
    parser.add_argument('--minutes', type=float, default=5.0)
    parser.add_argument('--readers', type=int, default=8)
    parser.add_argument(
        '--kill-after',
        type=float,
        default=120.0,
        help='seconds of reading before conductor --victim is killed',
    )
    parser.add_argument('--victim', type=int, default=1)
    parser.add_argument(
        '--timers',
        choices=sorted(TIMERS),
        default='default',
        help="Ironic's heartbeat and ring timers (default: Ironic's own)",
    )
    parser.add_argument('--sync-interval', type=int, default=60)
    parser.add_argument('--create-threads', type=int, default=6)
    parser.add_argument('--rehome-timeout', type=float, default=180.0)
    parser.add_argument(
        '--attempts',
        type=int,
        default=3,
        help='deployments to try per ring when the API routes no request '
        'once the conductors are up (default: 3)',
    )
    parser.add_argument(
        '--rings',
        default='affinity,stock',
        help='comma-separated: affinity, stock (default: both, in order)',
    )
    parser.add_argument(
        '--first-rpc-port', type=int, default=load.SOAK_RPC_PORT
    )
    parser.add_argument('--json', metavar='FILE', help='write results here')
    args = parser.parse_args()
    if args.first_rpc_port < load.FIRST_RPC_PORT:
        parser.error('--first-rpc-port below %d' % load.FIRST_RPC_PORT)
    setup = {
        'date': datetime.date.today().isoformat(),
        'nodes': args.nodes,
        'conductors': args.conductors,
        'readers': args.readers,
        'minutes': args.minutes,
        'kill_after': args.kill_after,
        'cores': os.cpu_count() or 0,
        'python': platform.python_version(),
        'ironic': importlib.metadata.version('ironic'),
        'postgres': _postgres_version(),
        'timers': args.timers,
        'sync_interval': args.sync_interval,
    }
    results = []
    for offset, ring in enumerate(args.rings.split(',')):
        results.append(run(ring, args, args.first_rpc_port + 10 * offset))
    print()
    print(render(results, setup))
    if args.json:
        with open(args.json, 'w') as handle:
            json.dump({'setup': setup, 'results': results}, handle, indent=2)
    return 0 if all(r['ok'] for r in results) else 1


if __name__ == '__main__':
    sys.exit(main())
