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

"""Nodes that have changed conductor but not been taken over yet.

A node placed on a new conductor is not ready there at once: Ironic's
conductors take their nodes over in a periodic task
(``_sync_local_state``, every ``[conductor]sync_local_state_interval``,
at most ``[conductor]periodic_max_workers`` nodes a run), which prepares
the node's boot again and restarts its console, then records the
conductor in the node's ``conductor_affinity``. Until then the node's
boot assets stay where the conductor before left them, so operators
watch how many nodes still wait.

Pure: the placing side (rings, commands, metrics) says where nodes are,
Ironic's database says who last took them over.
"""

from collections.abc import Mapping


def pending(
    placed: Mapping[str, str | None],
    taken_by: Mapping[str, str | None],
) -> int:
    """How many nodes still await their takeover.

    Counts the nodes of ``taken_by`` that the ring places on a conductor
    other than the one that last took them over: those Ironic's periodic
    takeover will take, a few at a time. Not counted: a node the ring
    places on no conductor (none takes it over until one may; such nodes
    show as orphans), and a node missing from either mapping (not one
    Ironic takes over, or not placed yet).

    :param placed: uuid -> the conductor the ring places the node on
        now, None for none.
    :param taken_by: uuid -> hostname of the conductor that last took the
        node over (None for none known), for the nodes Ironic's takeover
        considers.
    """
    count = 0
    for uuid, holder in taken_by.items():
        conductor = placed.get(uuid)
        count += conductor is not None and conductor != holder
    return count
