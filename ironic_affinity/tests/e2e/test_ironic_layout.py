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

"""Where the installed Ironic keeps what the launchers stand in for.

Run in a subprocess each: Ironic 29's command package monkey-patches
eventlet on import, which must not happen inside the test runner.
"""

import importlib.metadata
import json
import os
import subprocess
import sys

from ironic_affinity.tests import base

_PROBE = '''
import json, sys
from ironic_affinity.integration import launchers
module = launchers.ironic_command(sys.argv[1])
print(json.dumps({"module": module.__name__, "main": callable(module.main)}))
'''


class IronicLayoutTestCase(base.TestCase):
    def _entry_point(self, script):
        (found,) = [
            ep
            for ep in importlib.metadata.entry_points(group='console_scripts')
            if ep.name == script and ep.dist.name == 'ironic'
        ]
        return found.value

    def test_launchers_run_ironics_own_entry_points(self):
        for command, script in (
            ('api', 'ironic-api'),
            ('conductor', 'ironic-conductor'),
            ('singleprocess', 'ironic'),
        ):
            result = subprocess.run(
                [sys.executable, '-c', _PROBE, command],
                capture_output=True,
                text=True,
                check=False,
                timeout=120,
            )
            self.assertEqual(0, result.returncode, result.stderr)
            found = json.loads(result.stdout.splitlines()[-1])
            self.assertEqual(
                self._entry_point(script), found['module'] + ':main'
            )
            self.assertTrue(found['main'])


class OfflineCommandBesideIronicTestCase(base.TestCase):
    """Where Ironic is installed, tooz would bring in eventlet and its
    deprecation warning: the offline commands must not load it."""

    def test_plan_prints_no_warning(self):
        command = os.path.join(
            os.path.dirname(sys.executable), 'ironic-affinity'
        )
        example = os.path.join(
            os.path.dirname(__file__),
            '..',
            '..',
            '..',
            'examples',
            'rfe-part1.yaml',
        )
        result = subprocess.run(
            [command, 'plan', example],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        self.assertEqual(0, result.returncode, result.stderr)
        self.assertEqual('', result.stderr)
        self.assertIn('TIED AT TOP', result.stdout)
