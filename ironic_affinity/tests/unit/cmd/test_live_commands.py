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

"""What the live commands say of the takeovers Ironic has yet to make
and of conductors outside the group, over a deployment read by a
fake."""

import dataclasses
import io
import json
import types

import fixtures
import sqlalchemy as sa

from ironic_affinity import adoption
from ironic_affinity.cmd import live_commands
from ironic_affinity.integration.data import live
from ironic_affinity.tests import base
from ironic_affinity.tests.unit import live_deployments

T0 = 1_800_000_000.0  # after every switch of the agreements here


SETTLED = adoption.agree({'c1': None, 'c2': None}, ())
STOCK = adoption.agree(
    {
        'c1': adoption.Published(
            adoption.Vote('stock', T0, 60.0),
            (adoption.Switch('stock', adoption.ORIGIN_AT, 0.0),),
        )
    },
    (),
)


class TakeoversTestCase(base.TestCase):
    def setUp(self):
        super().setUp()
        # No backend and no database: the deployment as the fake reads it.
        self.useFixture(
            fixtures.MockPatchObject(live_commands, '_prepare', autospec=True)
        )
        self.load = self.useFixture(
            fixtures.MockPatchObject(live, 'load', autospec=True)
        ).mock
        self.useFixture(
            fixtures.MockPatchObject(
                live_commands.time, 'time', autospec=True, return_value=T0
            )
        )

    def run_command(self, command, deployment, fmt='table', *extra):
        self.load.return_value = deployment
        args = types.SimpleNamespace(timeout=5.0, down=[], format=fmt)
        with fixtures.MockPatch('sys.stdout', new_callable=io.StringIO) as out:
            command(self.conf, args, *extra)
        return out.mock.getvalue()

    def test_check_plan_and_explain_count_them_on_affinity(self):
        deployment = live_deployments.two_racks(
            SETTLED, {'u1': 'c1', 'u2': 'c1'}
        )
        text = self.run_command(live_commands.check, deployment)
        self.assertIn('Placement: affinity; 1 takeover(s) pending', text)
        found = json.loads(
            self.run_command(live_commands.check, deployment, 'json')
        )
        self.assertEqual(1, found['placement']['takeovers_pending'])
        text = self.run_command(live_commands.plan, deployment)
        self.assertTrue(
            text.startswith('Placement: affinity; 1 takeover(s) pending\n'),
            text,
        )
        # Every node is placed by affinity: no word of Ironic's ring.
        self.assertNotIn("Ironic's ring", text)
        found = json.loads(
            self.run_command(live_commands.explain, deployment, 'json', 'n2')
        )
        self.assertEqual(1, found['placement']['takeovers_pending'])
        # One node's verdict does not count the deployment's nodes.
        self.assertNotIn('nodes_to_move', found['placement'])

    def test_none_pending_prints_as_before(self):
        deployment = live_deployments.two_racks(
            SETTLED, {'u1': 'c2', 'u2': 'c1'}
        )
        text = self.run_command(live_commands.check, deployment)
        self.assertNotIn('Placement', text)
        found = json.loads(
            self.run_command(live_commands.plan, deployment, 'json')
        )
        self.assertEqual(0, found['placement']['takeovers_pending'])

    def test_not_counted_while_ironic_s_ring_places(self):
        # Where Ironic's ring puts a node is known only inside Ironic.
        deployment = live_deployments.two_racks(
            STOCK, {'u1': 'c1', 'u2': 'c1'}
        )
        found = json.loads(
            self.run_command(live_commands.check, deployment, 'json')
        )
        self.assertEqual('stock', found['placement']['state'])
        self.assertNotIn('takeovers_pending', found['placement'])

    def test_outsiders_given_no_node_once_on_affinity(self):
        for agreement, until in ((SETTLED, False), (STOCK, True)):
            deployment = dataclasses.replace(
                live_deployments.two_racks(agreement, {}),
                not_members=frozenset({'c9'}),
            )
            with self.assertLogs(live_commands.LOG.logger.name) as logs:
                self.run_command(live_commands.check, deployment)
            said = logs.output[0]
            self.assertIn('not in the affinity group, so given no', said)
            self.assertTrue(said.endswith(': c9'), said)
            self.assertEqual(
                until, "Ironic's ring may give them nodes" in said
            )


class MembersTestCase(base.TestCase):
    """``members`` reads the group, and Ironic's database where one is
    configured, for what only it tells."""

    def setUp(self):
        super().setUp()
        self.useFixture(
            fixtures.MockPatchObject(live_commands, '_prepare', autospec=True)
        )
        deployment = live_deployments.two_racks(
            SETTLED, {'u1': 'c1', 'u2': 'c1'}
        )
        snapshot = types.SimpleNamespace(
            members={c.name: c for c in deployment.conductors},
            rejected={},
            held=(),
            error=None,
            stale=False,
            age=lambda: 0.1,
            runs={},
        )
        view = self.useFixture(
            fixtures.MockPatchObject(live_commands.service, 'member_view')
        ).mock
        view.return_value.refresh_within.return_value = snapshot
        self.read = self.useFixture(
            fixtures.MockPatchObject(live, 'read', autospec=True)
        ).mock
        self.read.return_value = deployment
        self.useFixture(
            fixtures.MockPatchObject(
                live_commands.time, 'time', autospec=True, return_value=T0
            )
        )
        live_commands.register_opts(self.conf)
        self.config(backend_url='redis://h:6379')

    def run_members(self, fmt='json'):
        args = types.SimpleNamespace(timeout=5.0, format=fmt)
        with fixtures.MockPatch('sys.stdout', new_callable=io.StringIO) as out:
            status = live_commands.members(self.conf, args)
        return status, out.mock.getvalue()

    def test_without_a_database_the_group_alone(self):
        status, text = self.run_members()
        self.assertEqual(0, status)
        self.read.assert_not_called()
        self.assertNotIn('takeovers_pending', json.loads(text)['placement'])

    def test_with_a_database_the_takeovers_pending(self):
        self.conf.set_override('connection', 'sqlite://', group='database')
        status, text = self.run_members()
        self.assertEqual(0, status)
        self.assertEqual(1, json.loads(text)['placement']['takeovers_pending'])
        _status, text = self.run_members('table')
        self.assertIn('Placement: affinity; 1 takeover(s) pending', text)

    def test_an_unreadable_database_is_said_and_the_group_listed(self):
        self.conf.set_override('connection', 'sqlite://', group='database')
        self.read.side_effect = sa.exc.OperationalError('SELECT', {}, 'down')
        status, text = self.run_members()
        self.assertEqual(0, status)
        found = json.loads(text)
        self.assertEqual(['c1', 'c2'], [m['name'] for m in found['members']])
        self.assertIn('down', found['placement']['database_error'])
        self.assertNotIn('takeovers_pending', found['placement'])
