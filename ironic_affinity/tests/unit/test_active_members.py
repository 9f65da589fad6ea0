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

from ironic_affinity import active_members
from ironic_affinity import profile
from ironic_affinity.tests import base

Conductor = profile.ConductorProfile.build


class ActiveMembersTestCase(base.TestCase):
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
            p.name: p for p in active_members.profiles(members, active)
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
            frozenset({'c'}),
            active_members.missing_from_group(members, active),
        )

    def test_changes_rolling_out_see_what_ironic_says_too(self):
        # A rolling change paces tags, not what Ironic says a conductor
        # runs: the profile before the change gets Ironic's answer too.
        before = Conductor('a', soft_affinity_tags='y', hardware_types=['z'])
        member = dataclasses.replace(
            Conductor('a', soft_affinity_tags='x', conductor_group='old'),
            changes=(
                profile.ProfileChange(None, 1.8e9, 60.0),
                profile.ProfileChange(before, 1.8e9 + 5, 60.0),
            ),
        )
        (found,) = active_members.profiles({'a': member}, {'G:ipmi': {'a'}})
        self.assertEqual('g', found.conductor_group)
        self.assertIsNone(found.changes[0].before)
        seen = found.changes[1].before
        self.assertEqual(frozenset({'ipmi'}), seen.hardware_types)
        self.assertEqual('g', seen.conductor_group)
        self.assertEqual({'y': 1}, dict(seen.soft_affinity_tags))
        self.assertEqual(
            (1.8e9, 1.8e9 + 5), tuple(c.at for c in found.changes)
        )

    def test_nothing_active(self):
        self.assertEqual([], active_members.profiles({}, {}))
        self.assertEqual(
            frozenset(), active_members.missing_from_group({}, {})
        )

    def test_without_groups_merges_every_group(self):
        active = {
            ':ipmi': {'a'},
            'rack1:ipmi': {'b'},
            'rack1:redfish': {'b'},
        }
        self.assertEqual(
            {'ipmi': frozenset({'a', 'b'}), 'redfish': frozenset({'b'})},
            active_members.without_groups(active),
        )

    def test_keys_without_group_give_group_none(self):
        members = {'b': Conductor('b')}
        found = active_members.profiles(members, {'ipmi': {'b'}})
        self.assertEqual([''], [p.conductor_group for p in found])
        self.assertEqual(
            [frozenset({'ipmi'})], [p.hardware_types for p in found]
        )

    def test_split_key(self):
        self.assertEqual(('', 'ipmi'), active_members.split_key(':ipmi'))
        self.assertEqual(('', 'ipmi'), active_members.split_key('ipmi'))
        self.assertEqual(('r1', 'ipmi'), active_members.split_key('r1:ipmi'))
