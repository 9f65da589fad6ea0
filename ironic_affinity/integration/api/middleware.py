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
upgrade check, and refuses bad affinity tags at the door: a node create
or update that would store an ``extra`` affinity value of the wrong
type, outside the tag grammar or too long answers 400 before anything
reaches the database (see ironic_affinity.integration.api.door, which this
binds to Ironic's configuration and JSON-patch library). And it serves
``GET /v1/nodes/{node_ident}/affinity`` and ``GET /v1/affinity`` (see
ironic_affinity.integration.api.affinity_api), to callers Ironic lets read
the node, or list the conductors.
"""

from collections.abc import Callable
from collections.abc import Iterable
import contextlib
from typing import Any

from ironic.conf import CONF
from oslo_config import cfg
from oslo_log import log

from ironic_affinity.integration import process_services
from ironic_affinity.integration.api import affinity_answers
from ironic_affinity.integration.api import affinity_api
from ironic_affinity.integration.api import door
from ironic_affinity.integration.api import json_patch
from ironic_affinity.integration.api import write_notices
from ironic_affinity.integration.node_tags import change_notices
from ironic_affinity.integration.node_tags import fresh_nodes
from ironic_affinity.integration.node_tags import node_facts
from ironic_affinity.integration.ring import loader

LOG = log.getLogger(__name__)

WSGIApp = door.WSGIApp


def tags_key() -> str:
    return str(CONF.affinity.node_tags_key)


def max_body() -> int:
    """Ironic's own bound on JSON bodies ([api]max_json_body_size, in
    KiB; applied by Ironic 32 and later), so that no body Ironic accepts
    is refused here."""
    try:
        return int(CONF.api.max_json_body_size) * 1024
    except cfg.NoSuchOptError:
        return door.DEFAULT_MAX_BODY


# Whatever this process's hash_ring_manager: it is a conductor's vote,
# and an API process follows the deployment's switches either way (a
# switch to affinity happens while API processes still say "stock":
# doc/source/admin/adoption.rst). These three were done only with
# "affinity" until December 2026: after a switch, an API process left at
# "stock" sent no change notices (other processes saw its writes at the
# next full read of the table, 120 s) and, for about a second, placed a
# node it had just created by hashing alone (its uuid looked up before
# its row existed, outside fresh_nodes.creating, is taken as absent):
# likely what the adoption case saw on Ironic 35, two new nodes on
# another conductor in one sample.


def _note_written(node: str) -> None:
    change_notices.note_node_written(CONF, node, loader.enabled_by())
    services = process_services.if_started()
    if services is not None and node_facts.is_uuid(node):
        # This process places the node by its new row at once; the
        # others when the notice has gone round.
        services.node_tags.written(node)


def _creating(
    document: dict[str, Any],
) -> contextlib.AbstractContextManager[None]:
    """While Ironic creates the node of this body (the door has checked
    its tags): this process places it by them."""
    extra = document.get(door.FIELD)
    try:
        found = node_facts.tags_from_extra(extra, tags_key(), 'in request')
    except ValueError:
        return contextlib.nullcontext()  # Ironic refuses the body itself
    driver = document.get('driver')
    group = document.get('conductor_group') or CONF.default_conductor_group
    return fresh_nodes.creating(
        node_facts.NodeFacts(
            driver if isinstance(driver, str) else '',
            group.lower() if isinstance(group, str) else '',
            found,
        )
    )


class AffinityMiddleware:
    """Installs the affinity ring manager; validates node affinity tags."""

    def __init__(self, app: WSGIApp) -> None:
        loader.install('[api]middleware')
        self.app = app
        self.door = door.Door(
            app, tags_key, max_body, json_patch.apply_patch, _creating
        )
        # Outside the door: a write it refuses is no news.
        self.notices = write_notices.WriteNotices(self.door, _note_written)
        # The process's services start at the first affinity request, in
        # the worker: never here, in the parent before the fork.
        self.api = affinity_api.AffinityAPI(
            self.notices,
            app,
            lambda node: affinity_answers.node_affinity(
                CONF, process_services.started(CONF), node
            ),
            lambda: affinity_answers.deployment_affinity(
                CONF, process_services.started(CONF)
            ),
        )
        # Not its hash_ring_manager: API processes follow the conductors'
        # votes (doc/source/admin/adoption.rst).
        LOG.info('ironic-affinity middleware loaded')

    def __call__(
        self, environ: dict[str, Any], start_response: Callable[..., Any]
    ) -> Iterable[bytes]:
        # Lets the upgrade check tell this API from one without us.
        # On the first request of each process, never in __init__:
        # Ironic builds the application in the parent before forking
        # its workers, and a thread of ours busy there (importing the
        # tooz driver, say) at the fork would leave a lock held for
        # ever in the worker.
        change_notices.announce(CONF, loader.enabled_by())
        process_services.mark_api_process()
        return self.api(environ, start_response)
