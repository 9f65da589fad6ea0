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

"""Membership through Redis Sentinel, on the URL Kolla-Ansible gives.

Kolla-Ansible's ``valkey_connection_string`` points at a sentinel, with
a user name and password for the servers and Kolla's extras
(``socket_timeout=60&retry_on_timeout=yes``): sentinel.py runs that set
up. Everything a driver must do (test_membership.MembershipMixin) must
work through it, and a failover of the master must not cost members
their place in the view: Kolla's 60 s socket timeout is the client's,
and the plugin must not wait that long to find the new master.
"""

import logging
import time

from testtools import content

from ironic_affinity.membership import view
from ironic_affinity.tests import base
from ironic_affinity.tests.functional import sentinel
from ironic_affinity.tests.functional import test_membership
from ironic_affinity.tests.functional.test_membership import TIMEOUT
from ironic_affinity.tests.functional.test_membership import WATCH

LOG = logging.getLogger(__name__)

HEARTBEAT = 1.0
# A sentinel takes the master for down after down-after without an
# answer to its pings (sent every second), then it is elected and
# promotes the replica, which it sees as master at its next INFO
# (every second while it fails over). The rest is slack for a loaded
# machine.
PROMOTION_BOUND = sentinel.DOWN_AFTER + 1.0 + 4.0
# From the pause to a fresh view with both members: the promotion; a
# read or beat already waiting on the paused master is given up after
# the member timeout (its client would wait Kolla's 60 s); then a watch
# interval, a heartbeat, and slack.
RECOVERY_BOUND = PROMOTION_BOUND + TIMEOUT + WATCH + HEARTBEAT + 3.0
# Members back on their own merit, not held: rejoined before the hold
# (from the view's first read back) ends.
REJOIN_BOUND = view.HOLD_TIMEOUTS * TIMEOUT + WATCH + 2.0


class SentinelHelpers(test_membership.MemberHelpers):
    """The helpers of test_membership on a Sentinel-managed Redis."""

    def make_server(self):
        return sentinel.RedisSentinel()

    def _attach_logs(self, exc_info):
        super()._attach_logs(exc_info)
        for role, text in self.server.logs().items():
            self.addDetail('%s-log' % role, content.text_content(text))


class SentinelMembershipTestCase(SentinelHelpers, base.TestCase):
    """Membership through Sentinel on Kolla's URL: the cases of a single
    Redis server that go through how the client finds the master (the
    rest of MembershipMixin is the driver's, whichever way it does; all
    of it passed here too, and costs the gate three minutes more)."""

    mixin = test_membership.MembershipMixin
    test_join_with_capabilities = mixin.test_join_with_capabilities
    test_sigkill_drops_member = mixin.test_sigkill_drops_member
    test_both_read_paths_agree = mixin.test_both_read_paths_agree
    test_a_given_up_client_does_not_drop_its_successor = (
        test_membership.RedisMembershipTestCase.test_a_given_up_client_does_not_drop_its_successor  # noqa: E501
    )

    def test_password_and_user_show_nowhere(self):
        self.members_hiding(self.server.password, 'default:***@127.0.0.1')


class FailoverMixin(SentinelHelpers):
    """The master stops answering, as a dead host does; Sentinel
    promotes the replica, and the view finds the members there."""

    def fail_over_under_members(self):
        """Pause the master under two members and the view; the replica
        is promoted and the view is fresh with both members within
        RECOVERY_BOUND, far below Kolla's 60 s socket timeout, and no
        member ever leaves it."""
        self.start_member('a')
        self.start_member('b')
        self.wait_view(lambda s: {'a', 'b'} <= set(s.members))
        samples, done, sampler = self.sample_view()
        paused = time.monotonic()
        # The fixture resumes and stops the old master on clean-up.
        self.server.pause_master()
        LOG.info('Master paused')
        promoted = self.server.wait_promoted(60) - paused
        LOG.info('Replica promoted after %.1f s', promoted)
        # Waited for past the bound, so that a slow recovery is measured.
        self.wait_view(
            lambda s: not s.stale and {'a', 'b'} <= set(s.members), 180
        )
        recovered = time.monotonic() - paused
        LOG.info('View fresh with both members after %.1f s', recovered)
        self.wait_view(
            lambda s: (
                not s.stale and not s.held and {'a', 'b'} <= set(s.members)
            ),
            60,
        )
        rejoined = time.monotonic() - paused
        LOG.info('Both members back on their own after %.1f s', rejoined)
        done.set()
        sampler.join(5)
        measured = (
            'promoted after %.1f s (bound %.1f); view fresh with both '
            'members after %.1f s (bound %.1f); both in it on their own, '
            'not held, after %.1f s'
            % (promoted, PROMOTION_BOUND, recovered, RECOVERY_BOUND, rejoined)
        )
        self.addDetail('failover-times', content.text_content(measured))
        # Never, during the failover or after, did a member vanish.
        for snapshot in samples + [self.view.snapshot()]:
            self.assertEqual({'a', 'b'}, set(snapshot.members), snapshot)
        for name in ('a', 'b'):
            self.assertIsNone(self.processes[name].poll(), name)
        self.assertLess(promoted, PROMOTION_BOUND, measured)
        self.assertLess(recovered, RECOVERY_BOUND, measured)
        self.assertLess(rejoined - recovered, REJOIN_BOUND, measured)


class SentinelFailoverTestCase(FailoverMixin, base.TestCase):
    """On Kolla's URL. Measured here (redis-server 7.0.15, tooz 9.0.1,
    redis-py 8.1.0): promoted after 7 s, the view fresh with both
    members after 13 s. Before backend.discard stopped clients in a
    thread of their own, 123 s: the view's discard waited in tooz's
    executor shutdown for the read still stuck on the paused master,
    which redis-py ends after 2 x 60 s."""

    def test_failover_keeps_members(self):
        # On Kolla's URL as it is.
        self.fail_over_under_members()


class SentinelFailoverTimeoutsTestCase(FailoverMixin, base.TestCase):
    """The same without socket_timeout=60&retry_on_timeout=yes (tooz
    then waits the member timeout per read): whether a slow recovery on
    Kolla's URL comes from those two options."""

    def make_server(self):
        return sentinel.RedisSentinel(kolla_extras=False)

    def test_failover_keeps_members_without_kolla_timeouts(self):
        self.fail_over_under_members()
