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

"""Replay the fuzzing corpus against the contract of each entry point.

``ironic_affinity/tests/corpus`` keeps, for the tag parser, the scenario
loader and the capability decoder, every input that ever broke them and
the boundary and hostile cases around them (its README.rst says how it is
laid out and how it grows). Every file there, and every input too large
to keep that is made here instead (GENERATED), is a test of its own.

The contract is the same for the three entry points. An input gives
either

* a valid result: tags in the grammar, weights from 1 to 1000, unique
  names, a profile that encodes and decodes back to itself; or
* the project's own exception for that entry point, whose message is one
  line (no line break of any kind), names the source first (the option,
  the file), says something after it, and stays within MAX_MESSAGE
  characters after the source's name;

and never anything else: no other exception, whatever the input. Where
the file name pins the outcome (``ok-``, ``soft-``, ``bad-``), the outcome
is checked as well.

tools/fuzz.py runs the same checks on generated inputs and writes the
ones that break them into the corpus.
"""

from collections.abc import Callable
from collections.abc import Mapping
import os
import re
import traceback
from typing import Any

import fixtures
import yaml

from ironic_affinity import exception
from ironic_affinity import profile
from ironic_affinity import scenario
from ironic_affinity import tags
from ironic_affinity.membership import capabilities
from ironic_affinity.tests import base

CORPUS = os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'corpus'
)
TARGETS = ('tags', 'scenarios', 'capabilities')
# What a corpus file holds, by target and extension:
#   tags         .txt   the text of an option value, byte for byte
#                       (bytes that are not UTF-8 arrive as Python
#                       decodes them from a command line: surrogates)
#                .yaml  a value as a scenario file delivers it
#   scenarios    any    the file itself; .json is read as JSON, anything
#                       else as YAML
#   capabilities .json  the bytes a member published
#                .yaml  the object a driver hands back once decoded
EXTENSIONS = {
    'tags': ('.txt', '.yaml'),
    'scenarios': ('.yaml', '.json', '.txt'),
    'capabilities': ('.json', '.yaml'),
}
# The outcome a file name's prefix pins:
#   ok     accepted
#   soft   accepted as a soft (weighted) tag list, refused as a plain one
#   bad    refused with the project's own exception
#   any    the contract only: the outcome is open to change
#   found  written by tools/fuzz.py: the contract only, until someone
#          fixes the bug and renames the file ok- or bad-
OUTCOMES = ('ok', 'soft', 'bad', 'any', 'found')
PINNED = ('ok', 'soft', 'bad')
# The inputs that found bugs, kept under the names they have here.
BUGS = {
    # repr() of a 5,000-digit integer raised inside the error path.
    'tags': (
        'bad-integer-of-5000-digits-in-a-list.yaml',
        'bad-integer-of-5000-digits-as-a-weight.yaml',
    ),
    'scenarios': (
        'bad-integer-of-5000-digits-as-a-weight.yaml',
        'bad-integer-of-5000-digits-in-a-tag-list.yaml',
        'bad-integer-of-5000-digits-as-a-key.yaml',
        # A few lines of aliases made a 7 MB message.
        'bad-alias-bomb-2-to-the-18-in-a-tag-list.yaml',
        # A key, or YAML's own error text, put a line break in a message.
        'bad-newline-in-a-top-level-key.yaml',
        'bad-newline-in-an-entry-key.yaml',
        'bad-yaml-error-text-of-several-lines.yaml',
    ),
    'capabilities': (
        # Found by tools/fuzz.py: the unknown-format message showed the
        # value with repr(), as long as 64 KiB.
        'bad-format-version-a-long-string-message-was-64-kib.yaml',
        # Found by tools/fuzz.py: a conductor group of 255 characters that
        # lower-casing lengthens was accepted, then refused re-encoded.
        'bad-conductor-group-longer-once-lower-cased.json',
    ),
}
# Corpus files are small: anything larger is made by GENERATED.
MAX_FILE_BYTES = 8 * 1024
# How long a message may be after the name of its source. The longest
# the project writes today quotes a line of YAML: about 300 characters.
MAX_MESSAGE = 1000
# What the tag parser is told its input is, and so what messages start with.
WHERE = 'corpus'
TAG_GRAMMAR = re.compile(r'[a-z0-9][a-z0-9._-]{0,63}')
# Inputs that break the contract today, with why. Their tests are
# expected to fail until the bug is fixed; then they fail the other way,
# so that the entry is removed here and the file renamed.
KNOWN_BREAKS: dict[tuple[str, str], str] = {}


class ContractBroken(AssertionError):
    """An entry point broke the contract; ``kind`` says how, in a word
    fit for a file name."""

    def __init__(self, kind: str, detail: str) -> None:
        super().__init__('%s: %s' % (kind, detail))
        self.kind = kind


def _cut(text: str) -> str:
    return repr(text[:200]) + ('...' if len(text) > 200 else '')


def _text(exc: BaseException) -> str:
    try:
        return _cut(str(exc))
    except Exception as error:  # noqa: BLE001 - str() itself may break
        return '<str() raised %s>' % type(error).__name__


def origin(exc: BaseException) -> str:
    """Where in ironic_affinity an exception was raised, as module:line;
    tools/fuzz.py groups what it finds by it."""
    frames = [
        frame
        for frame in traceback.extract_tb(exc.__traceback__)
        if os.sep + 'ironic_affinity' + os.sep in frame.filename
        and os.sep + 'tests' + os.sep not in frame.filename
    ]
    if not frames:
        return ''
    return '%s:%s' % (os.path.basename(frames[-1].filename), frames[-1].lineno)


def _call(
    function: Callable[..., object],
    args: tuple[object, ...],
    expected: type[exception.AffinityError],
) -> tuple[object, exception.AffinityError | None]:
    """(result, None), or (None, the project's exception); anything else
    raised is a broken contract."""
    try:
        return function(*args), None
    except expected as exc:
        return None, exc
    except Exception as exc:
        raise ContractBroken(
            'raised-%s' % type(exc).__name__,
            '%s raised %s: %s'
            % (function.__qualname__, type(exc).__name__, _text(exc)),
        ) from exc


def _check_message(exc: exception.AffinityError, prefix: str) -> None:
    """One line, naming the source first, saying something, bounded."""
    try:
        message = str(exc)
    except Exception as error:
        raise ContractBroken(
            'unprintable-message', 'str() raised %s' % type(error).__name__
        ) from exc
    if not message.strip():
        raise ContractBroken('empty-message', _cut(message)) from exc
    if message.splitlines() != [message]:
        raise ContractBroken('multi-line-message', _cut(message)) from exc
    if not message.startswith(prefix):
        raise ContractBroken(
            'unnamed-source',
            '%s does not start with %s' % (_cut(message), _cut(prefix)),
        ) from exc
    rest = message[len(prefix) :]
    if len(rest) > MAX_MESSAGE:
        raise ContractBroken(
            'long-message', '%d characters: %s' % (len(message), _cut(message))
        ) from exc
    if not rest.strip():
        raise ContractBroken('empty-message', _cut(message)) from exc


def _check_tag_set(value: object, what: str) -> None:
    if not isinstance(value, frozenset) or len(value) > tags.MAX_TAGS:
        raise ContractBroken(
            'invalid-result', '%s: %s' % (what, _cut(repr(value)))
        )
    for tag in value:
        if not isinstance(tag, str) or not TAG_GRAMMAR.fullmatch(tag):
            raise ContractBroken(
                'invalid-result', '%s: tag %s' % (what, _cut(repr(tag)))
            )


def _check_weights(value: object, what: str) -> None:
    if not isinstance(value, Mapping) or len(value) > tags.MAX_TAGS:
        raise ContractBroken(
            'invalid-result', '%s: %s' % (what, _cut(repr(value)))
        )
    _check_tag_set(frozenset(value), what)
    for tag, weight in value.items():
        if type(weight) is not int or not 1 <= weight <= tags.MAX_WEIGHT:
            raise ContractBroken(
                'invalid-result',
                '%s: weight of %s: %s' % (what, tag, _cut(repr(weight))),
            )


def _check_conductor(conductor: object) -> None:
    if not isinstance(conductor, profile.ConductorProfile):
        raise ContractBroken('invalid-result', _cut(repr(conductor)))
    what = 'conductor %s' % _cut(str(conductor.name))
    if not isinstance(conductor.name, str) or not conductor.name.strip():
        raise ContractBroken('invalid-result', what + ': name')
    _check_tag_set(conductor.hard_affinity_tags, what)
    _check_tag_set(conductor.hard_anti_affinity_tags, what)
    _check_weights(conductor.soft_affinity_tags, what)
    _check_weights(conductor.soft_anti_affinity_tags, what)
    if conductor.hard_affinity_tags & conductor.hard_anti_affinity_tags:
        raise ContractBroken(
            'invalid-result', what + ': tags in both hard lists'
        )
    hardware_types = conductor.hardware_types
    if hardware_types is not None and not (
        isinstance(hardware_types, frozenset)
        and all(isinstance(h, str) for h in hardware_types)
    ):
        raise ContractBroken('invalid-result', what + ': hardware_types')
    if not isinstance(conductor.conductor_group, str):
        raise ContractBroken('invalid-result', what + ': conductor_group')


def _check_node(node: object) -> None:
    if not isinstance(node, profile.NodeRequest):
        raise ContractBroken('invalid-result', _cut(repr(node)))
    what = 'node %s' % _cut(str(node.name))
    if not isinstance(node.name, str) or not node.name.strip():
        raise ContractBroken('invalid-result', what + ': name')
    _check_tag_set(node.tags, what)
    for field in (node.uuid, node.driver):
        if field is not None and not isinstance(field, str):
            raise ContractBroken('invalid-result', what + ': uuid or driver')
    if not isinstance(node.conductor_group, str):
        raise ContractBroken('invalid-result', what + ': conductor_group')


def _check_unique(values: list[str | None], what: str) -> None:
    given = [v for v in values if v is not None]
    if len(set(given)) != len(given):
        raise ContractBroken('invalid-result', what + ' given twice')


def check_tags(value: object) -> tuple[str, str]:
    """Parse ``value`` as a plain and as a soft tag list; return 'ok',
    'soft' or 'bad', and the message of the refusal if any.

    :raises: ContractBroken.
    """
    plain, plain_error = _call(
        tags.parse_tags, (value, WHERE), exception.InvalidTag
    )
    weighted, weighted_error = _call(
        tags.parse_weighted_tags, (value, WHERE), exception.InvalidTag
    )
    for error in (plain_error, weighted_error):
        if error is not None:
            _check_message(error, WHERE + ': ')
    if weighted is not None:
        _check_weights(weighted, 'soft list')
    if plain is None:
        return ('bad' if weighted is None else 'soft'), str(plain_error)
    _check_tag_set(plain, 'plain list')
    assert isinstance(plain, frozenset)
    # A plain list is a soft list whose every weight is the default.
    if weighted != dict.fromkeys(plain, tags.DEFAULT_WEIGHT):
        raise ContractBroken(
            'inconsistent',
            'read as a plain list: %s; as a soft list: %s'
            % (_cut(repr(plain)), _cut(repr(weighted))),
        )
    return 'ok', ''


def check_scenario(path: str) -> tuple[str, str]:
    """Load the scenario file at ``path``; return 'ok' or 'bad', and the
    message of the refusal if any.

    :raises: ContractBroken.
    """
    loaded, error = _call(scenario.load, (path,), exception.InvalidScenario)
    if error is not None:
        _check_message(error, path + ': ')
        return 'bad', str(error)
    if not isinstance(loaded, scenario.Scenario):
        raise ContractBroken('invalid-result', _cut(repr(loaded)))
    for conductor in loaded.conductors:
        _check_conductor(conductor)
    for node in loaded.nodes:
        _check_node(node)
    _check_unique([c.name for c in loaded.conductors], 'a conductor name')
    _check_unique([n.name for n in loaded.nodes], 'a node name')
    _check_unique([n.uuid for n in loaded.nodes], 'a node uuid')
    return 'ok', ''


def check_capabilities(raw: object) -> tuple[str, str]:
    """Decode ``raw`` as a member's capabilities; return 'ok' or 'bad',
    and the message of the refusal if any.

    :raises: ContractBroken.
    """
    decoded, error = _call(
        capabilities.decode, ('member', raw), exception.InvalidCapabilities
    )
    if error is not None:
        # The caller names the member: the message need only say what.
        _check_message(error, '')
        return 'bad', str(error)
    _check_conductor(decoded)
    assert isinstance(decoded, profile.ConductorProfile)
    # What a member accepts, it must be able to publish again.
    encoded = capabilities.encode(decoded)
    again, error = _call(
        capabilities.decode, ('member', encoded), exception.InvalidCapabilities
    )
    if again != decoded:
        raise ContractBroken(
            'no-round-trip',
            'decoded %s, which encodes to something that %s'
            % (
                _cut(repr(decoded)),
                'is refused: %s' % _text(error) if error else 'differs',
            ),
        )
    return 'ok', ''


def decode_input(target: str, data: bytes, ext: str) -> object:
    """What the content of a tags or capabilities file stands for.

    :raises: ValueError or yaml.YAMLError when a .yaml file is not YAML.
    """
    if ext == '.yaml':
        return yaml.safe_load(data.decode('utf-8'))
    if target == 'tags':
        return data.decode('utf-8', 'surrogateescape')
    return data


def read_input(target: str, path: str) -> object:
    """What a corpus file gives its target's entry point."""
    if target == 'scenarios':
        return path
    with open(path, 'rb') as handle:
        data = handle.read()
    return decode_input(target, data, os.path.splitext(path)[1])


CHECKS: dict[str, Callable[[Any], tuple[str, str]]] = {
    'tags': check_tags,
    'scenarios': check_scenario,
    'capabilities': check_capabilities,
}


def corpus_files(target: str, corpus: str = CORPUS) -> list[str]:
    """The names of a target's corpus files."""
    folder = os.path.join(corpus, target)
    if not os.path.isdir(folder):
        return []
    return sorted(n for n in os.listdir(folder) if not n.startswith('.'))


def outcome(name: str) -> str:
    """What a corpus name pins: its prefix up to the first dash."""
    return name.partition('-')[0]


# Inputs too large to keep as files, made for each run in a scratch
# folder. Named as corpus files are; a function takes the scratch folder
# and returns what the entry point gets.
def _nested(depth: int) -> list[object]:
    top: list[object] = []
    inner = top
    for _ in range(depth):
        deeper: list[object] = []
        inner.append(deeper)
        inner = deeper
    return top


def _scenario_file(content: bytes) -> Callable[[str, str], str]:
    def make(scratch: str, name: str) -> str:
        path = os.path.join(scratch, name)
        with open(path, 'wb') as handle:
            handle.write(content)
        return path

    return make


def _sparse_file(size: int) -> Callable[[str, str], str]:
    def make(scratch: str, name: str) -> str:
        path = os.path.join(scratch, name)
        with open(path, 'wb') as handle:
            handle.truncate(size)
        return path

    return make


def _directory(scratch: str, name: str) -> str:
    path = os.path.join(scratch, name)
    os.mkdir(path)
    return path


def _made(factory: Callable[[], object]) -> Callable[[str, str], object]:
    return lambda scratch, name: factory()


_CAPS_64_KIB = b'{"format": 1}'.ljust(capabilities.MAX_ENCODED_BYTES)
GENERATED: dict[str, dict[str, Callable[[str, str], object]]] = {
    'tags': {
        'bad-item-of-100000-characters.txt': _made(lambda: 'x' * 100000),
        'bad-100000-tags.txt': _made(lambda: 'a ' * 100000),
        'bad-integer-of-5000-decimal-digits.yaml': _made(lambda: 10**4999),
        'bad-list-nested-100000-deep.yaml': _made(lambda: _nested(100000)),
    },
    'scenarios': {
        'bad-nested-100000-deep.yaml': _scenario_file(b'[' * 100000),
        'bad-nested-100000-deep.json': _scenario_file(b'[' * 100000),
        'bad-mappings-nested-100000-deep.yaml': _scenario_file(
            b'{"a": ' * 100000
        ),
        'bad-larger-than-64-mib.yaml': _sparse_file(
            scenario.MAX_FILE_BYTES + 1
        ),
        'bad-a-directory.yaml': _directory,
        'bad-no-such-file.yaml': lambda scratch, name: os.path.join(
            scratch, name
        ),
    },
    'capabilities': {
        'ok-exactly-64-kib.json': _made(lambda: _CAPS_64_KIB),
        'bad-64-kib-and-one-byte.json': _made(lambda: _CAPS_64_KIB + b' '),
        'bad-nested-100000-deep.json': _made(lambda: b'[' * 100000),
        'bad-nested-60000-deep-under-64-kib.json': _made(lambda: b'[' * 60000),
        'bad-nested-100000-deep.yaml': _made(
            lambda: {'format': 1, 'hardware_types': _nested(100000)}
        ),
        'bad-larger-than-64-kib-once-encoded.yaml': _made(
            lambda: {
                'format': 1,
                'hardware_types': [
                    '%03d' % i + 'x' * (capabilities.MAX_NAME_LENGTH - 3)
                    for i in range(capabilities.MAX_HARDWARE_TYPES)
                ],
            }
        ),
        'bad-weight-of-5000-decimal-digits.yaml': _made(
            lambda: {'format': 1, profile.SOFT_AFFINITY: {'rack1': 10**4999}}
        ),
        'bad-conductor-group-of-100000-characters.yaml': _made(
            lambda: {'format': 1, 'conductor_group': 'x' * 100000}
        ),
    },
}


class CorpusTestCase(base.TestCase):
    """The corpus itself: its layout and its names."""

    def test_every_target_has_inputs(self):
        self.assertEqual(
            sorted(TARGETS),
            sorted(
                n
                for n in os.listdir(CORPUS)
                if os.path.isdir(os.path.join(CORPUS, n))
            ),
        )
        for target in TARGETS:
            self.assertGreater(len(corpus_files(target)), 10, target)

    def test_names_say_the_outcome_and_the_kind_of_input(self):
        for target in TARGETS:
            for name in corpus_files(target) + list(GENERATED[target]):
                self.assertIn(outcome(name), OUTCOMES, name)
                if target != 'tags':
                    self.assertNotEqual('soft', outcome(name), name)
                self.assertIn(
                    os.path.splitext(name)[1], EXTENSIONS[target], name
                )
                self.assertRegex(name, r'^[a-z0-9][a-z0-9.-]+$')

    def test_files_are_small_and_plain(self):
        for target in TARGETS:
            for name in corpus_files(target):
                path = os.path.join(CORPUS, target, name)
                self.assertTrue(os.path.isfile(path), path)
                self.assertLessEqual(
                    os.path.getsize(path), MAX_FILE_BYTES, path
                )

    def test_names_are_unique_as_tests(self):
        for target in TARGETS:
            names = corpus_files(target) + list(GENERATED[target])
            ids = [_test_name(target, n) for n in names]
            self.assertEqual(len(ids), len(set(ids)), target)

    def test_the_inputs_that_found_bugs_are_kept(self):
        for target, names in BUGS.items():
            for name in names:
                self.assertIn(name, corpus_files(target), target)

    def test_known_breaks_are_in_the_corpus(self):
        for target, name in KNOWN_BREAKS:
            self.assertIn(name, corpus_files(target) + list(GENERATED[target]))


class ReplayTestCase(base.TestCase):
    """One test per corpus file and per generated input (added below)."""

    def _replay(
        self, target: str, name: str, make: Callable[[str, str], object]
    ) -> None:
        scratch = self.useFixture(fixtures.TempDir()).path
        expected = outcome(name)
        got, message = CHECKS[target](make(scratch, name))
        if expected in PINNED:
            self.assertEqual(
                expected,
                got,
                'the name of %s/%s pins another outcome; message: %s'
                % (target, name, message),
            )

    def _replay_known_break(
        self, target: str, name: str, make: Callable[[str, str], object]
    ) -> None:
        self.expectFailure(
            KNOWN_BREAKS[(target, name)], self._replay, target, name, make
        )


def _test_name(target: str, name: str) -> str:
    return 'test_%s_%s' % (target, re.sub(r'[^0-9A-Za-z]+', '_', name))


def _from_file(target: str) -> Callable[[str, str], object]:
    return lambda scratch, name: read_input(
        target, os.path.join(CORPUS, target, name)
    )


def _add_replays() -> None:
    for target in TARGETS:
        makers = dict.fromkeys(corpus_files(target), _from_file(target))
        makers.update(GENERATED[target])
        for name, make in makers.items():
            if (target, name) in KNOWN_BREAKS:
                method = ReplayTestCase._replay_known_break
            else:
                method = ReplayTestCase._replay

            def test(self, target=target, name=name, make=make, run=method):
                run(self, target, name, make)

            test.__doc__ = 'Replay %s/%s.' % (target, name)
            test_name = _test_name(target, name)
            while hasattr(ReplayTestCase, test_name):
                # test_names_are_unique_as_tests says to rename one.
                test_name += '_'
            setattr(ReplayTestCase, test_name, test)


_add_replays()
