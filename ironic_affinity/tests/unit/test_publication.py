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

"""What a conductor publishes, computed without a backend."""

from ironic_affinity import adoption
from ironic_affinity import profile
from ironic_affinity import publication
from ironic_affinity.tests import base

T0 = 1_800_000_000.0
SETTINGS = publication.Settings(
    rebalance_period=60.0, adoption_period_set=False, lead=10.0
)


def vote(side, period=120.0):
    return adoption.Vote(side, T0 - 500, period)


class ComposeTestCase(base.TestCase):
    def setUp(self):
        super().setUp()
        self.before = profile.ConductorProfile.build(
            'c1', soft_affinity_tags='rack1'
        )
        self.now = profile.ConductorProfile.build(
            'c1', soft_affinity_tags='rack2'
        )

    def test_an_affinity_vote_without_history_publishes_no_switch(self):
        found = publication.compose(
            self.before, self.now, vote('affinity'), (), None, SETTINGS, T0
        )
        self.assertIsNone(found.profile.switching)
        # The change of tags rolls out over the rebalance period.
        (change,) = found.profile.changes
        self.assertEqual(
            (self.before, T0, 60.0), (change.before, change.at, change.period)
        )
        self.assertEqual((), found.recorded)

    def test_a_stock_vote_is_published_with_its_period(self):
        found = publication.compose(
            None, self.now, vote('stock'), (), None, SETTINGS, T0
        )
        self.assertEqual(vote('stock'), found.profile.switching.vote)

    def test_the_recorder_records_the_switch_due_one_lead_ahead(self):
        # Every member votes affinity; the history says stock: a switch
        # to affinity is due, and c1, first by name, records it.
        history = (adoption.Switch('stock', adoption.ORIGIN_AT, 0.0),)
        agreement = adoption.agree(
            {'c1': adoption.Published(vote('affinity'), history), 'c2': None},
            (),
        )
        self.assertTrue(agreement.due)
        self.assertEqual('c1', agreement.recorder)
        found = publication.compose(
            None, self.now, vote('affinity'), history, agreement, SETTINGS, T0
        )
        (switch,) = found.recorded
        self.assertEqual(adoption.Switch('affinity', T0 + 10.0, 120.0), switch)
        self.assertEqual(history + (switch,), found.history)
        self.assertEqual(found.history, found.profile.switching.switches)
        # At the next beat, nothing more is recorded.
        again = publication.compose(
            None,
            self.now,
            vote('affinity'),
            found.history,
            agreement,
            SETTINGS,
            T0 + 1,
        )
        self.assertEqual((), again.recorded)
        self.assertEqual(found.history, again.history)
