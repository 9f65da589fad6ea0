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

"""check's survey of the tags: nodes without any, and node tags that no
conductor's list mentions (a typo, or a rack no conductor is told of)."""

from ironic_affinity import profile
from ironic_affinity import report
from ironic_affinity.cmd import render
from ironic_affinity.tests import base


def node(name, *tags):
    return profile.NodeRequest(name, frozenset(tags))


class TagSurveyTestCase(base.TestCase):
    def setUp(self):
        super().setUp()
        self.conductors = [
            profile.ConductorProfile(
                'c1',
                hard_affinity_tags=frozenset({'dc1'}),
                soft_affinity_tags={'rack10': 2},
            ),
            profile.ConductorProfile(
                'c2',
                hard_affinity_tags=frozenset({'dc1'}),
                hard_anti_affinity_tags=frozenset({'customer1'}),
                soft_anti_affinity_tags={'rack20': 1},
            ),
        ]

    def test_untagged_nodes_and_tags_no_list_mentions(self):
        nodes = [
            node('n1', 'dc1', 'rack10'),
            node('n2', 'dc1', 'customer1', 'rack11'),
            node('n3'),
            node('n4', 'dc1', 'rack11', 'rakc20'),
            node('n5'),
        ]
        found = report.check(self.conductors, nodes)
        self.assertEqual(['n3', 'n5'], found['untagged'])
        # Every list counts, hard or soft, affinity or anti-affinity.
        self.assertEqual({'rack11': 2, 'rakc20': 1}, found['unused_tags'])
        text = render.render_check(found)
        self.assertIn('Nodes without tags: 2 (n3, n5)', text)
        self.assertIn(
            "Node tags no conductor's list mentions: rack11 (2 node(s)), "
            'rakc20 (1 node(s))',
            text,
        )

    def test_nothing_to_say(self):
        found = report.check(self.conductors, [node('n1', 'dc1')])
        self.assertEqual(([], {}), (found['untagged'], found['unused_tags']))
        self.assertNotIn('tags', render.render_check(found))

    def test_the_table_names_the_first_untagged_nodes(self):
        nodes = [node('n%02d' % i) for i in range(12)]
        text = render.render_check(report.check(self.conductors, nodes))
        self.assertIn(
            'Nodes without tags: 12 (%s, ...)'
            % ', '.join('n%02d' % i for i in range(render.UNTAGGED_SHOWN)),
            text,
        )
