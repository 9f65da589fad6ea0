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

"""Property-based tests: the invariants placement, tags and scenarios keep.

Placements are checked against an oracle written here from the RFE's rule
(the pseudo-code of its second edit, plus Ironic's own conductor group and
hardware type constraints), working on what the test generated rather than
on anything the engine or the parser computed. The stability properties
(removing, adding or changing a conductor) compare two runs of the engine,
since they are statements about how runs relate.

Generated conductors draw their tags from a small vocabulary so that hard
and soft lists, and conductors, actually overlap; half of them copy
another's tags under a new name, so that ties are common and the
tie-break is exercised.
"""

import dataclasses
import json
import os
import random
import re
import subprocess
import sys
from unittest import mock

import fixtures
from hypothesis import HealthCheck
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st
import yaml

from ironic_affinity import engine
from ironic_affinity import exception
from ironic_affinity import profile
from ironic_affinity import scenario
from ironic_affinity import tags
from ironic_affinity.tests import base
from ironic_affinity.tests import unit

RACKS = tuple('rack%d' % i for i in range(1, 6))
NETWORKS = ('net1', 'net2', 'net3')
DATACENTERS = ('dc1', 'dc2')
VOCABULARY = RACKS + NETWORKS + DATACENTERS
# Tags only nodes carry: they are in no conductor's lists.
NODE_ONLY_TAGS = ('customer1', 'customer2')
# Mostly the default group, so that most conductors compete.
GROUPS = ('', '', '', 'g1')
DRIVERS = ('ipmi', 'redfish')
HARDWARE_TYPES = (None, None, None, frozenset(), frozenset({'ipmi'}))
SEPARATORS = (', ', ',', ' ', '\n', ' ,\t')

# What a tag is once parsed: the grammar of ironic_affinity.tags, lowered.
TAG_GRAMMAR = re.compile(r'[a-z0-9][a-z0-9._-]{0,63}')

ENGINE_SETTINGS = settings(
    max_examples=unit.examples(250),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
COSTLY_SETTINGS = settings(ENGINE_SETTINGS, max_examples=unit.examples(150))
PARSER_SETTINGS = settings(ENGINE_SETTINGS, max_examples=unit.examples(400))


@dataclasses.dataclass(frozen=True, eq=False)
class ConductorSpec:
    """A generated conductor: its meaning for the oracle, and its raw
    option values for ConductorProfile.build."""

    name: str
    hard: frozenset[str]
    hard_anti: frozenset[str]
    soft: dict[str, int]
    soft_anti: dict[str, int]
    group: str
    hardware_types: frozenset[str] | None
    raw: dict[str, object]
    draining: bool = False

    def build(self) -> profile.ConductorProfile:
        return profile.ConductorProfile.build(
            self.name,
            hardware_types=self.hardware_types,
            draining=self.draining,
            **self.raw,
        )


@dataclasses.dataclass(frozen=True, eq=False)
class NodeSpec:
    """A generated node, the same way."""

    name: str
    tags: frozenset[str]
    uuid: str | None
    driver: str | None
    group: str
    raw_tags: object
    raw_group: str | None

    def build(self) -> profile.NodeRequest:
        return profile.NodeRequest.build(
            self.name,
            affinity_tags=self.raw_tags,
            uuid=self.uuid,
            driver=self.driver,
            conductor_group=self.raw_group,
        )


def render_tags(rnd, items):
    """Items written as an operator might: any order, any case, as one
    string with any separators or as a list; nothing as None, '' or [].

    Rendering only varies the spelling, never the meaning, so it takes
    its choices from one seeded random rather than from many draws.
    """
    items = [rnd.choice((i, i.upper())) for i in items]
    rnd.shuffle(items)
    if not items:
        return rnd.choice((None, '', []))
    if rnd.random() < 0.3:
        return items
    return rnd.choice(SEPARATORS).join(items)


def render_weighted(rnd, weights):
    """A soft list: a weight of 1 is written or left implicit."""
    return render_tags(
        rnd,
        [
            tag
            if weight == tags.DEFAULT_WEIGHT and rnd.random() < 0.5
            else '%s:%d' % (tag, weight)
            for tag, weight in weights.items()
        ],
    )


def render_group(rnd, group):
    if not group:
        return rnd.choice((None, ''))
    return rnd.choice((group, group.upper()))


# The choices of spelling come from a plain seeded random: spelling needs no
# shrinking, and a draw per choice would make generation several times
# slower.
RENDERINGS = st.integers(0, 2**32 - 1).map(random.Random)
HARD_LISTS = st.frozensets(st.sampled_from(VOCABULARY), max_size=2)
SOFT_LISTS = st.dictionaries(
    st.sampled_from(VOCABULARY), st.integers(1, 5), max_size=4
)


@st.composite
def conductor_specs(draw, name, rnd=None):
    """One conductor. Its hard lists never share a tag: the profile
    refuses that with ConflictingTags, which test_engine covers."""
    rnd = rnd or draw(RENDERINGS)
    hard = draw(HARD_LISTS)
    hard_anti = draw(HARD_LISTS) - hard
    soft = draw(SOFT_LISTS)
    # May share tags with soft: then anti-affinity must win.
    soft_anti = draw(SOFT_LISTS)
    group = draw(st.sampled_from(GROUPS))
    raw = {
        profile.HARD_AFFINITY: render_tags(rnd, sorted(hard)),
        profile.HARD_ANTI_AFFINITY: render_tags(rnd, sorted(hard_anti)),
        profile.SOFT_AFFINITY: render_weighted(rnd, soft),
        profile.SOFT_ANTI_AFFINITY: render_weighted(rnd, soft_anti),
        'conductor_group': render_group(rnd, group),
    }
    return ConductorSpec(
        name=name,
        hard=hard,
        hard_anti=hard_anti,
        soft=soft,
        soft_anti=soft_anti,
        group=group,
        hardware_types=draw(st.sampled_from(HARDWARE_TYPES)),
        raw=raw,
        draining=draw(st.sampled_from((False, False, False, True))),
    )


CONDUCTOR_NAMES = st.text(
    alphabet='abcdefghijklmnopqrstuvwxyz0123456789-.', min_size=1, max_size=12
)


@st.composite
def conductor_lists(draw, min_size=0, max_size=8):
    """Conductors with unique names; about half copy an earlier one's
    tags and constraints, so that they tie with it."""
    rnd = draw(RENDERINGS)
    names = draw(
        st.lists(
            CONDUCTOR_NAMES, min_size=min_size, max_size=max_size, unique=True
        )
    )
    specs = []
    for name in names:
        if specs and draw(st.booleans()):
            template = draw(st.sampled_from(specs))
            specs.append(dataclasses.replace(template, name=name))
        else:
            specs.append(draw(conductor_specs(name, rnd)))
    return specs


NODE_TAGS = st.frozensets(
    st.sampled_from(VOCABULARY + NODE_ONLY_TAGS), max_size=6
)
NODE_DRIVERS = st.sampled_from((None, None) + DRIVERS)


@st.composite
def node_lists(draw, min_size=0, max_size=20):
    """Nodes with unique names and uuids; some have no uuid and are
    hashed by name, some share another's constraints."""
    rnd = draw(RENDERINGS)
    count = draw(st.integers(min_size, max_size))
    uuids = draw(
        st.lists(st.uuids(), min_size=count, max_size=count, unique=True)
    )
    nodes = []
    for index, uuid in enumerate(uuids):
        if nodes and draw(st.integers(0, 3)) == 0:
            template = draw(st.sampled_from(nodes))
            node_tags = template.tags
            driver = template.driver
            group = template.group
        else:
            node_tags = draw(NODE_TAGS)
            driver = draw(NODE_DRIVERS)
            group = draw(st.sampled_from(GROUPS))
        nodes.append(
            NodeSpec(
                name='node-%d' % index,
                tags=node_tags,
                uuid=None if rnd.random() < 0.15 else str(uuid),
                driver=driver,
                group=group,
                raw_tags=render_tags(rnd, sorted(node_tags)),
                raw_group=render_group(rnd, group),
            )
        )
    return nodes


def oracle_scores(conductors, node):
    """The RFE's rule, written from its pseudo-code: the score of every
    conductor that may take the node, by name."""
    scores = {}
    for conductor in conductors:
        # Ironic's own constraints come first.
        if conductor.group != node.group:
            continue
        if (
            node.driver is not None
            and conductor.hardware_types is not None
            and node.driver not in conductor.hardware_types
        ):
            continue
        # "if any node.affinity_tags in conductor.hard_anti_affinity_tags"
        if any(tag in conductor.hard_anti for tag in node.tags):
            continue
        # "else if any conductor.hard_affinity_tags not in node.tags"
        if any(tag not in node.tags for tag in conductor.hard):
            continue
        score = 0
        for tag in node.tags:
            if tag in conductor.soft_anti:
                score -= conductor.soft_anti[tag]
            elif tag in conductor.soft:
                score += conductor.soft[tag]
        scores[conductor.name] = score
    return scores


def oracle_top(conductors, node):
    """The top score and the conductors sharing it; (None, set()) when
    no conductor may take the node."""
    scores = oracle_scores(conductors, node)
    if not scores:
        return None, set()
    # [affinity]drain: a draining conductor only when no other may.
    draining = {c.name for c in conductors if c.draining}
    if set(scores) - draining:
        scores = {n: v for n, v in scores.items() if n not in draining}
    top = max(scores.values())
    return top, {name for name, score in scores.items() if score == top}


def build_engine(conductors):
    return engine.PlacementEngine(c.build() for c in conductors)


def placements(conductors, nodes):
    """Node name to conductor name (or None), from a fresh engine."""
    placed = build_engine(conductors).place_all([n.build() for n in nodes])
    return {p.node: p.conductor for p in placed}


class PlacementPropertiesTestCase(base.TestCase):
    """What the engine guarantees for any conductors and nodes."""

    @ENGINE_SETTINGS
    @given(conductor_lists(), node_lists())
    def test_hard_constraints_never_violated(self, conductors, nodes):
        """A node never lands on a conductor whose hard lists forbid it,
        and is left unplaced only when no conductor may take it."""
        by_name = {c.name: c for c in conductors}
        for node, placed in zip(
            nodes,
            build_engine(conductors).place_all([n.build() for n in nodes]),
            strict=True,
        ):
            self.assertEqual(node.name, placed.node)
            if placed.conductor is None:
                self.assertEqual({}, oracle_scores(conductors, node))
                continue
            chosen = by_name[placed.conductor]
            self.assertFalse(node.tags & chosen.hard_anti, placed)
            self.assertLessEqual(chosen.hard, node.tags, placed)
            self.assertEqual(chosen.group, node.group, placed)
            if node.driver is not None and chosen.hardware_types is not None:
                self.assertIn(node.driver, chosen.hardware_types)

    @ENGINE_SETTINGS
    @given(conductor_lists(), node_lists())
    def test_node_goes_to_a_top_scorer(self, conductors, nodes):
        """The chosen conductor has the top score by the RFE's rule, the
        tied conductors are exactly the conductors sharing it, and the
        placement reports that score."""
        for node, placed in zip(
            nodes,
            build_engine(conductors).place_all([n.build() for n in nodes]),
            strict=True,
        ):
            top, tied = oracle_top(conductors, node)
            self.assertEqual(top, placed.score, placed)
            self.assertEqual(tied, set(placed.tied), placed)
            self.assertEqual(len(placed.tied), len(set(placed.tied)))
            if tied:
                self.assertIn(placed.conductor, tied)
            else:
                self.assertIsNone(placed.conductor)

    @ENGINE_SETTINGS
    @given(conductor_lists(min_size=1), node_lists(), st.data())
    def test_removing_a_conductor_moves_only_its_nodes(
        self, conductors, nodes, data
    ):
        """When a conductor goes, only the nodes it had move."""
        gone = data.draw(st.sampled_from(conductors)).name
        before = placements(conductors, nodes)
        after = placements([c for c in conductors if c.name != gone], nodes)
        for name, conductor in before.items():
            if after[name] != conductor:
                self.assertEqual(gone, conductor, name)
            self.assertNotEqual(gone, after[name])

    @ENGINE_SETTINGS
    @given(conductor_lists(), node_lists(), st.data())
    def test_adding_a_conductor_moves_nodes_only_onto_it(
        self, conductors, nodes, data
    ):
        """When a conductor joins, nodes move only onto it."""
        taken = {c.name for c in conductors}
        name = data.draw(CONDUCTOR_NAMES.filter(lambda n: n not in taken))
        if conductors and data.draw(st.booleans()):
            # A twin of a present conductor ties with it everywhere.
            template = data.draw(st.sampled_from(conductors))
            new = dataclasses.replace(template, name=name)
        else:
            new = data.draw(conductor_specs(name))
        before = placements(conductors, nodes)
        after = placements(conductors + [new], nodes)
        for node, conductor in after.items():
            if before[node] != conductor:
                self.assertEqual(name, conductor, node)

    @ENGINE_SETTINGS
    @given(conductor_lists(min_size=1), node_lists(), st.data())
    def test_changing_a_conductor_moves_nodes_only_off_or_onto_it(
        self, conductors, nodes, data
    ):
        """When one conductor's tags change, nodes move only off it or
        onto it: no node moves between two other conductors."""
        index = data.draw(st.integers(0, len(conductors) - 1))
        name = conductors[index].name
        changed = list(conductors)
        changed[index] = data.draw(conductor_specs(name))
        before = placements(conductors, nodes)
        after = placements(changed, nodes)
        for node, conductor in after.items():
            if before[node] != conductor:
                self.assertIn(name, (before[node], conductor), node)

    @ENGINE_SETTINGS
    @given(conductor_lists(), node_lists(), st.data())
    def test_order_does_not_matter(self, conductors, nodes, data):
        """Listing the conductors or the nodes in another order changes
        no placement and no fallback order."""
        shuffled_conductors = data.draw(st.permutations(conductors))
        shuffled_nodes = data.draw(st.permutations(nodes))
        first = build_engine(conductors)
        second = build_engine(shuffled_conductors)
        expected = {
            p.node: p for p in first.place_all([n.build() for n in nodes])
        }
        got = {
            p.node: p
            for p in second.place_all([n.build() for n in shuffled_nodes])
        }
        self.assertEqual(expected, got)
        for node in nodes:
            self.assertEqual(
                first.fallback_order(node.build()),
                second.fallback_order(node.build()),
            )

    @ENGINE_SETTINGS
    @given(conductor_lists(), node_lists())
    def test_place_one_by_one_equals_place_all(self, conductors, nodes):
        """Placing nodes one at a time, again from memory, with caches
        too small to hold anything, or again once their tags changed,
        gives what placing them all at once gives."""
        built = [n.build() for n in nodes]
        expected = build_engine(conductors).place_all(built)
        one_by_one = build_engine(conductors)
        self.assertEqual(expected, [one_by_one.place(n) for n in built])
        self.assertEqual(
            expected[::-1], [one_by_one.place(n) for n in reversed(built)]
        )
        with (
            mock.patch.object(engine, 'MAX_CACHED_EVALUATIONS', 1),
            mock.patch.object(engine, 'MAX_CACHED_PLACEMENTS', 1),
        ):
            tiny = build_engine(conductors)
            self.assertEqual(expected, [tiny.place(n) for n in built])
            self.assertEqual(expected, tiny.place_all(built))
        # The same nodes with their tags changed (each takes another's
        # constraints): memory of the old tags must not answer.
        retagged = [
            profile.NodeRequest(
                name=node.name,
                tags=other.tags,
                uuid=node.uuid,
                driver=other.driver,
                conductor_group=other.conductor_group,
            )
            for node, other in zip(built, reversed(built), strict=True)
        ]
        self.assertEqual(
            build_engine(conductors).place_all(retagged),
            [one_by_one.place(n) for n in retagged],
        )

    @COSTLY_SETTINGS
    @given(conductor_lists(max_size=7), node_lists(max_size=6))
    def test_fallback_order_is_the_rule_applied_to_survivors(
        self, conductors, nodes
    ):
        """The fallback order starts with the chosen conductor, holds
        every conductor that may take the node and no other, and its
        k-th entry is where the node goes once the k before it are dead,
        as the RFE says: the rule is applied again to the survivors."""
        profiles = {c.name: c.build() for c in conductors}
        whole = engine.PlacementEngine(profiles.values())
        for node in nodes:
            request = node.build()
            order = whole.fallback_order(request)
            scores = oracle_scores(conductors, node)
            self.assertEqual(sorted(scores), sorted(order))
            self.assertEqual(len(order), len(set(order)))
            self.assertEqual(
                order[0] if order else None, whole.place(request).conductor
            )
            draining = {c.name for c in conductors if c.draining}
            ranks = [(name in draining, -scores[name]) for name in order]
            self.assertEqual(sorted(ranks), ranks)
            for k in range(len(order) + 1):
                survivors = engine.PlacementEngine(
                    p for name, p in profiles.items() if name not in order[:k]
                )
                self.assertEqual(
                    order[k] if k < len(order) else None,
                    survivors.place(request).conductor,
                    'after %s died' % (order[:k],),
                )


# Conductors are built in the order of a set of names, which differs from
# one PYTHONHASHSEED to another; the output must not.
DETERMINISM_SCRIPT = '''
import json
import uuid

from ironic_affinity import engine
from ironic_affinity import profile

names = {'conductor-%d' % i for i in range(12)}
conductors = [
    profile.ConductorProfile.build(
        name,
        soft_affinity_tags={'rack%d' % (int(name[10:]) % 3), 'net1'},
        soft_anti_affinity_tags='rack9' if int(name[10:]) % 4 else None,
    )
    for name in names
]
nodes = []
for i in range(300):
    node_tags = {'rack%d' % (i % 4), 'net1', 'rack9'}
    if i % 5:
        node_tags.discard('rack9')
    nodes.append(
        profile.NodeRequest.build(
            'node-%d' % i,
            affinity_tags=node_tags,
            uuid=str(uuid.uuid5(uuid.NAMESPACE_DNS, 'node-%d' % i))
            if i % 7
            else None,
        )
    )
placer = engine.PlacementEngine(conductors)
print(
    json.dumps(
        {
            p.node: [p.conductor, p.score, list(p.tied)]
            for p in placer.place_all(nodes)
        },
        sort_keys=True,
    )
)
print(
    json.dumps(
        {n.name: list(placer.fallback_order(n)) for n in nodes},
        sort_keys=True,
    )
)
'''


def run_with_hash_seed(testcase, script, seed):
    """The standard output of ``script`` run by a new interpreter with
    PYTHONHASHSEED set to ``seed``."""
    env = dict(os.environ, PYTHONHASHSEED=seed)
    result = subprocess.run(
        [sys.executable, '-c', script],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    testcase.assertEqual(0, result.returncode, result.stderr)
    return result.stdout


class DeterminismTestCase(base.TestCase):
    """Placement does not depend on the process that computes it."""

    def _run(self, seed):
        output = run_with_hash_seed(self, DETERMINISM_SCRIPT, seed)
        placed, fallback = output.splitlines()
        return json.loads(placed), json.loads(fallback)

    def test_same_placements_in_every_process(self):
        """Two processes with different PYTHONHASHSEED values place every
        node, and order every fallback, alike."""
        placed, fallback = self._run('0')
        self.assertEqual((placed, fallback), self._run('12345'))
        # The scenario is one where the tie-break decides something.
        self.assertEqual(300, len(placed))
        self.assertGreater(len({c for c, _s, _t in placed.values()}), 3)
        self.assertTrue(any(len(t) > 1 for _c, _s, t in placed.values()))


# Text close to the grammar, so that much of it parses: tags that are
# sometimes too long or badly started, weights in and out of range.
TAG_LIKE = st.one_of(
    st.from_regex(r'[A-Za-z0-9][A-Za-z0-9._-]{0,70}', fullmatch=True),
    st.text(alphabet='aZ09._-:!é\u00a0', max_size=6),
)
WEIGHT_LIKE = st.one_of(
    st.just(''),
    st.integers(-3, 1003).map(lambda w: ':%d' % w),
    st.text(alphabet='0123456789:+ ', max_size=6).map(lambda s: ':' + s),
)
ITEM_LIKE = st.tuples(TAG_LIKE, WEIGHT_LIKE).map(''.join)
LIST_LIKE_TEXT = st.builds(
    lambda items, sep: sep.join(items),
    st.lists(ITEM_LIKE, max_size=8),
    st.sampled_from(SEPARATORS + ('\u2003', ';')),
)
ANY_TEXT = st.one_of(st.text(), LIST_LIKE_TEXT)
TAG_LIST_VALUES = st.one_of(
    ANY_TEXT,
    st.lists(ANY_TEXT, max_size=4),
    st.none(),
    # Not tag lists at all: each must be refused as InvalidTag too.
    st.integers(),
    st.floats(),
    st.binary(max_size=10),
    st.dictionaries(st.text(max_size=5), st.text(max_size=5), max_size=3),
    st.lists(
        st.one_of(st.integers(), st.none(), st.binary(max_size=5), ANY_TEXT),
        max_size=4,
    ),
)
VALID_TAGS = st.from_regex(r'[a-z0-9][a-z0-9._-]{0,63}', fullmatch=True)
VALID_WEIGHTED = st.dictionaries(
    VALID_TAGS, st.integers(1, tags.MAX_WEIGHT), max_size=20
)


class TagParserPropertiesTestCase(base.TestCase):
    """What the tag parser guarantees for any input."""

    def _refused_properly(self, exc):
        self.assertTrue(str(exc).startswith('opt:'), str(exc))

    @PARSER_SETTINGS
    @given(TAG_LIST_VALUES)
    def test_weighted_parse_is_valid_or_invalid_tag(self, value):
        """parse_weighted_tags returns grammar-conforming tags with
        weights from 1 to 1000, or raises InvalidTag naming its source;
        never anything else."""
        try:
            result = tags.parse_weighted_tags(value, 'opt')
        except exception.InvalidTag as exc:
            self._refused_properly(exc)
            return
        self.assertIsInstance(result, dict)
        self.assertLessEqual(len(result), tags.MAX_TAGS)
        for tag, weight in result.items():
            self.assertIsNotNone(TAG_GRAMMAR.fullmatch(tag), tag)
            self.assertIs(int, type(weight))
            self.assertTrue(1 <= weight <= tags.MAX_WEIGHT, weight)

    @PARSER_SETTINGS
    @given(TAG_LIST_VALUES)
    def test_parse_is_valid_or_invalid_tag(self, value):
        """parse_tags returns grammar-conforming tags, exactly the items
        given, lower-cased, or raises InvalidTag naming its source."""
        try:
            result = tags.parse_tags(value, 'opt')
        except exception.InvalidTag as exc:
            self._refused_properly(exc)
            return
        self.assertIsInstance(result, frozenset)
        for tag in result:
            self.assertIsNotNone(TAG_GRAMMAR.fullmatch(tag), tag)
        chunks = [value] if isinstance(value, str) else list(value or ())
        items = {
            item.lower()
            for chunk in chunks
            for item in re.split(r'[\s,]+', chunk)
            if item
        }
        self.assertEqual(items, result)

    @PARSER_SETTINGS
    @given(VALID_WEIGHTED)
    def test_format_then_parse_round_trips(self, weights):
        """The canonical text of a soft list parses back to it."""
        text = tags.format_weighted(weights)
        self.assertEqual(weights, tags.parse_weighted_tags(text, 'x'))

    @PARSER_SETTINGS
    @given(RENDERINGS, VALID_WEIGHTED, st.lists(VALID_TAGS, max_size=20))
    def test_case_does_not_matter(self, rnd, weights, plain):
        """A valid list, weighted or not, however it is spelt and if
        upper-cased, parses to the tags it names."""

        def upper(raw):
            if isinstance(raw, list):
                return [item.upper() for item in raw]
            return None if raw is None else raw.upper()

        raw = render_weighted(rnd, weights)
        self.assertEqual(weights, tags.parse_weighted_tags(raw, 'x'))
        self.assertEqual(weights, tags.parse_weighted_tags(upper(raw), 'x'))
        raw = render_tags(rnd, plain)
        self.assertEqual(frozenset(plain), tags.parse_tags(raw, 'x'))
        self.assertEqual(frozenset(plain), tags.parse_tags(upper(raw), 'x'))

    def test_huge_integer_is_refused_as_invalid_tag(self):
        """An integer too long to print is refused like any non-string,
        as YAML can produce one from a hexadecimal literal."""
        for parse in (tags.parse_tags, tags.parse_weighted_tags):
            exc = self.assertRaises(
                exception.InvalidTag, parse, [16**4000], 'opt'
            )
            self._refused_properly(exc)


JSON_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(),
    st.text(max_size=12),
)
JSON_LIKE = st.recursive(
    JSON_SCALARS,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(st.text(max_size=8), children, max_size=4),
    ),
    max_leaves=16,
)
FIELD_VALUES = st.one_of(
    st.sampled_from(('c1', 'c2', 'n1', 'g1', 'ipmi', 'rack1')),
    LIST_LIKE_TEXT,
    st.lists(LIST_LIKE_TEXT, max_size=3),
    JSON_LIKE,
)
ENTRY_KEYS = (
    ('name', 'uuid', 'affinity_tags', 'driver', 'conductor_group')
    + ('hardware_types', 'bogus')
    + profile.TAG_OPTIONS
)
ENTRIES = st.one_of(
    st.dictionaries(st.sampled_from(ENTRY_KEYS), FIELD_VALUES, max_size=6),
    JSON_LIKE,
)
# Shaped like a scenario, so that loading gets past the first checks.
SCENARIO_LIKE = st.dictionaries(
    st.sampled_from(('conductors', 'nodes', 'extra')),
    st.one_of(st.lists(ENTRIES, max_size=4), JSON_LIKE),
    max_size=3,
)
YAML_SYNTAX = st.text(alphabet='[]{}:,-?&*!|>\'"#%@` \n\tab01x.', max_size=60)


class ScenarioLoaderPropertiesTestCase(base.TestCase):
    """What scenario.load guarantees for any file."""

    def setUp(self):
        super().setUp()
        self.dir = self.useFixture(fixtures.TempDir()).path

    def _write(self, content, name):
        path = os.path.join(self.dir, name)
        with open(path, 'wb') as handle:
            handle.write(content)
        return path

    def _check_load(self, path):
        """Load, and check the outcome is a scenario or a one-line
        InvalidScenario that starts with the path."""
        try:
            loaded = scenario.load(path)
        except exception.InvalidScenario as exc:
            message = str(exc)
            self.assertTrue(message.startswith(path + ':'), message[:500])
            self.assertNotIn('\n', message)
            return message
        self.assertIsInstance(loaded, scenario.Scenario)
        return None

    @PARSER_SETTINGS
    @given(
        st.one_of(st.binary(), YAML_SYNTAX.map(str.encode)),
        st.sampled_from(('s.yaml', 's.json', 's')),
    )
    def test_any_bytes_load_or_invalid_scenario(self, content, name):
        """Any bytes at all give a scenario or InvalidScenario."""
        self._check_load(self._write(content, name))

    @ENGINE_SETTINGS
    @given(st.one_of(JSON_LIKE, SCENARIO_LIKE), st.booleans())
    def test_any_document_loads_or_invalid_scenario(self, document, as_json):
        """Any JSON-like document, as YAML or as JSON, gives a scenario
        or InvalidScenario."""
        if as_json:
            path = self._write(json.dumps(document).encode(), 's.json')
        else:
            text = yaml.safe_dump(document, allow_unicode=True)
            path = self._write(text.encode(), 's.yaml')
        self._check_load(path)

    def test_message_is_one_line(self):
        """A key holding a line break is quoted, not printed raw, so the
        message stays on one line."""
        for document in (
            {'a\nb': None},
            {'conductors': [{'name': 'c', 'bad\nkey': 1}]},
        ):
            path = self._write(yaml.safe_dump(document).encode(), 's.yaml')
            self.assertIsNotNone(self._check_load(path))

    def test_python_object_tag_is_refused(self):
        """The safe loader constructs no object, so a YAML tag naming a
        Python callable is refused and never run."""
        marker = os.path.join(self.dir, 'ran')
        path = self._write(
            (
                'conductors: !!python/object/apply:os.system ["touch %s"]\n'
                % marker
            ).encode(),
            's.yaml',
        )
        self.assertIn('constructor', self._check_load(path))
        self.assertFalse(os.path.exists(marker))

    def test_deep_nesting_is_refused(self):
        """A document nested beyond what the parser can follow is an
        InvalidScenario, not a RecursionError."""
        for name in ('s.yaml', 's.json'):
            for opener in ('[', '{"a": '):
                path = self._write((opener * 100000).encode(), name)
                self.assertIsNotNone(self._check_load(path))

    def test_huge_integers_are_refused(self):
        """Integers too long to print, which YAML builds from hexadecimal
        or sexagesimal literals, are refused as InvalidScenario wherever
        they appear: as a tag, or as an unknown key."""
        big_hex = '0x' + 'f' * 4000
        for text in (
            'nodes:\n- name: n\n  affinity_tags: [%s]\n' % big_hex,
            'nodes:\n- name: n\n  affinity_tags: [%s]\n'
            % ':'.join(['59'] * 3000),
            '? %s\n: 1\n' % big_hex,
            'conductors:\n- name: c\n  ? %s\n  : 1\n' % big_hex,
        ):
            self.assertIsNotNone(
                self._check_load(self._write(text.encode(), 's.yaml')),
                text[:60],
            )

    def test_alias_expansion_does_not_blow_up_the_message(self):
        """A few hundred bytes of YAML aliases describe a list of 2**N
        items; refusing it must not print them all. At 18 levels the
        message would be megabytes; at 40, it would exhaust memory."""
        anchors = ', '.join(
            ['&a0 [x, x]']
            + ['&a%d [*a%d, *a%d]' % (i, i - 1, i - 1) for i in range(1, 19)]
        )
        text = 'nodes:\n- name: n\n  affinity_tags: [[%s]]\n' % anchors
        message = self._check_load(self._write(text.encode(), 's.yaml'))
        self.assertIsNotNone(message)
        self.assertLess(len(message), 4096, message[:200])
