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
from typing import Any

from ironic_affinity import engine
from ironic_affinity import profile
from ironic_affinity import tags


def loads(
    conductors: Iterable[profile.ConductorProfile],
    placements: Iterable[engine.Placement],
) -> dict[str, int]:
    """Nodes placed on each conductor, zero for those given none."""
    counts = {c.name: 0 for c in conductors}
    for placement in placements:
        if placement.conductor is not None:
            counts[placement.conductor] += 1
    return counts


def plan(
    conductors: Sequence[profile.ConductorProfile],
    nodes: Sequence[profile.NodeRequest],
    down: Collection[str] = (),
) -> dict[str, Any]:
    """Place every node over the conductors that are not down.

    With conductors down, also list the moves against the same scenario
    with every conductor up.
    """
    live = engine.PlacementEngine(c for c in conductors if c.name not in down)
    placements = live.place_all(nodes)
    result: dict[str, Any] = {
        'placements': [
            {
                'node': p.node,
                'conductor': p.conductor,
                'score': p.score,
                'tied': list(p.tied),
            }
            for p in placements
        ],
        'loads': loads(live.conductors, placements),
        'unplaced': [p.node for p in placements if p.conductor is None],
    }
    if down:
        before = engine.PlacementEngine(conductors).place_all(nodes)
        result['moves'] = [
            {'node': old.node, 'from': old.conductor, 'to': new.conductor}
            for old, new in zip(before, placements, strict=True)
            if old.conductor != new.conductor
        ]
    return result


def _table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    cells = [[str(h) for h in headers]] + [
        ['-' if c is None else str(c) for c in row] for row in rows
    ]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    return '\n'.join(
        '  '.join(
            c.ljust(w) for c, w in zip(row, widths, strict=True)
        ).rstrip()
        for row in cells
    )


def render_plan(report: dict[str, Any], down: Collection[str] = ()) -> str:
    """The plan as tables: placements, loads, orphans and moves."""
    placements = report['placements']
    parts = [
        'Placements',
        _table(
            ('NODE', 'CONDUCTOR', 'SCORE', 'TIED AT TOP'),
            [
                (
                    p['node'],
                    p['conductor'],
                    p['score'],
                    ', '.join(p['tied']) or None,
                )
                for p in placements
            ],
        ),
        '',
        'Loads' + (' (down: %s)' % ', '.join(sorted(down)) if down else ''),
        _table(('CONDUCTOR', 'NODES'), sorted(report['loads'].items())),
        '',
    ]
    unplaced = report['unplaced']
    parts.append(
        'Nodes without a valid conductor: %s'
        % (', '.join(unplaced) if unplaced else 'none')
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
) -> dict[str, Any]:
    """Every conductor's verdict for one node, and the fallback order."""
    live = engine.PlacementEngine(c for c in conductors if c.name not in down)
    placement = live.place(node)
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
            if conductor == placement.conductor:
                state = 'chosen'
            elif conductor in placement.tied:
                state = 'tied'
            else:
                state = 'eligible'
            row.update(
                verdict=state,
                score=verdict.score,
                breakdown=[list(item) for item in verdict.breakdown],
            )
        rows.append(row)
    return {
        'node': node.name,
        'hash_key': node.hash_key.decode('utf-8'),
        'tags': sorted(node.tags),
        'conductor': placement.conductor,
        'conductors': rows,
        'fallback': list(live.fallback_order(node)),
    }


def _verdict_text(row: dict[str, Any]) -> str:
    if row['verdict'] in ('down', 'excluded'):
        return ': '.join(filter(None, (row['verdict'], row.get('reason'))))
    detail = ', '.join('%s %+d' % (tag, w) for tag, w in row['breakdown'])
    return '%s, score %d%s' % (
        row['verdict'],
        row['score'],
        ' (%s)' % detail if detail else '',
    )


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
            'Placed on: %s' % (report['conductor'] or 'no valid conductor'),
            'Fallback order: %s' % (' > '.join(report['fallback']) or 'none'),
        ]
    )


def members(
    found: Mapping[str, profile.ConductorProfile],
    url: str,
    group: str,
    *,
    rejected: Mapping[str, str],
    held: Collection[str] = (),
    error: str | None = None,
    age: float | None = None,
) -> dict[str, Any]:
    """The members of the group as one JSON-ready dict.

    :param found: the members with their published profiles.
    :param rejected: members left out, with why.
    :param held: members kept from before a backend outage.
    :param error: why the group could not be read, if it could not.
    :param age: seconds since the group was last read.
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
                'held_through_outage': name in held,
            }
            for name, c in sorted(found.items())
        ],
        'rejected': dict(sorted(rejected.items())),
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
    parts.append(
        _table(
            (
                'CONDUCTOR',
                'GROUP',
                'HARDWARE TYPES',
                'HARD',
                'HARD ANTI',
                'SOFT',
                'SOFT ANTI',
            ),
            [
                (
                    m['name']
                    + (' (held)' if m['held_through_outage'] else ''),
                    m['conductor_group'] or None,
                    ', '.join(m['hardware_types'] or ['(all)']),
                    ', '.join(m[profile.HARD_AFFINITY]) or None,
                    ', '.join(m[profile.HARD_ANTI_AFFINITY]) or None,
                    m[profile.SOFT_AFFINITY] or None,
                    m[profile.SOFT_ANTI_AFFINITY] or None,
                )
                for m in report['members']
            ],
        )
    )
    for name, reason in report['rejected'].items():
        parts.append('Left out of placement: %s: %s' % (name, reason))
    return '\n'.join(parts)


def check(
    conductors: Sequence[profile.ConductorProfile],
    nodes: Sequence[profile.NodeRequest],
) -> dict[str, Any]:
    """Nodes no conductor may take, and nodes only one conductor may."""
    placer = engine.PlacementEngine(conductors)
    orphans = []
    single = []
    for node in nodes:
        order = placer.fallback_order(node)
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
    return {
        'conductors': len(conductors),
        'nodes': len(nodes),
        'orphans': orphans,
        'single_conductor': single,
    }


def render_check(report: dict[str, Any]) -> str:
    """The check as text people read."""
    parts = [
        '%d node(s) over %d live conductor(s)'
        % (report['nodes'], report['conductors'])
    ]
    if report.get('not_members'):
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
    return '\n'.join(parts)
