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
"""

import os
import shutil
import signal
import socket
import subprocess
import time

import fixtures
import testtools

ZOOKEEPER_CLASSPATH = '/etc/zookeeper/conf:/usr/share/java/zookeeper.jar'


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        return int(sock.getsockname()[1])


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

    def _setUp(self) -> None:
        if (
            self.program
            and shutil.which(self.program) is None
            and not (os.path.exists(self.program))
        ):
            raise testtools.TestCase.skipException(
                '%s is not installed (.ci/run installs it)' % self.program
            )
        self.dir = self.useFixture(fixtures.TempDir()).path
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None
        self.prepare()
        self.start()
        self.addCleanup(self.stop)

    def prepare(self) -> None:
        """Write configuration; called once."""

    def command(self) -> list[str]:
        raise NotImplementedError

    @property
    def url(self) -> str:
        raise NotImplementedError

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
            wait_for_port(self.port)
        except RuntimeError:
            self.stop()
            raise

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


class RedisServer(Server):
    driver = 'redis'
    program = 'redis-server'

    def __init__(self, password: str | None = None) -> None:
        super().__init__()
        self.password = password

    def command(self) -> list[str]:
        auth = ['--requirepass', self.password] if self.password else []
        return [
            'redis-server',
            '--port', str(self.port),
            '--bind', '127.0.0.1',
            '--save', '',
            '--appendonly', 'no',
            '--dir', self.dir,
            *auth,
        ]  # fmt: skip

    @property
    def url(self) -> str:
        auth = ':%s@' % self.password if self.password else ''
        return 'redis://%s127.0.0.1:%d' % (auth, self.port)


class EtcdServer(Server):
    driver = 'etcd3+http'
    program = 'etcd'

    def prepare(self) -> None:
        self.peer_port = free_port()

    def command(self) -> list[str]:
        peer = 'http://127.0.0.1:%d' % self.peer_port
        client = 'http://127.0.0.1:%d' % self.port
        return [
            'etcd',
            '--name', 'test',
            '--data-dir', os.path.join(self.dir, 'data'),
            '--listen-client-urls', client,
            '--advertise-client-urls', client,
            '--listen-peer-urls', peer,
            '--initial-advertise-peer-urls', peer,
            '--initial-cluster', 'test=' + peer,
        ]  # fmt: skip

    @property
    def url(self) -> str:
        return 'etcd3+http://127.0.0.1:%d' % self.port


class ZooKeeperServer(Server):
    driver = 'zookeeper'
    program = '/usr/share/java/zookeeper.jar'

    def prepare(self) -> None:
        with open(os.path.join(self.dir, 'zoo.cfg'), 'w') as handle:
            handle.write(
                'tickTime=500\n'
                'dataDir=%s\n'
                'clientPort=%d\n'
                'clientPortAddress=127.0.0.1\n'
                'admin.enableServer=false\n'
                # Let a client ask for short sessions: the member timeout.
                'minSessionTimeout=1000\n'
                'maxSessionTimeout=60000\n'
                % (os.path.join(self.dir, 'data'), self.port)
            )

    def command(self) -> list[str]:
        return [
            'java',
            '-cp', ZOOKEEPER_CLASSPATH,
            '-Dzookeeper.log.dir=' + self.dir,
            '-Dzookeeper.root.logger=INFO,CONSOLE',
            'org.apache.zookeeper.server.quorum.QuorumPeerMain',
            os.path.join(self.dir, 'zoo.cfg'),
        ]  # fmt: skip

    @property
    def url(self) -> str:
        return 'zookeeper://127.0.0.1:%d' % self.port


ALL = (FileBackend, RedisServer, EtcdServer, ZooKeeperServer)
