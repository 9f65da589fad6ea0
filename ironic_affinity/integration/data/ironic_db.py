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

"""Ironic's database, read-only: the one module that knows its schema.

Ironic owns the schema; this module mirrors only the columns the project
reads, so that nothing here needs Ironic installed (the live operator
commands run without it) and a schema change is found in one place.

Ironic's active conductors are computed here exactly as Ironic computes
them for its hash ring (the same rule in Ironic 29 through 39): every
hardware type a conductor registered, of conductors marked online and,
unless Ironic runs on SQLite or ``[conductor]heartbeat_timeout`` is 0 or
less, whose last heartbeat is no older than that timeout. On SQLite
Ironic stops heartbeats altogether, so it cannot use them there.

The nodes that Ironic's periodic takeover considers are selected here
as Ironic selects them (see :func:`taken_by`).
"""

from collections.abc import Iterator
from collections.abc import Sequence
import datetime
import time
from typing import Any

import sqlalchemy as sa

METADATA = sa.MetaData()

NODES = sa.Table(
    'nodes',
    METADATA,
    sa.Column('uuid', sa.String(36)),
    sa.Column('name', sa.String(255)),
    sa.Column('driver', sa.String(255)),
    sa.Column('conductor_group', sa.String(255)),
    sa.Column('extra', sa.Text),
    sa.Column('created_at', sa.DateTime),
    sa.Column('updated_at', sa.DateTime),
    sa.Column('provision_state', sa.String(15)),
    sa.Column('maintenance', sa.Boolean),
    sa.Column('reservation', sa.String(255)),
    sa.Column('parent_node', sa.String(36)),
    # conductors.id of the conductor that last took the node over.
    sa.Column('conductor_affinity', sa.Integer),
)

CONDUCTORS = sa.Table(
    'conductors',
    METADATA,
    sa.Column('id', sa.Integer, primary_key=True),
    sa.Column('hostname', sa.String(255), nullable=False),
    sa.Column(
        'conductor_group', sa.String(255), nullable=False, server_default=''
    ),
    sa.Column('online', sa.Boolean),
    sa.Column('updated_at', sa.DateTime),
)

HARDWARE_INTERFACES = sa.Table(
    'conductor_hardware_interfaces',
    METADATA,
    sa.Column('conductor_id', sa.Integer, nullable=False),
    sa.Column('hardware_type', sa.String(255), nullable=False),
)

#: Rows per fetch from the server-side cursor of a node read.
BATCH = 1000

#: The provision state of a deployed node, as Ironic writes it.
ACTIVE = 'active'


def is_sqlite(url: str) -> bool:
    """Whether Ironic, configured with this URL, considers it SQLite.

    Ironic's own test is a substring match on the whole URL, not the
    dialect name; the same test here keeps both sides in agreement.
    """
    return 'sqlite' in url.lower()


def utcnow() -> datetime.datetime:
    """Now in UTC, naive, as Ironic stamps its rows."""
    return datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)


def active_conductors(
    connection: sa.Connection,
    heartbeat_timeout: int,
    sqlite: bool,
    use_groups: bool = True,
    now: datetime.datetime | None = None,
) -> dict[str, frozenset[str]]:
    """Ironic's active conductors, by hardware type: the first half of
    :func:`live_conductors`."""
    return live_conductors(
        connection, heartbeat_timeout, sqlite, use_groups, now
    )[0]


def live_conductors(
    connection: sa.Connection,
    heartbeat_timeout: int,
    sqlite: bool,
    use_groups: bool = True,
    now: datetime.datetime | None = None,
) -> tuple[dict[str, frozenset[str]], frozenset[str]]:
    """Ironic's active conductors by hardware type, and the conductors
    Ironic counts as live that list no hardware type, in one statement.

    A conductor that starts over its own row (after SIGUSR1 kept it
    registered) deletes its hardware interfaces and writes them again in
    two transactions: between them it is in the second set, though it
    never stopped. Two statements could each miss it, one before its new
    rows and one after.

    :param heartbeat_timeout: Ironic's ``[conductor]heartbeat_timeout``.
    :param sqlite: whether Ironic runs on SQLite (see :func:`is_sqlite`).
    :param use_groups: keys ``'<conductor_group>:<hardware_type>'`` if
        true, ``'<hardware_type>'`` if not, as Ironic's own switch.
    :param now: the current UTC time, naive; the clock by default.
    :returns: (key -> hostnames of the conductors running it, hostnames
        of the live conductors with no hardware type).
    """
    conductors = CONDUCTORS.c
    query = sa.select(
        conductors.hostname,
        conductors.conductor_group,
        HARDWARE_INTERFACES.c.hardware_type,
    ).select_from(
        CONDUCTORS.outerjoin(
            HARDWARE_INTERFACES,
            HARDWARE_INTERFACES.c.conductor_id == conductors.id,
        )
    )
    query = _live(query, heartbeat_timeout, sqlite, now)
    found: dict[str, set[str]] = {}
    registering = set()
    # One row per registered interface: many rows per conductor and type.
    for hostname, group, hardware_type in connection.execute(query):
        if hardware_type is None:
            registering.add(hostname)
            continue
        key = '%s:%s' % (group, hardware_type) if use_groups else hardware_type
        found.setdefault(key, set()).add(hostname)
    active = {key: frozenset(hosts) for key, hosts in found.items()}
    return active, frozenset(registering)


def _live(
    query: sa.Select[Any],
    heartbeat_timeout: int,
    sqlite: bool,
    now: datetime.datetime | None,
) -> sa.Select[Any]:
    """``query`` limited to the conductors Ironic counts as live."""
    conductors = CONDUCTORS.c
    query = query.where(conductors.online.is_(True))
    if not sqlite and heartbeat_timeout > 0:
        limit = (now or utcnow()) - datetime.timedelta(
            seconds=heartbeat_timeout
        )
        query = query.where(conductors.updated_at >= limit)
    return query


def node_batches(
    connection: sa.Connection,
    columns: Sequence[str] = ('uuid', 'extra'),
    since: datetime.datetime | None = None,
    batch: int | None = None,
) -> Iterator[Sequence[sa.Row[Any]]]:
    """Rows of the nodes table, a batch at a time.

    Ironic has no index on ``created_at`` or ``updated_at``: a read
    with ``since`` still scans the whole table on the server, it only
    returns fewer rows.

    :param columns: names of the columns of :data:`NODES` to return.
    :param since: only nodes created or saved at or after this naive UTC
        time, by the stamps of whoever wrote them.
    :param batch: rows per fetch (:data:`BATCH` by default), from a
        server-side cursor where the driver has one.
    """
    query = sa.select(*(NODES.c[name] for name in columns))
    if since is not None:
        query = query.where(
            sa.or_(NODES.c.updated_at >= since, NODES.c.created_at >= since)
        )
    result = connection.execution_options(yield_per=batch or BATCH).execute(
        query
    )
    yield from result.partitions()


def nodes_by_ident(
    connection: sa.Connection,
    idents: Sequence[str],
    columns: Sequence[str] = ('uuid', 'extra'),
) -> list[sa.Row[Any]]:
    """Columns of the nodes named by uuid or by name.

    Both columns carry a unique index in Ironic's schema, so this reads
    one row per node found, whatever the size of the table.

    :param columns: names of the columns of :data:`NODES` to return.
    """
    if not idents:
        return []
    query = sa.select(*(NODES.c[name] for name in columns)).where(
        sa.or_(NODES.c.uuid.in_(idents), NODES.c.name.in_(idents))
    )
    return list(connection.execute(query))


def nodes_by_uuid(
    connection: sa.Connection, uuid: str, columns: Sequence[str]
) -> list[sa.Row[Any]]:
    """Columns of the node with this uuid (none or one row), by Ironic's
    unique index on uuid: never a node of that name."""
    query = sa.select(*(NODES.c[name] for name in columns)).where(
        NODES.c.uuid == uuid
    )
    return list(connection.execute(query))


def taken_by(
    connection: sa.Connection, batch: int | None = None
) -> dict[str, str | None]:
    """The nodes Ironic's periodic takeover considers, by uuid, with the
    hostname of the conductor that last took each over.

    Ironic's conductors (29 through 39) take over, in
    ``_sync_local_state``, the nodes their ring maps to them among those
    that are ACTIVE, not in maintenance, not reserved and not a child
    node (its node list leaves child nodes out unless asked), when the
    node's ``conductor_affinity`` is not their own id. The same nodes are
    read here, but for the reservation: a lock lasts as long as one task
    on the node, and a locked node still awaits its takeover, which
    Ironic tries again at its next run.

    :param batch: rows per fetch (:data:`BATCH` by default), from a
        server-side cursor where the driver has one.
    :returns: uuid -> hostname, None for a node that no conductor took
        over, or whose conductor Ironic has since deleted (Ironic 39, not
        29, deletes long-offline conductors, clearing the nodes' reference
        first; a foreign key keeps any other).
    """
    nodes = NODES.c
    query = (
        sa.select(nodes.uuid, CONDUCTORS.c.hostname)
        .select_from(
            NODES.outerjoin(
                CONDUCTORS, nodes.conductor_affinity == CONDUCTORS.c.id
            )
        )
        .where(
            nodes.provision_state == ACTIVE,
            nodes.maintenance.is_(False),
            nodes.parent_node.is_(None),
        )
    )
    result = connection.execution_options(yield_per=batch or BATCH).execute(
        query
    )
    return {uuid: hostname for uuid, hostname in result}


def error_text(exc: Exception) -> str:
    """A database error on one line, without the SQL SQLAlchemy appends."""
    driver_error = getattr(exc, 'orig', None)  # a DBAPIError's cause
    text = str(exc if driver_error is None else driver_error)
    return ' '.join(text.split()) or type(exc).__name__


class IronicDatabase:
    """One engine on Ironic's database, and what is read through it."""

    def __init__(self, url: str, pool_size: int = 1) -> None:
        """:param url: Ironic's ``[database]connection``.
        :param pool_size: connections kept open; one more may be opened
            for a moment when they are all in use.
        """
        #: Whether Ironic, on this URL, ignores conductor heartbeats.
        self.sqlite = is_sqlite(url)
        pool: dict[str, Any] = {}
        if sa.engine.make_url(url).get_backend_name() != 'sqlite':
            # SQLite's pools (one connection per thread, or per file)
            # take no sizes.
            pool = {'pool_size': pool_size, 'max_overflow': 1}
        # pre-ping: the database may restart or fail over under a
        # long-lived process; a dead pooled connection is replaced, not
        # handed out.
        self.engine: sa.Engine = sa.create_engine(
            url, pool_pre_ping=True, **pool
        )
        #: time.monotonic() of the last statement or connection through
        #: this engine that failed, whichever reader made it; None if
        #: none has. A reader that was idle through a database outage
        #: learns of it here (see active_source).
        self.failed_at: float | None = None
        # SQLAlchemy calls this for a failed connection attempt too, not
        # only for a failed statement: an outage is seen by either.
        sa.event.listen(self.engine, 'handle_error', self._note_failure)

    def _note_failure(self, context: Any) -> None:
        self.failed_at = time.monotonic()

    def active_conductors(
        self, heartbeat_timeout: int, use_groups: bool = True
    ) -> dict[str, frozenset[str]]:
        """Ironic's active conductors now: see :func:`active_conductors`."""
        with self.engine.connect() as connection:
            return active_conductors(
                connection, heartbeat_timeout, self.sqlite, use_groups
            )

    def live_conductors(
        self, heartbeat_timeout: int
    ) -> tuple[dict[str, frozenset[str]], frozenset[str]]:
        """See :func:`live_conductors`."""
        with self.engine.connect() as connection:
            return live_conductors(connection, heartbeat_timeout, self.sqlite)

    def taken_by(self) -> dict[str, str | None]:
        """The nodes Ironic's takeover considers now: see
        :func:`taken_by`."""
        with self.engine.connect() as connection:
            return taken_by(connection)

    def probe(self) -> bool:
        """Whether the database answers a statement that reads no table.

        A failure is noted in :attr:`failed_at`, as any failure through
        this engine is; nothing is raised.
        """
        try:
            with self.engine.connect() as connection:
                connection.exec_driver_sql('SELECT 1')
        except sa.exc.SQLAlchemyError:
            return False
        return True

    def dispose(self) -> None:
        """Close every pooled connection."""
        self.engine.dispose()
