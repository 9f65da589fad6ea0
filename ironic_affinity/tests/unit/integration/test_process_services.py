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

"""What a process says when where it places changes."""

import logging

from ironic_affinity import adoption
from ironic_affinity.integration import process_services
from ironic_affinity.tests import base

T0 = 1_800_000_000.0  # 2027-01-15T08:00:00Z
ORIGIN = adoption.Switch('stock', adoption.ORIGIN_AT, 0.0)


def vote(side, switches=()):
    return adoption.Published(adoption.Vote(side, T0, 60.0), switches)


class LogAgreementTestCase(base.TestCase):
    def told(self, agreement):
        with self.assertLogs(
            process_services.LOG.logger, logging.INFO
        ) as logs:
            process_services._log_agreement(agreement)
        (line,) = logs.output
        return line

    def test_each_state_is_said(self):
        self.assertIn(
            'Placement by affinity',
            self.told(adoption.agree({'c1': None}, ())),
        )
        due = adoption.agree(
            {'c1': vote('affinity', (ORIGIN,)), 'c2': vote('affinity')}, ()
        )
        self.assertIn(
            'Placement by stock; a switch to affinity is due', self.told(due)
        )
        switching = adoption.agree(
            {
                'c1': vote(
                    'affinity',
                    (ORIGIN, adoption.Switch('affinity', T0, 600.0)),
                )
            },
            (),
        )
        self.assertIn(
            'Placement switches to affinity from 08:00:00 over 600.0 s '
            '(switches known: 2)',
            self.told(switching),
        )
