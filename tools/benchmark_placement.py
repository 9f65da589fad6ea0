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

"""Placement benchmark: the affinity engine against Ironic's stock ring.

Ironic places a node with ``tooz.hashring.HashRing(conductors,
partitions=2**5)`` and ``ring.get_nodes(node_uuid_bytes)``. This script
measures, in one run, the same things for ``PlacementEngine`` and checks
the goals the design was chosen for:

1. balance among tied conductors, as max load / mean load over 100,000
   nodes (<= 1.05 at 3 to 10 tied conductors, <= 1.10 at 100);
2. minimal movement: losing a conductor moves only its own nodes, a new
   conductor takes nodes only onto itself (0 other moves);
3. cost at 1,000 conductors and 100,000 nodes: a warm ``place()`` at most
   1.5 times a stock lookup, and a cold placement of every node on a new
   membership at most 3 times the stock ring's;
4. placement independent of PYTHONHASHSEED and of conductor order.

Run it with tox, or directly in an environment where ironic-affinity is
installed::

    tox -e bench
    tox -e bench -- --quick --check
    python tools/benchmark_placement.py [--quick] [--check] [--seed N]

``--check`` makes the exit status 1 when a goal fails. ``--quick`` shrinks
the cost section, the tag mix, the fair reference and the ring columns
for a smoke run (under a minute); the balance and movement sections keep
their node and conductor counts, since their bounds only mean something
at those sizes. The full run takes a few
minutes on two cores. Timings are the best of three wall-clock runs.
"""

import argparse
import collections
from collections.abc import Callable
from collections.abc import Iterable
from collections.abc import Sequence
import dataclasses
import functools
import gc
import hashlib
import importlib.metadata
import os
import platform
import random
import subprocess
import sys
import time
import uuid

import numpy as np
from tooz import hashring

from ironic_affinity import engine
from ironic_affinity import profile

# What Ironic builds: 2 ** [DEFAULT]hash_partition_exponent, default 5.
STOCK_PARTITIONS = 2**5
# A ring with many more points per member, to show what balance a ring
# buys with more memory.
WIDE_PARTITIONS = 2**10

SMALL_TIES = tuple(range(3, 11))
LARGE_TIE = 100
SMALL_TIE_BOUND = 1.05
LARGE_TIE_BOUND = 1.10
WARM_BOUND = 1.5
COLD_BOUND = 3.0


@dataclasses.dataclass(frozen=True)
class Sizes:
    nodes: int = 100_000
    movement_conductors: int = 100
    movement_cases: int = 5
    cost_conductors: int = 1_000
    cost_nodes: int = 100_000
    tag_sets: int = 300
    repeats: int = 3
    # Fair draws averaged for the expected max/mean of a random spread.
    fair_trials: int = 5
    wide_ring: bool = True


FULL = Sizes()
# Balance and movement keep their sizes: their bounds are statistical and
# only hold with 100,000 nodes.
QUICK = dataclasses.replace(
    FULL,
    cost_conductors=200,
    cost_nodes=20_000,
    tag_sets=100,
    repeats=1,
    fair_trials=1,
    wide_ring=False,
)


@dataclasses.dataclass(frozen=True)
class Goal:
    """One checked goal: passes when ``figure <= bound``."""

    name: str
    figure: float
    bound: float
    shown: str
    limit: str
    stock: str = '-'

    @property
    def passed(self) -> bool:
        return self.figure <= self.bound


@dataclasses.dataclass
class Results:
    goals: list[Goal] = dataclasses.field(default_factory=list)
    # Comparison-only rows for the final table: (measure, figure, note).
    context: list[tuple[str, str, str]] = dataclasses.field(
        default_factory=list
    )

    def check(self, goal: Goal) -> None:
        self.goals.append(goal)
        verdict = 'PASS' if goal.passed else 'FAIL'
        print(f'  {verdict}  {goal.name}: {goal.shown} ({goal.limit})')


# ---------------------------------------------------------------------------
# Inputs


def conductor_name(index: int) -> str:
    return 'conductor-%04d.ironic.example.org' % index


def random_uuids(rng: random.Random, count: int) -> list[str]:
    # Seeded, so every run places the same nodes; version 4 bits set so
    # the keys look like the uuids Ironic hashes.
    return [
        str(uuid.UUID(int=rng.getrandbits(128), version=4))
        for _ in range(count)
    ]


def tied_conductors(count: int) -> list[profile.ConductorProfile]:
    """Conductors without tags: every node ties over all of them."""
    return [
        profile.ConductorProfile(name=conductor_name(i)) for i in range(count)
    ]


def untagged_nodes(uuids: Iterable[str]) -> list[profile.NodeRequest]:
    return [profile.NodeRequest(name=u, uuid=u) for u in uuids]


# The realistic mix: conductors live in one of a few datacenters, in pods
# of 1 to 8 that share a configuration (so nodes tie within a pod), near
# some racks and far from others, with access to some networks and none
# to others. A few pods are dedicated to "secure" nodes.
DATACENTERS = 4
RACKS_PER_DATACENTER = 40
NETWORKS = 12


def _dc(index: int) -> str:
    return 'dc%d' % index


def _rack(dc: int, rack: int) -> str:
    return 'dc%d-rack%03d' % (dc, rack)


def _net(index: int) -> str:
    return 'physnet%02d' % index


def pod_profile(rng: random.Random) -> profile.ConductorProfile:
    """One pod's configuration, named later per conductor."""
    dc = rng.randrange(DATACENTERS)
    racks = rng.sample(range(RACKS_PER_DATACENTER), 7)
    networks = rng.sample(range(NETWORKS), 5)
    secure = rng.random() < 0.1
    hard = [_dc(dc)] + (['secure'] if secure else [])
    hard_anti = [] if secure else ['secure']
    if rng.random() < 0.5:
        hard_anti.append(_net(networks[4]))
    # Being near a rack counts more than reaching a network.
    soft = ['%s:2' % _rack(dc, r) for r in racks[:4]]
    soft += [_net(n) for n in networks[:4]]
    if rng.random() < 0.3:
        soft.append('gpu')
    return profile.ConductorProfile.build(
        'pod',
        hard_affinity_tags=hard,
        hard_anti_affinity_tags=hard_anti,
        soft_affinity_tags=soft,
        soft_anti_affinity_tags=[_rack(dc, r) for r in racks[4:]],
    )


def realistic_conductors(
    rng: random.Random, count: int
) -> list[profile.ConductorProfile]:
    conductors: list[profile.ConductorProfile] = []
    while len(conductors) < count:
        pod = pod_profile(rng)
        for _ in range(min(rng.randint(1, 8), count - len(conductors))):
            name = conductor_name(len(conductors))
            conductors.append(dataclasses.replace(pod, name=name))
    return conductors


def realistic_tag_sets(
    rng: random.Random,
    conductors: Sequence[profile.ConductorProfile],
    count: int,
) -> list[str]:
    """Distinct node tag lists that at least one conductor accepts: an
    operator would not enrol nodes that nothing can manage."""
    judge = engine.PlacementEngine(conductors)
    seen: set[frozenset[str]] = set()
    result = []
    while len(result) < count:
        dc = rng.randrange(DATACENTERS)
        tags = [_dc(dc), _rack(dc, rng.randrange(RACKS_PER_DATACENTER))]
        tags += [
            _net(n) for n in rng.sample(range(NETWORKS), rng.randint(1, 2))
        ]
        if rng.random() < 0.05:
            tags.append('secure')
        if rng.random() < 0.2:
            tags.append('gpu')
        key = frozenset(tags)
        if key in seen:
            continue
        seen.add(key)
        if judge.evaluate(profile.NodeRequest(name='probe', tags=key)).tied:
            result.append(' '.join(sorted(tags)))
    return result


def tagged_nodes(
    rng: random.Random, uuids: Iterable[str], tag_sets: Sequence[str]
) -> list[profile.NodeRequest]:
    # Parsed per node, as a loader would: equal tags, distinct objects.
    return [
        profile.NodeRequest.build(u, rng.choice(tag_sets), uuid=u)
        for u in uuids
    ]


def describe_mix(
    conductors: Sequence[profile.ConductorProfile],
    tag_sets: Sequence[str],
) -> None:
    judge = engine.PlacementEngine(conductors)
    evaluations = [
        judge.evaluate(profile.NodeRequest.build('probe', tags))
        for tags in tag_sets
    ]
    eligible = [len(e.eligible) for e in evaluations]
    tied = [len(e.tied) for e in evaluations]
    scores = {e.top_score for e in evaluations}
    profiles = len({c.signature() for c in conductors})
    print(
        f'  {len(conductors)} conductors in {profiles} distinct profiles; '
        f'{len(tag_sets)} node tag sets'
    )
    print(
        f'  eligible conductors per tag set: mean '
        f'{sum(eligible) / len(eligible):.1f}, min {min(eligible)}, '
        f'max {max(eligible)}'
    )
    print(
        f'  tied at the top score: mean {sum(tied) / len(tied):.1f}, '
        f'max {max(tied)}; top scores seen: '
        + ', '.join(f'{s}' for s in sorted(scores))
    )


# ---------------------------------------------------------------------------
# Measuring


def best_of(repeats: int, work: Callable[[], object]) -> float:
    """The shortest of ``repeats`` runs in seconds: the run least
    disturbed by whatever else the machine was doing."""
    best = float('inf')
    for _ in range(repeats):
        gc.collect()
        start = time.perf_counter()
        work()
        best = min(best, time.perf_counter() - start)
    return best


def stock_ring(names: Iterable[str], partitions: int) -> hashring.HashRing:
    return hashring.HashRing(list(names), partitions=partitions)


def stock_lookup_all(ring: hashring.HashRing, keys: Sequence[bytes]) -> list:
    get_nodes = ring.get_nodes
    return [get_nodes(key) for key in keys]


def stock_cold(names: Sequence[str], keys: Sequence[bytes]) -> list:
    return stock_lookup_all(stock_ring(names, STOCK_PARTITIONS), keys)


def stock_owners(ring: hashring.HashRing, keys: Sequence[bytes]) -> list:
    return [next(iter(found)) for found in stock_lookup_all(ring, keys)]


def engine_owners(
    conductors: Iterable[profile.ConductorProfile],
    nodes: Sequence[profile.NodeRequest],
) -> list[str | None]:
    placer = engine.PlacementEngine(conductors)
    return [p.conductor for p in placer.place_all(nodes)]


def place_one_at_a_time(
    conductors: Sequence[profile.ConductorProfile],
    nodes: Sequence[profile.NodeRequest],
    keep: list[engine.PlacementEngine],
) -> None:
    placer = engine.PlacementEngine(conductors)
    place = placer.place
    for node in nodes:
        place(node)
    # The caller asks the same engine again for the warm figure.
    keep[:] = [placer]


def score_only(
    conductors: Sequence[profile.ConductorProfile],
    samples: Sequence[profile.NodeRequest],
) -> None:
    placer = engine.PlacementEngine(conductors)
    for node in samples:
        placer.evaluate(node)


def ask_again(
    placer: engine.PlacementEngine, nodes: Sequence[profile.NodeRequest]
) -> list[engine.Choice]:
    place = placer.place
    return [place(node) for node in nodes]


def max_over_mean(owners: Iterable[object], members: int) -> float:
    loads = collections.Counter(owners)
    total = sum(loads.values())
    return max(loads.values()) / (total / members)


def fair_max_over_mean(
    rng: random.Random, members: int, nodes: int, trials: int
) -> float:
    """The expected max/mean of a fair random draw: the best any hash
    can hope for without coordination."""
    figures = [
        max_over_mean((rng.randrange(members) for _ in range(nodes)), members)
        for _ in range(trials)
    ]
    return sum(figures) / len(figures)


def count_moves(
    before: Sequence[object], after: Sequence[object], changed: str
) -> tuple[int, int]:
    """(nodes moved off or onto ``changed``, nodes moved otherwise)."""
    expected = other = 0
    for old, new in zip(before, after, strict=True):
        if old == new:
            continue
        if changed in (old, new):
            expected += 1
        else:
            other += 1
    return expected, other


# ---------------------------------------------------------------------------
# 1. Balance


def section_balance(
    seed: int, sizes: Sizes, results: Results, uuids: Sequence[str]
) -> None:
    print(f'\n1. Balance among tied conductors, {len(uuids):,} nodes')
    print('   max load / mean load; lower is better, 1.0 is perfect')
    nodes = untagged_nodes(uuids)
    keys = [u.encode('utf-8') for u in uuids]
    rng = random.Random(f'{seed}-fair')
    header = f'  {"tied":>5} {"ours":>7} {"fair":>7} {"ring 2^5":>9}'
    if sizes.wide_ring:
        header += f' {"ring 2^10":>10}'
    print(header)
    rows = []
    for count in SMALL_TIES + (LARGE_TIE,):
        conductors = tied_conductors(count)
        names = [c.name for c in conductors]
        ours = max_over_mean(engine_owners(conductors, nodes), count)
        fair = fair_max_over_mean(rng, count, len(nodes), sizes.fair_trials)
        stock = max_over_mean(
            stock_owners(stock_ring(names, STOCK_PARTITIONS), keys), count
        )
        line = f'  {count:>5} {ours:>7.3f} {fair:>7.3f} {stock:>9.3f}'
        if sizes.wide_ring:
            wide = max_over_mean(
                stock_owners(stock_ring(names, WIDE_PARTITIONS), keys), count
            )
            line += f' {wide:>10.3f}'
        print(line)
        rows.append((count, ours, stock))
    print(
        f'  (fair: mean of {sizes.fair_trials} seeded random draws; '
        'ring: tooz HashRing, partitions per member)'
    )
    for count, ours, stock in rows:
        bound = LARGE_TIE_BOUND if count == LARGE_TIE else SMALL_TIE_BOUND
        results.check(
            Goal(
                f'balance, {count} tied (max/mean)',
                ours,
                bound,
                f'{ours:.3f}',
                f'<= {bound:.2f}',
                f'{stock:.3f}',
            )
        )


# ---------------------------------------------------------------------------
# 2. Minimal movement


def section_movement(
    seed: int, sizes: Sizes, results: Results, uuids: Sequence[str]
) -> None:
    count = sizes.movement_conductors
    rng = random.Random(f'{seed}-movement')
    conductors = realistic_conductors(rng, count)
    tag_sets = realistic_tag_sets(rng, conductors, sizes.tag_sets)
    nodes = tagged_nodes(rng, uuids, tag_sets)
    keys = [u.encode('utf-8') for u in uuids]
    print(
        f'\n2. Minimal movement, {count} conductors, {len(nodes):,} nodes '
        '(tag mix)'
    )
    describe_mix(conductors, tag_sets)
    names = [c.name for c in conductors]
    before = engine_owners(conductors, nodes)
    ring_before = stock_owners(stock_ring(names, STOCK_PARTITIONS), keys)
    ours_removed = ours_added = stock_removed = stock_added = 0
    for case in range(sizes.movement_cases):
        gone = rng.choice(conductors)
        after = engine_owners((c for c in conductors if c is not gone), nodes)
        moved, other = count_moves(before, after, gone.name)
        ours_removed += other
        survivors = [n for n in names if n != gone.name]
        ring_after = stock_owners(
            stock_ring(survivors, STOCK_PARTITIONS), keys
        )
        stock_removed += count_moves(ring_before, ring_after, gone.name)[1]
        print(
            f'  remove {gone.name}: {moved:,} nodes were on it and moved, '
            f'{other} others moved'
        )
        # Half the newcomers join an existing pod (and its ties), half
        # bring a profile of their own.
        if case % 2 == 0:
            template = rng.choice(conductors)
        else:
            template = pod_profile(rng)
        new = dataclasses.replace(template, name=conductor_name(count + case))
        after = engine_owners(conductors + [new], nodes)
        moved, other = count_moves(before, after, new.name)
        ours_added += other
        ring_after = stock_owners(
            stock_ring(names + [new.name], STOCK_PARTITIONS), keys
        )
        stock_added += count_moves(ring_before, ring_after, new.name)[1]
        print(
            f'  add    {new.name}: {moved:,} nodes moved onto it, '
            f'{other} moved elsewhere'
        )
    print(
        f'  stock ring, same changes: {stock_removed} and {stock_added} '
        'nodes moved elsewhere'
    )
    cases = sizes.movement_cases
    results.check(
        Goal(
            f'movement, remove 1 of {count} ({cases} cases): others moved',
            ours_removed,
            0,
            f'{ours_removed}',
            '= 0',
            f'{stock_removed}',
        )
    )
    results.check(
        Goal(
            f'movement, add 1 to {count} ({cases} cases): moved elsewhere',
            ours_added,
            0,
            f'{ours_added}',
            '= 0',
            f'{stock_added}',
        )
    )


# ---------------------------------------------------------------------------
# 3. Cost


@dataclasses.dataclass(frozen=True)
class Cost:
    nodes: int
    ours_build: float
    ours_scoring: float
    ours_all: float
    ours_one: float
    ours_warm: float
    stock_build: float
    stock_all: float
    stock_warm: float


def measure_cost(
    conductors: Sequence[profile.ConductorProfile],
    nodes: Sequence[profile.NodeRequest],
    gone: str,
    repeats: int,
) -> Cost:
    """Cold figures over the membership less ``gone``: a new engine or
    ring, then every node. Warm figures ask the same engine or ring
    again."""
    changed = [c for c in conductors if c.name != gone]
    names = [c.name for c in changed]
    keys = [n.hash_key for n in nodes]
    ring = stock_ring(names, STOCK_PARTITIONS)
    # One node per distinct constraint set: scoring alone, no tie-break.
    samples = list({n.constraints: n for n in nodes}.values())
    kept: list[engine.PlacementEngine] = []
    cost = Cost(
        nodes=len(nodes),
        ours_build=best_of(
            repeats, functools.partial(engine.PlacementEngine, changed)
        ),
        ours_scoring=best_of(
            repeats, functools.partial(score_only, changed, samples)
        ),
        ours_all=best_of(repeats, lambda: engine_owners(changed, nodes)),
        ours_one=best_of(
            repeats,
            functools.partial(place_one_at_a_time, changed, nodes, kept),
        ),
        ours_warm=best_of(
            repeats, functools.partial(ask_again, kept[0], nodes)
        )
        / len(nodes),
        stock_build=best_of(
            repeats, functools.partial(stock_ring, names, STOCK_PARTITIONS)
        ),
        stock_all=best_of(repeats, functools.partial(stock_cold, names, keys)),
        stock_warm=best_of(
            repeats, functools.partial(stock_lookup_all, ring, keys)
        )
        / len(nodes),
    )
    # A benchmark of a wrong answer is worthless: both paths must agree.
    one = [p.conductor for p in ask_again(kept[0], nodes)]
    if one != engine_owners(changed, nodes):
        raise RuntimeError('place() and place_all() disagree')
    return cost


def print_cost(label: str, cost: Cost) -> None:
    per = 1e6 / cost.nodes
    print(f'  {label}')
    # Per node is the total over every node, also for the parts that are
    # paid once per engine or ring: what each node costs on average.
    print(f'    {"":<38} {"total ms":>10} {"us/node":>9}')
    rows = [
        ('new engine (build only)', cost.ours_build),
        ('new engine + score each tag set', cost.ours_scoring),
        ('new engine + place_all(nodes)', cost.ours_all),
        ('new engine + place() each node', cost.ours_one),
        ('warm place()', cost.ours_warm * cost.nodes),
        ('stock: new HashRing (build only)', cost.stock_build),
        ('stock: new HashRing + get_nodes each', cost.stock_all),
        ('stock: get_nodes each, same ring', cost.stock_warm * cost.nodes),
    ]
    for name, total in rows:
        print(f'    {name:<38} {total * 1e3:>10.1f} {total * per:>9.2f}')


def section_cost(
    seed: int, sizes: Sizes, results: Results, uuids: Sequence[str]
) -> None:
    count = sizes.cost_conductors
    rng = random.Random(f'{seed}-cost')
    uuids = uuids[: sizes.cost_nodes]
    print(
        f'\n3. Cost, {count:,} conductors, {len(uuids):,} nodes, '
        f'best of {sizes.repeats}'
    )
    conductors = realistic_conductors(rng, count)
    tag_sets = realistic_tag_sets(rng, conductors, sizes.tag_sets)
    describe_mix(conductors, tag_sets)
    mixed = tagged_nodes(rng, uuids, tag_sets)
    gone = rng.choice(conductors).name
    print(f'  membership change: {gone} removed')
    mix = measure_cost(conductors, mixed, gone, sizes.repeats)
    print_cost('realistic tag mix:', mix)
    tied = tied_conductors(count)
    tie = measure_cost(
        tied, untagged_nodes(uuids), tied[count // 2].name, sizes.repeats
    )
    print_cost(f'worst case, all {count - 1:,} conductors tied:', tie)
    for label, cost in (('tag mix', mix), ('all tied', tie)):
        warm = cost.ours_warm / cost.stock_warm
        results.check(
            Goal(
                f'warm place(), {label}: ours/stock per call',
                warm,
                WARM_BOUND,
                f'{warm:.2f}x ({cost.ours_warm * 1e6:.2f} vs '
                f'{cost.stock_warm * 1e6:.2f} us)',
                f'<= {WARM_BOUND}x',
                f'{cost.stock_warm * 1e6:.2f} us',
            )
        )
        cold = cost.ours_all / cost.stock_all
        results.check(
            Goal(
                f'cold place_all, {label}: ours/stock total',
                cold,
                COLD_BOUND,
                f'{cold:.2f}x ({cost.ours_all:.2f} vs {cost.stock_all:.2f} s)',
                f'<= {COLD_BOUND}x',
                f'{cost.stock_all:.2f} s',
            )
        )
    for label, cost in (('tag mix', mix), ('all tied', tie)):
        one = cost.ours_one / cost.stock_all
        results.context.append(
            (
                f'cold place() one by one, {label}',
                f'{cost.ours_one:.2f} s ({one:.2f}x stock)',
                f'{cost.ours_one / cost.nodes * 1e6:.1f} us/node',
            )
        )


# ---------------------------------------------------------------------------
# 4. Independence from process, hash seed and order


def placement_digest(seed: int, reverse: bool = False) -> str:
    """A digest of where a fixed mix of nodes goes."""
    rng = random.Random(f'{seed}-digest')
    conductors = realistic_conductors(rng, 50)
    tag_sets = realistic_tag_sets(rng, conductors, 40)
    nodes = tagged_nodes(rng, random_uuids(rng, 5_000), tag_sets)
    if reverse:
        conductors.reverse()
    placed = engine.PlacementEngine(conductors).place_all(nodes)
    text = '\n'.join(f'{p.node} {p.conductor}' for p in placed)
    return hashlib.sha256(text.encode('utf-8')).hexdigest()


def section_determinism(seed: int, results: Results) -> None:
    print('\n4. Same placement in other processes, hash seeds and orders')
    here = placement_digest(seed)
    digests = {
        'this process': here,
        'conductors reversed': placement_digest(seed, reverse=True),
    }
    for hash_seed in ('1', '2'):
        env = dict(os.environ, PYTHONHASHSEED=hash_seed)
        done = subprocess.run(
            [sys.executable, __file__, '--digest', '--seed', str(seed)],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        digests[f'PYTHONHASHSEED={hash_seed}'] = done.stdout.strip()
    for label, digest in digests.items():
        print(f'  {label:<22} {digest[:16]}')
    differ = sum(1 for d in digests.values() if d != here)
    results.check(
        Goal(
            'placements differing across processes/orders',
            differ,
            0,
            f'{differ}',
            '= 0',
        )
    )


# ---------------------------------------------------------------------------
# Report


def environment() -> str:
    return (
        f'Python {platform.python_version()}, numpy {np.__version__}, '
        f'tooz {importlib.metadata.version("tooz")}, '
        f'{os.cpu_count()} cores, {platform.machine()}, '
        f'{time.strftime("%Y-%m-%d")}'
    )


def print_table(results: Results) -> None:
    print('\nSummary')
    headers = ('goal', 'ours', 'stock ring 2^5', 'bound', 'result')
    rows = [
        (g.name, g.shown, g.stock, g.limit, 'PASS' if g.passed else 'FAIL')
        for g in results.goals
    ]
    widths = [
        max(len(r[i]) for r in rows + [headers]) for i in range(len(headers))
    ]
    for row in [headers] + rows:
        print(
            '  '
            + '  '.join(
                c.ljust(w) for c, w in zip(row, widths, strict=True)
            ).rstrip()
        )
    print('\nFor context (no goal)')
    width = max(len(m) for m, _f, _n in results.context)
    for measure, figure, note in results.context:
        print(f'  {measure:<{width}}  {figure}  [{note}]')
    failed = sum(1 for g in results.goals if not g.passed)
    print(f'\n{len(results.goals) - failed} goals passed, {failed} failed')


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        '--quick', action='store_true', help='smaller cost sections'
    )
    parser.add_argument(
        '--check', action='store_true', help='exit 1 if a goal fails'
    )
    parser.add_argument('--seed', type=int, default=20261130)
    # Used by the determinism check, which runs this script again.
    parser.add_argument(
        '--digest', action='store_true', help=argparse.SUPPRESS
    )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.digest:
        print(placement_digest(args.seed))
        return 0
    sizes = QUICK if args.quick else FULL
    started = time.perf_counter()
    print(
        'Placement benchmark: ironic-affinity vs tooz HashRing '
        f'(partitions={STOCK_PARTITIONS})'
    )
    print(
        f'{environment()}; seed {args.seed}'
        + ('; QUICK run' if args.quick else '')
    )
    uuids = random_uuids(random.Random(f'{args.seed}-uuids'), sizes.nodes)
    results = Results()
    section_balance(args.seed, sizes, results, uuids)
    section_movement(args.seed, sizes, results, uuids)
    section_cost(args.seed, sizes, results, uuids)
    section_determinism(args.seed, results)
    print_table(results)
    print(f'Ran in {time.perf_counter() - started:.0f} s')
    if args.check and not all(g.passed for g in results.goals):
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main())
