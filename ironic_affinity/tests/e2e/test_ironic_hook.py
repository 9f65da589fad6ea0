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

"""Ironic with the change of contrib/ironic/, and a manager it cannot load.

Ironic's own commands, run as an operator would with a typo in
``[DEFAULT]hash_ring_manager``: each must stop at start with one line
saying why, rather than restart a worker for ever (the conductor) or
answer every request with an error (the API).
"""

import os
import signal
import subprocess
import time

from testtools import content

from ironic_affinity.tests.e2e import base
from ironic_affinity.tests.e2e import deployment

# Seconds a command may take to give up: an Ironic start on a loaded
# machine takes up to about 20.
GIVE_UP = 90
BAD_NAME = 'no-such-manager'
CAUSE = 'No hash ring manager "%s" is installed' % BAD_NAME


class UnloadableManagerTestCase(base.TestCase):
    def setUp(self):
        super().setUp()
        if not deployment.IRONIC_HOOK:
            self.skipTest(
                'needs an Ironic with the pluggable hash-ring manager '
                '(tox -e e2e-ironic-hook)'
            )

    def run_ironic(self, program, *conf_files):
        """Run one of Ironic's commands; its exit status, output and time.
        Killed, with any worker it started, if it has not given up."""
        started = time.monotonic()
        process = subprocess.Popen(
            [deployment._bin(program)]
            + [arg for path in conf_files for arg in ('--config-file', path)],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        try:
            output, _ = process.communicate(timeout=GIVE_UP)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            output, _ = process.communicate()
        return process.returncode, output, time.monotonic() - started

    def test_ironics_services_stop_at_start_with_the_cause(self):
        # A deployment for its database and configuration, which the bad
        # name is added to.
        dep = self.deploy({1: {}}, api='plain')
        bad = os.path.join(dep.dir, 'bad-manager.conf')
        with open(bad, 'w') as handle:
            handle.write('[DEFAULT]\nhash_ring_manager = %s\n' % BAD_NAME)
        figures = {}
        for program, extra in (
            ('ironic-conductor', [dep.write_tags(9)]),
            ('ironic-api', []),
        ):
            status, output, seconds = self.run_ironic(
                program, dep.conf, *extra, bad
            )
            self.addDetail(program, content.text_content(output))
            # 1, not killed (-9) after GIVE_UP seconds.
            self.assertEqual(1, status, program)
            # One line of warning or worse says it, and names the cause
            # (stevedore's own warning of the missing name is not logged).
            said = [
                line
                for line in output.splitlines()
                if BAD_NAME in line
                and any(
                    ' %s ' % level in line
                    for level in ('WARNING', 'ERROR', 'CRITICAL')
                )
            ]
            self.assertEqual(1, len(said), said)
            self.assertIn(' CRITICAL ', said[0])
            self.assertIn(CAUSE, said[0])
            figures[program] = round(seconds, 1)
        base.record(test='unloadable_manager', exit_seconds=figures)
