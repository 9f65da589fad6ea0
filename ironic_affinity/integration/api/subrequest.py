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

"""Asking the wrapped Ironic application, in the caller's name.

Our middleware sits outside Ironic's authentication. Whatever it needs
to know about a node, or whether the caller may know it, it asks Ironic
with the caller's own headers, so that authentication, policy (with its
project scoping) and name-or-UUID lookup stay Ironic's. Plain WSGI.
"""

from collections.abc import Callable
from collections.abc import Iterable
import dataclasses
import io
import json
from typing import Any

WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]

# The request's own body and framing, which a GET must not carry.
_BODY_KEYS = ('CONTENT_TYPE', 'CONTENT_LENGTH', 'HTTP_TRANSFER_ENCODING')
VERSION_HEADER = 'HTTP_X_OPENSTACK_IRONIC_API_VERSION'


@dataclasses.dataclass(frozen=True)
class Answer:
    status: str
    headers: list[tuple[str, str]]
    body: bytes

    @property
    def ok(self) -> bool:
        return self.status.startswith('200')

    def json(self) -> Any:
        """The body as JSON, or None when it is not JSON."""
        try:
            return json.loads(self.body)
        except ValueError:
            return None


def drain(result: Iterable[bytes]) -> bytes:
    """A WSGI application's whole answer, closed as WSGI requires."""
    try:
        return b''.join(result)
    finally:
        close = getattr(result, 'close', None)
        if close is not None:
            close()


def get(
    app: WSGIApp,
    environ: dict[str, Any],
    path: str,
    version: str | None = None,
) -> Answer:
    """``GET path`` from ``app`` with the caller's headers.

    :param version: the API version to ask at, instead of the caller's
        (the caller's authentication headers are kept either way).
    """
    request = dict(environ)
    for name in _BODY_KEYS:
        request.pop(name, None)
    request.update(
        {
            'REQUEST_METHOD': 'GET',
            'PATH_INFO': path,
            'QUERY_STRING': '',
            'wsgi.input': io.BytesIO(b''),
        }
    )
    if version is not None:
        request[VERSION_HEADER] = version
    started: list[tuple[str, list[tuple[str, str]]]] = []

    def start_response(
        status: str, headers: Any, exc_info: Any = None
    ) -> Callable[[bytes], None]:
        started.append((status, list(headers)))
        return lambda data: None

    body = drain(app(request, start_response))
    if not started:
        return Answer('500 Internal Server Error', [], body)
    status, headers = started[-1]
    return Answer(status, headers, body)


def replay(answer: Answer, start_response: Callable[..., Any]) -> list[bytes]:
    """Pass Ironic's answer on to the caller as Ironic gave it."""
    start_response(answer.status, answer.headers)
    return [answer.body]
