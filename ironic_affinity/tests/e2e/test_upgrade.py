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

"""A rolling upgrade of the plugin, one process at a time, under load
(doc/source/admin/upgrade.rst).

One API and three conductors (rolling.py) run the previous build
(previous_build.plugin), with [affinity]pin_format = 1 in ironic.conf
from the start, as the upgrade order says. Each process is restarted on
this checkout, one at a time, conductors first (each after SIGUSR1, and
back within its member timeout), then the API; the pin is then lifted,
and drain turned on. Beforehand, the same restarts of Ironic's own
services, under the same load, give the baseline of failed requests.
"""

import json
import time

from ironic_affinity.membership import levels
from ironic_affinity.tests.e2e import base
from ironic_affinity.tests.e2e import previous_build
from ironic_affinity.tests.e2e import rolling

PIN = '[affinity]\npin_format = 1\n'
CHECK = 'Plugin versions and format levels'


class UpgradeTestCase(rolling.RollingTestCase):
    def setUp(self):
        super().setUp()
        self.previous = previous_build.plugin()

    def test_rolling_upgrade_moves_nothing(self):
        # Ironic's own services, restarted the same way: the baseline.
        stock, uuids, _placed = self.start('stock', None, PIN)
        stock_took, traffic, _ = self.under_load(
            stock, uuids, lambda: self.roll(stock, None)
        )
        stock_answered = rolling.Answered.of(traffic)
        # The next deployment has the machine to itself.
        stock.stop_all()

        dep, uuids, placed = self.start('affinity', self.previous, PIN)
        offsets = dep.log_offsets()
        said = {}

        def mid_roll():
            said['mixed'] = self.levels_check(dep)

        took, traffic, sampled = self.under_load(
            dep, uuids, lambda: self.roll(dep, None, mid_roll)
        )
        self.assert_nothing_moved(dep, uuids, placed, sampled, offsets)
        answered = rolling.Answered.of(traffic)
        self.assert_answered_as_stock(answered, stock_answered)

        # The check, mid-roll: builds differ, the new one pinned.
        code, text = said['mixed']
        self.assertEqual(1, code, text)
        self.assertIn('Pinned, until every process is upgraded', text)
        self.assertIn('a release before format levels', text)
        # Every process upgraded: the pin can be lifted (once the old
        # API process's entry is gone).
        self.wait_check(dep, 1, 'Every process reads format level 2')

        lifted_in, drained = self.lift_then_drain(dep, uuids, placed)
        base.record(
            test='rolling_upgrade',
            nodes=rolling.NODES,
            restart_seconds=took,
            samples=len(sampled.samples),
            nodes_moved=len(sampled.moved(placed)),
            **answered.figures(),
            stock_restart_seconds=stock_took,
            **stock_answered.figures('stock_'),
            pin_lifted_in=lifted_in,
            drained=drained,
        )

    def levels_check(self, dep):
        result = dep.status('--json')
        (found,) = [
            check
            for check in json.loads(result.stdout)['checks']
            if check['check'] == CHECK
        ]
        return found['result'], found['details']

    def wait_check(self, dep, code, words):
        """Wait until the check's result is ``code`` and its details
        hold ``words``."""
        seen = []

        def said():
            seen[:] = self.levels_check(dep)
            return seen[0] == code and words in seen[1]

        try:
            # Every 5 s: a check costs about 2 CPU seconds.
            dep.wait(said, rolling.MEMBER_TIMEOUT + 10, CHECK, 5.0)
        except AssertionError as exc:
            raise AssertionError('%s; last: %s' % (exc, seen)) from exc

    def lift_then_drain(self, dep, uuids, placed):
        """Lift the pin, one process at a time, then drain conductor 3:
        (seconds the lift took, drain figures)."""
        with open(dep.conf) as handle:
            text = handle.read()
        with open(dep.conf, 'w') as handle:
            handle.write(text.replace(PIN, ''))
        started = time.monotonic()
        for index in rolling.TAGS:
            dep.reload(index, keep_registered=True, **rolling.TAGS[index])
            dep.wait(
                lambda index=index: self.writes(dep, index) == 2,
                rolling.MEMBER_TIMEOUT,
                'conductor%d unpinned' % index,
                interval=2.0,
            )
        dep.stop('api')
        dep.start_api()
        lifted_in = round(time.monotonic() - started, 1)
        self.wait_check(dep, 0, 'Versions: %s on' % levels.plugin_version())
        # Nothing moved for it.
        self.wait_placed({n: {c} for n, c in placed.items()})

        draining = self.name(3)
        leaving = {n for n, c in placed.items() if c == draining}
        self.assertTrue(leaving)
        dep.reload(3, keep_registered=True, drain='true', **rolling.TAGS[3])
        changed = time.monotonic()
        left_at = {}
        while (
            time.monotonic()
            < changed + rolling.PERIOD + 2 * rolling.REFRESH + 15
        ):
            now = self.placements()
            for node in leaving:
                if now[node] != draining:
                    left_at.setdefault(node, time.monotonic() - changed)
            if len(left_at) == len(leaving):
                break
            time.sleep(rolling.SAMPLE)
        self.assertEqual(leaving, set(left_at))
        # Spread over the period, not all at once.
        self.assertGreater(max(left_at.values()) - min(left_at.values()), 5)
        explained = json.loads(
            dep.cli('explain', sorted(leaving)[0], '-f', 'json').stdout
        )
        row = [
            c for c in explained['conductors'] if c['conductor'] == draining
        ]
        self.assertTrue(row[0].get('draining'), row)
        return lifted_in, {
            'nodes': len(leaving),
            'first_left_after': round(min(left_at.values()), 1),
            'last_left_after': round(max(left_at.values()), 1),
        }

    def writes(self, dep, index):
        result = dep.cli('members', '-f', 'json')
        if result.returncode != 0:
            return None
        for member in json.loads(result.stdout)['members']:
            if member['name'] == self.name(index):
                return (member['format_level'] or {}).get('writes')
        return None
