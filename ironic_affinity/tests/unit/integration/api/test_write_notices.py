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

import json

from ironic_affinity.integration.api import write_notices
from ironic_affinity.tests import base

UUID = '1be26c0b-03f2-4d2e-ae87-c02d7f33c123'


class Answer:
    """An application's answer that calls start_response only once
    iterated, as WSGI allows."""

    def __init__(self, status, body, start_response):
        self.status = status
        self.body = body
        self.start_response = start_response
        self.closed = False

    def __iter__(self):
        self.start_response(self.status, [])
        yield self.body

    def close(self):
        self.closed = True


class WriteNoticesTestCase(base.TestCase):
    def setUp(self):
        super().setUp()
        self.noted = []
        self.status = '200 OK'
        self.body = json.dumps({'uuid': UUID, 'name': 'n'}).encode()
        self.answers = []
        self.app = write_notices.WriteNotices(self.ironic, self.noted.append)

    def ironic(self, environ, start_response):
        answer = Answer(self.status, self.body, start_response)
        self.answers.append(answer)
        return answer

    def call(self, method, path):
        seen = []
        body = b''.join(
            self.app(
                {'REQUEST_METHOD': method, 'PATH_INFO': path},
                lambda status, headers, *a: seen.append(status),
            )
        )
        self.assertEqual([self.status], seen)
        return body

    def test_create_and_update_are_noted_by_the_answer_s_uuid(self):
        self.status = '201 Created'
        self.assertEqual(self.body, self.call('POST', '/v1/nodes'))
        self.status = '200 OK'
        self.call('PATCH', '/v1/nodes/old-name')
        self.assertEqual([UUID, UUID], self.noted)
        self.assertTrue(all(a.closed for a in self.answers))

    def test_delete_is_noted_by_the_path(self):
        self.status = '204 No Content'
        self.body = b''
        self.call('DELETE', '/v1/nodes/node-7.json')
        self.assertEqual(['node-7'], self.noted)

    def test_an_update_without_a_document_is_noted_by_the_path(self):
        self.body = b'not json'
        self.call('PATCH', '//v1//nodes/node-8/')
        self.assertEqual(['node-8'], self.noted)

    def test_failures_and_other_requests_are_not_noted(self):
        self.status = '400 Bad Request'
        self.call('PATCH', '/v1/nodes/node-1')
        self.status = '200 OK'
        self.call('GET', '/v1/nodes/node-1')
        self.call('PUT', '/v1/nodes/node-1/states/power')
        self.call('POST', '/v1/ports')
        self.assertEqual([], self.noted)
