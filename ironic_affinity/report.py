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

Pure functions: each builds a JSON-ready dict, and a renderer turns that
dict into the table people read, so both formats always say the same.
"""

from collections.abc import Collection
from collections.abc import Iterable
from collections.abc import Mapping
from collections.abc import Sequence
import time
from typing import Any

from ironic_affinity import adoption
from ironic_affinity import placement
from ironic_affinity import profile
from ironic_affinity import rollout
from ironic_affinity import schedule
from ironic_affinity import tags


def moment(at: float) -> str:
    """A time (seconds since the epoch) as people read it: UTC, to the
    second."""
    return time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(at))


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


def _table(
    headers: Sequence[str],
    rows: Sequence[Sequence[Any]],
    formats: Mapping[int, Any] | None = None,
) -> str:
    """:param formats: by column, how to print its values."""
    shown = formats or {}
    cells = [[str(h) for h in headers]] + [
        [
            '-' if c is None else str(shown[i](c) if i in shown else c)
            for i, c in enumerate(row)
        ]
        for row in rows
    ]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    return '\n'.join(
        '  '.join(
            c.ljust(w) for c, w in zip(row, widths, strict=True)
        ).rstrip()
        for row in cells
    )


def _note(row: dict[str, Any]) -> str | None:
    if 'pending' in row:
        last = row['pending'][-1]
        return 'moves to %s at %s' % (last['to'], moment(last['at']))
    if 'spilled_from' in row:
        return 'spilled: %s full' % row['spilled_from']
    if row.get('over_capacity'):
        return 'over capacity: every way out full'
    return None


def render_plan(report: dict[str, Any], down: Collection[str] = ()) -> str:
    """The plan as tables: placements, loads, orphans and moves."""
    placements = report['placements']
    capacities = report.get('capacities')
    headers: tuple[str, ...] = ('NODE', 'CONDUCTOR', 'SCORE', 'TIED AT TOP')
    rows = [
        [p['node'], p['conductor'], p['score'], ', '.join(p['tied']) or None]
        for p in placements
    ]
    rolling = report.get('rollout')
    if capacities is not None or rolling is not None:
        headers += ('NOTE',)
        for row, shown in zip(rows, placements, strict=True):
            row.append(_note(shown))
    load_rows: list[tuple[Any, ...]] = sorted(report['loads'].items())
    load_headers: tuple[str, ...] = ('CONDUCTOR', 'NODES')
    if capacities is not None:
        load_headers += ('MAX NODES', 'OVER')
        load_rows = [
            (
                name,
                count,
                capacities.get(name) or None,
                report['over_capacity'].get(name),
            )
            for name, count in load_rows
        ]
    parts = [
        'Placements',
        _table(headers, rows),
        '',
        'Loads' + (' (down: %s)' % ', '.join(sorted(down)) if down else ''),
        _table(load_headers, load_rows),
        '',
    ]
    if capacities is not None:
        over = report['over_capacity']
        parts.append(
            'Nodes spilled from a full first choice: %d; conductors over '
            'capacity: %s'
            % (
                report['spilled'],
                ', '.join('%s (+%d)' % item for item in sorted(over.items()))
                or 'none',
            )
        )
    if rolling is not None:
        parts.append(
            'Rollout under way until %s: %d node(s) still to move'
            % (moment(rolling['ends_at']), rolling['nodes_to_move'])
        )
    unplaced = report['unplaced']
    parts.append(
        'Nodes without a valid conductor: %s'
        % (', '.join(unplaced) if unplaced else 'none')
    )
    if rolling is not None and rolling['nodes_to_move']:
        parts += ['', 'Pending moves']
        parts.append(
            _table(
                ('NODE', 'FROM', 'TO', 'AT'),
                sorted(
                    (
                        (p['node'], move['from'], move['to'], move['at'])
                        for p in placements
                        for move in p.get('pending', ())
                    ),
                    key=lambda row: (row[3], row[0]),
                ),
                formats={3: moment},
            )
        )
    if 'moves' in report:
        parts += ['', 'Moves (against every conductor up)']
        moves = report['moves']
        parts.append(
            _table(
                ('NODE', 'FROM', 'TO'),
                [(m['node'], m['from'], m['to']) for m in moves],
            )
            if moves
            else 'none'
        )
    return '\n'.join(parts)


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


def _verdict_text(row: dict[str, Any]) -> str:
    if row['verdict'] in ('down', 'excluded'):
        return ': '.join(filter(None, (row['verdict'], row.get('reason'))))
    detail = ', '.join('%s %+d' % (tag, w) for tag, w in row['breakdown'])
    text = '%s, score %d%s' % (
        row['verdict'],
        row['score'],
        ' (%s)' % detail if detail else '',
    )
    if 'load' in row:
        text += ', %d node(s) of %s' % (
            row['load'],
            row['max_nodes'] or 'no limit',
        )
    return text


def _placed_text(report: dict[str, Any]) -> str:
    text = report['conductor'] or 'no valid conductor'
    if report.get('pending'):
        text += ' (%s; rollout under way until %s)' % (
            ', then '.join(
                'moves to %s at %s' % (m['to'], moment(m['at']))
                for m in report['pending']
            ),
            moment(report['rollout_ends_at']),
        )
    elif 'rollout_ends_at' in report:
        text += ' (where it stays: rollout under way until %s)' % moment(
            report['rollout_ends_at']
        )
    if 'spilled_from' in report:
        text += (
            ' (spilled: its first choice %s is full)'
            % (report['spilled_from'])
        )
    elif report.get('over_capacity'):
        text += (
            ' (over capacity: every conductor it may use is full, so its '
            'first choice takes it anyway)'
        )
    return text


def render_explain(report: dict[str, Any]) -> str:
    """The verdicts as a table people read."""
    return '\n'.join(
        [
            'Node %s (hash key %r), tags: %s'
            % (
                report['node'],
                report['hash_key'],
                ', '.join(report['tags']) or '(none)',
            ),
            _table(
                ('CONDUCTOR', 'VERDICT'),
                [
                    (r['conductor'], _verdict_text(r))
                    for r in report['conductors']
                ],
            ),
            'Placed on: %s' % _placed_text(report),
            'Fallback order: %s' % (' > '.join(report['fallback']) or 'none'),
        ]
    )


def switching(
    agreement: adoption.Agreement,
    now: float,
    nodes: Sequence[profile.NodeRequest] = (),
    takeovers_pending: int | None = None,
) -> dict[str, Any]:
    """Where the deployment stands between Ironic's ring ("stock") and
    affinity placement, as one JSON-ready dict.

    ``state`` is ``stock`` or ``affinity`` when every node is there, else
    ``switching`` (to ``to``, from ``since`` until ``ends_at``); ``due``
    says a switch to ``to`` is about to be recorded by ``recorder``.
    With ``nodes``, ``nodes_to_move`` counts those still to change side.
    With ``takeovers_pending`` (see :mod:`ironic_affinity.takeovers`),
    the key of that name counts the nodes placed on a conductor that has
    not taken them over yet, on either side.
    """
    found = agreement.adoption
    active = found.active(now)
    newest = found.switches[-1] if found.switches else None
    report: dict[str, Any] = {
        'state': 'switching' if active else found.settled(),
        'to': agreement.target,
        'since': (
            round(newest.at, 3)
            if newest is not None and newest.at > adoption.ORIGIN_AT
            else None
        ),
        'ends_at': round(found.ends_at, 3) if active else None,
        'due': agreement.due,
        'recorder': agreement.recorder if agreement.due else None,
        'stock_voters': sorted(agreement.stock_voters),
        'outsiders': sorted(agreement.outsiders),
    }
    if nodes:
        # Keyed as the ring keys them: by uuid.
        report['nodes_to_move'] = len(
            [node for node in nodes if active and found.pending_of(node, now)]
        )
    if takeovers_pending is not None:
        report['takeovers_pending'] = takeovers_pending
    return report


def render_switching(report: dict[str, Any]) -> str:
    """One line, or two, on the switch: empty while every node is placed
    by affinity, nothing is due and no takeover is pending, so that the
    output of a deployment that never switched, once settled, is what it
    was."""
    takeovers = report.get('takeovers_pending') or 0
    if report['state'] == 'affinity' and not report['due'] and not takeovers:
        return ''
    if report['state'] == 'switching':
        line = 'Placement: switching to %s since %s, until %s' % (
            _side_name(report['to']),
            moment(report['since']),
            moment(report['ends_at']),
        )
        if 'nodes_to_move' in report:
            line += '; %d node(s) still to move' % report['nodes_to_move']
    else:
        line = 'Placement: %s' % _side_name(report['state'])
    if report['due']:
        line += '; a switch to %s is due, recorded by %s' % (
            _side_name(report['to']),
            report['recorder'],
        )
    if takeovers:
        line += '; %d takeover(s) pending' % takeovers
    lines = [line]
    if report['stock_voters']:
        lines.append(
            "  voting for Ironic's ring (hash_ring_manager = stock): %s"
            % ', '.join(report['stock_voters'])
        )
    if report['outsiders'] and report['state'] != 'affinity':
        lines.append(
            '  active in Ironic but not in the affinity group (without '
            "the plugin, they place by Ironic's ring): %s"
            % ', '.join(report['outsiders'])
        )
    return '\n'.join(lines)


def _side_name(side: str) -> str:
    return "Ironic's ring (stock)" if side == adoption.STOCK else side


def members(
    found: Mapping[str, profile.ConductorProfile],
    url: str,
    group: str,
    *,
    rejected: Mapping[str, str],
    held: Collection[str] = (),
    error: str | None = None,
    age: float | None = None,
    now: float | None = None,
) -> dict[str, Any]:
    """The members of the group as one JSON-ready dict.

    :param found: the members with their published profiles.
    :param rejected: members left out, with why.
    :param held: members kept from before a backend outage.
    :param error: why the group could not be read, if it could not.
    :param age: seconds since the group was last read.
    :param now: seconds since the epoch: a member's changes still
        rolling out at ``now`` are listed, with when its rollout ends.
    """
    return {
        'backend': url,
        'group': group,
        'readable': error is None,
        'error': error,
        'age_seconds': None if age is None else round(age, 3),
        'members': [
            {
                'name': name,
                'conductor_group': c.conductor_group,
                'hardware_types': (
                    None
                    if c.hardware_types is None
                    else sorted(c.hardware_types)
                ),
                profile.HARD_AFFINITY: sorted(c.hard_affinity_tags),
                profile.HARD_ANTI_AFFINITY: sorted(c.hard_anti_affinity_tags),
                profile.SOFT_AFFINITY: tags.format_weighted(
                    dict(c.soft_affinity_tags)
                ),
                profile.SOFT_ANTI_AFFINITY: tags.format_weighted(
                    dict(c.soft_anti_affinity_tags)
                ),
                'max_nodes': c.max_nodes,
                'held_through_outage': name in held,
                'vote': (
                    adoption.AFFINITY
                    if c.switching is None
                    else c.switching.vote.side
                ),
                **_rollout(c, now),
            }
            for name, c in sorted(found.items())
        ],
        'rejected': dict(sorted(rejected.items())),
        # From the group alone: a conductor Ironic lists that is not a
        # member shows in ``check``, which reads Ironic's database too.
        'placement': switching(
            adoption.agree({n: c.switching for n, c in found.items()}, ()),
            time.time() if now is None else now,
        ),
    }


def _rollout(
    conductor: profile.ConductorProfile, now: float | None
) -> dict[str, Any]:
    """A member's changes rolling out at ``now``, and when they end."""
    changes = (
        rollout.unfinished(conductor.changes, now)
        if now is not None
        else conductor.changes
    )
    return {
        'changes': [
            {
                'kind': 'joined' if c.before is None else 'changed',
                'at': round(c.at, 3),
                'period': c.period,
                'ends_at': round(c.ends_at(), 3),
            }
            for c in changes
        ],
        'rollout_ends_at': (
            round(max(c.ends_at() for c in changes), 3) if changes else None
        ),
    }


def render_members(report: dict[str, Any]) -> str:
    """The members as a table people read."""
    age = report['age_seconds']
    parts = [
        'Group %s on %s, read %s'
        % (
            report['group'],
            report['backend'],
            'never' if age is None else '%.1f s ago' % age,
        )
    ]
    if report['error']:
        parts.append('Backend unreadable: %s' % report['error'])
    headers = [
        'CONDUCTOR',
        'GROUP',
        'HARDWARE TYPES',
        'HARD',
        'HARD ANTI',
        'SOFT',
        'SOFT ANTI',
    ]
    rows = [
        [
            m['name'] + (' (held)' if m['held_through_outage'] else ''),
            m['conductor_group'] or None,
            ', '.join(m['hardware_types'] or ['(all)']),
            ', '.join(m[profile.HARD_AFFINITY]) or None,
            ', '.join(m[profile.HARD_ANTI_AFFINITY]) or None,
            m[profile.SOFT_AFFINITY] or None,
            m[profile.SOFT_ANTI_AFFINITY] or None,
        ]
        for m in report['members']
    ]
    # Shown once any member uses capacity, so that the table of a
    # deployment without it is what it was.
    if any(m['max_nodes'] for m in report['members']):
        headers.append('MAX NODES')
        for row, member in zip(rows, report['members'], strict=True):
            row.append(member['max_nodes'] or None)
    # The same for a rollout: shown only while one is under way.
    if any(m['rollout_ends_at'] for m in report['members']):
        headers.append('ROLLOUT UNTIL')
        for row, member in zip(rows, report['members'], strict=True):
            ends = member['rollout_ends_at']
            row.append(
                None
                if ends is None
                else '%s (%s)'
                % (
                    moment(ends),
                    ', '.join(c['kind'] for c in member['changes']),
                )
            )
    # And the votes, while any conductor votes for Ironic's ring or the
    # deployment has switched.
    placed = report.get('placement')
    if placed is not None and (
        placed['state'] != 'affinity'
        or placed['due']
        or any(m['vote'] != adoption.AFFINITY for m in report['members'])
    ):
        headers.append('VOTE')
        for row, member in zip(rows, report['members'], strict=True):
            row.append(member['vote'])
    parts.append(_table(headers, rows))
    for name, reason in report['rejected'].items():
        parts.append('Left out of placement: %s: %s' % (name, reason))
    if placed is not None and render_switching(placed):
        parts.append(render_switching(placed))
    return '\n'.join(parts)


def check(
    conductors: Sequence[profile.ConductorProfile],
    nodes: Sequence[profile.NodeRequest],
) -> dict[str, Any]:
    """Nodes no conductor may take, nodes only one conductor may, and
    conductors over their capacity."""
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
    return {
        'conductors': len(conductors),
        'nodes': len(nodes),
        'orphans': orphans,
        'single_conductor': single,
        'over_capacity': over,
    }


def render_check(report: dict[str, Any]) -> str:
    """The check as text people read."""
    parts = [
        '%d node(s) over %d live conductor(s)'
        % (report['nodes'], report['conductors'])
    ]
    placed = report.get('placement')
    if placed is not None and render_switching(placed):
        parts.append(render_switching(placed))
    if report.get('not_members') and (
        placed is None or placed['state'] == 'affinity'
    ):
        parts.append(
            'Active in Ironic but not in the affinity group (given no '
            'node): %s' % ', '.join(report['not_members'])
        )
    parts.append('Nodes with no valid conductor: %d' % len(report['orphans']))
    for orphan in report['orphans']:
        reasons = '; '.join(
            '%s: %s' % item for item in sorted(orphan['reasons'].items())
        )
        parts.append(
            '  %s (tags: %s): %s'
            % (
                orphan['node'],
                ', '.join(orphan['tags']) or '(none)',
                reasons or 'no live conductor',
            )
        )
    parts.append(
        'Nodes with only one valid conductor: %d'
        % len(report['single_conductor'])
    )
    for spof in report['single_conductor']:
        parts.append('  %s: %s' % (spof['node'], spof['conductor']))
    over = report.get('over_capacity', {})
    if over:
        parts.append('Conductors over max_nodes: %d' % len(over))
    for name, figures in sorted(over.items()):
        parts.append(
            '  %s: %d node(s) for max_nodes %d (every conductor their '
            'nodes may use is full)'
            % (name, figures['nodes'], figures['max_nodes'])
        )
    return '\n'.join(parts)
