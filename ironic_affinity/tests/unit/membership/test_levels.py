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

"""The compatibility rule of what processes publish
(doc/source/contributor/formats.rst), held for every encoder."""

import dataclasses
import json

from ironic_affinity import adoption
from ironic_affinity import profile
from ironic_affinity.integration.node_tags import change_notices
from ironic_affinity.membership import capabilities
from ironic_affinity.membership import levels
from ironic_affinity.tests import base

# What the builds before format levels (commit a5fae8d and earlier)
# published and read: level 1. A key added to level 1 would be published
# under a pin of 1, to readers that do not know it.
LEVEL_1_CONDUCTOR_KEYS = {
    'format',
    'hard_affinity_tags',
    'hard_anti_affinity_tags',
    'soft_affinity_tags',
    'soft_anti_affinity_tags',
    'hardware_types',
    'conductor_group',
    'max_nodes',
    'changes',
    'switching',
}
LEVEL_1_API_KEYS = {'format', 'role', 'node_changes'}
# Keys no reader decides anything by: level 1 readers ignore them.
DESCRIPTIVE = {'enabled_by', 'version', 'reads', 'writes'}


def _everything():
    """A conductor with every field an entry can carry set."""
    before = profile.ConductorProfile.build(
        'c1', soft_affinity_tags='rack9', max_nodes=3, draining=True
    )
    return dataclasses.replace(
        profile.ConductorProfile.build(
            'c1',
            hard_affinity_tags='dc1',
            hard_anti_affinity_tags='net3',
            soft_affinity_tags='rack1:4',
            soft_anti_affinity_tags='rack2',
            hardware_types=['ipmi'],
            conductor_group='g1',
            max_nodes=5,
            draining=True,
        ),
        changes=(profile.ProfileChange(before, 1.8e9, 60.0),),
        switching=adoption.Published(
            adoption.Vote(adoption.STOCK, 1.8e9, 30.0),
            (adoption.Switch(adoption.STOCK, 1.8e9 + 5, 30.0),),
        ),
    )


def _schema_keys(entry):
    """(where, key) of every key of an encoded conductor, by mapping:
    top-level, a change, a change's before, switching, a switch."""
    found = {('top', k) for k in entry}
    for change in entry.get('changes', []):
        found |= {('change', k) for k in change}
        if change['before'] is not None:
            found |= {('top', k) for k in change['before']}
    if 'switching' in entry:
        found |= {('switching', k) for k in entry['switching']}
        for switch in entry['switching']['switches']:
            found |= {('switch', k) for k in switch}
    return found


DECLARED = {
    'top': capabilities._KEYS,
    'change': capabilities._CHANGE_KEYS,
    'switching': capabilities._SWITCHING_KEYS,
    'switch': capabilities._SWITCH_KEYS,
}


class PinTestCase(base.TestCase):
    def test_each_level_publishes_only_its_keys(self):
        seen = set()
        for level in range(1, levels.LEVEL + 1):
            entry = capabilities.encode(_everything(), level)
            for where, key in _schema_keys(entry):
                self.assertLessEqual(DECLARED[where][key], level, key)
                seen.add(key)
        # Every key declared is published by some level: the test sees
        # the whole schema.
        self.assertEqual(set().union(*DECLARED.values()) - DESCRIPTIVE, seen)

    def test_level_1_is_what_releases_before_levels_read(self):
        self.assertEqual(
            LEVEL_1_CONDUCTOR_KEYS | DESCRIPTIVE,
            {k for k, v in capabilities._KEYS.items() if v == 1},
        )
        self.assertEqual(DESCRIPTIVE, set(levels.DESCRIPTIVE))
        self.assertEqual(
            LEVEL_1_API_KEYS | DESCRIPTIVE, set(change_notices._KEYS)
        )
        for where in ('change', 'switching', 'switch'):
            self.assertEqual({1}, set(DECLARED[where].values()), where)

    def test_a_key_published_without_a_level_is_refused(self):
        self.assertRaises(
            KeyError, levels.at_level, {'new_key': 1}, {'format': 1}, 9
        )

    def test_a_pinned_entry_reads_as_the_profile_without_what_is_new(self):
        pinned = capabilities.encode(_everything(), 1)
        self.assertNotIn(capabilities.DRAINING, pinned)
        self.assertNotIn(capabilities.DRAINING, pinned['changes'][0]['before'])
        read = capabilities.decode('c1', json.dumps(pinned))
        self.assertFalse(read.draining)
        self.assertFalse(read.changes[0].before.draining)
        self.assertEqual(
            dataclasses.replace(_everything(), draining=False),
            dataclasses.replace(read, changes=_everything().changes),
        )
        # Unpinned, drain is read back.
        self.assertTrue(
            capabilities.decode(
                'c1', capabilities.encode(_everything())
            ).draining
        )

    def test_a_reader_keeps_a_member_with_keys_it_does_not_know(self):
        entry = capabilities.encode(_everything())
        newer = json.loads(json.dumps(entry))
        newer['future_key'] = {'any': ['shape']}
        newer['changes'][0]['future_key'] = 1
        newer['switching']['future_key'] = 1
        newer['switching']['switches'][0]['future_key'] = 1
        self.assertEqual(
            capabilities.decode('c1', entry),
            capabilities.decode('c1', newer),
        )


class RunsTestCase(base.TestCase):
    def test_what_a_process_says_it_runs(self):
        self.config(pin_format=1)
        said = levels.describe(self.conf, 'ironic.conf')
        self.assertEqual(
            levels.Runs(
                levels.plugin_version(), levels.LEVEL, 1, 'ironic.conf'
            ),
            levels.runs_of(json.dumps(said)),
        )
        self.assertNotIn(levels.ENABLED_BY, levels.describe(self.conf, None))

    def test_an_entry_of_a_release_before_levels_is_level_1(self):
        old = {'format': 1, 'enabled_by': 'ironic.conf'}
        self.assertEqual(
            levels.Runs(None, 1, 1, 'ironic.conf'), levels.runs_of(old)
        )

    def test_bad_values_say_nothing_and_refuse_nothing(self):
        for bad in (None, True, 0, -1, 'x' * 300, 10**6, [1]):
            entry = dict(
                capabilities.encode(_everything()),
                version=bad,
                reads=bad,
                writes=bad,
                enabled_by=bad,
            )
            self.assertEqual(
                levels.Runs(None, 1, 1, None), levels.runs_of(entry), bad
            )
            # What a process says it runs leaves the profile alone.
            self.assertEqual(
                _everything(), capabilities.decode('c1', entry), bad
            )
        for raw in (None, b'not json', [], 'null', b''):
            self.assertEqual(
                levels.Runs(None, 1, 1, None), levels.runs_of(raw)
            )

    def test_a_process_writes_no_level_above_what_it_reads(self):
        self.assertEqual(2, levels.runs_of({'reads': 2, 'writes': 7}).writes)

    def test_the_pin_is_bounded_by_this_release(self):
        self.assertRaises(ValueError, self.config, pin_format=levels.LEVEL + 1)
        self.assertRaises(ValueError, self.config, pin_format=0)
        self.config(pin_format=None)
        self.assertEqual(levels.LEVEL, levels.writes(self.conf))
