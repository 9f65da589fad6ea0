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

"""Stand-ins for what the Ironic-facing layer reads: a clock, a member
view, Ironic's active conductors."""

from collections.abc import Callable
from collections.abc import Mapping
import types

from ironic_affinity import profile
from ironic_affinity.membership import view_snapshot
from ironic_affinity.tests import fake_clock


def booted_clock() -> fake_clock.Clock:
    """time.monotonic() as a host booted 5 s ago sees it: less than any
    reset interval, where a "read at time 0" mark would look fresh."""
    return fake_clock.Clock(5.0)


class Members:
    """A member view: set() publishes a new version."""

    def __init__(self) -> None:
        self.current = view_snapshot.EMPTY
        self.refreshes = 0
        #: Called by refresh_within(), as the group is read then.
        self.on_refresh: Callable[[], None] | None = None

    def set(
        self,
        members: Mapping[str, profile.ConductorProfile] | list[str],
        stale: bool = False,
    ) -> None:
        if isinstance(members, list):
            members = {
                name: profile.ConductorProfile(name) for name in members
            }
        self.current = view_snapshot.Snapshot(
            self.current.version + 1,
            types.MappingProxyType(dict(members)),
            types.MappingProxyType({}),
            0.0,
            error='backend away' if stale else None,
        )

    def snapshot(self) -> view_snapshot.Snapshot:
        return self.current

    def refresh_within(self, seconds: float) -> view_snapshot.Snapshot:
        self.refreshes += 1
        if self.on_refresh is not None:
            self.on_refresh()
        return self.current


class ActiveConductors:
    """Ironic's active conductors: counts reads, can fail."""

    def __init__(self, active: dict[str, set[str]] | None = None) -> None:
        self.active = active or {}
        #: Live, with no hardware type: between a restart's two writes.
        self.registering: set[str] = set()
        self.reads = 0
        self.error: Exception | None = None

    def __call__(self) -> dict[str, set[str]]:
        self.reads += 1
        if self.error is not None:
            raise self.error
        return {key: set(hosts) for key, hosts in self.active.items()}

    def live(self) -> tuple[dict[str, set[str]], frozenset[str]]:
        """Both, as ``Database.live_conductors`` reads them."""
        return self(), frozenset(self.registering)
