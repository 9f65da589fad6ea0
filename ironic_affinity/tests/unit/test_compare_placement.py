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

"""tools/compare_placement.py: it asks the tree it is pointed at, finds
every difference, and its deployments meet every way to place."""

import importlib.util
import pathlib

from ironic_affinity import adoption
from ironic_affinity import placement
from ironic_affinity.tests import base

TOOL = pathlib.Path(__file__).resolve().parents[3] / 'tools'
TOOL = TOOL / 'compare_placement.py'


def _tool():
    spec = importlib.util.spec_from_file_location('compare_placement', TOOL)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class ComparePlacementTestCase(base.TestCase):
    def setUp(self):
        super().setUp()
        if not TOOL.exists():
            self.skipTest('no tools/ beside the package')
        self.tool = _tool()

    def test_the_child_asks_the_tree_it_is_given(self):
        cases = [self.tool.deployment(seed) for seed in (3, 11)]
        root = str(TOOL.parents[1])
        child = self.tool.answers(root, cases)
        here = [self.tool.Questions().answer(case) for case in cases]
        found, compared = self.tool.differences([3, 11], child, here)
        self.assertEqual([], found)
        self.assertGreater(compared, 100)

    def test_each_difference_is_listed(self):
        case = self.tool.deployment(5)
        before = self.tool.Questions().answer(case)
        now = dict(before)
        question = next(q for q in sorted(now) if q.startswith('ring '))
        now[question] = {'moved': True}
        del now['check']
        found, compared = self.tool.differences([5], [before], [now])
        self.assertEqual(len(before), compared)
        self.assertEqual(2, len(found))
        self.assertTrue(found[0].startswith('seed 5, check:'), found[0])
        self.assertIn('now:    null', found[0])
        self.assertTrue(found[1].startswith('seed 5, %s:' % question))
        self.assertIn('"moved": true', found[1])

    def test_the_cases_cover_every_way_to_place(self):
        # Plain, paced, under capacity and paced under capacity; a node
        # moving to each side of a switch, and one created during it.
        questions = self.tool.Questions()
        seen = set()
        sides = set()
        created_during = 0
        for seed in range(24):
            case = self.tool.deployment(seed)
            placer = placement.Placement(
                questions.conductor(c) for c in case['conductors']
            )
            switches = adoption.Adoption(
                adoption.Switch(s['to'], s['at'], s['period'])
                for s in case['switches']
            )
            nodes = [questions.node(n) for n in case['nodes']]
            for now in case['moments']:
                seen.add((placer.limited, placer.rolling(now) is not None))
                if now is None:
                    continue
                for node in nodes:
                    sides.update(
                        m.target for m in switches.pending_of(node, now)
                    )
            created_during += sum(
                1
                for node in nodes
                for s in switches.switches
                if node.created_at is not None
                and s.at <= node.created_at < s.ends_at()
            )
        self.assertEqual(
            {(False, False), (False, True), (True, False), (True, True)}, seen
        )
        self.assertEqual({'stock', 'affinity'}, sides)
        self.assertGreater(created_during, 0)
