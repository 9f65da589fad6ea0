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

"""WSGI middleware noting each node that Ironic's API has just written.

Only answers of success are noted: Ironic answers a create or update
once the conductor has committed it, and a delete once the row is gone,
so the process that reads the node's row after the notice finds the
new contents (see ironic_affinity.integration.node_tags.change_notices).
A create or update is noted by the uuid of the answer's node, which a
rename does not change; a delete by the path's uuid or name.
"""

from collections.abc import Callable
from collections.abc import Iterable
import json
from typing import Any

from ironic_affinity.integration.api import door
from ironic_affinity.integration.api import subrequest

# Node documents are a few KB; an answer far larger is not one.
MAX_ANSWER = 1024 * 1024


def _uuid_in(body: bytes) -> str | None:
    try:
        document = json.loads(body)
    except ValueError:
        return None
    found = document.get('uuid') if isinstance(document, dict) else None
    return found if isinstance(found, str) and found else None


class WriteNotices:
    """Calls ``note(node)`` after every successful node write."""

    def __init__(self, app: door.WSGIApp, note: Callable[[str], None]):
        self.app = app
        self.note = note

    def __call__(
        self, environ: dict[str, Any], start_response: Callable[..., Any]
    ) -> Iterable[bytes]:
        method = environ.get('REQUEST_METHOD', '')
        ident = door.written_node(method, environ.get('PATH_INFO', ''))
        if ident is None:
            return self.app(environ, start_response)
        status: list[str] = []

        def remember(value: str, headers: Any, *args: Any) -> Any:
            status.append(value)
            return start_response(value, headers, *args)

        # Read the answer whole before looking at its status: a WSGI
        # application may call start_response only once iterated. Node
        # writes answer one node's document at most.
        body = subrequest.drain(self.app(environ, remember))
        if status and status[0].startswith('2'):
            found = None
            if method != 'DELETE' and len(body) <= MAX_ANSWER:
                found = _uuid_in(body)
            if found or ident:
                self.note(found or ident)
        return [body]
