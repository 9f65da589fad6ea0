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

"""Real coordination servers for functional tests, one fixture each.

Each fixture starts its own server on free loopback ports in a temporary
folder (so it can be stopped and restarted under running members without
touching any server the machine runs for others), and stops it by pid on
clean-up. A server whose program is not installed makes the test skip
with the reason, so a developer without etcd still runs the rest; CI
installs them all and sets IRONIC_AFFINITY_REQUIRE_SERVERS, under which a
missing server is a failure (.ci/run).

With ``tls=True``, the Redis, etcd and ZooKeeper fixtures serve their
clients over TLS only, with a certificate signed by an authority made
for the fixture (certs.py); with ``client_auth=True`` they also ask every
client for a certificate signed by it. Their ``url`` carries the driver
options that make a tooz client trust the authority (and show its
certificate); ``client_url()`` leaves either out. A server that cannot do
TLS is unavailable, like a missing one.
"""

import functools
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from typing import NoReturn
import urllib.parse

import fixtures
import testtools

from ironic_affinity.tests.functional import certs

ZOOKEEPER_CLASSPATH = '/etc/zookeeper/conf:/usr/share/java/zookeeper.jar'
# Debian's zookeeper.jar lists in its manifest the Netty jars that plain
# connections need, but not netty-codec, without which the first TLS
# handshake fails (ClassNotFoundException: ByteToMessageDecoder).
ZOOKEEPER_TLS_JARS = ('/usr/share/java/netty-codec.jar',)
REQUIRE_SERVERS = 'IRONIC_AFFINITY_REQUIRE_SERVERS'


def unavailable(reason: str) -> NoReturn:
    """Skip the test for want of something on this machine, or, where CI
    has installed everything, fail it: there it means a broken setup."""
    if os.environ.get(REQUIRE_SERVERS, '') not in ('', '0'):
        raise RuntimeError('%s, and %s is set' % (reason, REQUIRE_SERVERS))
    raise testtools.TestCase.skipException(reason)


def require_program(program: str) -> None:
    if shutil.which(program) is None and not os.path.exists(program):
        unavailable('%s is not installed (.ci/run installs it)' % program)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        return int(sock.getsockname()[1])


def run(
    command: list[str],
    timeout: float,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run a command to its end; raise, with the end of its output, if
    it fails."""
    done = subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(
            '%s failed (%d): %s'
            % (
                ' '.join([os.path.basename(command[0]), *command[1:]]),
                done.returncode,
                (done.stdout + done.stderr)[-4000:],
            )
        )
    return done


def wait_for_port(port: int, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(('127.0.0.1', port), 0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError('nothing listens on 127.0.0.1:%d' % port)


class Server(fixtures.Fixture):
    """A server process that can be stopped and started again in place."""

    #: tooz driver name, for test ids and reports.
    driver = ''
    program = ''
    #: Whether clients must use TLS, and also show a certificate.
    tls = False
    client_auth = False

    def setUp(self) -> None:
        # Checked before Fixture.setUp, which turns whatever _setUp
        # raises, a skip included, into an error of the test.
        if self.program:
            require_program(self.program)
        if self.tls:
            require_program('openssl')
            self.check_tls()
        super().setUp()

    def _setUp(self) -> None:
        self.dir = self.useFixture(fixtures.TempDir()).path
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None
        self.certs: certs.Certificates | None = None
        if self.tls:
            self.certs = certs.generate(os.path.join(self.dir, 'tls'))
        self.prepare()
        self.start()
        self.addCleanup(self.stop)

    def check_tls(self) -> None:
        """Call unavailable() if the installed server cannot do TLS."""

    def prepare(self) -> None:
        """Write configuration; called once."""

    def command(self) -> list[str]:
        raise NotImplementedError

    @property
    def url(self) -> str:
        """What a member uses: trusting the server, with a client
        certificate when the server asks for one."""
        return self.client_url()

    def client_url(
        self, *, ca: bool = True, client_cert: bool | None = None
    ) -> str:
        """The URL for a client that trusts the fixture's authority (or,
        ``ca=False``, does not say what to trust) and shows the client
        certificate (by default, when the server asks for one)."""
        raise NotImplementedError

    def _tls_query(
        self, ca: bool, client_cert: bool | None, names: tuple[str, str, str]
    ) -> dict[str, str]:
        """The TLS options, under the driver's ``names`` for the CA file,
        the client certificate and its key."""
        assert self.certs is not None
        if client_cert is None:
            client_cert = self.client_auth
        query = {names[0]: self.certs.ca} if ca else {}
        if client_cert:
            query[names[1]] = self.certs.client_cert
            query[names[2]] = self.certs.client_key
        return query

    def start(self) -> None:
        log = open(os.path.join(self.dir, 'server.log'), 'ab')
        self.process = subprocess.Popen(
            self.command(),
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=self.dir,
            start_new_session=True,
        )
        log.close()
        try:
            # 60 s: in .ci/run on 88e34ff, beside three end-to-end suites
            # on a slow machine, an etcd did not listen within 30 s.
            wait_for_port(self.port, 60.0)
            self.wait_serving()
        except RuntimeError as exc:
            exited = self.process.poll()
            self.stop()
            with open(os.path.join(self.dir, 'server.log'), 'rb') as f:
                tail = f.read()[-2000:].decode(errors='replace')
            raise RuntimeError(
                '%s (%s; its log ends: %s)'
                % (
                    exc,
                    'running' if exited is None else 'exited %s' % exited,
                    tail,
                )
            ) from exc

    def wait_serving(self) -> None:
        """Return once the server answers clients, not only accepts
        connections; listening is enough for most."""

    def stop(self) -> None:
        if self.process is None:
            return
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(15)
        self.process = None


class FileBackend(Server):
    """No server: tooz's file driver in a temporary folder."""

    driver = 'file'

    def start(self) -> None:
        pass

    def stop(self) -> None:
        pass

    @property
    def url(self) -> str:
        return 'file://' + os.path.join(self.dir, 'membership')


@functools.cache
def redis_has_tls() -> bool:
    """Whether redis-server was built with TLS.

    A build with TLS refuses to start on a TLS port without a
    certificate and says so at once; a build without it either rejects
    the option or starts on the port, so anything else means no TLS.
    """
    with tempfile.TemporaryDirectory() as folder:
        command = [
            'redis-server',
            '--port', '0',
            '--tls-port', str(free_port()),
            '--bind', '127.0.0.1',
            '--save', '',
            '--appendonly', 'no',
            '--dir', folder,
        ]  # fmt: skip
        try:
            result = subprocess.run(
                command,
                cwd=folder,
                capture_output=True,
                text=True,
                timeout=10,
                check=False,
            )
        except subprocess.TimeoutExpired:
            return False
    return 'tls-cert-file' in result.stdout + result.stderr


class RedisServer(Server):
    driver = 'redis'
    program = 'redis-server'

    def __init__(
        self,
        password: str | None = None,
        *,
        tls: bool = False,
        client_auth: bool = False,
    ) -> None:
        super().__init__()
        self.password = password
        self.tls = tls or client_auth
        self.client_auth = client_auth

    def check_tls(self) -> None:
        if not redis_has_tls():
            unavailable('redis-server was built without TLS')

    def command(self) -> list[str]:
        auth = ['--requirepass', self.password] if self.password else []
        if self.certs is None:
            ports = ['--port', str(self.port)]
        else:
            # TLS only: port 0 closes the plain port.
            ports = [
                '--port', '0',
                '--tls-port', str(self.port),
                '--tls-cert-file', self.certs.server_cert,
                '--tls-key-file', self.certs.server_key,
                '--tls-ca-cert-file', self.certs.ca,
                '--tls-auth-clients', 'yes' if self.client_auth else 'no',
            ]  # fmt: skip
        return [
            'redis-server',
            *ports,
            '--bind', '127.0.0.1',
            '--save', '',
            '--appendonly', 'no',
            '--dir', self.dir,
            *auth,
        ]  # fmt: skip

    def client_url(
        self, *, ca: bool = True, client_cert: bool | None = None
    ) -> str:
        auth = ':%s@' % self.password if self.password else ''
        url = 'redis://%s127.0.0.1:%d' % (auth, self.port)
        if self.certs is None:
            return url
        query = {'ssl': 'true'}
        query.update(
            self._tls_query(
                ca,
                client_cert,
                ('ssl_ca_certs', 'ssl_certfile', 'ssl_keyfile'),
            )
        )
        return url + '?' + urllib.parse.urlencode(query, safe='/')


class EtcdServer(Server):
    driver = 'etcd3+http'
    program = 'etcd'

    def __init__(
        self, *, tls: bool = False, client_auth: bool = False
    ) -> None:
        super().__init__()
        self.tls = tls or client_auth
        self.client_auth = client_auth
        if self.tls:
            self.driver = 'etcd3+https'

    def prepare(self) -> None:
        self.peer_port = free_port()

    def command(self) -> list[str]:
        peer = 'http://127.0.0.1:%d' % self.peer_port
        scheme = 'http' if self.certs is None else 'https'
        client = '%s://127.0.0.1:%d' % (scheme, self.port)
        tls = []
        if self.certs is not None:
            tls = [
                '--cert-file', self.certs.server_cert,
                '--key-file', self.certs.server_key,
            ]  # fmt: skip
        if self.certs is not None and self.client_auth:
            tls += [
                '--client-cert-auth',
                '--trusted-ca-file', self.certs.ca,
            ]  # fmt: skip
        return [
            'etcd',
            '--name', 'test',
            '--data-dir', os.path.join(self.dir, 'data'),
            '--listen-client-urls', client,
            '--advertise-client-urls', client,
            '--listen-peer-urls', peer,
            '--initial-advertise-peer-urls', peer,
            '--initial-cluster', 'test=' + peer,
            *tls,
        ]  # fmt: skip

    def client_url(
        self, *, ca: bool = True, client_cert: bool | None = None
    ) -> str:
        url = '%s://127.0.0.1:%d' % (self.driver, self.port)
        if self.certs is None:
            return url
        query = self._tls_query(
            ca, client_cert, ('ca_cert', 'cert_cert', 'cert_key')
        )
        if not query:
            return url
        return url + '?' + urllib.parse.urlencode(query, safe='/')


class ZooKeeperServer(Server):
    driver = 'zookeeper'
    program = '/usr/share/java/zookeeper.jar'

    def __init__(
        self, *, tls: bool = False, client_auth: bool = False
    ) -> None:
        super().__init__()
        self.tls = tls or client_auth
        self.client_auth = client_auth

    def check_tls(self) -> None:
        for jar in ZOOKEEPER_TLS_JARS:
            if not os.path.exists(jar):
                unavailable('ZooKeeper over TLS needs %s' % jar)

    def prepare(self) -> None:
        if self.certs is None:
            listen = 'clientPort=%d\nclientPortAddress=127.0.0.1\n' % (
                self.port
            )
        else:
            # ZooKeeper reads its key and certificate from one PEM file.
            bundle = os.path.join(self.dir, 'tls', 'server-bundle.pem')
            with open(bundle, 'w') as out:
                for part in (self.certs.server_key, self.certs.server_cert):
                    with open(part) as handle:
                        out.write(handle.read())
            # TLS only (no clientPort), through Netty: the default
            # connection factory has no TLS.
            listen = (
                'secureClientPort=%d\n'
                'secureClientPortAddress=127.0.0.1\n'
                'serverCnxnFactory='
                'org.apache.zookeeper.server.NettyServerCnxnFactory\n'
                'ssl.keyStore.location=%s\n'
                'ssl.keyStore.type=PEM\n'
                'ssl.trustStore.location=%s\n'
                'ssl.trustStore.type=PEM\n'
                'ssl.clientAuth=%s\n'
                % (
                    self.port,
                    bundle,
                    self.certs.ca,
                    'need' if self.client_auth else 'none',
                )
            )
        with open(os.path.join(self.dir, 'zoo.cfg'), 'w') as handle:
            handle.write(
                'tickTime=500\n'
                'dataDir=%s\n'
                '%s'
                'admin.enableServer=false\n'
                # ZooKeeper's default, said: wait_serving asks it.
                '4lw.commands.whitelist=srvr\n'
                # Let a client ask for short sessions: the member timeout.
                'minSessionTimeout=1000\n'
                'maxSessionTimeout=60000\n'
                % (os.path.join(self.dir, 'data'), listen)
            )

    def command(self) -> list[str]:
        classpath = ZOOKEEPER_CLASSPATH
        if self.certs is not None:
            classpath = ':'.join((classpath, *ZOOKEEPER_TLS_JARS))
        return [
            'java',
            '-cp', classpath,
            '-Dzookeeper.log.dir=' + self.dir,
            '-Dzookeeper.root.logger=INFO,CONSOLE',
            'org.apache.zookeeper.server.quorum.QuorumPeerMain',
            os.path.join(self.dir, 'zoo.cfg'),
        ]  # fmt: skip

    def wait_serving(self, timeout: float = 30.0) -> None:
        """ZooKeeper listens before it serves: a session asked for then
        (on a busy CI host, seconds before) outlasts the client's 5 s
        connection timeout. Its ``srvr`` command says when it serves.
        Over TLS the command cannot be sent plainly: listening it is."""
        if self.certs is not None:
            return
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(
                    ('127.0.0.1', self.port), 1.0
                ) as sock:
                    sock.sendall(b'srvr')
                    answer = sock.recv(64)
                if answer.startswith(b'Zookeeper version'):
                    return
            except OSError:
                pass
            time.sleep(0.2)
        raise RuntimeError(
            'ZooKeeper on 127.0.0.1:%d does not serve' % self.port
        )

    def client_url(
        self, *, ca: bool = True, client_cert: bool | None = None
    ) -> str:
        url = 'zookeeper://127.0.0.1:%d' % self.port
        if self.certs is None:
            return url
        query = {'use_ssl': 'true'}
        query.update(
            self._tls_query(ca, client_cert, ('ca', 'certfile', 'keyfile'))
        )
        return url + '?' + urllib.parse.urlencode(query, safe='/')


ALL = (FileBackend, RedisServer, EtcdServer, ZooKeeperServer)
