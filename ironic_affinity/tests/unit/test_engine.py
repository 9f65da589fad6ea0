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

"""The RFE's worked examples, and the engine's own contract.

The expected placements below are the RFE's, checked by hand against its
rule; they are not copied from the engine's output.
"""

from ironic_affinity import engine
from ironic_affinity import exception
from ironic_affinity import profile
from ironic_affinity import rendezvous
from ironic_affinity.tests import base

Conductor = profile.ConductorProfile.build
Node = profile.NodeRequest.build


def _part1_conductors():
    # RFE part 1 in the final form's terms: conductor tags are soft
    # affinity tags, "anti-tags" are hard anti-affinity tags.
    return [
        Conductor(
            'conductor1',
            soft_affinity_tags='rack10, rack11, network1, network2, '
            'datacenter1',
        ),
        Conductor(
            'conductor2',
            soft_affinity_tags='rack11, rack12, network1, datacenter1',
            hard_anti_affinity_tags='customer1',
        ),
        Conductor('conductor3', soft_affinity_tags='network1, datacenter2'),
    ]


def _edit2_conductors():
    return [
        Conductor(
            'conductor1',
            hard_affinity_tags='datacenter1',
            soft_anti_affinity_tags='rack20',
            soft_affinity_tags='rack10 network1 network2',
        ),
        Conductor(
            'conductor2',
            hard_anti_affinity_tags='network3',
            hard_affinity_tags='datacenter1',
            soft_anti_affinity_tags='rack10',
            soft_affinity_tags='rack20 network1 network2',
        ),
        Conductor(
            'conductor3',
            hard_anti_affinity_tags='network2 network3',
            hard_affinity_tags='datacenter2',
            soft_affinity_tags='rack30 network1 network2',
        ),
    ]


def _without(conductors, *names):
    return engine.PlacementEngine(c for c in conductors if c.name not in names)


def _scores(evaluation):
    return {
        v.conductor: v.score for v in evaluation.verdicts if v.excluded is None
    }


class RFEPart1TestCase(base.TestCase):
    node1 = Node('node1', 'rack10, network1, datacenter1')
    node2 = Node('node2', 'rack11')
    node3 = Node('node3', 'rack11, customer1')

    def test_node1_best_match(self):
        placer = _without(_part1_conductors())
        self.assertEqual(
            {'conductor1': 3, 'conductor2': 2, 'conductor3': 1},
            _scores(placer.evaluate(self.node1)),
        )
        self.assertEqual('conductor1', placer.place(self.node1).conductor)

    def test_node1_when_conductor1_dies(self):
        placer = _without(_part1_conductors(), 'conductor1')
        self.assertEqual('conductor2', placer.place(self.node1).conductor)

    def test_node2_hashed_between_tied_conductors(self):
        placer = _without(_part1_conductors())
        self.assertEqual(
            {'conductor1': 1, 'conductor2': 1, 'conductor3': 0},
            _scores(placer.evaluate(self.node2)),
        )
        placement = placer.place(self.node2)
        self.assertEqual(('conductor1', 'conductor2'), placement.tied)
        self.assertIn(placement.conductor, placement.tied)

    def test_node2_goes_to_zero_scorer_when_both_die(self):
        placer = _without(_part1_conductors(), 'conductor1', 'conductor2')
        placement = placer.place(self.node2)
        self.assertEqual('conductor3', placement.conductor)
        self.assertEqual(0, placement.score)

    def test_node3_anti_tag_removes_conductor2(self):
        placer = _without(_part1_conductors())
        excluded = {
            v.conductor: v.excluded
            for v in placer.evaluate(self.node3).verdicts
            if v.excluded
        }
        self.assertEqual(['conductor2'], list(excluded))
        self.assertIn('customer1', excluded['conductor2'])
        placement = placer.place(self.node3)
        self.assertEqual(('conductor1',), placement.tied)
        self.assertEqual('conductor1', placement.conductor)

    def test_node3_when_conductor1_dies(self):
        placer = _without(_part1_conductors(), 'conductor1')
        self.assertEqual('conductor3', placer.place(self.node3).conductor)

    def test_tied_nodes_spread_over_both(self):
        # "node2 is hashring distributed among conductor1 and conductor2":
        # many nodes with node2's tags must land on both.
        placer = _without(_part1_conductors())
        nodes = [Node('n%d' % i, 'rack11') for i in range(200)]
        used = {p.conductor for p in placer.place_all(nodes)}
        self.assertEqual({'conductor1', 'conductor2'}, used)


class RFEEdit2TestCase(base.TestCase):
    node1 = Node('node1', 'rack10, network1, datacenter1')
    node2 = Node('node2', 'rack20, network3, datacenter1')
    node3 = Node('node3', 'rack30, network1, datacenter2')

    def setUp(self):
        super().setUp()
        self.placer = _without(_edit2_conductors())

    def test_node1(self):
        evaluation = self.placer.evaluate(self.node1)
        # The RFE's narrative gives conductor1 a score of 1, counting
        # network1 only; its own rule also counts rack10, which is in
        # conductor1's soft_affinity_tags. The rule wins: 2. The outcome
        # (conductor1 wins, conductor2 scores 0) is the RFE's.
        self.assertEqual(
            {'conductor1': 2, 'conductor2': 0}, _scores(evaluation)
        )
        by_name = {v.conductor: v for v in evaluation.verdicts}
        self.assertIn('datacenter2', by_name['conductor3'].excluded)
        self.assertEqual(
            (('network1', 1), ('rack10', -1)), by_name['conductor2'].breakdown
        )
        self.assertEqual('conductor1', self.placer.place(self.node1).conductor)

    def test_node2_negative_score_still_wins(self):
        evaluation = self.placer.evaluate(self.node2)
        self.assertEqual({'conductor1': -1}, _scores(evaluation))
        by_name = {v.conductor: v for v in evaluation.verdicts}
        self.assertIn('network3', by_name['conductor2'].excluded)
        self.assertIn('datacenter2', by_name['conductor3'].excluded)
        placement = self.placer.place(self.node2)
        self.assertEqual('conductor1', placement.conductor)
        self.assertEqual(-1, placement.score)

    def test_node3(self):
        evaluation = self.placer.evaluate(self.node3)
        by_name = {v.conductor: v for v in evaluation.verdicts}
        for name in ('conductor1', 'conductor2'):
            self.assertIn('datacenter1', by_name[name].excluded)
        self.assertEqual('conductor3', self.placer.place(self.node3).conductor)


class EngineTestCase(base.TestCase):
    def test_every_exclusion_reason_is_given(self):
        placer = engine.PlacementEngine(
            [
                Conductor(
                    'c1',
                    hard_affinity_tags='dc1',
                    hard_anti_affinity_tags='net3',
                    hardware_types=['ipmi'],
                    conductor_group='Rack-A',
                )
            ]
        )
        node = Node('n', 'net3', driver='redfish', conductor_group='rack-b')
        (verdict,) = placer.evaluate(node).verdicts
        for part in ("'rack-a'", "'rack-b'", 'redfish', 'net3', 'dc1'):
            self.assertIn(part, verdict.excluded)
        placement = placer.place(node)
        self.assertIsNone(placement.conductor)
        self.assertEqual((), placement.tied)
        self.assertEqual((), placer.fallback_order(node))

    def test_conductor_group_compares_case_insensitively(self):
        placer = engine.PlacementEngine(
            [Conductor('c1', conductor_group='Rack-A'), Conductor('c2')]
        )
        node = Node('n', conductor_group='RACK-a')
        self.assertEqual('c1', placer.place(node).conductor)
        self.assertEqual('c2', placer.place(Node('m')).conductor)

    def test_hardware_type(self):
        placer = engine.PlacementEngine(
            [
                Conductor('c1', hardware_types=['ipmi']),
                Conductor('c2', hardware_types=['redfish', 'ipmi']),
            ]
        )
        self.assertEqual(
            'c2', placer.place(Node('n', driver='redfish')).conductor
        )

    def test_soft_anti_wins_over_soft_affinity(self):
        conductor = Conductor(
            'c1', soft_affinity_tags='rack1:3', soft_anti_affinity_tags='rack1'
        )
        self.assertEqual(frozenset({'rack1'}), conductor.soft_conflicts())
        placer = engine.PlacementEngine([conductor])
        self.assertEqual(-1, placer.place(Node('n', 'rack1')).score)

    def test_weights(self):
        placer = engine.PlacementEngine(
            [
                Conductor('near', soft_affinity_tags='rack1:10 net1'),
                Conductor('far', soft_affinity_tags='net1 net2 net3'),
            ]
        )
        node = Node('n', 'rack1 net1 net2 net3')
        self.assertEqual(
            {'near': 11, 'far': 3}, _scores(placer.evaluate(node))
        )
        self.assertEqual(('near', 'far'), placer.fallback_order(node))

    def test_conflicting_hard_lists_refused(self):
        exc = self.assertRaises(
            exception.ConflictingTags,
            Conductor,
            'c1',
            hard_affinity_tags='dc1 rack1',
            hard_anti_affinity_tags='RACK1',
        )
        for part in ('c1', 'rack1', 'hard_affinity_tags', 'hard_anti'):
            self.assertIn(part, str(exc))

    def test_duplicate_conductor_refused(self):
        self.assertRaises(
            ValueError,
            engine.PlacementEngine,
            [Conductor('c1'), Conductor('c1', soft_affinity_tags='x')],
        )

    def test_hash_key_is_uuid_when_given(self):
        # Renaming a node must not move it: the uuid is what is hashed.
        conductors = [Conductor('c%d' % i) for i in range(10)]
        placer = engine.PlacementEngine(conductors)
        uuids = ['00000000-0000-0000-0000-%012d' % i for i in range(50)]
        first = [
            placer.place(Node('a%d' % i, uuid=u)) for i, u in enumerate(uuids)
        ]
        second = placer.place_all(
            [Node('b%d' % i, uuid=u) for i, u in enumerate(uuids)]
        )
        self.assertEqual(
            [p.conductor for p in first], [p.conductor for p in second]
        )
        self.assertEqual('b3', second[3].node)

    def test_memo_answers_with_the_asked_name(self):
        placer = engine.PlacementEngine([Conductor('c1')])
        placer.place(Node('old', uuid='u1'))
        self.assertEqual('new', placer.place(Node('new', uuid='u1')).node)

    def test_memo_follows_tag_changes(self):
        placer = engine.PlacementEngine(
            [
                Conductor('a', soft_affinity_tags='x'),
                Conductor('b', soft_affinity_tags='y'),
            ]
        )
        self.assertEqual('a', placer.place(Node('n', 'x')).conductor)
        self.assertEqual('b', placer.place(Node('n', 'y')).conductor)

    def test_fallback_order_is_rank_by_score_then_weight(self):
        conductors = [Conductor('c%d' % i) for i in range(5)] + [
            Conductor('best', soft_affinity_tags='t')
        ]
        placer = engine.PlacementEngine(conductors)
        node = Node('n', 't')
        order = placer.fallback_order(node)
        self.assertEqual('best', order[0])
        self.assertEqual(sorted(order[1:]), ['c%d' % i for i in range(5)])
        # Each next conductor is where the rule puts the node once all the
        # ones before it are dead.
        for k in range(1, len(order)):
            survivors = engine.PlacementEngine(
                c for c in conductors if c.name not in order[:k]
            )
            self.assertEqual(order[k], survivors.place(node).conductor)

    def test_no_conductors(self):
        placer = engine.PlacementEngine([])
        self.assertIsNone(placer.place(Node('n', 'x')).conductor)
        self.assertEqual([], placer.place_all([]))


class DrainTestCase(base.TestCase):
    """A draining conductor comes after every other eligible one."""

    def setUp(self):
        super().setUp()
        self.conductors = [
            # The best score for rack10 nodes, but draining.
            Conductor(
                'c1',
                soft_affinity_tags='rack10:5',
                hard_affinity_tags='dc1',
                draining=True,
            ),
            Conductor('c2', hard_affinity_tags='dc1'),
            Conductor('c3', hard_affinity_tags='dc1', draining=True),
            # The only one for dc2 nodes.
            Conductor('c4', hard_affinity_tags='dc2', draining=True),
        ]
        self.engine = engine.PlacementEngine(self.conductors)

    def test_a_node_goes_to_a_conductor_that_does_not_drain(self):
        node = Node('n1', 'dc1 rack10')
        placed = self.engine.place(node)
        self.assertEqual(
            ('c2', 0, ('c2',)), (placed.conductor, placed.score, placed.tied)
        )
        self.assertEqual(('c2', 'c1', 'c3'), self.engine.fallback_order(node))
        verdicts = {
            v.conductor: v for v in self.engine.evaluate(node).verdicts
        }
        self.assertTrue(verdicts['c1'].draining)
        self.assertEqual(5, verdicts['c1'].score)

    def test_a_draining_conductor_keeps_what_no_other_may_take(self):
        self.assertEqual('c4', self.engine.place(Node('n2', 'dc2')).conductor)

    def test_among_draining_conductors_score_then_hashing(self):
        engine_ = engine.PlacementEngine(
            [c for c in self.conductors if c.name != 'c2']
        )
        node = Node('n1', 'dc1 rack10')
        self.assertEqual('c1', engine_.place(node).conductor)
        tied = [engine_.place(Node('n%d' % i, 'dc1')) for i in range(40)]
        self.assertEqual({('c1', 'c3')}, {p.tied for p in tied})
        self.assertEqual({'c1', 'c3'}, {p.conductor for p in tied})

    def test_many_nodes_at_once_agree_with_one_by_one(self):
        nodes = [
            Node('n%d' % i, ['dc1 rack10', 'dc1', 'dc2'][i % 3])
            for i in range(90)
        ]
        keys = rendezvous.hash_keys(n.hash_key for n in nodes)
        self.assertEqual(
            [self.engine.place(n).conductor for n in nodes],
            self.engine.choose_all(nodes),
        )
        self.assertEqual(
            [self.engine.fallback_order(n)[:2] for n in nodes],
            self.engine.fallback_orders(nodes, keys, 2),
        )
