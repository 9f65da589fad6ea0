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

"""Fuzz the tag parser, the scenario loader and the capability decoder.

The unit tests run these fuzzers a few hundred examples at a time
(test_properties.py, membership/test_capabilities_fuzz.py). This runs the
same strategies, hostile values and mutations of the corpus files, for as
long as asked, checks every input against the contract test_corpus.py
replays, and writes each input that breaks it into
``ironic_affinity/tests/corpus/<target>/`` as
``found-<what broke>-<digest>.<ext>``: the corpus grows by the route the
replay test reads it, and that test fails until the bug is fixed.

Run it where ironic-affinity and the test requirements are installed::

    python tools/fuzz.py [--targets tags,scenarios,capabilities]
        [--max-examples 20000] [--seconds 600] [--seed N] [--dry-run]

--max-examples and --seconds bound each target; the first reached ends
it. Breaks are grouped by what broke and where in ironic_affinity; the
smallest input of each group is kept, cut down further when it is a
file's content, and written only if reading the written file breaks the
contract the same way. An input slower than --slow seconds is a break
too, though the replay test times nothing. The exit status is 1 when
anything the corpus did not hold yet was found.
"""

import argparse
import dataclasses
import hashlib
import json
import os
import re
import sys
import tempfile
import time
from typing import Any

import hypothesis
from hypothesis import strategies as st
import yaml

from ironic_affinity import profile
from ironic_affinity import tags
from ironic_affinity.membership import capabilities
from ironic_affinity.tests.unit import test_corpus
from ironic_affinity.tests.unit import test_properties
from ironic_affinity.tests.unit.membership import test_capabilities_fuzz

DESCRIPTION = (
    'Fuzz the tag parser, the scenario loader and the capability decoder; '
    'write what breaks their contract into the corpus.'
)
# Examples per Hypothesis run; each target runs as many as its budget
# allows, each with a new seed.
ROUND = 1000
# Attempts at cutting a found file's content down.
SHRINK_ATTEMPTS = 2000
# The checkout this script is in: its corpus is the one to grow, even
# when ironic-affinity is installed from elsewhere.
CHECKOUT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS = os.path.join(CHECKOUT, 'ironic_affinity', 'tests', 'corpus')
EXAMPLES = os.path.join(CHECKOUT, 'examples')


@dataclasses.dataclass(frozen=True)
class AsFile:
    """An input as the content of a corpus file of that extension."""

    data: bytes
    ext: str


# ------------------------------------------------------------ strategies

# Bytes that mean something to one of the parsers, or sit at a boundary.
INTERESTING = (
    [bytes([byte]) for byte in b'\x00\xff\n\r\t ,:"\'[]{}#']
    + b'&a |*a|!!|? |- |<<: |\\u0000|0|1|-1|1000|1001|01000'.split(b'|')
    + b'null|true|no|NaN|1e400'.split(b'|')
    + [b'0x' + b'f' * 80, b'9' * 40, b'x' * 65, b'\xef\xbb\xbf']
    # Dotted capital I (lower-cased, two characters), line separator,
    # right-to-left override, Arabic-Indic five.
    + [c.encode() for c in '\u0130\u2028\u202e\u0665']
)
CHUNKS = st.one_of(
    st.sampled_from(INTERESTING), st.binary(min_size=1, max_size=8)
)


@st.composite
def mutations(
    draw: st.DrawFn, seeds: list[AsFile], extensions: tuple[str, ...]
) -> AsFile:
    """A seed's content with a few bytes inserted, removed, overwritten
    or repeated, now and then read as another kind of file."""
    seed = draw(st.sampled_from(seeds))
    data = bytearray(seed.data)
    for _ in range(draw(st.integers(1, 6))):
        at = draw(st.integers(0, len(data)))
        how = draw(st.integers(0, 3))
        if how == 0:
            data[at:at] = draw(CHUNKS)
        elif how == 1:
            del data[at : at + draw(st.integers(1, 16))]
        elif how == 2:
            chunk = draw(CHUNKS)
            data[at : at + len(chunk)] = chunk
        else:
            end = draw(st.integers(at, min(len(data), at + 64)))
            data[at:at] = data[at:end] * draw(st.integers(1, 8))
    # Mostly read as the seed was; now and then as another kind of file.
    ext = draw(st.sampled_from((seed.ext,) * 3 + extensions))
    return AsFile(bytes(data), ext)


def seeds(target: str) -> list[AsFile]:
    """The corpus files of a target, and the examples for scenarios."""
    paths = [
        os.path.join(CORPUS, target, name)
        for name in test_corpus.corpus_files(target, CORPUS)
    ]
    if target == 'scenarios' and os.path.isdir(EXAMPLES):
        paths += [
            os.path.join(EXAMPLES, name)
            for name in sorted(os.listdir(EXAMPLES))
        ]
    found = []
    for path in paths:
        with open(path, 'rb') as handle:
            found.append(AsFile(handle.read(), os.path.splitext(path)[1]))
    return found


# Values no grammar expects: integers too long to print, floats that are
# not numbers, text whose case changes its length, look-alike characters.
HUGE_INTEGERS = st.one_of(
    st.integers(4290, 5100).map(lambda n: 10**n),
    st.integers(3570, 4300).map(lambda n: -(16**n)),
)
LONG_TEXT = st.builds(
    lambda char, count: char * count,
    st.sampled_from(
        ('x', 'X', '\u0130', '\u00df', '\ufb03', '\u212a', '\u202e', ' ', ':')
    ),
    st.one_of(st.integers(0, 300), st.integers(60000, 70000)),
)
HOSTILE = st.one_of(
    HUGE_INTEGERS,
    LONG_TEXT,
    st.sampled_from(
        (True, False, None, float('nan'), float('inf'), -0.0, 0, 1, 1000)
    ),
    st.sampled_from((1001, -1, 2**63, b'rack1', '', ' ', 'rack1:5', 'a\nb')),
    st.text(max_size=20),
)
HOSTILE_VALUES = st.one_of(
    HOSTILE,
    st.lists(HOSTILE, max_size=4),
    st.dictionaries(
        st.one_of(st.text(max_size=8), HOSTILE), HOSTILE, max_size=4
    ),
)
# Lists around the limit of 128 tags, one item of which may be odd.
MANY_TAGS = st.builds(
    lambda count, odd, at, separator: separator.join(
        ['t%d' % i for i in range(count)][:at]
        + [odd]
        + ['u%d' % i for i in range(count)][at:]
    ),
    st.integers(120, 140),
    test_properties.ITEM_LIKE,
    st.integers(0, 140),
    st.sampled_from(test_properties.SEPARATORS),
)

TAGS = st.one_of(
    test_properties.TAG_LIST_VALUES,
    MANY_TAGS,
    HOSTILE_VALUES,
)


# libyaml's emitter when PyYAML has it: the pure Python one is most of
# the cost of a generated scenario.
_SafeDumper = getattr(yaml, 'CSafeDumper', yaml.SafeDumper)


class _Dumper(_SafeDumper):  # type: ignore[misc,valid-type]
    """Writes integers too long for str() in hexadecimal, which the safe
    loader reads back as the same integer."""


def _represent_int(dumper: yaml.SafeDumper, value: int) -> yaml.ScalarNode:
    text = hex(value) if value.bit_length() > 10000 else str(value)
    return dumper.represent_scalar('tag:yaml.org,2002:int', text)


_Dumper.add_representer(int, _represent_int)


def dump_yaml(value: object) -> bytes:
    text: str = yaml.dump(value, Dumper=_Dumper)
    return text.encode('utf-8')


def _as_files(document: object) -> list[AsFile]:
    """A document written as YAML and, where it can be, as JSON."""
    files = []
    for ext, dump in (('.yaml', dump_yaml), ('.json', _dump_json)):
        try:
            files.append(AsFile(dump(document), ext))
        except (ValueError, TypeError, yaml.YAMLError, RecursionError):
            pass
    return files


def _dump_json(value: object) -> bytes:
    return json.dumps(value).encode('utf-8')


HOSTILE_ENTRIES = st.dictionaries(
    st.sampled_from(test_properties.ENTRY_KEYS),
    st.one_of(test_properties.FIELD_VALUES, HOSTILE_VALUES),
    max_size=6,
).map(lambda entry: dict({'name': 'n'}, **entry))
HOSTILE_SCENARIOS = st.fixed_dictionaries(
    {},
    optional={
        'conductors': st.lists(HOSTILE_ENTRIES, max_size=3),
        'nodes': st.lists(HOSTILE_ENTRIES, max_size=3),
    },
)
ANY_EXTENSION = st.sampled_from(test_corpus.EXTENSIONS['scenarios'])
SCENARIOS = st.one_of(
    st.builds(AsFile, st.binary(max_size=400), ANY_EXTENSION),
    st.builds(
        AsFile, test_properties.YAML_SYNTAX.map(str.encode), ANY_EXTENSION
    ),
    st.one_of(
        test_properties.JSON_LIKE,
        test_properties.SCENARIO_LIKE,
        HOSTILE_SCENARIOS,
    )
    .map(_as_files)
    .filter(bool)
    .flatmap(st.sampled_from),
)


@st.composite
def near_valid_capabilities(draw: st.DrawFn) -> dict[str, Any]:
    """What a conductor publishes, with one or two fields gone wrong."""
    conductor = profile.ConductorProfile(
        name='c',
        hard_affinity_tags=draw(
            st.frozensets(test_properties.VALID_TAGS, max_size=3)
        ),
        soft_affinity_tags=draw(test_properties.VALID_WEIGHTED),
        hardware_types=draw(
            st.none() | st.frozensets(st.text(max_size=10), max_size=3)
        ),
    )
    published = capabilities.encode(conductor)
    for _ in range(draw(st.integers(1, 2))):
        key = draw(st.sampled_from(sorted(published) + ['extra']))
        published[key] = draw(
            st.one_of(
                HOSTILE_VALUES,
                st.dictionaries(
                    st.one_of(test_properties.ITEM_LIKE, LONG_TEXT),
                    st.one_of(st.integers(-5, tags.MAX_WEIGHT + 5), HOSTILE),
                    max_size=4,
                ),
                st.lists(test_properties.ITEM_LIKE, max_size=130),
            )
        )
    return published


def _as_json_text(value: object) -> st.SearchStrategy[str | bytes]:
    """A document as JSON text, as a string or as bytes."""
    try:
        text = json.dumps(value)
    except (ValueError, TypeError, RecursionError):
        return st.nothing()
    return st.sampled_from((text, text.encode('utf-8')))


CAPABILITIES = st.one_of(
    test_capabilities_fuzz._JSONISH,
    test_capabilities_fuzz._NEAR_VALID,
    near_valid_capabilities(),
    st.binary(max_size=200),
    st.one_of(
        test_capabilities_fuzz._NEAR_VALID, near_valid_capabilities()
    ).flatmap(_as_json_text),
)
STRATEGIES = {
    'tags': TAGS,
    'scenarios': SCENARIOS,
    'capabilities': CAPABILITIES,
}


# ---------------------------------------------------------------- fuzzer


def to_file(target: str, example: object) -> AsFile:
    """How an input is kept in the corpus.

    :raises: ValueError, TypeError, yaml.YAMLError or RecursionError when
        it cannot be written.
    """
    if isinstance(example, AsFile):
        return example
    if target == 'tags' and isinstance(example, str):
        try:
            return AsFile(example.encode('utf-8', 'surrogateescape'), '.txt')
        except UnicodeEncodeError:
            pass
    if target == 'capabilities' and isinstance(example, bytes):
        return AsFile(example, '.json')
    return AsFile(dump_yaml(example), '.yaml')


@dataclasses.dataclass
class Break:
    """The smallest input found that broke the contract one way."""

    kind: str
    where: str
    detail: str
    example: object
    size: int
    count: int = 1


class Fuzzer:
    """Runs one target's check on examples and keeps what breaks it."""

    def __init__(self, target: str, scratch: str, slow: float) -> None:
        self.target = target
        self.scratch = scratch
        self.slow = slow
        self.runs = 0
        self.skipped = 0
        self.breaks: dict[tuple[str, str], Break] = {}
        # Breaks the corpus already holds an input for, and its name.
        self.known: dict[tuple[str, str], str] = {}
        for name in test_corpus.corpus_files(target, CORPUS):
            path = os.path.join(CORPUS, target, name)
            found = self.check_value(test_corpus.read_input(target, path))
            if found is not None:
                self.known.setdefault(found[:2], name)

    def _value(self, example: object) -> object:
        if not isinstance(example, AsFile):
            return example
        if self.target == 'scenarios':
            path = os.path.join(self.scratch, 'input' + example.ext)
            with open(path, 'wb') as handle:
                handle.write(example.data)
            return path
        return test_corpus.decode_input(self.target, example.data, example.ext)

    def check(self, example: object) -> tuple[str, str, str] | None:
        """(kind, where, detail) of a broken contract, or None.

        :raises: ValueError and the like when a mutated file no longer
            reads as its kind of input: no input at all, then.
        """
        return self.check_value(self._value(example))

    def check_value(self, value: object) -> tuple[str, str, str] | None:
        """The same, for what the entry point is given."""
        start = time.monotonic()
        try:
            test_corpus.CHECKS[self.target](value)
        except test_corpus.ContractBroken as broken:
            cause = broken.__cause__
            where = test_corpus.origin(cause) if cause else ''
            return broken.kind, where, str(broken)
        elapsed = time.monotonic() - start
        if elapsed > self.slow:
            return 'slow', '', 'took %.1f s' % elapsed
        return None

    def __call__(self, example: object) -> None:
        self.runs += 1
        try:
            value = self._value(example)
        except Exception:  # noqa: BLE001 - a mutation that reads as nothing
            self.skipped += 1
            return
        found = self.check_value(value)
        if found is None:
            return
        kind, where, detail = found
        try:
            size = len(to_file(self.target, example).data)
        except (ValueError, TypeError, yaml.YAMLError, RecursionError):
            size = sys.maxsize
        known = self.breaks.get((kind, where))
        if known is None:
            self.breaks[(kind, where)] = Break(
                kind, where, detail, example, size
            )
            print(
                '  %s: new break: %s at %s'
                % (self.target, kind, where or '?'),
                flush=True,
            )
            return
        known.count += 1
        if size < known.size:
            known.example, known.size, known.detail = example, size, detail

    def shrink(self, found: Break) -> object:
        """Cut a file's content down while it still breaks the same way."""
        example = found.example
        if not isinstance(example, AsFile) or found.kind == 'slow':
            return example
        data = example.data
        chunk = max(1, len(data) // 2)
        attempts = 0
        while attempts < SHRINK_ATTEMPTS:
            start = 0
            cut = False
            while start < len(data) and attempts < SHRINK_ATTEMPTS:
                attempts += 1
                candidate = data[:start] + data[start + chunk :]
                try:
                    again = self.check(AsFile(candidate, example.ext))
                except Exception:  # noqa: BLE001 - no longer an input
                    again = None
                if again is not None and again[:2] == (
                    found.kind,
                    found.where,
                ):
                    data = candidate
                    cut = True
                else:
                    start += chunk
            if chunk == 1 and not cut:
                break
            chunk = max(1, chunk // 2)
        return AsFile(data, example.ext)


def run(fuzzer: Fuzzer, strategy: st.SearchStrategy[Any], args: Any) -> None:
    deadline = time.monotonic() + args.seconds if args.seconds else None
    round_number = 0
    while fuzzer.runs < args.max_examples:
        if deadline is not None and time.monotonic() >= deadline:
            break
        before = fuzzer.runs

        @hypothesis.settings(
            max_examples=min(ROUND, args.max_examples - fuzzer.runs),
            database=None,
            deadline=None,
            phases=(hypothesis.Phase.generate,),
            suppress_health_check=list(hypothesis.HealthCheck),
            verbosity=hypothesis.Verbosity.quiet,
        )
        @hypothesis.given(strategy)
        def fuzz(example: object) -> None:
            fuzzer(example)

        if args.seed is not None:
            fuzz = hypothesis.seed(args.seed * 100003 + round_number)(fuzz)
        fuzz()
        round_number += 1
        if fuzzer.runs == before:
            break


def _cut(text: str) -> str:
    return text[:300] + ('...' if len(text) > 300 else '')


def write(fuzzer: Fuzzer, found: Break, dry_run: bool) -> str:
    """Write a break into the corpus; say what became of it."""
    known = fuzzer.known.get((found.kind, found.where))
    if known is not None:
        return 'not written: %s in the corpus already breaks that way' % known
    example = fuzzer.shrink(found)
    try:
        kept = to_file(fuzzer.target, example)
    except (ValueError, TypeError, yaml.YAMLError, RecursionError) as exc:
        return 'not written: cannot be kept as a file (%s): %s' % (
            type(exc).__name__,
            _cut(repr(example)),
        )
    digest = hashlib.sha256(kept.data).hexdigest()
    folder = os.path.join(CORPUS, fuzzer.target)
    for name in test_corpus.corpus_files(fuzzer.target, CORPUS):
        with open(os.path.join(folder, name), 'rb') as handle:
            if hashlib.sha256(handle.read()).hexdigest() == digest:
                return 'already in the corpus as %s' % name
    kind = re.sub(r'[^a-z0-9]+', '-', found.kind.lower()).strip('-')
    name = 'found-%s-%s%s' % (kind, digest[:12], kept.ext)
    if dry_run:
        return 'would be written as %s (%d bytes)' % (name, len(kept.data))
    path = os.path.join(folder, name)
    with open(path, 'wb') as handle:
        handle.write(kept.data)
    # Read back as the replay test will: it must break the same way.
    try:
        again = fuzzer.check_value(test_corpus.read_input(fuzzer.target, path))
    except Exception as exc:  # noqa: BLE001 - reported, not raised
        again = ('unreadable', '', type(exc).__name__)
    if again is None or again[:2] != (found.kind, found.where):
        os.unlink(path)
        why = 'read back, it does not break the same way (%s)' % (again,)
        return 'not written: %s; the input: %s' % (why, _cut(repr(example)))
    note = ''
    if len(kept.data) > test_corpus.MAX_FILE_BYTES:
        note = '; too large for the corpus: cut it down, or make it GENERATED'

    return 'written as %s (%d bytes)%s' % (name, len(kept.data), note)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=DESCRIPTION)
    parser.add_argument(
        '--targets',
        default=','.join(test_corpus.TARGETS),
        help='comma-separated, from: %s' % ', '.join(test_corpus.TARGETS),
    )
    parser.add_argument(
        '--max-examples',
        type=int,
        default=20000,
        help='examples per target (the unit tests run 200 to 400)',
    )
    parser.add_argument(
        '--seconds', type=float, default=0, help='time per target; 0: no limit'
    )
    parser.add_argument(
        '--slow',
        type=float,
        default=10.0,
        help='seconds after which an input counts as a break',
    )
    parser.add_argument(
        '--seed', type=int, help='make the run repeatable (default: random)'
    )
    parser.add_argument(
        '--dry-run',
        action='store_true',
        help='report what would be written, write nothing',
    )
    args = parser.parse_args(argv)
    targets = [t for t in args.targets.split(',') if t]
    for target in targets:
        if target not in STRATEGIES:
            parser.error('no target %r' % target)

    results = []
    with tempfile.TemporaryDirectory(prefix='fuzz-') as scratch:
        for target in targets:
            print('%s: fuzzing...' % target, flush=True)
            fuzzer = Fuzzer(target, scratch, args.slow)
            strategy = st.one_of(
                STRATEGIES[target],
                mutations(seeds(target), test_corpus.EXTENSIONS[target]),
            )
            start = time.monotonic()
            interrupted = False
            try:
                run(fuzzer, strategy, args)
            except KeyboardInterrupt:
                print('%s: interrupted; keeping what was found' % target)
                interrupted = True
            elapsed = time.monotonic() - start
            outcomes = [
                (found, write(fuzzer, found, args.dry_run))
                for found in fuzzer.breaks.values()
            ]
            results.append((fuzzer, elapsed, outcomes))
            if interrupted:
                break

    print()
    print(
        '%-13s %9s %8s %8s %7s %7s'
        % ('target', 'examples', 'skipped', 'seconds', 'per s', 'breaks')
    )
    for fuzzer, elapsed, outcomes in results:
        print(
            '%-13s %9d %8d %8.1f %7.0f %7d'
            % (
                fuzzer.target,
                fuzzer.runs,
                fuzzer.skipped,
                elapsed,
                fuzzer.runs / elapsed if elapsed else 0,
                len(outcomes),
            )
        )
    for fuzzer, _elapsed, outcomes in results:
        for found, outcome in outcomes:
            print()
            print(
                '%s: %s at %s, %d time(s)'
                % (fuzzer.target, found.kind, found.where or '?', found.count)
            )
            print('  %s' % found.detail[:300])
            print('  %s' % outcome)
    print(
        '\n"skipped": mutated files that no longer read as their kind of '
        'input (e.g. a .yaml tag list that is not YAML).'
    )
    # Breaks the corpus already holds fail their replay test already.
    new = [
        found
        for fuzzer, _elapsed, outcomes in results
        for found, _outcome in outcomes
        if (found.kind, found.where) not in fuzzer.known
    ]
    return 1 if new else 0


if __name__ == '__main__':
    sys.exit(main())
