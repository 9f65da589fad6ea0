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

import logging
import time
from unittest import mock

import fixtures

from ironic_affinity import adoption
from ironic_affinity import profile
from ironic_affinity.membership import capabilities
from ironic_affinity.membership import levels
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

    def published(self, tags='rack1'):
        """The profile, and what the process runs beside it."""
        return {**self.expected(tags), **levels.describe(self.conf, None)}

    def test_without_a_period_what_is_published_is_unchanged(self):
        # The profile alone, as before the option existed: joining,
        # taking over an entry, or after a change of tags.
        self.assertEqual(self.published(), self.compose(None))
        self.assertEqual(self.published(), self.compose(self.expected()))
        self.assertEqual(
            self.published(), self.compose(self.expected('rack2'))
        )

    def test_with_a_period(self):
        self.config(rebalance_period=120)
        before = time.time()
        joined = self.compose(None)
        (join,) = joined['changes']
        self.assertIsNone(join['before'])
        self.assertEqual(120, join['period'])
        self.assertTrue(before <= join['at'] <= time.time())
        self.assertEqual(
            self.published(),
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
        self.assertEqual(self.published(), self.compose({'format': 99}))
        self.assertEqual(self.published(), self.compose({}))


class SwitchingTestCase(base.TestCase):
    """The vote and the switches a conductor publishes with its profile."""

    def setUp(self):
        super().setUp()
        self.config(backend_url='redis://127.0.0.1:1')
        self.agreement = None

    def published(self, manager='affinity', period=None, sized=3600.0):
        self.config(hash_ring_manager=manager, adoption_period=period)
        membership = service.ConductorMembership(
            self.conf,
            NAME,
            agreement=lambda: self.agreement,
            sized_period=lambda: sized,
        )
        composed = membership._compose(None, membership.member._capabilities)
        return membership, composed.get('switching')

    def test_affinity_without_history_publishes_nothing_new(self):
        _membership, found = self.published()
        self.assertIsNone(found)
        self.agreement = adoption.agree({NAME: None}, ())
        _membership, found = self.published()
        self.assertIsNone(found)

    def test_a_vote_for_stock_is_published_with_its_period(self):
        before = time.time()
        _membership, found = self.published('stock', sized=1260.0)
        self.assertEqual(
            ('stock', 1260.0, []),
            (found['vote'], found['period'], found['switches']),
        )
        self.assertTrue(before <= found['since'] <= time.time())
        _membership, found = self.published('stock', period=90)
        self.assertEqual(90, found['period'])

    def test_the_recorder_publishes_the_due_switch_once(self):
        origin = adoption.Switch('stock', adoption.ORIGIN_AT, 0.0)
        vote = adoption.Published(
            adoption.Vote('affinity', 1.8e9, 60.0), (origin,)
        )
        self.agreement = adoption.agree({NAME: vote, 'z-other': vote}, ())
        self.assertTrue(self.agreement.due)
        before = time.time()
        membership, found = self.published(period=60)
        switch = found['switches'][-1]
        self.assertEqual(('affinity', 60), (switch['to'], switch['period']))
        # One member timeout ahead: every process reads it by then.
        timeout = self.conf.affinity.member_timeout
        self.assertTrue(
            before + timeout <= switch['at'] <= time.time() + timeout
        )
        # Its own view has not caught up: the same switch, not another.
        again = membership._compose(None, membership.member._capabilities)
        self.assertEqual(found, again['switching'])


class WhatItRunsTestCase(base.TestCase):
    """What the conductor runs, published beside its profile and kept
    through every later publication; and the pin on what it publishes."""

    def setUp(self):
        super().setUp()
        self.config(
            backend_url='redis://127.0.0.1:1', soft_affinity_tags='rack1'
        )
        self.logger = self.useFixture(
            fixtures.FakeLogger(name='ironic_affinity', level=logging.INFO)
        )

    def test_published_and_kept_by_each_composition(self):
        membership = service.ConductorMembership(
            self.conf, NAME, enabled_by='ironic.conf'
        )
        first = membership.member._capabilities
        composed = membership._compose(first, first)
        for published in (first, composed):
            self.assertEqual(
                levels.Runs(
                    levels.plugin_version(),
                    levels.LEVEL,
                    levels.LEVEL,
                    'ironic.conf',
                ),
                levels.runs_of(published),
            )
        self.assertEqual(
            capabilities.decode(NAME, first),
            capabilities.decode(NAME, composed),
        )
        unsaid = service.ConductorMembership(self.conf, NAME)
        self.assertIsNone(
            levels.runs_of(unsaid.member._capabilities).enabled_by
        )

    def test_a_pinned_conductor_does_not_drain_until_the_pin_is_lifted(self):
        self.config(drain=True, pin_format=1, rebalance_period=60)
        membership = service.ConductorMembership(self.conf, NAME)
        first = membership.member._capabilities
        composed = membership._compose(first, first)
        for published in (first, composed):
            self.assertNotIn(capabilities.DRAINING, published)
            self.assertEqual(1, levels.runs_of(published).writes)
        self.assertFalse(capabilities.decode(NAME, composed).draining)
        # Said once, not at every beat.
        self.assertEqual(
            1, self.logger.output.count('does not publish draining')
        )
        # Lifted on SIGHUP: drain is published, as a change of the
        # profile that rolls out over rebalance_period.
        self.config(pin_format=None)
        membership._reloaded(self.conf, {})
        lifted = membership._compose(composed, membership.member._capabilities)
        self.assertIs(True, lifted[capabilities.DRAINING])
        self.assertEqual(levels.LEVEL, levels.runs_of(lifted).writes)
        (change,) = lifted['changes']
        self.assertNotIn(capabilities.DRAINING, change['before'])


class StopTestCase(base.TestCase):
    """Whether a stopping conductor leaves the group or keeps its entry."""

    def setUp(self):
        super().setUp()
        self.config(backend_url='redis://127.0.0.1:1')
        self.membership = service.ConductorMembership(self.conf, NAME)
        self.membership.member = mock.Mock()
        self.membership.lease = mock.Mock()

    def test_a_stop_leaves(self):
        self.assertTrue(self.membership.stop())
        self.membership.member.stop.assert_called_once_with()
        self.membership.lease.end.assert_called_once_with()
        self.membership.member.hand_over.assert_not_called()

    def test_a_stop_that_keeps_the_conductor_registered_keeps_the_entry(self):
        # SIGUSR1 then a restart: back within the member timeout, the
        # conductor finds its nodes where they were, as on Ironic's ring.
        self.assertFalse(self.membership.stop(staying_registered=True))
        self.membership.member.hand_over.assert_called_once_with()
        self.membership.member.stop.assert_not_called()
        self.membership.lease.end.assert_not_called()

    def test_a_stop_right_after_a_reload_keeps_the_entry(self):
        # Ironic 39 restarts its worker on SIGHUP: the caller must not
        # drain or log a leave that did not happen.
        self.useFixture(
            fixtures.MockPatchObject(
                service, '_RELOAD_REQUESTED_AT', time.monotonic()
            )
        )
        self.assertFalse(self.membership.stop())
        self.membership.member.hand_over.assert_called_once_with()
        self.membership.member.stop.assert_not_called()
