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

from ironic_affinity import candidates
from ironic_affinity import profile
from ironic_affinity.tests import base

Conductor = profile.ConductorProfile.build


class CandidatesTestCase(base.TestCase):
    def test_members_active_in_ironic_only(self):
        members = {
            'a': Conductor('a', soft_affinity_tags='x', hardware_types=['z']),
            'b': Conductor('b'),
            'gone': Conductor('gone'),
        }
        active = {
            ':ipmi': {'a', 'b'},
            'Rack1:redfish': {'a'},
            ':ipmi-only-in-ironic': {'c'},
        }
        profiles = {
            p.name: p for p in candidates.live_profiles(members, active)
        }
        self.assertEqual({'a', 'b'}, set(profiles))
        # Ironic's database decides hardware types and group, not the
        # published capabilities.
        self.assertEqual(
            frozenset({'ipmi', 'redfish'}), profiles['a'].hardware_types
        )
        self.assertEqual({'x': 1}, dict(profiles['a'].soft_affinity_tags))
        self.assertEqual(frozenset({'ipmi'}), profiles['b'].hardware_types)
        self.assertEqual(
            frozenset({'c'}), candidates.not_members(members, active)
        )

    def test_nothing_active(self):
        self.assertEqual([], candidates.live_profiles({}, {}))
        self.assertEqual(frozenset(), candidates.not_members({}, {}))
