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

import os

import fixtures
from oslo_config import cfg
from oslo_config import generator
import stevedore

from ironic_affinity import conf
from ironic_affinity import exception
from ironic_affinity import profile
from ironic_affinity.tests import base


class ListOptsTestCase(base.TestCase):
    def test_list_opts(self):
        ((group, opts),) = conf.list_opts()
        self.assertEqual('affinity', group.name)
        names = [opt.name for opt in opts]
        self.assertEqual(list(profile.TAG_OPTIONS), names[:4])
        self.assertEqual(
            [
                'max_nodes',
                'drain',
                'rebalance_period',
                'adoption_period',
                'backend_url',
                'group_name',
                'heartbeat_interval',
                'watch_interval',
                'member_timeout',
                'pin_format',
                'hash_ring_manager',
                'node_tags_key',
                'node_tags_interval',
                'node_tags_rescan_interval',
                'metrics_interval',
            ],
            names[4:],
        )
        (url_opt,) = [opt for opt in opts if opt.name == 'backend_url']
        self.assertTrue(url_opt.secret)
        # The original objects, as the generator and docs expect.
        self.assertIs(conf.TAG_OPTS[0], opts[0])

    def test_entry_points_load(self):
        # Every entry point declared for oslo.config resolves to list_opts.
        manager = stevedore.ExtensionManager(
            'oslo.config.opts', invoke_on_load=False
        )
        self.assertIn('ironic_affinity', manager.names())
        self.assertIs(conf.list_opts, manager['ironic_affinity'].plugin)

    def test_generator_writes_every_option(self):
        out = os.path.join(self.useFixture(fixtures.TempDir()).path, 's')
        gen_conf = cfg.ConfigOpts()
        generator.register_cli_opts(gen_conf)
        gen_conf(['--namespace', 'ironic_affinity', '--output-file', out])
        generator.generate(gen_conf)
        with open(out) as handle:
            sample = handle.read()
        self.assertIn('[affinity]', sample)
        for name in profile.TAG_OPTIONS:
            self.assertIn('\n#%s =\n' % name, sample)


class TagOptionsTestCase(base.TestCase):
    def _conf_file(self, text):
        path = os.path.join(self.useFixture(fixtures.TempDir()).path, 'c')
        with open(path, 'w') as handle:
            handle.write(text)
        return path

    def test_defaults_are_empty(self):
        group = self.conf.affinity
        self.assertEqual(frozenset(), group.hard_affinity_tags)
        self.assertEqual({}, group.soft_affinity_tags)

    def test_values_parsed(self):
        path = self._conf_file(
            '[affinity]\n'
            'hard_affinity_tags = DC1\n'
            'hard_anti_affinity_tags = net3, net4\n'
            'soft_affinity_tags = rack10 network1:5\n'
            'soft_anti_affinity_tags = rack20:2\n'
            'max_nodes = 600\n'
        )
        self.conf(['--config-file', path])
        built = conf.conductor_profile(
            self.conf, 'host:8091', frozenset({'ipmi'}), 'Group1'
        )
        self.assertEqual(frozenset({'dc1'}), built.hard_affinity_tags)
        self.assertEqual(
            frozenset({'net3', 'net4'}), built.hard_anti_affinity_tags
        )
        self.assertEqual(
            {'rack10': 1, 'network1': 5}, dict(built.soft_affinity_tags)
        )
        self.assertEqual({'rack20': 2}, dict(built.soft_anti_affinity_tags))
        self.assertEqual('group1', built.conductor_group)
        self.assertEqual(600, built.max_nodes)

    def test_hash_ring_manager_is_affinity_or_stock(self):
        self.conf([])
        self.assertEqual('affinity', self.conf.affinity.hash_ring_manager)
        path = self._conf_file('[affinity]\nhash_ring_manager = stock\n')
        self.conf(['--config-file', path])
        self.assertEqual('stock', self.conf.affinity.hash_ring_manager)
        path = self._conf_file('[affinity]\nhash_ring_manager = Stok\n')
        self.conf(['--config-file', path])
        exc = self.assertRaises(
            cfg.ConfigFileValueError,
            getattr,
            self.conf.affinity,
            'hash_ring_manager',
        )
        self.assertIn('hash_ring_manager', str(exc))

    def test_max_nodes_defaults_to_no_limit_and_refuses_negatives(self):
        self.conf([])
        self.assertEqual(0, conf.conductor_profile(self.conf, 'c').max_nodes)
        path = self._conf_file('[affinity]\nmax_nodes = -5\n')
        self.conf(['--config-file', path])
        exc = self.assertRaises(
            cfg.ConfigFileValueError, getattr, self.conf.affinity, 'max_nodes'
        )
        self.assertIn('max_nodes', str(exc))

    def test_bad_value_names_option_and_tag(self):
        path = self._conf_file('[affinity]\nsoft_affinity_tags = ok b@d\n')
        self.conf(['--config-file', path])
        exc = self.assertRaises(
            cfg.ConfigFileValueError,
            getattr,
            self.conf.affinity,
            'soft_affinity_tags',
        )
        self.assertIn('soft_affinity_tags', str(exc))
        self.assertIn("'b@d'", str(exc))

    def test_weight_on_hard_list_refused(self):
        path = self._conf_file('[affinity]\nhard_affinity_tags = dc1:2\n')
        self.conf(['--config-file', path])
        self.assertRaises(
            cfg.ConfigFileValueError,
            getattr,
            self.conf.affinity,
            'hard_affinity_tags',
        )

    def test_conflicting_hard_lists_refused(self):
        self.config(
            hard_affinity_tags='dc1 rack1', hard_anti_affinity_tags='Rack1'
        )
        exc = self.assertRaises(
            exception.ConflictingTags, conf.conductor_profile, self.conf, 'c'
        )
        self.assertIn('rack1', str(exc))
        self.assertIn(profile.HARD_ANTI_AFFINITY, str(exc))

    def test_tags_reload_without_restart(self):
        # The options are mutable: a SIGHUP re-reads them in a service.
        path = self._conf_file('[affinity]\nsoft_affinity_tags = rack1\n')
        self.conf(['--config-file', path])
        self.assertEqual({'rack1': 1}, self.conf.affinity.soft_affinity_tags)
        with open(path, 'w') as handle:
            handle.write('[affinity]\nsoft_affinity_tags = rack2:4\n')
        self.conf.mutate_config_files()
        self.assertEqual({'rack2': 4}, self.conf.affinity.soft_affinity_tags)

    def test_max_nodes_reloads_without_restart(self):
        path = self._conf_file('[affinity]\nmax_nodes = 10\n')
        self.conf(['--config-file', path])
        self.assertEqual(10, self.conf.affinity.max_nodes)
        with open(path, 'w') as handle:
            handle.write('[affinity]\nmax_nodes = 25\n')
        self.conf.mutate_config_files()
        self.assertEqual(25, self.conf.affinity.max_nodes)
