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

"""``ironic-affinity-status upgrade check``, as oslo.upgradecheck runs it.

Run it where ``ironic-status upgrade check`` runs, with the same
ironic.conf. It fails when a conductor that Ironic lists as active is not
in the affinity group (it runs without the plugin, or cannot reach the
backend, while others route by affinity), fails when conductors run the
plugin but no API process announces it (the API routes requests by
Ironic's own ring meanwhile), warns while every node is on Ironic's own
ring (naming the conductors that vote for it, and those without the
plugin), and warns about orphaned nodes. It lists the plugin version of
every process, fails while one publishes a format level that another
does not read (``[affinity]pin_format``), and warns while versions
differ or a pin can be lifted.
Exit status as oslo.upgradecheck defines it: 0 success, 1 warning, 2
failure.
"""

import sys
import time

from oslo_config import cfg
from oslo_upgradecheck import upgradecheck

from ironic_affinity import exception
from ironic_affinity import report
from ironic_affinity import report_group
from ironic_affinity.cmd import live_commands
from ironic_affinity.integration import enabling
from ironic_affinity.integration.data import live
from ironic_affinity.membership import backend
from ironic_affinity.membership import levels
from ironic_affinity.membership import service


class Checks(upgradecheck.UpgradeCommands):
    """The checks of ironic-affinity."""

    def __init__(self, conf: cfg.ConfigOpts) -> None:
        self.conf = conf
        self._deployment: live.Deployment | None = None

    def _read(self) -> live.Deployment:
        if self._deployment is None:
            self._deployment = live.load(
                self.conf, self.conf.affinity.member_timeout * 2
            )
        return self._deployment

    def _failure(self, exc: Exception) -> upgradecheck.Result:
        """A check that could not read the group: why, without the
        secrets of the backend URL, where there is one."""
        try:
            url = backend.backend_url(self.conf)
        except exception.MembershipUnavailable:
            return upgradecheck.Result(upgradecheck.Code.FAILURE, str(exc))
        return upgradecheck.Result(
            upgradecheck.Code.FAILURE, backend.describe(exc, url)
        )

    def _check_membership(self) -> upgradecheck.Result:
        try:
            deployment = self._read()
        except Exception as exc:  # noqa: BLE001 - reported as the result
            return upgradecheck.Result(upgradecheck.Code.FAILURE, str(exc))
        placed = report_group.switching(deployment.agreement, time.time())
        missing = ', '.join(sorted(deployment.not_members))
        if placed['state'] == 'stock' and not placed['due']:
            # Every node on Ironic's ring, as every conductor places
            # them: an adoption under way, or a rollback done.
            voters = ', '.join(placed['stock_voters'])
            return upgradecheck.Result(
                upgradecheck.Code.WARNING,
                "Nodes are placed by Ironic's own hash ring%s%s."
                % (
                    ': conductor(s) %s vote for it (hash_ring_manager = '
                    'stock)' % voters
                    if voters
                    else '',
                    '; conductor(s) %s run without ironic-affinity' % missing
                    if missing
                    else '',
                ),
            )
        if deployment.not_members:
            return upgradecheck.Result(
                upgradecheck.Code.FAILURE,
                'Conductor(s) %s are active in Ironic but not in the '
                "affinity group: if they run without ironic-affinity, they "
                "place nodes by Ironic's own ring while the others place "
                'by affinity. Start them with ironic-affinity-conductor '
                'and the same [affinity] backend, or set '
                '[affinity]hash_ring_manager = stock on one conductor to '
                "take every node back to Ironic's ring." % missing,
            )
        return upgradecheck.Result(upgradecheck.Code.SUCCESS)

    def _check_api(self) -> upgradecheck.Result:
        try:
            deployment = self._read()
            apis = service.api_processes(
                self.conf, self.conf.affinity.member_timeout * 2
            )
        except Exception as exc:  # noqa: BLE001 - reported as the result
            return self._failure(exc)
        placed = report_group.switching(deployment.agreement, time.time())
        if placed['state'] == 'stock' and not placed['due']:
            # Every node on Ironic's ring: an API without the plugin
            # routes as every process does.
            return upgradecheck.Result(upgradecheck.Code.SUCCESS)
        if deployment.conductors and not apis:
            return upgradecheck.Result(
                upgradecheck.Code.FAILURE,
                '%d conductor(s) place nodes by affinity, but no API '
                'process announces ironic-affinity in group %s: the API '
                'routes requests by Ironic\'s own hash ring. Start it with '
                'ironic-affinity-api, or add "affinity" to [api]middleware '
                '(an API process announces itself once it has served a '
                'request).'
                % (len(deployment.conductors), service.api_group(self.conf)),
            )
        return upgradecheck.Result(upgradecheck.Code.SUCCESS)

    def _check_orphans(self) -> upgradecheck.Result:
        try:
            deployment = self._read()
        except Exception as exc:  # noqa: BLE001 - reported as the result
            return upgradecheck.Result(upgradecheck.Code.FAILURE, str(exc))
        result = report.check(deployment.conductors, deployment.nodes)
        if result['orphans']:
            return upgradecheck.Result(
                upgradecheck.Code.WARNING,
                '%d node(s) have no valid conductor: %s. See '
                '"ironic-affinity check".'
                % (
                    len(result['orphans']),
                    ', '.join(o['node'] for o in result['orphans'][:10]),
                ),
            )
        return upgradecheck.Result(upgradecheck.Code.SUCCESS)

    def _processes(
        self,
    ) -> tuple[dict[str, levels.Runs], dict[str, levels.Runs]]:
        """What each conductor, then each API process, says it runs."""
        wait = self.conf.affinity.member_timeout * 2
        return (
            service.conductor_entries(self.conf, wait),
            service.api_processes(self.conf, wait),
        )

    def _check_enabled_by(self) -> upgradecheck.Result:
        """How each process of the deployment took the plugin up, as
        each published it, and which way this host's Ironic allows."""
        try:
            conductors, apis = self._processes()
        except Exception as exc:  # noqa: BLE001 - reported as the result
            return self._failure(exc)
        bare = sorted(
            name
            for name, runs in apis.items()
            if runs.enabled_by == enabling.BY_IRONIC_CONF_WITHOUT_MIDDLEWARE
        )
        here, ignored = _this_ironic(self.conf)
        return upgradecheck.Result(
            upgradecheck.Code.WARNING
            if bare or ignored
            else upgradecheck.Code.SUCCESS,
            '%s%s %s %s'
            % (
                'API process(es) %s place by affinity without [api]'
                'middleware = affinity: they refuse no bad affinity_tags, '
                'and the tag changes written through them reach placement '
                'only at the next full read of the nodes ([affinity]'
                'node_tags_rescan_interval). Add the middleware. '
                % ', '.join(bare)
                if bare
                else '',
                _ways(
                    'Conductors',
                    {n: r.enabled_by for n, r in conductors.items()},
                    'ironic-affinity-conductor',
                ),
                _ways(
                    'API processes',
                    {n: r.enabled_by for n, r in apis.items()},
                    'an unrecorded way',
                ),
                here,
            ),
        )

    def _check_levels(self) -> upgradecheck.Result:
        """The plugin versions the processes run, and whether each reads
        what every other publishes ([affinity]pin_format)."""
        try:
            conductors, apis = self._processes()
        except Exception as exc:  # noqa: BLE001 - reported as the result
            return self._failure(exc)
        found = {
            **{'conductor %s' % n: r for n, r in conductors.items()},
            **{'API process %s' % n: r for n, r in apis.items()},
        }
        return _levels_result(found)

    _upgrade_checks = (
        ('Affinity membership', _check_membership),
        ('API with affinity', _check_api),
        ('Orphaned nodes', _check_orphans),
        ('How affinity is enabled', _check_enabled_by),
        ('Plugin versions and format levels', _check_levels),
    )


def _levels_result(found: dict[str, levels.Runs]) -> upgradecheck.Result:
    """Fails while a process publishes a level another does not read;
    warns while they run different versions, or a pin can be lifted."""
    if not found:
        return upgradecheck.Result(
            upgradecheck.Code.SUCCESS, 'No process in the groups.'
        )
    by_version: dict[str, list[str]] = {}
    for name, runs in sorted(found.items()):
        by_version.setdefault(
            runs.version or 'a release before format levels', []
        ).append(name)
    said = 'Versions: %s.' % '; '.join(
        '%s on %s' % (version, ', '.join(names))
        for version, names in sorted(by_version.items())
    )
    oldest = min(runs.reads for runs in found.values())
    newest = max(runs.writes for runs in found.values())
    if newest > oldest:
        return upgradecheck.Result(
            upgradecheck.Code.FAILURE,
            '%s publish format level %d, which %s do not read: they may '
            'place nodes apart. Set [affinity]pin_format = %d on every '
            'process until all are upgraded. %s'
            % (
                ', '.join(n for n, r in found.items() if r.writes > oldest),
                newest,
                ', '.join(n for n, r in found.items() if r.reads < newest),
                oldest,
                said,
            ),
        )
    pinned = sorted(n for n, r in found.items() if r.writes < r.reads)
    liftable = [n for n in pinned if found[n].reads <= oldest]
    if liftable:
        said += (
            ' Every process reads format level %d: lift [affinity]'
            'pin_format on %s, one process at a time.'
            % (oldest, ', '.join(liftable))
        )
    elif pinned:
        said += ' Pinned, until every process is upgraded: %s.' % ', '.join(
            pinned
        )
    return upgradecheck.Result(
        upgradecheck.Code.WARNING
        if len(by_version) > 1 or liftable
        else upgradecheck.Code.SUCCESS,
        said,
    )


def _ways(what: str, found: dict[str, str | None], unsaid: str) -> str:
    """'Conductors: a, b by ironic.conf; c by ...' from each process's
    entry; ``unsaid`` for a process that does not say (a conductor
    started by its launcher on an Ironic without the hook)."""
    if not found:
        return '%s: none in the group.' % what
    by_way: dict[str, list[str]] = {}
    for name, way in sorted(found.items()):
        if way == enabling.BY_IRONIC_CONF:
            way = 'ironic.conf ([DEFAULT]hash_ring_manager = %s)' % (
                enabling.IRONIC_NAME
            )
        by_way.setdefault(way or unsaid, []).append(name)
    return '%s: %s.' % (
        what,
        '; '.join(
            '%s by %s' % (', '.join(names), way)
            for way, names in sorted(by_way.items())
        ),
    )


def _this_ironic(conf: cfg.ConfigOpts) -> tuple[str, bool]:
    """Whether the Ironic installed here has the pluggable hash-ring
    manager, and what this ironic.conf sets; and whether it sets an
    option that this Ironic ignores (silently: an option it does not
    know)."""
    try:
        from ironic.common import hash_ring
    except ImportError:
        return 'Ironic is not installed where this check runs.', False
    named = conf.hash_ring_manager
    if not enabling.ironic_has_hook(hash_ring):
        ignored = named is not None and not enabling.ironic_loads_by_name(
            hash_ring
        )
        return (
            'The Ironic installed here has no [DEFAULT]hash_ring_manager '
            'with conductor hooks: conductors need '
            'ironic-affinity-conductor%s.'
            % (
                ', and this ironic.conf\'s hash_ring_manager = %s is '
                'ignored by it' % named
                if ignored
                else ''
            )
        ), ignored
    if named == enabling.IRONIC_NAME:
        return (
            'The Ironic installed here has [DEFAULT]hash_ring_manager, and '
            'this ironic.conf sets it to %s: Ironic\'s own commands place '
            'by affinity.' % named
        ), False
    return (
        'The Ironic installed here has [DEFAULT]hash_ring_manager, and this '
        'ironic.conf sets it to %s: only a launcher or the middleware '
        'enables affinity. Set it to %s to use Ironic\'s own commands.'
        % (
            named or '%s (the default)' % enabling.IRONIC_DEFAULT,
            enabling.IRONIC_NAME,
        )
    ), False


def main() -> int:
    conf = cfg.ConfigOpts()
    live_commands.register_opts(conf)
    # Ironic's own option, read from the same ironic.conf: registered
    # here as Ironic (with the hook) registers it.
    conf.register_opt(
        cfg.StrOpt('hash_ring_manager'),
    )
    status: int = upgradecheck.main(
        conf, project='ironic', upgrade_command=Checks(conf)
    )
    return status


if __name__ == '__main__':
    sys.exit(main())
