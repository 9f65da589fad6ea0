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

"""The installed ``ironic-affinity`` command, run as an operator runs it."""

import json
import os
import shutil
import subprocess
import sys

import fixtures

from ironic_affinity.tests import base

EXAMPLES = os.path.abspath(
    os.path.join(os.path.dirname(__file__), '..', '..', '..', 'examples')
)
PART1 = os.path.join(EXAMPLES, 'rfe-part1.yaml')
EDIT2 = os.path.join(EXAMPLES, 'rfe-edit2.yaml')


def _command():
    # The script installed next to this interpreter, else the one on PATH.
    beside = os.path.join(os.path.dirname(sys.executable), 'ironic-affinity')
    return (
        beside if os.path.exists(beside) else shutil.which('ironic-affinity')
    )


class CLITestCase(base.TestCase):
    def setUp(self):
        super().setUp()
        self.command = _command()
        self.assertIsNotNone(self.command, 'ironic-affinity is not installed')
        self.dir = self.useFixture(fixtures.TempDir()).path

    def run_cli(self, *args, status=0):
        result = subprocess.run(
            [self.command, *args],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        self.assertEqual(
            status,
            result.returncode,
            'stdout: %s\nstderr: %s' % (result.stdout, result.stderr),
        )
        self.assertNotIn('Traceback', result.stderr)
        return result

    def run_json(self, *args):
        return json.loads(self.run_cli(*args, '-f', 'json').stdout)

    def _placed(self, report):
        return {p['node']: p['conductor'] for p in report['placements']}

    def test_plan_edit2(self):
        report = self.run_json('plan', EDIT2)
        self.assertEqual(
            {
                'node1': 'conductor1',
                'node2': 'conductor1',
                'node3': 'conductor3',
            },
            self._placed(report),
        )
        scores = {p['node']: p['score'] for p in report['placements']}
        self.assertEqual({'node1': 2, 'node2': -1, 'node3': 2}, scores)
        self.assertEqual(
            {'conductor1': 2, 'conductor2': 0, 'conductor3': 1},
            report['loads'],
        )
        self.assertNotIn('moves', report)

    def test_plan_part1_conductor1_dies(self):
        report = self.run_json('plan', PART1, '--down', 'conductor1')
        placed = self._placed(report)
        self.assertEqual('conductor2', placed['node1'])
        self.assertEqual('conductor2', placed['node2'])
        self.assertEqual('conductor3', placed['node3'])
        self.assertNotIn('conductor1', report['loads'])
        moves = {m['node']: (m['from'], m['to']) for m in report['moves']}
        # Only nodes that were on conductor1 move.
        self.assertEqual(('conductor1', 'conductor2'), moves['node1'])
        self.assertEqual(('conductor1', 'conductor3'), moves['node3'])
        for old, _new in moves.values():
            self.assertEqual('conductor1', old)

    def test_plan_part1_two_die(self):
        report = self.run_json(
            'plan', PART1, '--down', 'conductor1', '--down', 'conductor2'
        )
        self.assertEqual(
            {
                'node1': 'conductor3',
                'node2': 'conductor3',
                'node3': 'conductor3',
            },
            self._placed(report),
        )
        self.assertEqual({'conductor3': 3}, report['loads'])
        self.assertEqual(3, len(report['moves']))

    def test_plan_table(self):
        out = self.run_cli('plan', PART1, '--down', 'conductor3').stdout
        for heading in (
            'Placements',
            'Loads (down: conductor3)',
            'Nodes without a valid conductor: none',
            'Moves (against every conductor up)',
        ):
            self.assertIn(heading, out)

    def test_plan_orphans(self):
        path = os.path.join(self.dir, 's.yaml')
        with open(path, 'w') as handle:
            handle.write(
                'conductors:\n- {name: c1, hard_affinity_tags: dc1}\n'
                'nodes:\n- {name: lost, affinity_tags: dc2}\n'
            )
        report = self.run_json('plan', path)
        self.assertEqual({'lost': None}, self._placed(report))
        self.assertEqual([], report['placements'][0]['candidates'])
        out = self.run_cli('plan', path).stdout
        self.assertIn('Nodes without a valid conductor: lost', out)

    def test_explain(self):
        report = self.run_json('explain', EDIT2, 'node1')
        rows = {r['conductor']: r for r in report['conductors']}
        self.assertEqual('chosen', rows['conductor1']['verdict'])
        self.assertEqual(2, rows['conductor1']['score'])
        self.assertEqual('eligible', rows['conductor2']['verdict'])
        self.assertEqual(
            [['network1', 1], ['rack10', -1]], rows['conductor2']['breakdown']
        )
        self.assertEqual('excluded', rows['conductor3']['verdict'])
        self.assertIn('datacenter2', rows['conductor3']['reason'])
        self.assertEqual(['conductor1', 'conductor2'], report['fallback'])

        out = self.run_cli('explain', PART1, 'node3', '--down', 'conductor1')
        self.assertIn('conductor1  down', out.stdout)
        self.assertIn(
            'excluded: node has hard-anti-affinity tag(s) customer1',
            out.stdout,
        )
        self.assertIn('Placed on: conductor3', out.stdout)

    def test_explain_tied(self):
        report = self.run_json('explain', PART1, 'node2')
        verdicts = {r['conductor']: r['verdict'] for r in report['conductors']}
        self.assertEqual(
            ['chosen', 'eligible', 'tied'], sorted(verdicts.values())
        )
        self.assertEqual('eligible', verdicts['conductor3'])
        self.assertEqual('conductor3', report['fallback'][-1])

    def _error(self, *args):
        result = self.run_cli(*args, status=1)
        lines = result.stderr.strip().splitlines()
        self.assertEqual(1, len(lines), result.stderr)
        self.assertTrue(lines[0].startswith('ironic-affinity: error: '))
        self.assertEqual('', result.stdout)
        return lines[0]

    def test_bad_scenarios(self):
        path = os.path.join(self.dir, 'bad.yaml')
        with open(path, 'w') as handle:
            handle.write('conductors:\n- name: c1\n  soft_affinity_tags: a!\n')
        line = self._error('plan', path)
        self.assertIn(path, line)
        self.assertIn("conductors[0] ('c1')", line)
        line = self._error('plan', os.path.join(self.dir, 'missing.yaml'))
        self.assertIn('missing.yaml: cannot read', line)

    def test_unknown_down_and_node(self):
        line = self._error('plan', PART1, '--down', 'conductor9')
        self.assertIn('conductor9', line)
        line = self._error('explain', PART1, 'node9')
        self.assertIn('node9', line)

    def test_bad_command_line(self):
        result = self.run_cli('plan', PART1, '-f', 'xml', status=2)
        self.assertIn('xml', result.stderr)

    def test_warnings_stay_off_stdout(self):
        path = os.path.join(self.dir, 'warn.yaml')
        with open(path, 'w') as handle:
            handle.write(
                'conductors:\n- {name: c1, soft_affinity_tags: a, '
                'soft_anti_affinity_tags: a}\nnodes:\n- {name: n, '
                'affinity_tags: a}\n'
            )
        result = self.run_cli('plan', path, '-f', 'json')
        self.assertEqual(
            -1, json.loads(result.stdout)['placements'][0]['score']
        )
        self.assertIn('soft_anti_affinity_tags wins', result.stderr)
