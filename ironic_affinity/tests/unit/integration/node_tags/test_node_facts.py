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

"""A node's published text, both ways, without a cache around it; the
warnings are the cache's tests (``test_tag_reader``)."""

import calendar
import dataclasses
import datetime
import json

from ironic_affinity import exception
from ironic_affinity.integration.node_tags import node_facts
from ironic_affinity.tests import base

UUID = '00000000-0000-4000-8000-000000000001'


class NodeFactsTestCase(base.TestCase):
    def test_a_row_decodes_to_what_it_holds(self):
        encoder = node_facts.RowEncoder('affinity_tags')
        text = encoder.encode(
            UUID,
            json.dumps({'affinity_tags': 'rack2, net1'}),
            'ipmi',
            'Rack-A',
        )
        self.assertEqual(
            node_facts.NodeFacts(
                'ipmi', 'rack-a', frozenset({'rack2', 'net1'})
            ),
            node_facts.decode(text),
        )
        self.assertEqual(
            text, node_facts.encode_facts(node_facts.decode(text))
        )

    def test_a_row_with_its_creation_time(self):
        encoder = node_facts.RowEncoder('affinity_tags')
        created = datetime.datetime(2026, 12, 5, 1, 2, 3, 1)
        text = encoder.encode(UUID, None, 'ipmi', '', created)
        facts = node_facts.decode(text)
        seconds = facts.created_at
        # Rounded up: created in the second a change began is after it.
        self.assertEqual(
            calendar.timegm((2026, 12, 5, 1, 2, 4, 0, 0, 0)), seconds
        )
        without = node_facts.decode(encoder.encode(UUID, None, 'ipmi', ''))
        self.assertIsNone(without.created_at)
        self.assertEqual(
            dataclasses.replace(without, created_at=seconds), facts
        )
        self.assertEqual(text, node_facts.encode_facts(facts))
        self.assertEqual(
            seconds, node_facts.requests([(UUID, facts)])[0].created_at
        )
        # Nodes alike but for their creation time share the rest.
        decoder = node_facts.Decoder()
        self.assertIs(
            decoder.decode(text).tags,
            decoder.decode(encoder.encode(UUID, None, 'ipmi', '')).tags,
        )
        # Aware times too; anything else is no time.
        self.assertEqual(
            seconds - 1,
            node_facts.created_seconds(
                created.replace(microsecond=0, tzinfo=datetime.timezone.utc)
            ),
        )
        self.assertIsNone(node_facts.created_seconds('2026-12-05'))

    def test_a_row_without_columns_or_tags_is_a_node_without_facts(self):
        encoder = node_facts.RowEncoder('affinity_tags')
        self.assertEqual(
            node_facts.NO_FACTS,
            node_facts.decode(encoder.encode(UUID, None, None, None)),
        )

    def test_unusable_tags_are_published_as_none(self):
        encoder = node_facts.RowEncoder('affinity_tags')
        for warn in (True, False):
            text = encoder.encode(
                UUID, {'affinity_tags': 'bad tag!'}, 'ipmi', '', warn=warn
            )
            self.assertEqual(frozenset(), node_facts.decode(text).tags)

    def test_a_text_not_written_here_is_never_trusted(self):
        self.assertEqual(node_facts.NO_FACTS, node_facts.decode('rack1'))
        self.assertEqual(
            node_facts.NO_FACTS, node_facts.decode('ipmi\n\nrack1')
        )
        for created in ('soon', '\u00b2', '\u0661\u0662', '9' * 5000, '-1'):
            self.assertEqual(
                node_facts.NO_FACTS,
                node_facts.decode('ipmi\n\nrack1\n' + created),
                created[:12],
            )
        self.assertEqual(
            node_facts.NodeFacts('ipmi', '', frozenset()),
            node_facts.decode('ipmi\n\nbad tag!\n'),
        )

    def test_tags_from_extra(self):
        self.assertEqual(
            frozenset({'a', 'b'}),
            node_facts.tags_from_extra('{"k": ["a", "b"]}', 'k', UUID),
        )
        self.assertEqual(
            frozenset(), node_facts.tags_from_extra('', 'k', UUID)
        )
        self.assertEqual(
            frozenset(), node_facts.tags_from_extra([1], 'k', UUID)
        )
        self.assertRaises(
            exception.InvalidTag,
            node_facts.tags_from_extra,
            {'k': 'bad tag!'},
            'k',
            UUID,
        )

    def test_is_uuid(self):
        self.assertTrue(node_facts.is_uuid(UUID))
        self.assertTrue(node_facts.is_uuid(UUID.upper()))
        self.assertFalse(node_facts.is_uuid('node-1'))
        self.assertFalse(node_facts.is_uuid(UUID.replace('-', '')))

    def test_requests_without_groups_put_every_node_in_group_none(self):
        facts = node_facts.NodeFacts('', 'rack-a', frozenset({'t'}))
        (with_groups,) = node_facts.requests([(UUID, facts)])
        (without,) = node_facts.requests([(UUID, facts)], use_groups=False)
        self.assertEqual(
            (UUID, UUID, None, 'rack-a', frozenset({'t'})),
            (
                with_groups.name,
                with_groups.uuid,
                with_groups.driver,
                with_groups.conductor_group,
                with_groups.tags,
            ),
        )
        self.assertEqual('', without.conductor_group)
