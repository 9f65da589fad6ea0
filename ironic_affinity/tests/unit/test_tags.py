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

from ironic_affinity import exception
from ironic_affinity import tags
from ironic_affinity.tests import base


class ParseTagsTestCase(base.TestCase):
    def test_commas_and_spaces_both_separate(self):
        # The RFE writes both forms.
        self.assertEqual(
            tags.parse_tags('rack10, network1', 'opt'),
            tags.parse_tags('rack10 network1', 'opt'),
        )
        self.assertEqual(
            frozenset({'rack10', 'network1', 'network2'}),
            tags.parse_tags(' rack10,,network1 ,\tnetwork2 ', 'opt'),
        )

    def test_case_insensitive(self):
        self.assertEqual(
            frozenset({'rack10', 'dc-1.a_b'}),
            tags.parse_tags('RACK10 Dc-1.A_b', 'opt'),
        )

    def test_list_of_strings(self):
        self.assertEqual(
            frozenset({'a', 'b', 'c'}), tags.parse_tags(['a', 'b c'], 'opt')
        )

    def test_empty(self):
        for value in (None, '', ' , ', []):
            self.assertEqual(frozenset(), tags.parse_tags(value, 'opt'))

    def test_weight_refused_where_not_allowed(self):
        exc = self.assertRaises(
            exception.InvalidTag, tags.parse_tags, 'rack1:5', 'hard_x'
        )
        self.assertIn('hard_x', str(exc))
        self.assertIn("'rack1:5'", str(exc))

    def test_bad_tags_named(self):
        for bad in ('ra$ck', '-rack', '.rack', 'r' * 65, 'é'):
            exc = self.assertRaises(
                exception.InvalidTag, tags.parse_tags, 'ok ' + bad, 'myopt'
            )
            self.assertTrue(str(exc).startswith('myopt: '), exc)
            self.assertIn(tags.quote(bad), str(exc))

    def test_messages_quote_hostile_input_briefly(self):
        exc = self.assertRaises(
            exception.InvalidTag, tags.parse_tags, 'x' * 100000, 'opt'
        )
        self.assertLess(len(str(exc)), 200)
        self.assertIn("'xxxx", str(exc))
        exc = self.assertRaises(
            exception.InvalidTag, tags.parse_tags, [10**5000], 'opt'
        )
        self.assertIn('int', str(exc))

    def test_longest_tag_accepted(self):
        self.assertEqual(
            frozenset({'r' * 64}), tags.parse_tags('r' * 64, 'opt')
        )

    def test_too_many_tags(self):
        value = ' '.join('t%d' % i for i in range(tags.MAX_TAGS + 1))
        exc = self.assertRaises(
            exception.InvalidTag, tags.parse_tags, value, 'opt'
        )
        self.assertIn('at most %d' % tags.MAX_TAGS, str(exc))
        self.assertEqual(
            tags.MAX_TAGS, len(tags.parse_tags(value.rsplit(' ', 1)[0], 'o'))
        )

    def test_non_string_items(self):
        for value in ([1], [None], 5, {'a': 1}, b'rack'):
            self.assertRaises(
                exception.InvalidTag, tags.parse_tags, value, 'opt'
            )


class ParseWeightedTagsTestCase(base.TestCase):
    def test_default_weight_is_one(self):
        self.assertEqual(
            {'rack10': 1, 'network1': 5},
            tags.parse_weighted_tags('rack10, network1:5', 'opt'),
        )

    def test_weight_bounds(self):
        self.assertEqual(
            {'a': 1000}, tags.parse_weighted_tags('a:1000', 'opt')
        )
        for bad in ('a:0', 'a:1001', 'a:-1', 'a:', 'a:x', 'a:1.5', 'a:1:2'):
            exc = self.assertRaises(
                exception.InvalidTag, tags.parse_weighted_tags, bad, 'opt'
            )
            self.assertIn(repr(bad), str(exc))

    def test_duplicate_same_weight_is_one_tag(self):
        self.assertEqual(
            {'rack1': 2}, tags.parse_weighted_tags('rack1:2 RACK1:2', 'opt')
        )

    def test_duplicate_different_weights_refused(self):
        exc = self.assertRaises(
            exception.InvalidTag,
            tags.parse_weighted_tags,
            'rack1 Rack1:3',
            'opt',
        )
        self.assertIn("'rack1'", str(exc))

    def test_format_round_trip(self):
        weights = {'b': 1, 'a': 7}
        self.assertEqual('a:7, b', tags.format_weighted(weights))
        self.assertEqual(
            weights,
            tags.parse_weighted_tags(tags.format_weighted(weights), 'opt'),
        )
