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

"""The placement metrics reporter over a fake sink and deployment."""

import dataclasses
import logging
import types

from ironic_affinity import adoption
from ironic_affinity import profile
from ironic_affinity.integration import placement_metrics
from ironic_affinity.integration.ring import placement_state
from ironic_affinity.membership import lease
from ironic_affinity.tests import base
from ironic_affinity.tests.unit.integration import fakes


class Sink:
    def __init__(self):
        self.sent = []

    def send_gauge(self, name, value):
        self.sent.append((name, value, 'g'))

    def send_counter(self, name, value):
        self.sent.append((name, value, 'c'))

    def send_timer(self, name, value):
        self.sent.append((name, value, 'ms'))

    def take(self):
        sent, self.sent = self.sent, []
        return sent


def _node(name, tags):
    return profile.NodeRequest.build(name, tags, uuid='uuid-' + name)


class ReporterTestCase(base.TestCase):
    def setUp(self):
        super().setUp()
        self.sink = Sink()
        self.members = fakes.Members()
        self.members.set(['c1', 'c2'])
        self.view = types.SimpleNamespace(
            read_errors=0, snapshot=self.members.snapshot
        )
        states = placement_state.PlacementStates(
            self.members,
            fakes.ActiveConductors({':ipmi': {'c1', 'c2'}}),
            lambda: 60.0,
        )
        self.conductors = [
            profile.ConductorProfile(
                'c1', hard_affinity_tags=frozenset({'dc1'})
            ),
            profile.ConductorProfile(
                'c2',
                hard_affinity_tags=frozenset({'dc1'}),
                soft_affinity_tags={'rack20': 1},
            ),
        ]
        self.nodes = [
            _node('a', 'dc1'),
            _node('b', 'dc1, rack20'),
            _node('lost', 'dc9'),
        ]
        self.places = False
        self.reporter = placement_metrics.PlacementReporter(
            self.sink,
            states.current,
            self.view,
            lambda snapshot: types.SimpleNamespace(
                conductors=tuple(self.conductors),
                nodes=tuple(self.nodes),
                agreement=self.agreement,
            ),
            lambda: 60.0,
            places=lambda: self.places,
            wall_clock=lambda: self.now,
            ring_lookup=lambda node: self.ring[node.name],
            read_taken_by=self.read_taken_by,
        )
        # Who last took each active node over, or why it cannot be read.
        self.taken_by = {}
        # Every node placed by affinity, as before switches existed.
        self.agreement = adoption.agree({'c1': None, 'c2': None}, ())
        self.ring = {}
        self.now = 1_800_000_000.0

    def read_taken_by(self):
        if isinstance(self.taken_by, Exception):
            raise self.taken_by
        return self.taken_by

    def test_every_process_reports_its_view(self):
        self.view.read_errors = 3
        self.reporter.report()
        sent = {name: (value, kind) for name, value, kind in self.sink.take()}
        self.assertEqual((2, 'g'), sent['membership.members'])
        self.assertEqual((3, 'c'), sent['membership.read_errors'])
        self.assertNotIn('placement.orphans', sent)
        # A counter reports what happened since the previous report.
        self.view.read_errors = 5
        self.reporter.report()
        sent = {name: (value, kind) for name, value, kind in self.sink.take()}
        self.assertEqual((2, 'c'), sent['membership.read_errors'])

    def test_a_stale_view_and_a_stood_down_conductor_show(self):
        self.reporter.report()
        sent = {name: value for name, value, _kind in self.sink.take()}
        self.assertEqual(0, sent['membership.stale'])
        # Not a conductor: no lease to report.
        self.assertNotIn('membership.stood_down', sent)
        self.view.snapshot = lambda: dataclasses.replace(
            self.members.snapshot(), error='Connection refused'
        )
        own = lease.Lease('c1', 5, 2.0, clock=lambda: 100.0)
        own.renewed(96.0)
        self.reporter._own_lease = lambda: own
        self.reporter.report()
        sent = {name: value for name, value, _kind in self.sink.take()}
        self.assertEqual(1, sent['membership.stale'])
        self.assertEqual(1, sent['membership.stood_down'])
        own.renewed(99.0)
        self.reporter.report()
        sent = {name: value for name, value, _kind in self.sink.take()}
        self.assertEqual(0, sent['membership.stood_down'])

    def test_tag_refreshes(self):
        self.reporter.observe_tags(0.25, 1000, True)
        self.assertEqual(
            [
                ('node_tags.refresh', 250.0, 'ms'),
                ('node_tags.rows', 1000, 'g'),
            ],
            self.sink.take(),
        )

    def test_api_processes_report_placement_and_moves(self):
        self.places = True
        self.reporter.report()
        sent = {name: value for name, value, _kind in self.sink.take()}
        placed = {
            name: sent['placement.nodes.' + name] for name in ('c1', 'c2')
        }
        self.assertEqual(2, sum(placed.values()))
        self.assertEqual(1, sent['placement.orphans'])
        # The first report has nothing to compare with.
        self.assertNotIn('placement.moved', sent)

        # c2 leaves: its nodes move to c1, and c2 is reported at 0 once.
        self.conductors = self.conductors[:1]
        self.reporter.report()
        sent = {name: value for name, value, _kind in self.sink.take()}
        self.assertEqual(
            (2, 0, placed['c2']),
            (
                sent['placement.nodes.c1'],
                sent['placement.nodes.c2'],
                sent['placement.moved'],
            ),
        )
        self.reporter.report()
        sent = {name: value for name, value, _kind in self.sink.take()}
        self.assertNotIn('placement.nodes.c2', sent)
        self.assertEqual(0, sent['placement.moved'])

    def test_metric_part(self):
        self.assertEqual(
            '127_0_0_1_8091', placement_metrics.metric_part('127.0.0.1:8091')
        )
        # A Prometheus name: ironic-prometheus-exporter keeps the part as
        # it is, and prometheus_client 0.21 refuses a '-'.
        for name in ('rack-b_1', 'conductor-1.example.org', 'c1:8091'):
            part = placement_metrics.metric_part(name)
            self.assertRegex(
                'ironic_affinity_placement_nodes_' + part,
                r'^[a-zA-Z_:][a-zA-Z0-9_:]*$',
            )
        self.assertEqual('rack_b_1', placement_metrics.metric_part('rack-b_1'))

    def test_capacity_is_reported_when_set(self):
        self.places = True
        self.reporter.report()
        sent = {name for name, _value, _kind in self.sink.take()}
        self.assertNotIn('placement.spilled', sent)
        # Three nodes prefer c2 (rack20), which holds one; c1 takes one
        # of the two it turns away, and the last goes over, to c2.
        self.conductors = [
            profile.ConductorProfile(
                'c1', hard_affinity_tags=frozenset({'dc1'}), max_nodes=1
            ),
            profile.ConductorProfile(
                'c2',
                hard_affinity_tags=frozenset({'dc1'}),
                soft_affinity_tags={'rack20': 1},
                max_nodes=1,
            ),
        ]
        self.nodes = [_node(n, 'dc1, rack20') for n in 'xyz']
        self.reporter.report()
        sent = {name: value for name, value, _kind in self.sink.take()}
        self.assertEqual(1, sent['placement.over_capacity'])
        self.assertEqual(1, sent['placement.spilled'])
        self.assertEqual(2, sent['placement.nodes.c2'])
        self.assertEqual(1, sent['placement.nodes.c1'])
        # max_nodes removed: once more at 0, then no longer sent.
        self.conductors = [
            dataclasses.replace(c, max_nodes=0) for c in self.conductors
        ]
        self.reporter.report()
        sent = {name: value for name, value, _kind in self.sink.take()}
        self.assertEqual(0, sent['placement.over_capacity'])
        self.assertEqual(0, sent['placement.spilled'])
        self.reporter.report()
        sent = {name for name, _value, _kind in self.sink.take()}
        self.assertNotIn('placement.over_capacity', sent)

    def test_a_rollout_is_reported_as_it_goes(self):
        # c2 changes to prefer rack30 over 60 s: the 40 rack30 nodes move
        # onto it a few at a time, and the gauges follow.
        self.places = True
        self.nodes = [_node('n%d' % i, 'dc1, rack30') for i in range(40)]
        before = self.conductors[1]
        self.conductors[1] = dataclasses.replace(
            before,
            soft_affinity_tags={'rack30': 1},
            changes=(profile.ProfileChange(before, self.now, 60.0),),
        )
        self.reporter.report()
        sent = {name: value for name, value, _kind in self.sink.take()}
        at_start = sent['placement.nodes.c2']
        self.assertEqual(40 - at_start, sent['placement.rollout_pending'])
        self.assertGreater(sent['placement.rollout_pending'], 10)
        self.now += 30
        self.reporter.report()
        sent = {name: value for name, value, _kind in self.sink.take()}
        halfway = sent['placement.nodes.c2']
        self.assertEqual(40 - halfway, sent['placement.rollout_pending'])
        self.assertEqual(halfway - at_start, sent['placement.moved'])
        self.assertTrue(at_start < halfway < 40, (at_start, halfway))
        self.now += 30
        self.reporter.report()
        sent = {name: value for name, value, _kind in self.sink.take()}
        self.assertEqual(40, sent['placement.nodes.c2'])
        # Once more at 0, then no longer sent.
        self.assertEqual(0, sent['placement.rollout_pending'])
        self.reporter.report()
        sent = {name for name, _value, _kind in self.sink.take()}
        self.assertNotIn('placement.rollout_pending', sent)

    def test_a_switch_is_reported_as_it_goes(self):
        # Switching to affinity over 60 s: the ring places each node on
        # its side; the gauges count the ring's answers.
        self.places = True
        self.nodes = [_node('n%d' % i, 'dc1') for i in range(200)]
        self.ring = {n.name: 'c1' for n in self.nodes}
        history = (
            adoption.Switch('stock', adoption.ORIGIN_AT, 0.0),
            adoption.Switch('affinity', self.now, 60.0),
        )
        vote = adoption.Published(
            adoption.Vote('affinity', self.now, 60.0), history
        )
        self.agreement = adoption.agree({'c1': vote, 'c2': vote}, ())
        self.now += 30
        self.reporter.report()
        sent = {name: value for name, value, _kind in self.sink.take()}
        self.assertEqual(200, sent['placement.nodes.c1'])
        self.assertEqual(0, sent['placement.nodes.c2'])
        self.assertTrue(60 < sent['placement.adoption_pending'] < 140, sent)
        self.now += 31
        self.reporter.report()
        sent = {name: value for name, value, _kind in self.sink.take()}
        # Once more at 0, then no longer sent; the ring no longer asked.
        self.assertEqual(0, sent['placement.adoption_pending'])
        self.ring = {}
        self.reporter.report()
        sent = {name for name, _value, _kind in self.sink.take()}
        self.assertNotIn('placement.adoption_pending', sent)

    def test_takeovers_pending_and_a_failed_read(self):
        self.places = True
        # Both placed on c2 by their rack; 'lost' on none.
        self.nodes = [
            _node('a', 'dc1, rack20'),
            _node('b', 'dc1, rack20'),
            _node('lost', 'dc9'),
        ]
        self.taken_by = {
            'uuid-a': 'c2',
            'uuid-b': 'c1',
            # No conductor may take it: nobody takes it over.
            'uuid-lost': 'c1',
            # Not in the tag cache yet: not placed, not counted.
            'uuid-new': None,
        }
        self.reporter.report()
        sent = {name: value for name, value, _kind in self.sink.take()}
        self.assertEqual(1, sent['placement.takeovers_pending'])

        # The read fails: said once, and the rest of the report goes on.
        self.taken_by = RuntimeError('connection\nrefused')
        with self.assertLogs(
            placement_metrics.LOG.logger, logging.INFO
        ) as logs:
            for _report in range(2):
                self.reporter.report()
                sent = {name for name, _value, _kind in self.sink.take()}
                self.assertIn('placement.orphans', sent)
                self.assertNotIn('placement.takeovers_pending', sent)
            self.taken_by = {'uuid-b': 'c2'}
            self.reporter.report()
        sent = {name: value for name, value, _kind in self.sink.take()}
        self.assertEqual(0, sent['placement.takeovers_pending'])
        self.assertEqual(2, len(logs.output), logs.output)
        self.assertIn(
            'WARNING:%s:Cannot read which conductor took each node over, '
            'for placement.takeovers_pending: connection refused'
            % placement_metrics.LOG.logger.name,
            logs.output[0],
        )
        self.assertIn('took each node over again after', logs.output[1])

    def test_takeovers_during_a_switch_are_by_the_ring(self):
        # On Ironic's ring, every node on c1: the ring's answer counts,
        # not affinity's.
        self.places = True
        self.nodes = [_node('n%d' % i, 'dc1, rack20') for i in range(4)]
        self.ring = {n.name: 'c1' for n in self.nodes}
        self.agreement = adoption.agree(
            {
                'c1': adoption.Published(
                    adoption.Vote('stock', self.now, 60.0),
                    (adoption.Switch('stock', adoption.ORIGIN_AT, 0.0),),
                )
            },
            (),
        )
        self.taken_by = {'uuid-n0': 'c1', 'uuid-n1': 'c2', 'uuid-n2': None}
        self.reporter.report()
        sent = {name: value for name, value, _kind in self.sink.take()}
        self.assertEqual(4, sent['placement.nodes.c1'])
        self.assertEqual(2, sent['placement.takeovers_pending'])
