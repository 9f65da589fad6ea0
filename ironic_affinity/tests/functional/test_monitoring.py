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
(etc/prometheus/ironic-affinity-rules.test.yaml). The shipped Grafana
dashboard, against Grafana's published schema (tools/grafana_schema)."""

import json
import os
import subprocess
import tempfile

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


class GrafanaSchemaTestCase(base.TestCase):
    """The dashboard as a literal of @grafana/schema's ``Dashboard`` type,
    compiled by TypeScript: an unknown key or a value of the wrong type
    fails. Grafana itself is not installed here."""

    TOOL = test_monitoring.ETC.parent / 'tools' / 'grafana_schema'

    def setUp(self):
        super().setUp()
        self.tsc = self.TOOL / 'node_modules' / '.bin' / 'tsc'
        servers.require_program(str(self.tsc))

    def compile(self, dashboard):
        with tempfile.TemporaryDirectory() as directory:
            # Where TypeScript looks for @grafana/schema.
            os.symlink(
                self.TOOL / 'node_modules',
                os.path.join(directory, 'node_modules'),
            )
            source = os.path.join(directory, 'dashboard.ts')
            with open(source, 'w') as f:
                f.write(
                    "import type { Dashboard } from '@grafana/schema';\n"
                    'export const dashboard: Dashboard = %s;\n'
                    % json.dumps(dashboard, indent=1)
                )
            return subprocess.run(
                (str(self.tsc), '--noEmit', '--strict', source),
                capture_output=True,
                text=True,
                timeout=120,
                check=False,
            )

    def test_the_dashboard_matches_grafanas_schema(self):
        dashboard = json.loads(test_monitoring.DASHBOARD.read_text())
        result = self.compile(dashboard)
        self.assertEqual(0, result.returncode, result.stdout + result.stderr)

    def test_a_wrong_dashboard_is_refused(self):
        dashboard = json.loads(test_monitoring.DASHBOARD.read_text())
        dashboard['panels'][0]['gridPos']['h'] = '8'
        dashboard['panels'][1]['datasourse'] = dashboard['panels'][1].pop(
            'datasource'
        )
        result = self.compile(dashboard)
        self.assertNotEqual(0, result.returncode)
        self.assertIn("Type 'string' is not assignable", result.stdout)
        self.assertIn("'\"datasourse\"' does not exist", result.stdout)
