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

"""What one Ironic process holds for placement, started once.

Every ring manager instance of a process shares these, as Ironic's own
managers share their rings (the API builds a new manager per request):
the member view, the node tag cache, the database engine and the
placement states built over them. They start on first use, not at
import: some processes build a manager before Ironic has finished
reading its configuration, and the API builds its application in a
parent process that then forks its workers, where threads started
earlier would not exist.
"""

from collections.abc import Callable
import threading
import time

from oslo_config import cfg
from oslo_log import log

from ironic_affinity import adoption
from ironic_affinity import exception
from ironic_affinity import profile
from ironic_affinity.integration import metrics
from ironic_affinity.integration import placement_metrics
from ironic_affinity.integration.data import ironic_db
from ironic_affinity.integration.data import live
from ironic_affinity.integration.node_tags import tag_board
from ironic_affinity.integration.node_tags import tag_cache
from ironic_affinity.integration.ring import active_source
from ironic_affinity.integration.ring import capacity_state
from ironic_affinity.integration.ring import missing_members
from ironic_affinity.integration.ring import orphans
from ironic_affinity.integration.ring import placement_state
from ironic_affinity.membership import backend
from ironic_affinity.membership import lease
from ironic_affinity.membership import service
from ironic_affinity.membership import view
from ironic_affinity.membership import view_snapshot

LOG = log.getLogger(__name__)


def absence_grace(conf: cfg.ConfigOpts) -> float:
    """Seconds a conductor may be active in Ironic without being in the
    group before it is an error: Ironic lists a dead conductor until its
    heartbeat timeout, read again every reset interval, and a view sees a
    new member within a watch interval or two."""
    return float(
        conf.conductor.heartbeat_timeout
        + conf.hash_ring_reset_interval
        + 2 * conf.affinity.watch_interval
        + conf.affinity.member_timeout
    )


class ProcessServices:
    """The view, tag cache, database and states of this process, and its
    metrics reporter when Ironic's metrics backend is not noop."""

    def __init__(
        self, conf: cfg.ConfigOpts, sink: placement_metrics.Sink | None = None
    ) -> None:
        self.conf = conf
        self.view: view.MemberView = service.member_view(conf)
        # One engine for both readers: the tag cache's thread, and the
        # active conductors read under the states' lock, one at a time.
        self.database = ironic_db.IronicDatabase(
            conf.database.connection, pool_size=2
        )
        self.node_tags = tag_cache.NodeTagCache(
            self.database,
            tag_board.TagBoard(
                backend.backend_url(conf),
                conf.affinity.group_name,
                'node-tags-%s' % view.observer_id(),
                conf.affinity.member_timeout,
            ),
            conf.affinity.node_tags_key,
            conf.affinity.node_tags_interval,
            conf.affinity.node_tags_rescan_interval,
            service.api_group(conf),
            warm_timeout=float(conf.affinity.member_timeout),
        )
        self.capacity = capacity_state.CapacityStates(
            self.node_tags,
            lambda: float(conf.affinity.node_tags_interval),
            LOG,
        )
        self.orphans = orphans.OrphanReports(LOG)
        self.missing = missing_members.MissingMembers(
            LOG, lambda: absence_grace(conf)
        )
        self.states = placement_state.PlacementStates(
            self.view,
            active_source.ActiveConductorSource(
                lambda: self.database.live_conductors(
                    conf.conductor.heartbeat_timeout
                ),
                LOG,
                # Within a heartbeat timeout of the database's return,
                # every live conductor has beaten again.
                recovery_grace=lambda: float(conf.conductor.heartbeat_timeout),
                # The tag cache's failures tell of an outage that no
                # lookup of this process saw.
                database_failed_at=lambda: self.database.failed_at,
            ),
            lambda: float(conf.hash_ring_reset_interval),
            static=self.database.sqlite,
            on_missing=self.missing.observe,
            on_agreement=_log_agreement,
        )
        self.reporter: placement_metrics.PlacementReporter | None = None
        if sink is not None:
            self.reporter = placement_metrics.PlacementReporter(
                sink,
                self.states.current,
                self.view,
                self._deployment_in_memory,
                lambda: float(conf.affinity.metrics_interval),
                # The collector's figures leave a process only with a
                # conductor's sensor data: there, conductors report the
                # placement, as nothing an API process collects is sent.
                places=lambda: (
                    _API_PROCESS or conf.metrics.backend == 'collector'
                ),
                own_lease=lease.own,
                ring_lookup=_ring_lookup,
                # A row per ACTIVE node each report: the one read of
                # the nodes table outside the tag cache's reader.
                read_taken_by=self.database.taken_by,
            )
            self.node_tags.observer = self.reporter.observe_tags

    def _deployment_in_memory(
        self, snapshot: view_snapshot.Snapshot
    ) -> live.Deployment:
        if not self.node_tags.loaded.is_set():
            raise exception.AffinityError(
                'node tags not read yet: no placement to report'
            )
        return live.from_memory(
            self.conf, snapshot, self.database, self.node_tags.nodes()
        )

    def start(self) -> None:
        self.view.start()
        self.node_tags.start()
        if self.reporter is not None:
            self.reporter.start()


def _log_agreement(agreement: adoption.Agreement) -> None:
    """Say where this process now places, when that changes."""
    switches = agreement.adoption
    newest = switches.switches[-1] if switches.switches else None
    if newest is None or newest.at <= adoption.ORIGIN_AT:
        LOG.info(
            'Placement by %(side)s%(due)s',
            {
                'side': switches.final_side(),
                'due': '; a switch to %s is due' % agreement.target
                if agreement.due
                else '',
            },
        )
        return
    LOG.info(
        'Placement switches to %(to)s from %(at)s over %(period)s s'
        '%(due)s (switches known: %(count)d)',
        {
            'to': newest.to,
            'at': time.strftime('%H:%M:%S', time.gmtime(newest.at)),
            'period': newest.period,
            'count': len(switches.switches),
            'due': '; a switch to %s is due' % agreement.target
            if agreement.due
            else '',
        },
    )


#: The node's conductor as this process's ring answers Ironic; set by
#: the ring manager's module as it loads (this one does not import it,
#: which imports this one).
RING_LOOKUP: Callable[[profile.NodeRequest], str | None] | None = None


def _ring_lookup(node: profile.NodeRequest) -> str | None:
    return None if RING_LOOKUP is None else RING_LOOKUP(node)


_LOCK = threading.Lock()
_STARTED: ProcessServices | None = None
# Whether this process serves Ironic's API: only those report placement
# metrics, as each report places every node.
_API_PROCESS = False


def mark_api_process() -> None:
    """Note that this process serves Ironic's API (cheap; idempotent)."""
    global _API_PROCESS
    _API_PROCESS = True


def started(conf: cfg.ConfigOpts) -> ProcessServices:
    """This process's services, started at the first call."""
    global _STARTED
    found = _STARTED  # one read: the path of every lookup after the first
    if found is not None:
        return found
    with _LOCK:
        if _STARTED is None:
            services = ProcessServices(
                conf, metrics.sink(conf, api_process=_API_PROCESS)
            )
            services.start()
            _STARTED = services
        return _STARTED


def if_started() -> ProcessServices | None:
    """This process's services if they have started, else None."""
    return _STARTED
