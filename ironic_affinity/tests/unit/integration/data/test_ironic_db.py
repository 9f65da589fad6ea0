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

"""Ironic's active conductors and node rows, on SQLite, PostgreSQL and
MariaDB.

Every case runs on a SQLite file and on a database of its own on the
local PostgreSQL (IRONIC_AFFINITY_E2E_POSTGRES) and MariaDB
(IRONIC_AFFINITY_MARIADB), each URL without a database name; skipped
when there is none, unless IRONIC_AFFINITY_REQUIRE_SERVERS is set.
PostgreSQL and MySQL/MariaDB are what Ironic runs on (MariaDB under
Kolla-Ansible), where timestamps, booleans and server-side cursors are
the server's own.
"""

import datetime
import os
import time
import uuid

import fixtures
import sqlalchemy as sa

from ironic_affinity.integration.data import ironic_db
from ironic_affinity.tests import base
from ironic_affinity.tests.functional import servers

POSTGRES = os.environ.get(
    'IRONIC_AFFINITY_E2E_POSTGRES', 'postgresql+psycopg2://postgres@127.0.0.1'
)
MARIADB = os.environ.get(
    'IRONIC_AFFINITY_MARIADB', 'mysql+pymysql://root@127.0.0.1:3306'
)
NOW = datetime.datetime(2026, 12, 1, 12, 0, 0)
TIMEOUT = 60


def server_admin(server, own_database='postgres'):
    """An AUTOCOMMIT engine on a local server's own database.

    Called from the test, not from a fixture, so that a skip is a skip.
    """
    try:
        admin = sa.create_engine(
            '%s/%s' % (server, own_database), isolation_level='AUTOCOMMIT'
        )
    except ImportError as exc:  # no driver in this environment
        servers.unavailable('no driver for %s: %s' % (server, exc))
    try:
        with admin.connect():
            pass
    except sa.exc.OperationalError as exc:
        admin.dispose()
        servers.unavailable('no server at %s: %s' % (server, exc))
    return admin


class ScratchDatabase(fixtures.Fixture):
    """A database of its own on a local server; ``url`` names it."""

    def __init__(self, admin: sa.Engine, server: str, drop: str) -> None:
        """:param drop: the server's statement that drops database %s
        with its connections."""
        super().__init__()
        self.admin = admin
        self.server = server
        self.drop = drop

    def _setUp(self) -> None:
        name = 'ironic_affinity_unit_%s' % uuid.uuid4().hex[:10]
        with self.admin.connect() as connection:
            connection.execute(sa.text('CREATE DATABASE %s' % name))
        self.addCleanup(self.admin.dispose)
        self.addCleanup(self._drop, name)
        self.url = '%s/%s' % (self.server, name)

    def _drop(self, name: str) -> None:
        with self.admin.connect() as connection:
            connection.execute(sa.text(self.drop % name))


class _Cases:
    """The cases, on the database ``url()`` names."""

    def url(self):
        raise NotImplementedError

    def setUp(self):
        super().setUp()
        self.database = ironic_db.IronicDatabase(self.url())
        self.addCleanup(self.database.dispose)
        ironic_db.METADATA.create_all(self.database.engine)
        self.next_id = 0

    def conductor(
        self,
        hostname,
        hardware_types=('fake-hardware',),
        group='',
        online=True,
        age=0.0,
        updated_at='age',
    ):
        """A conductor row, last heartbeat ``age`` seconds before NOW,
        and the interface rows Ironic registers for each hardware type
        (several per type)."""
        self.next_id += 1
        if updated_at == 'age':
            updated_at = NOW - datetime.timedelta(seconds=age)
        with self.database.engine.begin() as connection:
            connection.execute(
                ironic_db.CONDUCTORS.insert(),
                {
                    'id': self.next_id,
                    'hostname': hostname,
                    'conductor_group': group,
                    'online': online,
                    'updated_at': updated_at,
                },
            )
            rows = [
                {'conductor_id': self.next_id, 'hardware_type': hw}
                for hw in hardware_types
                for _interface in ('boot', 'deploy', 'power')
            ]
            if rows:
                connection.execute(
                    ironic_db.HARDWARE_INTERFACES.insert(), rows
                )

    def active(self, timeout=TIMEOUT, sqlite=False, use_groups=True):
        with self.database.engine.connect() as connection:
            return ironic_db.active_conductors(
                connection, timeout, sqlite, use_groups, now=NOW
            )

    def test_nothing_registered(self):
        self.assertEqual({}, self.active())

    def test_online_only(self):
        self.conductor('c1')
        self.conductor('c2', online=False)
        self.conductor('c3', online=None)
        self.assertEqual({':fake-hardware': frozenset({'c1'})}, self.active())

    def test_stale_heartbeat(self):
        self.conductor('fresh', age=TIMEOUT - 1)
        self.conductor('edge', age=TIMEOUT)
        self.conductor('stale', age=TIMEOUT + 1)
        self.conductor('never', updated_at=None)
        self.assertEqual(
            {':fake-hardware': frozenset({'fresh', 'edge'})}, self.active()
        )

    def test_timeout_zero_or_less_ignores_heartbeats(self):
        self.conductor('fresh')
        self.conductor('stale', age=3600)
        self.conductor('never', updated_at=None)
        self.conductor('offline', online=False)
        everyone = {':fake-hardware': frozenset({'fresh', 'stale', 'never'})}
        self.assertEqual(everyone, self.active(timeout=0))
        self.assertEqual(everyone, self.active(timeout=-1))

    def test_sqlite_ignores_heartbeats(self):
        self.conductor('fresh')
        self.conductor('stale', age=3600)
        self.conductor('offline', online=False)
        self.assertEqual(
            {':fake-hardware': frozenset({'fresh', 'stale'})},
            self.active(sqlite=True),
        )

    def test_groups_on_and_off(self):
        self.conductor('a1', group='rack-a')
        self.conductor('a2', group='rack-a')
        self.conductor('b1', group='rack-b')
        self.conductor('u1')
        self.assertEqual(
            {
                'rack-a:fake-hardware': frozenset({'a1', 'a2'}),
                'rack-b:fake-hardware': frozenset({'b1'}),
                ':fake-hardware': frozenset({'u1'}),
            },
            self.active(),
        )
        self.assertEqual(
            {'fake-hardware': frozenset({'a1', 'a2', 'b1', 'u1'})},
            self.active(use_groups=False),
        )

    def test_several_hardware_types(self):
        self.conductor('c1', ('ipmi', 'redfish'), group='g')
        self.conductor('c2', ('redfish',), group='g')
        self.conductor('c3', ('ipmi',), age=TIMEOUT + 1)
        self.conductor('bare', ())
        self.assertEqual(
            {
                'g:ipmi': frozenset({'c1'}),
                'g:redfish': frozenset({'c1', 'c2'}),
            },
            self.active(),
        )
        self.assertEqual(
            {
                'ipmi': frozenset({'c1', 'c3'}),
                'redfish': frozenset({'c1', 'c2'}),
            },
            self.active(sqlite=True, use_groups=False),
        )

    def test_registering_conductors_are_live_with_no_interface(self):
        # Between Ironic's delete of a restarted conductor's interfaces
        # and their new rows: live, listed under no hardware type.
        self.conductor('running')
        self.conductor('registering', ())
        self.conductor('offline', (), online=False)
        self.conductor('stale', (), age=TIMEOUT + 1)
        with self.database.engine.connect() as connection:
            active, found = ironic_db.live_conductors(
                connection, TIMEOUT, False, now=NOW
            )
            _, on_sqlite = ironic_db.live_conductors(
                connection, TIMEOUT, True, now=NOW
            )
        self.assertEqual(frozenset({'registering'}), found)
        self.assertEqual(frozenset({'registering', 'stale'}), on_sqlite)
        # The same statement lists the running ones, as active_conductors.
        self.assertEqual(self.active(), active)
        self.assertNotIn('registering', set().union(*active.values()))

    def test_one_statement_reads_both(self):
        # Two statements could miss a restarting conductor in both: the
        # first between its delete and its new rows, the second after
        # them (the ring dropped its nodes for one rebuild).
        self.conductor('c1')
        statements = []

        def seen(conn, cursor, statement, *args):
            if 'conductor' in statement.lower():
                statements.append(statement)

        sa.event.listen(self.database.engine, 'before_cursor_execute', seen)
        self.addCleanup(
            sa.event.remove,
            self.database.engine,
            'before_cursor_execute',
            seen,
        )
        active, registering = self.database.live_conductors(0)
        self.assertEqual({':fake-hardware': frozenset({'c1'})}, active)
        self.assertEqual(frozenset(), registering)
        self.assertEqual(1, len(statements), statements)

    def test_now_defaults_to_the_clock(self):
        self.conductor('old', age=0)  # NOW is long past
        self.conductor('recent', updated_at=ironic_db.utcnow())
        with self.database.engine.connect() as connection:
            found = ironic_db.active_conductors(connection, TIMEOUT, False)
        self.assertEqual({':fake-hardware': frozenset({'recent'})}, found)

    def test_node_batches(self):
        with self.database.engine.begin() as connection:
            connection.execute(
                ironic_db.NODES.insert(),
                [
                    {
                        'uuid': 'node-%d' % i,
                        'extra': '{"n": %d}' % i,
                        'created_at': NOW - datetime.timedelta(hours=1),
                        # node-0 saved since, node-1 created since.
                        'updated_at': NOW if i == 0 else None,
                    }
                    for i in range(7)
                ]
                + [
                    {
                        'uuid': 'node-new',
                        'extra': None,
                        'created_at': NOW,
                        'updated_at': None,
                    }
                ],
            )
        with self.database.engine.connect() as connection:
            batches = list(ironic_db.node_batches(connection, batch=3))
            self.assertEqual([3, 3, 2], [len(b) for b in batches])
            rows = {row.uuid: row.extra for b in batches for row in b}
            self.assertEqual('{"n": 5}', rows['node-5'])
            self.assertIsNone(rows['node-new'])
            since = list(
                ironic_db.node_batches(connection, ('uuid', 'name'), since=NOW)
            )
        self.assertEqual(
            [('node-0', None), ('node-new', None)],
            sorted(tuple(row) for b in since for row in b),
        )

    def test_taken_by_reads_the_nodes_ironic_takes_over(self):
        self.conductor('c1')  # id 1
        self.conductor('c2', online=False)  # id 2: its takeovers stand
        active = {'provision_state': 'active', 'maintenance': False}
        nodes = {
            'by-c1': dict(active, conductor_affinity=1),
            'by-c2': dict(active, conductor_affinity=2),
            'never': dict(active, conductor_affinity=None),
            # Locked for a task: its takeover waits, it is still counted.
            'reserved': dict(active, conductor_affinity=1, reservation='c1'),
            # Ironic's takeover leaves these alone.
            'maintenance': dict(active, maintenance=True),
            'no-flag': dict(active, maintenance=None),
            'child': dict(active, parent_node='by-c1'),
            'deploying': dict(active, provision_state='deploying'),
            'available': dict(active, provision_state='available'),
        }
        with self.database.engine.begin() as connection:
            connection.execute(
                ironic_db.NODES.insert(),
                [
                    {
                        'uuid': uuid,
                        'conductor_affinity': None,
                        'reservation': None,
                        'parent_node': None,
                        **row,
                    }
                    for uuid, row in nodes.items()
                ],
            )
        expected = {
            'by-c1': 'c1',
            'by-c2': 'c2',
            'never': None,
            'reserved': 'c1',
        }
        with self.database.engine.connect() as connection:
            self.assertEqual(expected, ironic_db.taken_by(connection, batch=2))
        self.assertEqual(expected, self.database.taken_by())


class SQLiteTestCase(_Cases, base.TestCase):
    def url(self):
        directory = self.useFixture(fixtures.TempDir()).path
        return 'sqlite:///' + os.path.join(directory, 'ironic.db')

    def test_database_on_sqlite_ignores_heartbeats(self):
        self.assertTrue(self.database.sqlite)
        self.conductor('stale', age=3600)
        self.conductor('offline', online=False)
        self.assertEqual(
            {':fake-hardware': frozenset({'stale'})},
            self.database.active_conductors(TIMEOUT),
        )


class PostgreSQLTestCase(_Cases, base.TestCase):
    def url(self):
        return self.useFixture(
            ScratchDatabase(
                server_admin(POSTGRES),
                POSTGRES,
                'DROP DATABASE IF EXISTS %s WITH (FORCE)',
            )
        ).url

    def test_database_on_postgresql_reads_heartbeats(self):
        self.assertFalse(self.database.sqlite)
        now = ironic_db.utcnow()
        self.conductor('fresh', group='g', updated_at=now)
        self.conductor('stale', group='g', age=0)  # NOW is long past
        self.assertEqual(
            {'g:fake-hardware': frozenset({'fresh'})},
            self.database.active_conductors(TIMEOUT),
        )
        self.assertEqual(
            {'fake-hardware': frozenset({'fresh'})},
            self.database.active_conductors(TIMEOUT, use_groups=False),
        )
        self.assertEqual(
            {'fake-hardware': frozenset({'fresh', 'stale'})},
            self.database.active_conductors(0, use_groups=False),
        )

    def test_pool(self):
        pool = self.database.engine.pool
        self.assertEqual(1, pool.size())
        self.assertTrue(self.database.engine.pool._pre_ping)


class MariaDBTestCase(_Cases, base.TestCase):
    def url(self):
        admin = server_admin(MARIADB, 'mysql')
        return self.useFixture(
            ScratchDatabase(admin, MARIADB, 'DROP DATABASE IF EXISTS %s')
        ).url

    def test_database_on_mariadb_reads_heartbeats(self):
        self.assertFalse(self.database.sqlite)
        self.conductor('fresh', updated_at=ironic_db.utcnow())
        self.conductor('stale', age=0)  # NOW is long past
        self.assertEqual(
            {':fake-hardware': frozenset({'fresh'})},
            self.database.active_conductors(TIMEOUT),
        )


class IsSQLiteTestCase(base.TestCase):
    def test_ironic_substring_rule(self):
        self.assertTrue(ironic_db.is_sqlite('sqlite:///ironic.db'))
        self.assertTrue(ironic_db.is_sqlite('SQLite://'))
        # Ironic matches the whole URL, not the dialect: so do we.
        self.assertTrue(
            ironic_db.is_sqlite('postgresql://ironic@db/sqlite_migrated')
        )
        self.assertFalse(ironic_db.is_sqlite('mysql+pymysql://ironic@db/x'))
        self.assertFalse(ironic_db.is_sqlite('postgresql+psycopg2://db/x'))

    def test_memory_database(self):
        database = ironic_db.IronicDatabase('sqlite://')
        self.addCleanup(database.dispose)
        ironic_db.METADATA.create_all(database.engine)
        self.assertEqual({}, database.active_conductors(TIMEOUT))


class FailedAtTestCase(base.TestCase):
    """``failed_at``: when any reader of the engine last failed."""

    def failing(self, url):
        database = ironic_db.IronicDatabase(url)
        self.addCleanup(database.dispose)
        self.assertIsNone(database.failed_at)
        before = time.monotonic()
        self.assertRaises(
            sa.exc.OperationalError, database.active_conductors, TIMEOUT
        )
        self.assertIsNotNone(database.failed_at)
        self.assertTrue(before <= database.failed_at <= time.monotonic())
        return database

    def test_a_connection_that_fails(self):
        # No server there: the pool's connect fails, not a statement.
        self.failing('postgresql+psycopg2://postgres@127.0.0.1:1/ironic')

    def test_a_statement_that_fails(self):
        database = self.failing('sqlite://')  # no tables: the select fails
        first = database.failed_at
        ironic_db.METADATA.create_all(database.engine)
        self.assertEqual({}, database.active_conductors(TIMEOUT))
        self.assertEqual(first, database.failed_at)
