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

import dataclasses
import json
import logging

import fixtures

from ironic_affinity import adoption
from ironic_affinity import exception
from ironic_affinity import profile
from ironic_affinity.membership import capabilities
from ironic_affinity.membership import levels
from ironic_affinity.tests import base


def _conductor():
    return profile.ConductorProfile.build(
        'host:8091',
        hard_affinity_tags='dc1',
        hard_anti_affinity_tags='net3',
        soft_affinity_tags='rack1:4 net1',
        soft_anti_affinity_tags='rack2',
        hardware_types=['ipmi'],
        conductor_group='G1',
    )


class CapabilitiesTestCase(base.TestCase):
    def test_round_trip(self):
        conductor = _conductor()
        encoded = capabilities.encode(conductor)
        self.assertEqual(1, encoded['format'])
        self.assertEqual(
            {'net1': 1, 'rack1': 4}, encoded['soft_affinity_tags']
        )
        # Through JSON as a driver would carry it, and as bytes.
        raw = json.dumps(encoded)
        self.assertEqual(
            conductor, capabilities.decode('host:8091', json.loads(raw))
        )
        self.assertEqual(
            conductor, capabilities.decode('host:8091', raw.encode())
        )

    def test_max_nodes_is_published_only_when_set(self):
        unlimited = _conductor()
        self.assertNotIn('max_nodes', capabilities.encode(unlimited))
        limited = dataclasses.replace(unlimited, max_nodes=600)
        encoded = capabilities.encode(limited)
        self.assertEqual(600, encoded['max_nodes'])
        self.assertEqual(
            limited,
            capabilities.decode('host:8091', json.dumps(encoded).encode()),
        )

    def test_changes_are_published_only_during_a_rollout(self):
        settled = _conductor()
        self.assertNotIn('changes', capabilities.encode(settled))
        earlier = dataclasses.replace(settled, soft_affinity_tags={'rack9': 2})
        rolling = dataclasses.replace(
            settled,
            changes=(
                profile.ProfileChange(None, 1.8e9, 60.0),
                profile.ProfileChange(earlier, 1.8e9 + 0.125, 30.0),
            ),
        )
        encoded = capabilities.encode(rolling)
        self.assertEqual(
            [
                {'before': None, 'at': 1.8e9, 'period': 60.0},
                {
                    'before': capabilities.encode(earlier),
                    'at': 1.8e9 + 0.125,
                    'period': 30.0,
                },
            ],
            encoded['changes'],
        )
        decoded = capabilities.decode(
            'host:8091', json.dumps(encoded).encode()
        )
        self.assertEqual(rolling, decoded)
        # Exactly the same times: every process hashes them alike.
        self.assertEqual(repr(1.8e9 + 0.125), repr(decoded.changes[1].at))

    def test_fit_drops_the_oldest_changes_first(self):
        big = profile.ConductorProfile.build(
            'c', hardware_types=['h%03d%s' % (i, 'x' * 200) for i in range(60)]
        )
        changes = tuple(
            profile.ProfileChange(
                dataclasses.replace(big, soft_affinity_tags={'t%d' % i: 1}),
                1.8e9 + i,
                60.0,
            )
            for i in range(5)
        )
        rolling = dataclasses.replace(big, changes=changes)
        self.assertGreater(
            len(json.dumps(capabilities.encode(rolling))),
            capabilities.MAX_ENCODED_BYTES,
        )
        fitted = capabilities.fit(rolling)
        self.assertLessEqual(
            len(json.dumps(capabilities.encode(fitted))),
            capabilities.MAX_ENCODED_BYTES,
        )
        self.assertEqual(changes[-len(fitted.changes) :], fitted.changes)
        self.assertGreater(len(fitted.changes), 0)
        self.assertEqual(
            fitted, capabilities.decode('c', capabilities.encode(fitted))
        )

    def test_bad_changes_refused(self):
        good = capabilities.encode(_conductor())
        change = {'before': None, 'at': 1.8e9, 'period': 60.0}
        self._refused(dict(good, changes=[]), 'changes must be a list')
        self._refused(dict(good, changes=change), 'changes must be a list')
        self._refused(
            dict(good, changes=[change] * 9), 'list of 1 to 8 changes'
        )
        self._refused(dict(good, changes=[1]), 'changes[0] must be')
        self._refused(
            dict(good, changes=[{'before': None, 'at': 1.8e9}]),
            'changes[0] must be',
        )
        for bad in (None, '1.8e9', True, float('nan'), float('inf'), 5, 1e12):
            self._refused(
                dict(good, changes=[dict(change, at=bad)]), 'changes[0].at'
            )
        for bad in (0, -1, 8 * 24 * 3600, None):
            self._refused(
                dict(good, changes=[change, dict(change, period=bad)]),
                'changes[1].period',
            )
        self._refused(
            dict(good, changes=[dict(change, before={'format': 2})]),
            'changes[0].before: format version 2',
        )
        nested = dict(good, changes=[change])
        self._refused(
            dict(good, changes=[dict(change, before=nested)]),
            'must not have changes of its own',
        )

    def test_switching_is_published_only_when_set(self):
        plain = profile.ConductorProfile.build('c1', soft_affinity_tags='a:2')
        self.assertNotIn('switching', capabilities.encode(plain))
        voting = dataclasses.replace(
            plain,
            switching=adoption.Published(
                adoption.Vote('stock', 1.8e9, 600.0),
                (
                    adoption.Switch('stock', adoption.ORIGIN_AT, 0.0),
                    adoption.Switch('affinity', 1.8e9 + 5, 30.5),
                ),
            ),
        )
        raw = json.loads(json.dumps(capabilities.encode(voting)))
        self.assertEqual(voting, capabilities.decode('c1', raw))

    def test_bad_switching_refused(self):
        good = {
            'vote': 'stock',
            'since': 1.8e9,
            'period': 60,
            'switches': [{'to': 'affinity', 'at': 1.8e9, 'period': 0}],
        }
        base_raw = capabilities.encode(profile.ConductorProfile('c1'))
        capabilities.decode('c1', dict(base_raw, switching=good))
        for bad, says in (
            (dict(good, vote='ironic'), 'switching.vote must be one of'),
            (dict(good, since=5), 'switching.since must be a number'),
            (dict(good, period=-1), 'switching.period must be a number'),
            (
                {k: v for k, v in good.items() if k != 'since'},
                'switching must be a mapping',
            ),
            (
                dict(good, switches=[{'to': 'stock', 'at': 1.8e9}]),
                'must be a mapping of to, at and period',
            ),
            (
                dict(good, switches=good['switches'] * 9),
                'at most 8 switches',
            ),
        ):
            exc = self.assertRaises(
                exception.InvalidCapabilities,
                capabilities.decode,
                'c1',
                dict(base_raw, switching=bad),
            )
            self.assertIn(says, str(exc))

    def test_what_the_process_runs_is_beside_the_profile(self):
        published = capabilities.encode(_conductor())
        for key in levels.DESCRIPTIVE:
            self.assertNotIn(key, published)
        published.update(
            {levels.ENABLED_BY: 'ironic.conf', levels.VERSION: '1.0'}
        )
        # Read, and not part of the profile.
        self.assertEqual(
            capabilities.decode('c1', published),
            capabilities.decode('c1', capabilities.encode(_conductor())),
        )

    def test_drain_is_published_only_when_set(self):
        conductor = _conductor()
        self.assertNotIn(capabilities.DRAINING, capabilities.encode(conductor))
        draining = dataclasses.replace(conductor, draining=True)
        encoded = capabilities.encode(draining)
        self.assertIs(True, encoded[capabilities.DRAINING])
        self.assertEqual(draining, capabilities.decode('host:8091', encoded))
        for bad in (1, 'yes', None):
            exc = self.assertRaises(
                exception.InvalidCapabilities,
                capabilities.decode,
                'c1',
                dict(encoded, draining=bad),
            )
            self.assertIn('draining must be true or false', str(exc))

    def test_all_hardware_types(self):
        conductor = profile.ConductorProfile.build('c')
        self.assertIsNone(capabilities.encode(conductor)['hardware_types'])
        self.assertEqual(
            conductor,
            capabilities.decode('c', capabilities.encode(conductor)),
        )

    def _refused(self, raw, *parts):
        exc = self.assertRaises(
            exception.InvalidCapabilities, capabilities.decode, 'c', raw
        )
        for part in parts:
            self.assertIn(part, str(exc))

    def test_refused(self):
        good = capabilities.encode(_conductor())
        self._refused(None, 'missing')
        self._refused(b'', 'missing')
        self._refused(b'{', 'not JSON')
        self._refused([1], 'mapping')
        self._refused(dict(good, format=2), 'format version 2')
        self._refused(
            {k: v for k, v in good.items() if k != 'format'},
            'format version None',
        )
        self._refused(dict(good, soft_affinity_tags=['a']), 'mapping')
        self._refused(
            dict(good, soft_affinity_tags={'a': True}), 'not an integer'
        )
        self._refused(dict(good, soft_affinity_tags={'a': 0}), 'weight')
        self._refused(dict(good, hard_affinity_tags=['b@d']), "'b@d'")
        self._refused(
            dict(
                good, hard_affinity_tags=['x'], hard_anti_affinity_tags=['X']
            ),
            'never accept',
        )
        self._refused(dict(good, hardware_types='ipmi'), 'hardware_types')
        self._refused(dict(good, hardware_types=[1]), 'hardware_types')
        self._refused(dict(good, conductor_group=['g']), 'conductor_group')
        for bad in (-1, 1.0, True, '5', None, 10**12):
            self._refused(dict(good, max_nodes=bad), 'max_nodes')
        self._refused(
            dict(good, hard_affinity_tags=['t%d' % i for i in range(129)]),
            'at most 128',
        )

    def test_keys_a_reader_does_not_know_are_ignored_and_said_once(self):
        # What a newer process may add, at every level of an entry.
        change = {'before': None, 'at': 1.8e9, 'period': 60.0}
        switching = {
            'vote': 'stock',
            'since': 1.8e9,
            'period': 60,
            'switches': [{'to': 'affinity', 'at': 1.8e9, 'period': 0}],
        }
        good = dict(
            capabilities.encode(_conductor()),
            changes=[change],
            switching=switching,
        )
        newer = dict(
            good,
            future_key={'any': 'thing'},
            changes=[dict(change, weight=2)],
            switching=dict(
                switching,
                quorum=3,
                switches=[dict(switching['switches'][0], reason='x')],
            ),
        )
        logged = self.useFixture(fixtures.FakeLogger(level=logging.DEBUG))
        for _ in range(3):
            # The same profile, whatever the member's name.
            self.assertEqual(
                capabilities.encode(capabilities.decode('c1', good)),
                capabilities.encode(capabilities.decode('c-newer', newer)),
            )
        ignored = [
            line
            for line in logged.output.splitlines()
            if 'does not know, ignored' in line
        ]
        self.assertEqual(4, len(ignored), ignored)
        for where, key in (
            ('top-level', 'future_key'),
            ('changes[0]', 'weight'),
            ('switching', 'quorum'),
            ('switching.switches[0]', 'reason'),
        ):
            self.assertIn(
                'Conductor c-newer publishes %s key(s) this reader does '
                "not know, ignored: '%s'" % (where, key),
                logged.output,
            )

    def test_size_bounded(self):
        good = capabilities.encode(_conductor())
        huge = dict(
            good, conductor_group='x' * 200, hardware_types=['y' * 255] * 256
        )
        self._refused(huge, '64 KiB')
        self._refused(b' ' * (capabilities.MAX_ENCODED_BYTES + 1), '64 KiB')

    def test_deep_nesting(self):
        deep = b'[' * 30000 + b']' * 30000
        self._refused(deep, 'not JSON')
