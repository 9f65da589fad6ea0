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

"""What a member view publishes: the members seen at one moment, never
mutated once published, and what changed from one to the next."""

from collections.abc import Mapping
import dataclasses
import time
import types
from typing import Any

from ironic_affinity import profile
from ironic_affinity.membership import levels


@dataclasses.dataclass(frozen=True)
class Snapshot:
    """The members seen at one moment. Never mutated once published."""

    version: int
    members: Mapping[str, profile.ConductorProfile]
    # Members left out of placement, with the reason.
    rejected: Mapping[str, str]
    # time.monotonic() (the view's clock) of the last successful read;
    # None before any.
    read_at: float | None
    # Why the last read failed; None when it succeeded.
    error: str | None = None
    # Members kept from before an outage that have not rejoined yet.
    held: frozenset[str] = frozenset()
    # What each member read says it runs, left out of ``version``: no
    # placement depends on it.
    runs: Mapping[str, levels.Runs] = dataclasses.field(
        default_factory=lambda: types.MappingProxyType({})
    )

    @property
    def stale(self) -> bool:
        return self.error is not None

    def age(self) -> float | None:
        """Seconds since the view was last read successfully."""
        if self.read_at is None:
            return None
        return time.monotonic() - self.read_at


EMPTY = Snapshot(
    0, types.MappingProxyType({}), types.MappingProxyType({}), None
)


def log_change(
    log: Any,
    group: bytes,
    before: Mapping[str, profile.ConductorProfile],
    after: Mapping[str, profile.ConductorProfile],
) -> None:
    """Say who joined or left this process's view, and at DEBUG whose
    profile changed: what a process placed by is then in its log."""
    joined = sorted(after.keys() - before.keys())
    left = sorted(before.keys() - after.keys())
    if joined or left:
        log.info(
            'Group %(group)s as read by this process: %(count)d '
            'member(s); joined: %(joined)s; left: %(left)s',
            {
                'group': group.decode(),
                'count': len(after),
                'joined': ', '.join(joined) or '-',
                'left': ', '.join(left) or '-',
            },
        )
    changed = sorted(
        name
        for name in after.keys() & before.keys()
        if after[name] != before[name]
    )
    if changed:
        log.debug(
            'New profile published by %(names)s',
            {'names': ', '.join(changed)},
        )
