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

from ironic_affinity.membership import backend
from ironic_affinity.tests import base

EXAMPLES = os.path.abspath(
    os.path.join(os.path.dirname(__file__), '..', '..', '..', 'examples')
)
PART1 = os.path.join(EXAMPLES, 'rfe-part1.yaml')
EDIT2 = os.path.join(EXAMPLES, 'rfe-edit2.yaml')
OPERATOR_GUIDE = os.path.join(
    EXAMPLES, '..', 'doc', 'source', 'admin', 'operator-guide.rst'
)


def console_examples(path):
    """(arguments, output) of each ironic-affinity command shown in the
    console blocks of an rst file."""
    with open(path) as handle:
        lines = handle.read().splitlines()
    index = 0
    while index < len(lines):
        if lines[index].strip() != '.. code-block:: console':
            index += 1
            continue
        index += 1
        while not lines[index].strip():
            index += 1
        indent = len(lines[index]) - len(lines[index].lstrip())
        block = []
        while index < len(lines) and (
            not lines[index].strip() or lines[index].startswith(' ' * indent)
        ):
            block.append(lines[index][indent:])
            index += 1
        starts = [i for i, line in enumerate(block) if line.startswith('$ ')]
        for start, end in zip(starts, starts[1:] + [len(block)], strict=True):
            if block[start].startswith('$ ironic-affinity '):
                output = '\n'.join(block[start + 1 : end]).strip()
                yield block[start].split()[2:], output


def _command():
    # The script installed next to this interpreter, else the one on PATH.
    beside = os.path.join(os.path.dirname(sys.executable), 'ironic-affinity')
    return (
        beside if os.path.exists(beside) else shutil.which('ironic-affinity')
    )


class CommandTestCase(base.TestCase):
    """Runs the installed command; no test of its own."""

    def setUp(self):
        super().setUp()
        self.command = _command()
        self.assertIsNotNone(self.command, 'ironic-affinity is not installed')
        self.dir = self.useFixture(fixtures.TempDir()).path

    def run_cli(self, *args, status=0, env=None, python=None):
        """Run the command; with ``python``, that code first, in the
        command's own interpreter, then the command's main()."""
        command = [self.command]
        if python is not None:
            command = [
                sys.executable,
                '-c',
                python + '\nfrom ironic_affinity.cmd import cli\n'
                'sys.exit(cli.main(sys.argv[1:]))',
            ]
        result = subprocess.run(
            command + list(args),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            env=env,
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

    def _error(self, *args, status=1, **kwargs):
        result = self.run_cli(*args, status=status, **kwargs)
        lines = result.stderr.strip().splitlines()
        self.assertEqual(1, len(lines), result.stderr)
        self.assertTrue(lines[0].startswith('ironic-affinity: error: '))
        self.assertEqual('', result.stdout)
        return lines[0]


class CLITestCase(CommandTestCase):
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
        self.assertEqual([], report['placements'][0]['tied'])
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

    def test_version(self):
        # What the installed distribution says, on stdout, status 0.
        from importlib import metadata

        for args in (['--version'], ['plan', PART1, '--version']):
            result = self.run_cli(*args)
            self.assertEqual(
                metadata.version('ironic-affinity'), result.stdout.strip()
            )

    def _warning_scenario(self):
        """A scenario that plans with a warning (a tag in both soft
        lists)."""
        path = os.path.join(self.dir, 'warn.yaml')
        with open(path, 'w') as handle:
            handle.write(
                'conductors:\n- {name: c1, soft_affinity_tags: a, '
                'soft_anti_affinity_tags: a}\nnodes:\n- {name: n, '
                'affinity_tags: a}\n'
            )
        return path

    def test_warnings_stay_off_stdout(self):
        path = self._warning_scenario()
        result = self.run_cli('plan', path, '-f', 'json')
        self.assertEqual(
            -1, json.loads(result.stdout)['placements'][0]['score']
        )
        self.assertIn('soft_anti_affinity_tags wins', result.stderr)

    def test_warnings_stay_out_of_the_services_log_file(self):
        # An ironic.conf that names the service's log file (as Kolla's
        # does): the command writes its warnings to stderr, not there;
        # a --log-file of its own command line is written to.
        path = self._warning_scenario()
        service_log = os.path.join(self.dir, 'ironic-conductor.log')
        conf = os.path.join(self.dir, 'ironic.conf')
        with open(conf, 'w') as handle:
            handle.write('[DEFAULT]\nlog_file = %s\n' % service_log)
        result = self.run_cli('--config-file', conf, 'plan', path)
        self.assertIn('soft_anti_affinity_tags wins', result.stderr)
        self.assertFalse(os.path.exists(service_log))
        own_log = os.path.join(self.dir, 'own.log')
        self.run_cli(
            '--config-file', conf, '--log-file', own_log, 'plan', path
        )
        with open(own_log) as handle:
            self.assertIn('soft_anti_affinity_tags wins', handle.read())
        self.assertFalse(os.path.exists(service_log))


class SharpEdgesTestCase(CommandTestCase):
    """Each edge an operator met (issue 11), now one line or working."""

    def write(self, name, text):
        path = os.path.join(self.dir, name)
        with open(path, 'w') as handle:
            handle.write(text)
        return path

    def file_backend_conf(self):
        backend = os.path.join(self.dir, 'membership')
        os.mkdir(backend)
        url = 'file://' + backend
        conf = self.write(
            'ironic.conf',
            '[affinity]\nbackend_url = %s\ngroup_name = edges\n' % url,
        )
        return conf, url

    def test_missing_configuration_file(self):
        for args in (
            ('--config-file', '/nonexistent/ironic.conf', 'members'),
            ('members', '--config-file', '/nonexistent/ironic.conf'),
        ):
            line = self._error(*args)
            self.assertIn(
                'configuration file not found: /nonexistent/ironic.conf',
                line,
            )

    def test_options_after_the_command(self):
        conf, url = self.file_backend_conf()
        found = json.loads(
            self.run_cli('members', '-f', 'json', '--config-file', conf).stdout
        )
        self.assertEqual(
            (url, 'edges', []),
            (found['backend'], found['group'], found['members']),
        )
        result = self.run_cli('plan', PART1, '--debug', '-f', 'json')
        self.assertEqual(3, len(json.loads(result.stdout)['placements']))

    def test_no_configuration_anywhere(self):
        for path in ('/etc/ironic/ironic.conf', '/etc/ironic.conf'):
            if os.path.exists(path):
                self.skipTest('this host has %s' % path)
        # The file backend's directory with Ironic's default state path,
        # where Ironic is installed beside: not created.
        state_path = backend.ironic_state_path()
        default = state_path and os.path.join(
            state_path, 'affinity-membership'
        )
        existed = default and os.path.exists(default)
        env = dict(os.environ, HOME=self.dir)
        for command in ('members', 'check'):
            line = self._error(command, env=env)
            self.assertIn('no configuration file', line)
            self.assertIn('--config-file', line)
        if default:
            self.assertEqual(existed, os.path.exists(default))

    def test_reading_writes_nothing(self):
        state = os.path.join(self.dir, 'state')
        conf = self.write('state.conf', '[DEFAULT]\nstate_path = %s\n' % state)
        for command in ('members', 'check'):
            line = self._error('--config-file', conf, command)
            self.assertIn(
                'file://%s/affinity-membership: no such directory' % state,
                line,
            )
        self.assertFalse(os.path.exists(state))

    def test_explain_without_the_node(self):
        line = self._error('explain', PART1, status=2)
        self.assertIn('%s is a scenario file: give the node too' % PART1, line)

    def test_yaml_syntax_error(self):
        path = self.write('bad.yaml', 'nodes:\n- {name: n1\n- name: n2\n')
        line = self._error('plan', path)
        self.assertIn('%s: line 3, column 7: not valid YAML' % path, line)

    def test_usage_errors_exit_2(self):
        for args in (
            ('plan',),
            ('plan', PART1, '--live'),
            ('explain', PART1, 'node1', 'extra'),
        ):
            line = self._error(*args, status=2)
            self.assertIn('see ironic-affinity %s --help' % args[0], line)
        # argparse's own refusals exit 2 as well.
        self.run_cli('nosuchcommand', status=2)

    def test_offline_commands_import_no_service_library(self):
        # Printed from an exit hook: main() exits through sys.exit.
        probe = (
            'import atexit, sys\n'
            'def _report():\n'
            '    roots = {m.split(".")[0] for m in sys.modules}\n'
            '    found = roots & {"tooz", "sqlalchemy", "ironic", '
            '"eventlet", "futurist"}\n'
            '    print("IMPORTED", sorted(found), file=sys.stderr)\n'
            'atexit.register(_report)\n'
        )
        for args in (('plan', PART1), ('explain', PART1, 'node1')):
            result = self.run_cli(*args, python=probe)
            self.assertEqual(
                'IMPORTED []', result.stderr.strip(), result.stderr
            )
        # And the live ones do load them: the probe sees imports.
        conf, _url = self.file_backend_conf()
        result = self.run_cli('--config-file', conf, 'members', python=probe)
        self.assertIn("'tooz'", result.stderr)

    def test_tied_and_unplaced(self):
        path = self.write(
            's.yaml',
            'conductors:\n- {name: c1, hard_affinity_tags: dc1}\n'
            '- {name: c2, hard_affinity_tags: dc1}\n'
            'nodes:\n- {name: lost, affinity_tags: dc2}\n'
            '- {name: kept, affinity_tags: dc1}\n',
        )
        report = self.run_json('plan', path)
        self.assertEqual(['lost'], report['unplaced'])
        tied = {p['node']: p['tied'] for p in report['placements']}
        self.assertEqual({'lost': [], 'kept': ['c1', 'c2']}, tied)
        self.assertIn('TIED AT TOP', self.run_cli('plan', path).stdout)

    def test_backend_library_missing(self):
        conf = self.write(
            'redis.conf', '[affinity]\nbackend_url = redis://127.0.0.1:1\n'
        )
        # What an environment without the library gives an import.
        result = self.run_cli(
            '--config-file',
            conf,
            'members',
            '--timeout',
            '5',
            status=1,
            python='import sys\nsys.modules["redis"] = None',
        )
        self.assertIn(
            'Backend unreadable: the redis:// backend needs the Python '
            'library redis, which is not installed here: install '
            'ironic-affinity[redis]',
            result.stdout,
        )


class OperatorGuideTestCase(CommandTestCase):
    def test_examples_print_what_the_guide_shows(self):
        examples = list(console_examples(OPERATOR_GUIDE))
        self.assertGreaterEqual(len(examples), 10)
        root = os.path.dirname(EXAMPLES)
        for args, shown in examples:
            result = subprocess.run(
                [self.command, *args],
                capture_output=True,
                text=True,
                timeout=60,
                check=True,
                cwd=root,
            )
            self.assertEqual(shown, result.stdout.strip(), ' '.join(args))
