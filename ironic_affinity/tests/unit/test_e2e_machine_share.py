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

"""The semaphore by which end-to-end suites share the machine.

Threads stand for the test processes of several suites: flock locks
belong to open files, so two threads' locks conflict as two processes'
do. Each test has a folder of its own, not the machine's, so that it
neither waits for nor holds back an end-to-end suite running beside.
"""

import threading

import fixtures

from ironic_affinity.tests import base
from ironic_affinity.tests.e2e import machine_share

# Long enough for a thread that could take its units to have taken them
# (a try every 0.5 s); a broken semaphore lets it through at once.
BLOCKED = 1.5
# A thread whose units were freed takes them at its next try.
FREED = 10


class MachineShareTestCase(base.TestCase):
    def setUp(self):
        super().setUp()
        self.dir = self.useFixture(fixtures.TempDir()).path

    def take(self, units):
        return machine_share.acquire(units, self.dir)[0]

    def take_in_thread(self, units):
        """Start taking units in a thread; an event set once it holds
        them, and the list that receives what holds them."""
        held = []
        done = threading.Event()

        def run():
            held.extend(self.take(units))
            done.set()

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        self.addCleanup(machine_share.release, held)
        self.addCleanup(thread.join, FREED)
        return done, held

    def test_one_ordinary_case_per_unit_and_no_more(self):
        first = [self.take(1) for _ in range(machine_share.UNITS)]
        fourth, _ = self.take_in_thread(1)
        self.assertFalse(fourth.wait(BLOCKED))
        machine_share.release(first.pop())
        self.assertTrue(fourth.wait(FREED))
        for held in first:
            machine_share.release(held)

    def test_a_timed_case_runs_beside_one_ordinary_case(self):
        timed = self.take(machine_share.TIMED_UNITS)
        ordinary = self.take(1)  # at once: there is a unit left
        self.assertEqual(1, len(ordinary))
        another, _ = self.take_in_thread(1)
        self.assertFalse(another.wait(BLOCKED))
        machine_share.release(timed)
        self.assertTrue(another.wait(FREED))
        machine_share.release(ordinary)

    def test_two_timed_cases_never_together(self):
        first = self.take(machine_share.TIMED_UNITS)
        second, _ = self.take_in_thread(machine_share.TIMED_UNITS)
        self.assertFalse(second.wait(BLOCKED))
        machine_share.release(first)
        self.assertTrue(second.wait(FREED))

    def test_a_waiting_timed_case_goes_before_later_ordinary_ones(self):
        # Two ordinary cases run; a timed case waits for a second unit
        # and ordinary cases that come after it must not take the units
        # freed meanwhile, or a stream of them would starve it.
        running = [self.take(1), self.take(1)]
        timed, _ = self.take_in_thread(machine_share.TIMED_UNITS)
        self.assertFalse(timed.wait(BLOCKED))
        later, _ = self.take_in_thread(1)
        machine_share.release(running.pop())
        self.assertTrue(timed.wait(FREED))
        self.assertFalse(later.is_set())
        machine_share.release(running.pop())
        self.assertTrue(later.wait(FREED))
