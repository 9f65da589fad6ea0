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

"""What the operator commands print, built from engine results.

Pure functions: each builds a JSON-ready dict, which ``--format json``
prints as it is and :mod:`ironic_affinity.cmd.render` turns into the
table people read, so both formats always say the same.
"""

import collections
from collections.abc import Collection
from collections.abc import Iterable
from collections.abc import Mapping
from collections.abc import Sequence
from typing import Any

from ironic_affinity import placement
from ironic_affinity import profile
from ironic_affinity import schedule


def _moves(moves: Iterable[schedule.Move[str | None]]) -> list[dict[str, Any]]:
    return [
        {'from': m.source, 'to': m.target, 'at': round(m.at, 3)} for m in moves
    ]


def _place(
    placer: placement.Placement,
    nodes: Sequence[profile.NodeRequest],
    now: float | None = None,
) -> dict[str, Any]:
    """Placements and loads; with capacity, who spilled and where each
    conductor stands against its ``max_nodes``; during a rollout, where
    nodes are at ``now`` and their moves to come."""
    settled = placer.settle(nodes, now)
    answers = placer.answer_all(nodes, now, settled)
    rows = []
    counts = {c.name: 0 for c in placer.conductors}
    for answer in answers:
        row: dict[str, Any] = {
            'node': answer.node,
            'conductor': answer.conductor,
            'score': answer.score,
            'tied': list(answer.tied),
        }
        if answer.spilled_from is not None:
            row['spilled_from'] = answer.spilled_from
        elif answer.over_capacity:
            row['over_capacity'] = True
        if answer.pending:
            row['pending'] = _moves(answer.pending)
        if answer.conductor is not None:
            counts[answer.conductor] += 1
        rows.append(row)
    result: dict[str, Any] = {'placements': rows, 'loads': counts}
    if settled is not None:
        assignment = settled.assignment
        result.update(
            capacities=dict(assignment.capacities),
            over_capacity=assignment.over_capacity(),
            spilled=len(assignment.spilled),
        )
    rolling = placer.rolling(now)
    if rolling is not None:
        result['rollout'] = {
            'ends_at': round(rolling.ends_at, 3),
            'nodes_to_move': sum(1 for row in rows if row.get('pending')),
        }
    return result


def plan(
    conductors: Sequence[profile.ConductorProfile],
    nodes: Sequence[profile.NodeRequest],
    down: Collection[str] = (),
    now: float | None = None,
) -> dict[str, Any]:
    """Place every node over the conductors that are not down.

    With conductors down, also list the moves against the same scenario
    with every conductor up. With any ``max_nodes`` set, placement is
    under capacity (:mod:`ironic_affinity.capacity`): the result also has
    each conductor's capacity (0 for none), those over it, and for each
    node that did not get its first choice, ``spilled_from``.

    :param now: seconds since the epoch, for conductors whose changes
        roll out (:mod:`ironic_affinity.rollout`): nodes are then where
        they are at ``now``; those still to move have ``pending`` moves
        (from, to, at) and the result has ``rollout``.
    """
    live = placement.Placement(c for c in conductors if c.name not in down)
    result = _place(live, nodes, now)
    result['unplaced'] = [
        p['node'] for p in result['placements'] if p['conductor'] is None
    ]
    if down:
        before = _place(placement.Placement(conductors), nodes, now)
        result['moves'] = [
            {
                'node': old['node'],
                'from': old['conductor'],
                'to': new['conductor'],
            }
            for old, new in zip(
                before['placements'], result['placements'], strict=True
            )
            if old['conductor'] != new['conductor']
        ]
    return result


def explain(
    conductors: Sequence[profile.ConductorProfile],
    node: profile.NodeRequest,
    down: Collection[str] = (),
    nodes: Sequence[profile.NodeRequest] = (),
    settled: placement.Settled | None = None,
    now: float | None = None,
) -> dict[str, Any]:
    """Every conductor's verdict for one node, and the fallback order.

    :param nodes: every node of the deployment or scenario. Under
        capacity a node's place depends on the others: the result then
        also has each conductor's load and capacity and, for a node that
        did not get its first choice, ``spilled_from``.
    :param settled: the node set already settled over ``conductors``
        (less ``down``) under capacity, instead of ``nodes``.
    :param now: seconds since the epoch: while a conductor's change
        rolls out, the node is where it is at ``now``, and the result
        has its ``pending`` moves and when the rollout ends.
    """
    live = placement.Placement(c for c in conductors if c.name not in down)
    if live.limited and settled is None:
        others = [n for n in nodes if n.name != node.name]
        settled = live.settle(others + [node], now)
    answer = live.answer(node, now, settled)
    chosen = answer.conductor
    pending = _moves(answer.pending)
    extra: dict[str, Any] = {}
    rolling = live.rolling(now)
    if rolling is not None:
        extra['rollout_ends_at'] = round(rolling.ends_at, 3)
        if settled is None or settled.timeline is not None:
            extra['pending'] = pending
    loads_now: Mapping[str, int] = {}
    # Conductors the node would rather have had, which were full.
    passed_over: tuple[str, ...] = ()
    if settled is not None:
        loads_now = settled.loads(None if rolling is None else now)
        if answer.spilled_from is not None:
            extra['spilled_from'] = answer.spilled_from
        extra['over_capacity'] = answer.over_capacity
        # Under capacity, the order of the node's preferences, which
        # full conductors may have passed over.
        fallback = live.preferences(node)
        if chosen in fallback and not pending:
            passed_over = fallback[: fallback.index(chosen)]
    else:
        fallback = live.fallback_order(node, now)
    verdicts = {v.conductor: v for v in live.evaluate(node).verdicts}
    rows = []
    for conductor in sorted(c.name for c in conductors):
        verdict = verdicts.get(conductor)
        row: dict[str, Any] = {'conductor': conductor}
        if verdict is None:
            row['verdict'] = 'down'
        elif verdict.excluded is not None:
            row.update(verdict='excluded', reason=verdict.excluded)
        else:
            if conductor == chosen:
                state = 'chosen'
            elif pending and conductor == pending[-1]['to']:
                state = 'next'
            elif conductor in passed_over:
                state = 'full'
            elif conductor in answer.tied:
                state = 'tied'
            else:
                state = 'eligible'
            row.update(
                verdict=state,
                score=verdict.score,
                breakdown=[list(item) for item in verdict.breakdown],
                # After every eligible conductor that is not.
                draining=verdict.draining,
            )
        if settled is not None and verdict is not None:
            row.update(
                load=loads_now.get(conductor, 0),
                max_nodes=settled.assignment.capacities.get(conductor, 0),
            )
        rows.append(row)
    return {
        'node': node.name,
        'hash_key': node.hash_key.decode('utf-8'),
        'tags': sorted(node.tags),
        'conductor': chosen,
        'conductors': rows,
        'fallback': list(fallback),
        **extra,
    }


def check(
    conductors: Sequence[profile.ConductorProfile],
    nodes: Sequence[profile.NodeRequest],
) -> dict[str, Any]:
    """Nodes no conductor may take, nodes only one conductor may,
    conductors over their capacity, nodes without tags, and node tags no
    conductor's list mentions (by how many nodes carry each)."""
    placer = placement.Placement(conductors)
    orphans = []
    single = []
    for node in nodes:
        order = placer.preferences(node)
        if not order:
            verdicts = placer.evaluate(node).verdicts
            orphans.append(
                {
                    'node': node.name,
                    'uuid': node.uuid,
                    'tags': sorted(node.tags),
                    'reasons': {v.conductor: v.excluded for v in verdicts},
                }
            )
        elif len(order) == 1:
            single.append(
                {'node': node.name, 'uuid': node.uuid, 'conductor': order[0]}
            )
    over: dict[str, dict[str, int]] = {}
    settled = placer.settle(nodes, None)
    if settled is not None:
        assignment = settled.assignment
        over = {
            name: {
                'nodes': assignment.loads[name],
                'max_nodes': assignment.capacities[name],
            }
            for name in assignment.over_capacity()
        }
    mentioned = frozenset().union(*(c.mentioned_tags() for c in conductors))
    unused = collections.Counter(
        tag for node in nodes for tag in node.tags - mentioned
    )
    return {
        'conductors': len(conductors),
        'nodes': len(nodes),
        'orphans': orphans,
        'single_conductor': single,
        'over_capacity': over,
        'untagged': [node.name for node in nodes if not node.tags],
        'unused_tags': dict(sorted(unused.items())),
    }
