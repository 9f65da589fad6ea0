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

"""Does a refactor change where any node goes? Ask both trees.

    python tools/compare_placement.py REV [--seeds N]

Random deployments (tags, groups, hardware types, capacities, changes of
profile in progress, switches between Ironic's ring and affinity, nodes
created during them, several moments) are placed twice: by the package
of commit REV, unpacked from git, and by the package of this working
tree, each in a process of its own. Every consumer is asked: ``plan``,
``explain``, ``check``, the rings, the metrics, and each node's side and
moves during a switch. Exit 0 when every answer is the same; otherwise
exit 1 and list each difference.

A refactor that changes an interface the questions use teaches
:class:`Questions` the new one beside the old, so that both trees are
asked through the interface each has.
"""

import argparse
import json
import os
import pathlib
import random
import subprocess
import sys
import tarfile
import tempfile
from typing import Any
import uuid as uuidlib

ROOT = pathlib.Path(__file__).resolve().parents[1]
START = 1_800_000_000.0
TAGS = ('rack1', 'rack2', 'rack3', 'gpu', 'dc1', 'dc2', 'fast')
DRIVERS = ('ipmi', 'redfish')
# How long a computation under capacity is good for: a tag change
# within it is answered from the previous computation.
INTERVAL = 1000.0


# -- The deployments: JSON, built alike for both trees. --


def _tags(rnd: random.Random, most: int) -> list[str]:
    return sorted(rnd.sample(TAGS, rnd.randint(0, most)))


def _weighted(rnd: random.Random) -> str:
    return ','.join(
        '%s:%d' % (t, rnd.randint(1, 3)) if rnd.random() < 0.5 else t
        for t in _tags(rnd, 2)
    )


def _conductor(
    rnd: random.Random, name: str, groups: list[str], limited: bool
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        'name': name,
        'soft': _weighted(rnd),
        'soft_anti': _weighted(rnd) if rnd.random() < 0.3 else '',
        'group': rnd.choice(groups),
        'hardware_types': (
            list(DRIVERS) if rnd.random() < 0.7 else [rnd.choice(DRIVERS)]
        ),
        'max_nodes': rnd.randint(3, 12) if limited else 0,
    }
    if rnd.random() < 0.25:
        spec['hard'] = ','.join(_tags(rnd, 1))
    if rnd.random() < 0.25:
        spec['hard_anti'] = ','.join(
            t for t in _tags(rnd, 1) if t not in spec.get('hard', '')
        )
    return spec


def deployment(seed: int) -> dict[str, Any]:
    """One random deployment, with its moments and switches, as JSON.

    Seeds 0 to 23 give the deployments of the differential test this
    tool replaces; what it adds (creation times, switches) is drawn from
    a second generator so that those stay as they were.
    """
    rnd = random.Random(seed)
    groups = [''] if rnd.random() < 0.6 else ['', 'east']
    limited = rnd.random() < 0.5
    conductors = []
    for index in range(rnd.randint(2, 6)):
        name = 'c%d' % index
        spec = _conductor(rnd, name, groups, limited)
        changes = []
        for _ in range(rnd.choice((0, 0, 1, 1, 2))):
            # Joined, or changed from another profile, during the
            # minute around START.
            before = (
                None
                if not changes and rnd.random() < 0.3
                else _conductor(rnd, name, groups, limited)
            )
            changes.append(
                {
                    'before': before,
                    'at': START + rnd.uniform(-40, 20),
                    'period': rnd.choice((30.0, 60.0, 90.0)),
                }
            )
        changes.sort(key=lambda c: c['at'])
        spec['changes'] = changes
        conductors.append(spec)
    nodes = [
        {
            'uuid': str(uuidlib.UUID(int=rnd.getrandbits(128), version=4)),
            'tags': _tags(rnd, 3),
            'driver': rnd.choice(DRIVERS),
            'group': rnd.choice(groups),
        }
        for _ in range(rnd.randint(10, 45))
    ]
    moments = [None, START - 60, START + 5, START + 30, START + 200]
    more = random.Random('more %d' % seed)
    for node in nodes:
        if more.random() < 0.3:
            node['created_at'] = int(START + more.uniform(-60, 60))
    switches = []
    at = START - 50
    for _ in range(more.choice((0, 1, 2, 3))):
        at += more.uniform(0, 40)
        switches.append(
            {
                'to': more.choice(('stock', 'affinity')),
                'at': at,
                'period': more.choice((0.0, 30.0, 120.0)),
            }
        )
    return {
        'conductors': conductors,
        'nodes': nodes,
        'moments': moments,
        'switches': switches,
    }


# -- The questions, asked in the tree on sys.path. --


class FakeTags:
    """A node tag cache as the rings and capacity states read it."""

    def __init__(self, facts_type: Any, nodes: list[Any]) -> None:
        self._facts = facts_type
        self.held = {
            n.uuid: facts_type(
                n.driver, n.conductor_group, n.tags, n.created_at
            )
            for n in nodes
        }
        self.version = 1

    def retag(self, uuid: str, tags: frozenset[str]) -> None:
        old = self.held[uuid]
        self.held[uuid] = self._facts(
            old.driver, old.conductor_group, tags, old.created_at
        )
        self.version += 1

    def nodes(self) -> list[tuple[str, Any]]:
        return list(self.held.items())

    def facts(self, uuid: str) -> Any:
        return self.held.get(uuid)

    def lookup(self, uuid: str) -> frozenset[str] | None:
        found = self.held.get(uuid)
        return None if found is None else found.tags

    def created_at(self, uuid: str) -> float | None:
        found = self.held.get(uuid)
        return None if found is None else found.created_at


class Sink:
    """Records what a metrics reporter sends."""

    def __init__(self) -> None:
        self.sent: list[list[Any]] = []

    def send_gauge(self, name: str, value: float) -> None:
        self.sent.append(['gauge', name, value])

    def send_counter(self, name: str, value: float) -> None:
        self.sent.append(['counter', name, value])

    def send_timer(self, name: str, value: float) -> None:
        self.sent.append(['timer', name, value])


class Quiet:
    def debug(self, *args: Any) -> None:
        pass

    info = warning = error = log = debug


def _orphan(name: str, evaluation: Any) -> str:
    return '%s: %s' % (
        name,
        '; '.join(
            '%s %s' % (v.conductor, v.excluded) for v in evaluation.verdicts
        ),
    )


class Questions:
    """Every consumer, through the interfaces of the tree imported."""

    def __init__(self) -> None:
        from ironic_affinity import adoption
        from ironic_affinity import placement
        from ironic_affinity import profile
        from ironic_affinity import report
        from ironic_affinity.integration import placement_metrics
        from ironic_affinity.integration.data import live
        from ironic_affinity.integration.ring import capacity_state
        from ironic_affinity.integration.ring import rings

        try:
            from ironic_affinity.integration.node_tags import node_facts
        except ImportError:  # before node tags had a package (issue 42)
            from ironic_affinity.integration.data import node_facts

        self.adoption = adoption
        self.placement = placement
        self.profile = profile
        self.report = report
        self.placement_metrics = placement_metrics
        self.live = live
        self.node_facts = node_facts
        self.capacity_state = capacity_state
        self.rings_module = rings

    def conductor(self, spec: dict[str, Any]) -> Any:
        """A ConductorProfile from its JSON spec, with its changes."""
        import dataclasses

        found = self.profile.ConductorProfile.build(
            spec['name'],
            hard_affinity_tags=spec.get('hard'),
            hard_anti_affinity_tags=spec.get('hard_anti'),
            soft_affinity_tags=spec.get('soft'),
            soft_anti_affinity_tags=spec.get('soft_anti'),
            hardware_types=spec.get('hardware_types'),
            conductor_group=spec.get('group'),
            max_nodes=spec.get('max_nodes', 0),
        )
        changes = tuple(
            self.profile.ProfileChange(
                None if c['before'] is None else self.conductor(c['before']),
                c['at'],
                c['period'],
            )
            for c in spec.get('changes', ())
        )
        return dataclasses.replace(found, changes=changes)

    def node(self, spec: dict[str, Any]) -> Any:
        return self.profile.NodeRequest(
            name=spec['uuid'],
            tags=frozenset(spec['tags']),
            uuid=spec['uuid'],
            driver=spec['driver'],
            conductor_group=spec['group'],
            created_at=spec.get('created_at'),
        )

    def rings(self, conductors: list[Any], nodes: list[Any], now: float):
        """Each node's ring answers: its conductor, two replicas, and its
        conductor ignored; then, for nodes whose tags changed since the
        computation, the same again."""
        placer = self.placement.Placement(conductors)
        tags = FakeTags(self.node_facts.NodeFacts, nodes)
        states = self.capacity_state.CapacityStates(
            tags,
            lambda: INTERVAL,
            Quiet(),
            clock=lambda: 0.0,
            pause=lambda: None,
            wall_clock=lambda: now,
        )
        under = states.lookup(placer, True)

        def ask(n: Any) -> list[Any]:
            ring = self.rings_module.AffinityRing(
                placer,
                n.driver,
                n.conductor_group,
                [c.name for c in conductors],
                tags.lookup,
                _orphan,
                RuntimeError,
                under,
                clock=lambda: now,
            )
            found = []
            for kwargs in ({}, {'replicas': 2}):
                got = ring.get_nodes(n.uuid.encode(), **kwargs)
                found.append(sorted(got) or getattr(got, 'reason', None))
            first = ring.get_nodes(n.uuid)
            ignored = ring.get_nodes(n.uuid, ignore_nodes=sorted(first))
            found.append(sorted(ignored) or getattr(ignored, 'reason', None))
            return found

        answers = {n.uuid: ask(n) for n in nodes}
        # A tag change within the interval: answered from the
        # computation of before, for the changed nodes as newcomers.
        changed = nodes[::7]
        flip = frozenset({'rack1', 'gpu'})
        for n in changed:
            tags.retag(n.uuid, n.tags ^ flip)
        for n in changed:
            retagged = self.profile.NodeRequest(
                name=n.name,
                tags=n.tags ^ flip,
                uuid=n.uuid,
                driver=n.driver,
                conductor_group=n.conductor_group,
                created_at=n.created_at,
            )
            answers['retagged ' + n.uuid] = ask(retagged)
        return answers

    def metrics(self, conductors: list[Any], nodes: list[Any], now: float):
        sink = Sink()
        reporter = self.placement_metrics.PlacementReporter(
            sink, None, None, None, lambda: 60.0, wall_clock=lambda: now
        )
        reporter._report_placement(
            self.live.Deployment(
                tuple(conductors),
                tuple(nodes),
                frozenset(),
                {},
                self.adoption.agree({}, ()),
            )
        )
        return sink.sent

    def switch(self, switches: list[Any], nodes: list[Any], now: float):
        """Each node's side and moves to come during the switches."""
        found = self.adoption.Adoption(
            self.adoption.Switch(s['to'], s['at'], s['period'])
            for s in switches
        )
        return {
            n.uuid: [
                found.side_of(n, now),
                [(m.at, m.source, m.target) for m in found.pending_of(n, now)],
            ]
            for n in nodes
        }

    def answer(self, case: dict[str, Any]) -> dict[str, Any]:
        """Every consumer's answers for one case, as JSON."""
        conductors = [self.conductor(c) for c in case['conductors']]
        nodes = [self.node(n) for n in case['nodes']]
        first = conductors[0].name
        found: dict[str, Any] = {}
        for now in case['moments']:
            for down in ((), (first,)):
                label = '%s down=%s' % (now, ','.join(down))
                found['plan ' + label] = self.report.plan(
                    conductors, nodes, set(down), now
                )
                for n in nodes[:: max(1, len(nodes) // 6)]:
                    found['explain %s %s' % (n.uuid, label)] = (
                        self.report.explain(
                            conductors, n, set(down), nodes, now=now
                        )
                    )
        found['check'] = self.report.check(conductors, nodes)
        for now in case['moments']:
            if now is None:
                continue
            found['ring %s' % now] = self.rings(conductors, nodes, now)
            found['metrics %s' % now] = self.metrics(conductors, nodes, now)
            found['switch %s' % now] = self.switch(
                case['switches'], nodes, now
            )
        # Through JSON, as both sides are compared: tuples become lists.
        return json.loads(json.dumps(found, sort_keys=True, default=list))


def _answer() -> int:
    """The child's part: cases on stdin, which tree answered and its
    answers on stdout."""
    import ironic_affinity

    questions = Questions()
    json.dump(
        {
            'package': ironic_affinity.__file__,
            'answers': [questions.answer(c) for c in json.load(sys.stdin)],
        },
        sys.stdout,
    )
    return 0


# -- Both trees, and the differences. --


def _unpack(rev: str, into: str) -> str:
    """REV's package under ``into``."""
    archive = subprocess.run(
        ['git', 'archive', rev, 'ironic_affinity'],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout
    path = pathlib.Path(into, 'archive.tar')
    path.write_bytes(archive)
    with tarfile.open(path) as tar:
        tar.extractall(into, filter='data')
    return into


def answers(tree: str, cases: list[Any]) -> list[dict[str, Any]]:
    """The answers of the package under ``tree``, asked in a process of
    its own so that nothing of the other tree is imported."""
    ran = subprocess.run(
        [sys.executable, __file__, '--answer'],
        input=json.dumps(cases),
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTHONPATH=tree),
        cwd=tree,
    )
    if ran.returncode:
        raise RuntimeError(
            'the package under %s failed to answer:\n%s'
            % (tree, ran.stderr[-3000:])
        )
    found = json.loads(ran.stdout)
    if not found['package'].startswith(tree):
        raise RuntimeError(
            'asked the package under %s, %s answered'
            % (tree, found['package'])
        )
    return found['answers']


def differences(
    seeds: list[int], before: list[Any], now: list[Any]
) -> tuple[list[str], int]:
    """Each answer that differs, as a line, and how many were compared."""
    found = []
    compared = 0
    for seed, old, new in zip(seeds, before, now, strict=True):
        for question in sorted(set(old) | set(new)):
            compared += 1
            if old.get(question) != new.get(question):
                found.append(
                    'seed %d, %s:\n  before: %.300s\n  now:    %.300s'
                    % (
                        seed,
                        question,
                        json.dumps(old.get(question)),
                        json.dumps(new.get(question)),
                    )
                )
    return found, compared


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description='Compare every placement answer of REV and this tree.'
    )
    parser.add_argument('rev', nargs='?', help='a commit, e.g. HEAD~3')
    parser.add_argument('--seeds', type=int, default=24)
    parser.add_argument('--answer', action='store_true', help='internal')
    args = parser.parse_args(argv)
    if args.answer:
        return _answer()
    if args.rev is None:
        parser.error('REV is required')
    seeds = list(range(args.seeds))
    cases = [deployment(seed) for seed in seeds]
    with tempfile.TemporaryDirectory() as into:
        before = answers(_unpack(args.rev, into), cases)
    now = answers(str(ROOT), cases)
    found, compared = differences(seeds, before, now)
    for line in found:
        print(line)
    print(
        '%d deployments, %d questions compared, %d differences'
        % (len(seeds), compared, len(found))
    )
    return 1 if found else 0


if __name__ == '__main__':
    sys.exit(main())
