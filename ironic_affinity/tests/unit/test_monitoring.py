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

"""The shipped alert rules and dashboard ask for metrics the code sends,
by the names ironic-prometheus-exporter gives them (tests/e2e/
test_metrics.py reads those from the real exporter)."""

import json
import re

import yaml

from ironic_affinity.tests import base
from ironic_affinity.tests.unit import doc_text
from ironic_affinity.tests.unit import test_docs_agree

ETC = test_docs_agree.PACKAGE.parent / 'etc'
RULES = ETC / 'prometheus' / 'ironic-affinity-rules.yaml'
DASHBOARD = ETC / 'grafana' / 'ironic-affinity-dashboard.json'

_NAME = re.compile(r'\bironic_affinity_[a-z0-9_]+')


def exported() -> set[str]:
    """The name of each metric the code sends, as the exporter writes
    it: dots made underscores; a timer as two gauges; the per-conductor
    family up to the conductor's part."""
    names = set()
    for name, kind in test_docs_agree.sent_metrics().items():
        flat = 'ironic_affinity_' + name.replace('<conductor>', '').replace(
            '.', '_'
        )
        if kind == 'timer':
            names.update((flat + '_time', flat + '_call_count'))
        else:
            names.add(flat)
    return names


def rules() -> list[dict]:
    return [
        rule
        for group in yaml.safe_load(RULES.read_text())['groups']
        for rule in group['rules']
    ]


class MonitoringTestCase(base.TestCase):
    def assertSent(self, expressions, where):
        asked = {n for e in expressions for n in _NAME.findall(e)}
        self.assertTrue(asked, where)
        self.assertEqual([], sorted(asked - exported()), where)

    def test_the_rules_ask_for_metrics_that_are_sent(self):
        self.assertSent([r['expr'] for r in rules()], RULES.name)

    def test_the_alerts_the_docs_name(self):
        alerts = {r['alert'] for r in rules() if 'alert' in r}
        self.assertEqual(
            {
                'IronicAffinityOrphans',
                'IronicAffinityViewStale',
                'IronicAffinityStoodDown',
                'IronicAffinityMembersBelowUsual',
                'IronicAffinityTakeoversPending',
                'IronicAffinityOverCapacity',
            },
            alerts,
        )
        page = doc_text.read('admin/metrics.rst')
        missing = sorted(a for a in alerts if '``%s``' % a not in page)
        self.assertEqual([], missing, 'admin/metrics.rst')

    def test_the_dashboard_asks_for_metrics_that_are_sent(self):
        dashboard = json.loads(DASHBOARD.read_text())
        expressions = [
            target['expr']
            for panel in dashboard['panels']
            for target in panel['targets']
        ]
        recorded = {r['record'] for r in rules() if 'record' in r}
        own = [e for e in expressions if not any(r in e for r in recorded)]
        self.assertSent(own, DASHBOARD.name)
        self.assertTrue(
            any(r in e for e in expressions for r in recorded),
            'the per-conductor panel reads the recording rule',
        )
        ids = [panel['id'] for panel in dashboard['panels']]
        self.assertEqual(len(ids), len(set(ids)))
