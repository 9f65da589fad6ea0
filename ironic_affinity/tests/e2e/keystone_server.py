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

"""A Keystone of the test's own, for Ironic with authentication on.

Keystone as installed from the package index, set up as an operator
would (``keystone-manage db_sync``, ``fernet_setup``,
``credential_setup``, ``bootstrap``), on SQLite and fernet keys in a
temporary folder, served on a free loopback port by cheroot (which
Ironic brings) in a process of its own, and stopped by pid on clean-up.
The bootstrap's admin has the admin role on the whole system, which is
what Ironic's default policy asks for system-wide reads; a ``service``
project holds the account Ironic's keystonemiddleware validates tokens
with. Users, projects and role assignments of a test are made through
Keystone's own API, as an operator would.

``python -m ironic_affinity.tests.e2e.keystone_server PORT`` is the
server process: it reads its configuration file from
OS_KEYSTONE_CONFIG_FILES, as Keystone's WSGI module does under uwsgi.
"""

import email.message
import grp
import json
import os
import pwd
import subprocess
import sys
import time
import urllib.error
import urllib.request

import fixtures

from ironic_affinity.tests.functional import servers

ADMIN_PASSWORD = 'admin-secret'
REGION = 'RegionOne'
SERVICE_PROJECT = 'service'
# The account name Ironic's keystonemiddleware uses; as a deployment
# names it, though nothing depends on the name.
SERVICE_USER = 'ironic'
SERVICE_PASSWORD = 'ironic-secret'

_CONF = """
[DEFAULT]
log_file = {dir}/keystone.log

[database]
connection = sqlite:///{dir}/keystone.db

[token]
provider = fernet

[fernet_tokens]
key_repository = {dir}/fernet-keys

[fernet_receipts]
key_repository = {dir}/fernet-keys

[credential]
key_repository = {dir}/credential-keys

[identity]
# The fewest bcrypt rounds: every password check costs CI time, and
# these passwords protect nothing.
password_hash_rounds = 4
"""


def _bin(name: str) -> str:
    return os.path.join(os.path.dirname(sys.executable), name)


class KeystoneServer(fixtures.Fixture):
    """Keystone on 127.0.0.1:``port``; ``admin_token`` is a system-scoped
    token of the bootstrap's admin."""

    def setUp(self) -> None:
        # Before Fixture.setUp, which turns a skip raised in _setUp into
        # an error of the test. The stable-release environments install
        # Ironic alone, so this skips there (or fails under CI's
        # IRONIC_AFFINITY_REQUIRE_SERVERS, where tox -e e2e runs it).
        if not os.path.exists(_bin('keystone-manage')):
            servers.unavailable(
                'Keystone is not installed in this environment (tox -e '
                'e2e installs it)'
            )
        super().setUp()

    def _setUp(self) -> None:
        self.dir = self.useFixture(fixtures.TempDir()).path
        self.conf = os.path.join(self.dir, 'keystone.conf')
        with open(self.conf, 'w') as handle:
            handle.write(_CONF.format(dir=self.dir))
        self.port = servers.free_port()
        # Keystone refuses to guess, under root, whom its key files belong
        # to; they belong to whoever runs the test.
        owner = [
            '--keystone-user',
            pwd.getpwuid(os.getuid()).pw_name,
            '--keystone-group',
            grp.getgrgid(os.getgid()).gr_name,
        ]
        self._manage('db_sync')
        self._manage('fernet_setup', *owner)
        self._manage('credential_setup', *owner)
        self._manage(
            'bootstrap',
            '--bootstrap-password',
            ADMIN_PASSWORD,
            '--bootstrap-region-id',
            REGION,
            '--bootstrap-admin-url',
            self.url,
            '--bootstrap-internal-url',
            self.url,
            '--bootstrap-public-url',
            self.url,
        )  # fmt: skip
        self._start()
        self.admin_token = self.token('admin', ADMIN_PASSWORD, system=True)
        service_project = self.create_project(SERVICE_PROJECT)
        # The service role on the service project: what Keystone's
        # default policy lets validate other users' tokens.
        self.create_user(
            SERVICE_USER, SERVICE_PASSWORD, service_project, 'service'
        )

    @property
    def url(self) -> str:
        return 'http://127.0.0.1:%d' % self.port

    def _manage(self, *args: str) -> None:
        servers.run(
            [_bin('keystone-manage'), '--config-file', self.conf, *args],
            timeout=180,
        )

    def _start(self) -> None:
        log = open(os.path.join(self.dir, 'server.log'), 'ab')
        self.process = subprocess.Popen(
            [sys.executable, '-m', __name__, str(self.port)],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=dict(os.environ, OS_KEYSTONE_CONFIG_FILES=self.conf),
        )
        log.close()
        self.addCleanup(self._stop)
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                break
            try:
                if self.call('GET', '/v3')[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(0.3)
        raise RuntimeError('Keystone did not start:\n' + self.log()[-4000:])

    def _stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(15)

    def log(self) -> str:
        text = ''
        for name in ('server.log', 'keystone.log'):
            path = os.path.join(self.dir, name)
            if os.path.exists(path):
                with open(path, 'rb') as handle:
                    text += handle.read().decode(errors='replace')
        return text

    # Keystone's API

    def call(
        self,
        method: str,
        path: str,
        body: object = None,
        token: str | None = None,
    ) -> tuple[int, dict, email.message.Message]:
        """(status, JSON body or {}, headers) of a request to Keystone."""
        headers = {'Content-Type': 'application/json'}
        if token is not None:
            headers['X-Auth-Token'] = token
        request = urllib.request.Request(
            self.url + path,
            data=None if body is None else json.dumps(body).encode(),
            method=method,
            headers=headers,
        )
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                text = response.read()
                return (
                    response.status,
                    json.loads(text) if text else {},
                    response.headers,
                )
        except urllib.error.HTTPError as exc:
            text = exc.read()
            try:
                found = json.loads(text)
            except ValueError:
                found = {'raw': text.decode(errors='replace')}
            return exc.code, found, exc.headers

    def _admin(self, method: str, path: str, body: object = None) -> dict:
        status, found, _headers = self.call(
            method, path, body, token=self.admin_token
        )
        if status not in (200, 201, 204):
            raise AssertionError(
                '%s %s: %s %s' % (method, path, status, found)
            )
        return found

    def token(
        self,
        user: str,
        password: str,
        project: str | None = None,
        system: bool = False,
    ) -> str:
        """A token of ``user`` (of the Default domain): scoped to the
        system, to ``project`` (a name in the Default domain), or, with
        neither, unscoped."""
        auth: dict[str, object] = {
            'identity': {
                'methods': ['password'],
                'password': {
                    'user': {
                        'name': user,
                        'domain': {'id': 'default'},
                        'password': password,
                    }
                },
            }
        }
        if system:
            auth['scope'] = {'system': {'all': True}}
        elif project is not None:
            auth['scope'] = {
                'project': {'name': project, 'domain': {'id': 'default'}}
            }
        status, found, headers = self.call(
            'POST', '/v3/auth/tokens', {'auth': auth}
        )
        if status != 201:
            raise AssertionError('token of %s: %s %s' % (user, status, found))
        return str(headers['X-Subject-Token'])

    def create_project(self, name: str) -> str:
        """A project of the Default domain; its id."""
        found = self._admin(
            'POST',
            '/v3/projects',
            {'project': {'name': name, 'domain_id': 'default'}},
        )
        return str(found['project']['id'])

    def role_id(self, name: str) -> str:
        found = self._admin('GET', '/v3/roles?name=%s' % name)
        return str(found['roles'][0]['id'])

    def create_user(
        self,
        name: str,
        password: str,
        project_id: str | None = None,
        role: str | None = None,
    ) -> str:
        """A user of the Default domain, with ``role`` on the project if
        given (and no role assignment at all otherwise); its id."""
        found = self._admin(
            'POST',
            '/v3/users',
            {
                'user': {
                    'name': name,
                    'password': password,
                    'domain_id': 'default',
                }
            },
        )
        user_id = str(found['user']['id'])
        if project_id is not None and role is not None:
            self._admin(
                'PUT',
                '/v3/projects/%s/users/%s/roles/%s'
                % (project_id, user_id, self.role_id(role)),
            )
        return user_id

    def register_endpoint(self, service_type: str, url: str) -> None:
        """Put a service's public endpoint in the catalog, where clients
        look for it."""
        found = self._admin(
            'POST',
            '/v3/services',
            {'service': {'type': service_type, 'name': service_type}},
        )
        self._admin(
            'POST',
            '/v3/endpoints',
            {
                'endpoint': {
                    'service_id': found['service']['id'],
                    'interface': 'public',
                    'region_id': REGION,
                    'url': url,
                }
            },
        )

    def authtoken_conf(self) -> str:
        """The [keystone_authtoken] section of a service that validates
        its callers' tokens with this Keystone (keystonemiddleware)."""
        return '\n'.join(
            [
                '[keystone_authtoken]',
                'auth_type = password',
                'auth_url = %s/v3' % self.url,
                'www_authenticate_uri = %s' % self.url,
                'username = %s' % SERVICE_USER,
                'password = %s' % SERVICE_PASSWORD,
                'user_domain_name = Default',
                'project_name = %s' % SERVICE_PROJECT,
                'project_domain_name = Default',
                'region_name = %s' % REGION,
                # Bootstrap registered the same URL on every interface.
                'interface = public',
                '',
            ]
        )


def main() -> None:
    from cheroot import wsgi

    port = int(sys.argv[1])
    # Keystone parses the process's command line as its own options.
    del sys.argv[1:]
    from keystone.server import wsgi as keystone_wsgi

    application = keystone_wsgi.initialize_public_application()
    server = wsgi.Server(('127.0.0.1', port), application, numthreads=8)
    server.safe_start()


if __name__ == '__main__':
    main()
