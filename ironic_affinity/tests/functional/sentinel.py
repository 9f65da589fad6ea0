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

"""A Sentinel-managed Redis, set up as Kolla-Ansible sets up its Valkey.

Kolla-Ansible (2025.2 and later) gives services
``valkey_connection_string`` (``ansible/group_vars/all/valkey.yml``)::

    redis://default:PASSWORD@HOST1:26379?sentinel=kolla
        &sentinel_fallback=HOST2:26379&db=0
        &socket_timeout=60&retry_on_timeout=yes

Its servers ask for the password (``requirepass``, and ``masterauth``
so that any of them can be a replica), its sentinels ask for none and
monitor the master ``kolla`` with ``auth-pass``, a down-after of 5 s and
a failover timeout of 60 s. :class:`RedisSentinel` runs that on loopback
ports: a master, one replica and two sentinels, and its ``url`` has
Kolla's form, extras included (they change how a client waits: 60 s per
read, and a read that timed out is sent again).

Its master can be paused (SIGSTOP) rather than stopped: a host that dies
or drops off the network leaves its clients' connections open and
unanswered, which a stopped server (connection refused at once) does not
show.
"""

import os
import signal
import time

import fixtures
import redis

from ironic_affinity.tests.functional import servers

#: The master's name in Kolla's sentinel configuration.
MASTER_NAME = 'kolla'
#: Kolla's down-after: how long the master must not answer before a
#: sentinel takes it for down.
DOWN_AFTER = 5.0
#: Kolla's failover timeout; a sentinel whose failover attempt failed
#: (a split vote, say) waits twice this before the next.
FAILOVER_TIMEOUT = 60.0


class RedisNode(servers.RedisServer):
    """A redis-server of the set: a password like every Kolla server,
    ``masterauth`` too, and, given ``replica_of``, a replica of the
    server on that port."""

    def __init__(self, password: str, replica_of: int | None = None) -> None:
        super().__init__(password)
        self.replica_of = replica_of
        self.paused = False

    def command(self) -> list[str]:
        assert self.password is not None
        replica = []
        if self.replica_of is not None:
            replica = ['--replicaof', '127.0.0.1', str(self.replica_of)]
        return [*super().command(), '--masterauth', self.password, *replica]

    def client(self) -> 'redis.Redis[str]':
        return redis.Redis(
            port=self.port,
            password=self.password,
            socket_timeout=5,
            decode_responses=True,
        )

    def pause(self) -> None:
        """Freeze the server as a dead host's: connections stay open,
        nothing answers."""
        assert self.process is not None
        os.killpg(self.process.pid, signal.SIGSTOP)
        self.paused = True

    def resume(self) -> None:
        if self.process is not None and self.paused:
            os.killpg(self.process.pid, signal.SIGCONT)
        self.paused = False

    def stop(self) -> None:
        # A stopped process takes SIGTERM only once it runs again.
        self.resume()
        super().stop()


class SentinelProcess(servers.Server):
    """One sentinel, configured as Kolla configures its sentinels."""

    driver = 'redis'
    program = 'redis-server'

    def __init__(self, master_port: int, password: str, quorum: int) -> None:
        super().__init__()
        self.master_port = master_port
        self.password = password
        self.quorum = quorum

    def prepare(self) -> None:
        # In the fixture's folder: a sentinel rewrites its configuration
        # file with what it learns (replicas, other sentinels, epochs).
        self.config = os.path.join(self.dir, 'sentinel.conf')
        name = MASTER_NAME
        with open(self.config, 'w') as handle:
            handle.write(
                'port %d\n'
                'bind 127.0.0.1\n'
                'dir %s\n'
                'sentinel monitor %s 127.0.0.1 %d %d\n'
                'sentinel auth-pass %s %s\n'
                'sentinel down-after-milliseconds %s %d\n'
                'sentinel failover-timeout %s %d\n'
                'sentinel parallel-syncs %s 1\n'
                % (
                    self.port,
                    self.dir,
                    name, self.master_port, self.quorum,
                    name, self.password,
                    name, DOWN_AFTER * 1000,
                    name, FAILOVER_TIMEOUT * 1000,
                    name,
                )
            )  # fmt: skip

    def command(self) -> list[str]:
        return ['redis-server', self.config, '--sentinel']

    def client(self) -> 'redis.Redis[str]':
        return redis.Redis(
            port=self.port, socket_timeout=5, decode_responses=True
        )

    def master_port_now(self) -> int | None:
        """The master's port as this sentinel says it is now."""
        with self.client() as client:
            found = client.sentinel_get_master_addr_by_name(MASTER_NAME)
        return None if found is None else int(found[1])


class RedisSentinel(fixtures.Fixture):
    """A master, a replica and sentinels, with Kolla's URL.

    Set up only once every sentinel knows the replica and the other
    sentinels: else pausing the master could leave nothing to promote,
    or no majority to elect the sentinel that promotes it.
    """

    driver = 'redis+sentinel'

    def __init__(
        self,
        password: str | None = None,
        sentinels: int = 2,
        kolla_extras: bool = True,
    ) -> None:
        """:param kolla_extras: whether the URL has Kolla's
        ``socket_timeout=60&retry_on_timeout=yes``; without them a
        tooz client waits the member timeout per read, once."""
        super().__init__()
        self.password = password or 'S3cret-%s' % os.urandom(4).hex()
        self.sentinel_count = sentinels
        self.kolla_extras = kolla_extras

    def setUp(self) -> None:
        # Before Fixture.setUp, which would make a skip an error.
        servers.require_program('redis-server')
        super().setUp()

    def _setUp(self) -> None:
        self.master = self.useFixture(RedisNode(self.password))
        self.replica = self.useFixture(
            RedisNode(self.password, replica_of=self.master.port)
        )
        self._wait(self._replica_in_sync, 'the replica never synced')
        quorum = self.sentinel_count // 2 + 1
        self.sentinels = [
            self.useFixture(
                SentinelProcess(self.master.port, self.password, quorum)
            )
            for _ in range(self.sentinel_count)
        ]
        self._wait(self._sentinels_ready, 'the sentinels never met')
        # Where the logs are, as for a single server's fixture.
        self.dir = self.master.dir

    @property
    def url(self) -> str:
        first, *others = self.sentinels
        query = ['sentinel=%s' % MASTER_NAME]
        query += ['sentinel_fallback=127.0.0.1:%d' % s.port for s in others]
        query += ['db=0']
        if self.kolla_extras:
            query += ['socket_timeout=60', 'retry_on_timeout=yes']
        return 'redis://default:%s@127.0.0.1:%d?%s' % (
            self.password,
            first.port,
            '&'.join(query),
        )

    def logs(self) -> dict[str, str]:
        """Each process's log by role."""
        found = {}
        named = [('master', self.master), ('replica', self.replica)]
        named += [('sentinel-%d' % i, s) for i, s in enumerate(self.sentinels)]
        for role, server in named:
            path = os.path.join(server.dir, 'server.log')
            if os.path.exists(path):
                with open(path, errors='replace') as handle:
                    found[role] = handle.read()
        return found

    def pause_master(self) -> None:
        self.master.pause()

    def wait_promoted(self, timeout: float) -> float:
        """Wait until every sentinel names the replica as the master;
        return when that was (time.monotonic())."""

        def promoted() -> bool:
            return all(
                s.master_port_now() == self.replica.port
                for s in self.sentinels
            )

        self._wait(promoted, 'the replica was not promoted', timeout)
        return time.monotonic()

    def _replica_in_sync(self) -> bool:
        with self.replica.client() as client:
            info = client.info('replication')
        return info.get('master_link_status') == 'up'

    def _sentinels_ready(self) -> bool:
        for sentinel in self.sentinels:
            with sentinel.client() as client:
                state = client.sentinel_master(MASTER_NAME)
            if state['num-slaves'] < 1:
                return False
            if state['num-other-sentinels'] < self.sentinel_count - 1:
                return False
        return True

    def _wait(self, ready, failure: str, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while True:
            try:
                if ready():
                    return
            except redis.RedisError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError('%s within %s s' % (failure, timeout))
            time.sleep(0.2)
