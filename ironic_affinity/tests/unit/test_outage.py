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


class ConditionsTestCase(base.TestCase):
    def setUp(self) -> None:
        super().setUp()
        self.clock = fake_clock.Clock(100.0)
        self.log = logging.getLogger('test-conditions')
        self.conditions: outage.Conditions[str] = outage.Conditions(
            self.log, self.clock
        )

    def test_logged_when_raised_or_changed_and_once_when_cleared(
        self,
    ) -> None:
        with self.assertLogs(self.log, logging.INFO) as seen:
            for state in ('a', 'a', 'b', 'b'):
                self.conditions.raised(
                    'n1', state, 'n1 is %(s)s', {'s': state}
                )
                self.clock.now += 1
            self.conditions.raised('n2', 'a', 'n2 is a', level=logging.ERROR)
            self.assertEqual('b', self.conditions.cleared('n1', 'n1 back'))
            self.assertIsNone(self.conditions.cleared('n1', 'n1 back'))
        self.assertEqual(
            [
                'WARNING:test-conditions:n1 is a',
                'WARNING:test-conditions:n1 is b',
                'ERROR:test-conditions:n2 is a',
                'INFO:test-conditions:n1 back',
            ],
            seen.output,
        )
        self.assertEqual(frozenset({'n2'}), self.conditions.keys())

    def test_a_change_of_state_keeps_when_it_began(self) -> None:
        self.conditions.raised('n1', 'missing')
        self.clock.now += 30
        self.assertTrue(self.conditions.raised('n1', 'lasting'))
        self.assertFalse(self.conditions.raised('n1', 'lasting'))
        self.assertEqual(100.0, self.conditions.since('n1'))
        self.assertEqual('lasting', self.conditions.state('n1'))
        with self.assertLogs(self.log, logging.INFO) as seen:
            self.conditions.cleared('n1', 'n1 back after %(seconds).0f s')
        self.assertEqual(
            ['INFO:test-conditions:n1 back after 30 s'], seen.output
        )
        self.assertIsNone(self.conditions.since('n1'))
