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

"""What the affinity resources answer, from this API process's own
placement state: the members, active conductors and engine its ring
routes requests by (see :mod:`ironic_affinity.integration.api.affinity_api`
for who may ask).
"""

import datetime
import time
from typing import Any

from oslo_config import cfg
import sqlalchemy as sa

from ironic_affinity import exception
from ironic_affinity import profile
from ironic_affinity import report
from ironic_affinity import report_group
from ironic_affinity._i18n import _
from ironic_affinity.integration import process_services
from ironic_affinity.integration.data import live
from ironic_affinity.integration.node_tags import node_facts
from ironic_affinity.membership import backend
from ironic_affinity.membership import view_snapshot


def _membership(
    conf: cfg.ConfigOpts, snapshot: view_snapshot.Snapshot
) -> dict[str, Any]:
    # From the view itself, not the placement state's copy of it: a
    # failed read changes no member, so it rebuilds no state.
    age = snapshot.age()
    return {
        'backend': backend.redact(backend.backend_url(conf)),
        'group': conf.affinity.group_name,
        'readable': not snapshot.stale,
        'error': snapshot.error,
        'age_seconds': None if age is None else round(age, 3),
    }


def _created_at(text: Any) -> int | None:
    """Ironic's ``created_at`` of a node (ISO 8601), as published."""
    if not isinstance(text, str):
        return None
    try:
        found = datetime.datetime.fromisoformat(text.replace('Z', '+00:00'))
    except ValueError:
        return None
    return node_facts.created_seconds(found)


def node_affinity(
    conf: cfg.ConfigOpts,
    services: process_services.ProcessServices,
    node: dict[str, Any],
) -> dict[str, Any]:
    """A node's affinity, from the node as Ironic showed it."""
    state = services.states.current()
    uuid = str(node['uuid'])
    tags_error = None
    try:
        found = node_facts.tags_from_extra(
            node.get('extra') or {}, conf.affinity.node_tags_key, uuid
        )
    except (exception.InvalidTag, ValueError) as exc:
        # Placed as untagged, as the ring places it.
        found = frozenset()
        tags_error = str(exc)
    driver = str(node.get('driver') or '')
    group = str(node.get('conductor_group') or '').lower()
    # Named by uuid, as the ring and the placement under capacity know
    # nodes; the name is shown.
    request = profile.NodeRequest(
        name=uuid,
        tags=found,
        uuid=uuid,
        driver=driver,
        conductor_group=group,
        created_at=_created_at(node.get('created_at')),
    )
    placer = state.placements[True]
    computed = services.capacity.current(placer, True)
    result = report.explain(
        placer.conductors,
        request,
        settled=None if computed is None else computed.settled,
        now=time.time(),
    )
    result.update(
        node=node.get('name') or uuid,
        uuid=uuid,
        driver=driver,
        conductor_group=group,
        # What Ironic itself reports: differs from 'conductor' while
        # this process's view moves, and while the node is on Ironic's
        # ring (below).
        ironic_conductor=node.get('conductor'),
        tags_error=tags_error,
        not_members=sorted(
            state.hosts(driver, group, True) - state.members.members.keys()
        ),
        membership=_membership(conf, services.view.snapshot()),
    )
    # Between Ironic's ring and affinity placement: while the node is on
    # Ironic's side, 'ironic_conductor' is where it is, and the rest
    # explains where affinity will put it.
    switches = state.agreement.adoption
    now = time.time()
    result.update(
        placement=report_group.switching(state.agreement, now),
        side=switches.side_of(request, now),
        switch_moves=[
            {'from': m.source, 'to': m.target, 'at': round(m.at, 3)}
            for m in switches.pending_of(request, now)
        ],
    )
    return result


def deployment_affinity(
    conf: cfg.ConfigOpts, services: process_services.ProcessServices
) -> dict[str, Any]:
    """The members with their node counts, orphans and nodes with one
    possible conductor: ``ironic-affinity check`` and ``members``, as
    this API process sees them."""
    snapshot = services.states.current().members
    try:
        deployment = live.read(conf, snapshot, services.database)
    except sa.exc.SQLAlchemyError as exc:
        raise exception.AffinityError(
            _("cannot read Ironic's database: %s") % exc
        ) from exc
    now = time.time()
    loads = report.plan(deployment.conductors, deployment.nodes, now=now)[
        'loads'
    ]
    members = report_group.members(
        snapshot.members,
        '',
        '',
        rejected=snapshot.rejected,
        held=snapshot.held,
        now=now,
        # Fresh from the view: what a member runs rebuilds no state.
        runs=services.view.snapshot().runs,
    )['members']
    for member in members:
        # None for a member Ironic does not list as active.
        member['nodes'] = loads.get(member['name'])
    checked = report.check(deployment.conductors, deployment.nodes)
    return {
        'membership': dict(
            _membership(conf, services.view.snapshot()),
            rejected=dict(snapshot.rejected),
        ),
        'members': members,
        'not_members': sorted(deployment.not_members),
        'conductors': checked['conductors'],
        'nodes': checked['nodes'],
        'orphans': checked['orphans'],
        'single_conductor': checked['single_conductor'],
        'over_capacity': checked['over_capacity'],
        'untagged': checked['untagged'],
        'unused_tags': checked['unused_tags'],
        'bad_tags': dict(sorted(deployment.bad_tags.items())),
        'placement': report_group.switching(
            deployment.agreement,
            now,
            deployment.nodes,
            # While Ironic's ring places nodes, this process's ring says
            # where each is, as for the placement metrics.
            live.takeovers_pending(
                deployment, now, process_services.RING_LOOKUP
            ),
        ),
    }
