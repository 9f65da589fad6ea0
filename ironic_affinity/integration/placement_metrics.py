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

"""Placement metrics, sent through Ironic's own metrics framework.

Every process that places nodes reports, under the prefix
``ironic_affinity`` (after Ironic's ``[metrics] global_prefix`` and, with
``prepend_host``, the host, as Ironic composes its own names):

``membership.members`` (gauge)
    Live members in this process's view of the group.
``membership.view_age`` (gauge, seconds)
    Since the group was last read successfully.
``membership.read_errors`` (counter)
    Failed reads of the group since the previous report.
``node_tags.refresh`` (timer, ms) and ``node_tags.rows`` (gauge)
    Each refresh of the node tag cache: how long, and how many nodes it
    then holds.

API processes (with the collector backend, conductors: see
process_services) also place every node once per report, from the nodes
their tag cache holds (driver, group and tags, published by the one
reader of Ironic's nodes table; only the conductors, and for the
takeovers the ACTIVE nodes' uuids, are read from the database), and
report:

``placement.nodes.<conductor>`` (gauge)
    Nodes placed on each live conductor; the name with every character
    other than a letter, digit or ``_`` made ``_`` (``127.0.0.1:8091`` is
    ``127_0_0_1_8091``, ``conductor-1`` is ``conductor_1``). A conductor
    that leaves is reported once more, at 0.
``placement.orphans`` (gauge)
    Nodes that no live conductor may take.
``placement.moved`` (counter)
    Nodes whose conductor changed since the previous report: what a
    membership or tag change moved.
``placement.takeovers_pending`` (gauge)
    ACTIVE nodes placed on a conductor other than the one that last took
    them over (:mod:`ironic_affinity.takeovers`): those Ironic's periodic
    takeover has yet to reach. Not sent when the read of the nodes'
    takeovers fails; the other gauges are.

and, when any conductor sets ``[affinity]max_nodes``:

``placement.spilled`` (gauge)
    Nodes placed elsewhere than their first choice, which was full.
``placement.over_capacity`` (gauge)
    Nodes beyond the ``max_nodes`` of their conductors, summed: nodes
    every conductor they may use turned away. Alert on it above 0.

and, while a conductor's change rolls out (``[affinity]rebalance_period``;
the gauges above then count nodes where they are at the moment, not
where they will end):

``placement.rollout_pending`` (gauge)
    Nodes that have yet to move to the conductor they will end on; sent
    once more, at 0, when the rollout has ended.

and, while the deployment places by Ironic's ring or switches between it
and affinity placement (:mod:`ironic_affinity.adoption`; the gauges above
then count nodes where the process's ring puts them, either side):

``placement.adoption_pending`` (gauge)
    Nodes that have yet to change side; sent once more, at 0, when the
    switch has ended.

No Ironic import: the sink is Ironic's metric logger, bound by
:mod:`ironic_affinity.integration.metrics`.
"""

from collections.abc import Callable
from collections.abc import Mapping
import re
import threading
import time
from typing import Any
from typing import Protocol

from oslo_log import log

from ironic_affinity import adoption
from ironic_affinity import outage
from ironic_affinity import placement
from ironic_affinity import profile
from ironic_affinity import takeovers
from ironic_affinity.integration.data import ironic_db
from ironic_affinity.integration.data import live
from ironic_affinity.integration.ring import placement_state
from ironic_affinity.membership import lease
from ironic_affinity.membership import view
from ironic_affinity.membership import view_snapshot

LOG = log.getLogger(__name__)

# Prometheus's metric names (ironic-prometheus-exporter only makes them
# lower case and '__' '_'): a '-' fails the whole notification with
# prometheus_client 0.21 (2025.1).
_NOT_IN_NAMES = re.compile(r'[^A-Za-z0-9_]')


class Sink(Protocol):
    """What is used of Ironic's MetricLogger."""

    def send_gauge(self, name: str, value: float) -> Any: ...

    def send_counter(self, name: str, value: float) -> Any: ...

    def send_timer(self, name: str, value: float) -> Any: ...


def metric_part(name: str) -> str:
    """``name`` as one part of a metric name."""
    return _NOT_IN_NAMES.sub('_', name)


class PlacementReporter:
    """Sends the metrics above every ``interval`` seconds."""

    def __init__(
        self,
        sink: Sink,
        current: Callable[[], placement_state.PlacementState],
        member_view: view.MemberView,
        read_deployment: Callable[[view_snapshot.Snapshot], live.Deployment],
        interval: Callable[[], float],
        places: Callable[[], bool] = lambda: False,
        wall_clock: Callable[[], float] = time.time,
        own_lease: Callable[[], lease.Lease | None] = lambda: None,
        ring_lookup: Callable[[profile.NodeRequest], str | None] | None = None,
        read_taken_by: Callable[[], Mapping[str, str | None]] | None = None,
    ) -> None:
        """:param current: the process's placement state now.
        :param read_deployment: every node and live conductor, as the
            live commands read them.
        :param places: whether to place every node and report placement
            too (in API processes).
        :param wall_clock: seconds since the epoch, for rollouts.
        :param own_lease: this process's conductor's lease, if any.
        :param ring_lookup: the node's conductor as this process's ring
            answers it (None for none): asked for every node while the
            deployment is not wholly on affinity placement, where
            Ironic's own ring places some nodes.
        :param read_taken_by: the nodes Ironic's takeover considers, with
            who last took each over (see ironic_db.taken_by); without it,
            no ``placement.takeovers_pending``.
        """
        self.sink = sink
        self._current = current
        self._view = member_view
        self._read_deployment = read_deployment
        self._interval = interval
        self._places = places
        self._errors_sent = 0
        self._placed: dict[str, str | None] | None = None
        self._loads: dict[str, int] = {}
        self._wall_clock = wall_clock
        self._own_lease = own_lease
        # Whether the last report was during a rollout, or a switch.
        self._rolling = False
        self._switching = False
        self._capacity = False
        self._ring_lookup = ring_lookup
        self._read_taken_by = read_taken_by
        self._outage = outage.Outage(LOG)
        # Apart from the report's: the other gauges go on without it.
        self._takeover_reads = outage.Outage(LOG)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def observe_tags(self, seconds: float, nodes: int, full: bool) -> None:
        """A node tag cache refresh (its observer)."""
        self.sink.send_timer('node_tags.refresh', seconds * 1000.0)
        self.sink.send_gauge('node_tags.rows', nodes)

    def start(self) -> None:
        self._thread = threading.Thread(
            target=self._run, name='affinity-metrics', daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)

    def _run(self) -> None:
        while not self._stop.wait(self._interval()):
            try:
                self.report()
            except Exception as exc:  # noqa: BLE001 - metrics never stop us
                self._outage.failed(
                    'Cannot report placement metrics: %(error)s',
                    {'error': exc},
                )
            else:
                self._outage.recovered(
                    'Placement metrics reported again after %(seconds).0f s',
                    {},
                )

    def report(self) -> None:
        """Send one report now."""
        snapshot = self._current().members
        self.sink.send_gauge('membership.members', len(snapshot.members))
        age = snapshot.age()
        if age is not None:
            self.sink.send_gauge('membership.view_age', round(age, 3))
        # The view itself, not the state's copy: a failed read changes
        # no member, so the state is not rebuilt for it.
        self.sink.send_gauge(
            'membership.stale', int(self._view.snapshot().stale)
        )
        own = self._own_lease()
        if own is not None:
            self.sink.send_gauge('membership.stood_down', int(own.lapsed()))
        errors = self._view.read_errors
        self.sink.send_counter(
            'membership.read_errors', errors - self._errors_sent
        )
        self._errors_sent = errors
        if self._places():
            self._report_placement(self._read_deployment(snapshot))

    def _report_placement(self, deployment: live.Deployment) -> None:
        placer = placement.Placement(deployment.conductors)
        now = self._wall_clock()
        settled = placer.settle(deployment.nodes, now)
        answers = placer.answer_all(
            deployment.nodes, now, settled, moves=False
        )
        rolling = placer.rolling(now)
        # Where nodes are now, as the rings answer, and how many have
        # yet to reach the conductor they will end on; by uuid, which a
        # rename does not change, for the moves.
        loads = {c.name: 0 for c in placer.conductors}
        placed: dict[str, str | None] = {}
        waiting = 0
        switches = deployment.agreement.adoption
        all_on = switches.all_on(now)
        switching = all_on is None
        lookup = self._ring_lookup if all_on != adoption.AFFINITY else None
        to_switch = 0
        for node, answer in zip(deployment.nodes, answers, strict=True):
            conductor = answer.conductor
            if lookup is not None:
                # Ironic's ring places some nodes: the ring's answer,
                # whichever side the node is on.
                conductor = lookup(node)
                loads.setdefault(conductor or '', 0)
            placed[node.uuid or node.name] = conductor
            waiting += answer.conductor != answer.final
            if switching:
                to_switch += bool(switches.pending_of(node, now))
            if conductor is not None:
                loads[conductor] += 1
        loads.pop('', None)
        if switching or self._switching:
            self.sink.send_gauge('placement.adoption_pending', to_switch)
        self._switching = switching
        if rolling is not None or self._rolling:
            # Sent once more, as 0, when the rollout has ended: a gauge
            # keeps its last value.
            self.sink.send_gauge(
                'placement.rollout_pending',
                0 if rolling is None else waiting,
            )
        self._rolling = rolling is not None
        if settled is not None:
            assignment = settled.assignment
            self.sink.send_gauge('placement.spilled', len(assignment.spilled))
            self.sink.send_gauge(
                'placement.over_capacity',
                sum(assignment.over_capacity().values()),
            )
        elif self._capacity:
            # The last max_nodes is gone: once more at 0, as the gauges
            # would otherwise keep their last values (and alert on them).
            self.sink.send_gauge('placement.spilled', 0)
            self.sink.send_gauge('placement.over_capacity', 0)
        self._capacity = settled is not None
        for name in sorted(self._loads.keys() | loads.keys()):
            self.sink.send_gauge(
                'placement.nodes.' + metric_part(name), loads.get(name, 0)
            )
        self.sink.send_gauge(
            'placement.orphans', sum(1 for c in placed.values() if c is None)
        )
        if self._placed is not None:
            before = self._placed
            self.sink.send_counter(
                'placement.moved',
                sum(
                    1
                    for key, conductor in placed.items()
                    if key in before and before[key] != conductor
                ),
            )
        self._placed = placed
        self._loads = loads
        if self._read_taken_by is not None:
            self._report_takeovers(placed, self._read_taken_by)

    def _report_takeovers(
        self,
        placed: dict[str, str | None],
        read: Callable[[], Mapping[str, str | None]],
    ) -> None:
        """Send ``placement.takeovers_pending``, unless the read fails."""
        try:
            taken_by = read()
        except Exception as exc:  # noqa: BLE001 - the rest was sent
            self._takeover_reads.failed(
                'Cannot read which conductor took each node over, for '
                'placement.takeovers_pending: %(error)s',
                {'error': ironic_db.error_text(exc)},
            )
            return
        self._takeover_reads.recovered(
            'Read which conductor took each node over again after '
            '%(seconds).0f s',
            {},
        )
        self.sink.send_gauge(
            'placement.takeovers_pending', takeovers.pending(placed, taken_by)
        )
