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

"""The ways the plugin reaches an Ironic process, named once for the
ring loader, the launchers and the upgrade check; importing nothing of
Ironic's, so that the upgrade check runs without it.
"""

from types import ModuleType

#: This plugin's name in Ironic's own namespace of hash-ring managers
#: (``ironic.hash_ring_managers``), for ``[DEFAULT]hash_ring_manager``.
IRONIC_NAME = 'affinity'

#: What a process enabled by that option says it was enabled by.
BY_IRONIC_CONF = 'ironic.conf'
#: What an API process says that has that option but not the middleware:
#: it places by affinity, but refuses no bad tags at its door, and its
#: node writes reach the tag readers only at their next full read.
BY_IRONIC_CONF_WITHOUT_MIDDLEWARE = 'ironic.conf, without [api]middleware'


#: Ironic's own manager's name in that namespace, its default.
IRONIC_DEFAULT = 'consistent-hash'


def ironic_loads_by_name(hash_ring: ModuleType) -> bool:
    """Whether Ironic's ``ironic.common.hash_ring`` loads its manager by
    ``[DEFAULT]hash_ring_manager`` (change A of contrib/ironic/)."""
    return hasattr(hash_ring, 'get_hash_ring_manager_class')


def ironic_has_hook(hash_ring: ModuleType) -> bool:
    """Whether Ironic loads its manager by name and also tells it of its
    conductor's start and stop (changes A and B of contrib/ironic/):
    without those hooks the plugin would not know its conductor, so
    ironic.conf alone enables it only with both."""
    base = getattr(hash_ring, 'BaseHashRingManager', None)
    return ironic_loads_by_name(hash_ring) and hasattr(
        base, 'conductor_started'
    )
