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

"""The base of every test: oslotest with the [affinity] options registered."""

from oslo_config import cfg
from oslo_config import fixture as config_fixture
from oslotest import base

from ironic_affinity import conf as affinity_conf


class TestCase(base.BaseTestCase):
    """A test with its own ConfigOpts holding the [affinity] options."""

    def setUp(self) -> None:
        super().setUp()
        self.conf = cfg.ConfigOpts()
        affinity_conf.register_opts(self.conf)
        self.config_fixture = self.useFixture(config_fixture.Config(self.conf))
        self.conf([], default_config_files=[])

    def config(self, group: str = 'affinity', **kw: object) -> None:
        """Override options of ``group`` for this test."""
        self.config_fixture.config(group=group, **kw)
