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

"""The affinity resources in front of a fake Ironic, and their answers
from a placement state.

The fake plays Ironic's part in deciding who may read: it answers
``GET /v1/nodes/<ident>`` and ``GET /v1/conductors`` for one token only,
401 without a token and 403 for another, in Ironic's error format.
"""

import dataclasses
import io
import json
import types
from unittest import mock

from oslo_config import cfg

from ironic_affinity import adoption
from ironic_affinity import conf as affinity_conf
from ironic_affinity import exception
from ironic_affinity import profile
from ironic_affinity.integration import process_services
from ironic_affinity.integration.api import affinity_answers
from ironic_affinity.integration.api import affinity_api
from ironic_affinity.integration.api import door
from ironic_affinity.integration.data import live
from ironic_affinity.integration.ring import capacity_state
from ironic_affinity.integration.ring import placement_state
from ironic_affinity.tests import base
from ironic_affinity.tests.unit import doc_text
from ironic_affinity.tests.unit import live_deployments
from ironic_affinity.tests.unit import test_docs_agree
from ironic_affinity.tests.unit.integration import fakes
from ironic_affinity.tests.unit.integration.ring import test_capacity_state

UUID = '1be26c0b-03f2-4d2e-ae87-c02d7db8b2e0'
READER = 'reader-token'
STRANGER = 'stranger-token'
# A reader of the node's project: may read the node, not list conductors.
PROJECT_READER = 'project-reader-token'
# Both nodes last taken over by c1 (live_deployments.two_racks).
BOTH_ON_C1 = {'u1': 'c1', 'u2': 'c1'}


class FakeIronic:
    def __init__(self):
        self.node = {
            'uuid': UUID,
            'name': 'node1',
            'driver': 'ipmi',
            'conductor_group': '',
            'conductor': 'c1',
            'extra': {'affinity_tags': 'rack10'},
        }
        self.asked = []

    def __call__(self, environ, start_response):
        self.asked.append(dict(environ))
        token = environ.get('HTTP_X_AUTH_TOKEN')
        if token is None:
            return self._fault(start_response, '401 Unauthorized', 'no auth')
        path = environ['PATH_INFO']
        if token == PROJECT_READER and path == '/v1/conductors':
            return self._fault(start_response, '403 Forbidden', 'conductors')
        if token not in (READER, PROJECT_READER):
            return self._fault(start_response, '403 Forbidden', 'policy')
        if path == '/v1/conductors':
            return self._ok(start_response, {'conductors': []})
        if path in ('/v1/nodes/' + UUID, '/v1/nodes/node1'):
            return self._ok(start_response, self.node)
        return self._fault(start_response, '404 Not Found', 'no node')

    def _ok(self, start_response, document):
        start_response('200 OK', [('Content-Type', 'application/json')])
        return [json.dumps(document).encode()]

    def _fault(self, start_response, status, reason):
        start_response(
            status,
            [('Content-Type', 'application/json'), ('X-Ironic', 'yes')],
        )
        return [door.error_body(reason)]


def _request(method, path, token=None, body=b''):
    environ = {
        'REQUEST_METHOD': method,
        'PATH_INFO': path,
        'QUERY_STRING': 'fields=name',
        'CONTENT_LENGTH': str(len(body)),
        'CONTENT_TYPE': 'application/json',
        'wsgi.input': io.BytesIO(body),
        'HTTP_X_OPENSTACK_IRONIC_API_VERSION': '1.1',
    }
    if token is not None:
        environ['HTTP_X_AUTH_TOKEN'] = token
    return environ


class AffinityAPITestCase(base.TestCase):
    def setUp(self):
        super().setUp()
        self.ironic = FakeIronic()
        self.passed = []
        self.nodes_answered = []
        self.failure = None
        self.api = affinity_api.AffinityAPI(
            self._next, self.ironic, self._node, self._deployment
        )

    def _next(self, environ, start_response):
        self.passed.append(environ['PATH_INFO'])
        start_response('204 No Content', [])
        return [b'']

    def _node(self, node):
        if self.failure:
            raise self.failure
        self.nodes_answered.append(node)
        return {'node': node['name'], 'verdicts': 'here'}

    def _deployment(self):
        return {'members': ['c1']}

    def call(self, environ):
        started = []
        body = b''.join(
            self.api(environ, lambda s, h, e=None: started.append((s, h)))
        )
        status, headers = started[-1]
        return status, dict(headers), body

    def test_an_anonymous_request_gets_ironics_own_refusal(self):
        for path in ('/v1/nodes/node1/affinity', '/v1/affinity'):
            status, headers, body = self.call(_request('GET', path))
            self.assertEqual('401 Unauthorized', status)
            self.assertEqual('yes', headers['X-Ironic'])
            self.assertEqual(door.error_body('no auth'), body)
        self.assertEqual([], self.nodes_answered)

    def test_a_caller_without_the_policy_is_refused(self):
        for path in ('/v1/nodes/node1/affinity', '/v1/affinity'):
            status, _headers, body = self.call(_request('GET', path, STRANGER))
            self.assertEqual('403 Forbidden', status)
            self.assertEqual(door.error_body('policy'), body)
        self.assertEqual([], self.nodes_answered)

    def test_a_node_the_caller_cannot_see_is_not_found(self):
        status, _headers, _body = self.call(
            _request('GET', '/v1/nodes/node9/affinity', READER)
        )
        self.assertEqual('404 Not Found', status)

    def test_a_reader_is_answered_from_the_node_ironic_showed(self):
        status, headers, body = self.call(
            _request('GET', '/v1/nodes/node1/affinity', READER, b'{}')
        )
        self.assertEqual('200 OK', status)
        self.assertEqual('application/json', headers['Content-Type'])
        self.assertEqual(
            {'node': 'node1', 'verdicts': 'here'}, json.loads(body)
        )
        self.assertEqual([self.ironic.node], self.nodes_answered)
        # The node, then the conductors: the answer describes both.
        self.assertEqual(
            ['/v1/nodes/node1', '/v1/conductors'],
            [asked['PATH_INFO'] for asked in self.ironic.asked],
        )
        asked = self.ironic.asked[0]
        # A plain GET of the node, at our version, in the caller's name.
        self.assertEqual(
            ('GET', '/v1/nodes/node1', '', READER, '1.49'),
            (
                asked['REQUEST_METHOD'],
                asked['PATH_INFO'],
                asked['QUERY_STRING'],
                asked['HTTP_X_AUTH_TOKEN'],
                asked['HTTP_X_OPENSTACK_IRONIC_API_VERSION'],
            ),
        )
        self.assertNotIn('CONTENT_LENGTH', asked)
        self.assertEqual(b'', asked['wsgi.input'].read())

    def test_a_node_s_affinity_needs_the_conductor_list_too(self):
        # It names every conductor with its tags and verdict, which
        # Ironic shows only to those who may list the conductors.
        status, _headers, body = self.call(
            _request('GET', '/v1/nodes/node1/affinity', PROJECT_READER)
        )
        self.assertEqual('403 Forbidden', status)
        self.assertEqual(door.error_body('conductors'), body)
        self.assertEqual([], self.nodes_answered)

    def test_a_hidden_node_is_not_found_before_the_conductor_list(self):
        # Not the conductors' 403: whether the node exists stays hidden.
        status, _headers, _body = self.call(
            _request('GET', '/v1/nodes/node9/affinity', PROJECT_READER)
        )
        self.assertEqual('404 Not Found', status)
        self.assertEqual(
            ['/v1/nodes/node9'],
            [asked['PATH_INFO'] for asked in self.ironic.asked],
        )

    def test_the_deployment_needs_the_conductor_list(self):
        status, _headers, body = self.call(
            _request('GET', '/v1//affinity/', READER)
        )
        self.assertEqual('200 OK', status)
        self.assertEqual({'members': ['c1']}, json.loads(body))
        self.assertEqual('/v1/conductors', self.ironic.asked[-1]['PATH_INFO'])

    def test_read_only(self):
        for method in ('POST', 'PUT', 'PATCH', 'DELETE'):
            status, headers, body = self.call(
                _request(method, '/v1/nodes/node1/affinity', READER)
            )
            self.assertEqual('405 Method Not Allowed', status)
            self.assertEqual('GET', headers['Allow'])
            fault = json.loads(json.loads(body)['error_message'])
            self.assertIn('read-only', fault['faultstring'])
        self.assertEqual([], self.ironic.asked)

    def test_an_unavailable_placement_layer_is_a_503(self):
        self.failure = exception.MembershipUnavailable('backend away')
        status, _headers, body = self.call(
            _request('GET', '/v1/nodes/node1/affinity', READER)
        )
        self.assertEqual('503 Service Unavailable', status)
        fault = json.loads(json.loads(body)['error_message'])
        self.assertEqual(
            ('Server', 'backend away'),
            (fault['faultcode'], fault['faultstring']),
        )

    def test_every_other_request_goes_on(self):
        for path in (
            '/v1/nodes/node1',
            '/v1/nodes/node1/affinity/x',
            '/v1/affinityx',
            '/v2/affinity',
        ):
            status, _headers, _body = self.call(_request('GET', path, READER))
            self.assertEqual('204 No Content', status)
        self.assertEqual(4, len(self.passed))
        self.assertEqual([], self.ironic.asked)

    def test_route(self):
        self.assertEqual(
            affinity_api.Route('node 1'),
            affinity_api.route('/v1/nodes/node%201/affinity'),
        )
        self.assertEqual(
            affinity_api.Route(''), affinity_api.route('//v1/affinity')
        )
        self.assertIsNone(affinity_api.route('/v1/nodes/affinity'))


class AnswersTestCase(base.TestCase):
    """The answers from one placement state, as the ring would place."""

    def setUp(self):
        super().setUp()
        self.conf = cfg.ConfigOpts()
        affinity_conf.register_opts(self.conf)
        self.conf.register_opt(cfg.StrOpt('state_path', default='/srv'))
        self.conf([])
        self.members = fakes.Members()
        self.members.set(
            {
                'c1': profile.ConductorProfile(
                    'c1', soft_affinity_tags={'rack10': 1}
                ),
                'c2': profile.ConductorProfile(
                    'c2', hard_affinity_tags=frozenset({'rack20'})
                ),
            }
        )
        # c3 runs in Ironic without being a member.
        active = fakes.ActiveConductors({':ipmi': {'c1', 'c2', 'c3'}})
        states = placement_state.PlacementStates(
            self.members, active, lambda: 60.0
        )
        self.tags = test_capacity_state.FakeTags()
        self.services = types.SimpleNamespace(
            states=states,
            view=self.members,
            capacity=capacity_state.CapacityStates(
                self.tags, lambda: 2.0, mock.Mock()
            ),
        )

    def node(self, tags):
        return {
            'uuid': UUID,
            'name': 'node1',
            'driver': 'ipmi',
            'conductor_group': None,
            'conductor': 'c1',
            'extra': {'affinity_tags': tags},
        }

    def test_verdicts_and_fallback(self):
        found = affinity_answers.node_affinity(
            self.conf, self.services, self.node('rack10')
        )
        rows = {r['conductor']: r for r in found['conductors']}
        self.assertEqual('chosen', rows['c1']['verdict'])
        self.assertEqual([['rack10', 1]], rows['c1']['breakdown'])
        self.assertEqual('excluded', rows['c2']['verdict'])
        self.assertIn('rack20', rows['c2']['reason'])
        self.assertEqual(['c1'], found['fallback'])
        self.assertEqual(
            ('c1', 'c1', ['c3'], None, UUID),
            (
                found['conductor'],
                found['ironic_conductor'],
                found['not_members'],
                found['tags_error'],
                found['uuid'],
            ),
        )
        self.assertEqual(
            'file:///srv/affinity-membership', found['membership']['backend']
        )

    def test_a_view_that_cannot_be_read_shows_at_once(self):
        self.services.states.current()  # a state is built, then kept
        self.services.view = types.SimpleNamespace(
            snapshot=lambda: dataclasses.replace(
                self.members.snapshot(), error='Connection refused'
            )
        )
        found = affinity_answers.node_affinity(
            self.conf, self.services, self.node('rack10')
        )
        self.assertFalse(found['membership']['readable'])
        self.assertEqual('Connection refused', found['membership']['error'])

    def test_a_node_that_spilled_says_from_where(self):
        self.members.set(
            {
                'c1': profile.ConductorProfile(
                    'c1', soft_affinity_tags={'rack10': 1}, max_nodes=1
                ),
                'c3': profile.ConductorProfile('c3'),
            }
        )
        other = '6b1e3c3c-9a2f-4e55-8c41-0d2b7c1f0a11'
        found = {}
        for uuid in (UUID, other):
            self.tags.put(uuid, 'rack10')
        for uuid in (UUID, other):
            node = dict(self.node('rack10'), uuid=uuid)
            found[uuid] = affinity_answers.node_affinity(
                self.conf, self.services, node
            )
        spilled = [f for f in found.values() if 'spilled_from' in f]
        self.assertEqual(1, len(spilled))
        self.assertEqual(
            ('c3', 'c1'), (spilled[0]['conductor'], spilled[0]['spilled_from'])
        )
        self.assertEqual('node1', spilled[0]['node'])
        rows = {r['conductor']: r for r in spilled[0]['conductors']}
        self.assertEqual((1, 1), (rows['c1']['load'], rows['c1']['max_nodes']))

    def test_bad_tags_are_placed_as_untagged_and_said(self):
        found = affinity_answers.node_affinity(
            self.conf, self.services, self.node('bad!tag')
        )
        self.assertEqual([], found['tags'])
        self.assertIn('bad!tag', found['tags_error'])
        self.assertEqual('c1', found['conductor'])

    def settled_deployment(self):
        """The deployment's answer, both nodes of two racks on c1, the
        deployment settled on affinity; and the mocked read."""
        self.services.database = mock.sentinel.database
        settled = adoption.agree({'c1': None, 'c2': None}, ())
        with mock.patch.object(
            live,
            'read',
            autospec=True,
            return_value=live_deployments.two_racks(settled, BOTH_ON_C1),
        ) as read:
            found = affinity_answers.deployment_affinity(
                self.conf, self.services
            )
        return found, read

    def test_the_deployment_counts_takeovers_pending(self):
        found, read = self.settled_deployment()
        read.assert_called_once_with(
            self.conf, mock.ANY, mock.sentinel.database
        )
        # n1 is on c2 by its rack, n2 stays on c1.
        self.assertEqual(1, found['placement']['takeovers_pending'])

    def test_on_ironic_s_ring_this_process_s_ring_says_where(self):
        self.services.database = mock.sentinel.database
        stock = adoption.agree(
            {
                'c1': adoption.Published(
                    adoption.Vote('stock', 0.0, 60.0),
                    (adoption.Switch('stock', adoption.ORIGIN_AT, 0.0),),
                )
            },
            (),
        )
        for lookup, expected in ((None, None), (lambda node: 'c2', 2)):
            with (
                mock.patch.object(
                    live,
                    'read',
                    autospec=True,
                    return_value=live_deployments.two_racks(stock, BOTH_ON_C1),
                ),
                mock.patch.object(process_services, 'RING_LOOKUP', lookup),
            ):
                found = affinity_answers.deployment_affinity(
                    self.conf, self.services
                )
            self.assertEqual(
                expected, found['placement'].get('takeovers_pending')
            )

    def test_every_key_is_in_the_api_reference(self):
        # Each key of both answers, in the entry of its route
        # (doc/source/admin/openstack-client.rst), as Ironic's own API
        # reference lists its fields: a renamed key fails here.
        page = doc_text.read('admin/openstack-client.rst')
        node_doc = doc_text.literals(
            doc_text.between(
                page,
                '\n``GET /v1/nodes/{node_ident}/affinity``\n',
                '\n``GET /v1/affinity``\n',
            )
        )
        # The members as 'ironic-affinity members -f json' prints them,
        # and the placement as the live commands do: described there.
        commands = doc_text.read('cli/index.rst')
        deployment_doc = doc_text.literals(
            doc_text.between(page, '\n``GET /v1/affinity``\n', '\n\n')
        ) | doc_text.literals(
            doc_text.between(commands, '``members`` prints:', 'Exit codes')
        )
        placement_doc = doc_text.literals(
            doc_text.between(commands, '``placement``\n', '``side``')
        )
        node = affinity_answers.node_affinity(
            self.conf, self.services, self.node('rack10')
        )
        deployment, _read = self.settled_deployment()
        for found, documented in (
            (node, node_doc),
            (deployment, deployment_doc),
        ):
            placement = found.pop('placement')
            self.assertEqual(
                [], sorted(set(placement) - placement_doc), 'placement'
            )
            self.assertEqual(
                [],
                sorted(test_docs_agree.keys(found) - documented),
                sorted(found),
            )
