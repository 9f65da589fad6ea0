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
--config-file, found as Ironic's own commands find it). This module only
parses and dispatches: each command's module is imported when it runs,
so that the offline commands never import tooz, SQLAlchemy or Ironic
(on a host with Ironic, tooz pulls in eventlet and its warnings).
"""

import os
import sys
from typing import Any

from oslo_config import cfg
from oslo_log import log

from ironic_affinity import exception
from ironic_affinity._i18n import _
from ironic_affinity.cmd import arguments

# Exit status for input that cannot be used, or a check that failed.
EXIT_FAILURE = 1
# Exit status for a command line that cannot be used, as argparse's own.
EXIT_USAGE = 2

COMMANDS = ('plan', 'explain', 'members', 'check')


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


COMMAND_OPT = cfg.SubCommandOpt(
    'command',
    title=_('Commands'),
    handler=_add_parsers,
    help=_('Available commands'),
)


def _live_commands(conf: cfg.ConfigOpts) -> Any:
    """The live commands' module, once there is a configuration to read."""
    if not conf.config_file and not conf.config_dir:
        raise exception.AffinityError(
            _(
                'no configuration file: none given with --config-file and '
                'no ironic.conf in ~/.ironic/, ~/, /etc/ironic/ or /etc/; '
                "give Ironic's with --config-file"
            )
        )
    try:
        from ironic_affinity.cmd import live_commands
    except ImportError as exc:
        raise exception.AffinityError(
            _(
                'the live commands need %(module)s, installed with Ironic '
                'and its database driver: %(error)s'
            )
            % {'module': exc.name or 'a module', 'error': exc}
        ) from exc
    return live_commands


def _plan(conf: cfg.ConfigOpts, args: Any) -> int:
    if args.live == bool(args.scenario):
        raise exception.UsageError(
            _('plan takes a SCENARIO file, or --live, and not both')
        )
    if args.live:
        return int(_live_commands(conf).plan(conf, args))
    from ironic_affinity.cmd import offline

    return offline.plan(args)


def _explain(conf: cfg.ConfigOpts, args: Any) -> int:
    if len(args.target) > 2:
        raise exception.UsageError(
            _('explain takes [SCENARIO] NODE: %d arguments given')
            % len(args.target)
        )
    if len(args.target) == 2:
        from ironic_affinity.cmd import offline

        return offline.explain(args, *args.target)
    if os.path.isfile(args.target[0]):
        raise exception.UsageError(
            _(
                '%s is a scenario file: give the node too '
                '(explain SCENARIO NODE)'
            )
            % args.target[0]
        )
    return int(_live_commands(conf).explain(conf, args, args.target[0]))


def _members(conf: cfg.ConfigOpts, args: Any) -> int:
    return int(_live_commands(conf).members(conf, args))


def _check(conf: cfg.ConfigOpts, args: Any) -> int:
    return int(_live_commands(conf).check(conf, args))


def _error(message: object, status: int) -> int:
    print('ironic-affinity: error: %s' % message, file=sys.stderr)
    return status


def version() -> str:
    """The installed distribution's version, as pbr gave it at build."""
    from importlib import metadata

    try:
        return metadata.version('ironic-affinity')
    except metadata.PackageNotFoundError:
        return 'unknown (not installed)'


def _parse(conf: arguments.RecordingConfigOpts, args: list[str]) -> None:
    strings = arguments.option_strings(conf.recorded_cli_opts)
    conf(
        arguments.global_options_first(args, strings, COMMANDS),
        project='ironic',
        prog='ironic-affinity',
        version=version(),
    )


def main(argv: list[str] | None = None) -> int:
    conf = arguments.RecordingConfigOpts()
    log.register_options(conf)
    # Logs and warnings go to stderr: stdout carries the result only.
    conf.set_default('use_stderr', True)
    conf.register_cli_opt(COMMAND_OPT)
    args = sys.argv[1:] if argv is None else list(argv)
    try:
        # Like Ironic's own commands, read /etc/ironic/ironic.conf unless
        # --config-file says otherwise.
        _parse(conf, args)
    except cfg.ConfigFilesNotFoundError as exc:
        return _error(
            _('configuration file not found: %s')
            % ', '.join(exc.config_files),
            EXIT_FAILURE,
        )
    except cfg.ConfigDirNotFoundError as exc:
        return _error(
            _('configuration directory not found: %s') % exc.config_dir,
            EXIT_FAILURE,
        )
    except cfg.Error as exc:
        return _error(str(exc).replace('\n', ' '), EXIT_FAILURE)
    # The command's warnings are for whoever runs it: a log file named in
    # the service's ironic.conf (Kolla's names the conductor's) is not
    # written to, one given on the command line is.
    for name in ('log_file', 'log_dir'):
        if not arguments.given(args, conf.recorded_cli_opts, name):
            conf.set_override(name, None)
    log.setup(conf, 'ironic-affinity')
    try:
        return int(conf.command.handler(conf, conf.command))
    except exception.UsageError as exc:
        return _error(
            _('%(error)s; see ironic-affinity %(command)s --help')
            % {'error': exc, 'command': conf.command.name},
            EXIT_USAGE,
        )
    except exception.AffinityError as exc:
        return _error(exc, EXIT_FAILURE)
    except cfg.Error as exc:
        # An option's value in a configuration file, read only when used.
        return _error(str(exc).replace('\n', ' '), EXIT_FAILURE)
    except BrokenPipeError:
        # Output piped into "head" and the like: not an error of ours.
        # Point stdout at nothing so the interpreter's final flush is quiet.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == '__main__':
    sys.exit(main())
