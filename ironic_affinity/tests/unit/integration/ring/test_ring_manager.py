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

"""The ring manager through Ironic's public calls, with Ironic faked.

The unit tests run without Ironic installed: its two modules the manager
imports (exceptions, configuration) are stood in for, with exceptions
taking the keywords Ironic's take. The end-to-end suite runs the same
calls on real Ironic.
"""

import dataclasses
import importlib
import logging
import sys
import types
from unittest import mock

from oslo_config import cfg

from ironic_affinity import adoption
from ironic_affinity import profile
from ironic_affinity import rendezvous
from ironic_affinity.integration import process_services
from ironic_affinity.integration.ring import capacity_state
from ironic_affinity.integration.ring import orphans
from ironic_affinity.integration.ring import placement_state
from ironic_affinity.tests import base
from ironic_affinity.tests.unit.integration import fakes
from ironic_affinity.tests.unit.integration.ring import test_capacity_state

Conductor = profile.ConductorProfile.build


class IronicError(Exception):
    def __init__(self, message=None, **kwargs):
        super().__init__(message or repr(kwargs))
        self.kwargs = kwargs


class DriverNotFound(IronicError):
    pass


class TemporaryFailure(IronicError):
    pass


class NoValidHost(IronicError):
    def __init__(self, reason):
        super().__init__('No valid host was found. Reason: %s' % reason)


class FakeStockRing:
    """Ironic's ring, faked: the first of the conductors by a hash."""

    def __init__(self, hosts):
        self.nodes = frozenset(hosts)

    def get_nodes(self, data, ignore_nodes=None, replicas=1):
        key = data if isinstance(data, bytes) else data.encode()
        order = [
            c
            for c in rendezvous.ranking(key, sorted(self.nodes))
            if c not in set(ignore_nodes or ())
        ]
        return set(order[:replicas])


class FakeStockManager:
    """Ironic's HashRingManager, faked over the test's conductors."""

    active = None  # set by the test
    resets = 0

    def __init__(self, use_groups=True, cache=True):
        self.use_groups = use_groups

    @classmethod
    def reset(cls):
        cls.resets += 1

    def get_ring(self, driver, group):
        hosts = set()
        for key, found in self.active().items():
            key_group, key_driver = key.split(':')
            if key_driver == driver and (
                not self.use_groups or key_group == (group or '')
            ):
                hosts |= set(found)
        if not hosts:
            raise DriverNotFound(driver_name=driver)
        return FakeStockRing(hosts)


def _fake_ironic():
    exception = types.ModuleType('ironic.common.exception')
    exception.DriverNotFound = DriverNotFound
    exception.TemporaryFailure = TemporaryFailure
    exception.NoValidHost = NoValidHost
    hash_ring = types.ModuleType('ironic.common.hash_ring')
    hash_ring.HashRingManager = FakeStockManager
    common = types.ModuleType('ironic.common')
    common.exception = exception
    common.hash_ring = hash_ring
    conf = types.ModuleType('ironic.conf')
    conf.CONF = cfg.ConfigOpts()
    ironic = types.ModuleType('ironic')
    ironic.common, ironic.conf = common, conf
    return {
        'ironic': ironic,
        'ironic.common': common,
        'ironic.common.exception': exception,
        'ironic.common.hash_ring': hash_ring,
        'ironic.conf': conf,
    }


def import_afresh(test, *names):
    """Import the ring package's modules ``names`` again, for this test
    only (call within a patch of sys.modules, which puts the modules back
    after it). The package's attributes too: ``from package import
    module`` reads them before sys.modules, and would hand the next test
    a module bound to this one's fakes."""
    package = importlib.import_module('ironic_affinity.integration.ring')
    for name in names:
        sys.modules.pop('%s.%s' % (package.__name__, name), None)
        if hasattr(package, name):
            test.addCleanup(setattr, package, name, getattr(package, name))
            delattr(package, name)
        else:
            test.addCleanup(lambda n=name: package.__dict__.pop(n, None))
    return [
        importlib.import_module('%s.%s' % (package.__name__, name))
        for name in names
    ]


class RingManagerFixture(base.TestCase):
    def setUp(self):
        super().setUp()
        patcher = mock.patch.dict(sys.modules, _fake_ironic())
        patcher.start()
        self.addCleanup(patcher.stop)
        # loader keeps Ironic's manager as it found it at import: the fake.
        import_afresh(self, 'loader', 'ring_manager')
        self.module = importlib.import_module(
            'ironic_affinity.integration.ring.ring_manager'
        )
        self.clock = fakes.booted_clock()
        self.members = fakes.Members()
        self.members.set(
            {
                'c1': Conductor(
                    'c1', hard_affinity_tags='dc1', soft_affinity_tags='dc1'
                ),
                'c2': Conductor('c2', soft_affinity_tags='dc2'),
                'g1': Conductor('g1'),
            }
        )
        self.active = fakes.ActiveConductors(
            {':x': {'c1', 'c2'}, 'rack1:x': {'g1'}}
        )
        FakeStockManager.active = self.active
        self.node_tags = test_capacity_state.FakeTags()
        self.node_tags.put('n-dc1', 'dc1', driver='x')
        self.node_tags.put('n-none', driver='x')
        services = types.SimpleNamespace(
            states=placement_state.PlacementStates(
                self.members, self.active, lambda: 15.0, clock=self.clock
            ),
            orphans=orphans.OrphanReports(logging.getLogger('test-rm')),
            node_tags=self.node_tags,
            capacity=capacity_state.CapacityStates(
                self.node_tags, lambda: 2.0, logging.getLogger('test-rm')
            ),
        )
        patcher = mock.patch.object(process_services, '_STARTED', services)
        patcher.start()
        self.addCleanup(patcher.stop)

    def manager(self, **kwargs):
        return self.module.AffinityHashRingManager(**kwargs)


class RingManagerTestCase(RingManagerFixture):
    def test_places_by_tags(self):
        ring = self.manager().get_ring('x', '')
        self.assertEqual(frozenset({'c1', 'c2'}), ring.nodes)
        self.assertEqual({'c1'}, ring.get_nodes(b'n-dc1'))
        # c1 requires dc1: an untagged node goes to c2.
        self.assertEqual({'c2'}, ring.get_nodes(b'n-none'))

    def test_a_full_conductor_sends_nodes_on(self):
        # dc1 nodes tie c1 and c2 at 1; c2 has room for one node, and
        # n-none, which only c2 may take (c1 requires dc1), is the most
        # entitled to it: every dc1 node goes to c1.
        self.members.set(
            {
                'c1': Conductor(
                    'c1', hard_affinity_tags='dc1', soft_affinity_tags='dc1'
                ),
                'c2': Conductor('c2', soft_affinity_tags='dc1', max_nodes=1),
                'g1': Conductor('g1'),
            }
        )
        for name in ('n-dc1-a', 'n-dc1-b'):
            self.node_tags.put(name, 'dc1', driver='x')
        ring = self.manager().get_ring('x', '')
        for name in ('n-dc1', 'n-dc1-a', 'n-dc1-b'):
            self.assertEqual({'c1'}, ring.get_nodes(name.encode()))
        self.assertEqual({'c2'}, ring.get_nodes(b'n-none'))
        # Now only c2 prefers dc1 nodes: it keeps one of them, c1 takes
        # the others, and n-none, which c2 ranks below them, too.
        self.members.set(
            {
                'c1': Conductor('c1', max_nodes=5),
                'c2': Conductor('c2', soft_affinity_tags='dc1', max_nodes=1),
                'g1': Conductor('g1'),
            }
        )
        ring = self.manager().get_ring('x', '')
        placed = [
            ring.get_nodes(n.encode()).pop()
            for n in ('n-dc1', 'n-dc1-a', 'n-dc1-b', 'n-none')
        ]
        self.assertEqual(1, placed[:3].count('c2'))
        self.assertEqual('c1', placed[3])

    def test_no_active_conductor_is_a_temporary_failure(self):
        self.active.active = {}
        self.assertRaises(TemporaryFailure, self.manager().get_ring, 'x', '')
        # Retried once after a reset, as Ironic does.
        self.assertEqual(2, self.active.reads)

    def test_unknown_driver_is_not_found_after_one_retry(self):
        exc = self.assertRaises(
            DriverNotFound, self.manager().get_ring, 'y', ''
        )
        self.assertEqual({'driver_name': 'y'}, exc.kwargs)
        self.assertEqual(2, self.active.reads)

    def test_retry_sees_a_conductor_that_just_came(self):
        manager = self.manager()
        manager.get_ring('x', '')
        self.active.active['rack2:x'] = {'c2'}
        # Ironic's cache is still good for 15 s: only the retry after
        # DriverNotFound reads the new conductor.
        ring = manager.get_ring('x', 'rack2')
        self.assertEqual(frozenset({'c2'}), ring.nodes)

    def test_reset_before_the_first_lookup_is_harmless(self):
        with mock.patch.object(process_services, '_STARTED', None):
            self.module.AffinityHashRingManager.reset()

    def test_ring_without_groups_spans_every_group(self):
        # As Ironic's driver endpoints build it: any conductor of the
        # hardware type, whatever its group, and a node of any group is
        # placed over all of them.
        ring = self.manager(use_groups=False, cache=False).get_ring('x', '')
        self.assertEqual(frozenset({'c1', 'c2', 'g1'}), ring.nodes)
        self.members.set({'g1': Conductor('g1')})
        self.active.active = {'rack1:x': {'g1'}}
        ring = self.manager(use_groups=False, cache=False).get_ring('x', '')
        self.assertEqual({'g1'}, ring.get_nodes(b'n-none'))

    def test_uncached_manager_reads_every_time(self):
        manager = self.manager(cache=False)
        for _ in range(3):
            manager.get_ring('x', '')
        self.assertEqual(3, self.active.reads)
        cached = self.manager()
        for _ in range(3):
            cached.get_ring('x', '')
        self.assertEqual(4, self.active.reads)

    def test_group_ring_only_has_its_group(self):
        ring = self.manager().get_ring('x', 'rack1')
        self.assertEqual(frozenset({'g1'}), ring.nodes)
        self.assertEqual({'g1'}, ring.get_nodes(b'n-none'))

    def test_conductors_not_in_the_group_are_named(self):
        self.members.set({'c1': Conductor('c1')})
        ring = self.manager().get_ring('x', 'rack1')
        found = ring.get_nodes(b'n-none')
        self.assertNotIn('g1', found)
        exc = self.assertRaises(NoValidHost, found.pop)
        self.assertIn(
            'g1 is alive in Ironic but not in the affinity', str(exc)
        )
        self.assertIn('hardware type x in conductor group "rack1"', str(exc))

    def test_not_in_group_without_groups_is_driver_not_found(self):
        # A member that Ironic does not list for this hardware type.
        self.members.set({'other': Conductor('other')})
        self.assertRaises(
            DriverNotFound,
            self.manager(use_groups=False, cache=False).get_ring,
            'x',
            '',
        )

    def test_no_member_at_all_is_ironics_ring(self):
        # No conductor runs the plugin (yet): an API that does answers
        # as Ironic's own would, rather than refuse every node.
        self.members.set({})
        ring = self.manager().get_ring('x', '')
        self.assertEqual(
            FakeStockRing({'c1', 'c2'}).get_nodes(b'n-dc1'),
            ring.get_nodes(b'n-dc1'),
        )

    def test_orphan_is_refused_with_the_tags_reason(self):
        self.node_tags.put('n-dc9', 'dc9', driver='x')
        self.members.set({'c1': Conductor('c1', hard_affinity_tags='dc1')})
        found = self.manager().get_ring('x', '').get_nodes(b'n-dc9')
        exc = self.assertRaises(NoValidHost, found.pop)
        self.assertIn('no conductor may take node n-dc9', str(exc))
        self.assertIn('c1:', str(exc))


T0 = 1.8e9
PERIOD = 600.0


def voting(conductor, side, since=T0, switches=(), period=PERIOD):
    return dataclasses.replace(
        conductor,
        switching=adoption.Published(
            adoption.Vote(side, since, period), tuple(switches)
        ),
    )


class SwitchingTestCase(RingManagerFixture):
    """The ring manager between Ironic's ring and affinity placement."""

    def setUp(self):
        super().setUp()
        self.conductors = {
            'c1': Conductor('c1', soft_affinity_tags='dc1'),
            'c2': Conductor('c2', soft_affinity_tags='dc2'),
            'g1': Conductor('g1'),
        }
        self.now = T0
        patcher = mock.patch('time.time', lambda: self.now)
        patcher.start()
        self.addCleanup(patcher.stop)
        for i in range(200):
            self.node_tags.put('n%03d' % i, 'dc2' if i % 2 else '', driver='x')

    def vote(self, sides, switches=()):
        self.members.set(
            {
                name: voting(c, sides[name], switches=switches)
                for name, c in self.conductors.items()
            }
        )

    def state(self):
        return self.module.process_services.started(None).states.current()

    def switching_to_affinity_at(self, at):
        """Every conductor votes affinity, and the switch from Ironic's
        ring is recorded to start at ``at``."""
        record = (
            adoption.Switch('stock', adoption.ORIGIN_AT, 0.0),
            adoption.Switch('affinity', at, PERIOD),
        )
        self.members.set(
            {
                name: voting(c, 'affinity', since=at, switches=record)
                for name, c in self.conductors.items()
            }
        )

    def answers(self, ring):
        return {
            'n%03d' % i: ring.get_nodes(('n%03d' % i).encode()).pop()
            for i in range(200)
        }

    def test_while_a_conductor_votes_stock_ironic_answers(self):
        # The history says Ironic's ring (they all voted so first); c2 and
        # g1 have turned to affinity, c1 not yet.
        self.vote(
            {'c1': 'stock', 'c2': 'affinity', 'g1': 'affinity'},
            switches=[adoption.Switch('stock', adoption.ORIGIN_AT, 0.0)],
        )
        ring = self.manager().get_ring('x', '')
        self.assertIsInstance(ring, FakeStockRing)
        # Even for a node that c1's hard tags rule out: Ironic's ring
        # ignores tags, and so does the deployment until it switches.
        stock = FakeStockRing({'c1', 'c2'})
        self.assertEqual(self.answers(stock), self.answers(ring))

    def test_the_last_vote_starts_a_paced_switch(self):
        stock_ring = FakeStockRing({'c1', 'c2'})
        self.vote({'c1': 'stock', 'c2': 'stock', 'g1': 'stock'})
        record = self.state().agreement.record
        self.assertEqual(
            (adoption.Switch('stock', adoption.ORIGIN_AT, 0.0),), record
        )
        # Every conductor turns to affinity: a switch is due, and
        # nothing moves until c1, the first by name, records it.
        self.members.set(
            {
                name: voting(c, 'affinity', since=T0 + i * 5, switches=record)
                for i, (name, c) in enumerate(sorted(self.conductors.items()))
            }
        )
        self.now = T0 + 10
        agreement = self.state().agreement
        self.assertEqual(('c1', True), (agreement.recorder, agreement.due))
        self.assertEqual(
            self.answers(stock_ring),
            self.answers(self.manager().get_ring('x', '')),
        )
        mine = adoption.recorded(agreement, 'c1', (), self.now, 5.0, PERIOD)
        self.members.set(
            {
                name: voting(c, 'affinity', switches=mine)
                for name, c in self.conductors.items()
            }
        )
        # Recorded at T0 + 10, it starts at T0 + 15.
        self.now = T0 + 15
        at_start = self.answers(self.manager().get_ring('x', ''))
        self.assertEqual(self.answers(stock_ring), at_start)
        self.now = T0 + 15 + PERIOD / 2
        halfway = self.answers(self.manager().get_ring('x', ''))
        self.now = T0 + 15 + PERIOD
        ring = self.manager().get_ring('x', '')
        self.assertNotIsInstance(ring, FakeStockRing)
        at_end = self.answers(ring)
        # At the end, placement by tags: dc2 nodes on c2.
        self.assertEqual(
            {'c2'}, {at_end['n%03d' % i] for i in range(1, 200, 2)}
        )
        moving = {n for n in at_end if at_end[n] != at_start[n]}
        moved = {n for n in moving if halfway[n] == at_end[n]}
        # About half of the moving nodes have moved halfway through, and
        # no node is anywhere but its start or its end.
        self.assertTrue(
            0.3 * len(moving) < len(moved) < 0.7 * len(moving),
            (len(moved), len(moving)),
        )
        for node, there in halfway.items():
            self.assertIn(there, {at_start[node], at_end[node]})

    def test_a_hard_excluded_node_moves_at_once(self):
        # c1 requires dc1: during the switch, no untagged node stays on c1
        # even before its moment.
        self.conductors['c1'] = Conductor(
            'c1', hard_affinity_tags='dc1', soft_affinity_tags='dc1'
        )
        self.switching_to_affinity_at(T0)
        # Not before the switch begins: it is known ahead, by processes
        # that may not all have read it yet.
        self.now = T0 - 1
        self.assertEqual(
            self.answers(FakeStockRing({'c1', 'c2'})),
            self.answers(self.manager().get_ring('x', '')),
        )
        self.now = T0 + 1
        found = self.answers(self.manager().get_ring('x', ''))
        self.assertNotIn('c1', set(found.values()))
        stock = self.answers(FakeStockRing({'c1', 'c2'}))
        self.assertIn('c1', set(stock.values()))
        # The others have not moved yet, one second into ten minutes.
        kept = [n for n in found if stock[n] == 'c2']
        self.assertEqual(['c2'] * len(kept), [found[n] for n in kept])

    def test_a_node_created_during_the_switch_is_placed_by_tags_at_once(
        self,
    ):
        self.switching_to_affinity_at(T0)
        self.now = T0 + 1
        stock = self.answers(FakeStockRing({'c1', 'c2'}))
        paced = self.answers(self.manager().get_ring('x', ''))
        # The same nodes, had they been created after the switch began.
        for i in range(200):
            self.node_tags.put(
                'n%03d' % i, 'dc2' if i % 2 else '', driver='x', created_at=T0
            )
        created = self.answers(self.manager().get_ring('x', ''))
        self.now = T0 + PERIOD
        at_end = self.answers(self.manager().get_ring('x', ''))
        self.assertEqual(at_end, created)
        # Most of them would still be on Ironic's ring one second in.
        on_stock = [n for n in paced if paced[n] == stock[n] != at_end[n]]
        self.assertGreater(len(on_stock), 40)

    def test_a_stock_vote_rolls_back_at_the_same_pace(self):
        record = (
            adoption.Switch('stock', adoption.ORIGIN_AT, 0.0),
            adoption.Switch('affinity', T0 - 2 * PERIOD, PERIOD),
        )
        votes = {
            name: voting(c, 'affinity', since=T0 - 2 * PERIOD, switches=record)
            for name, c in self.conductors.items()
        }
        self.members.set(votes)
        on_affinity = self.answers(self.manager().get_ring('x', ''))
        votes['c2'] = voting(
            self.conductors['c2'], 'stock', since=T0, switches=record
        )
        self.members.set(votes)
        self.now = T0 + 1
        self.assertEqual(
            on_affinity, self.answers(self.manager().get_ring('x', ''))
        )
        mine = adoption.recorded(
            self.state().agreement, 'c1', (), self.now, 5.0, PERIOD
        )
        votes['c1'] = voting(self.conductors['c1'], 'affinity', switches=mine)
        self.members.set(votes)
        stock = self.answers(FakeStockRing({'c1', 'c2'}))
        self.now = T0 + 6 + PERIOD / 2
        halfway = self.answers(self.manager().get_ring('x', ''))
        back = {n for n in stock if halfway[n] == stock[n] != on_affinity[n]}
        moving = {n for n in stock if stock[n] != on_affinity[n]}
        self.assertTrue(
            0.3 * len(moving) < len(back) < 0.7 * len(moving),
            (len(back), len(moving)),
        )
        self.now = T0 + 6 + PERIOD
        ring = self.manager().get_ring('x', '')
        self.assertIsInstance(ring, FakeStockRing)
