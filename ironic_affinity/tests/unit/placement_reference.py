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

"""What every consumer answered before the placement pipeline (issue 28).

The differential test (test_placement_differential) runs this file as a
script, with ``ironic_affinity`` imported from the tree of
:data:`REFERENCE`, the commit before the pipeline, where each consumer
composed the engine, the rollout and capacity by itself. It reads cases
(JSON) on stdin and writes each consumer's answers (JSON) on stdout. The
test computes the same answers with the code of now and compares them.

What is shared with the test (building a case, the fake tag cache, the
metric sink, the order of questions) is here, and imports nothing that
the pipeline changed; only :class:`ReferenceAnswers` uses the old API.
"""

import json
import sys
from typing import Any

#: The commit before the pipeline.
REFERENCE = '1f77083f93372c5e842b2341bdd9aada766d26af'

# The questions' fixed parts: a ring's second call, and how long a
# computation under capacity is good for (a tag change within it is
# answered from the previous one).
INTERVAL = 1000.0


def conductor(spec: dict[str, Any]) -> Any:
    """A ConductorProfile from its JSON spec, with its changes."""
    import dataclasses

    from ironic_affinity import profile

    found = profile.ConductorProfile.build(
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
        profile.ProfileChange(
            None if c['before'] is None else conductor(c['before']),
            c['at'],
            c['period'],
        )
        for c in spec.get('changes', ())
    )
    return dataclasses.replace(found, changes=changes)


def node(spec: dict[str, Any]) -> Any:
    from ironic_affinity import profile

    return profile.NodeRequest(
        name=spec['uuid'],
        tags=frozenset(spec['tags']),
        uuid=spec['uuid'],
        driver=spec['driver'],
        conductor_group=spec['group'],
    )


class FakeTags:
    """A node tag cache as the rings and capacity states read it."""

    def __init__(self, facts_type: Any, nodes: list[Any]) -> None:
        self._facts = facts_type
        self.held = {
            n.uuid: facts_type(n.driver, n.conductor_group, n.tags)
            for n in nodes
        }
        self.version = 1

    def retag(self, uuid: str, tags: frozenset[str]) -> None:
        old = self.held[uuid]
        self.held[uuid] = self._facts(old.driver, old.conductor_group, tags)
        self.version += 1

    def nodes(self) -> list[tuple[str, Any]]:
        return list(self.held.items())

    def facts(self, uuid: str) -> Any:
        return self.held.get(uuid)

    def lookup(self, uuid: str) -> frozenset[str] | None:
        found = self.held.get(uuid)
        return None if found is None else found.tags

    def created_at(self, uuid: str) -> float | None:
        return getattr(self.held.get(uuid), 'created_at', None)


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

    info = warning = debug


def _orphan(name: str, evaluation: Any) -> str:
    return '%s: %s' % (
        name,
        '; '.join(
            '%s %s' % (v.conductor, v.excluded) for v in evaluation.verdicts
        ),
    )


def ring_answers(
    make_ring: Any, nodes: list[Any], tags: FakeTags
) -> dict[str, Any]:
    """Each node's ring answers: its conductor, two replicas, and its
    conductor ignored; then, for nodes whose tags changed since the
    computation, the same again."""

    def ask(n: Any) -> list[Any]:
        ring = make_ring(n.driver, n.conductor_group)
        found = []
        for kwargs in ({}, {'replicas': 2}):
            got = ring.get_nodes(n.uuid.encode(), **kwargs)
            found.append(sorted(got) or getattr(got, 'reason', None))
        first = ring.get_nodes(n.uuid)
        ignored = ring.get_nodes(n.uuid, ignore_nodes=sorted(first))
        found.append(sorted(ignored) or getattr(ignored, 'reason', None))
        return found

    answers = {n.uuid: ask(n) for n in nodes}
    # A tag change within the interval: answered from the computation
    # of before, for the changed nodes as newcomers.
    changed = nodes[::7]
    for n in changed:
        tags.retag(n.uuid, n.tags ^ frozenset({'rack1', 'gpu'}))
    for n in changed:
        retagged = type(n)(
            name=n.name,
            tags=n.tags ^ frozenset({'rack1', 'gpu'}),
            uuid=n.uuid,
            driver=n.driver,
            conductor_group=n.conductor_group,
        )
        answers['retagged ' + n.uuid] = ask(retagged)
    return answers


def questions(case: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    """(label, down, now) of the plans and explanations asked."""
    first = case['conductors'][0]['name']
    found = []
    for now in case['moments']:
        for down in ((), (first,)):
            found.append(('%s down=%s' % (now, ','.join(down)), down, now))
    return found


class ReferenceAnswers:
    """The consumers as the reference commit composed them."""

    def __init__(self) -> None:
        from ironic_affinity import engine
        from ironic_affinity import report
        from ironic_affinity import rollout
        from ironic_affinity.integration import capacity_state
        from ironic_affinity.integration import live
        from ironic_affinity.integration import node_tags
        from ironic_affinity.integration import placement_metrics
        from ironic_affinity.integration import ring

        self.engine = engine
        self.report = report
        self.rollout = rollout
        self.capacity_state = capacity_state
        self.live = live
        self.node_tags = node_tags
        self.placement_metrics = placement_metrics
        self.ring = ring

    def rings(self, conductors: list[Any], nodes: list[Any], now: float):
        placer = self.engine.PlacementEngine(conductors)
        paced = (
            self.rollout.PacedPlacer(placer)
            if any(c.changes for c in conductors)
            else None
        )
        tags = FakeTags(self.node_tags.NodeFacts, nodes)
        states = self.capacity_state.CapacityStates(
            tags,
            lambda: INTERVAL,
            Quiet(),
            clock=lambda: 0.0,
            pause=lambda: None,
            wall_clock=lambda: now,
        )
        under = states.lookup(placer, True, paced)

        def make_ring(driver: str, group: str) -> Any:
            return self.ring.AffinityRing(
                placer,
                driver,
                group,
                [c.name for c in conductors],
                tags.lookup,
                _orphan,
                RuntimeError,
                under,
                None if under is not None else paced,
                clock=lambda: now,
            )

        return ring_answers(make_ring, nodes, tags)

    def metrics(self, conductors: list[Any], nodes: list[Any], now: float):
        sink = Sink()
        reporter = self.placement_metrics.PlacementReporter(
            sink,
            None,
            None,
            None,
            lambda: 60.0,
            wall_clock=lambda: now,
        )
        deployment = self.live.Deployment(
            tuple(conductors), tuple(nodes), frozenset(), {}
        )
        reporter._report_placement(deployment)
        return sink.sent


def answer(api: Any, case: dict[str, Any]) -> dict[str, Any]:
    """Every consumer's answers for one case, as JSON."""
    conductors = [conductor(c) for c in case['conductors']]
    nodes = [node(n) for n in case['nodes']]
    found: dict[str, Any] = {}
    for label, down, now in questions(case):
        found['plan ' + label] = api.report.plan(
            conductors, nodes, set(down), now
        )
        for n in nodes[:: max(1, len(nodes) // 6)]:
            found['explain %s %s' % (n.uuid, label)] = api.report.explain(
                conductors, n, set(down), nodes, now=now
            )
    found['check'] = api.report.check(conductors, nodes)
    for now in case['moments']:
        if now is None:
            continue
        found['ring %s' % now] = api.rings(conductors, nodes, now)
        found['metrics %s' % now] = api.metrics(conductors, nodes, now)
    # Through JSON, as both sides are compared: tuples become lists.
    return json.loads(json.dumps(found, sort_keys=True, default=list))


def main() -> int:
    import ironic_affinity

    cases = json.load(sys.stdin)
    api = ReferenceAnswers()
    json.dump(
        {
            # Which tree answered: the test checks it is the reference's.
            'package': ironic_affinity.__file__,
            'answers': [answer(api, case) for case in cases],
        },
        sys.stdout,
    )
    return 0


if __name__ == '__main__':
    sys.exit(main())
