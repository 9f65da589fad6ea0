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

"""The door (ironic_affinity.integration.api.door) in front of a fake Ironic.

The fake answers ``GET /v1/nodes/<uuid or name>`` from its own nodes,
for the caller's token only, and records every other request with the
body it read. The patch cases apply patches with the JSON-patch library
Ironic patches nodes with (a test requirement here).
"""

import contextlib
import io
import json

from ironic_affinity.integration.api import door
from ironic_affinity.integration.api import json_patch
from ironic_affinity.tests import base

KEY = 'affinity_tags'
UUID = '1be26c0b-03f2-4d2e-ae87-c02d7db8b2e0'
TOKEN = 'caller-token'


class FakeIronic:
    def __init__(self):
        self.nodes = {
            UUID: {'uuid': UUID, 'name': 'node1', 'extra': {KEY: ['rack10']}}
        }
        self.gets = []
        self.received = []

    def __call__(self, environ, start_response):
        if environ['REQUEST_METHOD'] == 'GET':
            return self._get(environ, start_response)
        # Read as Ironic's request object does.
        length = environ.get('CONTENT_LENGTH')
        stream = environ['wsgi.input']
        if length:
            body = stream.read(int(length))
        elif environ.get('wsgi.input_terminated'):
            body = stream.read()
        else:
            body = b''
        self.received.append(
            (environ['REQUEST_METHOD'], environ['PATH_INFO'], body)
        )
        return self._answer(start_response, '200 OK', {})

    def _get(self, environ, start_response):
        self.gets.append(dict(environ))
        if environ.get('HTTP_X_AUTH_TOKEN') != TOKEN:
            return self._answer(start_response, '403 Forbidden', {})
        ident = environ['PATH_INFO'].rsplit('/', 1)[-1]
        for node in self.nodes.values():
            if ident in (node['uuid'], node['name']):
                return self._answer(start_response, '200 OK', node)
        return self._answer(start_response, '404 Not Found', {})

    @staticmethod
    def _answer(start_response, status, body):
        start_response(status, [('Content-Type', 'application/json')])
        return [json.dumps(body).encode()]


class Chunks(io.RawIOBase):
    """A request body that arrives in pieces, as a chunked one does."""

    def __init__(self, data, size=7):
        self.pieces = [data[i : i + size] for i in range(0, len(data), size)]

    def readable(self):
        return True

    def read(self, size=-1):
        out = b''
        while self.pieces and (size < 0 or len(out) < size):
            piece = self.pieces.pop(0)
            if size >= 0 and len(out) + len(piece) > size:
                keep = size - len(out)
                self.pieces.insert(0, piece[keep:])
                piece = piece[:keep]
            out += piece
        return out


class Unreadable(io.RawIOBase):
    def read(self, size=-1):
        raise AssertionError('the body must not be read')


class DoorTestCase(base.TestCase):
    limit = 4096

    def setUp(self):
        super().setUp()
        self.ironic = FakeIronic()
        self.door = door.Door(
            self.ironic,
            lambda: KEY,
            lambda: self.limit,
            json_patch.apply_patch,
        )

    def call(
        self,
        method,
        path,
        body,
        chunked=False,
        content_type='application/json',
        **headers,
    ):
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        environ = {
            'REQUEST_METHOD': method,
            'PATH_INFO': path,
            'QUERY_STRING': '',
            'CONTENT_TYPE': content_type,
            'HTTP_X_AUTH_TOKEN': TOKEN,
            'HTTP_X_OPENSTACK_IRONIC_API_VERSION': '1.1',
        }
        environ.update(headers)
        if chunked:
            # cheroot: no length, the stream ends where the body does.
            environ['wsgi.input'] = Chunks(data)
            environ['wsgi.input_terminated'] = True
        else:
            environ['wsgi.input'] = io.BytesIO(data)
            environ['CONTENT_LENGTH'] = str(len(data))
        statuses = []
        answer = b''.join(
            self.door(environ, lambda s, h, e=None: statuses.append(s))
        )
        self.data = data
        return statuses[0], answer

    def assert_refused(self, answer, *words, status='400 Bad Request'):
        code, body = answer
        self.assertEqual(status, code)
        # Ironic's error format: a JSON fault inside error_message.
        fault = json.loads(json.loads(body)['error_message'])
        self.assertEqual('Client', fault['faultcode'])
        self.assertNotIn('\n', fault['faultstring'])
        for word in words:
            self.assertIn(word, fault['faultstring'])
        self.assertEqual([], self.ironic.received)

    def assert_passed(self):
        """Ironic received the request, its body byte for byte."""
        self.assertEqual(1, len(self.ironic.received))
        self.assertEqual(self.data, self.ironic.received[0][2])


def node(tags_value, **fields):
    return dict(
        {
            'name': 'new1',
            'driver': 'fake-hardware',
            'extra': {KEY: tags_value},
        },
        **fields,
    )


class CreatingTestCase(DoorTestCase):
    """What holds while Ironic handles a node create."""

    def setUp(self):
        super().setUp()
        self.bodies = []
        self.inside = []
        self.door.creating = self._creating
        ironic = self.ironic

        def app(environ, start_response):
            self.inside.append(bool(self.bodies) and self.bodies[-1][1])
            return ironic(environ, start_response)

        self.door.app = app

    @contextlib.contextmanager
    def _creating(self, document):
        entry = [document, True]
        self.bodies.append(entry)
        try:
            yield
        finally:
            entry[1] = False

    def test_a_create_is_handled_inside_its_creation(self):
        body = node('rack10')
        code, _answer = self.call('POST', '/v1/nodes', body)
        self.assertEqual('200 OK', code)
        self.assertEqual([True], self.inside)
        self.assertEqual([[body, False]], self.bodies)
        self.assert_passed()

    def test_a_refused_create_is_no_creation(self):
        self.call('POST', '/v1/nodes', node('bad!tag'))
        self.assertEqual([], self.bodies)

    def test_an_update_is_no_creation(self):
        self.call(
            'PATCH',
            '/v1/nodes/' + UUID,
            [{'op': 'replace', 'path': '/extra/%s' % KEY, 'value': 'rack2'}],
        )
        self.assertEqual([], self.bodies)
        # The node's read and the update itself, neither in a creation.
        self.assertEqual([False, False], self.inside)


class CreateTestCase(DoorTestCase):
    def test_bad_tags_with_content_length_refused(self):
        answer = self.call('POST', '/v1/nodes', node('rack10 bad!tag'))
        self.assert_refused(answer, 'node new1', 'extra.affinity_tags', 'bad')

    def test_bad_tags_chunked_refused(self):
        answer = self.call(
            'POST', '/v1/nodes', node('rack10 bad!tag'), chunked=True
        )
        self.assert_refused(answer, 'node new1', "'bad!tag'")

    def test_good_tags_pass_byte_identical(self):
        for chunked in (False, True):
            self.ironic.received = []
            status, _ = self.call(
                'POST', '/v1/nodes', node(['rack10', 'net1']), chunked
            )
            self.assertEqual('200 OK', status)
            self.assert_passed()

    def test_every_create_route_is_checked(self):
        # Ironic 39 creates a node on each of these paths.
        for path in (
            '/v1/nodes/',
            '/v1/nodes//',
            '/v1/nodes.json',
            '/v1/nodes/.json',
        ):
            answer = self.call('POST', path, node(['rack1', 7]))
            self.assert_refused(answer, 'every tag must be a string')

    def test_wrong_types_and_sizes_refused(self):
        for bad in (
            {'a': 1},
            'r' * 65,
            ' '.join('t%d' % i for i in range(129)),
        ):
            self.assert_refused(self.call('POST', '/v1/nodes', node(bad)))

    def test_body_in_a_declared_charset_is_read_as_ironic_reads_it(self):
        text = json.dumps(node('bad!tag', description='caf\u00e9'))
        answer = self.call(
            'POST',
            '/v1/nodes',
            text.replace('\\u00e9', '\u00e9').encode('latin-1'),
            content_type='application/json; charset=latin-1',
        )
        self.assert_refused(answer, 'bad!tag')

    def test_non_json_passes_to_ironic(self):
        for body in (b'{"extra": {"affinity_tags": "bad!', b'\xff\xfe'):
            self.ironic.received = []
            self.assertEqual('200 OK', self.call('POST', '/v1/nodes', body)[0])
            self.assert_passed()

    def test_no_tags_and_other_shapes_pass(self):
        for body in ({'name': 'n'}, {'extra': None}, [], 'x'):
            self.ironic.received = []
            self.call('POST', '/v1/nodes', body)
            self.assert_passed()

    def test_other_requests_are_not_read(self):
        seen = []
        self.door.app = lambda environ, start: seen.append(
            environ['wsgi.input']
        )
        for method, path in (
            ('GET', '/v1/nodes'),
            ('POST', '/v1/ports'),
            ('POST', '/v1/nodes/%s/vifs' % UUID),
            ('PATCH', '/v1/nodes'),
        ):
            environ = {
                'REQUEST_METHOD': method,
                'PATH_INFO': path,
                'CONTENT_LENGTH': '10',
                'wsgi.input': Unreadable(),
            }
            self.door(environ, lambda s, h, e=None: None)
        self.assertEqual(4, len(seen))
        for stream in seen:
            self.assertIsInstance(stream, Unreadable)


class FramingTestCase(DoorTestCase):
    def test_oversize_with_content_length_refused_unread(self):
        environ = {
            'REQUEST_METHOD': 'POST',
            'PATH_INFO': '/v1/nodes',
            'CONTENT_LENGTH': str(self.limit + 1),
            'wsgi.input': Unreadable(),
        }
        statuses = []
        body = b''.join(
            self.door(environ, lambda s, h, e=None: statuses.append(s))
        )
        self.assert_refused(
            (statuses[0], body), '4096', status='413 Request Entity Too Large'
        )

    def test_oversize_chunked_refused(self):
        big = node('rack1', description='x' * self.limit)
        answer = self.call('POST', '/v1/nodes', big, chunked=True)
        self.assert_refused(answer, status='413 Request Entity Too Large')

    def test_body_at_the_bound_passes(self):
        body = node('rack1', description='')
        padding = self.limit - len(json.dumps(body))
        body['description'] = 'x' * padding
        for chunked in (False, True):
            self.ironic.received = []
            self.assertEqual(
                '200 OK', self.call('POST', '/v1/nodes', body, chunked)[0]
            )
            self.assertEqual(self.limit, len(self.data))
            self.assert_passed()

    def test_no_length_and_no_end_is_not_read(self):
        # What Ironic's request object reads then: nothing. A read could
        # wait for ever on a raw socket.
        environ = {
            'REQUEST_METHOD': 'POST',
            'PATH_INFO': '/v1/nodes',
            'wsgi.input': Unreadable(),
        }
        self.door(environ, lambda s, h, e=None: None)
        self.assertIsInstance(environ['wsgi.input'], Unreadable)

    def test_body_put_back_is_readable_to_its_end(self):
        self.call('POST', '/v1/nodes', node('rack1'), chunked=True)
        self.assert_passed()


class PatchTestCase(DoorTestCase):
    def patch(self, ops, ident=UUID, chunked=False, **headers):
        return self.call(
            'PATCH', '/v1/nodes/%s' % ident, ops, chunked, **headers
        )

    def set_tags(self, value):
        self.ironic.nodes[UUID]['extra'] = {KEY: value, 'note': 'bad!note'}

    def test_bad_results_refused(self):
        cases = [
            [{'op': 'add', 'path': '/extra/affinity_tags', 'value': 'b!'}],
            [{'op': 'replace', 'path': '/extra/affinity_tags', 'value': 7}],
            [{'op': 'add', 'path': '/extra/affinity_tags/-', 'value': 'b!'}],
            [{'op': 'add', 'path': '/extra/affinity_tags/0', 'value': 'b!'}],
            [
                {
                    'op': 'replace',
                    'path': '/extra/affinity_tags/0',
                    'value': 'b!',
                }
            ],
            [{'op': 'add', 'path': '/extra', 'value': {KEY: 'b!'}}],
            [{'op': 'replace', 'path': '/extra', 'value': {KEY: ['x', 1]}}],
            [{'op': 'add', 'path': '/extra/affinity_tags/-', 'value': ['x']}],
            [{'op': 'add', 'path': '/extra/affinity_tags/-', 'value': 'a:5'}],
            # The whole document (Ironic refuses the root path anyway).
            [{'op': 'replace', 'path': '', 'value': {'extra': {KEY: '!'}}}],
        ]
        for ops in cases:
            self.assert_refused(self.patch(ops), 'node %s' % UUID, KEY)

    def test_several_operations_bad_together(self):
        # 127 tags stored; two good tags more make 129, over the limit.
        self.set_tags(['t%d' % i for i in range(127)])
        ops = [
            {'op': 'add', 'path': '/extra/affinity_tags/-', 'value': 'a'},
            {'op': 'add', 'path': '/extra/affinity_tags/-', 'value': 'b'},
        ]
        self.assert_refused(self.patch(ops), '129 tags')

    def test_good_then_bad_replace_refused(self):
        ops = [
            {'op': 'add', 'path': '/extra/affinity_tags/-', 'value': 'ok'},
            {'op': 'test', 'path': '/extra/affinity_tags/1', 'value': 'ok'},
            {'op': 'replace', 'path': '/extra/affinity_tags/1', 'value': '!'},
        ]
        self.assert_refused(self.patch(ops))

    def test_copy_and_move_into_the_key_refused(self):
        self.ironic.nodes[UUID]['name'] = 'node~1'
        for ops in (
            [{'op': 'copy', 'from': '/name', 'path': '/extra/affinity_tags'}],
            [
                {
                    'op': 'move',
                    'from': '/extra/note',
                    'path': '/extra/affinity_tags',
                }
            ],
            [{'op': 'copy', 'from': '/extra', 'path': '/extra/affinity_tags'}],
        ):
            self.ironic.nodes[UUID]['extra'] = {KEY: 'a', 'note': 'bad!'}
            self.assert_refused(self.patch(ops))

    def test_remove_of_part_leaving_a_changed_bad_value_refused(self):
        self.set_tags(['ok', 'bad!', 'worse!'])
        ops = [{'op': 'remove', 'path': '/extra/affinity_tags/1'}]
        self.assert_refused(self.patch(ops), 'worse!')

    def test_escaped_path_to_the_key_refused(self):
        self.door.key = lambda: 'affinity/tags~x'
        ops = [{'op': 'add', 'path': '/extra/affinity~1tags~0x', 'value': '!'}]
        self.assert_refused(self.patch(ops), 'extra.affinity/tags~x')

    def test_node_named_by_name_refused(self):
        ops = [{'op': 'add', 'path': '/extra/affinity_tags/-', 'value': '!'}]
        self.assert_refused(self.patch(ops, ident='node1'), 'node node1')

    def test_every_update_route_is_checked(self):
        ops = [{'op': 'add', 'path': '/extra/affinity_tags/-', 'value': '!'}]
        for path in ('/v1/nodes/%s/', '/v1/nodes//%s', '/v1/nodes/%s//'):
            answer = self.call('PATCH', path % UUID, ops)
            self.assert_refused(answer)

    def test_chunked_patch_refused(self):
        ops = [{'op': 'add', 'path': '/extra/affinity_tags/-', 'value': '!'}]
        self.assert_refused(self.patch(ops, chunked=True))

    def test_read_with_the_callers_headers(self):
        ops = [{'op': 'add', 'path': '/extra/affinity_tags/-', 'value': '!'}]
        self.patch(ops, HTTP_X_OPENSTACK_IRONIC_API_VERSION='1.99')
        (get,) = self.ironic.gets
        self.assertEqual('1.99', get['HTTP_X_OPENSTACK_IRONIC_API_VERSION'])
        self.assertEqual(TOKEN, get['HTTP_X_AUTH_TOKEN'])
        self.assertEqual('/v1/nodes/%s' % UUID, get['PATH_INFO'])
        self.assertEqual(b'', get['wsgi.input'].read())
        self.assertNotIn('CONTENT_LENGTH', get)

    def test_good_results_pass_byte_identical(self):
        cases = [
            [{'op': 'add', 'path': '/extra/affinity_tags/-', 'value': 'r1'}],
            [
                {
                    'op': 'replace',
                    'path': '/extra/affinity_tags/0',
                    'value': 'a',
                }
            ],
            [{'op': 'add', 'path': '/extra/affinity_tags', 'value': 'a, b'}],
            [{'op': 'remove', 'path': '/extra/affinity_tags'}],
            [{'op': 'remove', 'path': '/extra'}],
            [{'op': 'replace', 'path': '/extra', 'value': {KEY: ['a']}}],
            [{'op': 'copy', 'from': '/name', 'path': '/extra/affinity_tags'}],
            [{'op': 'add', 'path': '/extra/note', 'value': 'x'}],
            [{'op': 'replace', 'path': '/description', 'value': 'x!'}],
        ]
        for chunked in (False, True):
            for ops in cases:
                self.ironic.received = []
                self.ironic.nodes[UUID]['extra'] = {KEY: ['rack10']}
                status, _ = self.patch(ops, chunked=chunked)
                self.assertEqual('200 OK', status, ops)
                self.assert_passed()

    def test_unrelated_patch_reads_nothing(self):
        ops = [{'op': 'replace', 'path': '/description', 'value': 'x'}]
        self.patch(ops)
        self.assertEqual([], self.ironic.gets)
        self.assert_passed()

    def test_bad_value_left_as_it_was_passes(self):
        # Stored before the plugin checked: unrelated edits stay possible.
        self.set_tags('bad!')
        self.patch([{'op': 'add', 'path': '/extra/note', 'value': 'x'}])
        self.assert_passed()

    def test_patches_ironic_refuses_pass_to_it(self):
        # Ironic refuses each of these with its own message (Ironic 39:
        # path pattern, root additions, failed patch): not ours to answer.
        cases = [
            [{'op': 'add', 'path': '/EXTRA/affinity_tags', 'value': '!'}],
            [{'op': 'add', 'path': '/extra/affinity_tags/', 'value': '!'}],
            [
                {
                    'op': 'replace',
                    'path': '/extra/affinity_tags/5',
                    'value': '!',
                }
            ],
            [{'op': 'test', 'path': '/extra/affinity_tags', 'value': []}],
            [{'op': 'copy', 'from': '/nope', 'path': '/extra/affinity_tags'}],
            [{'op': 'add', 'path': '/extra/affinity_tags'}],
            ['not an operation', {'op': 'add', 'path': '/extra'}],
        ]
        for ops in cases:
            self.ironic.received = []
            self.patch(ops + [{'op': 'add', 'path': '/extra/x', 'value': '!'}])
            self.assert_passed()

    def test_other_key_case_passes(self):
        ops = [{'op': 'add', 'path': '/extra/Affinity_Tags', 'value': '!'}]
        self.patch(ops)
        self.assert_passed()

    def test_unreadable_node_leaves_the_answer_to_ironic(self):
        ops = [{'op': 'add', 'path': '/extra/affinity_tags', 'value': '!'}]
        for ident, headers in (
            (UUID, {'HTTP_X_AUTH_TOKEN': 'someone else'}),
            ('no-such-node', {}),
        ):
            self.ironic.received = []
            self.patch(ops, ident=ident, **headers)
            self.assert_passed()
