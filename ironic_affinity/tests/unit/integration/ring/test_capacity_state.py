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

"""A process's placement under capacity, over a tag cache (no Ironic)."""

import dataclasses
import logging
from unittest import mock
import uuid as uuidlib

from ironic_affinity import capacity
from ironic_affinity import placement
from ironic_affinity import profile
from ironic_affinity.integration.node_tags import node_facts
from ironic_affinity.integration.ring import capacity_state
from ironic_affinity.integration.ring import rings
from ironic_affinity.tests import base

Conductor = profile.ConductorProfile.build


class FakeTags:
    """The tag cache as capacity_state reads it."""

    def __init__(self):
        self.held = {}
        self.version = 0
        self.reads = 0

    def put(self, uuid, *tags, driver='ipmi', group='', created_at=None):
        self.held[uuid] = node_facts.NodeFacts(
            driver, group, frozenset(tags), created_at
        )
        self.version += 1

    def nodes(self):
        self.reads += 1
        return list(self.held.items())

    def facts(self, uuid):
        return self.held.get(uuid)

    def get(self, uuid):
        found = self.held.get(uuid)
        return None if found is None else found.tags

    def lookup(self, uuid):
        return self.get(uuid)

    def created_at(self, uuid):
        found = self.held.get(uuid)
        return None if found is None else found.created_at


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now

    def advance(self, seconds):
        self.now += seconds


def uuids(count, seed):
    return [str(uuidlib.UUID(int=seed * 10**6 + i)) for i in range(count)]


class CapacityStatesTestCase(base.TestCase):
    def setUp(self):
        super().setUp()
        self.tags = FakeTags()
        self.rack = uuids(30, 1)
        for uuid in self.rack:
            self.tags.put(uuid, 'rack10')
        self.clock = Clock()
        self.log = mock.Mock()
        self.states = capacity_state.CapacityStates(
            self.tags, lambda: 2.0, self.log, clock=self.clock
        )
        self.placer = self.engine(max_nodes=10)

    def warnings(self):
        """The warnings logged, by any of the logger's methods."""
        return [
            c
            for c in self.log.mock_calls
            if c[0] == 'warning'
            or (c[0] == 'log' and c.args[0] == logging.WARNING)
        ]

    def engine(self, max_nodes, extra=()):
        return placement.Placement(
            [
                Conductor(
                    'c1',
                    soft_affinity_tags='rack10',
                    hardware_types=['ipmi'],
                    max_nodes=max_nodes,
                ),
                Conductor('c2', hardware_types=['ipmi'], max_nodes=max_nodes),
                Conductor('c3', hardware_types=['ipmi'], max_nodes=max_nodes),
            ]
            + list(extra)
        )

    def ring(self, placer):
        return rings.AffinityRing(
            placer,
            'ipmi',
            '',
            [c.name for c in placer.conductors],
            self.tags.get,
            lambda node, evaluation: 'orphan',
            RuntimeError,
            self.states.lookup(placer, True),
        )

    def loads(self, placer, nodes):
        found = self.ring(placer)
        counts = {}
        for uuid in nodes:
            (conductor,) = found.get_nodes(uuid.encode())
            counts[conductor] = counts.get(conductor, 0) + 1
        return counts

    def test_lookups_follow_the_assignment(self):
        self.assertEqual(
            {'c1': 10, 'c2': 10, 'c3': 10}, self.loads(self.placer, self.rack)
        )
        # Computed once for all 30 lookups.
        self.assertEqual(1, self.tags.reads)

    def test_without_capacity_nothing_is_computed(self):
        placer = self.engine(max_nodes=0)
        self.assertIsNone(self.states.current(placer, True))
        self.assertEqual({'c1': 30}, self.loads(placer, self.rack))
        self.assertEqual(0, self.tags.reads)

    def test_new_nodes_wait_for_the_interval_and_take_free_room(self):
        self.states.current(self.placer, True)
        # Two nodes come: placed at once where there is room, not
        # counted until the next computation.
        newcomers = uuids(2, 2)
        for uuid in newcomers:
            self.tags.put(uuid, 'rack10')
        self.clock.now += 1
        # Every conductor is full: the first choice takes them anyway.
        self.assertEqual({'c1': 2}, self.loads(self.placer, newcomers))
        self.assertEqual(1, self.tags.reads)
        self.clock.now += 1.5
        self.assertEqual(
            {'c1': 12, 'c2': 10, 'c3': 10},
            self.loads(self.placer, self.rack + newcomers),
        )
        self.assertEqual(2, self.tags.reads)
        # Over capacity (every conductor full: the first choice takes
        # them), and logged once.
        (warning,) = self.warnings()
        self.assertIn('c1 (12 nodes for max_nodes 10)', str(warning))
        self.clock.now += 5
        self.tags.version += 1
        self.states.current(self.placer, True)
        self.assertEqual(1, len(self.warnings()))

    def test_a_rollout_under_capacity_is_paced_by_the_wall_clock(self):
        # c4 takes up rack10 at 1.8e9 over 60 s: until then c1 holds 10
        # rack10 nodes and the rest spill; after, c4 holds 10 of them.
        before = Conductor('c4', hardware_types=['ipmi'], max_nodes=10)
        changing = dataclasses.replace(
            Conductor(
                'c4',
                soft_affinity_tags='rack10',
                hardware_types=['ipmi'],
                max_nodes=10,
            ),
            changes=(profile.ProfileChange(before, 1.8e9, 60.0),),
        )
        placer = self.engine(10, [changing])
        wall = Clock()
        wall.now = 1.8e9
        states = capacity_state.CapacityStates(
            self.tags, lambda: 2.0, self.log, clock=self.clock, wall_clock=wall
        )
        lookup = states.lookup(placer, True)
        requests = {
            uuid: profile.NodeRequest.build(uuid, ['rack10'], driver='ipmi')
            for uuid in self.rack
        }

        def where():
            return {
                uuid: placer.conductor(requests[uuid], wall(), *lookup(uuid))
                for uuid in self.rack
            }

        computed = states.current(placer, True)
        timeline = computed.settled.timeline
        at_change = where()
        self.assertEqual(dict(timeline.start.conductors), at_change)
        self.assertGreater(len(timeline.moves), 5)
        wall.now += 30
        halfway = where()
        wall.now += 30
        done = where()
        self.assertEqual(dict(computed.settled.assignment.conductors), done)
        moved_by_half = sum(1 for u in self.rack if halfway[u] != at_change[u])
        self.assertLess(0, moved_by_half)
        self.assertLess(moved_by_half, len(timeline.moves))
        # Computed once: the clock alone moves the nodes.
        self.assertEqual(1, self.tags.reads)
        self.assertEqual([], self.warnings())

    def test_a_tag_change_is_never_answered_from_old_facts(self):
        placer = placement.Placement(
            [
                Conductor('c1', hardware_types=['ipmi'], max_nodes=5),
                Conductor(
                    'c2',
                    hardware_types=['ipmi'],
                    hard_anti_affinity_tags='bad',
                    max_nodes=50,
                ),
            ]
        )
        self.states.current(placer, True)
        on_c2 = [
            u for u in self.rack if self.ring(placer).get_nodes(u) == {'c2'}
        ]
        self.assertEqual(25, len(on_c2))
        # Within the interval, a node now tagged "bad" leaves c2 at once.
        self.tags.put(on_c2[0], 'bad')
        self.assertEqual({'c1'}, self.ring(placer).get_nodes(on_c2[0]))
        self.assertEqual(1, self.tags.reads)

    def test_a_new_membership_is_computed_before_it_answers(self):
        self.states.current(self.placer, True)
        self.clock.now += 0.1  # well within the interval
        bigger = self.engine(
            max_nodes=10,
            extra=[Conductor('c4', hardware_types=['ipmi'], max_nodes=10)],
        )
        loads = self.loads(bigger, self.rack)
        self.assertEqual(30, sum(loads.values()))
        self.assertEqual(10, loads['c1'])
        self.assertEqual(2, self.tags.reads)

    def test_the_computation_yields(self):
        pauses = []
        states = capacity_state.CapacityStates(
            self.tags,
            lambda: 2.0,
            self.log,
            clock=self.clock,
            pause=lambda: pauses.append(1),
        )
        for uuid in uuids(capacity.PAUSE_EVERY * 2, 3):
            self.tags.put(uuid, 'rack10')
        states.current(self.engine(max_nodes=100), True)
        self.assertGreaterEqual(len(pauses), 2)

    def test_replicas_and_ignored_conductors(self):
        found = self.ring(self.placer)
        spilled = next(u for u in self.rack if found.get_nodes(u) != {'c1'})
        (assigned,) = found.get_nodes(spilled)
        # Its own conductor, then the next of its fallback order.
        self.assertEqual(
            {assigned, 'c1'}, found.get_nodes(spilled, replicas=2)
        )
        # Its own conductor ignored: the fallback order without it.
        (other,) = found.get_nodes(spilled, ignore_nodes=[assigned])
        self.assertEqual('c1', other)

    def test_a_long_computation_spaces_the_next(self):
        clock = self.clock

        def slow_pause():
            clock.now += 1.0  # each pause "takes" a second

        states = capacity_state.CapacityStates(
            self.tags, lambda: 2.0, self.log, clock=clock, pause=slow_pause
        )
        for uuid in uuids(capacity.PAUSE_EVERY * 2, 4):
            self.tags.put(uuid, 'rack10')
        placer = self.engine(max_nodes=10)
        first = states.current(placer, True)
        self.assertGreaterEqual(first.seconds, 2.0)
        self.tags.put(uuids(1, 5)[0], 'rack10')
        # Past the 2 s interval, but within 5 times the computation.
        clock.now += 3.0
        self.assertIs(first, states.current(placer, True))
        clock.now += capacity_state.COST_SHARE * first.seconds
        self.assertIsNot(first, states.current(placer, True))
