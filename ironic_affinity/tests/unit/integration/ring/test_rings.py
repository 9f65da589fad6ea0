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

"""The ring object Ironic's callers receive (no Ironic needed)."""

import dataclasses

from ironic_affinity import engine
from ironic_affinity import exception
from ironic_affinity import placement
from ironic_affinity import profile
from ironic_affinity import rendezvous
from ironic_affinity.integration.node_tags import fresh_nodes
from ironic_affinity.integration.ring import rings
from ironic_affinity.tests import base

Conductor = profile.ConductorProfile.build


class Refused(Exception):
    pass


class AffinityRingTestCase(base.TestCase):
    def setUp(self):
        super().setUp()
        self.tags = {
            'node-a': frozenset({'dc1'}),
            'node-b': frozenset({'dc9'}),
        }
        self.orphans = []
        conductors = [
            Conductor('c1', hard_affinity_tags='dc1', hardware_types=['x']),
            Conductor('c2', soft_affinity_tags='dc1', hardware_types=['x']),
            Conductor('c3', hardware_types=['x']),
        ]
        self.ring = rings.AffinityRing(
            placement.Placement(conductors),
            'x',
            '',
            ['c1', 'c2', 'c3'],
            self.tags.get,
            self._orphaned,
            Refused,
        )

    def _orphaned(self, node, evaluation):
        self.orphans.append(node)
        return 'nobody wants %s' % node

    def test_placed_by_tags(self):
        # node-a carries dc1: c2 scores 1 (soft dc1), c1 and c3 score 0.
        self.assertEqual({'c2'}, self.ring.get_nodes(b'node-a'))
        # node-b lacks dc1, which c1 requires: c2 or c3, tied at 0.
        self.assertIn(self.ring.get_nodes('node-b').pop(), {'c2', 'c3'})
        self.assertEqual(frozenset({'c1', 'c2', 'c3'}), self.ring.nodes)

    def test_unknown_node_goes_to_a_live_member(self):
        # Node creation: its row (and tags) do not exist yet.
        chosen = self.ring.get_nodes(b'new-node')
        self.assertEqual(1, len(chosen))
        self.assertLessEqual(chosen, {'c1', 'c2', 'c3'})
        self.assertEqual(chosen, self.ring.get_nodes(b'new-node'))
        self.assertEqual([], self.orphans)

    def lonely_ring(self):
        """A ring of c3 alone, which requires dc2."""
        return rings.AffinityRing(
            placement.Placement([Conductor('c3', hard_affinity_tags='dc2')]),
            'x',
            '',
            ['c3'],
            self.tags.get,
            self._orphaned,
            Refused,
        )

    def test_orphan_is_empty_and_pop_raises(self):
        self.tags['lost'] = frozenset({'dc1'})
        found = self.lonely_ring().get_nodes(b'lost')
        # A conductor's periodic task asks "host in ring.get_nodes()".
        self.assertNotIn('c3', found)
        self.assertEqual(0, len(found))
        # The API pops, and gets the reason.
        exc = self.assertRaises(Refused, found.pop)
        self.assertEqual('nobody wants lost', str(exc))
        self.assertEqual(['lost'], self.orphans)

    def test_replicas_follow_fallback_order(self):
        first = self.ring.get_nodes(b'node-a', replicas=1)
        two = self.ring.get_nodes(b'node-a', replicas=2)
        self.assertEqual(2, len(two))
        self.assertLessEqual(first, two)
        self.assertEqual({'c2'}, first)
        without = self.ring.get_nodes(b'node-a', ignore_nodes=['c2'])
        self.assertEqual(1, len(without))
        self.assertNotIn('c2', without)

    def test_unknown_node_honours_ignore_nodes_and_replicas(self):
        # Ironic's contract holds before the node's tags are read too.
        first = self.ring.get_nodes(b'new-node')
        three = self.ring.get_nodes(b'new-node', replicas=3)
        self.assertEqual({'c1', 'c2', 'c3'}, three)
        two = self.ring.get_nodes(b'new-node', replicas=2)
        self.assertEqual(2, len(two))
        self.assertLessEqual(first, two)
        without = self.ring.get_nodes(b'new-node', ignore_nodes=first)
        self.assertEqual(1, len(without))
        self.assertFalse(without & first)
        # The one left after ignoring the first two is the third in the
        # same order.
        rest = self.ring.get_nodes(b'new-node', ignore_nodes=two)
        self.assertEqual({'c1', 'c2', 'c3'} - two, rest)
        self.assertEqual([], self.orphans)

    def test_unknown_node_order_is_the_rendezvous_order(self):
        for uuid in ('n%d' % i for i in range(50)):
            order = rendezvous.ranking(uuid.encode(), ['c1', 'c2', 'c3'])
            self.assertEqual({order[0]}, self.ring.get_nodes(uuid))
            self.assertEqual(
                set(order[:2]), self.ring.get_nodes(uuid, replicas=2)
            )

    def test_unknown_node_with_every_conductor_ignored_is_refused(self):
        found = self.ring.get_nodes(
            b'new-node', ignore_nodes=['c1', 'c2', 'c3']
        )
        self.assertEqual(0, len(found))
        self.assertRaises(Refused, found.pop)

    def test_a_node_whose_tags_cannot_be_read_goes_nowhere(self):
        def unreadable(uuid):
            raise exception.NodeTagsUnreadable('cannot read %s' % uuid)

        self.ring._node_tags = unreadable
        found = self.ring.get_nodes(b'node-b')
        # No conductor's periodic task takes it; the API gets the reason.
        self.assertEqual(0, len(found))
        self.assertEqual(
            'cannot read node-b', str(self.assertRaises(Refused, found.pop))
        )
        self.assertEqual([], self.orphans)

    def test_a_node_being_created_goes_by_the_tags_it_is_created_with(self):
        # Created with dc1: c2 (soft dc1), never where hashing alone says.
        self.tags['created'] = fresh_nodes.BeingCreated({'dc1'})
        for _ in range(3):
            self.assertEqual({'c2'}, self.ring.get_nodes(b'created'))

    def test_a_node_created_for_no_conductor_is_still_created(self):
        # Its creation only inserts its row: hashed, as one without tags,
        # and an orphan once the row is there.
        self.tags['created'] = fresh_nodes.BeingCreated({'dc1'})
        self.assertEqual({'c3'}, self.lonely_ring().get_nodes(b'created'))
        self.assertEqual([], self.orphans)


class UnreachableRingTestCase(base.TestCase):
    def test_every_lookup_is_refused_with_the_reason(self):
        unreachable = rings.UnreachableRing(
            'they are not in the group', Refused
        )
        self.assertEqual(frozenset(), unreachable.nodes)
        found = unreachable.get_nodes(b'any', ignore_nodes=['x'], replicas=2)
        self.assertNotIn('x', found)
        exc = self.assertRaises(Refused, found.pop)
        self.assertEqual('they are not in the group', str(exc))


class PacedRingTestCase(base.TestCase):
    """A ring while c1's change rolls out: answers follow the clock."""

    def setUp(self):
        super().setUp()
        self.now = 1_800_000_000.0
        self.tags = {'node-%d' % i: frozenset({'rack2'}) for i in range(40)}
        before = Conductor('c1', hardware_types=['x'])
        after = Conductor(
            'c1', soft_affinity_tags='rack2', hardware_types=['x']
        )
        rolling = dataclasses.replace(
            after,
            changes=(profile.ProfileChange(before, self.now, 60.0),),
        )
        others = [Conductor('c2', hardware_types=['x'])]
        self.placer = placement.Placement([rolling] + others)
        self.old = engine.PlacementEngine([before] + others)
        self.ring = rings.AffinityRing(
            self.placer,
            'x',
            '',
            ['c1', 'c2'],
            self.tags.get,
            lambda node, evaluation: 'none',
            Refused,
            clock=lambda: self.now,
        )

    def answers(self):
        return {n: self.ring.get_nodes(n).pop() for n in self.tags}

    def request(self, name):
        return self.ring.request(name, self.tags[name])

    def test_answers_move_over_the_period(self):
        start = self.answers()
        self.assertEqual(
            {n: self.old.place(self.request(n)).conductor for n in self.tags},
            start,
        )
        self.assertIn('c2', start.values())
        self.now += 30
        halfway = self.answers()
        self.now += 30
        self.assertEqual({'c1'}, set(self.answers().values()))
        moved = [n for n in self.tags if halfway[n] != start[n]]
        waiting = [n for n in self.tags if halfway[n] != 'c1']
        self.assertTrue(moved and waiting, halfway)

    def test_replicas_start_with_the_paced_conductor(self):
        for name in self.tags:
            first = self.ring.get_nodes(name).pop()
            both = self.ring.get_nodes(name, replicas=2)
            self.assertEqual({'c1', 'c2'}, both)
            other = ({'c1', 'c2'} - {first}).pop()
            self.assertEqual(
                {other}, self.ring.get_nodes(name, ignore_nodes=[first])
            )
