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

"""Warn once when a dependency stops answering, log once when it answers.

Every background reader of this project (membership beats, the member
view, the node tag cache, the active-conductor source) retries every few
seconds while its backend is away. A warning per retry would bury the
one line an operator needs; silence would hide the outage. So each keeps
an :class:`Outage`: the first failure warns, the ones after it are only
counted, and the first success after them logs how long it lasted.

Pure bookkeeping: the caller passes the logger, so that log lines keep
naming the module that knows what failed.
"""

from collections.abc import Callable
import logging
import threading
import time
from typing import Any

Clock = Callable[[], float]


class Outage:
    """The state of one dependency: answering, or failing since when."""

    def __init__(self, log: Any, clock: Clock = time.monotonic) -> None:
        """:param log: a logger (oslo.log's adapter or a stdlib one)."""
        self._log = log
        self._clock = clock
        self._lock = threading.Lock()
        #: clock() of the first failure of the current outage, or None.
        self.since: float | None = None
        #: Failures in the current outage.
        self.failures = 0

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
        with self._lock:
            self.failures += 1
            if self.since is not None:
                return False
            self.since = self._clock()
        # An empty mapping is no mapping to the logging module: it would
        # format the message with a tuple holding it, and fail.
        self._log.log(level, message, *([args] if args else []))
        return True

    def recovered(self, message: str, args: dict[str, Any]) -> bool:
        """Record a success; log ``message % args`` if it ends an outage.

        ``args`` gets ``seconds``, the outage's length, added to it.

        :returns: True when this success ended an outage.
        """
        with self._lock:
            if self.since is None:
                return False
            seconds = self._clock() - self.since
            self.since = None
            self.failures = 0
        self._log.info(message, {**args, 'seconds': seconds})
        return True
