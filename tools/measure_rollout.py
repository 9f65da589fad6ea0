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

"""Measure how far two processes disagree while a change rolls out.

On a real coordination server (Redis, started on a free port and stopped
again), two member processes stand in for conductors c1 and c2, with
``[affinity]rebalance_period``, and three observer processes, each with
its own member view at the default watch interval, place ``--nodes``
nodes ten times a second on a shared grid of moments and write what they
found: A, B half a second after A (processes read the group each at its
own phase), and C, which starts in the middle of the rollout. The
story:

* all nodes carry rack10, which c2 prefers: they start on c2;
* at t=0, c1's tags are reloaded to prefer rack10 more (SIGHUP): every
  node moves to c1, paced over the period;
* at t=period/3, c2's tags are reloaded to prefer rack20 instead: an
  overlapping change of another conductor, which moves nothing by itself
  but changes where nodes that have not yet followed c1 wait;
* C starts at t=period/2.

It prints the move curve seen by A (moves per 10 s), and for every moment
two observers both placed, how many nodes they placed differently: the
worst and the mean, for A and B, and for A and C. The same story with
``rebalance_period = 0`` gives the disagreement without pacing, for
comparison.

    python tools/measure_rollout.py [--nodes 300] [--period 60]

With ``--cost`` it prints instead what a lookup costs during a rollout
(``PacedPlacer.conductor``, as a ring calls it) against one without
(``PlacementEngine.place``), with 1, 4 and all 100 of 100 conductors
changing.

With ``--capacity`` it runs the same story with c1's ``max_nodes`` at
two thirds of the nodes (so two thirds move to c1), the observers
computing the rollout under capacity
(:mod:`ironic_affinity.rollout_capacity`) as Ironic's processes do. Then
it measures one in a single process: 10 conductors with ``max_nodes``
at 1.1 times their fair share of ``--nodes`` nodes (at least 10,000),
racks of uneven sizes, conductor i preferring racks 2i and 2i+1; c0 is
changed to prefer the two largest racks, which c0 and c1 already hold,
over 600 s. It prints the moves (each node's one move, those made
before the node's turn to free room, those made at once), the moves per
tenth of the period, the most any conductor held over its capacity at
any move, and the cost of computing the moves and of a lookup.
"""

import argparse
import json
import math
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
import uuid

from oslo_config import cfg

from ironic_affinity import capacity
from ironic_affinity import conf as affinity_conf
from ironic_affinity import engine
from ironic_affinity import profile
from ironic_affinity import rendezvous
from ironic_affinity import rollout
from ironic_affinity import rollout_capacity
from ironic_affinity import schedule
from ironic_affinity.membership import service
from ironic_affinity.tests.functional import member_process
from ironic_affinity.tests.functional import servers

TICK = 0.1


def _conf(url: str, group: str) -> cfg.ConfigOpts:
    conf = cfg.ConfigOpts()
    affinity_conf.register_opts(conf)
    conf([], default_config_files=[])
    conf.set_override('backend_url', url, group='affinity')
    conf.set_override('group_name', group, group='affinity')
    return conf


def observe(url: str, group: str, count: int, until: float, out: str) -> None:
    """An observer process: place every node at each tick until ``until``,
    one JSON line per tick: [tick, conductors in node order]."""
    view = service.member_view(_conf(url, group))
    view.start()
    nodes = [
        profile.NodeRequest.build('n%d' % i, 'rack10', uuid='node-%05d' % i)
        for i in range(count)
    ]
    version = None
    placer = None
    timeline = None
    with open(out, 'w') as handle:
        tick = int(time.time() / TICK) + 1
        while tick * TICK < until:
            time.sleep(max(0.0, tick * TICK - time.time()))
            snapshot = view.snapshot()
            if snapshot.version != version:
                version = snapshot.version
                placer = rollout.PacedPlacer(
                    engine.PlacementEngine(snapshot.members.values())
                )
                # Under capacity, as CapacityStates computes it: once per
                # view, then read at each moment.
                timeline = (
                    rollout_capacity.build(placer, nodes)
                    if capacity.is_limited(placer.current.conductors)
                    else None
                )
            now = time.time()
            assert placer is not None
            if timeline is not None:
                found = [timeline.conductor(n.name, now) or '-' for n in nodes]
            else:
                found = [placer.conductor(n, now) or '-' for n in nodes]
            handle.write(json.dumps([tick, found]) + '\n')
            tick = max(tick + 1, int(time.time() / TICK) + 1)
    view.stop()


def _observer(url, group, count, until, out):  # type: ignore[no-untyped-def]
    return subprocess.Popen(
        [
            sys.executable,
            __file__,
            '--observe',
            url,
            group,
            str(count),
            str(until),
            out,
        ]
    )


def _write(folder: str, name: str, url: str, group: str, **options) -> str:  # type: ignore[no-untyped-def]
    path = os.path.join(folder, name + '.conf')
    lines = ['[affinity]', 'backend_url = %s' % url, 'group_name = %s' % group]
    lines += ['%s = %s' % item for item in sorted(options.items())]
    with open(path, 'w') as handle:
        handle.write('\n'.join(lines) + '\n')
    return path


def story(  # type: ignore[type-arg]
    url: str, count: int, period: int, folder: str, max_nodes: int = 0
) -> dict:
    group = 'rollout-%s' % uuid.uuid4().hex[:8]
    paced = {'rebalance_period': str(period)}
    # Only c1 has a capacity: the nodes start on c2 all the same.
    c1 = {'max_nodes': str(max_nodes)} if max_nodes else {}
    members = {}
    for name, tags in (('c1', ''), ('c2', 'rack10')):
        path = _write(
            folder,
            name,
            url,
            group,
            soft_affinity_tags=tags,
            **paced,
            **(c1 if name == 'c1' else {}),
        )
        process, joined = member_process.spawn(
            path, name, stderr=subprocess.DEVNULL
        )
        if not joined:
            raise RuntimeError('%s did not join' % name)
        members[name] = process
    # Let the joins roll out before the story starts.
    time.sleep(period + 3)
    length = max(period, 10)
    start = time.time() + 2
    until = start + length + 5
    out = {
        name: os.path.join(folder, '%s-%d.jsonl' % (name, period))
        for name in 'abc'
    }
    observers = [_observer(url, group, count, until, out['a'])]
    # B half a watch interval later: processes read the group each at
    # its own phase, and two in step would hide the lag between them.
    time.sleep(0.5)
    observers.append(_observer(url, group, count, until, out['b']))
    time.sleep(max(0.0, start - time.time()))
    _write(
        folder,
        'c1',
        url,
        group,
        soft_affinity_tags='rack10:5',
        **paced,
        **c1,
    )
    members['c1'].send_signal(signal.SIGHUP)
    changed = time.time()
    time.sleep(max(0.0, changed + length / 3 - time.time()))
    _write(folder, 'c2', url, group, soft_affinity_tags='rack20', **paced)
    members['c2'].send_signal(signal.SIGHUP)
    time.sleep(max(0.0, changed + length / 2 - time.time()))
    observers.append(_observer(url, group, count, until, out['c']))
    for observer in observers:
        observer.wait()
    for process in members.values():
        process.send_signal(signal.SIGTERM)
        process.wait(30)
        process.stdout.close()  # type: ignore[union-attr]
    a, b, c = (_read(out[name]) for name in 'abc')
    return {
        'moves_per_10s': _curve(a, changed, period),
        'a_and_b': _compare(a, b),
        'a_and_c': _compare(a, c),
    }


def _read(path: str) -> dict[int, list[str]]:
    with open(path) as handle:
        return {tick: found for tick, found in map(json.loads, handle)}


def _curve(a: dict[int, list[str]], changed: float, period: int) -> list[int]:
    """Moves seen by one observer, per 10 s from the change."""
    ticks = sorted(a)
    windows = [0] * (max(period, 10) // 10 + 1)
    for before, after in zip(ticks, ticks[1:], strict=False):
        moved = sum(x != y for x, y in zip(a[before], a[after], strict=True))
        index = int((after * TICK - changed) // 10)
        windows[min(max(index, 0), len(windows) - 1)] += moved
    return windows


def _compare(a: dict[int, list[str]], b: dict[int, list[str]]) -> dict:  # type: ignore[type-arg]
    """Nodes two observers placed differently at the same moments."""
    both = sorted(a.keys() & b.keys())
    differing = [
        sum(x != y for x, y in zip(a[t], b[t], strict=True)) for t in both
    ]
    return {
        'compared_moments': len(both),
        'worst_disagreement': max(differing) if differing else None,
        'mean_disagreement': (
            round(sum(differing) / len(differing), 2) if differing else None
        ),
        'moments_disagreeing': sum(1 for d in differing if d),
    }


def cost(count: int) -> None:
    """Microseconds per lookup, over ``count`` distinct nodes."""
    racks = ['rack%d' % i for i in range(50)]
    conductors = [
        profile.ConductorProfile.build(
            'c%03d' % i,
            soft_affinity_tags='%s, %s' % (racks[i % 50], racks[(i * 7) % 50]),
        )
        for i in range(100)
    ]
    nodes = [
        profile.NodeRequest.build(
            'n%d' % i, racks[i % 50], uuid='node-%06d' % i
        )
        for i in range(count)
    ]
    start = time.time()
    plain = engine.PlacementEngine(conductors)
    for node in nodes:
        plain.place(node)
    for changing in (0, 1, 4, 100):
        published = list(conductors)
        for i in range(changing):
            before = published[i]
            published[i] = profile.ConductorProfile.build(
                before.name, soft_affinity_tags=racks[(i * 13) % 50]
            )
            published[i] = rollout.compose(before, published[i], start, 1200)
        placer = engine.PlacementEngine(published)
        paced = rollout.PacedPlacer(placer)
        for node in nodes:
            paced.conductor(node, start + 300)
        began = time.perf_counter()
        for node in nodes:
            if changing:
                # Each lookup at its own moment, as a ring reads the clock.
                paced.conductor(node, time.time() + 300)
            else:
                placer.place(node)
        spent = time.perf_counter() - began
        print(
            '%d of 100 conductors changing: %.1f us a lookup (%s)'
            % (
                changing,
                spent / count * 1e6,
                'PacedPlacer.conductor'
                if changing
                else 'PlacementEngine.place',
            )
        )


def under_capacity(count: int, period: float) -> None:
    """A rollout under capacity: its moves and what it costs."""
    rnd = random.Random(7)
    racks = ['rack%d' % i for i in range(20)]
    weights = [1.0 / (i + 1) ** 0.8 for i in range(20)]
    nodes = []
    for rack in rnd.choices(racks, weights, k=count):
        name = str(uuid.UUID(int=rnd.getrandbits(128), version=4))
        nodes.append(profile.NodeRequest.build(name, rack, uuid=name))
    limit = int(count / 10 * 1.1)
    conductors = [
        profile.ConductorProfile.build(
            'c%d' % i,
            soft_affinity_tags='%s, %s' % (racks[2 * i], racks[2 * i + 1]),
            max_nodes=limit,
        )
        for i in range(10)
    ]
    start = 1_800_000_000.0
    changed = profile.ConductorProfile.build(
        'c0', soft_affinity_tags='rack0:2, rack2:2', max_nodes=limit
    )
    published = [
        rollout.compose(conductors[0], changed, start, period)
    ] + conductors[1:]
    paced = rollout.PacedPlacer(engine.PlacementEngine(published))
    began = time.perf_counter()
    timeline = rollout_capacity.build(paced, nodes)
    built = time.perf_counter() - began
    began = time.perf_counter()
    capacity.assign(paced.current, nodes)
    one = time.perf_counter() - began
    moves = timeline.moves
    change = published[0].changes[0]
    early = 0
    for node in nodes:
        move = moves.get(node.name)
        if move is None or move.at == -math.inf:
            continue
        own = min(
            c.at
            + rendezvous.weight(
                rendezvous.hash64(node.hash_key),
                schedule.change_key(name, at=c.at),
            )
            / 2.0**64
            * c.period
            for name, c in [('c0', change)]
        )
        early += move.at < own - 1e-9
    tenths = [0] * 10
    for move in moves.values():
        if move.at != -math.inf:
            tenths[min(9, int((move.at - start) / period * 10))] += 1
    worst = 0
    for at in sorted({m.at for m in moves.values()}):
        loads = timeline.loads(at)
        worst = max([worst] + [loads[c.name] - limit for c in conductors])
    sample = nodes[: min(count, 10000)]
    began = time.perf_counter()
    for node in sample:
        timeline.conductor(node.name, start + period / 2)
    lookup = (time.perf_counter() - began) / len(sample)
    print(
        json.dumps(
            {
                'nodes': count,
                'max_nodes': limit,
                'period': period,
                'moves': len(moves),
                'moved_early_for_room': early,
                'moved_at_once': sum(
                    1 for m in moves.values() if m.at == -math.inf
                ),
                'moves_per_tenth_of_period': tenths,
                'most_over_capacity_at_any_move': worst,
                'seconds_to_compute_the_moves': round(built, 2),
                'seconds_for_one_placement_under_capacity': round(one, 2),
                'lookup_us': round(lookup * 1e6, 2),
            }
        )
    )


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == '--observe':
        url, group, count, until, out = sys.argv[2:7]
        observe(url, group, int(count), float(until), out)
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--nodes', type=int, default=300)
    parser.add_argument('--period', type=int, default=60)
    parser.add_argument('--cost', action='store_true')
    parser.add_argument('--capacity', action='store_true')
    args = parser.parse_args()
    if args.cost:
        cost(max(args.nodes, 10000))
        return 0
    if args.capacity:
        with servers.RedisServer() as server:
            found = story(
                server.url,
                args.nodes,
                args.period,
                tempfile.mkdtemp(),
                max_nodes=args.nodes * 2 // 3,
            )
        print(
            'under capacity, rebalance_period = %d: %s'
            % (args.period, json.dumps(found))
        )
        under_capacity(max(args.nodes, 10000), 600)
        return 0
    folder = tempfile.mkdtemp()
    print(
        '%d nodes, three observers at the default watch interval, '
        'Redis; moments every %.1f s' % (args.nodes, TICK)
    )
    with servers.RedisServer() as server:
        for period in (args.period, 0):
            found = story(server.url, args.nodes, period, folder)
            print('rebalance_period = %d: %s' % (period, json.dumps(found)))
    return 0


if __name__ == '__main__':
    sys.exit(main())
