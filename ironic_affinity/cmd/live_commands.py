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

"""The commands that read the running deployment: ``plan --live``,
``explain NODE``, ``check`` and ``members``.

They read ironic.conf, the coordination backend and Ironic's database
(``members`` only where ``[database]connection`` is set, for the nodes
still to move and the takeovers pending, and without it if it cannot);
they write nothing.
"""

import time
from typing import Any

from oslo_config import cfg
from oslo_log import log
import sqlalchemy as sa

from ironic_affinity import adoption
from ironic_affinity import conf as affinity_conf
from ironic_affinity import exception
from ironic_affinity import report
from ironic_affinity import report_group
from ironic_affinity._i18n import _
from ironic_affinity.cmd import output
from ironic_affinity.cmd import render
from ironic_affinity.cmd import render_group
from ironic_affinity.integration.data import ironic_db
from ironic_affinity.integration.data import live
from ironic_affinity.membership import backend
from ironic_affinity.membership import service

LOG = log.getLogger(__name__)

# Exit status of a check that found a problem, as of any failure.
EXIT_PROBLEM = 1

# What the live commands read of Ironic's own options.
LIVE_OPTS = [
    ('database', cfg.StrOpt('connection', secret=True)),
    ('conductor', cfg.IntOpt('heartbeat_timeout', default=60)),
]


def _switching(
    deployment: live.Deployment, now: float, count_nodes: bool = True
) -> dict[str, Any]:
    """Where the deployment stands between Ironic's ring and affinity
    placement, with the takeovers pending; with the nodes still to change
    side unless ``count_nodes`` is false."""
    return report_group.switching(
        deployment.agreement,
        now,
        deployment.nodes if count_nodes else None,
        live.takeovers_pending(deployment, now),
    )


def register_opts(conf: cfg.ConfigOpts) -> None:
    """The options these commands read. Registered once parsed: none of
    them is a command-line option."""
    affinity_conf.register_opts(conf)
    # Ironic's own option, read for the default file:// backend location,
    # with Ironic's default.
    conf.register_opt(
        cfg.StrOpt('state_path', default=backend.ironic_state_path())
    )
    for group, opt in LIVE_OPTS:
        conf.register_opt(opt, group=group)


def _prepare(conf: cfg.ConfigOpts) -> None:
    """Register the options; refuse a file backend that no conductor has
    created (reading it would create it)."""
    register_opts(conf)
    backend.require_file_directory(backend.backend_url(conf))


def _deployment(conf: cfg.ConfigOpts, args: Any) -> live.Deployment:
    """The running deployment, as the ring manager sees it."""
    _prepare(conf)
    deployment = live.load(conf, args.timeout)
    if deployment.not_members:
        all_on = deployment.agreement.adoption.all_on(time.time())
        LOG.warning(
            'Active in Ironic but not in the affinity group, so given no '
            'node%(until)s: %(names)s',
            {
                'until': ''
                if all_on == adoption.AFFINITY
                else " once every node is placed by affinity (Ironic's "
                'ring may give them nodes until then)',
                'names': ', '.join(sorted(deployment.not_members)),
            },
        )
    for node, reason in sorted(deployment.bad_tags.items()):
        LOG.warning(
            'Node %(node)s placed as untagged: %(reason)s',
            {'node': node, 'reason': reason},
        )
    return deployment


def plan(conf: cfg.ConfigOpts, args: Any) -> int:
    deployment = _deployment(conf, args)
    names = frozenset(c.name for c in deployment.conductors)
    output.check_down(names, args.down, 'live')
    now = time.time()
    result = report.plan(
        deployment.conductors, deployment.nodes, set(args.down), now
    )
    result['placement'] = _switching(deployment, now)
    output.emit(
        result,
        _placed_by_affinity_note(result['placement'])
        + render.render_plan(result, args.down),
        args.format,
    )
    return 0


def _placed_by_affinity_note(placed: dict[str, Any]) -> str:
    """What the tables below are while Ironic's ring places nodes."""
    said = render.render_switching(placed)
    if not said:
        return ''
    if placed['state'] == 'affinity' and not placed['due']:
        # Only takeovers to tell of: every node is placed by affinity.
        return said + '\n'
    return (
        said + '\nBelow: placement by affinity tags; a node on Ironic\'s '
        "ring is where Ironic's ring puts it.\n"
    )


def explain(conf: cfg.ConfigOpts, args: Any, wanted: str) -> int:
    deployment = _deployment(conf, args)
    names = frozenset(c.name for c in deployment.conductors)
    output.check_down(names, args.down, 'live')
    found = [n for n in deployment.nodes if wanted in (n.name, n.uuid)]
    if not found:
        raise exception.AffinityError(_('no node %r') % wanted)
    now = time.time()
    result = report.explain(
        deployment.conductors,
        found[0],
        set(args.down),
        deployment.nodes,
        now=now,
    )
    switches = deployment.agreement.adoption
    result['placement'] = _switching(deployment, now, count_nodes=False)
    result['side'] = switches.side_of(found[0], now)
    output.emit(
        result,
        _placed_by_affinity_note(result['placement'])
        + render.render_explain(result),
        args.format,
    )
    return 0


def check(conf: cfg.ConfigOpts, args: Any) -> int:
    deployment = _deployment(conf, args)
    result = report.check(deployment.conductors, deployment.nodes)
    result['not_members'] = sorted(deployment.not_members)
    now = time.time()
    result['placement'] = _switching(deployment, now)
    output.emit(result, render.render_check(result), args.format)
    problems = result['orphans'] or result['over_capacity']
    return EXIT_PROBLEM if problems else 0


def members(conf: cfg.ConfigOpts, args: Any) -> int:
    _prepare(conf)
    snapshot = service.member_view(conf).refresh_within(args.timeout)
    url = backend.redact(backend.backend_url(conf))
    result = report_group.members(
        snapshot.members,
        url,
        conf.affinity.group_name,
        rejected=snapshot.rejected,
        held=snapshot.held,
        error=snapshot.error,
        age=snapshot.age(),
        now=time.time(),
        runs=snapshot.runs,
    )
    if conf.database.connection and result['placement'] is not None:
        result['placement'] = _placement_from_database(conf, snapshot, result)
    output.emit(result, render_group.render_members(result), args.format)
    # An unreadable backend shows in the status too, for monitoring.
    return EXIT_PROBLEM if snapshot.stale else 0


def _placement_from_database(
    conf: cfg.ConfigOpts, snapshot: Any, result: dict[str, Any]
) -> dict[str, Any]:
    """The switch as the members report it, with what only Ironic's
    database tells: the conductors active in Ironic that are not
    members, the nodes still to change side and the takeovers pending.
    The members' report without them, saying why, when the database
    cannot be read: the group is what this command is for."""
    try:
        deployment = live.read(conf, snapshot)
    except sa.exc.SQLAlchemyError as exc:
        LOG.warning(
            "Cannot read Ironic's database for the nodes still to move "
            'and the takeovers pending: %s',
            ironic_db.error_text(exc),
        )
        return dict(result['placement'], database_error=str(exc))
    now = time.time()
    return _switching(deployment, now)
