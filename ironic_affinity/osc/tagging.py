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

"""``openstack baremetal affinity tag``: many nodes' tags from one file.

A dry run by default: it reads the mapping and every node, and says what
would change. With ``--apply`` each node whose tags change gets one
PATCH of its ``extra`` through Ironic's API, so a node is written whole
or not at all; the API's affinity middleware refuses bad tags as it does
for one node. Tags are checked here first, by the same grammar, so that
a refused node is named before anything is written.
"""

from collections.abc import Iterable
from concurrent import futures
import csv
import dataclasses
import json
import os
import sys
import threading
import time
from typing import Any

from osc_lib import exceptions
from osc_lib.command import command
import yaml

from ironic_affinity import exception
from ironic_affinity import tags
from ironic_affinity._i18n import _

# A node locked by a conductor (HTTP 409) is tried again this often.
LOCKED_TRIES = 5
LOCKED_WAIT = 1.0

# What becomes of a node of the mapping.
REFUSED = 'refused'
UNCHANGED = 'unchanged'
TO_CHANGE = 'to change'
CHANGED = 'changed'


@dataclasses.dataclass
class Row:
    """One node of the mapping, and what became of it."""

    node: str
    wanted: str | None = None  # canonical tag text; None if refused
    uuid: str | None = None
    before: str | None = None
    status: str = TO_CHANGE
    why: str = ''

    def result(self) -> str:
        return '%s: %s' % (self.status, self.why) if self.why else self.status


def read_mapping(path: str) -> dict[str, Any]:
    """Node (name or UUID) -> tags, from a CSV file (``node,tags`` rows,
    a header row allowed) or a YAML or JSON mapping; an error naming the
    file and the place for anything else."""
    try:
        with open(path, newline='', encoding='utf-8') as stream:
            if path.lower().endswith('.csv'):
                return _from_csv(path, csv.reader(stream))
            found = yaml.load(stream, Loader=_UniqueKeys)  # noqa: S506 - safe
    except (OSError, UnicodeDecodeError, yaml.YAMLError, csv.Error) as exc:
        raise exceptions.CommandError(
            _('%(path)s: cannot read: %(error)s')
            % {'path': path, 'error': exc}
        ) from exc
    if not isinstance(found, dict):
        raise exceptions.CommandError(
            _('%s: expected a mapping of node to tags') % path
        )
    return {str(node): value for node, value in found.items()}


class _UniqueKeys(yaml.SafeLoader):
    """YAML's safe loader, refusing a key given twice in a mapping (which
    it would otherwise keep the last of)."""

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        seen = set()
        for key_node, _value in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None,
                    None,
                    _('node %s given twice') % tags.quote(str(key)),
                    key_node.start_mark,
                )
            seen.add(key)
        return super().construct_mapping(node, deep)


def _from_csv(path: str, rows: Iterable[list[str]]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for number, row in enumerate(rows, 1):
        if number == 1 and [c.strip().lower() for c in row] == [
            'node',
            'tags',
        ]:
            continue
        if not row or not any(cell.strip() for cell in row):
            continue
        if len(row) != 2:
            raise exceptions.CommandError(
                _('%(path)s, line %(line)d: expected node,tags')
                % {'path': path, 'line': number}
            )
        node = row[0].strip()
        if node in found:
            raise exceptions.CommandError(
                _('%(path)s, line %(line)d: node %(node)s given twice')
                % {'path': path, 'line': number, 'node': tags.quote(node)}
            )
        found[node] = row[1]
    return found


def plan(mapping: dict[str, Any], nodes: list[Any], key: str) -> list[Row]:
    """Each node of the mapping: its canonical tags, or why refused, and
    whether that changes what Ironic holds.

    :raises: CommandError for a node given by its name and its uuid.
    """
    by_ident = {}
    for node in nodes:
        by_ident[node.uuid] = node
        if node.name:
            by_ident[node.name] = node
    given_as: dict[str, str] = {}
    rows = []
    for ident, value in mapping.items():
        row = Row(ident)
        rows.append(row)
        found = by_ident.get(ident)
        if found is None:
            row.status, row.why = REFUSED, _('no such node')
            continue
        first = given_as.setdefault(found.uuid, ident)
        if first != ident:
            # Two concurrent writes of one node: either could win.
            raise exceptions.CommandError(
                _('node %(first)s given twice, also as %(ident)s')
                % {'first': tags.quote(first), 'ident': tags.quote(ident)}
            )
        row.uuid = found.uuid
        current = (found.extra or {}).get(key)
        row.before = _shown(current)
        try:
            parsed = tags.parse_tags(value, 'node %s' % ident)
        except exception.InvalidTag as exc:
            row.status, row.why = REFUSED, str(exc)
            continue
        row.wanted = ', '.join(sorted(parsed))
        if current is not None and _same(current, parsed):
            row.status = UNCHANGED
    return rows


def _shown(current: Any) -> str | None:
    """Stored tags as a line: a list's items, not its repr."""
    if current is None:
        return None
    if isinstance(current, list):
        return ', '.join(map(str, current))
    return str(current)


def _same(current: Any, parsed: frozenset[str]) -> bool:
    try:
        return tags.parse_tags(current, 'stored') == parsed
    except exception.InvalidTag:
        return False


class TagNodes(command.Lister):
    """Set the affinity tags of many nodes from a CSV or YAML mapping:
    a dry run unless --apply; exit status 1 if any node is refused."""

    COLUMNS = ('Node', 'UUID', 'Tags before', 'Tags after', 'Result')

    def get_parser(self, prog_name: str) -> Any:
        parser = super().get_parser(prog_name)
        parser.add_argument(
            'mapping',
            metavar='<file>',
            help=_(
                'Node name or UUID to tags: a CSV file of node,tags rows '
                '(.csv), or a YAML or JSON mapping.'
            ),
        )
        parser.add_argument(
            '--apply',
            action='store_true',
            help=_('Write the tags; without it, only say what would change.'),
        )
        parser.add_argument(
            '--key',
            default='affinity_tags',
            help=_(
                'The key of the nodes\' extra field that holds the tags: '
                '[affinity]node_tags_key (default: affinity_tags).'
            ),
        )
        parser.add_argument(
            '--concurrency',
            type=int,
            default=4,
            help=_('Nodes written at once (default: 4).'),
        )
        return parser

    def take_action(self, parsed_args: Any) -> tuple[Any, Any]:
        if parsed_args.concurrency < 1:
            raise exceptions.CommandError(_('--concurrency must be 1 or more'))
        mapping = read_mapping(parsed_args.mapping)
        client = _baremetal(self.app)
        nodes = client.node.list(limit=0, fields=['uuid', 'name', 'extra'])
        rows = plan(mapping, nodes, parsed_args.key)
        if parsed_args.apply:
            self._apply(client, rows, parsed_args)
        self.refused = sum(r.status == REFUSED for r in rows)
        return self.COLUMNS, [
            (r.node, r.uuid, r.before, r.wanted, r.result()) for r in rows
        ]

    def _apply(self, client: Any, rows: list[Row], args: Any) -> None:
        due = [r for r in rows if r.status == TO_CHANGE]
        path = '/extra/%s' % args.key
        progress = Progress(len(due), self.app.stderr)

        def write(row: Row) -> None:
            patch = [{'op': 'add', 'path': path, 'value': row.wanted}]
            for attempt in range(LOCKED_TRIES):
                try:
                    client.node.update(row.uuid, patch)
                except Exception as exc:  # noqa: BLE001 - said per node
                    locked = getattr(exc, 'http_status', None) == 409
                    if locked and attempt + 1 < LOCKED_TRIES:
                        time.sleep(LOCKED_WAIT)
                        continue
                    row.status, row.why = REFUSED, _message(exc)
                else:
                    row.status = CHANGED
                break
            progress.one()

        with futures.ThreadPoolExecutor(args.concurrency) as pool:
            list(pool.map(write, due))
        progress.done(sum(r.status == CHANGED for r in due))

    def run(self, parsed_args: Any) -> int:
        status = super().run(parsed_args)
        return 1 if self.refused else int(status or 0)


def _baremetal(app: Any) -> Any:
    """The baremetal client of python-ironicclient, authenticated as the
    openstack client is."""
    return app.client_manager.baremetal


def _message(exc: Exception) -> str:
    """The API's own words for a refusal, on one line."""
    text = str(exc)
    try:
        text = json.loads(text)['error_message']
    except (ValueError, KeyError, TypeError):
        pass
    return ' '.join(str(text).split())


class Progress:
    """Nodes written so far, on stderr: one line rewritten on a
    terminal, else a line every tenth of the way."""

    def __init__(self, total: int, stream: Any = sys.stderr) -> None:
        self.total = total
        self.count = 0
        self.stream = stream
        self.tty = bool(getattr(stream, 'isatty', lambda: False)())
        self._step = max(1, total // 10)
        self._started = time.monotonic()
        self._lock = threading.Lock()

    def one(self) -> None:
        with self._lock:
            self.count += 1
            self._show()

    def _show(self) -> None:
        if self.tty:
            width = 30
            filled = width * self.count // max(1, self.total)
            self.stream.write(
                '\r[%s%s] %d/%d'
                % (
                    '#' * filled,
                    '.' * (width - filled),
                    self.count,
                    self.total,
                )
            )
        elif self.count % self._step == 0:
            self.stream.write('%d/%d nodes done\n' % (self.count, self.total))
        self.stream.flush()

    def done(self, changed: int) -> None:
        if self.tty:
            self.stream.write(os.linesep)
        self.stream.write(
            '%d node(s) in %.1f s: %d changed, %d refused\n'
            % (
                self.count,
                time.monotonic() - self._started,
                changed,
                self.count - changed,
            )
        )
        self.stream.flush()
