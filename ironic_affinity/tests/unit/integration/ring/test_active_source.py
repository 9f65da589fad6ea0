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

from ironic_affinity.integration.ring import active_source
from ironic_affinity.tests import base
from ironic_affinity.tests.unit.integration import fakes


class ActiveConductorSourceTestCase(base.TestCase):
    def setUp(self):
        super().setUp()
        self.log = logging.getLogger('test-active')
        self.reader = fakes.ActiveConductors({':x': {'c1', 'c2'}})
        self.source = active_source.ActiveConductorSource(
            self.reader.live, self.log, fakes.booted_clock()
        )

    def test_reads_through(self):
        self.assertEqual({':x': frozenset({'c1', 'c2'})}, self.source())
        self.reader.active = {':x': {'c1'}}
        self.assertEqual({':x': frozenset({'c1'})}, self.source())

    def test_a_conductor_registering_again_keeps_what_it_ran(self):
        registering = self.reader.registering
        source = self.source
        self.reader.active = {':x': {'c1', 'c2'}, ':y': {'c1'}}
        source()
        # c1 restarts: its interfaces are deleted, not yet written again.
        self.reader.active = {':x': {'c2'}}
        registering.add('c1')
        with self.assertLogs(self.log, logging.DEBUG) as seen:
            self.assertEqual(
                {':x': frozenset({'c1', 'c2'}), ':y': frozenset({'c1'})},
                source(),
            )
        self.assertIn('c1 registering with Ironic again', seen.output[0])
        # Still between the two writes at the next read: still kept.
        self.assertEqual(frozenset({'c1'}), source()[':y'])
        # Written again, with one type less: Ironic's list it is.
        registering.clear()
        self.reader.active = {':x': {'c1', 'c2'}}
        self.assertEqual({':x': frozenset({'c1', 'c2'})}, source())
        # Gone and not registering (offline, or its heartbeat too old):
        # it goes at once.
        self.reader.active = {':x': {'c2'}}
        self.assertEqual({':x': frozenset({'c2'})}, source())

    def test_a_conductor_never_listed_is_not_added(self):
        self.reader.registering.add('c9')
        source = self.source
        self.assertEqual({':x': frozenset({'c1', 'c2'})}, source())
        self.reader.active = {':x': {'c1'}}
        self.assertEqual({':x': frozenset({'c1'})}, source())

    def test_no_read_yet_raises(self):
        self.reader.error = RuntimeError('database away')
        self.assertRaises(RuntimeError, self.source)

    def test_outage_keeps_the_last_list_with_one_warning(self):
        self.source()
        self.reader.error = RuntimeError('database away')
        with self.assertLogs(self.log, logging.DEBUG) as seen:
            for _ in range(3):
                self.assertEqual(
                    {':x': frozenset({'c1', 'c2'})}, self.source()
                )
            self.reader.error = None
            self.reader.active = {':x': {'c2'}}
            self.assertEqual({':x': frozenset({'c2'})}, self.source())
        self.assertEqual(
            ['WARNING', 'INFO'], [r.levelname for r in seen.records]
        )
        self.assertIn('database away', seen.output[0])
        self.assertIn('2 last seen', seen.output[0])

    def test_after_an_outage_the_conductors_of_before_stay_a_grace(self):
        clock = fakes.booted_clock()
        source = active_source.ActiveConductorSource(
            self.reader.live, self.log, clock, recovery_grace=lambda: 5.0
        )
        source()
        self.reader.error = RuntimeError('database away')
        source()
        clock.advance(15)
        # Back: c1 has beaten again, c2 not yet (its heartbeat is as old
        # as the outage). It stays for the grace, not longer.
        self.reader.error = None
        self.reader.active = {':x': {'c1'}, ':y': {'c3'}}
        self.assertEqual(
            {':x': frozenset({'c1', 'c2'}), ':y': frozenset({'c3'})},
            source(),
        )
        clock.advance(4.9)
        self.assertEqual(frozenset({'c1', 'c2'}), source()[':x'])
        clock.advance(0.2)
        self.assertEqual(
            {':x': frozenset({'c1'}), ':y': frozenset({'c3'})}, source()
        )
        # No outage, no grace: a conductor Ironic stops listing goes.
        self.reader.active = {':x': set()}
        self.assertEqual(frozenset(), source()[':x'])

    def test_an_outage_seen_only_by_a_sibling_reader_gives_the_grace(self):
        # A conductor that made no lookup while the database was away:
        # only its tag cache, on the same engine, saw the outage. Its
        # first read after the return finds only itself beaten again.
        clock = fakes.booted_clock()
        failed_at = []
        source = active_source.ActiveConductorSource(
            self.reader.live,
            self.log,
            clock,
            recovery_grace=lambda: 5.0,
            database_failed_at=lambda: failed_at[-1] if failed_at else None,
        )
        source()
        clock.advance(3)
        failed_at.append(clock())
        clock.advance(12)
        self.reader.active = {':x': {'c2'}}
        self.assertEqual({':x': frozenset({'c1', 'c2'})}, source())
        clock.advance(5.1)
        self.assertEqual({':x': frozenset({'c2'})}, source())
        # That failure is behind the last read now: no second grace.
        self.reader.active = {':x': set()}
        self.assertEqual({':x': frozenset()}, source())

    def test_a_sibling_failure_before_our_read_gives_no_grace(self):
        clock = fakes.booted_clock()
        source = active_source.ActiveConductorSource(
            self.reader.live,
            self.log,
            clock,
            recovery_grace=lambda: 5.0,
            database_failed_at=lambda: 1.0,
        )
        clock.advance(1)
        source()
        self.reader.active = {':x': {'c2'}}
        self.assertEqual({':x': frozenset({'c2'})}, source())
