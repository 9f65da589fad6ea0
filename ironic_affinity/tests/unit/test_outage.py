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

import logging

from ironic_affinity import outage
from ironic_affinity.tests import base
from ironic_affinity.tests import fake_clock


class OutageTestCase(base.TestCase):
    def setUp(self) -> None:
        super().setUp()
        self.clock = fake_clock.Clock(100.0)
        self.log = logging.getLogger('test-outage')
        self.outage = outage.Outage(self.log, self.clock)

    def test_warns_once_per_outage(self) -> None:
        with self.assertLogs(self.log, logging.WARNING) as seen:
            self.assertTrue(self.outage.failed('down: %(e)s', {'e': 'x'}))
            self.assertFalse(self.outage.failed('down: %(e)s', {'e': 'y'}))
            self.assertFalse(self.outage.failed('down: %(e)s', {'e': 'z'}))
        self.assertEqual(['WARNING:test-outage:down: x'], seen.output)
        self.assertEqual(3, self.outage.failures)
        self.assertTrue(self.outage.failing)

    def test_recovery_logs_the_length_once(self) -> None:
        self.outage.failed('down', {})
        self.clock.now += 12.5
        self.assertEqual(12.5, self.outage.duration())
        with self.assertLogs(self.log, logging.INFO) as seen:
            self.assertTrue(
                self.outage.recovered('up after %(seconds).1f s', {})
            )
            self.assertFalse(self.outage.recovered('up again', {}))
        self.assertEqual(['INFO:test-outage:up after 12.5 s'], seen.output)
        self.assertFalse(self.outage.failing)
        self.assertEqual(0.0, self.outage.duration())

    def test_success_without_outage_is_silent(self) -> None:
        with self.assertNoLogs(self.log):
            self.assertFalse(self.outage.recovered('up', {}))

    def test_a_new_outage_warns_again(self) -> None:
        self.outage.failed('down', {})
        self.outage.recovered('up', {})
        with self.assertLogs(self.log, logging.WARNING) as seen:
            self.assertTrue(self.outage.failed('down again', {}))
        self.assertEqual(['WARNING:test-outage:down again'], seen.output)

    def test_level_can_be_chosen(self) -> None:
        with self.assertLogs(self.log, logging.ERROR) as seen:
            self.outage.failed('gone', {}, level=logging.ERROR)
        self.assertEqual(['ERROR:test-outage:gone'], seen.output)
