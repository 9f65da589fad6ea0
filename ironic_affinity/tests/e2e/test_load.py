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

"""A conductor crashed while the API is read without pause.

The small version of tools/soak.py (see doc/source/admin/soak.rst): 300
tagged nodes, three conductors, four reader threads for about 30 s, and
conductor 1 killed 10 s in. Its conductors run on ports from 8191, apart
from the other end-to-end tests.
"""

from ironic_affinity.tests.e2e import base
from ironic_affinity.tests.e2e import load

NODES = 300
CONDUCTORS = 3
READERS = 4
SECONDS = 30.0
KILL_AFTER = 10.0
# Power sync every 10 s: each node is worked at least once in the window
# the test inspects, without 300 nodes keeping two cores busy.
SYNC_INTERVAL = 10


class KillUnderLoadTestCase(base.TestCase):
    TIMED = True

    def test_kill_under_load_loses_nothing(self) -> None:
        dep = self.useFixture(load.LoadDeployment(sync_interval=SYNC_INTERVAL))
        dep.start_all(CONDUCTORS)
        nodes = load.create_nodes(dep.api_port, NODES)
        outcome = load.kill_under_load(
            dep, nodes, CONDUCTORS, READERS, SECONDS, KILL_AFTER
        )
        victims = [n for n, c in outcome.before.items() if c == outcome.killed]
        # Every conductor held nodes before, the victim among them.
        self.assertEqual(
            set(outcome.live) | {outcome.killed},
            set(outcome.before.values()),
        )

        # The API never failed a read: no 5xx, no 4xx, no dropped
        # connection, before, during or after the crash.
        total = load.summarize(outcome.samples, outcome.read_seconds)
        self.assertEqual({}, total.errors, str(outcome.failures[:5]))
        # Reads went on through the rehoming, and each kind was read.
        self.assertGreater(len(outcome.rehoming()), 0)
        for kind in load.READ_MIX:
            self.assertGreater(
                load.summarize(outcome.samples, 1, kind).requests, 0, kind
            )

        verdict = load.verify(dep, nodes, outcome)
        # Exactly one live conductor per node, where the rule says.
        self.assertEqual([], verdict.not_on_one_live)
        self.assertEqual([], verdict.off_plan)
        self.assertEqual(0, verdict.check_status)
        # Only the victim's nodes moved, each to a conductor allowed to
        # take it.
        self.assertEqual([], verdict.moved_needlessly)
        self.assertEqual([], verdict.moved_to_ineligible)
        moved = {n for n in victims if outcome.after[n] != {outcome.killed}}
        self.assertEqual(set(victims), moved)
        # Each node's power sync ran on that conductor and no other.
        self.assertEqual([], verdict.sync_mismatch)
        base.record(  # type: ignore[no-untyped-call]
            test='kill_under_load',
            ring='affinity',
            nodes=NODES,
            rehome_seconds=round(outcome.rehome_seconds, 2),
            reads=total.requests,
            p99_ms=round(total.p99, 1),
        )
        # Within the member timeout (5 s) and some slack.
        self.assertLess(outcome.rehome_seconds, 15)
