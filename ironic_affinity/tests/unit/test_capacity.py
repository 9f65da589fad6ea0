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

"""Placement under conductor capacity: examples, then properties.

The properties are checked against what the test generated (the RFE's
rule written in test_properties), against deferred acceptance written
plainly here, and against the definition of a stable matching, not
against anything the capacity module computed.
"""

import dataclasses
import json

import fixtures
from hypothesis import given
from hypothesis import strategies as st

from ironic_affinity import capacity
from ironic_affinity import engine
from ironic_affinity import exception
from ironic_affinity import profile
from ironic_affinity import rendezvous
from ironic_affinity import report
from ironic_affinity import report_group
from ironic_affinity import scenario
from ironic_affinity.cmd import render
from ironic_affinity.cmd import render_group
from ironic_affinity.tests import base
from ironic_affinity.tests.unit import test_properties as props


def conductor(name, max_nodes=0, **lists):
    return profile.ConductorProfile.build(name, max_nodes=max_nodes, **lists)


def rack_nodes(count, rack, prefix='node'):
    return [
        profile.NodeRequest.build('%s-%s-%d' % (prefix, rack, i), rack)
        for i in range(count)
    ]


class ProfileTestCase(base.TestCase):
    def test_max_nodes_must_be_a_whole_number(self):
        # Above the limit too: a published entry beyond it is refused
        # by every reader, so neither configuration nor scenario takes it.
        for bad in (-1, 1.5, '10', True, None, profile.MAX_NODES_LIMIT + 1):
            error = self.assertRaises(
                exception.InvalidCapacity, conductor, 'c1', bad
            )
            self.assertIn('conductor c1: max_nodes', str(error))
            self.assertIn(repr(bad), str(error))
        self.assertEqual(
            profile.MAX_NODES_LIMIT,
            conductor('c1', profile.MAX_NODES_LIMIT).max_nodes,
        )

    def test_capacity_is_not_part_of_the_signature(self):
        # Verdicts do not depend on capacity, so conductors that differ
        # only by it still share them.
        self.assertEqual(
            conductor('c1', 5, soft_affinity_tags='a').signature(),
            conductor('c2', 0, soft_affinity_tags='a').signature(),
        )


class AssignTestCase(base.TestCase):
    def test_the_issue_example_spills_the_rack_over_its_peers(self):
        """conductor1 prefers rack10; 2,000 nodes are in rack10. With
        max_nodes 600 it takes 600 and its three peers share the rest."""
        conductors = [
            conductor('conductor1', 600, soft_affinity_tags='rack10'),
        ] + [conductor('conductor%d' % i, 600) for i in (2, 3, 4)]
        nodes = rack_nodes(2000, 'rack10')
        unlimited = engine.PlacementEngine(
            dataclasses.replace(c, max_nodes=0) for c in conductors
        )
        self.assertEqual({'conductor1'}, set(unlimited.choose_all(nodes)))
        result = capacity.assign(engine.PlacementEngine(conductors), nodes)
        self.assertEqual(600, result.loads['conductor1'])
        self.assertEqual(1400, len(result.spilled))
        self.assertEqual({'conductor1'}, set(result.spilled.values()))
        for name in ('conductor2', 'conductor3', 'conductor4'):
            # A fair share of the rest, by rendezvous hashing.
            self.assertGreater(result.loads[name], 400)
            self.assertLessEqual(result.loads[name], 600)
        self.assertEqual({}, result.over_capacity())
        self.assertEqual(frozenset(), result.overflow)

    def test_a_full_deployment_overloads_first_choices_and_says_so(self):
        conductors = [conductor('c1', 2), conductor('c2', 3)]
        nodes = rack_nodes(8, 'r')
        placer = engine.PlacementEngine(conductors)
        result = capacity.assign(placer, nodes)
        # Nobody is orphaned by capacity.
        self.assertEqual(8, sum(result.loads.values()))
        self.assertTrue(all(result.conductors.values()))
        self.assertEqual(3, len(result.overflow))
        over = result.over_capacity()
        self.assertEqual(3, sum(over.values()))
        for name in result.overflow:
            # Each overflowing node is on its first choice.
            node = next(n for n in nodes if n.name == name)
            self.assertEqual(
                placer.place(node).conductor, result.conductors[name]
            )

    def test_hard_constraints_come_before_capacity(self):
        """A node only one conductor may take goes there beyond its
        capacity rather than to a conductor its hard tags exclude."""
        conductors = [
            conductor('c1', 1, hard_affinity_tags='gpu'),
            conductor('c2', 10, hard_anti_affinity_tags='gpu'),
        ]
        nodes = rack_nodes(3, 'gpu')
        result = capacity.assign(engine.PlacementEngine(conductors), nodes)
        self.assertEqual({'c1'}, set(result.conductors.values()))
        self.assertEqual({'c1': 2}, result.over_capacity())

    def test_nodes_with_fewer_ways_out_choose_first(self):
        """c1 is the only conductor of the 'gpu' nodes and the soft
        choice of the 'rack' nodes: the gpu nodes get its room, though
        the rack nodes outnumber them."""
        conductors = [
            conductor('c1', 5, soft_affinity_tags='rack'),
            conductor('c2', 0, hard_anti_affinity_tags='gpu'),
        ]
        nodes = rack_nodes(5, 'gpu') + rack_nodes(20, 'rack')
        result = capacity.assign(engine.PlacementEngine(conductors), nodes)
        self.assertEqual({}, result.over_capacity())
        for node in nodes[:5]:
            self.assertEqual('c1', result.conductors[node.name])
        self.assertEqual(20, len(result.spilled))

    def test_unlimited_conductors_take_what_the_others_cannot(self):
        conductors = [
            conductor('c1', 3, soft_affinity_tags='r'),
            conductor('c2'),
        ]
        result = capacity.assign(
            engine.PlacementEngine(conductors), rack_nodes(50, 'r')
        )
        self.assertEqual({'c1': 3, 'c2': 47}, result.loads)

    def test_without_capacity_nothing_changes(self):
        conductors = [conductor('c%d' % i) for i in range(5)]
        nodes = rack_nodes(300, 'r')
        placer = engine.PlacementEngine(conductors)
        result = capacity.assign(placer, nodes)
        self.assertFalse(result.limited)
        self.assertEqual(
            {p.node: p.conductor for p in placer.place_all(nodes)},
            dict(result.conductors),
        )
        self.assertEqual({}, result.spilled)

    def test_nodes_that_share_a_hash_key_are_told_apart(self):
        # One node's uuid is another's name: the same hash key, so the
        # same weight everywhere; the name decides.
        nodes = [
            profile.NodeRequest.build('abc', 'r'),
            profile.NodeRequest.build('def', 'r', uuid='abc'),
        ]
        result = capacity.assign(
            engine.PlacementEngine([conductor('c1', 2), conductor('c2', 2)]),
            nodes + [profile.NodeRequest.build('ghi', 'r', uuid='abc')],
        )
        # Three nodes of one key: one first choice, which holds two.
        self.assertEqual([2, 1], sorted(result.loads.values(), reverse=True))

    def test_a_node_listed_twice_is_refused(self):
        nodes = rack_nodes(2, 'r') + rack_nodes(1, 'r')
        error = self.assertRaises(
            ValueError,
            capacity.assign,
            engine.PlacementEngine([conductor('c1', 1)]),
            nodes,
        )
        self.assertIn('node-r-0', str(error))


def entitlement(placer, node, name):
    """How entitled a node is to a conductor, as the capacity module's
    docstring defines it: a node with no other way out, then its score
    there, then its rendezvous weight there, then its key and name."""
    order = placer.fallback_order(node)
    score = next(
        v.score for v in placer.evaluate(node).verdicts if v.conductor == name
    )
    weight = rendezvous.weight(
        rendezvous.hash64(node.hash_key), rendezvous.hash64(name.encode())
    )
    return (len(order) == 1, score, weight, node.hash_key, node.name)


def reference(placer, nodes):
    """Deferred acceptance the plain way: nodes ask in the order given,
    first in first out, each down its whole fallback order; a full
    conductor drops its least entitled node; a node every conductor
    refused goes to its first choice."""
    limits = {c.name: c.max_nodes for c in placer.conductors}
    held = {name: [] for name in limits}
    orders = {n.name: list(placer.fallback_order(n)) for n in nodes}
    asked = {n.name: 0 for n in nodes}
    queue = [n for n in nodes if orders[n.name]]
    result = {n.name: None for n in nodes}
    while queue:
        node = queue.pop(0)
        order = orders[node.name]
        if asked[node.name] == len(order):
            result[node.name] = order[0]
            continue
        name = order[asked[node.name]]
        asked[node.name] += 1
        held[name].append(node)
        if limits[name] and len(held[name]) > limits[name]:
            least = min(held[name], key=lambda n: entitlement(placer, n, name))
            held[name].remove(least)
            queue.append(least)
    for name, kept in held.items():
        for node in kept:
            result[node.name] = name
    return result


CAPACITIES = st.sampled_from((0, 0, 1, 2, 3, 5))


@st.composite
def limited_scenarios(draw):
    specs = draw(props.conductor_lists(min_size=1))
    conductors = [
        dataclasses.replace(spec.build(), max_nodes=draw(CAPACITIES))
        for spec in specs
    ]
    node_specs = draw(props.node_lists(max_size=30))
    return specs, conductors, node_specs, [n.build() for n in node_specs]


class CapacityPropertiesTestCase(base.TestCase):
    """What bounded loads guarantee for any conductors and nodes."""

    @props.ENGINE_SETTINGS
    @given(limited_scenarios())
    def test_it_is_plain_deferred_acceptance(self, scenario):
        _specs, conductors, _node_specs, nodes = scenario
        placer = engine.PlacementEngine(conductors)
        self.assertEqual(
            reference(placer, nodes),
            dict(capacity.assign(placer, nodes).conductors),
        )

    @props.ENGINE_SETTINGS
    @given(limited_scenarios())
    def test_hard_constraints_hold_and_nobody_is_orphaned(self, scenario):
        specs, conductors, node_specs, nodes = scenario
        result = capacity.assign(engine.PlacementEngine(conductors), nodes)
        for spec in node_specs:
            allowed = props.oracle_scores(specs, spec)
            placed = result.conductors[spec.name]
            if allowed:
                self.assertIn(placed, allowed)
            else:
                self.assertIsNone(placed)

    @props.ENGINE_SETTINGS
    @given(limited_scenarios())
    def test_over_capacity_only_when_every_way_out_is_full(self, scenario):
        specs, conductors, node_specs, nodes = scenario
        result = capacity.assign(engine.PlacementEngine(conductors), nodes)
        limits = {c.name: c.max_nodes for c in conductors}
        loads = {name: 0 for name in limits}
        for placed in result.conductors.values():
            if placed is not None:
                loads[placed] += 1
        self.assertEqual(loads, dict(result.loads))

        def full(name):
            return limits[name] and loads[name] >= limits[name]

        for name, limit in limits.items():
            on_it = [n for n, c in result.conductors.items() if c == name]
            beyond = [n for n in on_it if n in result.overflow]
            if limit:
                self.assertEqual(max(0, len(on_it) - limit), len(beyond))
            else:
                self.assertEqual([], beyond)
        for spec in node_specs:
            if spec.name in result.overflow:
                for other in props.oracle_scores(specs, spec):
                    self.assertTrue(full(other), other)

    @props.ENGINE_SETTINGS
    @given(limited_scenarios())
    def test_a_node_leaves_its_preference_only_for_want_of_room(
        self, scenario
    ):
        _specs, conductors, _node_specs, nodes = scenario
        placer = engine.PlacementEngine(conductors)
        result = capacity.assign(placer, nodes)
        limits = {c.name: c.max_nodes for c in conductors}
        for node in nodes:
            placed = result.conductors[node.name]
            order = list(placer.fallback_order(node))
            first = order[0] if order else None
            if placed == first:
                self.assertNotIn(node.name, result.spilled)
                continue
            self.assertEqual(first, result.spilled[node.name])
            # Everything it preferred to where it went is full.
            for better in order[: order.index(placed)]:
                self.assertGreaterEqual(result.loads[better], limits[better])
                self.assertTrue(limits[better])

    @props.ENGINE_SETTINGS
    @given(limited_scenarios())
    def test_no_node_and_conductor_would_rather_have_each_other(
        self, scenario
    ):
        """Stability: a node that prefers another conductor to its own
        (or, turned away everywhere, any conductor) finds it full of
        nodes more entitled to it."""
        _specs, conductors, _node_specs, nodes = scenario
        placer = engine.PlacementEngine(conductors)
        result = capacity.assign(placer, nodes)
        limits = {c.name: c.max_nodes for c in conductors}
        holding = {name: [] for name in limits}
        for node in nodes:
            if (
                node.name not in result.overflow
                and result.conductors[node.name]
            ):
                holding[result.conductors[node.name]].append(node)
        for node in nodes:
            order = list(placer.fallback_order(node))
            if node.name in result.overflow:
                better = order
            elif order:
                better = order[: order.index(result.conductors[node.name])]
            else:
                better = []
            for name in better:
                self.assertTrue(limits[name], name)
                self.assertEqual(limits[name], len(holding[name]))
                mine = entitlement(placer, node, name)
                for other in holding[name]:
                    self.assertGreater(entitlement(placer, other, name), mine)

    @props.COSTLY_SETTINGS
    @given(limited_scenarios(), st.randoms(use_true_random=False))
    def test_order_does_not_matter(self, scenario, rnd):
        _specs, conductors, _node_specs, nodes = scenario
        expected = capacity.assign(engine.PlacementEngine(conductors), nodes)
        conductors, nodes = list(conductors), list(nodes)
        rnd.shuffle(conductors)
        rnd.shuffle(nodes)
        found = capacity.assign(engine.PlacementEngine(conductors), nodes)
        self.assertEqual(expected, found)

    @props.COSTLY_SETTINGS
    @given(limited_scenarios(), st.integers(1, 9))
    def test_fallback_orders_begin_every_fallback_order(self, scenario, limit):
        _specs, conductors, _node_specs, nodes = scenario
        placer = engine.PlacementEngine(conductors)
        keys = rendezvous.hash_keys(n.hash_key for n in nodes)
        self.assertEqual(
            [placer.fallback_order(n)[:limit] for n in nodes],
            placer.fallback_orders(nodes, keys, limit),
        )

    @props.COSTLY_SETTINGS
    @given(limited_scenarios())
    def test_without_capacity_it_is_the_engine(self, scenario):
        _specs, conductors, _node_specs, nodes = scenario
        unlimited = engine.PlacementEngine(
            dataclasses.replace(c, max_nodes=0) for c in conductors
        )
        expected = {p.node: p.conductor for p in unlimited.place_all(nodes)}
        found = capacity.assign(unlimited, nodes)
        self.assertEqual(expected, dict(found.conductors))
        # Room for every node anywhere is no limit either.
        roomy = engine.PlacementEngine(
            dataclasses.replace(c, max_nodes=len(nodes) or 1)
            for c in conductors
        )
        self.assertEqual(
            expected, dict(capacity.assign(roomy, nodes).conductors)
        )


DETERMINISM_SCRIPT = '''
import json, random
from ironic_affinity import capacity, engine, profile
rnd = random.Random(7)
racks = ['rack%d' % i for i in range(6)]
conductors = [
    profile.ConductorProfile.build(
        'c%d' % i, soft_affinity_tags=[racks[i % 6]], max_nodes=40
    )
    for i in range(8)
]
nodes = [
    profile.NodeRequest.build(
        'n%d' % i, rnd.choice(racks[:3]), uuid='%032x' % rnd.getrandbits(128)
    )
    for i in range(300)
]
result = capacity.assign(engine.PlacementEngine(conductors), nodes)
print(json.dumps([result.conductors, result.spilled, sorted(result.overflow)]))
'''


class DeterminismTestCase(base.TestCase):
    def _run(self, seed):
        return json.loads(
            props.run_with_hash_seed(self, DETERMINISM_SCRIPT, seed)
        )

    def test_same_assignment_in_every_process(self):
        first = self._run('0')
        self.assertEqual(first, self._run('4242'))
        # Capacity decided something: 300 nodes preferring 3 conductors
        # of 40 places each.
        self.assertGreater(len(first[1]), 100)


class ReportTestCase(base.TestCase):
    """What plan, explain, check and members say under capacity."""

    def setUp(self):
        super().setUp()
        self.conductors = [
            conductor('c1', 2, soft_affinity_tags='r'),
            conductor('c2', 2),
        ]
        self.nodes = rack_nodes(5, 'r')

    def test_plan(self):
        result = report.plan(self.conductors, self.nodes)
        self.assertEqual({'c1': 2, 'c2': 2}, result['capacities'])
        self.assertEqual({'c1': 3, 'c2': 2}, result['loads'])
        self.assertEqual({'c1': 1}, result['over_capacity'])
        self.assertEqual(2, result['spilled'])
        rows = {p['node']: p for p in result['placements']}
        spilled = [r for r in rows.values() if 'spilled_from' in r]
        self.assertEqual(2, len(spilled))
        for row in spilled:
            self.assertEqual(
                ('c2', 'c1', 0),
                (row['conductor'], row['spilled_from'], row['score']),
            )
        over = [r for r in rows.values() if r.get('over_capacity')]
        self.assertEqual(1, len(over))
        self.assertEqual('c1', over[0]['conductor'])
        text = render.render_plan(result)
        self.assertIn('spilled: c1 full', text)
        self.assertIn('over capacity: every way out full', text)
        self.assertIn('conductors over capacity: c1 (+1)', text)

    def test_plan_without_capacity_is_unchanged(self):
        unlimited = [
            dataclasses.replace(c, max_nodes=0) for c in self.conductors
        ]
        result = report.plan(unlimited, self.nodes)
        self.assertEqual({'placements', 'loads', 'unplaced'}, set(result))
        self.assertNotIn('NOTE', render.render_plan(result))

    def test_moves_under_capacity(self):
        result = report.plan(self.conductors, self.nodes, down={'c2'})
        # c1 alone takes every node, beyond its capacity.
        self.assertEqual({'c1': 5}, result['loads'])
        self.assertEqual(
            {('c2', 'c1')}, {(m['from'], m['to']) for m in result['moves']}
        )
        self.assertEqual(2, len(result['moves']))

    def test_explain_a_spilled_node(self):
        plan = report.plan(self.conductors, self.nodes)
        name = next(
            p['node'] for p in plan['placements'] if 'spilled_from' in p
        )
        node = next(n for n in self.nodes if n.name == name)
        result = report.explain(self.conductors, node, nodes=self.nodes)
        self.assertEqual(
            ('c2', 'c1'), (result['conductor'], result['spilled_from'])
        )
        rows = {r['conductor']: r for r in result['conductors']}
        self.assertEqual('full', rows['c1']['verdict'])
        self.assertEqual((3, 2), (rows['c1']['load'], rows['c1']['max_nodes']))
        self.assertEqual('chosen', rows['c2']['verdict'])
        self.assertIn(
            'Placed on: c2 (spilled: its first choice c1 is full)',
            render.render_explain(result),
        )

    def test_check_and_members(self):
        result = report.check(self.conductors, self.nodes)
        self.assertEqual(
            {'c1': {'nodes': 3, 'max_nodes': 2}}, result['over_capacity']
        )
        self.assertIn(
            'c1: 3 node(s) for max_nodes 2', render.render_check(result)
        )
        members = report_group.members(
            {c.name: c for c in self.conductors}, 'url', 'g', rejected={}
        )
        self.assertIn('MAX NODES', render_group.render_members(members))
        self.assertEqual([2, 2], [m['max_nodes'] for m in members['members']])
        unlimited = {'c1': conductor('c1')}
        members = report_group.members(unlimited, 'url', 'g', rejected={})
        self.assertNotIn('MAX NODES', render_group.render_members(members))


class ScenarioTestCase(base.TestCase):
    def test_max_nodes_is_read_and_checked(self):
        path = self.useFixture(fixtures.TempDir()).join('s.yaml')
        with open(path, 'w') as handle:
            handle.write(
                'conductors:\n  - {name: c1, max_nodes: 7}\n'
                '  - {name: c2}\nnodes: []\n'
            )
        loaded = scenario.load(path)
        self.assertEqual([7, 0], [c.max_nodes for c in loaded.conductors])
        with open(path, 'w') as handle:
            handle.write('conductors:\n  - {name: c1, max_nodes: -1}\n')
        error = self.assertRaises(
            exception.InvalidScenario, scenario.load, path
        )
        self.assertIn("conductors[0] ('c1')", str(error))
        self.assertIn('max_nodes', str(error))
