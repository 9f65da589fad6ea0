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

"""Scenario files for the offline ``plan`` and ``explain`` commands.

A scenario is a YAML or JSON mapping::

    conductors:
      - name: conductor1
        hard_affinity_tags: datacenter1        # a string or a list
        soft_affinity_tags: [rack10, "network1:5"]
        conductor_group: ''                    # optional
        hardware_types: [ipmi, redfish]        # optional; default: all
        max_nodes: 600                         # optional; default 0: no limit
        drain: false                           # optional; as [affinity]drain
    nodes:
      - name: node1
        uuid: 5d6a...                          # optional; hashed if given
        affinity_tags: rack10, network1
        driver: ipmi                           # optional
        conductor_group: ''                    # optional

Files are untrusted input: YAML is read with the safe loader only (no tag
constructs an object), and size and nesting are bounded. Every error names
the file and the entry.
"""

import dataclasses
import json
import os
from typing import Any

import yaml

from ironic_affinity import exception
from ironic_affinity import profile
from ironic_affinity import tags
from ironic_affinity._i18n import _

MAX_FILE_BYTES = 64 * 1024 * 1024

_CONDUCTOR_KEYS = frozenset(
    ('name', 'conductor_group', 'hardware_types', 'max_nodes', 'drain')
    + profile.TAG_OPTIONS
)
_NODE_KEYS = frozenset(
    ('name', 'uuid', 'affinity_tags', 'driver', 'conductor_group')
)


@dataclasses.dataclass(frozen=True)
class Scenario:
    path: str
    conductors: tuple[profile.ConductorProfile, ...]
    nodes: tuple[profile.NodeRequest, ...]

    def conductor_names(self) -> frozenset[str]:
        return frozenset(c.name for c in self.conductors)

    def node(self, name: str) -> profile.NodeRequest:
        """The node of that name or uuid.

        :raises: InvalidScenario when there is none.
        """
        for node in self.nodes:
            if name in (node.name, node.uuid):
                return node
        raise exception.InvalidScenario(
            _('%(path)s: no node named %(name)r')
            % {'path': self.path, 'name': name}
        )


def _read(path: str) -> Any:
    try:
        with open(path, 'rb') as handle:
            raw = handle.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise exception.InvalidScenario(
            _('%(path)s: cannot read: %(error)s')
            % {'path': path, 'error': exc.strerror or exc}
        ) from exc
    if len(raw) > MAX_FILE_BYTES:
        raise exception.InvalidScenario(
            _('%(path)s: larger than %(max)d MiB')
            % {'path': path, 'max': MAX_FILE_BYTES // (1024 * 1024)}
        )
    try:
        text = raw.decode('utf-8')
    except UnicodeDecodeError as exc:
        raise exception.InvalidScenario(
            _('%(path)s: not UTF-8 text (byte %(pos)d)')
            % {'path': path, 'pos': exc.start}
        ) from exc
    try:
        if os.path.splitext(path)[1].lower() == '.json':
            return json.loads(text)
        return yaml.safe_load(text)
    except (ValueError, yaml.YAMLError) as exc:
        raise exception.InvalidScenario(
            '%s: %s' % (path, _syntax_error(exc))
        ) from exc
    except RecursionError as exc:
        raise exception.InvalidScenario(
            _('%(path)s: nested too deeply') % {'path': path}
        ) from exc


def _syntax_error(exc: Exception) -> str:
    """Where and what, in one line: PyYAML's own message spans several,
    with a copy of the offending line."""
    if isinstance(exc, json.JSONDecodeError):
        return _(
            'line %(line)d, column %(column)d: not valid JSON: %(msg)s'
        ) % {
            'line': exc.lineno,
            'column': exc.colno,
            'msg': exc.msg,
        }
    if isinstance(exc, yaml.MarkedYAMLError) and exc.problem_mark:
        mark = exc.problem_mark
        what = exc.problem or ''
        if exc.context:
            what = '%s %s' % (what, exc.context)
        return _(
            'line %(line)d, column %(column)d: not valid YAML: %(what)s'
        ) % {
            'line': mark.line + 1,
            'column': mark.column + 1,
            'what': what,
        }
    return _('not valid YAML or JSON: %s') % str(exc).replace('\n', ' ')


def _entries(
    document: dict[str, Any], section: str, path: str
) -> list[dict[str, Any]]:
    entries = document.get(section) or []
    if not isinstance(entries, list):
        raise exception.InvalidScenario(
            _('%(path)s: %(section)s must be a list')
            % {'path': path, 'section': section}
        )
    for index, entry in enumerate(entries):
        if not isinstance(entry, dict):
            raise exception.InvalidScenario(
                _('%(path)s: %(section)s[%(index)d] must be a mapping')
                % {'path': path, 'section': section, 'index': index}
            )
    return entries


def _where(path: str, section: str, index: int, entry: dict[str, Any]) -> str:
    name = entry.get('name')
    label = '%s: %s[%d]' % (path, section, index)
    if isinstance(name, str):
        return '%s (%s)' % (label, tags.quote(name))
    return label


def _check_entry(
    entry: dict[str, Any], allowed: frozenset[str], where: str
) -> str:
    unknown = sorted(tags.quote(key) for key in set(entry) - allowed)
    if unknown:
        raise exception.InvalidScenario(
            _('%(where)s: unknown key(s) %(keys)s; allowed: %(allowed)s')
            % {
                'where': where,
                'keys': ', '.join(unknown),
                'allowed': ', '.join(sorted(allowed)),
            }
        )
    name = entry.get('name')
    if not isinstance(name, str) or not name.strip():
        raise exception.InvalidScenario(
            _('%s: a non-empty string "name" is required') % where
        )
    for key in ('uuid', 'driver', 'conductor_group'):
        value = entry.get(key)
        if value is not None and not isinstance(value, str):
            raise exception.InvalidScenario(
                _('%(where)s: %(key)s must be a string')
                % {'where': where, 'key': key}
            )
    return name


def _hardware_types(value: Any, where: str) -> frozenset[str] | None:
    if value is None:
        return None
    if isinstance(value, str):
        value = value.replace(',', ' ').split()
    if not isinstance(value, list) or not all(
        isinstance(v, str) for v in value
    ):
        raise exception.InvalidScenario(
            _('%s: hardware_types must be a list of strings') % where
        )
    return frozenset(value)


def _conductor(
    path: str, index: int, entry: dict[str, Any]
) -> profile.ConductorProfile:
    where = _where(path, 'conductors', index, entry)
    name = _check_entry(entry, _CONDUCTOR_KEYS, where)
    if not isinstance(entry.get('drain', False), bool):
        raise exception.InvalidScenario(
            _('%s: drain must be true or false') % where
        )
    try:
        return profile.ConductorProfile.build(
            name,
            hardware_types=_hardware_types(entry.get('hardware_types'), where),
            conductor_group=entry.get('conductor_group'),
            hard_affinity_tags=entry.get(profile.HARD_AFFINITY),
            hard_anti_affinity_tags=entry.get(profile.HARD_ANTI_AFFINITY),
            soft_affinity_tags=entry.get(profile.SOFT_AFFINITY),
            soft_anti_affinity_tags=entry.get(profile.SOFT_ANTI_AFFINITY),
            max_nodes=entry.get('max_nodes', 0),
            draining=entry.get('drain', False),
        )
    except (
        exception.InvalidTag,
        exception.ConflictingTags,
        exception.InvalidCapacity,
    ) as exc:
        raise exception.InvalidScenario('%s: %s' % (where, exc)) from exc


def _node(path: str, index: int, entry: dict[str, Any]) -> profile.NodeRequest:
    where = _where(path, 'nodes', index, entry)
    name = _check_entry(entry, _NODE_KEYS, where)
    try:
        return profile.NodeRequest.build(
            name,
            affinity_tags=entry.get('affinity_tags'),
            uuid=entry.get('uuid'),
            driver=entry.get('driver'),
            conductor_group=entry.get('conductor_group'),
        )
    except exception.InvalidTag as exc:
        raise exception.InvalidScenario('%s: %s' % (where, exc)) from exc


def _unique(path: str, section: str, values: list[str | None]) -> None:
    seen: set[str] = set()
    for index, value in enumerate(values):
        if value is None:
            continue
        if value in seen:
            raise exception.InvalidScenario(
                _('%(path)s: %(section)s[%(index)d]: %(value)s is given twice')
                % {
                    'path': path,
                    'section': section,
                    'index': index,
                    'value': tags.quote(value),
                }
            )
        seen.add(value)


def load(path: str) -> Scenario:
    """Read and check a scenario file.

    :raises: InvalidScenario with a one-line message naming the file and
        the entry at fault.
    """
    document = _read(path)
    if not isinstance(document, dict):
        raise exception.InvalidScenario(
            _('%s: expected a mapping with "conductors" and "nodes"') % path
        )
    unknown = sorted(
        tags.quote(k) for k in set(document) - {'conductors', 'nodes'}
    )
    if unknown:
        raise exception.InvalidScenario(
            _('%(path)s: unknown top-level key(s) %(keys)s')
            % {'path': path, 'keys': ', '.join(unknown)}
        )
    conductors = [
        _conductor(path, i, entry)
        for i, entry in enumerate(_entries(document, 'conductors', path))
    ]
    nodes = [
        _node(path, i, entry)
        for i, entry in enumerate(_entries(document, 'nodes', path))
    ]
    _unique(path, 'conductors', [c.name for c in conductors])
    _unique(path, 'nodes', [n.name for n in nodes])
    _unique(path, 'nodes', [n.uuid for n in nodes])
    return Scenario(path, tuple(conductors), tuple(nodes))
