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

"""The shipped Prometheus rules, through Prometheus's own promtool: they
load, and each alert fires on the figures that mean it
(etc/prometheus/ironic-affinity-rules.test.yaml)."""

import subprocess

from ironic_affinity.tests import base
from ironic_affinity.tests.functional import servers
from ironic_affinity.tests.unit import test_monitoring


class PromtoolTestCase(base.TestCase):
    def setUp(self):
        super().setUp()
        servers.require_program('promtool')

    def promtool(self, *args):
        result = subprocess.run(
            ('promtool',) + args,
            cwd=test_monitoring.RULES.parent,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        self.assertEqual(0, result.returncode, result.stdout + result.stderr)
        return result.stdout

    def test_the_rules_load(self):
        self.assertIn(
            'SUCCESS: 7 rules found',
            self.promtool('check', 'rules', test_monitoring.RULES.name),
        )

    def test_each_alert_fires_when_it_should(self):
        self.assertIn(
            'SUCCESS',
            self.promtool('test', 'rules', 'ironic-affinity-rules.test.yaml'),
        )
