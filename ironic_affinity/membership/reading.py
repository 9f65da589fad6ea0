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

"""Every member of a group with its capabilities, on any supported tooz.

tooz 9.1.0 added ``get_members_with_capabilities``; its base class raises
NotImplemented, and only the file, Redis, etcd3gw, ZooKeeper and
memcached drivers override it. Older tooz, and the other drivers of
9.1.0, get the member list and then each member's capabilities.

A group that does not exist is not an unreadable one: nobody has joined
it yet, or the backend restarted without its data. :func:`member_names`
and :func:`members_by_name` say so with None, which every caller either
reads as "no members" or, the view, as news of its own.
"""

from collections.abc import Callable
import time
from typing import Any
from typing import TypeVar

from tooz import coordination

from ironic_affinity.membership import backend

T = TypeVar('T')


def _unless_missing(read: Callable[[], T]) -> T | None:
    """``read()``, or None when the group it reads does not exist."""
    try:
        return read()
    except coordination.GroupNotCreated:
        return None


def member_names(
    coordinator: coordination.CoordinationDriver,
    group: bytes,
    timeout: float,
) -> set[str] | None:
    """The names of the group's members; None when there is no group.

    :raises: tooz errors when the backend cannot be read.
    """
    found = _unless_missing(
        lambda: coordinator.get_members(group).get(timeout=timeout)
    )
    if found is None:
        return None
    return {backend.decode_member_id(m) for m in found}


def members_by_name(
    coordinator: coordination.CoordinationDriver,
    group: bytes,
    timeout: float,
) -> dict[str, object] | None:
    """Each member's name with its capabilities; None when there is no
    group.

    :raises: tooz errors when the backend cannot be read.
    """
    found = _unless_missing(
        lambda: members_with_capabilities(coordinator, group, timeout)
    )
    if found is None:
        return None
    return {backend.decode_member_id(m): c for m, c in found.items()}


def members_with_capabilities(
    coordinator: coordination.CoordinationDriver,
    group: bytes,
    timeout: float,
) -> dict[Any, object]:
    """Map each member id (as the driver returns it) to its capabilities.

    Waits at most ``timeout`` seconds in all for answers, however many
    calls it makes. (tooz 9.1.0's ZooKeeper driver reads each member's
    node after that wait, one by one, under kazoo's own timeout.)

    :raises: coordination.GroupNotCreated when the group does not exist;
        any other tooz error when the backend cannot be read.
    """
    deadline = time.monotonic() + timeout
    read_all = getattr(coordinator, 'get_members_with_capabilities', None)
    if read_all is not None:
        try:
            return dict(read_all(group).get(timeout=timeout))
        except NotImplementedError:
            pass
    members = coordinator.get_members(group).get(
        timeout=max(0.0, deadline - time.monotonic())
    )
    # Ask for every member before waiting for any: ZooKeeper pipelines
    # the requests, so their round trips overlap instead of adding up.
    # (Redis, etcd and the file driver run calls on one worker thread
    # each and still serve them one by one.)
    pending = [
        (member, coordinator.get_member_capabilities(group, member))
        for member in members
    ]
    found: dict[Any, object] = {}
    for member, result in pending:
        try:
            found[member] = result.get(
                timeout=max(0.0, deadline - time.monotonic())
            )
        except coordination.MemberNotJoined:
            # It left (or expired) after the list was read: it is gone,
            # which is not a failure to read the group.
            continue
    return found
