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

"""A call with a deadline: its answer in time, or NoAnswer and a late
clean-up in the call's own thread."""

import threading

from ironic_affinity.membership import deadline
from ironic_affinity.tests import base

# Long enough for a call that returns at once, on a loaded machine.
PLENTY = 10.0


class CallWithinTestCase(base.TestCase):
    def test_answer_in_time(self):
        late = []
        self.assertEqual(
            42,
            deadline.call_within(PLENTY, lambda: 42, late.append),
        )
        self.assertEqual([], late)

    def test_error_in_time_is_raised(self):
        def fails():
            raise KeyError('gone')

        self.assertRaises(
            KeyError, deadline.call_within, PLENTY, fails, lambda: None
        )

    def test_no_answer_in_time(self):
        release = threading.Event()
        late_in = []
        cleaned = threading.Event()

        def late(error):
            late_in.append((threading.current_thread().name, error))
            cleaned.set()

        error = self.assertRaises(
            deadline.NoAnswer,
            deadline.call_within,
            0.05,
            lambda: release.wait(PLENTY),
            late,
        )
        self.assertEqual('no answer within 0.05 s', str(error))
        # The call goes on; the clean-up waits for it to end.
        self.assertFalse(cleaned.wait(0.1))
        release.set()
        self.assertTrue(cleaned.wait(PLENTY))
        # In the call's thread, not the caller's.
        self.assertEqual([('affinity-call', None)], late_in)

    def test_late_runs_after_a_late_error_too(self):
        release = threading.Event()
        errors = []
        cleaned = threading.Event()

        def fails_late():
            release.wait(PLENTY)
            raise RuntimeError('certificate verify failed')

        def late(error):
            errors.append(error)
            cleaned.set()

        self.assertRaises(
            deadline.NoAnswer,
            deadline.call_within,
            0.05,
            fails_late,
            late,
        )
        release.set()
        self.assertTrue(cleaned.wait(PLENTY))
        # The reason comes late, but it comes.
        (error,) = errors
        self.assertEqual('certificate verify failed', str(error))

    def test_an_error_of_late_is_swallowed(self):
        release = threading.Event()
        ran = threading.Event()

        def late(error):
            ran.set()
            raise RuntimeError('clean-up failed')

        self.assertRaises(
            deadline.NoAnswer,
            deadline.call_within,
            0.05,
            lambda: release.wait(PLENTY),
            late,
        )
        release.set()
        self.assertTrue(ran.wait(PLENTY))
