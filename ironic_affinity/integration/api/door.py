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

"""Refuse bad affinity tags before Ironic stores them: plain WSGI.

What is checked is what Ironic will store, not what the request spells:

* the body as Ironic's request object will read it, whatever its
  framing: ``Content-Length`` bytes, or, without a length, to its end
  when the server says it ends there (``wsgi.input_terminated``, set by
  cheroot for chunked requests); it is always put back, byte for byte;
* for ``PATCH /v1/nodes/<ident>``, the node's ``extra`` after the JSON
  patch is applied to the node's current ``extra``, read from the wrapped
  application itself with the caller's own headers (so authentication,
  policy, API version and name-or-uuid lookup stay Ironic's);
* every path Ironic 39 routes to node create or update, including
  ``/v1/nodes/``, ``/v1/nodes.json`` and doubled slashes.

No Ironic import here: the middleware module binds this to Ironic's
configuration and to the JSON-patch library Ironic itself applies.
"""

from collections.abc import Callable
from collections.abc import Iterable
from collections.abc import Sequence
import contextlib
import dataclasses
import io
import json
import re
from typing import Any

from ironic_affinity import exception
from ironic_affinity import tags
from ironic_affinity._i18n import _
from ironic_affinity.integration.api import subrequest

WSGIApp = subrequest.WSGIApp
# (document, patch) -> patched copy; raises PatchFailed.
PatchApplier = Callable[[Any, list[Any]], Any]
# A node create's body -> what holds while Ironic handles it.
Creating = Callable[[dict[str, Any]], contextlib.AbstractContextManager[None]]

FIELD = 'extra'
# Ironic's own default bound on a JSON body ([api]max_json_body_size),
# for releases without the option.
DEFAULT_MAX_BODY = 1024 * 1024

# How a request's charset is found: webob's rule, which Ironic's request
# object decodes the body with.
_CHARSET = re.compile(r';\s*charset=([^;]*)', re.I)


class PatchFailed(Exception):
    """The patch does not apply; Ironic will refuse it too."""


class TooLarge(Exception):
    """The body is over the bound."""


@dataclasses.dataclass(frozen=True)
class Route:
    """A request that may write a node's ``extra``."""

    create: bool
    #: The node as the caller named it (update only), and the path that
    #: reads it.
    ident: str = ''
    node_path: str = ''


def _segments(path: str) -> tuple[list[str], str]:
    """The path's segments as Ironic 39 routes them, and the ``.json``
    it takes off the end (below API 1.91; taking it off on every version
    only checks a few more requests); empty segments are ignored."""
    segments = [s for s in path.split('/') if s]
    suffix = ''
    if segments and segments[-1].endswith('.json'):
        suffix = '.json'
        segments[-1] = segments[-1][: -len(suffix)]
        if not segments[-1]:
            segments.pop()
    return segments, suffix


def route(method: str, path: str) -> Route | None:
    """The node create or update this request is, or None."""
    segments, suffix = _segments(path)
    if segments[:2] != ['v1', 'nodes']:
        return None
    if method == 'POST' and len(segments) == 2:
        return Route(create=True)
    if method == 'PATCH' and len(segments) == 3:
        # Read the node under the name Ironic will look up: with its
        # .json, which Ironic strips (or not) as it does for the PATCH.
        ident = segments[2] + suffix
        return Route(create=False, ident=ident, node_path='/v1/nodes/' + ident)
    return None


def written_node(method: str, path: str) -> str | None:
    """For a request that creates, updates or deletes a node: the node as
    the path names it ('' for a create); None for any other request."""
    segments, _suffix = _segments(path)
    if segments[:2] != ['v1', 'nodes']:
        return None
    if method == 'POST' and len(segments) == 2:
        return ''
    if method in ('PATCH', 'DELETE') and len(segments) == 3:
        return segments[2]
    return None


def _content_length(environ: dict[str, Any]) -> int | None:
    try:
        return int(environ.get('CONTENT_LENGTH') or '')
    except ValueError:
        return None


def read_body(environ: dict[str, Any], limit: int) -> bytes:
    """The body Ironic's request object will see; put back for Ironic.

    Without a length, a body is read only when the server says it ends
    (``wsgi.input_terminated``): Ironic reads none then either, and on a
    raw socket (wsgiref) a read to the end would wait for the client.

    :raises: TooLarge above ``limit`` bytes.
    """
    length = _content_length(environ)
    if length is not None and length <= 0:
        return b''
    if length is None and not environ.get(
        'wsgi.input_terminated', environ.get('webob.is_body_readable')
    ):
        return b''
    if length is not None and length > limit:
        raise TooLarge()
    stream = environ['wsgi.input']
    # One byte past the bound tells "at the bound" from "over it".
    body = bytes(stream.read(length if length is not None else limit + 1))
    environ['wsgi.input'] = io.BytesIO(body)
    if len(body) > limit:
        raise TooLarge()
    return body


def decode(body: bytes, content_type: str) -> Any:
    """The JSON document Ironic will parse, or None if it parses none.

    Decoded with the request's charset, as Ironic's request object does,
    so that no body reads differently here and there.
    """
    match = _CHARSET.search(content_type or '')
    charset = match.group(1).strip('"').strip() if match else 'UTF-8'
    try:
        return json.loads(body.decode(charset or 'UTF-8'))
    except (LookupError, ValueError):
        return None  # Ironic refuses it itself


def _first_token(pointer: Any) -> str | None:
    """The top-level member a JSON pointer names; '' for the root."""
    if not isinstance(pointer, str):
        return None
    if pointer == '':
        return ''
    head = pointer[1:].split('/', 1)[0]
    return head.replace('~1', '/').replace('~0', '~')


def touches(patch: list[Any], field: str = FIELD) -> bool:
    """Whether any operation may write or read ``field`` (or the root)."""
    for op in patch:
        if not isinstance(op, dict):
            continue
        for key in ('path', 'from'):
            if key in op and _first_token(op[key]) in (field, ''):
                return True
    return False


def patched(
    patch: list[Any], node: dict[str, Any], apply: PatchApplier
) -> Any:
    """``node[FIELD]`` once Ironic has applied the patch.

    Operations without ``from`` change a member only at or under their
    own path, so those on other members are left out: they cannot change
    ``extra``, and the node as the API shows it may lack members of
    Ironic's internal copy that they name. ``copy`` and ``move`` (which
    Ironic 29 to 39 refuse anyway) read other members: the whole patch is
    applied to the node as shown.

    :raises: PatchFailed when the patch does not apply.
    """
    if any(isinstance(op, dict) and 'from' in op for op in patch):
        result = apply(node, patch)
    else:
        mine = [
            op
            for op in patch
            if not isinstance(op, dict)
            or _first_token(op.get('path')) in (FIELD, '')
        ]
        result = apply({FIELD: node.get(FIELD)}, mine)
    return result.get(FIELD) if isinstance(result, dict) else None


def _label(value: Any) -> str:
    """A node's name for an error message (the input may be hostile)."""
    if isinstance(value, str) and 0 < len(value) <= 64 and value.isprintable():
        return value
    return 'in request' if value is None else tags.quote(value)


def check_extra(extra: Any, key: str, node: str) -> str | None:
    """What is wrong with the tags in ``extra``, or None."""
    # The message names the node and key as the node tag cache's does.
    try:
        tags.parse_tags(_value(extra, key), 'node %s extra.%s' % (node, key))
    except exception.InvalidTag as exc:
        return str(exc)
    return None


def _value(extra: Any, key: str) -> Any:
    return extra.get(key) if isinstance(extra, dict) else None


def check_create(document: Any, key: str) -> str | None:
    """What is wrong with a node create body's tags, or None."""
    if not isinstance(document, dict):
        return None  # Ironic refuses it itself
    node = _label(document.get('name') or document.get('uuid'))
    return check_extra(document.get(FIELD), key, node)


def check_update(before: Any, after: Any, key: str, node: str) -> str | None:
    """What is wrong with the tags an update stores, or None.

    A value the update leaves as it was is not refused, even if bad
    (stored before the plugin checked): the node is already placed as
    untagged, and unrelated edits must stay possible.
    """
    if _value(before, key) == _value(after, key):
        return None
    return check_extra(after, key, _label(node))


def error_body(reason: str, faultcode: str = 'Client') -> bytes:
    """An error in the shape of Ironic's own.

    :param faultcode: 'Client' for the caller's mistake, 'Server' when
        the fault is on our side (as Ironic's own 5xx answers say).
    """
    fault = json.dumps(
        {'faultcode': faultcode, 'faultstring': reason, 'debuginfo': None}
    )
    return json.dumps({'error_message': fault}).encode()


def respond_json(
    status: str,
    body: bytes,
    start_response: Callable[..., Any],
    headers: Sequence[tuple[str, str]] = (),
) -> list[bytes]:
    """Start a JSON response of ``body`` (already encoded)."""
    start_response(
        status,
        [
            *headers,
            ('Content-Type', 'application/json'),
            ('Content-Length', str(len(body))),
        ],
    )
    return [body]


def refuse(
    status: str,
    reason: str,
    start_response: Callable[..., Any],
    faultcode: str = 'Client',
    headers: Sequence[tuple[str, str]] = (),
) -> list[bytes]:
    """Answer ``status`` with ``reason`` in Ironic's error format."""
    return respond_json(
        status, error_body(reason, faultcode), start_response, headers
    )


def read_node(
    app: WSGIApp, environ: dict[str, Any], path: str
) -> dict[str, Any] | None:
    """The node as the wrapped application shows it to this caller.

    A GET with the request's own headers, so Ironic authenticates,
    authorizes and looks the node up as it will for the update itself.
    None when that read is refused or fails: Ironic then answers the
    update too. No ``fields`` filter: API 1.1 (no version header) has
    none, and every version shows ``extra``.
    """
    answer = subrequest.get(app, environ, path)
    node = answer.json() if answer.ok else None
    return node if isinstance(node, dict) and FIELD in node else None


class Door:
    """WSGI middleware refusing node creates and updates that would store
    bad affinity tags (400), and their bodies above the bound (413)."""

    def __init__(
        self,
        app: WSGIApp,
        key: Callable[[], str],
        max_body: Callable[[], int],
        apply: PatchApplier,
        creating: Creating | None = None,
    ) -> None:
        """:param key: the ``extra`` key holding the tags, read per request.
        :param max_body: the body bound in bytes, read per request.
        :param apply: applies a JSON patch as Ironic does.
        :param creating: given a node create's body (its tags checked),
            what holds while Ironic handles it, so that the node is
            placed by those tags before its row exists."""
        self.app = app
        self.key = key
        self.max_body = max_body
        self.apply = apply
        self.creating = creating

    def __call__(
        self, environ: dict[str, Any], start_response: Callable[..., Any]
    ) -> Iterable[bytes]:
        found = route(
            environ.get('REQUEST_METHOD', ''), environ.get('PATH_INFO', '')
        )
        if found is None:
            return self.app(environ, start_response)
        limit = self.max_body()
        try:
            body = read_body(environ, limit)
        except TooLarge:
            # Refused here rather than left to Ironic: Ironic bounds only
            # bodies declared JSON (Ironic 29 none at all), and a body
            # not read whole cannot be checked.
            return refuse(
                '413 Request Entity Too Large',
                _('Request body is larger than %d bytes') % limit,
                start_response,
            )
        error = self._check(found, environ, body)
        if error is not None:
            return refuse('400 Bad Request', error, start_response)
        if found.create and self.creating is not None and body:
            document = decode(body, environ.get('CONTENT_TYPE', ''))
            if isinstance(document, dict):
                with self.creating(document):
                    # Drained inside: the creation is routed (and its
                    # answer made) while the application is iterated.
                    return [
                        subrequest.drain(self.app(environ, start_response))
                    ]
        return self.app(environ, start_response)

    def _check(
        self, found: Route, environ: dict[str, Any], body: bytes
    ) -> str | None:
        if not body:
            return None
        document = decode(body, environ.get('CONTENT_TYPE', ''))
        if found.create:
            return check_create(document, self.key())
        if not isinstance(document, list) or not touches(document):
            return None
        node = read_node(self.app, environ, found.node_path)
        if node is None:
            return None
        try:
            after = patched(document, node, self.apply)
        except PatchFailed:
            return None  # Ironic refuses it with its own message
        return check_update(node.get(FIELD), after, self.key(), found.ident)
