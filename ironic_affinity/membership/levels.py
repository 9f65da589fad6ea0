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

"""Format levels: which keys an entry may carry at each level, and what a
process says it runs.

Every key of a published entry is declared with its level: the oldest
release whose readers handle it right. A reader ignores a key it does
not know; so a key that only describes the process is level 1, and a key
that a reader must act on is the level of the first release that reads
it. A process publishes a key only when its ``[affinity]pin_format``
allows it. The rule and the upgrade order:
doc/source/contributor/formats.rst and doc/source/admin/upgrade.rst.
"""

from collections.abc import Mapping
import dataclasses
import functools
from importlib import metadata
import json
from typing import Any

from oslo_config import cfg

from ironic_affinity import outage
from ironic_affinity import profile

#: The newest level this release reads, and writes unless pinned.
LEVEL = profile.FORMAT_LEVEL

# What a process says it runs. How the plugin reached it (ring.loader's
# enabled_by) is published by a conductor only on an Ironic with the
# pluggable hash-ring manager.
ENABLED_BY = 'enabled_by'
VERSION = 'version'
READS = 'reads'
WRITES = 'writes'
#: Level 1: no reader decides anything by them.
DESCRIPTIVE = {ENABLED_BY: 1, VERSION: 1, READS: 1, WRITES: 1}
MAX_TEXT = 255


def at_level(
    found: dict[str, Any], declared: Mapping[str, int], level: int
) -> dict[str, Any]:
    """``found`` without the keys above ``level``.

    :raises: KeyError for a key not declared: each key of an entry has
        its level (contributor/formats.rst).
    """
    return {k: v for k, v in found.items() if declared[k] <= level}


def writes(conf: cfg.ConfigOpts) -> int:
    """The level this process publishes at: its pin, or :data:`LEVEL`."""
    pinned: int | None = conf.affinity.pin_format
    return LEVEL if pinned is None else pinned


@functools.cache
def plugin_version() -> str:
    try:
        return metadata.version('ironic-affinity')
    except metadata.PackageNotFoundError:
        return 'unknown'


def describe(conf: cfg.ConfigOpts, enabled_by: str | None) -> dict[str, Any]:
    """The descriptive keys of this process's entry."""
    found: dict[str, Any] = {
        VERSION: plugin_version(),
        READS: LEVEL,
        WRITES: writes(conf),
    }
    if enabled_by is not None:
        found[ENABLED_BY] = enabled_by
    return found


@dataclasses.dataclass(frozen=True)
class Runs:
    """What a process's entry says it runs."""

    # The plugin's version; None for a release before level 2, which
    # does not say.
    version: str | None
    # The newest level it reads, and the level it publishes at.
    reads: int
    writes: int
    # How the plugin reached it; None when it does not say.
    enabled_by: str | None


def _text(value: Any) -> str | None:
    if isinstance(value, str) and 0 < len(value) <= MAX_TEXT:
        return value
    return None


def _level(value: Any) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool):
        return value if 1 <= value <= 1000 else None
    return None


def runs_of(raw: Any) -> Runs:
    """What an entry, a conductor's or an API process's, says it runs.
    Lenient, for reports: an entry that says nothing, or says it badly,
    is level 1 (a release before levels were published)."""
    if isinstance(raw, (bytes, str)):
        try:
            raw = json.loads(raw) if raw else None
        except (ValueError, RecursionError):
            raw = None
    if not isinstance(raw, dict):
        raw = {}
    reads = _level(raw.get(READS)) or 1
    return Runs(
        version=_text(raw.get(VERSION)),
        reads=reads,
        writes=min(_level(raw.get(WRITES)) or reads, reads),
        enabled_by=_text(raw.get(ENABLED_BY)),
    )


def note_newer(newer: outage.Conditions[str], name: str, runs: Runs) -> None:
    """Warn once while a member publishes a level this process does not
    read: a pin forgotten during an upgrade."""
    if runs.writes <= LEVEL:
        newer.cleared(name)
        return
    newer.raised(
        name,
        runs.writes,
        'Conductor %(name)s publishes format level %(level)d and this '
        'process reads %(reads)d: they may place nodes apart. Set '
        '[affinity]pin_format = %(reads)d there until every process is '
        'upgraded.',
        {'name': name, 'level': runs.writes, 'reads': LEVEL},
    )
