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

"""Our names through Ironic's metric logger (a fake one)."""

import sys
import types
from unittest import mock

from ironic_affinity.integration import metrics
from ironic_affinity.tests import base
from ironic_affinity.tests.unit.integration import test_placement_metrics


class Logger(test_placement_metrics.Sink):
    """What Named uses of Ironic's MetricLogger."""

    def get_metric_name(self, name):
        return 'ironic_affinity.' + name


class NamedTestCase(base.TestCase):
    def test_names_are_composed_by_ironic(self):
        logger = Logger()
        named = metrics.Named(logger)
        named.send_gauge('membership.members', 2)
        named.send_timer('node_tags.refresh', 3.5)
        named.send_counter('placement.moved', 3)
        named.send_counter('membership.read_errors', 0)
        self.assertEqual(
            [
                ('ironic_affinity.membership.members', 2, 'g'),
                ('ironic_affinity.node_tags.refresh', 3.5, 'ms'),
                ('ironic_affinity.placement.moved', 3, 'c'),
                ('ironic_affinity.membership.read_errors', 0, 'c'),
            ],
            logger.sent,
        )

    def test_a_backend_counting_calls_is_called_once_per_unit(self):
        # Ironic's collector adds one per call, whatever the value.
        logger = Logger()
        named = metrics.Named(logger, counts_calls=True)
        named.send_counter('placement.moved', 3)
        named.send_counter('membership.read_errors', 0)
        named.send_gauge('placement.orphans', 0)
        self.assertEqual(
            [('ironic_affinity.placement.moved', 1, 'c')] * 3
            + [('ironic_affinity.placement.orphans', 0, 'g')],
            logger.sent,
        )


class SinkTestCase(base.TestCase):
    def sink(self, backend, api_process):
        conf = types.SimpleNamespace(
            metrics=types.SimpleNamespace(backend=backend), host='h'
        )
        # Ironic's module, faked: the unit tests run without Ironic.
        utils = types.ModuleType('ironic.common.metrics_utils')
        utils.get_metrics_logger = lambda prefix, host: Logger()
        modules = {
            'ironic': types.ModuleType('ironic'),
            'ironic.common': types.ModuleType('ironic.common'),
            'ironic.common.metrics_utils': utils,
        }
        with mock.patch.dict(sys.modules, modules):
            return metrics.sink(conf, api_process=api_process)

    def test_only_where_figures_leave_the_process(self):
        # The collector's figures leave with a conductor's sensor data:
        # an API worker would place every node for nothing.
        for backend, api_process, sent in (
            ('noop', False, False),
            ('noop', True, False),
            ('statsd', False, True),
            ('statsd', True, True),
            ('collector', False, True),
            ('collector', True, False),
        ):
            found = self.sink(backend, api_process)
            self.assertEqual(sent, found is not None, (backend, api_process))
