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

"""Who may take nodes: group members that Ironic lists as active.

Ironic's database says what a conductor runs (hardware types, group) and
whether it has finished starting; the membership group says that it is
alive and what its tags are. Only a conductor in both may take nodes.

Pure: shared by the ring manager inside Ironic and by the live operator
commands, so that both always agree on who may take nodes.
"""

from collections.abc import Mapping
from collections.abc import Set
import dataclasses

from ironic_affinity import adoption
from ironic_affinity import profile

# Ironic's active conductors, as its get_active_hardware_type_dict gives
# them: 'group:hardware_type' -> conductor names with groups, and
# 'hardware_type' -> names without.
ActiveConductors = Mapping[str, Set[str]]


def split_key(key: str) -> tuple[str, str]:
    """('group', 'hardware_type') of a key of :data:`ActiveConductors`;
    the group is '' for a key without one."""
    group, _sep, hardware_type = key.rpartition(':')
    return group, hardware_type


def without_groups(active: ActiveConductors) -> dict[str, frozenset[str]]:
    """The same conductors keyed by hardware type alone, every group
    merged, as Ironic reads them for a ring built without groups."""
    merged: dict[str, set[str]] = {}
    for key, hosts in active.items():
        merged.setdefault(split_key(key)[1], set()).update(hosts)
    return {key: frozenset(hosts) for key, hosts in merged.items()}


def profiles(
    members: Mapping[str, profile.ConductorProfile],
    active: ActiveConductors,
) -> list[profile.ConductorProfile]:
    """Profiles of the members that are active in Ironic, by name.

    Hardware types and group come from Ironic (``active``), tags from the
    published profile. Keys without a group give group ''.
    """
    runs: dict[str, set[str]] = {}
    groups: dict[str, str] = {}
    for key, hosts in active.items():
        group, hardware_type = split_key(key)
        for host in hosts:
            runs.setdefault(host, set()).add(hardware_type)
            groups[host] = group
    return [
        _as_active(member, frozenset(runs[name]), groups[name].lower())
        for name, member in sorted(members.items())
        if name in runs
    ]


def _as_active(
    member: profile.ConductorProfile, runs: frozenset[str], group: str
) -> profile.ConductorProfile:
    # The profiles a rolling change started from too: Ironic says what a
    # conductor runs now, and a change of tags is what is paced.
    changes = tuple(
        dataclasses.replace(
            change,
            before=(
                None
                if change.before is None
                else dataclasses.replace(
                    change.before, hardware_types=runs, conductor_group=group
                )
            ),
        )
        for change in member.changes
    )
    return dataclasses.replace(
        member, hardware_types=runs, conductor_group=group, changes=changes
    )


def missing_from_group(
    members: Mapping[str, profile.ConductorProfile],
    active: ActiveConductors,
) -> frozenset[str]:
    """Conductors active in Ironic that are not in the group."""
    hosts: set[str] = set()
    for found in active.values():
        hosts.update(found)
    return frozenset(hosts - set(members))


def agreement(
    members: Mapping[str, profile.ConductorProfile],
    active: ActiveConductors,
    previous: adoption.Agreement | None = None,
) -> adoption.Agreement:
    """Where the deployment stands between Ironic's ring and affinity
    placement (:func:`adoption.agree`): the members' votes and histories,
    and the conductors Ironic lists that are not members."""
    return adoption.agree(
        {name: c.switching for name, c in members.items()},
        missing_from_group(members, active),
        previous,
    )
