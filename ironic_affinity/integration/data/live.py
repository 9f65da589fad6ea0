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

"""Reading a live deployment for the operator commands.

Nodes, Ironic's active conductors and who last took each node over
come straight from Ironic's database (read-only, through
:mod:`ironic_db`, which counts conductors active exactly as Ironic does;
no Ironic import needed), members from
the coordination backend; the result is fed to the same engine and
reports as the offline commands, through the same candidate rule as the
ring manager.
"""

from collections.abc import Callable
from collections.abc import Iterable
from collections.abc import Mapping
import dataclasses

from oslo_config import cfg
import sqlalchemy as sa

from ironic_affinity import active_members
from ironic_affinity import adoption
from ironic_affinity import exception
from ironic_affinity import placement
from ironic_affinity import profile
from ironic_affinity import takeovers
from ironic_affinity._i18n import _
from ironic_affinity.integration.data import ironic_db
from ironic_affinity.integration.node_tags import node_facts
from ironic_affinity.membership import backend
from ironic_affinity.membership import service
from ironic_affinity.membership import view_snapshot


@dataclasses.dataclass(frozen=True)
class Deployment:
    conductors: tuple[profile.ConductorProfile, ...]
    nodes: tuple[profile.NodeRequest, ...]
    # Active in Ironic but not in the group: no node goes to them.
    not_members: frozenset[str]
    bad_tags: dict[str, str]
    # Between Ironic's ring and affinity placement (ironic_affinity.adoption).
    agreement: adoption.Agreement
    # The nodes Ironic's takeover considers, by uuid, with the conductor
    # that last took each over (ironic_db.taken_by); read by read() only.
    taken_by: Mapping[str, str | None] = dataclasses.field(
        default_factory=dict
    )


def load(conf: cfg.ConfigOpts, timeout: float) -> Deployment:
    r"""Read the group (within \`\`timeout\`\` seconds) and the database.

    :raises: AffinityError, in one line, when either cannot be read.
    """
    snapshot = service.member_view(conf).refresh_within(timeout)
    if snapshot.stale:
        raise exception.AffinityError(
            _('cannot read the membership group on %(url)s: %(error)s')
            % {
                'url': backend.redact(backend.backend_url(conf)),
                'error': snapshot.error,
            }
        )
    try:
        return read(conf, snapshot)
    except sa.exc.SQLAlchemyError as exc:
        raise exception.AffinityError(
            _("cannot read Ironic's database: %s") % exc
        ) from exc


def from_memory(
    conf: cfg.ConfigOpts,
    snapshot: view_snapshot.Snapshot,
    database: ironic_db.IronicDatabase,
    nodes: Iterable[tuple[str, node_facts.NodeFacts]],
) -> Deployment:
    """The deployment as :func:`read` gives it, with the nodes as a tag
    cache holds them: only the conductors are read from the database,
    a few rows, so that a process that places every node (the placement
    metrics) does not read the nodes table. Nodes are named by uuid.
    """
    with database.engine.connect() as connection:
        active = ironic_db.active_conductors(
            connection, conf.conductor.heartbeat_timeout, database.sqlite
        )
    return _deployment(snapshot, active, node_facts.requests(nodes), {})


def _deployment(
    snapshot: view_snapshot.Snapshot,
    active: dict[str, frozenset[str]],
    nodes: list[profile.NodeRequest],
    bad: dict[str, str],
    taken_by: Mapping[str, str | None] | None = None,
) -> Deployment:
    """The members that Ironic lists as active, and the nodes."""
    return Deployment(
        tuple(active_members.profiles(snapshot.members, active)),
        tuple(nodes),
        active_members.missing_from_group(snapshot.members, active),
        bad,
        active_members.agreement(snapshot.members, active),
        {} if taken_by is None else taken_by,
    )


def read(
    conf: cfg.ConfigOpts,
    snapshot: view_snapshot.Snapshot,
    database: ironic_db.IronicDatabase | None = None,
) -> Deployment:
    """The deployment as the ring manager would see it now.

    :param database: the process's own; by default one for this read.
    :raises: AffinityError when the database is not configured.
    """
    if database is None and not conf.database.connection:
        raise exception.AffinityError(
            '[database]connection is not set: give Ironic\'s configuration '
            'with --config-file'
        )
    key = conf.affinity.node_tags_key
    own = database is None
    if database is None:
        database = ironic_db.IronicDatabase(conf.database.connection)
    try:
        with database.engine.connect() as connection:
            # The same rule as Ironic's own, SQLite and timeout included:
            # the commands must show what the ring manager does.
            active = ironic_db.active_conductors(
                connection,
                conf.conductor.heartbeat_timeout,
                database.sqlite,
            )
            rows = [
                row
                for batch in ironic_db.node_batches(
                    connection,
                    (
                        'uuid',
                        'name',
                        'driver',
                        'conductor_group',
                        'extra',
                        'created_at',
                    ),
                )
                for row in batch
            ]
            taken_by = ironic_db.taken_by(connection)
    finally:
        if own:
            database.dispose()
    nodes = []
    bad = {}
    for uuid, name, driver, group, extra, created_at in rows:
        try:
            found = node_facts.tags_from_extra(extra, key, uuid)
        except (exception.InvalidTag, ValueError) as exc:
            found = frozenset()
            bad[uuid] = str(exc)
        nodes.append(
            profile.NodeRequest(
                name=name or uuid,
                tags=found,
                uuid=uuid,
                driver=driver,
                conductor_group=(group or '').lower(),
                created_at=node_facts.created_seconds(created_at),
            )
        )
    return _deployment(snapshot, active, nodes, bad, taken_by)


def takeovers_pending(
    deployment: Deployment,
    now: float,
    ring_lookup: Callable[[profile.NodeRequest], str | None] | None = None,
) -> int | None:
    """Nodes that await Ironic's takeover (:mod:`ironic_affinity.takeovers`),
    or None where it is not known where every node is.

    While every node is placed by affinity, a node is where placement by
    affinity puts it at ``now``. Otherwise Ironic's own ring places some,
    and only ``ring_lookup`` (a process's ring, inside Ironic) says where.

    :param ring_lookup: the node's conductor as the process's ring
        answers it, None for none.
    """
    switches = deployment.agreement.adoption
    nodes = deployment.nodes
    if switches.all_on(now) == adoption.AFFINITY:
        answers = placement.Placement(deployment.conductors).answer_all(
            nodes, now, moves=False
        )
        conductors = [answer.conductor for answer in answers]
    elif ring_lookup is not None:
        conductors = [ring_lookup(node) for node in nodes]
    else:
        return None
    placed = {
        node.uuid or node.name: conductor
        for node, conductor in zip(nodes, conductors, strict=True)
    }
    return takeovers.pending(placed, deployment.taken_by)
