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

"""Ring lookups: what one ``get_nodes`` costs in each way to place.

Ironic asks a ring for a node's conductor on every API request and in
every periodic task, node by node. This times ``AffinityRing.get_nodes``
of a known node, warm (the ring built, its verdicts and, under capacity,
the settled node set computed), in each of the four ways the placement
pipeline (ironic_affinity/placement.py) places:

* plain: tags and hashing;
* paced: ``--rolling`` conductors in the middle of a change
  (``[affinity]rebalance_period``);
* capacity: every conductor with a ``max_nodes``;
* paced capacity: both.

``--conductors`` conductors in one group, each preferring one of
``--racks`` racks by soft affinity; ``--nodes`` nodes, each in a rack.
The figure is the best of ``--repeat`` runs of ``--lookups`` lookups, in
microseconds per lookup, with the spread of the runs (max / min) to tell
a change from noise.

    tox -e bench-lookup
    python tools/benchmark_lookup.py --nodes 20000 --conductors 20
"""

import argparse
import dataclasses
import platform
import random
import time
import uuid as uuidlib

from ironic_affinity import placement
from ironic_affinity import profile
from ironic_affinity.integration.node_tags import node_facts
from ironic_affinity.integration.ring import capacity_state
from ironic_affinity.integration.ring import rings

START = 1_800_000_000.0
PERIOD = 600.0


class _Tags:
    """A node tag cache holding every node."""

    def __init__(self, nodes):
        self.held = {
            n.uuid: node_facts.NodeFacts(n.driver, '', n.tags) for n in nodes
        }
        self.version = 1

    def nodes(self):
        return list(self.held.items())

    def facts(self, uuid):
        return self.held.get(uuid)

    def lookup(self, uuid):
        found = self.held.get(uuid)
        return None if found is None else found.tags


class _Quiet:
    def debug(self, *args):
        pass

    info = warning = debug


def conductors(count, racks, rolling, limited, nodes):
    """The conductors of one way to place."""
    room = int(1.2 * nodes / count) + 1 if limited else 0
    found = []
    for index in range(count):
        wanted = profile.ConductorProfile.build(
            'c%03d' % index,
            soft_affinity_tags='rack%d' % (index % racks),
            hardware_types=['ipmi'],
            max_nodes=room,
        )
        if index < rolling:
            before = profile.ConductorProfile.build(
                wanted.name,
                soft_affinity_tags='rack%d' % ((index + 1) % racks),
                hardware_types=['ipmi'],
                max_nodes=room,
            )
            wanted = dataclasses.replace(
                wanted,
                changes=(profile.ProfileChange(before, START, PERIOD),),
            )
        found.append(wanted)
    return found


def ring(members, nodes):
    """A warm ring over ``members``, and the node tag cache it reads."""
    placer = placement.Placement(members)
    tags = _Tags(nodes)
    states = capacity_state.CapacityStates(
        tags,
        lambda: 1000.0,
        _Quiet(),
        pause=lambda: None,
        wall_clock=lambda: START + PERIOD / 2,
    )
    return rings.AffinityRing(
        placer,
        'ipmi',
        '',
        [c.name for c in members],
        tags.lookup,
        lambda node, evaluation: 'orphan',
        RuntimeError,
        states.lookup(placer, True),
        clock=lambda: START + PERIOD / 2,
    )


def measure(found, keys, repeat):
    """Microseconds per lookup: each run's figure."""
    for key in keys:  # warm: verdicts, and the settled set
        found.get_nodes(key)
    runs = []
    for _ in range(repeat):
        started = time.perf_counter()
        for key in keys:
            found.get_nodes(key)
        runs.append((time.perf_counter() - started) / len(keys) * 1e6)
    return runs


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--nodes', type=int, default=20000)
    parser.add_argument('--conductors', type=int, default=20)
    parser.add_argument('--racks', type=int, default=8)
    parser.add_argument('--rolling', type=int, default=4)
    parser.add_argument('--lookups', type=int, default=5000)
    parser.add_argument('--repeat', type=int, default=7)
    parser.add_argument('--seed', type=int, default=1)
    args = parser.parse_args()
    rnd = random.Random(args.seed)
    nodes = [
        profile.NodeRequest(
            name=name,
            tags=frozenset({'rack%d' % rnd.randrange(args.racks)}),
            uuid=name,
            driver='ipmi',
        )
        for name in (
            str(uuidlib.UUID(int=rnd.getrandbits(128), version=4))
            for _ in range(args.nodes)
        )
    ]
    keys = [n.uuid.encode() for n in rnd.sample(nodes, args.lookups)]
    print(
        'Python %s on %s; %d nodes, %d conductors, %d lookups, best of %d'
        % (
            platform.python_version(),
            platform.machine(),
            args.nodes,
            args.conductors,
            args.lookups,
            args.repeat,
        )
    )
    print('%-15s %12s %8s' % ('WAY', 'US/LOOKUP', 'SPREAD'))
    for name, rolling, limited in (
        ('plain', 0, False),
        ('paced', args.rolling, False),
        ('capacity', 0, True),
        ('paced capacity', args.rolling, True),
    ):
        members = conductors(
            args.conductors, args.racks, rolling, limited, args.nodes
        )
        runs = measure(ring(members, nodes), keys, args.repeat)
        print('%-15s %12.2f %8.2f' % (name, min(runs), max(runs) / min(runs)))
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
