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

"""Why a node gets no conductor, in the words Ironic's callers show.

Ironic turns a ring's refusal into "No valid host was found. Reason:
...", answered by the API and logged by conductors. When the reason is
this plugin's (tags exclude every conductor, or the conductors Ironic
lists are not in the affinity group), the reason must say so: an
operator reading Ironic's usual "no conductor supports driver X" would
look at drivers. Each distinct reason is also logged, once per node and
cause rather than once per lookup.
"""

from collections.abc import Hashable
from collections.abc import Iterable
from typing import Any

from ironic_affinity import engine
from ironic_affinity import outage

# Conductors quoted in one reason, at most: a deployment may have
# hundreds.
MAX_NAMED = 10


def _names(names: Iterable[str]) -> str:
    ordered = sorted(names)
    shown = ', '.join(ordered[:MAX_NAMED])
    if len(ordered) > MAX_NAMED:
        shown += ' and %d more' % (len(ordered) - MAX_NAMED)
    return shown


class OrphanReports:
    """Builds refusal reasons and logs each new one once."""

    def __init__(self, log: Any) -> None:
        self._logged: outage.Conditions[Hashable] = outage.Conditions(log)

    def _once(self, key: Hashable, marker: Hashable, reason: str) -> None:
        self._logged.raised(
            key, marker, 'Orphaned node: %(reason)s', {'reason': reason}
        )

    def excluded(self, node: str, evaluation: engine.Evaluation) -> str:
        """Every live conductor of the node's ring refuses it."""
        refused = [v for v in evaluation.verdicts if v.excluded]
        if refused:
            shown = '; '.join(
                '%s: %s' % (v.conductor, v.excluded)
                for v in refused[:MAX_NAMED]
            )
            if len(refused) > MAX_NAMED:
                shown += '; and %d more' % (len(refused) - MAX_NAMED)
        else:
            shown = 'no live conductor in the affinity group runs it'
        reason = 'no conductor may take node %s by its affinity tags (%s)' % (
            node,
            shown,
        )
        # Logged again only when what decides it changes.
        self._once(
            node, tuple(v.excluded for v in evaluation.verdicts), reason
        )
        return reason

    def not_in_group(
        self, driver: str, group: str, hosts: frozenset[str]
    ) -> str:
        """Ironic lists conductors for the ring; none is in the group."""
        reason = (
            'no conductor in the affinity group runs hardware type '
            '%(driver)s in conductor group "%(group)s": %(names)s %(verb)s '
            'alive in Ironic but not in the affinity group (starting, '
            'running without ironic-affinity, or unable to reach its '
            'coordination backend)'
            % {
                'driver': driver,
                'group': group,
                'names': _names(hosts),
                'verb': 'is' if len(hosts) == 1 else 'are',
            }
        )
        self._once(('ring', driver, group), hosts, reason)
        return reason
