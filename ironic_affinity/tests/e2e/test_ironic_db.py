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

"""ironic_db's active conductors against Ironic's own reading of them.

Ironic's answer comes from its database API
(``get_active_hardware_type_dict``), run in a subprocess with the same
configuration files: on a live deployment while its conductors run and
after one crashes, and on rows written by hand into Ironic's own schema
on PostgreSQL, MariaDB and SQLite (offline, stale, never heartbeaten,
grouped, several hardware types), with heartbeat timeouts on and off.
"""

import datetime
import json
import os
import subprocess
import sys
import uuid

import fixtures
import sqlalchemy as sa

from ironic_affinity.integration.data import ironic_db
from ironic_affinity.tests.e2e import base
from ironic_affinity.tests.e2e import deployment

# Clear of the ports 8091 and up other end-to-end runs use.
FIRST_RPC_PORT = 8391

# Ironic's reading, both ways of keying it, as JSON on the last line.
# prepare_command as Ironic's own commands (dbsync) call it: on Ironic 29
# and 32, parsing CONF alone leaves options the database API needs
# unregistered.
_IRONIC = '''
import json, sys
from ironic.common import service
service.prepare_command(sys.argv)
from ironic.db import api as dbapi
db = dbapi.get_instance()
print(json.dumps({
    str(groups).lower(): {
        key: sorted(hosts)
        for key, hosts in db.get_active_hardware_type_dict(
            use_groups=groups).items()
    }
    for groups in (True, False)
}))
'''


# Ironic's table, as far as written here: its column "default" is a
# reserved word, quoted as each server quotes names.
_INTERFACES = sa.table(
    'conductor_hardware_interfaces',
    *(
        sa.column(name)
        for name in (
            'conductor_id',
            'hardware_type',
            'interface_type',
            'interface_name',
            'default',
        )
    ),
)


def _plain(found):
    return {key: sorted(hosts) for key, hosts in found.items()}


class IronicDbAgreementTestCase(base.TestCase):
    def ironic(self, *conf_files):
        """Ironic's own active conductors, by use_groups ('true'/'false')."""
        args = []
        for path in conf_files:
            args += ['--config-file', path]
        result = subprocess.run(
            [sys.executable, '-c', _IRONIC, *args],
            capture_output=True,
            text=True,
            check=False,
            timeout=120,
        )
        self.assertEqual(0, result.returncode, result.stderr)
        return json.loads(result.stdout.splitlines()[-1])

    def ours(self, database, timeout):
        return {
            str(groups).lower(): _plain(
                database.active_conductors(timeout, use_groups=groups)
            )
            for groups in (True, False)
        }

    def assert_agree(self, database, timeout, *conf_files):
        """Ours equals Ironic's, read between two equal readings of ours
        (a heartbeat may cross the timeout meanwhile: then read again).
        """
        for _attempt in range(5):
            before = self.ours(database, timeout)
            theirs = self.ironic(*conf_files)
            if before == self.ours(database, timeout):
                self.assertEqual(theirs, before)
                return before
        self.fail('the conductors kept changing under the comparison')

    def test_live_deployment(self):
        dep = self.deploy(
            {1: {}, 2: {}}, manager='stock', first_rpc_port=FIRST_RPC_PORT
        )
        # A third conductor in a conductor group of its own.
        group_conf = os.path.join(dep.dir, 'group.conf')
        with open(group_conf, 'w') as handle:
            handle.write('[conductor]\nconductor_group = rack-b\n')
        dep._start(
            'conductor3',
            [
                deployment._bin('ironic-affinity-conductor'),
                '--config-file',
                dep.conf,
                '--config-file',
                dep.write_tags(3),
                '--config-file',
                group_conf,
            ],
        )
        dep.wait_conductors(1, 2, 3)
        timeout = dep.timers['heartbeat_timeout']
        database = ironic_db.IronicDatabase(dep.database_url)
        self.addCleanup(database.dispose)
        self.assertFalse(database.sqlite)
        c1, c2, c3 = (self.name(i) for i in (1, 2, 3))

        found = self.assert_agree(database, timeout, dep.conf)
        self.assertEqual(
            {
                'true': {
                    ':fake-hardware': sorted([c1, c2]),
                    'rack-b:fake-hardware': [c3],
                },
                'false': {'fake-hardware': sorted([c1, c2, c3])},
            },
            found,
        )

        # A crash: online stays true, the heartbeat stops. Listed until
        # the heartbeat timeout, by both, then by neither.
        dep.crash(2)
        dep.wait(
            lambda: (
                c2
                not in self.ours(database, timeout)['false'].get(
                    'fake-hardware', []
                )
            ),
            timeout + 10,
            '%s stale' % c2,
        )
        found = self.assert_agree(database, timeout, dep.conf)
        self.assertEqual(
            {'fake-hardware': sorted([c1, c3])}, found['false'], found
        )
        # With no timeout, the crashed conductor is active to both.
        no_timeout = os.path.join(dep.dir, 'no-timeout.conf')
        with open(no_timeout, 'w') as handle:
            handle.write('[conductor]\nheartbeat_timeout = 0\n')
        found = self.assert_agree(database, 0, dep.conf, no_timeout)
        self.assertIn(c2, found['false']['fake-hardware'])
        # Offline conductors (a clean stop) are compared on written rows
        # below: on Ironic 29 a stopped conductor of this harness did not
        # mark itself offline within a minute.

    def _schema(self, url):
        """Ironic's schema on ``url``, by Ironic's own tool; its config."""
        directory = self.useFixture(fixtures.TempDir()).path
        conf = os.path.join(directory, 'ironic.conf')
        with open(conf, 'w') as handle:
            handle.write('[database]\nconnection = %s\n' % url)
        subprocess.run(
            [deployment._bin('ironic-dbsync'), '--config-file', conf]
            + ['create_schema'],
            check=True,
            capture_output=True,
            timeout=120,
        )
        no_timeout = os.path.join(directory, 'no-timeout.conf')
        with open(no_timeout, 'w') as handle:
            handle.write('[conductor]\nheartbeat_timeout = 0\n')
        return conf, no_timeout

    def _fill(self, database):
        now = ironic_db.utcnow()
        hour = datetime.timedelta(hours=1)
        conductors = [
            # id, hostname, group, online, updated_at, hardware types
            (1, 'fresh', '', True, now, ['ipmi', 'redfish']),
            (2, 'fresh-b', 'rack-b', True, now, ['redfish']),
            (3, 'stale', '', True, now - hour, ['ipmi']),
            (4, 'offline', '', False, now, ['ipmi']),
            (5, 'never', 'rack-b', True, None, ['ipmi']),
            (6, 'bare', '', True, now, []),
        ]
        with database.engine.begin() as connection:
            for ident, host, group, online, stamp, types in conductors:
                connection.execute(
                    sa.text(
                        'INSERT INTO conductors (id, hostname, '
                        'conductor_group, online, created_at, updated_at) '
                        'VALUES (:id, :host, :group, :online, :created, '
                        ':stamp)'
                    ),
                    {
                        'id': ident,
                        'host': host,
                        'group': group,
                        'online': online,
                        'created': now - hour,
                        'stamp': stamp,
                    },
                )
                for hardware_type in types:
                    for interface in ('boot', 'deploy', 'power'):
                        connection.execute(
                            _INTERFACES.insert(),
                            {
                                'conductor_id': ident,
                                'hardware_type': hardware_type,
                                'interface_type': interface,
                                'interface_name': 'fake',
                                'default': True,
                            },
                        )

    def test_written_rows_on_postgresql(self):
        admin = sa.create_engine(
            deployment.POSTGRES + '/postgres', isolation_level='AUTOCOMMIT'
        )
        self.assert_written_rows_agree(
            admin,
            deployment.POSTGRES,
            'DROP DATABASE IF EXISTS %s WITH (FORCE)',
        )

    def test_written_rows_on_mariadb(self):
        # Kolla-Ansible's database.
        admin = sa.create_engine(
            deployment.MARIADB + '/mysql', isolation_level='AUTOCOMMIT'
        )
        self.assert_written_rows_agree(
            admin, deployment.MARIADB, 'DROP DATABASE IF EXISTS %s'
        )

    def assert_written_rows_agree(self, admin, server, drop):
        """On a database of its own on ``server``, created and dropped
        through ``admin``: Ironic's schema, the rows of _fill, read alike
        by Ironic and by ironic_db."""
        self.addCleanup(admin.dispose)
        name = 'ironic_affinity_e2e_db_%s' % uuid.uuid4().hex[:8]
        with admin.connect() as connection:
            connection.execute(sa.text('CREATE DATABASE %s' % name))

        def dropped():
            with admin.connect() as connection:
                connection.execute(sa.text(drop % name))

        self.addCleanup(dropped)
        url = '%s/%s' % (server, name)
        conf, no_timeout = self._schema(url)
        database = ironic_db.IronicDatabase(url)
        self.addCleanup(database.dispose)
        self._fill(database)
        found = self.assert_agree(database, 60, conf)
        self.assertEqual(
            {
                ':ipmi': ['fresh'],
                ':redfish': ['fresh'],
                'rack-b:redfish': ['fresh-b'],
            },
            found['true'],
        )
        found = self.assert_agree(database, 0, conf, no_timeout)
        self.assertEqual(
            {
                'ipmi': ['fresh', 'never', 'stale'],
                'redfish': ['fresh', 'fresh-b'],
            },
            found['false'],
        )

    def test_written_rows_on_sqlite(self):
        directory = self.useFixture(fixtures.TempDir()).path
        url = 'sqlite:///' + os.path.join(directory, 'ironic.db')
        conf, _no_timeout = self._schema(url)
        database = ironic_db.IronicDatabase(url)
        self.addCleanup(database.dispose)
        self.assertTrue(database.sqlite)
        self._fill(database)
        # Heartbeats ignored on SQLite, whatever the timeout.
        found = self.assert_agree(database, 60, conf)
        self.assertEqual(
            {
                ':ipmi': ['fresh', 'stale'],
                ':redfish': ['fresh'],
                'rack-b:ipmi': ['never'],
                'rack-b:redfish': ['fresh-b'],
            },
            found['true'],
        )
