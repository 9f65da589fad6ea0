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

"""Bounded loads under change: how many nodes move, and what it costs.

For each number of conductors and capacity factor, a deployment of
``--nodes`` nodes, each in one rack. Racks are uneven on purpose (rack i
holds a share proportional to 1/(i+1)^0.8, so the biggest rack at 10
conductors is 13% of all nodes) and conductor i prefers racks 2i and
2i+1 by soft affinity: without capacity, conductor 0 would take about
twice its fair share. Every conductor has ``max_nodes = ceil(factor *
nodes / conductors)``, conductors and nodes as the run starts.

Then ``--changes`` changes, in turn: a node is added (in a random rack),
a node is removed, a conductor joins (preferring two random racks), a
conductor dies; so the deployment stays the same size. For each change:

* moved: nodes whose conductor differs, among nodes present before and
  after, less those that had to move (the dead conductor's nodes) or
  that moved onto a new conductor, which is the point of adding one;
  that is, the disturbance capacity causes. Without capacity it is 0
  for every kind of change (rendezvous hashing; tools/
  benchmark_placement.py);
* the maximum load over capacity (0 unless every way out is full).

Also: the time of one full recomputation (``capacity.assign`` over every
node; best of 3) and of one lookup in its result.

    tox -e bench-capacity
    python tools/benchmark_capacity.py --conductors 10 100 \\
        --factors 1.1 1.5 --nodes 100000 --changes 1000
"""

import argparse
import math
import platform
import random
import statistics
import time
import timeit
import uuid as uuidlib

from ironic_affinity import capacity
from ironic_affinity import engine
from ironic_affinity import placement
from ironic_affinity import profile
from ironic_affinity.integration.node_tags import node_facts
from ironic_affinity.integration.ring import capacity_state
from ironic_affinity.integration.ring import rings


class _Tags:
    """A node tag cache holding ``nodes``, as a process holds them."""

    def __init__(self, nodes):
        self.version = 1
        self.held = {
            n.uuid: node_facts.NodeFacts('ipmi', '', n.tags) for n in nodes
        }

    def nodes(self):
        return list(self.held.items())

    def facts(self, uuid):
        return self.held.get(uuid)

    def get(self, uuid):
        found = self.held.get(uuid)
        return None if found is None else found.tags


def _ring_lookup(conductors, nodes, limited):
    """Seconds per ``AffinityRing.get_nodes`` of a known node, as Ironic
    calls it, with capacity (from a computed assignment) or without."""
    profiles = [
        profile.ConductorProfile(
            c.name,
            soft_affinity_tags=c.soft_affinity_tags,
            hardware_types=frozenset({'ipmi'}),
            max_nodes=c.max_nodes if limited else 0,
        )
        for c in conductors
    ]
    placer = placement.Placement(profiles)
    tags = _Tags(nodes)
    states = capacity_state.CapacityStates(tags, lambda: 2.0, _Quiet())
    found = rings.AffinityRing(
        placer,
        'ipmi',
        '',
        [c.name for c in profiles],
        tags.get,
        lambda node, evaluation: 'orphan',
        RuntimeError,
        states.lookup(placer, True),
    )
    some = [n.uuid.encode() for n in nodes[:1000]]
    for key in some:  # the first lookup computes the assignment
        found.get_nodes(key)
    return min(
        timeit.repeat(
            lambda: [found.get_nodes(key) for key in some],
            number=10,
            repeat=3,
        )
    ) / (10 * len(some))


class _Quiet:
    def debug(self, *args):
        pass

    warning = info = debug


def _rack_weights(count):
    return [1.0 / (i + 1) ** 0.8 for i in range(count)]


def _node(rnd, racks, weights):
    name = str(uuidlib.UUID(int=rnd.getrandbits(128), version=4))
    rack = rnd.choices(racks, weights)[0]
    return profile.NodeRequest(
        name=name, tags=frozenset([rack]), uuid=name, driver='ipmi'
    )


def _conductor(name, racks, limit):
    return profile.ConductorProfile.build(
        name, soft_affinity_tags=list(racks), max_nodes=limit
    )


def _assign(conductors, nodes):
    return capacity.assign(engine.PlacementEngine(conductors.values()), nodes)


def _moves(before, after, dead=None, new=None):
    """(every node that moved, those that did not have to)."""
    moved = collateral = 0
    for name, old in before.conductors.items():
        now = after.conductors.get(name)
        if name not in after.conductors or old == now:
            continue
        moved += 1
        if old != dead and now != new:
            collateral += 1
    return moved, collateral


def run(conductor_count, factor, node_count, changes, seed):
    rnd = random.Random(seed)
    racks = ['rack%d' % i for i in range(2 * conductor_count)]
    weights = _rack_weights(len(racks))
    limit = math.ceil(factor * node_count / conductor_count)
    conductors = {
        'conductor-%04d' % i: _conductor(
            'conductor-%04d' % i, racks[2 * i : 2 * i + 2], limit
        )
        for i in range(conductor_count)
    }
    nodes = {}
    while len(nodes) < node_count:
        node = _node(rnd, racks, weights)
        nodes[node.name] = node

    costs = []
    for _ in range(3):
        started = time.perf_counter()
        current = _assign(conductors, list(nodes.values()))
        costs.append(time.perf_counter() - started)
    some = rnd.sample(sorted(nodes), 1000)
    lookup = min(
        timeit.repeat(
            lambda: [current.conductors[name] for name in some],
            number=100,
            repeat=3,
        )
    ) / (100 * len(some))
    ring_costs = (
        _ring_lookup(list(conductors.values()), list(nodes.values()), True),
        _ring_lookup(list(conductors.values()), list(nodes.values()), False),
    )
    worst_over = max(current.over_capacity().values(), default=0)
    initial = dict(
        spilled=len(current.spilled),
        max_load=max(current.loads.values()),
    )

    kinds = ('add node', 'remove node', 'join', 'die')
    moved = {kind: [] for kind in kinds}
    total = {kind: [] for kind in kinds}
    serial = conductor_count
    for step in range(changes):
        kind = kinds[step % 4]
        dead = new = None
        if kind == 'add node':
            node = _node(rnd, racks, weights)
            nodes[node.name] = node
        elif kind == 'remove node':
            del nodes[rnd.choice(sorted(nodes))]
        elif kind == 'join':
            new = 'conductor-%04d' % serial
            serial += 1
            conductors[new] = _conductor(new, rnd.sample(racks, 2), limit)
        else:
            dead = rnd.choice(sorted(conductors))
            del conductors[dead]
        after = _assign(conductors, list(nodes.values()))
        every, collateral = _moves(current, after, dead, new)
        moved[kind].append(collateral)
        total[kind].append(every)
        worst_over = max([worst_over] + list(after.over_capacity().values()))
        current = after
    return {
        'conductors': conductor_count,
        'factor': factor,
        'capacity': limit,
        'full': min(costs),
        'lookup': lookup,
        'ring': ring_costs,
        'worst_over': worst_over,
        'moved': moved,
        'total': total,
        **initial,
    }


def _print(result):
    every = [m for values in result['moved'].values() for m in values]
    print(
        '%(conductors)d conductors, capacity %(factor).1fx fair share '
        '(max_nodes %(capacity)d): full recomputation %(full).2f s; '
        'lookup in its result %(ns).0f ns, AffinityRing.get_nodes '
        '%(with_us).1f us (%(without_us).1f us without capacity); at start '
        '%(spilled)d nodes spilled, max load %(max_load)d; worst load '
        'over capacity in the run %(worst_over)d'
        % dict(
            result,
            ns=result['lookup'] * 1e9,
            with_us=result['ring'][0] * 1e6,
            without_us=result['ring'][1] * 1e6,
        )
    )
    if every:
        print(
            '  other nodes moved per change: mean %.1f, max %d over %d '
            'changes' % (statistics.mean(every), max(every), len(every))
        )
    for kind, values in result['moved'].items():
        if values:
            every = result['total'][kind]
            print(
                '    %-12s mean %7.1f  max %6d  (%d changes; every move '
                'counted: mean %.1f, max %d)'
                % (
                    kind,
                    statistics.mean(values),
                    max(values),
                    len(values),
                    statistics.mean(every),
                    max(every),
                )
            )


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--conductors', type=int, nargs='+', default=[10, 100])
    parser.add_argument('--factors', type=float, nargs='+', default=[1.1, 1.5])
    parser.add_argument('--nodes', type=int, default=100000)
    parser.add_argument('--changes', type=int, default=1000)
    parser.add_argument('--seed', type=int, default=1)
    args = parser.parse_args()
    print(
        'Python %s on %s; %d nodes, %d changes per row'
        % (
            platform.python_version(),
            platform.machine(),
            args.nodes,
            args.changes,
        ),
        flush=True,
    )
    for count in args.conductors:
        for factor in args.factors:
            _print(run(count, factor, args.nodes, args.changes, args.seed))
            print(flush=True)


if __name__ == '__main__':
    main()
