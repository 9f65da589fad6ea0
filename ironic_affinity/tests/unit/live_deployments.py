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

"""Deployments as ``live.read`` returns them, for the tests of the
commands and the API that answer from one."""

from ironic_affinity import adoption
from ironic_affinity import profile
from ironic_affinity.integration.data import live


def two_racks(
    agreement: adoption.Agreement, taken_by: dict[str, str]
) -> live.Deployment:
    """Conductors c1 (rack10) and c2 (rack20); node n1 (uuid u1) is
    tagged rack20, so placed on c2, and n2 (u2) rack10, so on c1.

    :param taken_by: node uuid to the conductor that took it over last.
    """
    build = profile.ConductorProfile.build
    return live.Deployment(
        conductors=(
            build('c1', soft_affinity_tags='rack10'),
            build('c2', soft_affinity_tags='rack20'),
        ),
        nodes=(
            profile.NodeRequest.build('n1', 'rack20', uuid='u1'),
            profile.NodeRequest.build('n2', 'rack10', uuid='u2'),
        ),
        not_members=frozenset(),
        bad_tags={},
        agreement=agreement,
        taken_by=taken_by,
    )
