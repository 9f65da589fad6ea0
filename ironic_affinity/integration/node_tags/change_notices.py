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

"""Which nodes an API process has just written, told to the tag reader.

Every node create, update and delete through Ironic's API passes the
affinity middleware, which notes the node here once Ironic has answered
it with success (so the write is committed). The API process publishes
the last :data:`KEPT` of them, numbered, in its entry of the API group,
which it keeps alive anyway; the process that reads the nodes table
reads that group once per interval and then only those nodes' rows, by
Ironic's unique uuid and name indexes. Writes that bypass the API
(inspection rules in the conductor, a direct database edit) are left to
its periodic full read.

A reader that finds more new notices than an entry keeps knows that it
missed some, and reads every node instead.
"""

from collections.abc import Mapping
import os
import threading
from typing import Any

from oslo_config import cfg

from ironic_affinity.membership import capabilities
from ironic_affinity.membership import levels
from ironic_affinity.membership import service

KEPT = 64
KEY = 'node_changes'
# Each key of an API process's entry with its format level
# (membership/levels.py).
_KEYS = {'format': 1, 'role': 1, KEY: 1, **levels.DESCRIPTIVE}


class ChangeNotices:
    """The node writes of this process, numbered; thread-safe."""

    def __init__(
        self,
        conf: cfg.ConfigOpts | None = None,
        enabled_by: str | None = None,
    ) -> None:
        """:param conf: this process's options: what it runs is published
            beside the notices, for the upgrade check; None publishes the
            notices alone.
        :param enabled_by: how the plugin reached this API process
            (ring.loader.enabled_by).
        """
        self._lock = threading.Lock()
        self._seq = 0
        self._recent: list[str] = []
        self._about = {} if conf is None else levels.describe(conf, enabled_by)
        self._level = levels.LEVEL if conf is None else levels.writes(conf)

    def record(self, ident: str) -> None:
        with self._lock:
            self._seq += 1
            self._recent = (self._recent + [ident])[-KEPT:]

    def capabilities(self) -> dict[str, object]:
        """This API process's entry, with the notices."""
        with self._lock:
            found: dict[str, object] = {
                'format': capabilities.FORMAT_VERSION,
                'role': 'api',
                KEY: {'seq': self._seq, 'recent': list(self._recent)},
                **self._about,
            }
        return levels.at_level(found, _KEYS, self._level)


# The node writes this process's API answered, by pid: a forked child
# starts its own.
_NOTICES: dict[int, ChangeNotices] = {}


def announce(conf: cfg.ConfigOpts, enabled_by: str | None) -> None:
    """Keep this API process in the API group, with its notices.

    :param enabled_by: how the plugin reached this process, published
        for the upgrade check (ring.loader.enabled_by).
    """
    notices = _NOTICES.setdefault(os.getpid(), ChangeNotices(conf, enabled_by))
    service.announce_api(conf, notices.capabilities)


def note_node_written(
    conf: cfg.ConfigOpts, node: str, enabled_by: str | None
) -> None:
    """Tell the node tags reader that this API process just wrote
    ``node`` (a uuid or name). Cheap: the entry is published by the
    announcement's own thread."""
    notices = _NOTICES.setdefault(os.getpid(), ChangeNotices(conf, enabled_by))
    notices.record(node)
    service.announce_api(conf, notices.capabilities).update(
        notices.capabilities()
    )


def decode(raw: Any) -> tuple[int, list[str]] | None:
    """(number of the last notice, the last notices) of an entry; None
    for an entry without them or a bad one, whose writes readers see at
    their next full read."""
    if not isinstance(raw, dict):
        return None
    found = raw.get(KEY)
    if not isinstance(found, dict):
        return None
    seq, recent = found.get('seq'), found.get('recent')
    if (
        not isinstance(seq, int)
        or isinstance(seq, bool)
        or seq < 0
        or not isinstance(recent, list)
        or len(recent) > KEPT
        or not all(isinstance(i, str) and 0 < len(i) <= 255 for i in recent)
    ):
        return None
    return seq, recent


class NoticeTracker:
    """The tag reader's side: what is new in the API entries since the
    last look."""

    def __init__(self) -> None:
        self._seen: dict[str, int] = {}
        self._primed = False

    def prime(self, entries: Mapping[str, Any]) -> None:
        """Take every notice there is as handled (a full read covers
        them), so that only later ones are read."""
        self._seen = {}
        for name, raw in entries.items():
            found = decode(raw)
            if found is not None:
                self._seen[name] = found[0]
        self._primed = True

    @property
    def seen(self) -> dict[str, int]:
        """The number of the last notice read, by API process."""
        return dict(self._seen)

    def adopt(self, seen: Mapping[str, int]) -> None:
        """Carry on from where another reader was (see :attr:`seen`):
        notices after those are new."""
        self._seen = dict(seen)
        self._primed = True

    def new(self, entries: Mapping[str, Any]) -> tuple[set[str], bool]:
        """The nodes noted since the last call, and whether some notices
        were missed (more than an entry keeps, or never primed)."""
        if not self._primed:
            return set(), True
        idents: set[str] = set()
        missed = False
        # Entries absent from this read are kept: the file driver's
        # update is a leave and a join, which a read can fall between.
        seen = dict(self._seen)
        for name, raw in entries.items():
            found = decode(raw)
            if found is None:
                continue
            seq, recent = found
            # An entry first seen now is a new API process: all it noted
            # is new. A number that went back is a restarted one under
            # the same name.
            last = self._seen.get(name, 0)
            if seq < last:
                last = 0
            fresh = seq - last
            if fresh > len(recent):
                missed = True
            elif fresh:
                idents.update(recent[-fresh:])
            seen[name] = seq
        self._seen = seen
        return idents, missed
