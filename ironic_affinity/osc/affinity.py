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

"""``openstack baremetal ... affinity`` commands: the openstack client
plugin.

They add to the ``baremetal`` commands of python-ironicclient (entry
points in the ``openstack.baremetal.v1`` group) and read the affinity
resources of Ironic's API (served by ironic_affinity's middleware)
through the baremetal client's own session: its endpoint, API version
and authentication options, whatever they are. Nothing else of this
project is imported, so the plugin works from any laptop with the
client installed.
"""

import logging
import time
from typing import Any

from cliff import columns
from osc_lib.cli import format_columns
from osc_lib.command import command

from ironic_affinity._i18n import _

LOG = logging.getLogger(__name__)


def _get(app: Any, path: str) -> Any:
    """GET from Ironic's API; its errors raise as the client's own."""
    client = app.client_manager.baremetal
    _response, body = client.http_client.json_request('GET', path)
    return body


def _deployment(app: Any) -> dict[str, Any]:
    """GET /v1/affinity, with a warning when the answer comes from a view
    the API could not refresh."""
    found: dict[str, Any] = _get(app, '/v1/affinity')
    if not found['membership']['readable']:
        LOG.warning(
            'The API cannot read the membership group: %s',
            found['membership']['error'],
        )
    return found


def _verdict(row: dict[str, Any]) -> str:
    if row['verdict'] in ('down', 'excluded'):
        return '%s: %s' % (
            row['conductor'],
            row.get('reason') or row['verdict'],
        )
    detail = ', '.join('%s %+d' % (tag, w) for tag, w in row['breakdown'])
    return '%s: %s, score %d%s' % (
        row['conductor'],
        row['verdict'],
        row['score'],
        ' (%s)' % detail if detail else '',
    )


# Not subscripted: cliff's column became generic only after the cliff of
# 2025.1's constraints.
class VerdictsColumn(columns.FormattableColumn):  # type: ignore[type-arg]
    """Every conductor's verdict: one line each in a table, the objects
    of the API in JSON and YAML."""

    def human_readable(self) -> str:
        return '\n'.join(_verdict(row) for row in self._value)

    def machine_readable(self) -> list[dict[str, Any]]:
        return list(self._value)


def _moment(at: float | None) -> str | None:
    """A time (seconds since the epoch) as people read it: UTC."""
    if at is None:
        return None
    return time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(at))


# Not subscripted, as above.
class PendingColumn(columns.FormattableColumn):  # type: ignore[type-arg]
    """The node's moves still to come while a change rolls out: one line
    each in a table, the objects of the API in JSON and YAML."""

    def human_readable(self) -> str:
        return '\n'.join(
            '%s -> %s at %s' % (m['from'], m['to'], _moment(m['at']))
            for m in self._value
        )

    def machine_readable(self) -> list[dict[str, Any]]:
        return list(self._value)


# Not subscripted, as above.
class FallbackColumn(columns.FormattableColumn):  # type: ignore[type-arg]
    """Conductors in the order they take the node, as ``ironic-affinity
    explain`` prints them (osc_lib's ListColumn sorts them)."""

    def human_readable(self) -> str:
        return ' > '.join(self._value)

    def machine_readable(self) -> list[str]:
        return list(self._value)


class ShowNodeAffinity(command.ShowOne):
    """Show where a node goes and why: every conductor's verdict."""

    FIELDS = (
        'uuid',
        'node',
        'tags',
        'conductor',
        'ironic_conductor',
        'pending',
        'rollout_ends_at',
        'fallback',
        'verdicts',
        'not_members',
        'tags_error',
        'side',
        'switch_moves',
    )

    def get_parser(self, prog_name: str) -> Any:
        parser = super().get_parser(prog_name)
        parser.add_argument(
            'node', metavar='<node>', help=_('Name or UUID of the node.')
        )
        return parser

    def take_action(self, parsed_args: Any) -> tuple[Any, Any]:
        found = _get(self.app, '/v1/nodes/%s/affinity' % parsed_args.node)
        values = {
            'uuid': found['uuid'],
            'node': found['node'],
            'tags': format_columns.ListColumn(found['tags']),
            'conductor': found['conductor'],
            'ironic_conductor': found['ironic_conductor'],
            # Absent while no change rolls out.
            'pending': PendingColumn(found.get('pending') or []),
            'rollout_ends_at': _moment(found.get('rollout_ends_at')),
            'fallback': FallbackColumn(found['fallback']),
            'verdicts': VerdictsColumn(found['conductors']),
            'not_members': format_columns.ListColumn(found['not_members']),
            'tags_error': found['tags_error'],
            # Between Ironic's ring ('stock') and affinity.
            'side': found['side'],
            'switch_moves': PendingColumn(found['switch_moves']),
        }
        return self.FIELDS, tuple(values[f] for f in self.FIELDS)


class ListAffinity(command.Lister):
    """List the conductors of the affinity group, their tags and nodes."""

    COLUMNS = (
        'Name',
        'Conductor Group',
        'Hardware Types',
        'Hard Affinity Tags',
        'Hard Anti Affinity Tags',
        'Soft Affinity Tags',
        'Soft Anti Affinity Tags',
        'Nodes',
    )

    def take_action(self, parsed_args: Any) -> tuple[Any, Any]:
        found = _deployment(self.app)
        placed = found.get('placement') or {'state': 'affinity'}
        if placed['state'] == 'switching':
            LOG.warning(
                'Placement is switching to %(to)s until %(ends)s; '
                '%(count)s node(s) still to move',
                {
                    'to': placed['to'],
                    'ends': _moment(placed['ends_at']),
                    'count': placed.get('nodes_to_move'),
                },
            )
        elif placed['state'] != 'affinity':
            LOG.warning(
                "Placement is by Ironic's ring (stock); voting for it: %s",
                ', '.join(placed['stock_voters']) or '(no conductor)',
            )
        if placed.get('takeovers_pending'):
            LOG.warning(
                '%d ACTIVE node(s) not taken over yet by the conductor '
                "they are placed on (Ironic's periodic takeover, "
                '[conductor]sync_local_state_interval)',
                placed['takeovers_pending'],
            )
        for name in found['not_members']:
            LOG.warning(
                'Conductor %(name)s is active in Ironic but not in the '
                'affinity group: it is given no node%(until)s',
                {
                    'name': name,
                    'until': ''
                    if placed['state'] == 'affinity'
                    else " once every node is placed by affinity (Ironic's "
                    'ring may give it nodes until then)',
                },
            )
        rows = [
            (
                member['name'],
                member['conductor_group'],
                format_columns.ListColumn(member['hardware_types'] or []),
                format_columns.ListColumn(member['hard_affinity_tags']),
                format_columns.ListColumn(member['hard_anti_affinity_tags']),
                member['soft_affinity_tags'],
                member['soft_anti_affinity_tags'],
                member['nodes'],
            )
            for member in found['members']
        ]
        return self.COLUMNS, rows


class CheckAffinity(command.Lister):
    """List nodes no conductor may take and conductors over their
    max_nodes (exit status 1 if any), and nodes only one conductor may
    take."""

    COLUMNS = ('Node', 'UUID', 'Problem', 'Detail')

    def take_action(self, parsed_args: Any) -> tuple[Any, Any]:
        found = _deployment(self.app)
        over = found.get('over_capacity') or {}
        self.problems = len(found['orphans']) + len(over)
        rows = [
            (
                orphan['node'],
                orphan['uuid'],
                'no valid conductor',
                '; '.join(
                    '%s: %s' % item
                    for item in sorted(orphan['reasons'].items())
                )
                or _('no live conductor'),
            )
            for orphan in found['orphans']
        ]
        rows += [
            (
                single['node'],
                single['uuid'],
                'one valid conductor',
                single['conductor'],
            )
            for single in found['single_conductor']
        ]
        rows += [
            (
                name,
                None,
                'over max_nodes',
                '%d node(s) for max_nodes %d'
                % (figures['nodes'], figures['max_nodes']),
            )
            for name, figures in sorted(over.items())
        ]
        return self.COLUMNS, rows

    def run(self, parsed_args: Any) -> int:
        # The rows are printed either way; the status is for monitoring.
        status = super().run(parsed_args)
        return 1 if self.problems else int(status or 0)
