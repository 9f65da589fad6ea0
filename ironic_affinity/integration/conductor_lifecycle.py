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

"""A conductor's part in the affinity group, from its start to its stop.

Two ways lead here, and both call the same two functions:

- Ironic with the pluggable hash-ring manager (contrib/ironic/): Ironic
  calls ``conductor_started`` and ``conductor_stopping`` on the
  manager its conductor builds, which are :func:`starting` and
  :func:`stopping` (ring_manager.AffinityHashRingManager);
- Ironic without it: ``ironic-affinity-conductor`` wraps Ironic's
  conductor service to call them at the same moments (launchers).

It imports threading: the launchers import it only once Ironic's
command module has set the process up (Ironic 29 monkey-patches eventlet
there), so that its lock is the kind Ironic's threads need.
"""

import math
import threading
import time
from typing import Any

# The memberships of this process's conductors, by host: one, but for
# tests; whoever calls first (the hook or the launcher) joins, and the
# other finds it done.
_MEMBERSHIPS: dict[str, Any] = {}
_LOCK = threading.Lock()
# Whether this process has run a conductor, left since or not.
_RAN_A_CONDUCTOR = False


def starting(host: str) -> None:
    """Conductor ``host`` has registered with Ironic and is about to
    register its hardware interfaces: start this process's placement
    services and join the group.

    Ironic lists a conductor as active for a hardware type once it has
    registered its hardware interfaces. Joining just before that (the
    conductor's final name, host:port with json-rpc on another port than
    8089, is set by then) means that no process sees the conductor active
    in Ironic while the group lacks it, but for one watch interval of its
    view, which the ring manager reads through (see placement_state).
    """
    warm_up()
    _check_stop_budget()
    note_reloads()
    _join(host)


def stopping(
    host: str, staying_registered: bool = False, ironic_serves_for: float = 0.0
) -> bool:
    """Conductor ``host`` stops while it still serves: leave the group,
    then serve on until every process routes its nodes elsewhere (within
    half of ``[DEFAULT]graceful_shutdown_timeout``).

    :param staying_registered: Ironic keeps the conductor registered
        (SIGUSR1, for a restart): the entry stays until the member
        timeout, and the nodes with it; no drain.
    :param ironic_serves_for: how long Ironic itself serves on once this
        returns (see :func:`ironic_serves_for`): drained here only for
        the rest.
    :returns: whether it left (False as well when it never joined, or
        when another caller already made it leave).
    """
    began = time.monotonic()
    with _LOCK:
        membership = _MEMBERSHIPS.pop(host, None)
    if membership is None:
        return False
    if not membership.stop(staying_registered):
        return False
    _drain(host, began, ironic_serves_for)
    return True


def ironic_serves_for(host: str) -> float:
    """How long an Ironic with the conductor hooks (contrib/ironic/)
    keeps conductor ``host`` serving after its stop hook returns: up to
    ``[DEFAULT]hash_ring_reset_interval`` from the start of the stop,
    workers included, but only when more than one other conductor is
    online once it has deregistered (Ironic's own condition); else 0,
    and 0 when the database cannot say: the stop must still leave the
    group, and drain in full."""
    from ironic.conf import CONF
    from ironic.db import api as dbapi
    from oslo_log import log

    try:
        online = dbapi.get_instance().get_online_conductors()
    except Exception as exc:  # noqa: BLE001 - any error: drain in full
        log.getLogger(__name__).warning(
            'Conductor %(name)s cannot read the online conductors as it '
            'stops (%(error)s): it drains in full',
            {'name': host, 'error': exc},
        )
        return 0.0
    others = set(online) - {host}
    return float(CONF.hash_ring_reset_interval) if len(others) > 1 else 0.0


def is_conductor() -> bool:
    """Whether this process runs a conductor, joined or joining the
    group; or ran one: a conductor that left still looks nodes up while
    it drains, and is no API process for that."""
    return _RAN_A_CONDUCTOR


def _join(host: str) -> None:
    from ironic.conf import CONF
    from oslo_log import log

    from ironic_affinity.integration.ring import loader
    from ironic_affinity.membership import service

    global _RAN_A_CONDUCTOR
    with _LOCK:
        _RAN_A_CONDUCTOR = True
        if host in _MEMBERSHIPS:
            return
        # A conductor joins whichever side it votes for: one that votes
        # for Ironic's ring ("stock") is a member too, so that the others
        # know to place by Ironic's ring until it turns (see adoption).
        membership = service.ConductorMembership(
            CONF,
            host,
            frozenset(CONF.enabled_hardware_types),
            CONF.conductor.conductor_group or '',
            agreement=_agreement,
            sized_period=lambda: _sized_period(host),
            # Only where Ironic has the hook: the launcher says so itself.
            enabled_by=(
                loader.enabled_by() if loader.ironic_has_hook() else None
            ),
        )
        membership.start()
        _MEMBERSHIPS[host] = membership
    timeout = CONF.affinity.member_timeout
    if membership.member.joined.wait(timeout):
        _read_own_entry()
    else:
        log.getLogger(__name__).warning(
            'Conductor %(name)s has not joined the affinity group '
            'within %(timeout)s s; it registers with Ironic now and '
            'joins once the coordination backend answers. No node '
            'is routed to it until then.',
            {'name': host, 'timeout': timeout},
        )


def _read_own_entry() -> None:
    """Read the group again, now that this conductor is in it.

    The view's first read (warm_up) comes before the join. A view
    without this conductor has no vote for affinity when it is the
    first to join: the process would take the deployment to be on
    Ironic's ring, hard tags aside, until its next read, which a
    starved or cut-off process may not make for seconds.
    """
    from ironic.conf import CONF

    from ironic_affinity.integration import process_services

    process_services.started(CONF).view.refresh()


def _agreement() -> Any:
    """Where this process sees the deployment between Ironic's ring and
    affinity placement, for its conductor to publish: from the view as it
    is and the active conductors last read, without reading anything."""
    from ironic_affinity.integration import process_services
    from ironic_affinity.integration.ring import placement_state

    services = process_services.if_started()
    state = None if services is None else services.states.latest()
    if services is None or state is None:
        return None
    return placement_state.agreement_of(
        services.view.snapshot(), state.active, state.agreement
    )


# While this process has not read the nodes yet: an hour, the period the
# takeover rule gives about 1,000 nodes over a few conductors.
_PERIOD_UNSIZED = 3600.0


def _sized_period(own_name: str) -> float:
    """[affinity]adoption_period when unset: from the nodes and
    conductors this process sees, by Ironic's takeover pace."""
    from ironic.conf import CONF

    from ironic_affinity import adoption
    from ironic_affinity.integration import process_services

    services = process_services.if_started()
    if services is None or not services.node_tags.loaded.is_set():
        return _PERIOD_UNSIZED
    conductors = set(services.view.snapshot().members) | {own_name}
    return adoption.takeover_period(
        len(services.node_tags),
        len(conductors),
        CONF.conductor.periodic_max_workers,
        CONF.conductor.sync_local_state_interval,
    )


# A request routed to the conductor just before the last view changed
# still has to reach its workers: on Ironic 29 under a load average of
# 45, a power action received 0.9 s before the end of a 2 s drain asked
# for a worker 1.3 s after it arrived, after Ironic had shut them down.
IN_FLIGHT_SECONDS = 2.0


def drain_seconds(conf: Any) -> float:
    """How long a conductor that left the group keeps serving before
    Ironic stops it: every process reads the group once a watch interval,
    so within two of them none routes a request to it any more; then the
    requests routed before that have IN_FLIGHT_SECONDS to be taken up.
    Stopped at once, it would answer a request routed to it meanwhile
    with Ironic's "Can not schedule new futures after being shutdown"."""
    return 2.0 * float(conf.affinity.watch_interval) + IN_FLIGHT_SECONDS


# Leaving the group (tooz's leave, then the coordinator's stop) took up
# to 1 s on a loaded machine (Ironic 39, end to end): allowed twice that.
LEAVE_SECONDS = 2.0


def stop_budget(conf: Any) -> float | None:
    """Seconds of a conductor's stop the plugin may spend leaving the
    group and draining: half of ``[DEFAULT]graceful_shutdown_timeout``,
    the service launcher's bound on the whole stop. The other half is
    Ironic's own stop: killed past the bound, the conductor neither
    deregisters nor releases its reservations, and every ring keeps it
    until Ironic's heartbeat timeout. None: no bound (0 waits for ever;
    or the option is not registered in this process)."""
    timeout = getattr(conf, 'graceful_shutdown_timeout', None)
    if not timeout or timeout <= 0:
        return None
    return float(timeout) / 2.0


def _check_stop_budget() -> None:
    """Say at start, not at the first stop, when the launcher's bound
    leaves too little for the drain."""
    from ironic.conf import CONF
    from oslo_log import log

    budget = stop_budget(CONF)
    wanted = LEAVE_SECONDS + drain_seconds(CONF)
    if budget is not None and budget < wanted:
        log.getLogger(__name__).warning(
            '[DEFAULT]graceful_shutdown_timeout = %(timeout)s leaves this '
            'conductor %(budget).1f s to leave the affinity group and '
            'drain as it stops, of the %(wanted).1f s it takes: requests '
            'routed to it meanwhile may fail. Set it to %(least)d or more.',
            {
                'timeout': CONF.graceful_shutdown_timeout,
                'budget': budget,
                'wanted': wanted,
                'least': math.ceil(2 * wanted),
            },
        )


def drain_left(conf: Any, spent: float) -> float:
    """How long to drain, ``spent`` seconds into a stop: drain_seconds,
    or what is left of the stop budget if less."""
    wanted = drain_seconds(conf)
    budget = stop_budget(conf)
    if budget is None:
        return wanted
    return max(0.0, min(wanted, budget - spent))


def covered_by_ironic(
    conf: Any, spent: float, ironic_serves_for: float
) -> bool:
    """Whether Ironic's own wait, which ends ``ironic_serves_for`` seconds
    into the stop as this one counts (both from its start), leaves the
    conductor serving for the whole drain after ``spent`` seconds."""
    return ironic_serves_for - spent >= drain_seconds(conf)


def _drain(name: str, began: float, ironic_serves_for: float) -> None:
    """Serve on for drain_seconds after leaving, within the stop budget
    counted from ``began``, when the stop began, less what Ironic serves
    on by itself afterwards."""
    from ironic.conf import CONF
    from oslo_log import log

    wanted = drain_seconds(CONF)
    spent = time.monotonic() - began
    logger = log.getLogger(__name__)
    if covered_by_ironic(CONF, spent, ironic_serves_for):
        logger.info(
            'Conductor %(name)s left the affinity group; Ironic keeps it '
            'serving %(seconds).1f s more, until every process routes its '
            'nodes elsewhere',
            {'name': name, 'seconds': ironic_serves_for - spent},
        )
        return
    seconds = drain_left(CONF, spent)
    if seconds < wanted:
        logger.warning(
            'Conductor %(name)s left the affinity group; it serves only '
            '%(seconds).1f s more of %(wanted).1f s, within half of '
            '[DEFAULT]graceful_shutdown_timeout: a request routed to it '
            'before every process has read the group may fail',
            {'name': name, 'seconds': seconds, 'wanted': wanted},
        )
    else:
        logger.info(
            'Conductor %(name)s left the affinity group; it serves '
            '%(seconds).1f s more, until every process routes its nodes '
            'elsewhere',
            {'name': name, 'seconds': seconds},
        )
    time.sleep(seconds)


def warm_up() -> None:
    """Start this process's placement services (member view, node tags)
    now, in the worker, so that its first node lookup (a conductor's
    first periodic task, the API's first request) finds them read
    rather than reading them itself."""
    from ironic.conf import CONF

    from ironic_affinity.integration import process_services

    process_services.started(CONF)


def note_reloads() -> None:
    """Tell membership when the worker restarts for a SIGHUP.

    Ironic 39 runs the conductor under cotyledon, whose workers handle
    SIGHUP by reloading options and then terminating, to be started again
    at once (oslo.service's wrapper does not implement reload). Even a
    SIGHUP that changes no option does this, so the options' mutate hook
    is not enough to tell that stop from a shutdown.
    """
    try:
        import cotyledon
    except ImportError:  # another oslo.service backend: no restart
        return
    from ironic_affinity.membership import service

    original = cotyledon.Service.reload
    if getattr(original, '_affinity_wrapped', False):
        return

    def reload(self: Any) -> None:
        service.reload_requested()
        original(self)

    reload._affinity_wrapped = True  # type: ignore[attr-defined]
    cotyledon.Service.reload = reload
