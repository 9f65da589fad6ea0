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

"""The ``ironic.api.middleware`` entry point ``affinity``.

For an API served by any WSGI server: ``[api] middleware = affinity`` in
ironic.conf is then all it takes. Ironic loads middleware once, in the
API's parent process before it forks workers, so installing the hash-ring
manager here puts it in every worker.

It also announces each API process, on its first request, in the group
of API processes (see ironic_affinity.membership.service), for the
upgrade check, and refuses
bad affinity tags at the door: a node create or update whose ``extra``
affinity value is of the wrong type, breaks the tag grammar or is too
long answers 400 before anything reaches the database.
"""

from collections.abc import Callable
from collections.abc import Iterable
import io
import json
import re
from typing import Any

from ironic.conf import CONF
from oslo_log import log

from ironic_affinity import exception
from ironic_affinity.integration import loader
from ironic_affinity.integration import node_tags
from ironic_affinity.membership import service

LOG = log.getLogger(__name__)

WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]

_NODE_PATH = re.compile(r'^/v1/nodes(/[^/]+)?/?$')
# Node bodies are small; anything larger is left for Ironic to refuse.
_MAX_BODY = 1024 * 1024


class AffinityMiddleware:
    """Installs the affinity ring manager; validates node affinity tags."""

    def __init__(self, app: WSGIApp) -> None:
        loader.install()
        self.app = app
        LOG.info(
            'ironic-affinity middleware loaded: hash-ring manager %(name)s',
            {'name': CONF.affinity.hash_ring_manager},
        )

    def __call__(
        self, environ: dict[str, Any], start_response: Callable[..., Any]
    ) -> Iterable[bytes]:
        if CONF.affinity.hash_ring_manager == 'affinity':
            # Lets the upgrade check tell this API from one without us.
            # On the first request of each process, never in __init__:
            # Ironic builds the application in the parent before forking
            # its workers, and a thread of ours busy there (importing the
            # tooz driver, say) at the fork would leave a lock held for
            # ever in the worker.
            service.announce_api(CONF)
        method = environ.get('REQUEST_METHOD')
        match = _NODE_PATH.match(environ.get('PATH_INFO', ''))
        if match and (
            (method == 'POST' and not match.group(1))
            or (method == 'PATCH' and match.group(1))
        ):
            body = self._read_body(environ)
            error = self._check(method, body)
            if error is not None:
                return self._refuse(error, start_response)
        return self.app(environ, start_response)

    @staticmethod
    def _read_body(environ: dict[str, Any]) -> bytes:
        try:
            length = int(environ.get('CONTENT_LENGTH') or 0)
        except ValueError:
            length = 0
        if not 0 < length <= _MAX_BODY:
            return b''
        stream = environ['wsgi.input']
        body = stream.read(length)
        # Put the body back for Ironic.
        environ['wsgi.input'] = io.BytesIO(body)
        return bytes(body)

    def _check(self, method: str, body: bytes) -> str | None:
        try:
            document = json.loads(body) if body else None
        except ValueError:
            return None  # not JSON: Ironic answers that itself
        key = CONF.affinity.node_tags_key
        values = []
        if method == 'POST' and isinstance(document, dict):
            extra = document.get('extra')
            if isinstance(extra, dict) and key in extra:
                values.append(extra[key])
        elif method == 'PATCH' and isinstance(document, list):
            for op in document:
                if (
                    isinstance(op, dict)
                    and op.get('op') in ('add', 'replace')
                    and op.get('path') in ('/extra/%s' % key, '/extra')
                ):
                    value = op.get('value')
                    if op['path'] == '/extra':
                        if isinstance(value, dict) and key in value:
                            values.append(value[key])
                    else:
                        values.append(value)
        for value in values:
            try:
                node_tags.tags_from_extra({key: value}, key, 'in request')
            except exception.InvalidTag as exc:
                return str(exc)
        return None

    @staticmethod
    def _refuse(
        reason: str, start_response: Callable[..., Any]
    ) -> Iterable[bytes]:
        # The shape of Ironic's own error bodies.
        fault = json.dumps(
            {'faultcode': 'Client', 'faultstring': reason, 'debuginfo': None}
        )
        body = json.dumps({'error_message': fault}).encode()
        start_response(
            '400 Bad Request',
            [
                ('Content-Type', 'application/json'),
                ('Content-Length', str(len(body))),
            ],
        )
        return [body]
