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

Pure: shared by the ring manager inside Ironic and by the live operator
commands, so that both always agree on the candidates.
"""

from collections.abc import Mapping
import dataclasses

from ironic_affinity import profile

# Ironic's active conductors: 'group:hardware_type' -> conductor names.
ActiveConductors = Mapping[str, set[str]]


def live_profiles(
    members: Mapping[str, profile.ConductorProfile],
    active: ActiveConductors,
) -> list[profile.ConductorProfile]:
    """Profiles of the members that are active in Ironic.

    Ironic's database says what a conductor runs (hardware types, group);
    the membership group says that it is alive and what its tags are.
    """
    runs: dict[str, set[str]] = {}
    groups: dict[str, str] = {}
    for group_driver, hosts in active.items():
        group, _sep, driver = group_driver.rpartition(':')
        for host in hosts:
            runs.setdefault(host, set()).add(driver)
            groups[host] = group
    return [
        dataclasses.replace(
            member,
            hardware_types=frozenset(runs[name]),
            conductor_group=groups[name].lower(),
        )
        for name, member in sorted(members.items())
        if name in runs
    ]


def not_members(
    members: Mapping[str, profile.ConductorProfile],
    active: ActiveConductors,
) -> frozenset[str]:
    """Conductors active in Ironic that are not in the group."""
    hosts = set().union(*active.values()) if active else set()
    return frozenset(hosts - set(members))
