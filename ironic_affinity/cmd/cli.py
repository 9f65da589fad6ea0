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

Sub-commands are oslo.config sub-command options, as in ironic-dbsync, so
that later ones can read ironic.conf through the usual --config-file.
"""

import json
import sys
from typing import Any

from oslo_config import cfg
from oslo_log import log

from ironic_affinity import exception
from ironic_affinity import report
from ironic_affinity import scenario
from ironic_affinity._i18n import _

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


def _add_parsers(subparsers: Any) -> None:
    plan = subparsers.add_parser(
        'plan',
        help=_('Place every node of a scenario file (offline what-if).'),
    )
    plan.add_argument('scenario', metavar='SCENARIO')
    _add_down(plan)
    plan.add_argument(
        '-f',
        '--format',
        choices=('table', 'json'),
        default='table',
        help=_('Output format (default: table).'),
    )
    plan.set_defaults(handler=_plan)

    explain = subparsers.add_parser(
        'explain',
        help=_("Show every conductor's verdict for one node of a scenario."),
    )
    explain.add_argument('scenario', metavar='SCENARIO')
    explain.add_argument('node', metavar='NODE', help=_('Node name or uuid.'))
    _add_down(explain)
    explain.add_argument(
        '-f',
        '--format',
        choices=('table', 'json'),
        default='table',
        help=_('Output format (default: table).'),
    )
    explain.set_defaults(handler=_explain)


COMMAND_OPT = cfg.SubCommandOpt(
    'command',
    title=_('Commands'),
    handler=_add_parsers,
    help=_('Available commands'),
)


def _load(args: Any) -> scenario.Scenario:
    loaded = scenario.load(args.scenario)
    unknown = sorted(set(args.down) - loaded.conductor_names())
    if unknown:
        raise exception.InvalidScenario(
            _('%(path)s: --down names no conductor of the scenario: %(names)s')
            % {'path': loaded.path, 'names': ', '.join(unknown)}
        )
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


def _plan(args: Any) -> int:
    loaded = _load(args)
    result = report.plan(loaded.conductors, loaded.nodes, set(args.down))
    _emit(result, report.render_plan(result, args.down), args.format)
    return 0


def _explain(args: Any) -> int:
    loaded = _load(args)
    node = loaded.node(args.node)
    result = report.explain(loaded.conductors, node, set(args.down))
    _emit(result, report.render_explain(result), args.format)
    return 0


def main(argv: list[str] | None = None) -> int:
    conf = cfg.ConfigOpts()
    log.register_options(conf)
    # Logs and warnings go to stderr: stdout carries the result only.
    conf.set_default('use_stderr', True)
    conf.register_cli_opt(COMMAND_OPT)
    conf(
        sys.argv[1:] if argv is None else argv,
        project='ironic',
        prog='ironic-affinity',
        default_config_files=[],
    )
    log.setup(conf, 'ironic-affinity')
    try:
        return int(conf.command.handler(conf.command))
    except exception.AffinityError as exc:
        print('ironic-affinity: error: %s' % exc, file=sys.stderr)
        return EXIT_BAD_INPUT


if __name__ == '__main__':
    sys.exit(main())
