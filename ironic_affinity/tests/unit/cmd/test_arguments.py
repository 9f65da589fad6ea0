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

"""oslo.config's options after the sub-command, moved in front of it."""

from oslo_log import log

from ironic_affinity.cmd import arguments
from ironic_affinity.cmd import cli
from ironic_affinity.tests import base


def _strings():
    conf = arguments.RecordingConfigOpts()
    log.register_options(conf)
    return arguments.option_strings(conf.recorded_cli_opts)


class OptionStringsTestCase(base.TestCase):
    def test_given_by_any_of_its_strings(self):
        conf = arguments.RecordingConfigOpts()
        log.register_options(conf)
        opts = conf.recorded_cli_opts
        for args in (
            ['--log-file', 'f', 'plan'],
            ['plan', '--log-file=f'],
            ['--logfile', 'f'],
        ):
            self.assertTrue(arguments.given(args, opts, 'log_file'), args)
        for args in (
            ['--log-dir', 'd', 'plan'],
            ['plan', '--', '--log-file', 'f'],
            ['--config-file', 'ironic.conf'],
        ):
            self.assertFalse(arguments.given(args, opts, 'log_file'), args)

    def test_strings_and_whether_they_take_a_value(self):
        strings = _strings()
        self.assertTrue(strings['--config-file'])
        self.assertTrue(strings['--config-dir'])
        self.assertTrue(strings['--log-file'])
        # oslo.log's deprecated spelling, and short and negated booleans.
        self.assertTrue(strings['--logfile'])
        self.assertFalse(strings['--debug'])
        self.assertFalse(strings['-d'])
        self.assertFalse(strings['--nodebug'])

    def test_only_top_level_options_are_recorded(self):
        conf = arguments.RecordingConfigOpts()
        conf.register_cli_opt(cli.COMMAND_OPT)
        self.assertNotIn(
            cli.COMMAND_OPT.name,
            [o.name for o in conf.recorded_cli_opts],
        )


class GlobalOptionsFirstTestCase(base.TestCase):
    def setUp(self):
        super().setUp()
        self.strings = _strings()

    def order(self, *args):
        return arguments.global_options_first(args, self.strings, cli.COMMANDS)

    def test_options_after_the_command_move_with_their_values(self):
        self.assertEqual(
            ['--config-file', 'a.conf', '--debug', 'members', '-f', 'json'],
            self.order(
                'members', '--config-file', 'a.conf', '-f', 'json', '--debug'
            ),
        )

    def test_a_flag_takes_no_value(self):
        # 'x.yaml' stays the scenario, not a value of --debug.
        self.assertEqual(
            ['--debug', 'plan', 'x.yaml'],
            self.order('plan', '--debug', 'x.yaml'),
        )

    def test_attached_values_and_options_before(self):
        self.assertEqual(
            ['--config-file', 'a.conf', '--config-file=b.conf', 'check'],
            self.order(
                '--config-file', 'a.conf', 'check', '--config-file=b.conf'
            ),
        )

    def test_a_value_named_like_a_command_is_not_the_command(self):
        self.assertEqual(
            ['--config-file', 'plan', '--debug', 'members'],
            self.order('--config-file', 'plan', 'members', '--debug'),
        )

    def test_command_options_stay_and_nothing_moves_past_a_double_dash(self):
        self.assertEqual(
            ['explain', '--down', 'c1', '--', '--debug'],
            self.order('explain', '--down', 'c1', '--', '--debug'),
        )

    def test_no_command_leaves_the_line_to_argparse(self):
        self.assertEqual(
            ['--debug', '--config-file', 'a.conf'],
            self.order('--debug', '--config-file', 'a.conf'),
        )
        self.assertEqual([], self.order())
