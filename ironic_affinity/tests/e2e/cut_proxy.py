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

"""A TCP proxy that a test can cut, to put one process off a server.

Each Ironic process of a deployment under fault injection reaches Redis
and PostgreSQL through proxies of its own (deployment.py), so that one
process can lose a server the others still reach: what a broken link or
a firewall does to one host. Two ways to cut:

* ``refuse``: the port stops listening (new connections are refused) and
  every open connection is reset, as a host whose server went away;
* ``blackhole``: nothing is forwarded any more, either way, and new
  connections are left in the listen queue unanswered, as a link whose
  packets are dropped: the client finds out only by its own timeouts.

``heal()`` restores forwarding: after a refusal the port listens again,
and after a black hole what was held back flows on, as TCP retransmits
it once the link is back.
"""

import socket
import struct
import threading


class CutProxy:
    """Forwards 127.0.0.1:``port`` to ``target`` until cut."""

    def __init__(self, target_host: str, target_port: int) -> None:
        self.target = (target_host, target_port)
        self._listener = self._listen(0)
        self.port: int = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        # Set while data flows; cleared by a black hole.
        self._flowing = threading.Event()
        self._flowing.set()
        self._connections: list[tuple[socket.socket, socket.socket]] = []
        self._closed = False
        self.mode = 'open'
        self._accepting = self._start_accepting(self._listener)

    @staticmethod
    def _listen(port: int) -> socket.socket:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(('127.0.0.1', port))
        listener.listen(64)
        return listener

    def _start_accepting(self, listener: socket.socket) -> threading.Thread:
        thread = threading.Thread(
            target=self._accept, args=(listener,), daemon=True
        )
        thread.start()
        return thread

    def _accept(self, listener: socket.socket) -> None:
        while True:
            # A black hole accepts nothing: new connections wait in the
            # listen queue, unanswered.
            self._flowing.wait()
            try:
                client, _address = listener.accept()
            except OSError:
                return  # closed: refused, or the proxy stopped
            try:
                upstream = socket.create_connection(self.target, 10)
            except OSError:
                _reset(client)
                continue
            upstream.settimeout(None)
            with self._lock:
                if self.mode == 'refuse' or self._closed:
                    _reset(client)
                    _reset(upstream)
                    continue
                self._connections.append((client, upstream))
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(
                    target=self._pump,
                    args=(source, sink, client, upstream),
                    daemon=True,
                ).start()

    def _pump(
        self,
        source: socket.socket,
        sink: socket.socket,
        client: socket.socket,
        upstream: socket.socket,
    ) -> None:
        try:
            while True:
                self._flowing.wait()
                data = source.recv(65536)
                if not data:
                    break
                # Held back by a black hole that began during the read.
                self._flowing.wait()
                sink.sendall(data)
        except OSError:
            pass
        with self._lock:
            if (client, upstream) in self._connections:
                self._connections.remove((client, upstream))
        for sock in (client, upstream):
            _close(sock)

    def cut(self, mode: str) -> None:
        """Cut the link: ``refuse`` or ``blackhole`` (module docstring)."""
        if mode not in ('refuse', 'blackhole'):
            raise ValueError('mode must be refuse or blackhole')
        if mode == 'blackhole':
            with self._lock:
                self.mode = mode
            self._flowing.clear()
            return
        with self._lock:
            self.mode = mode
            connections, self._connections = self._connections, []
        _close(self._listener)
        for client, upstream in connections:
            _reset(client)
            _reset(upstream)

    def heal(self) -> None:
        """Forward again."""
        with self._lock:
            mode, self.mode = self.mode, 'open'
        if mode == 'refuse':
            self._listener = self._listen(self.port)
            self._accepting = self._start_accepting(self._listener)
        self._flowing.set()

    def stop(self) -> None:
        with self._lock:
            self._closed = True
            connections, self._connections = self._connections, []
        self._flowing.set()
        _close(self._listener)
        for client, upstream in connections:
            _close(client)
            _close(upstream)


def _reset(sock: socket.socket) -> None:
    """Close with a reset (RST), as a peer that is gone."""
    try:
        sock.setsockopt(
            socket.SOL_SOCKET, socket.SO_LINGER, struct.pack('ii', 1, 0)
        )
    except OSError:
        pass
    _close(sock)


def _close(sock: socket.socket) -> None:
    # shutdown first: close alone does not wake a thread blocked in
    # recv() on the socket.
    try:
        sock.shutdown(socket.SHUT_RD)
    except OSError:
        pass
    try:
        sock.close()
    except OSError:
        pass
