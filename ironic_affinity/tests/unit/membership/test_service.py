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

"""What a conductor publishes, from its options and what it published
before (the member thread that carries it is test_member's)."""

import time

from ironic_affinity import profile
from ironic_affinity.membership import capabilities
from ironic_affinity.membership import service
from ironic_affinity.tests import base

NAME = 'host-a:8091'


class ComposeTestCase(base.TestCase):
    def setUp(self):
        super().setUp()
        self.config(
            backend_url='redis://127.0.0.1:1', soft_affinity_tags='rack1'
        )

    def membership(self):
        return service.ConductorMembership(self.conf, NAME)

    def compose(self, previous):
        membership = self.membership()
        return membership._compose(previous, membership.member._capabilities)

    def expected(self, tags='rack1'):
        return capabilities.encode(
            profile.ConductorProfile.build(NAME, soft_affinity_tags=tags)
        )

    def test_without_a_period_what_is_published_is_unchanged(self):
        # The profile alone, as before the option existed: joining,
        # taking over an entry, or after a change of tags.
        self.assertEqual(self.expected(), self.compose(None))
        self.assertEqual(self.expected(), self.compose(self.expected()))
        self.assertEqual(self.expected(), self.compose(self.expected('rack2')))

    def test_with_a_period(self):
        self.config(rebalance_period=120)
        before = time.time()
        joined = self.compose(None)
        (join,) = joined['changes']
        self.assertIsNone(join['before'])
        self.assertEqual(120, join['period'])
        self.assertTrue(before <= join['at'] <= time.time())
        self.assertEqual(
            self.expected(),
            {k: v for k, v in joined.items() if k != 'changes'},
        )
        # Beats after it keep the change until it ends.
        self.assertEqual(joined, self.compose(joined))
        # A reload of the tags: the change, from the previous profile.
        changed = self.compose(self.expected('rack2'))
        (change,) = changed['changes']
        self.assertEqual(self.expected('rack2'), change['before'])

    def test_an_entry_it_cannot_read_is_no_change(self):
        self.config(rebalance_period=120)
        self.assertEqual(self.expected(), self.compose({'format': 99}))
        self.assertEqual(self.expected(), self.compose({}))
