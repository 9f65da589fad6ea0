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

"""Facts read through, or written, ahead of the tag cache."""

import threading

import sqlalchemy as sa

from ironic_affinity import exception
from ironic_affinity.integration.node_tags import fresh_nodes
from ironic_affinity.integration.node_tags import node_facts
from ironic_affinity.tests import base
from ironic_affinity.tests.unit.integration.ring import test_capacity_state

KEEP = 6.0


def facts(*tags):
    return node_facts.NodeFacts('ipmi', '', frozenset(tags))


class Rows:
    """The nodes table as the read function sees it."""

    def __init__(self):
        self.rows = {}
        self.reads = []
        self.error = None
        self.gate = None

    def __call__(self, uuid):
        self.reads.append(uuid)
        if self.gate is not None:
            self.gate.wait(5)
        if self.error is not None:
            raise self.error
        return self.rows.get(uuid)


class FreshNodesTestCase(base.TestCase):
    def setUp(self):
        super().setUp()
        self.clock = test_capacity_state.Clock()
        self.rows = Rows()
        self.fresh = fresh_nodes.FreshNodes(
            self.rows, lambda: KEEP, absent_seconds=1.0, clock=self.clock
        )

    def test_a_held_node_is_not_read(self):
        self.assertEqual(facts('a'), self.fresh.lookup('n1', facts('a')))
        self.assertEqual([], self.rows.reads)

    def test_an_unknown_node_is_read_once_until_the_cache_has_it(self):
        self.rows.rows['n1'] = facts('dc2')
        for _ in range(3):
            self.assertEqual(facts('dc2'), self.fresh.lookup('n1', None))
        self.assertEqual(['n1'], self.rows.reads)
        # The cache has caught up: the entry goes at the next prune.
        self.fresh.prune(lambda uuid: facts('dc2'))
        self.assertEqual(0, len(self.fresh))

    def test_a_node_in_no_row_is_not_read_again_for_a_while(self):
        self.assertIsNone(self.fresh.lookup('gone', None))
        self.assertIsNone(self.fresh.lookup('gone', None))
        self.assertEqual(['gone'], self.rows.reads)
        self.clock.advance(1.0)
        self.rows.rows['gone'] = facts('x')
        self.assertEqual(facts('x'), self.fresh.lookup('gone', None))
        self.assertEqual(['gone', 'gone'], self.rows.reads)

    def test_an_unreadable_row_is_an_error_naming_the_node(self):
        self.rows.error = sa.exc.OperationalError('SELECT', {}, 'gone away')
        error = self.assertRaises(
            exception.NodeTagsUnreadable, self.fresh.lookup, 'n1', None
        )
        self.assertIn('node n1', str(error))
        self.assertIn('gone away', str(error))
        # Not remembered as absent: read again next time.
        self.rows.error = None
        self.rows.rows['n1'] = facts('a')
        self.assertEqual(facts('a'), self.fresh.lookup('n1', None))

    def test_a_write_here_wins_until_the_cache_has_it(self):
        self.rows.rows['n1'] = facts('new')
        self.fresh.written('n1')
        self.assertEqual(facts('new'), self.fresh.lookup('n1', facts('old')))
        self.assertEqual(facts('new'), self.fresh.held('n1', facts('old')))
        self.fresh.prune(lambda uuid: facts('old'))
        self.assertEqual(facts('new'), self.fresh.lookup('n1', facts('old')))
        self.fresh.prune(lambda uuid: facts('new'))
        self.assertEqual(0, len(self.fresh))

    def test_a_write_here_gives_way_after_keep_seconds(self):
        # Another process's later edit may be what the cache holds.
        self.rows.rows['n1'] = facts('mine')
        self.fresh.written('n1')
        self.clock.advance(KEEP)
        self.assertEqual(
            facts('theirs'), self.fresh.lookup('n1', facts('theirs'))
        )
        self.fresh.prune(lambda uuid: facts('theirs'))
        self.assertEqual(0, len(self.fresh))

    def test_a_deleted_node_written_here_is_forgotten(self):
        self.rows.rows['n1'] = facts('a')
        self.fresh.written('n1')
        del self.rows.rows['n1']
        self.fresh.written('n1')
        self.assertEqual(0, len(self.fresh))

    def test_the_node_this_thread_creates_goes_by_its_request(self):
        with fresh_nodes.creating(facts('dc2')):
            found = self.fresh.lookup('new', None)
            self.assertIsInstance(found.tags, fresh_nodes.BeingCreated)
            self.assertEqual(frozenset({'dc2'}), found.tags)
            # The row is written: from now on it is the row's.
            self.rows.rows['new'] = facts('dc2')
            found = self.fresh.lookup('new', None)
        self.assertNotIsInstance(found.tags, fresh_nodes.BeingCreated)
        self.assertEqual(facts('dc2'), found)
        self.assertEqual(['new', 'new'], self.rows.reads)

    def test_creation_wins_over_a_recent_absence(self):
        self.assertIsNone(self.fresh.lookup('new', None))
        with fresh_nodes.creating(facts('dc2')):
            found = self.fresh.lookup('new', None)
        self.assertEqual(frozenset({'dc2'}), found.tags)

    def test_another_thread_does_not_see_this_threads_creation(self):
        seen = []
        with fresh_nodes.creating(facts('dc2')):
            thread = threading.Thread(
                target=lambda: seen.append(self.fresh.lookup('other', None))
            )
            thread.start()
            thread.join()
        self.assertEqual([None], seen)

    def test_one_read_per_node_at_a_time(self):
        self.rows.rows['n1'] = facts('a')
        self.rows.gate = threading.Event()
        found = []

        def look():
            found.append(self.fresh.lookup('n1', None))

        threads = [threading.Thread(target=look) for _ in range(5)]
        for thread in threads:
            thread.start()
        self.rows.gate.set()
        for thread in threads:
            thread.join()
        self.assertEqual([facts('a')] * 5, found)
        self.assertEqual(['n1'], self.rows.reads)

    def test_at_most_two_rows_are_read_at_once(self):
        active = []
        most = []
        release = threading.Event()

        def read(uuid):
            active.append(uuid)
            most.append(len(active))
            release.wait(5)
            active.remove(uuid)
            return facts(uuid)

        fresh = fresh_nodes.FreshNodes(read, lambda: KEEP, clock=self.clock)
        threads = [
            threading.Thread(target=fresh.lookup, args=('n%d' % i, None))
            for i in range(5)
        ]
        for thread in threads:
            thread.start()
        # Two reads are under way; the others wait, however long.
        for _ in range(500):
            if len(active) == fresh_nodes.READERS:
                break
            threading.Event().wait(0.01)
        threading.Event().wait(0.2)
        self.assertEqual(fresh_nodes.READERS, len(active))
        release.set()
        for thread in threads:
            thread.join()
        self.assertEqual(fresh_nodes.READERS, max(most))
        self.assertEqual(5, fresh.rows_read)
