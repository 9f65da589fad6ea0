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

"""Membership wired to configuration, as a service process uses it.

:class:`ConductorMembership` keeps a conductor in the group with the
profile its [affinity] options describe, and republishes it when the
options are reloaded (oslo.config mutate hooks run on SIGHUP). Building it
refuses a contradictory configuration before anything joins.

API processes that route by affinity announce themselves in a group of
their own (:func:`announce_api`), never in the conductors' group, whose
members are placement candidates. Nothing routes by that group: it lets
the upgrade check see conductors running the plugin behind an API that
does not (:func:`api_processes`).
"""

import atexit
from collections.abc import Callable
import os
import socket
import time
from typing import Any

from oslo_config import cfg
from oslo_log import log

from ironic_affinity import adoption
from ironic_affinity import conf as affinity_conf
from ironic_affinity import exception
from ironic_affinity import outage
from ironic_affinity import profile
from ironic_affinity import publication
from ironic_affinity.membership import backend
from ironic_affinity.membership import capabilities
from ironic_affinity.membership import lease
from ironic_affinity.membership import levels
from ironic_affinity.membership import member
from ironic_affinity.membership import reading
from ironic_affinity.membership import view

LOG = log.getLogger(__name__)
# By conductor: what its pin keeps it from publishing, warned once.
_HELD: outage.Conditions[str] = outage.Conditions(LOG)


def member_view(conf: cfg.ConfigOpts) -> view.MemberView:
    """A view of the group as configured (not started)."""
    group = conf.affinity
    return view.MemberView(
        backend.backend_url(conf),
        group.group_name,
        group.watch_interval,
        group.member_timeout,
        own_lease=lease.own,
    )


# A stop this soon after a reload is the launcher restarting the worker,
# not a shutdown.
RELOAD_RESTART_WINDOW = 30.0


_RELOAD_REQUESTED_AT: float | None = None


def reload_requested() -> None:
    """Note that this process was asked to reload (SIGHUP): a stop that
    follows is a restart under the same name, not a shutdown."""
    global _RELOAD_REQUESTED_AT
    _RELOAD_REQUESTED_AT = time.monotonic()


def api_group(conf: cfg.ConfigOpts) -> str:
    """The group API processes with the plugin announce themselves in."""
    return '%s.api' % conf.affinity.group_name


# This process's announcement, by pid: a forked child starts its own.
_ANNOUNCED: dict[int, member.Member] = {}


def announce_api(
    conf: cfg.ConfigOpts, entry: Callable[[], dict[str, object]]
) -> member.Member:
    """Keep this API process in the API group while it lives, with
    ``entry()`` as its entry; the caller updates it through the member
    returned (its own thread publishes it).

    Idempotent, and cheap once done: called on every request. Starts a
    thread, so never call it in a process that forks afterwards.
    """
    found = _ANNOUNCED.get(os.getpid())
    if found is not None:
        return found
    group = conf.affinity
    presence = member.Member(
        backend.backend_url(conf),
        api_group(conf),
        '%s:%d' % (socket.gethostname(), os.getpid()),
        entry(),
        group.heartbeat_interval,
        group.member_timeout,
        role='API process',
        routine_updates=True,
    )
    presence.start()
    _ANNOUNCED[os.getpid()] = presence
    # Leave on a clean exit; after a crash the entry expires.
    atexit.register(presence.stop)
    return presence


def api_processes(
    conf: cfg.ConfigOpts, timeout: float
) -> dict[str, levels.Runs]:
    """The API processes announced now, read once within ``timeout``,
    each with what it says it runs.

    :raises: tooz errors when the backend cannot be read.
    """
    return _entries(conf, api_group(conf), timeout)


def conductor_entries(
    conf: cfg.ConfigOpts, timeout: float
) -> dict[str, levels.Runs]:
    """The conductors of the group now, each with what it says it runs,
    read once within ``timeout``.

    :raises: tooz errors when the backend cannot be read.
    """
    return _entries(conf, conf.affinity.group_name, timeout)


def _entries(
    conf: cfg.ConfigOpts, group: str, timeout: float
) -> dict[str, levels.Runs]:
    reader = backend.coordinator(
        backend.backend_url(conf),
        view.observer_id(),
        conf.affinity.member_timeout,
    )
    reader.start(start_heart=False)
    try:
        found = reading.members_by_name(reader, group.encode('utf-8'), timeout)
    finally:
        reader.stop()
    return {name: levels.runs_of(raw) for name, raw in (found or {}).items()}


class ConductorMembership:
    """This conductor's place in the group, following its configuration."""

    def __init__(
        self,
        conf: cfg.ConfigOpts,
        name: str,
        hardware_types: frozenset[str] | None = None,
        conductor_group: str = '',
        agreement: Callable[[], adoption.Agreement | None] = lambda: None,
        sized_period: Callable[[], float] = float,
        enabled_by: str | None = None,
    ) -> None:
        """:param enabled_by: how the plugin reached this conductor,
            published for the upgrade check; None publishes nothing.
        :param agreement: where this process sees the deployment
            between Ironic's ring and affinity placement
            (ironic_affinity.adoption), None before it knows; read at
            every heartbeat, so without waiting on anything.
        :param sized_period: the adoption period that keeps takeovers
            paced, used while ``[affinity]adoption_period`` is unset.
        """
        self.conf = conf
        self.name = name
        self.hardware_types = hardware_types
        self.conductor_group = conductor_group
        # hash_ring_manager is read at start only: the vote is this
        # process's, cast when it starts.
        self.vote = (
            adoption.STOCK
            if conf.affinity.hash_ring_manager == adoption.STOCK
            else adoption.AFFINITY
        )
        self.voted_at = time.time()
        self._agreement = agreement
        self._sized_period = sized_period
        self._enabled_by = enabled_by
        # The switches this conductor published last (adoption.recorded).
        self._history: tuple[adoption.Switch, ...] = ()
        current = self._profile()
        group = conf.affinity
        #: Until it runs out, this conductor places nodes on itself.
        self.lease = lease.Lease(
            name,
            group.member_timeout,
            lease.margin_for(group.member_timeout, group.heartbeat_interval),
        )
        self.member = member.Member(
            backend.backend_url(conf),
            group.group_name,
            name,
            self._encode(current),
            group.heartbeat_interval,
            group.member_timeout,
            compose=self._compose,
            lease=self.lease,
        )

    def _compose(
        self, previous: object | None, wanted: dict[str, object]
    ) -> dict[str, object]:
        """What to publish at this heartbeat (ironic_affinity.publication),
        encoded; a finished change is then no longer published."""
        current = capabilities.decode(self.name, wanted)
        before: profile.ConductorProfile | None = None
        if previous is not None:
            try:
                before = capabilities.decode(self.name, previous)
            except exception.InvalidCapabilities:
                # An entry we cannot read (a foreign or damaged one): no
                # change to roll out from it.
                before = current
        group = self.conf.affinity
        configured = group.adoption_period
        period = min(
            float(
                configured if configured is not None else self._sized_period()
            ),
            capabilities.MAX_PERIOD,
        )
        found = publication.compose(
            before,
            current,
            adoption.Vote(self.vote, self.voted_at, period),
            self._history,
            self._agreement(),
            publication.Settings(
                rebalance_period=group.rebalance_period,
                adoption_period_set=configured is not None,
                lead=float(group.member_timeout),
            ),
            time.time(),
        )
        self._history = found.history
        for switch in found.recorded:
            LOG.info(
                'Conductor %(name)s records a switch of placement '
                'to %(to)s, from %(at).3f over %(period)s s',
                {
                    'name': self.name,
                    'to': switch.to,
                    'at': switch.at,
                    'period': switch.period,
                },
            )
        return self._encode(capabilities.fit(found.profile))

    def _encode(
        self, conductor: profile.ConductorProfile
    ) -> dict[str, object]:
        level = levels.writes(self.conf)
        found = capabilities.encode(conductor, level)
        held = sorted(capabilities.encode(conductor).keys() - found.keys())
        if held:
            _HELD.raised(
                self.name,
                tuple(held),
                'Conductor %(name)s does not publish %(keys)s: '
                '[affinity]pin_format is %(pin)d, and they need format '
                'level %(level)d. Lift the pin once every process reads '
                'it ("ironic-affinity-status upgrade check" says when).',
                {
                    'name': self.name,
                    'keys': ', '.join(held),
                    'pin': level,
                    'level': levels.LEVEL,
                },
            )
        else:
            _HELD.cleared(self.name)
        return {**found, **levels.describe(self.conf, self._enabled_by)}

    def _profile(self) -> profile.ConductorProfile:
        current = affinity_conf.conductor_profile(
            self.conf, self.name, self.hardware_types, self.conductor_group
        )
        conflicts = current.soft_conflicts()
        if conflicts:
            LOG.warning(
                '[affinity]soft_affinity_tags and soft_anti_affinity_tags '
                'both contain %(tags)s; soft_anti_affinity_tags wins',
                {'tags': ', '.join(sorted(conflicts))},
            )
        return current

    def start(self) -> None:
        self.conf.register_mutate_hook(self._reloaded)
        # The process's member view leaves this conductor out while its
        # lease has run out (membership/view.py).
        lease.set_own(self.lease)
        self.member.start()

    def stop(self, staying_registered: bool = False) -> bool:
        """Leave the group, unless the conductor is coming back.

        :returns: whether it left; if it did not, its entry stays until
            the member timeout and its nodes with it.
        :param staying_registered: Ironic keeps the conductor registered
            through this stop (SIGUSR1 before it, for a restart): the
            entry is left to expire after the member timeout, so that a
            conductor back within it keeps its nodes, as it keeps them on
            Ironic's own ring.
        """
        # Ironic 39's service launcher restarts the conductor's worker
        # process on SIGHUP, right after the options are reloaded
        # (conductor_lifecycle.note_reloads notes it). Leaving the group
        # then would move every node of this conductor away and back
        # within seconds; the entry is left to the next worker instead.
        reloading = (
            _RELOAD_REQUESTED_AT is not None
            and time.monotonic() - _RELOAD_REQUESTED_AT < RELOAD_RESTART_WINDOW
        )
        if reloading or staying_registered:
            self.member.hand_over()
            return False
        self.lease.end()
        self.member.stop()
        return True

    def _reloaded(self, conf: cfg.ConfigOpts, changed: Any) -> None:
        # A bad new value is refused and the last good profile stays
        # published: a typo on SIGHUP must not unplace this conductor.
        try:
            updated = self._profile()
        except (exception.AffinityError, cfg.Error, ValueError) as exc:
            LOG.error(
                'Reloaded [affinity] options refused, keeping the previous '
                'affinity profile: %(error)s',
                {'error': exc},
            )
            return
        LOG.info(
            'Affinity profile of conductor %(name)s reloaded',
            {'name': self.name},
        )
        self.member.update(self._encode(updated))
