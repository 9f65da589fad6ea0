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

"""Bad affinity tags stay out whichever way a client sends them.

Real Ironic behind ironic-affinity-api: chunked bodies, every JSON-patch
operation that can write the tags, other paths to the same routes. Each
bad request must answer 400 and leave the stored value as it was; each
good one must still be stored. One deployment for the whole class, on
json-rpc ports of its own (8291+) so that it can run beside other e2e
runs.
"""

import http.client
import json
import unittest

import sqlalchemy as sa
import testtools

from ironic_affinity.tests.e2e import base
from ironic_affinity.tests.e2e import deployment

KEY = 'affinity_tags'
LATEST = {'X-OpenStack-Ironic-API-Version': 'latest'}
# Ironic 32 and later serve the API with cheroot, which decodes chunked
# bodies and flags them as complete; Ironic 29's eventlet server does
# not flag them, so Ironic itself reads no chunked body there.
SERVER_READS_CHUNKED = base.IRONIC_MAJOR >= 32


class DoorTestCase(testtools.TestCase):
    """Through ironic-affinity-api."""

    api = 'launcher'
    reads_chunked = SERVER_READS_CHUNKED

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.dep = deployment.Deployment(api=cls.api, first_rpc_port=8291)
        cls.dep.setUp()
        try:
            cls.dep.start_conductor(1)
            cls.dep.wait_conductors(1)
            cls.dep.wait_members(1)
        except Exception:
            cls.dep.cleanUp()
            raise

    @classmethod
    def tearDownClass(cls):
        cls.dep.cleanUp()
        super().tearDownClass()

    def setUp(self):
        super().setUp()
        self.name = self.id().rsplit('.', 1)[-1][5:][:50].replace('_', '-')
        self.uuid = self.dep.create_node(self.name, 'rack10')
        self.set_extra({KEY: ['rack10'], 'note': 'bad!tag'})

    # Requests

    def send(self, method, path, body, chunked=False, headers=LATEST):
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        connection = http.client.HTTPConnection(
            '127.0.0.1', self.dep.api_port, timeout=30
        )
        self.addCleanup(connection.close)
        all_headers = dict(headers, **{'Content-Type': 'application/json'})
        if chunked:
            # The whole request in one write, two chunks and the end: a
            # server that answers without reading a chunked body (the
            # wsgiref stand-in) may close the socket as soon as it has
            # the head, and a later write would then fail the test with
            # a broken pipe instead of showing the answer.
            half = len(data) // 2
            head = ['%s %s HTTP/1.1' % (method, path), 'Host: 127.0.0.1']
            head += ['%s: %s' % item for item in all_headers.items()]
            head += ['Transfer-Encoding: chunked', 'Connection: close']
            request = ('\r\n'.join(head) + '\r\n\r\n').encode()
            for piece in (data[:half], data[half:]):
                request += b'%x\r\n%s\r\n' % (len(piece), piece)
            connection.connect()
            connection.sock.sendall(request + b'0\r\n\r\n')
            response = http.client.HTTPResponse(connection.sock)
            response.begin()
            return response.status, response.read().decode(errors='replace')
        else:
            connection.request(method, path, data, all_headers)
        response = connection.getresponse()
        return response.status, response.read().decode(errors='replace')

    def patch(self, ops, **kwargs):
        return self.send('PATCH', '/v1/nodes/%s' % self.uuid, ops, **kwargs)

    def extra(self, ident=None):
        status, body = self.send(
            'GET', '/v1/nodes/%s?fields=extra' % (ident or self.uuid), b''
        )
        self.assertEqual(200, status, body)
        return json.loads(body)['extra']

    def set_extra(self, extra):
        ops = [{'op': 'replace', 'path': '/extra', 'value': extra}]
        status, body = self.patch(ops)
        self.assertEqual(200, status, body)

    # Assertions

    def assert_refused_by_door(self, answer, *words):
        status, body = answer
        self.assertEqual(400, status, body)
        fault = json.loads(json.loads(body)['error_message'])
        self.assertIn('extra.%s' % KEY, fault['faultstring'])
        for word in words:
            self.assertIn(word, fault['faultstring'])

    def assert_patch_refused(self, ops, **kwargs):
        before = self.extra()
        self.assert_refused_by_door(self.patch(ops, **kwargs))
        self.assertEqual(before, self.extra())

    def assert_patch_stored(self, ops, expected, **kwargs):
        status, body = self.patch(ops, **kwargs)
        self.assertEqual(200, status, body)
        self.assertEqual(expected, self.extra()[KEY])

    def node(self, name, tags_value):
        return {
            'name': name,
            'driver': 'fake-hardware',
            'extra': {KEY: tags_value},
        }

    def assert_no_node(self, name):
        status, body = self.send('GET', '/v1/nodes/%s' % name, b'')
        self.assertEqual(404, status, body)

    # Routes

    def test_chunked_post(self):
        bad = self.node('chunked-bad', 'rack10 bad!tag')
        status, body = self.send('POST', '/v1/nodes', bad, chunked=True)
        self.assertEqual(400, status, body)
        if self.reads_chunked:
            self.assert_refused_by_door((status, body), "'bad!tag'")
        self.assert_no_node('chunked-bad')
        good = self.node('chunked-good', 'rack10 rack11')
        status, body = self.send('POST', '/v1/nodes', good, chunked=True)
        if self.reads_chunked:
            self.assertEqual(201, status, body)
            self.assertEqual('rack10 rack11', self.extra('chunked-good')[KEY])
        else:
            # Ironic sees no body at all: its own schema error.
            self.assertEqual(400, status, body)
            self.assertIn('required property', body)

    def test_chunked_patch(self):
        bad = [{'op': 'add', 'path': '/extra/%s/-' % KEY, 'value': 'bad!'}]
        before = self.extra()
        status, body = self.patch(bad, chunked=True)
        self.assertEqual(400, status, body)
        self.assertEqual(before, self.extra())
        good = [{'op': 'add', 'path': '/extra/%s/-' % KEY, 'value': 'r2'}]
        status, body = self.patch(good, chunked=True)
        if self.reads_chunked:
            self.assertEqual(200, status, body)
            self.assertEqual(['rack10', 'r2'], self.extra()[KEY])
        else:
            self.assertEqual(400, status, body)

    def test_add_at_the_end_of_the_list(self):
        path = '/extra/%s/-' % KEY
        self.assert_patch_refused([{'op': 'add', 'path': path, 'value': '!'}])
        self.assert_patch_stored(
            [{'op': 'add', 'path': path, 'value': 'rack11'}],
            ['rack10', 'rack11'],
        )

    def test_replace_an_item(self):
        path = '/extra/%s/0' % KEY
        self.assert_patch_refused(
            [{'op': 'replace', 'path': path, 'value': 'bad!tag'}]
        )
        self.assert_patch_stored(
            [{'op': 'replace', 'path': path, 'value': 'rack12'}], ['rack12']
        )

    def test_several_operations_together(self):
        self.set_extra({KEY: ['t%d' % i for i in range(127)]})
        path = '/extra/%s/-' % KEY
        self.assert_patch_refused(
            [
                {'op': 'add', 'path': path, 'value': 'a'},
                {'op': 'add', 'path': path, 'value': 'b'},
            ]
        )
        self.assert_patch_stored(
            [
                {'op': 'add', 'path': path, 'value': 'a'},
                {'op': 'remove', 'path': '/extra/%s/0' % KEY},
            ],
            ['t%d' % i for i in range(1, 127)] + ['a'],
        )

    def test_whole_value_and_whole_extra(self):
        self.assert_patch_refused(
            [{'op': 'add', 'path': '/extra/%s' % KEY, 'value': ['a', 7]}]
        )
        self.assert_patch_refused(
            [{'op': 'replace', 'path': '/extra', 'value': {KEY: 'a:3'}}]
        )
        self.assert_patch_stored(
            [{'op': 'replace', 'path': '/extra', 'value': {KEY: 'a b'}}],
            'a b',
        )

    def test_copy_and_move_into_the_key(self):
        # Ironic refuses operations with "from" by its own schema; the
        # door refuses bad results first, and lets good ones reach it.
        for op, source in (('copy', '/name'), ('move', '/extra/note')):
            ops = [{'op': op, 'from': source, 'path': '/extra/%s' % KEY}]
            if op == 'copy':
                self.send(
                    'PATCH',
                    '/v1/nodes/%s' % self.uuid,
                    [{'op': 'replace', 'path': '/name', 'value': 'n~1'}],
                )
            self.assert_refused_by_door(self.patch(ops))
            ops[0]['from'] = '/extra/%s' % KEY
            status, body = self.patch(ops)
            self.assertEqual(400, status, body)
            self.assertIn("'from' was unexpected", body)

    def test_node_by_name_and_other_versions(self):
        path = '/extra/%s/-' % KEY
        bad = [{'op': 'add', 'path': path, 'value': '!'}]
        for ident, headers in (
            (self.name, LATEST),
            (self.uuid, {}),  # no version header: API 1.1, no names
            (self.uuid + '.json', {'X-OpenStack-Ironic-API-Version': '1.50'}),
            ('/' + self.uuid + '//', LATEST),
        ):
            answer = self.send(
                'PATCH', '/v1/nodes/%s' % ident, bad, headers=headers
            )
            self.assert_refused_by_door(answer)
        for ident, headers in ((self.name, LATEST), (self.uuid, {})):
            status, body = self.send(
                'PATCH',
                '/v1/nodes/%s' % ident,
                [{'op': 'add', 'path': path, 'value': 'r3'}],
                headers=headers,
            )
            self.assertEqual(200, status, body)
        self.assertEqual(['rack10', 'r3', 'r3'], self.extra()[KEY])

    def test_other_create_paths(self):
        for path, headers in (
            ('/v1/nodes/', LATEST),
            ('/v1/nodes//', LATEST),
            ('/v1/nodes.json', {'X-OpenStack-Ironic-API-Version': '1.50'}),
        ):
            name = 'other-%d' % len(path)
            answer = self.send(
                'POST', path, self.node(name, 'bad!'), headers=headers
            )
            self.assert_refused_by_door(answer)
            self.assert_no_node(name)

    def test_bad_value_already_stored_does_not_block_other_edits(self):
        # As if written before the middleware was in place.
        engine = sa.create_engine(self.dep.database_url)
        self.addCleanup(engine.dispose)
        with engine.begin() as connection:
            connection.exec_driver_sql(
                "UPDATE nodes SET extra = %s WHERE uuid = %s",
                (json.dumps({KEY: 'old!bad'}), self.uuid),
            )
        self.assert_patch_stored(
            [{'op': 'add', 'path': '/extra/note', 'value': 'x'}], 'old!bad'
        )
        self.assert_patch_refused(
            [{'op': 'replace', 'path': '/extra/%s' % KEY, 'value': 'new!bad'}]
        )
        self.assert_patch_stored(
            [{'op': 'replace', 'path': '/extra/%s' % KEY, 'value': 'fixed'}],
            'fixed',
        )


class WsgiDoorTestCase(DoorTestCase):
    """Through our WSGI application in the wsgiref stand-in server, which
    hands the application Content-Length bytes only: a chunked body
    reaches neither the door nor Ironic."""

    api = 'wsgi'
    reads_chunked = False


class IronicMiddlewareDoorTestCase(DoorTestCase):
    """Through Ironic's own ironic-api with [api]middleware = affinity."""

    api = 'middleware'

    @classmethod
    def setUpClass(cls):
        if not deployment.ironic_has_middleware_option():
            raise unittest.SkipTest('this Ironic has no [api]middleware')
        super().setUpClass()
