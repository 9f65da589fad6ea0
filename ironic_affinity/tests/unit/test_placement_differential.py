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

"""The placement pipeline answers what each consumer answered before it.

Random deployments (tags, groups, hardware types, capacities, changes in
progress, several moments) are placed by ``plan``, ``explain``,
``check``, the rings and the metrics twice: with the code of now, and
with the code of :data:`placement_reference.REFERENCE`, the commit before
the pipeline, run from that commit's tree in another process. The
answers must be identical, node by node.

The reference tree is read from git. Outside a git checkout holding that
commit (an unpacked sdist), the test is skipped and says why.
"""

import json
import os
import pathlib
import random
import shutil
import subprocess
import sys
import tarfile
import tempfile
import uuid as uuidlib

from ironic_affinity import adoption
from ironic_affinity import placement
from ironic_affinity import report
from ironic_affinity.integration import placement_metrics
from ironic_affinity.integration.data import live
from ironic_affinity.integration.data import node_facts
from ironic_affinity.integration.ring import capacity_state
from ironic_affinity.integration.ring import rings
from ironic_affinity.tests import base
from ironic_affinity.tests.unit import placement_reference as reference

ROOT = pathlib.Path(__file__).resolve().parents[3]
SEEDS = range(24)
START = 1_800_000_000.0
TAGS = ('rack1', 'rack2', 'rack3', 'gpu', 'dc1', 'dc2', 'fast')
DRIVERS = ('ipmi', 'redfish')


def _tags(rnd, most):
    return sorted(rnd.sample(TAGS, rnd.randint(0, most)))


def _weighted(rnd):
    return ','.join(
        '%s:%d' % (t, rnd.randint(1, 3)) if rnd.random() < 0.5 else t
        for t in _tags(rnd, 2)
    )


def _conductor(rnd, name, groups, limited):
    spec = {
        'name': name,
        'soft': _weighted(rnd),
        'soft_anti': _weighted(rnd) if rnd.random() < 0.3 else '',
        'group': rnd.choice(groups),
        'hardware_types': (
            list(DRIVERS) if rnd.random() < 0.7 else [rnd.choice(DRIVERS)]
        ),
        'max_nodes': rnd.randint(3, 12) if limited else 0,
    }
    if rnd.random() < 0.25:
        spec['hard'] = ','.join(_tags(rnd, 1))
    if rnd.random() < 0.25:
        spec['hard_anti'] = ','.join(
            t for t in _tags(rnd, 1) if t not in spec.get('hard', '')
        )
    return spec


def deployment(seed):
    """One random deployment, with its moments, as JSON."""
    rnd = random.Random(seed)
    groups = [''] if rnd.random() < 0.6 else ['', 'east']
    limited = rnd.random() < 0.5
    conductors = []
    for index in range(rnd.randint(2, 6)):
        name = 'c%d' % index
        spec = _conductor(rnd, name, groups, limited)
        changes = []
        for _ in range(rnd.choice((0, 0, 1, 1, 2))):
            # Joined, or changed from another profile, during the
            # minute around START.
            before = (
                None
                if not changes and rnd.random() < 0.3
                else _conductor(rnd, name, groups, limited)
            )
            changes.append(
                {
                    'before': before,
                    'at': START + rnd.uniform(-40, 20),
                    'period': rnd.choice((30.0, 60.0, 90.0)),
                }
            )
        changes.sort(key=lambda c: c['at'])
        spec['changes'] = changes
        conductors.append(spec)
    nodes = [
        {
            'uuid': str(uuidlib.UUID(int=rnd.getrandbits(128), version=4)),
            'tags': _tags(rnd, 3),
            'driver': rnd.choice(DRIVERS),
            'group': rnd.choice(groups),
        }
        for _ in range(rnd.randint(10, 45))
    ]
    moments = [None, START - 60, START + 5, START + 30, START + 200]
    return {'conductors': conductors, 'nodes': nodes, 'moments': moments}


class Answers:
    """The consumers as the code of now has them."""

    report = report

    def rings(self, conductors, nodes, now):
        placer = placement.Placement(conductors)
        tags = reference.FakeTags(node_facts.NodeFacts, nodes)
        states = capacity_state.CapacityStates(
            tags,
            lambda: reference.INTERVAL,
            reference.Quiet(),
            clock=lambda: 0.0,
            pause=lambda: None,
            wall_clock=lambda: now,
        )
        under = states.lookup(placer, True)

        def make_ring(driver, group):
            return rings.AffinityRing(
                placer,
                driver,
                group,
                [c.name for c in conductors],
                tags.lookup,
                reference._orphan,
                RuntimeError,
                under,
                clock=lambda: now,
            )

        return reference.ring_answers(make_ring, nodes, tags)

    def metrics(self, conductors, nodes, now):
        sink = reference.Sink()
        reporter = placement_metrics.PlacementReporter(
            sink, None, None, None, lambda: 60.0, wall_clock=lambda: now
        )
        reporter._report_placement(
            live.Deployment(
                tuple(conductors),
                tuple(nodes),
                frozenset(),
                {},
                adoption.agree({}, ()),
            )
        )
        return sink.sent


def _reference_tree(into):
    """The reference commit's package, unpacked under ``into``; None
    with why when it cannot be had."""
    if shutil.which('git') is None or not (ROOT / '.git').exists():
        return None, 'not a git checkout'
    found = subprocess.run(
        ['git', 'cat-file', '-e', reference.REFERENCE + '^{commit}'],
        cwd=ROOT,
        capture_output=True,
    )
    if found.returncode:
        return None, 'commit %s not in this checkout' % reference.REFERENCE
    archive = subprocess.run(
        ['git', 'archive', reference.REFERENCE, 'ironic_affinity'],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout
    path = pathlib.Path(into, 'archive.tar')
    path.write_bytes(archive)
    with tarfile.open(path) as tar:
        tar.extractall(into, filter='data')
    return into, None


class DifferentialTestCase(base.TestCase):
    def test_answers_are_those_of_the_reference_commit(self):
        cases = [deployment(seed) for seed in SEEDS]
        with tempfile.TemporaryDirectory() as into:
            tree, why = _reference_tree(into)
            if tree is None:
                self.skipTest(why)
            env = dict(os.environ, PYTHONPATH=tree)
            ran = subprocess.run(
                [sys.executable, reference.__file__],
                input=json.dumps(cases),
                capture_output=True,
                text=True,
                env=env,
                cwd=tree,
            )
            self.assertEqual(0, ran.returncode, ran.stderr[-3000:])
            found = json.loads(ran.stdout)
            self.assertTrue(found['package'].startswith(tree), found)
        before = found['answers']
        now = [reference.answer(Answers(), case) for case in cases]
        self.assertEqual(len(cases), len(before))
        compared = 0
        for seed, old, new in zip(SEEDS, before, now, strict=True):
            self.assertEqual(sorted(old), sorted(new), 'seed %d' % seed)
            for question in sorted(old):
                self.assertEqual(
                    old[question],
                    new[question],
                    'seed %d, %s' % (seed, question),
                )
                compared += 1
        self.assertGreater(compared, 1000)

    def test_the_cases_cover_every_way_to_place(self):
        # Plain, paced, under capacity and paced under capacity: each is
        # met by some case at some moment.
        seen = set()
        for seed in SEEDS:
            case = deployment(seed)
            placer = placement.Placement(
                reference.conductor(c) for c in case['conductors']
            )
            for now in case['moments']:
                seen.add((placer.limited, placer.rolling(now) is not None))
        self.assertEqual(
            {(False, False), (False, True), (True, False), (True, True)}, seen
        )
