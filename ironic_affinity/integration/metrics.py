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

"""Ironic's metric logger, for the placement metrics
(:mod:`ironic_affinity.integration.placement_metrics`).

Ironic's ``[metrics]`` options choose the backend (``noop`` by default,
``statsd``, or ``collector`` for ironic-prometheus-exporter), the
global prefix and whether the host is prepended; our names go under
``ironic_affinity`` within them (``COLLECTOR_PREFIX`` for the collector).
"""

from typing import Any

PREFIX = 'ironic_affinity'
# With the collector, names under Ironic's conductor namespace: that is
# what ironic-prometheus-exporter exports (it skips the rest, and before
# its 4.8 an unknown name failed the whole notification), and it turns
# each into ``ironic_affinity_<name>``, dots made underscores.
COLLECTOR_PREFIX = 'ironic.conductor.manager.affinity'


def sink(conf: Any, api_process: bool = False) -> Any:
    """Ironic's metric logger for our names, or None when nothing would
    leave this process: Ironic's backend is ``noop``, or this is an API
    process with the ``collector``, whose figures only conductors send
    (each API worker would otherwise place every node for nothing)."""
    if conf.metrics.backend == 'noop':
        return None
    if api_process and conf.metrics.backend == 'collector':
        return None
    try:
        from ironic.common import metrics_utils
    except ImportError:  # Ironic of before the move from ironic-lib
        from ironic_lib import metrics_utils
    collector = conf.metrics.backend == 'collector'
    return Named(
        metrics_utils.get_metrics_logger(
            COLLECTOR_PREFIX if collector else PREFIX, host=conf.host
        ),
        counts_calls=collector,
    )


class Named:
    """Ironic's logger, with our names composed as Ironic composes its
    own: its send_* methods send a name as given, and only its
    decorators prepend the prefix."""

    def __init__(self, logger: Any, counts_calls: bool = False) -> None:
        """:param counts_calls: the backend adds one to a counter per
        call whatever the value sent, as Ironic's collector does."""
        self._logger = logger
        self._counts_calls = counts_calls

    def send_gauge(self, name: str, value: float) -> None:
        self._logger.send_gauge(self._logger.get_metric_name(name), value)

    def send_counter(self, name: str, value: float) -> None:
        name = self._logger.get_metric_name(name)
        if not self._counts_calls:
            self._logger.send_counter(name, value)
            return
        # The collector's count is a number of calls: one per unit, so
        # that it sums what was counted (our counters are small deltas:
        # errors and moves since the previous report).
        for _unit in range(int(value)):
            self._logger.send_counter(name, 1)

    def send_timer(self, name: str, value: float) -> None:
        self._logger.send_timer(self._logger.get_metric_name(name), value)
