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

"""``GET /v1/nodes/{node_ident}/affinity`` and ``GET /v1/affinity``.

Served by our middleware, which wraps Ironic's application from the
outside, before its authentication. Nothing is answered on our own
authority: each request is first put to Ironic in the caller's name
(see :mod:`ironic_affinity.integration.api.subrequest`), and answered only
when Ironic lets the caller read what the answer is about:

* a node's affinity when the caller may read the node, ``GET
  /v1/nodes/{node_ident}`` (policy ``baremetal:node:get``, with its
  project scoping; a name or a UUID, as Ironic looks it up), **and** list
  the conductors (below): the answer names every conductor with its tags
  and its verdict on the node, which Ironic's default policy shows only
  to system readers, not to the readers of the project owning the node;
* the deployment's (members, node counts, orphans) when the caller may
  list conductors, ``GET /v1/conductors`` (``baremetal:conductor:get``):
  the answer names every conductor and nodes of every project.

Any other answer of Ironic's (401, 403, 404, 406...) goes back to the
caller as Ironic gave it, so errors keep Ironic's format. Plain WSGI: the
answers themselves come from callables the middleware binds.
"""

from collections.abc import Callable
from collections.abc import Iterable
import dataclasses
import json
from typing import Any
import urllib.parse

from ironic_affinity import exception
from ironic_affinity._i18n import _
from ironic_affinity.integration.api import door
from ironic_affinity.integration.api import subrequest

# The API version our reads are made at, whatever the caller's: the first
# with a node's conductor and conductor group and with /v1/conductors
# (Ironic 12.1, Stein), so on every supported release.
READ_VERSION = '1.49'

NodeAnswer = Callable[[dict[str, Any]], dict[str, Any]]
DeploymentAnswer = Callable[[], dict[str, Any]]


@dataclasses.dataclass(frozen=True)
class Route:
    #: The node as the caller named it; '' for the deployment's route.
    ident: str


def route(path: str) -> Route | None:
    """Which of our two resources ``path`` is, or None.

    Empty segments are ignored, as Ironic's router does.
    """
    segments = [s for s in path.split('/') if s]
    if segments == ['v1', 'affinity']:
        return Route(ident='')
    if (
        len(segments) == 4
        and segments[:2] == ['v1', 'nodes']
        and segments[3] == 'affinity'
    ):
        return Route(ident=urllib.parse.unquote(segments[2]))
    return None


class AffinityAPI:
    """WSGI middleware serving the two affinity resources."""

    def __init__(
        self,
        app: subrequest.WSGIApp,
        ironic: subrequest.WSGIApp,
        node_answer: NodeAnswer,
        deployment_answer: DeploymentAnswer,
    ) -> None:
        """:param app: what every other request goes to.
        :param ironic: Ironic's own application, asked in the caller's
            name.
        :param node_answer: a node's affinity, from the node as Ironic
            shows it at API version READ_VERSION.
        :param deployment_answer: the deployment's affinity.
        """
        self.app = app
        self.ironic = ironic
        self.node_answer = node_answer
        self.deployment_answer = deployment_answer

    def __call__(
        self, environ: dict[str, Any], start_response: Callable[..., Any]
    ) -> Iterable[bytes]:
        found = route(environ.get('PATH_INFO', ''))
        if found is None:
            return self.app(environ, start_response)
        if environ.get('REQUEST_METHOD') != 'GET':
            return door.refuse(
                '405 Method Not Allowed',
                _('The affinity resources are read-only'),
                start_response,
                headers=[('Allow', 'GET')],
            )
        # The node first: a caller who may not see it learns nothing of
        # it (Ironic's 404), not even through a refusal of the second.
        paths = ['/v1/conductors']
        if found.ident:
            quoted = urllib.parse.quote(found.ident, safe='')
            paths.insert(0, '/v1/nodes/%s' % quoted)
        answers = []
        for path in paths:
            answers.append(
                subrequest.get(self.ironic, environ, path, READ_VERSION)
            )
            if not answers[-1].ok:
                return subrequest.replay(answers[-1], start_response)
        allowed = answers[0]
        try:
            if found.ident:
                node = allowed.json()
                if not isinstance(node, dict) or 'uuid' not in node:
                    raise exception.AffinityError(
                        _('Ironic answered the node read with no node')
                    )
                answer = self.node_answer(node)
            else:
                answer = self.deployment_answer()
        except exception.AffinityError as exc:
            # Membership or the database cannot be read now: the
            # placement layer is what is unavailable, not the request.
            return door.refuse(
                '503 Service Unavailable',
                str(exc),
                start_response,
                faultcode='Server',
            )
        body = json.dumps(answer, sort_keys=True).encode()
        return door.respond_json('200 OK', body, start_response)
