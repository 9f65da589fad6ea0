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

"""The upgrade check's report of how each process took the plugin up,
and of the versions and format levels they run (the checks against a
running deployment are end to end)."""

import sys
import types
from unittest import mock

from oslo_config import cfg

from ironic_affinity.cmd import status
from ironic_affinity.membership import levels
from ironic_affinity.tests import base


class WaysTestCase(base.TestCase):
    def test_grouped_by_way_each_name_once(self):
        found = {
            'c2': 'ironic.conf',
            'c1': 'ironic.conf',
            'c3': None,
            'c4': 'ironic-affinity-conductor',
        }
        self.assertEqual(
            'Conductors: c3, c4 by ironic-affinity-conductor; c1, c2 by '
            'ironic.conf ([DEFAULT]hash_ring_manager = affinity).',
            status._ways('Conductors', found, 'ironic-affinity-conductor'),
        )

    def test_none(self):
        self.assertEqual(
            'API processes: none in the group.',
            status._ways('API processes', {}, 'x'),
        )


class ThisIronicTestCase(base.TestCase):
    """What the Ironic where the check runs allows, against what this
    ironic.conf asks of it."""

    def check(self, named, hook, loader=None):
        """``loader``: Ironic loads its manager by name (change A of
        contrib/ironic/); ``hook``: and has the conductor hooks (B)."""
        conf = cfg.ConfigOpts()
        conf.register_opt(cfg.StrOpt('hash_ring_manager'))
        conf([])
        conf.set_override('hash_ring_manager', named)

        class Base:
            if hook:

                def conductor_started(self, host):
                    pass

        hash_ring = types.ModuleType('ironic.common.hash_ring')
        hash_ring.HashRingManager = Base
        if hook if loader is None else loader:
            hash_ring.BaseHashRingManager = Base
            hash_ring.get_hash_ring_manager_class = mock.Mock()
        common = types.ModuleType('ironic.common')
        common.hash_ring = hash_ring
        modules = {
            'ironic': types.ModuleType('ironic'),
            'ironic.common': common,
            'ironic.common.hash_ring': hash_ring,
        }
        modules['ironic'].common = common
        with mock.patch.dict(sys.modules, modules):
            return status._this_ironic(conf)

    def test_an_option_this_ironic_ignores_is_a_warning(self):
        text, ignored = self.check('affinity', hook=False)
        self.assertTrue(ignored)
        self.assertIn('hash_ring_manager = affinity is ignored', text)
        text, ignored = self.check(None, hook=False)
        self.assertFalse(ignored)
        self.assertIn('conductors need ironic-affinity-conductor', text)

    def test_a_loader_without_hooks_reads_the_option(self):
        text, ignored = self.check('affinity', hook=False, loader=True)
        self.assertFalse(ignored)
        self.assertIn('conductors need ironic-affinity-conductor', text)

    def test_with_the_hook(self):
        text, ignored = self.check('affinity', hook=True)
        self.assertFalse(ignored)
        self.assertIn("Ironic's own commands place by affinity", text)
        text, ignored = self.check(None, hook=True)
        self.assertFalse(ignored)
        self.assertIn('only a launcher or the middleware', text)
        self.assertIn('consistent-hash (the default)', text)


class UnreadableTestCase(base.TestCase):
    """A check that cannot read the group reports why, in its result,
    also when there is no backend URL to name."""

    def test_no_backend_url_and_no_ironic(self):
        conf = cfg.ConfigOpts()
        with mock.patch('importlib.util.find_spec', return_value=None):
            status.live_commands.register_opts(conf)
            conf([])
            checks = status.Checks(conf)
            for check in (
                checks._check_api,
                checks._check_enabled_by,
                checks._check_levels,
            ):
                result = check()
                self.assertEqual(status.upgradecheck.Code.FAILURE, result.code)
                self.assertIn('[DEFAULT]state_path', result.details)


def _runs(version, reads, writes):
    return levels.Runs(version, reads, writes, None)


class LevelsTestCase(base.TestCase):
    """Each step of a rolling upgrade from a release before format
    levels (1) to one that reads 2, as the check reports it."""

    def check(self, **found):
        result = status._levels_result(
            {name.replace('_', '-'): runs for name, runs in found.items()}
        )
        return result.code, result.details

    def test_one_version_unpinned(self):
        code, text = self.check(c1=_runs('2.0', 2, 2), api=_runs('2.0', 2, 2))
        self.assertEqual(status.upgradecheck.Code.SUCCESS, code)
        self.assertEqual('Versions: 2.0 on api, c1.', text)

    def test_an_upgrade_under_way_with_the_pin(self):
        code, text = self.check(c1=_runs('2.0', 2, 1), api=_runs(None, 1, 1))
        self.assertEqual(status.upgradecheck.Code.WARNING, code)
        self.assertIn('2.0 on c1', text)
        self.assertIn('a release before format levels on api', text)
        self.assertIn('Pinned, until every process is upgraded: c1.', text)
        self.assertNotIn('lift', text)

    def test_an_upgrade_under_way_without_the_pin_fails(self):
        code, text = self.check(c1=_runs('2.0', 2, 2), api=_runs(None, 1, 1))
        self.assertEqual(status.upgradecheck.Code.FAILURE, code)
        self.assertIn('c1 publish format level 2, which api do not read', text)
        self.assertIn('[affinity]pin_format = 1 on every process', text)

    def test_every_process_upgraded_the_pin_can_be_lifted(self):
        code, text = self.check(
            c1=_runs('2.0', 2, 1),
            c2=_runs('2.0', 2, 2),
            api=_runs('2.0', 2, 1),
        )
        self.assertEqual(status.upgradecheck.Code.WARNING, code)
        self.assertIn(
            'Every process reads format level 2: lift [affinity]pin_format '
            'on api, c1, one process at a time.',
            text,
        )

    def test_no_process(self):
        code, _text = self.check()
        self.assertEqual(status.upgradecheck.Code.SUCCESS, code)
