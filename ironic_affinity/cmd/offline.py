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

"""The offline commands: ``plan SCENARIO`` and ``explain SCENARIO NODE``.

They read one file and import nothing that talks to a service (no tooz,
no SQLAlchemy, no Ironic), so they start fast and warn of nothing
wherever they run.
"""

from typing import Any

from oslo_log import log

from ironic_affinity import report
from ironic_affinity import scenario
from ironic_affinity.cmd import output
from ironic_affinity.cmd import render

LOG = log.getLogger(__name__)


def load(path: str, down: list[str]) -> scenario.Scenario:
    """The scenario at ``path``, with ``down`` checked against it."""
    loaded = scenario.load(path)
    output.check_down(loaded.conductor_names(), down, loaded.path)
    for conductor in loaded.conductors:
        conflicts = conductor.soft_conflicts()
        if conflicts:
            LOG.warning(
                '%(path)s: conductor %(name)s has %(tags)s in both soft '
                'lists; soft_anti_affinity_tags wins',
                {
                    'path': loaded.path,
                    'name': conductor.name,
                    'tags': ', '.join(sorted(conflicts)),
                },
            )
    return loaded


def plan(args: Any) -> int:
    loaded = load(args.scenario, args.down)
    result = report.plan(loaded.conductors, loaded.nodes, set(args.down))
    output.emit(result, render.render_plan(result, args.down), args.format)
    return 0


def explain(args: Any, path: str, node_name: str) -> int:
    loaded = load(path, args.down)
    node = loaded.node(node_name)
    result = report.explain(
        loaded.conductors, node, set(args.down), loaded.nodes
    )
    output.emit(result, render.render_explain(result), args.format)
    return 0
