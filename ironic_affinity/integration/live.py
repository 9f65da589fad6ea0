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

Nodes and Ironic's active conductors come straight from Ironic's
database (read-only, a few columns, no Ironic import needed), members
from the coordination backend; the result is fed to the same engine and
reports as the offline commands, through the same candidate rule as the
ring manager.
"""

import collections
import dataclasses
import datetime
from typing import Any

from oslo_config import cfg
import sqlalchemy as sa

from ironic_affinity import candidates
from ironic_affinity import exception
from ironic_affinity import profile
from ironic_affinity._i18n import _
from ironic_affinity.integration import node_tags
from ironic_affinity.membership import backend
from ironic_affinity.membership import service
from ironic_affinity.membership import view

_NODES = node_tags.NODES
_CONDUCTORS = sa.Table(
    'conductors',
    node_tags.METADATA,
    sa.Column('id', sa.Integer),
    sa.Column('hostname', sa.String(255)),
    sa.Column('conductor_group', sa.String(255)),
    sa.Column('online', sa.Boolean),
    sa.Column('updated_at', sa.DateTime),
)
_HARDWARE = sa.Table(
    'conductor_hardware_interfaces',
    node_tags.METADATA,
    sa.Column('conductor_id', sa.Integer),
    sa.Column('hardware_type', sa.String(255)),
)


@dataclasses.dataclass(frozen=True)
class Deployment:
    conductors: tuple[profile.ConductorProfile, ...]
    nodes: tuple[profile.NodeRequest, ...]
    # Active in Ironic but not in the group: no node goes to them.
    not_members: frozenset[str]
    bad_tags: dict[str, str]


def _active(connection: Any, timeout: int) -> dict[str, set[str]]:
    limit = datetime.datetime.now(datetime.timezone.utc).replace(
        tzinfo=None
    ) - datetime.timedelta(seconds=timeout)
    query = (
        sa.select(
            _CONDUCTORS.c.hostname,
            _CONDUCTORS.c.conductor_group,
            _HARDWARE.c.hardware_type,
        )
        .join(_HARDWARE, _HARDWARE.c.conductor_id == _CONDUCTORS.c.id)
        .where(_CONDUCTORS.c.online.is_(True))
        .where(_CONDUCTORS.c.updated_at >= limit)
    )
    active: dict[str, set[str]] = collections.defaultdict(set)
    for host, group, hardware_type in connection.execute(query):
        active['%s:%s' % (group or '', hardware_type)].add(host)
    return dict(active)


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


def read(conf: cfg.ConfigOpts, snapshot: view.Snapshot) -> Deployment:
    """The deployment as the ring manager would see it now.

    :raises: AffinityError when the database is not configured.
    """
    if not conf.database.connection:
        raise exception.AffinityError(
            '[database]connection is not set: give Ironic\'s configuration '
            'with --config-file'
        )
    key = conf.affinity.node_tags_key
    engine = sa.create_engine(conf.database.connection)
    nodes = []
    bad = {}
    try:
        with engine.connect() as connection:
            active = _active(connection, conf.conductor.heartbeat_timeout)
            rows = connection.execute(
                sa.select(
                    _NODES.c.uuid,
                    _NODES.c.name,
                    _NODES.c.driver,
                    _NODES.c.conductor_group,
                    _NODES.c.extra,
                )
            ).all()
    finally:
        engine.dispose()
    for uuid, name, driver, group, extra in rows:
        try:
            found = node_tags.tags_from_extra(extra, key, uuid)
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
            )
        )
    return Deployment(
        tuple(candidates.live_profiles(snapshot.members, active)),
        tuple(nodes),
        candidates.not_members(snapshot.members, active),
        bad,
    )
