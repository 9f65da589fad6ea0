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

"""The hash-ring manager Ironic uses in place of its own, with affinity.

It keeps Ironic's contract (see ../shared notes in
doc/source/contributor/ironic.rst): the constructor keywords
``use_groups`` and ``cache``, ``get_ring(driver, group)`` raising
DriverNotFound or TemporaryFailure, ``reset()``. What differs is who a
node goes to: the engine's choice over the conductors that are both in
the affinity group (so a dead one is gone within the member timeout) and
active in Ironic for that hardware type and group (so none is routed
work before it has finished starting).

State is per process and shared by every manager instance, as Ironic's
own manager shares its rings: Ironic builds a new manager per request in
the API.
"""

import threading
import time
from typing import Any

from ironic import objects
from ironic.common import context as ironic_context
from ironic.common import exception as ironic_exception
from ironic.conf import CONF
from oslo_log import log

from ironic_affinity import candidates
from ironic_affinity import engine
from ironic_affinity.integration import node_tags
from ironic_affinity.integration import ring
from ironic_affinity.membership import service
from ironic_affinity.membership import view

LOG = log.getLogger(__name__)

# Reasons quoted in one NoValidHost message, at most: a deployment may
# have hundreds of conductors.
_MAX_REASONS = 10


class _ProcessState:
    """The member view, node tags and Ironic's active conductors."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.view: view.MemberView | None = None
        self.tags: node_tags.NodeTagCache | None = None
        self.active: dict[str, set[str]] = {}
        self.active_at = 0.0
        self.active_failing = False
        self.engine_key: tuple[Any, ...] | None = None
        self.engine: engine.PlacementEngine | None = None
        # Rings by (engine key, hardware type, group, use_groups); None
        # where no live conductor runs that. Emptied on each new engine.
        self.rings: dict[tuple[Any, ...], ring.AffinityRing | None] = {}
        self.warned_orphans: dict[str, tuple[Any, ...]] = {}
        self.warned_missing: frozenset[str] = frozenset()

    def start(self) -> None:
        # Lazily, on first use: the manager is built before Ironic has
        # finished reading its configuration in some processes.
        if self.view is not None and self.tags is not None:
            return
        with self.lock:
            self._start()

    def _start(self) -> None:
        if self.view is None:
            member_view = service.member_view(CONF)
            member_view.start()
            self.view = member_view
        if self.tags is None:
            cache = node_tags.NodeTagCache(
                CONF.database.connection,
                CONF.affinity.node_tags_key,
                CONF.affinity.node_tags_interval,
                CONF.affinity.node_tags_rescan_interval,
            )
            cache.start()
            self.tags = cache


_STATE = _ProcessState()


def _engine_key(
    snapshot: view.Snapshot, active: dict[str, set[str]]
) -> tuple[int, int]:
    # The active dict object is replaced only when its content changes.
    return (snapshot.version, id(active))


def _read_active_conductors() -> dict[str, set[str]]:
    """Ironic's active conductors by 'group:hardware_type', read now."""
    read = getattr(objects.Conductor, 'get_active_hardware_type_dict', None)
    if read is not None:  # Ironic 32 and later
        return read(  # type: ignore[no-any-return]
            ironic_context.get_admin_context(), use_groups=True
        )
    # Ironic 29 has the query on its database API only.
    from ironic.db import api as dbapi

    return dbapi.get_instance().get_active_hardware_type_dict(  # type: ignore[no-any-return]
        use_groups=True
    )


class AffinityHashRingManager:
    """Ironic's HashRingManager contract, placing by affinity."""

    def __init__(self, use_groups: bool = True, cache: bool = True) -> None:
        self.use_groups = use_groups
        self.cache = cache

    @classmethod
    def reset(cls) -> None:
        with _STATE.lock:
            _STATE.active_at = 0.0

    def _active(self) -> dict[str, set[str]]:
        """Ironic's active conductors by 'group:hardware_type'."""
        limit = time.monotonic() - CONF.hash_ring_reset_interval
        if self.cache and _STATE.active_at >= limit:
            return _STATE.active
        with _STATE.lock:
            if not self.cache or _STATE.active_at < limit:
                try:
                    active = _read_active_conductors()
                except Exception as exc:
                    if not _STATE.active:
                        raise
                    # The database is away (restart, failover): keep the
                    # conductors last seen active rather than drop every
                    # node; membership still removes a dead one. Retried
                    # after the reset interval, not on every lookup.
                    if not _STATE.active_failing:
                        LOG.warning(
                            'Cannot read the active conductors from the '
                            'database (%(error)s); placing over the %(count)d '
                            'last seen until it answers again.',
                            {
                                'error': exc,
                                'count': len(
                                    set().union(*_STATE.active.values())
                                ),
                            },
                        )
                    _STATE.active_failing = True
                    _STATE.active_at = time.monotonic()
                    return _STATE.active
                if _STATE.active_failing:
                    LOG.info('Active conductors readable again')
                    _STATE.active_failing = False
                fresh = {k: set(v) for k, v in active.items()}
                # Keep the same object while nothing changed: the engine
                # (and its placement memo) is keyed by it.
                if fresh != _STATE.active:
                    _STATE.active = fresh
                _STATE.active_at = time.monotonic()
            return _STATE.active

    def _engine(
        self, snapshot: view.Snapshot, active: dict[str, set[str]]
    ) -> engine.PlacementEngine:
        key = _engine_key(snapshot, active)
        if _STATE.engine_key == key and _STATE.engine is not None:
            return _STATE.engine
        profiles = candidates.live_profiles(snapshot.members, active)
        self._warn_missing(snapshot, active)
        placer = engine.PlacementEngine(profiles)
        _STATE.engine_key, _STATE.engine = key, placer
        _STATE.rings = {}
        return placer

    def _warn_missing(
        self, snapshot: view.Snapshot, active: dict[str, set[str]]
    ) -> None:
        missing = candidates.not_members(snapshot.members, active)
        if snapshot.stale or missing == _STATE.warned_missing:
            return
        _STATE.warned_missing = missing
        if missing:
            LOG.error(
                'Conductor(s) %(names)s are active in Ironic but not in the '
                'affinity group: they run without ironic-affinity, or cannot '
                'reach its coordination backend. No node is routed to them '
                'while this lasts, and they may work nodes this process '
                'routes elsewhere: run every conductor and API service with '
                'the same [affinity] settings.',
                {'names': ', '.join(sorted(missing))},
            )

    def get_ring(self, driver_name: str, conductor_group: str) -> Any:
        try:
            return self._get_ring(driver_name, conductor_group)
        except (
            ironic_exception.DriverNotFound,
            ironic_exception.TemporaryFailure,
        ):
            # As Ironic does: a conductor may just have come or gone.
            self.reset()
        return self._get_ring(driver_name, conductor_group)

    def _get_ring(self, driver_name: str, conductor_group: str) -> Any:
        _STATE.start()
        assert _STATE.view is not None and _STATE.tags is not None
        active = self._active()
        if not active:
            raise ironic_exception.TemporaryFailure()
        group = (conductor_group or '') if self.use_groups else ''
        snapshot = _STATE.view.snapshot()
        placer = self._engine(snapshot, active)
        # Ironic asks for a ring on every lookup: build each once per
        # engine (i.e. per membership and active-conductor change).
        # Keyed by the engine's own key too: a ring built by a thread that
        # raced a membership change must never serve the new membership.
        ring_key = (
            _engine_key(snapshot, active),
            driver_name,
            group,
            self.use_groups,
        )
        if ring_key not in _STATE.rings:
            _STATE.rings[ring_key] = self._build_ring(
                placer, snapshot, active, driver_name, group
            )
        found = _STATE.rings[ring_key]
        if found is None:
            # None active in Ironic, or active but none in the group: as
            # far as placement goes, nobody runs this hardware type.
            # DriverNotFound is what every caller handles (conductors skip
            # the node, the API answers 4xx); an empty ring would make
            # Ironic's driver endpoints pick from an empty list.
            raise ironic_exception.DriverNotFound(driver_name=driver_name)
        return found

    def _build_ring(
        self,
        placer: engine.PlacementEngine,
        snapshot: view.Snapshot,
        active: dict[str, set[str]],
        driver_name: str,
        group: str,
    ) -> ring.AffinityRing | None:
        if self.use_groups:
            hosts = active.get('%s:%s' % (group, driver_name), set())
        else:
            hosts = set()
            for key, found in active.items():
                if key.rpartition(':')[2] == driver_name:
                    hosts |= found
        live = hosts & set(snapshot.members)
        if not live:
            return None
        assert _STATE.tags is not None
        return ring.AffinityRing(
            placer,
            driver_name,
            group.lower(),
            live,
            _STATE.tags.get,
            self._orphaned,
            lambda reason: ironic_exception.NoValidHost(reason=reason),
        )

    def _orphaned(self, node: str, evaluation: engine.Evaluation) -> str:
        excluded = [v for v in evaluation.verdicts if v.excluded]
        if excluded:
            shown = '; '.join(
                '%s: %s' % (v.conductor, v.excluded)
                for v in excluded[:_MAX_REASONS]
            )
            if len(excluded) > _MAX_REASONS:
                shown += '; and %d more' % (len(excluded) - _MAX_REASONS)
        else:
            shown = 'no live conductor in the affinity group runs it'
        reason = 'no conductor may take node %s by its affinity tags (%s)' % (
            node,
            shown,
        )
        # Once per node per change of what decides it, not per lookup.
        marker = tuple(v.excluded for v in evaluation.verdicts)
        if _STATE.warned_orphans.get(node) != marker:
            _STATE.warned_orphans[node] = marker
            LOG.warning('Orphaned node: %s', reason)
        return reason
