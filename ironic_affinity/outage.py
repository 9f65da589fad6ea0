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

"""Warn once when something goes wrong, log once when it is back.

Every background reader of this project retries every few seconds while
its backend is away, and every ring lookup may meet the same orphaned
node again. A line per retry or lookup would bury the one an operator
needs; silence would hide the fault. So each keeps :class:`Conditions`:
a condition is logged when it starts or what it says changes, and once
when it ends, with how long it lasted. :class:`Outage` is one condition,
a dependency failing, with its failures counted.

Pure bookkeeping: the caller passes the logger, so that log lines keep
naming the module that knows what failed.
"""

from collections.abc import Callable
from collections.abc import Hashable
from collections.abc import Mapping
import logging
import threading
import time
from typing import Any
from typing import Generic
from typing import TypeVar

Clock = Callable[[], float]
K = TypeVar('K', bound=Hashable)


def _log(log: Any, level: int, message: str, args: Mapping[str, Any]) -> None:
    # An empty mapping is no mapping to the logging module: it would
    # format the message with a tuple holding it, and fail.
    log.log(level, message, *([args] if args else []))


class Conditions(Generic[K]):
    """Conditions by key, each clear or in a state, and since when."""

    def __init__(self, log: Any, clock: Clock = time.monotonic) -> None:
        """:param log: a logger (oslo.log's adapter or a stdlib one)."""
        self._log = log
        self._clock = clock
        self._lock = threading.Lock()
        # Key -> (state, clock() when it was raised).
        self._held: dict[K, tuple[Hashable, float]] = {}

    def raised(
        self,
        key: K,
        state: Hashable,
        message: str | None = None,
        args: Mapping[str, Any] | None = None,
        level: int = logging.WARNING,
    ) -> bool:
        """``key`` is in ``state``: log ``message % args`` if it was clear
        or in another state (it keeps the time it was first raised).

        :returns: True when the key was clear or in another state.
        """
        with self._lock:
            held = self._held.get(key)
            if held is not None and held[0] == state:
                return False
            self._held[key] = (
                state,
                self._clock() if held is None else held[1],
            )
        if message is not None:
            _log(self._log, level, message, args or {})
        return True

    def cleared(
        self,
        key: K,
        message: str | None = None,
        args: Mapping[str, Any] | None = None,
    ) -> Hashable | None:
        """``key`` is clear: log ``message % args`` at INFO if it was
        raised; ``args`` gets ``seconds``, how long it was.

        :returns: the state it was in, None when it was clear.
        """
        with self._lock:
            held = self._held.pop(key, None)
        if held is None:
            return None
        if message is not None:
            seconds = self._clock() - held[1]
            self._log.info(message, {**(args or {}), 'seconds': seconds})
        return held[0]

    def state(self, key: K) -> Hashable | None:
        """The key's state; None when it is clear."""
        held = self._held.get(key)
        return None if held is None else held[0]

    def since(self, key: K) -> float | None:
        """clock() when the key was raised; None when it is clear."""
        held = self._held.get(key)
        return None if held is None else held[1]

    def keys(self) -> frozenset[K]:
        """The keys raised now."""
        with self._lock:
            return frozenset(self._held)


class Outage:
    """The state of one dependency: answering, or failing since when."""

    def __init__(self, log: Any, clock: Clock = time.monotonic) -> None:
        """:param log: a logger (oslo.log's adapter or a stdlib one)."""
        self._conditions: Conditions[None] = Conditions(log, clock)
        self._clock = clock
        #: Failures in the current outage.
        self.failures = 0

    @property
    def since(self) -> float | None:
        """clock() of the first failure of the current outage, or None."""
        return self._conditions.since(None)

    @property
    def failing(self) -> bool:
        return self.since is not None

    def duration(self) -> float:
        """Seconds the current outage has lasted; 0 when there is none."""
        since = self.since
        return 0.0 if since is None else self._clock() - since

    def failed(
        self,
        message: str,
        args: dict[str, Any],
        level: int = logging.WARNING,
    ) -> bool:
        """Record a failure; log ``message % args`` if it starts an outage.

        :returns: True when this failure started the outage.
        """
        self.failures += 1
        return self._conditions.raised(None, True, message, args, level)

    def recovered(self, message: str, args: dict[str, Any]) -> bool:
        """Record a success; log ``message % args`` if it ends an outage.

        ``args`` gets ``seconds``, the outage's length, added to it.

        :returns: True when this success ended an outage.
        """
        if self._conditions.cleared(None, message, args) is None:
            return False
        self.failures = 0
        return True
