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

from ironic_affinity.integration.node_tags import change_notices
from ironic_affinity.membership import levels
from ironic_affinity.tests import base


def entry(seq, recent):
    return {'format': 1, 'role': 'api', 'node_changes': {
        'seq': seq, 'recent': recent}}  # fmt: skip


class ChangeNoticesTestCase(base.TestCase):
    def test_keeps_the_last_ones_numbered(self):
        notices = change_notices.ChangeNotices()
        for i in range(change_notices.KEPT + 5):
            notices.record('node-%d' % i)
        found = change_notices.decode(notices.capabilities())
        self.assertEqual(change_notices.KEPT + 5, found[0])
        self.assertEqual(change_notices.KEPT, len(found[1]))
        self.assertEqual('node-%d' % (change_notices.KEPT + 4), found[1][-1])

    def test_says_what_the_process_runs_when_told(self):
        self.assertEqual(
            {'format', 'role', 'node_changes'},
            set(change_notices.ChangeNotices().capabilities()),
        )
        self.config(pin_format=1)
        notices = change_notices.ChangeNotices(self.conf, 'ironic.conf')
        notices.record('node-1')
        published = notices.capabilities()
        self.assertEqual(
            levels.Runs(
                levels.plugin_version(), levels.LEVEL, 1, 'ironic.conf'
            ),
            levels.runs_of(published),
        )
        # The notices read as before beside it.
        self.assertEqual((1, ['node-1']), change_notices.decode(published))

    def test_bad_entries_are_no_notices(self):
        for raw in (
            None,
            {'role': 'api'},
            entry(True, []),
            entry(-1, []),
            entry(1, [5]),
            entry(1, ['']),
            entry(1, ['x'] * (change_notices.KEPT + 1)),
        ):
            self.assertIsNone(change_notices.decode(raw), raw)


class NoticeTrackerTestCase(base.TestCase):
    def setUp(self):
        super().setUp()
        self.tracker = change_notices.NoticeTracker()

    def test_unprimed_means_missed(self):
        self.assertEqual((set(), True), self.tracker.new({}))

    def test_only_later_notices_are_new(self):
        self.tracker.prime({'api-1': entry(2, ['a', 'b'])})
        self.assertEqual(
            ({'c'}, False),
            self.tracker.new({'api-1': entry(3, ['a', 'b', 'c'])}),
        )
        self.assertEqual(
            (set(), False),
            self.tracker.new({'api-1': entry(3, ['a', 'b', 'c'])}),
        )

    def test_a_new_process_is_read_whole(self):
        self.tracker.prime({})
        self.assertEqual(
            ({'a', 'b'}, False),
            self.tracker.new({'api-2': entry(2, ['a', 'b'])}),
        )

    def test_too_many_new_ones_were_missed(self):
        self.tracker.prime({'api-1': entry(0, [])})
        recent = ['n%d' % i for i in range(change_notices.KEPT)]
        idents, missed = self.tracker.new(
            {'api-1': entry(change_notices.KEPT + 1, recent)}
        )
        self.assertTrue(missed)

    def test_a_restarted_process_counts_again(self):
        self.tracker.prime({'api-1': entry(9, ['a'])})
        self.assertEqual(
            ({'z'}, False), self.tracker.new({'api-1': entry(1, ['z'])})
        )

    def test_an_entry_briefly_absent_is_not_read_again(self):
        # The file driver updates an entry by leaving and joining again.
        self.tracker.prime({'api-1': entry(3, ['a', 'b', 'c'])})
        self.assertEqual((set(), False), self.tracker.new({}))
        self.assertEqual(
            ({'d'}, False),
            self.tracker.new({'api-1': entry(4, ['a', 'b', 'c', 'd'])}),
        )
