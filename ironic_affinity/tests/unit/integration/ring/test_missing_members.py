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

from ironic_affinity.integration.ring import missing_members
from ironic_affinity.tests import base
from ironic_affinity.tests.unit.integration import fakes


class MissingMembersTestCase(base.TestCase):
    def setUp(self):
        super().setUp()
        self.clock = fakes.booted_clock()
        self.log = logging.getLogger('test-missing')
        self.missing = missing_members.MissingMembers(
            self.log, lambda: 70.0, self.clock
        )

    def levels(self, seen):
        return [record.levelname for record in seen.records]

    def test_a_starting_conductor_is_no_error(self):
        with self.assertLogs(self.log, logging.DEBUG) as seen:
            self.missing.observe(frozenset({'c2'}), False)
            self.clock.advance(1)
            self.missing.observe(frozenset({'c2'}), False)
            self.missing.observe(frozenset(), False)
        self.assertEqual(['INFO'], self.levels(seen))
        self.assertIn('c2', seen.output[0])
        self.assertEqual(frozenset(), self.missing.lasting())

    def test_a_lasting_absence_is_one_error(self):
        with self.assertLogs(self.log, logging.DEBUG) as seen:
            self.missing.observe(frozenset({'c2'}), False)
            self.clock.advance(69)
            self.missing.observe(frozenset({'c2'}), False)
            self.clock.advance(2)
            self.missing.observe(frozenset({'c2'}), False)
            self.clock.advance(100)
            self.missing.observe(frozenset({'c2'}), False)
        self.assertEqual(['INFO', 'ERROR'], self.levels(seen))
        self.assertIn('c2', seen.output[1])
        self.assertIn('70 s', seen.output[1])
        self.assertEqual(frozenset({'c2'}), self.missing.lasting())
        with self.assertLogs(self.log, logging.DEBUG) as seen:
            self.missing.observe(frozenset(), False)
        self.assertEqual(['INFO'], self.levels(seen))
        self.assertEqual(frozenset(), self.missing.lasting())

    def test_each_conductor_has_its_own_clock(self):
        self.missing.observe(frozenset({'c2'}), False)
        self.clock.advance(50)
        self.missing.observe(frozenset({'c2', 'c3'}), False)
        self.clock.advance(30)
        with self.assertLogs(self.log, logging.ERROR) as seen:
            self.missing.observe(frozenset({'c2', 'c3'}), False)
        self.assertIn('c2', seen.output[0])
        self.assertNotIn('c3', seen.output[0])

    def test_an_unreadable_view_says_nothing(self):
        with self.assertNoLogs(self.log):
            self.missing.observe(frozenset({'c2'}), True)
            self.clock.advance(1000)
            self.missing.observe(frozenset({'c2'}), True)
        self.assertEqual(frozenset(), self.missing.lasting())

    def test_on_ironics_ring_says_nothing(self):
        # Conductors outside the group keep their nodes there (adoption).
        with self.assertNoLogs(self.log):
            self.missing.observe(frozenset({'c2'}), False, True)
            self.clock.advance(1000)
            self.missing.observe(frozenset({'c2'}), False, True)
        self.assertEqual(frozenset(), self.missing.lasting())
        # Placed by affinity: no node for c2, said, then an error.
        with self.assertLogs(self.log, logging.DEBUG) as seen:
            self.missing.observe(frozenset({'c2'}), False, False)
            self.clock.advance(71)
            self.missing.observe(frozenset({'c2'}), False, False)
        self.assertEqual(['INFO', 'ERROR'], self.levels(seen))

    def test_an_absence_that_ends_starts_again_from_zero(self):
        self.missing.observe(frozenset({'c2'}), False)
        self.clock.advance(60)
        self.missing.observe(frozenset(), False)
        self.missing.observe(frozenset({'c2'}), False)
        self.clock.advance(60)
        with self.assertNoLogs(self.log, logging.ERROR):
            self.missing.observe(frozenset({'c2'}), False)
