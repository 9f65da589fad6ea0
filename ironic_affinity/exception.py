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

"""The errors ironic-affinity raises, each naming what is wrong."""


class AffinityError(Exception):
    """Base class of every error this project raises on purpose."""


class InvalidTag(AffinityError, ValueError):
    """A tag or tag list does not follow the tag grammar."""


class ConflictingTags(AffinityError, ValueError):
    """A conductor's tag lists contradict each other."""


class InvalidCapacity(AffinityError, ValueError):
    """A conductor's max_nodes is not a number of nodes."""


class InvalidScenario(AffinityError):
    """A scenario file for ``plan`` or ``explain`` cannot be used."""


class InvalidCapabilities(AffinityError, ValueError):
    """A group member published capabilities that cannot be trusted."""


class InvalidTimers(AffinityError, ValueError):
    """Membership timers that would leave a conductor no lease."""


class MembershipUnavailable(AffinityError):
    """The coordination backend cannot be reached or read."""


class UnknownHashRingManager(AffinityError):
    """The affinity hash-ring manager's entry point is not installed."""


class UsageError(AffinityError):
    """A command line that parses but asks for something impossible."""


class BackendLibraryMissing(AffinityError):
    """The coordination backend's client library is not installed."""


class NodeTagsUnreadable(AffinityError):
    """A node's tags are needed and its row cannot be read."""
