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

"""The ``ironic-affinity`` operator command.

Sub-commands are oslo.config sub-command options, as in ironic-dbsync;
those that talk to live services read ironic.conf (the usual
--config-file, /etc/ironic/ironic.conf by default).
"""

import json
import os
import sys
from typing import Any

from oslo_config import cfg
from oslo_log import log

from ironic_affinity import conf as affinity_conf
from ironic_affinity import exception
from ironic_affinity import report
from ironic_affinity import scenario
from ironic_affinity._i18n import _
from ironic_affinity.membership import backend
from ironic_affinity.membership import service

LOG = log.getLogger(__name__)

# Exit status for input that cannot be used, as opposed to 2 for a
# command line that argparse cannot parse.
EXIT_BAD_INPUT = 1


def _add_down(parser: Any) -> None:
    parser.add_argument(
        '--down',
        action='append',
        default=[],
        metavar='NAME',
        help=_('Treat conductor NAME as dead. Repeat for several.'),
    )


def _add_format(parser: Any) -> None:
    parser.add_argument(
        '-f',
        '--format',
        choices=('table', 'json'),
        default='table',
        help=_('Output format (default: table).'),
    )


def _add_timeout(parser: Any) -> None:
    parser.add_argument(
        '--timeout',
        type=float,
        default=10.0,
        help=_(
            'Seconds to wait for the coordination backend, for commands '
            'that read it (default: 10).'
        ),
    )


def _add_parsers(subparsers: Any) -> None:
    plan = subparsers.add_parser(
        'plan',
        help=_(
            'Place every node of a scenario file (offline what-if), or with '
            '--live of the running deployment.'
        ),
    )
    plan.add_argument('scenario', metavar='SCENARIO', nargs='?')
    plan.add_argument(
        '--live',
        action='store_true',
        help=_(
            "Use the deployment's nodes and live conductors, read from "
            'the database and backend of ironic.conf.'
        ),
    )
    _add_timeout(plan)
    _add_down(plan)
    _add_format(plan)
    plan.set_defaults(handler=_plan)

    explain = subparsers.add_parser(
        'explain',
        help=_(
            "Show every conductor's verdict for one node: of a scenario "
            '(SCENARIO NODE), or of the running deployment (NODE).'
        ),
    )
    explain.add_argument(
        'target',
        metavar='[SCENARIO] NODE',
        nargs='+',
        help=_('A scenario file and a node, or a live node: name or uuid.'),
    )
    _add_timeout(explain)
    _add_down(explain)
    _add_format(explain)
    explain.set_defaults(handler=_explain)

    members = subparsers.add_parser(
        'members',
        help=_(
            'List the live conductors of the membership group, as read '
            'from the backend configured in [affinity] of ironic.conf.'
        ),
    )
    _add_format(members)
    _add_timeout(members)
    members.set_defaults(handler=_members)

    check = subparsers.add_parser(
        'check',
        help=_(
            'Nodes of the running deployment with no valid conductor '
            '(exit status 1), and with only one. For monitoring.'
        ),
    )
    _add_format(check)
    _add_timeout(check)
    check.set_defaults(handler=_check)


LIVE_OPTS = [
    ('database', cfg.StrOpt('connection', secret=True)),
    ('conductor', cfg.IntOpt('heartbeat_timeout', default=60)),
]

COMMAND_OPT = cfg.SubCommandOpt(
    'command',
    title=_('Commands'),
    handler=_add_parsers,
    help=_('Available commands'),
)


def _load(args: Any) -> scenario.Scenario:
    loaded = scenario.load(args.scenario)
    _check_down(loaded.conductor_names(), args.down, loaded.path)
    for conductor in loaded.conductors:
        conflicts = conductor.soft_conflicts()
        if conflicts:
            LOG.warning(
                '%(path)s: conductor %(name)s has %(tags)s in both soft '
                'lists; soft_anti_affinity_tags wins',
                {
                    'path': loaded.path,
                    'name': conductor.name,
                    'tags': ', '.join(sorted(conflicts)),
                },
            )
    return loaded


def _emit(data: dict[str, Any], text: str, fmt: str) -> None:
    if fmt == 'json':
        json.dump(data, sys.stdout, indent=2, sort_keys=True)
        sys.stdout.write('\n')
    else:
        print(text)


def _live(conf: cfg.ConfigOpts, args: Any) -> Any:
    """The running deployment, as the ring manager sees it."""
    try:
        from ironic_affinity.integration import live
    except ImportError as exc:
        raise exception.AffinityError(
            _('live commands need SQLAlchemy, as installed with Ironic: %s')
            % exc
        ) from exc
    deployment = live.load(conf, args.timeout)
    if deployment.not_members:
        LOG.warning(
            'Active in Ironic but not in the affinity group, so given no '
            'node: %s',
            ', '.join(sorted(deployment.not_members)),
        )
    for node, reason in sorted(deployment.bad_tags.items()):
        LOG.warning(
            'Node %(node)s placed as untagged: %(reason)s',
            {'node': node, 'reason': reason},
        )
    return deployment


def _check_down(names: frozenset[str], down: list[str], where: str) -> None:
    unknown = sorted(set(down) - names)
    if unknown:
        raise exception.InvalidScenario(
            _('%(where)s: --down names no conductor: %(names)s')
            % {'where': where, 'names': ', '.join(unknown)}
        )


def _plan(conf: cfg.ConfigOpts, args: Any) -> int:
    if args.live == bool(args.scenario):
        raise exception.AffinityError(
            _('plan takes a SCENARIO file, or --live, and not both')
        )
    if args.live:
        deployment = _live(conf, args)
        conductors, nodes = deployment.conductors, deployment.nodes
        _check_down(frozenset(c.name for c in conductors), args.down, 'live')
    else:
        loaded = _load(args)
        conductors, nodes = loaded.conductors, loaded.nodes
    result = report.plan(conductors, nodes, set(args.down))
    _emit(result, report.render_plan(result, args.down), args.format)
    return 0


def _explain(conf: cfg.ConfigOpts, args: Any) -> int:
    if len(args.target) > 2:
        raise exception.AffinityError(
            _('explain takes [SCENARIO] NODE: %d arguments given')
            % len(args.target)
        )
    if len(args.target) == 2:
        args.scenario = args.target[0]
        loaded = _load(args)
        conductors = loaded.conductors
        node = loaded.node(args.target[1])
    else:
        deployment = _live(conf, args)
        conductors = deployment.conductors
        _check_down(frozenset(c.name for c in conductors), args.down, 'live')
        wanted = args.target[0]
        found = [n for n in deployment.nodes if wanted in (n.name, n.uuid)]
        if not found:
            raise exception.AffinityError(_('no node %r') % wanted)
        node = found[0]
    result = report.explain(conductors, node, set(args.down))
    _emit(result, report.render_explain(result), args.format)
    return 0


def _check(conf: cfg.ConfigOpts, args: Any) -> int:
    deployment = _live(conf, args)
    result = report.check(deployment.conductors, deployment.nodes)
    result['not_members'] = sorted(deployment.not_members)
    _emit(result, report.render_check(result), args.format)
    return EXIT_BAD_INPUT if result['orphans'] else 0


def _members(conf: cfg.ConfigOpts, args: Any) -> int:
    snapshot = service.member_view(conf).refresh_within(args.timeout)
    url = backend.redact(backend.backend_url(conf))
    result = report.members(
        snapshot.members,
        url,
        conf.affinity.group_name,
        rejected=snapshot.rejected,
        held=snapshot.held,
        error=snapshot.error,
        age=snapshot.age(),
    )
    _emit(result, report.render_members(result), args.format)
    # An unreadable backend shows in the status too, for monitoring.
    return EXIT_BAD_INPUT if snapshot.stale else 0


def main(argv: list[str] | None = None) -> int:
    conf = cfg.ConfigOpts()
    log.register_options(conf)
    # Logs and warnings go to stderr: stdout carries the result only.
    conf.set_default('use_stderr', True)
    affinity_conf.register_opts(conf)
    # Ironic's own option, read for the default file:// backend location.
    conf.register_opt(
        cfg.StrOpt('state_path', default=backend.DEFAULT_STATE_PATH)
    )
    # What the live commands read of Ironic's own options.
    for group, opt in LIVE_OPTS:
        conf.register_opt(opt, group=group)
    conf.register_cli_opt(COMMAND_OPT)
    # Like Ironic's own commands, read /etc/ironic/ironic.conf unless
    # --config-file says otherwise.
    conf(
        sys.argv[1:] if argv is None else argv,
        project='ironic',
        prog='ironic-affinity',
    )
    log.setup(conf, 'ironic-affinity')
    try:
        return int(conf.command.handler(conf, conf.command))
    except exception.AffinityError as exc:
        print('ironic-affinity: error: %s' % exc, file=sys.stderr)
        return EXIT_BAD_INPUT
    except BrokenPipeError:
        # Output piped into "head" and the like: not an error of ours.
        # Point stdout at nothing so the interpreter's final flush is quiet.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == '__main__':
    sys.exit(main())
