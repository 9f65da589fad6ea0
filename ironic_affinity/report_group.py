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

"""The group as the operator commands and the affinity API show it:
its members, what each runs, and where the deployment stands between
Ironic's ring and affinity placement. Pure, as :mod:`ironic_affinity.report`.
"""

from collections.abc import Collection
from collections.abc import Mapping
from collections.abc import Sequence
import time
from typing import Any
from typing import Protocol

from ironic_affinity import adoption
from ironic_affinity import profile
from ironic_affinity import rollout
from ironic_affinity import tags


class Runs(Protocol):
    """What a member says it runs (membership.levels.Runs)."""

    @property
    def version(self) -> str | None:
        """The plugin's version; None when it does not say."""

    @property
    def reads(self) -> int:
        """The newest format level it reads."""

    @property
    def writes(self) -> int:
        """The format level it publishes at."""


def switching(
    agreement: adoption.Agreement,
    now: float,
    nodes: Sequence[profile.NodeRequest] | None = None,
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
        'state': found.all_on(now) or 'switching',
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
    if nodes is not None:
        # Keyed as the ring keys them: by uuid.
        report['nodes_to_move'] = len(
            [node for node in nodes if active and found.pending_of(node, now)]
        )
    if takeovers_pending is not None:
        report['takeovers_pending'] = takeovers_pending
    return report


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
    runs: Mapping[str, Runs] | None = None,
) -> dict[str, Any]:
    """The members of the group as one JSON-ready dict.

    :param found: the members with their published profiles.
    :param runs: what each member says it runs.
    :param rejected: members left out, with why.
    :param held: members kept from before a backend outage.
    :param error: why the group is unreadable (``age``: seconds since read).
    :param now: seconds since the epoch; changes rolling out then listed.
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
                'draining': c.draining,
                **_runs((runs or {}).get(name)),
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
        # From the group alone (live_commands.members adds the database);
        # None for an empty or unread group, which votes for nothing.
        'placement': (
            switching(
                adoption.agree({n: c.switching for n, c in found.items()}, ()),
                time.time() if now is None else now,
            )
            if found and error is None
            else None
        ),
    }


def _rollout(
    conductor: profile.ConductorProfile, now: float | None
) -> dict[str, Any]:
    """A member's changes rolling out at ``now``, and when they end."""
    changes = conductor.changes
    if now is not None:
        changes = rollout.unfinished(changes, now)
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


def _runs(found: Runs | None) -> dict[str, Any]:
    """A member's version and format levels; None where unknown (a
    member held through an outage, not read)."""
    if found is None:
        return {'version': None, 'format_level': None}
    return {
        'version': found.version,
        'format_level': {'reads': found.reads, 'writes': found.writes},
    }
