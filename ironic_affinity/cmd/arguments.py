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

"""oslo.config's own options accepted after the sub-command too.

oslo.config gives its options (``--config-file``, ``--debug`` and the
other oslo.log ones) to the top-level argparse parser, so argparse
refuses them after the sub-command, where most command lines allow them.
Moving them in front, before oslo.config parses, leaves its parsing as
it is.
"""

from collections.abc import Collection
from collections.abc import Mapping
from collections.abc import Sequence
from typing import Any

from oslo_config import cfg

# oslo.config adds these only once parsing has begun, so they cannot be
# recorded: whether each takes a value (--version: when given one).
CONFIG_OPTIONS = {
    '--config-file': True,
    '--config-dir': True,
    '--version': False,
}


class RecordingConfigOpts(cfg.ConfigOpts):
    """ConfigOpts that remembers the command-line options registered on
    it, to recognise them wherever they stand."""

    def __init__(self) -> None:
        # Before ConfigOpts' own __init__, which registers an option.
        self.recorded_cli_opts: list[cfg.Opt] = []
        super().__init__()

    def register_cli_opt(
        self, opt: cfg.Opt, group: Any = None, **kwargs: Any
    ) -> bool:
        if group is None and not (
            opt.positional or isinstance(opt, cfg.SubCommandOpt)
        ):
            self.recorded_cli_opts.append(opt)
        return bool(super().register_cli_opt(opt, group, **kwargs))


def option_strings(opts: Sequence[cfg.Opt]) -> dict[str, bool]:
    """Each option string of ``opts``, mapped to whether it takes a value,
    spelt as oslo.config spells them (with the negated ``--noNAME`` of
    boolean options, and deprecated names).
    """
    strings = dict(CONFIG_OPTIONS)
    for opt in opts:
        takes_value = not isinstance(opt, cfg.BoolOpt)
        names = [opt.name] + [
            d.name
            for d in opt.deprecated_opts
            if d.name and d.group in (None, 'DEFAULT')
        ]
        for name in names:
            strings['--' + name] = takes_value
            if not takes_value:
                strings['--no' + name] = False
        if opt.short:
            strings['-' + opt.short] = takes_value
    return strings


def given(args: Sequence[str], opts: Sequence[cfg.Opt], dest: str) -> bool:
    """Whether the command line ``args`` sets the option ``dest``, by any
    of its strings (oslo.config tells a value's file, not whether the
    command line overrode it)."""
    named = [opt for opt in opts if opt.dest == dest]
    strings = set(option_strings(named)) - set(CONFIG_OPTIONS)
    for arg in args:
        if arg == '--':
            return False
        if arg.split('=', 1)[0] in strings:
            return True
    return False


def _global(arg: str, strings: Mapping[str, bool]) -> bool | None:
    """Whether ``arg`` is a global option that takes the next argument as
    its value; None when it is no global option."""
    if arg in strings:
        return strings[arg]
    name, equals, _value = arg.partition('=')
    if equals and name in strings:
        return False
    return None


def global_options_first(
    args: Sequence[str],
    strings: Mapping[str, bool],
    commands: Collection[str],
) -> list[str]:
    """``args`` with the global options after the sub-command (and their
    values) moved in front of it. Anything after ``--`` stays put.
    """
    args = list(args)
    index = 0
    while index < len(args) and args[index] not in commands:
        if args[index] == '--':
            return args
        takes_value = _global(args[index], strings)
        index += 2 if takes_value else 1
    if index >= len(args):
        return args
    front, moved, rest = args[:index], [], [args[index]]
    index += 1
    while index < len(args):
        arg = args[index]
        if arg == '--':
            rest += args[index:]
            break
        takes_value = _global(arg, strings)
        if takes_value is None:
            rest.append(arg)
            index += 1
            continue
        width = 2 if takes_value else 1
        moved += args[index : index + width]
        index += width
    return front + moved + rest
