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

"""The nodes that await Ironic's takeover."""

from hypothesis import assume
from hypothesis import given
from hypothesis import strategies as st

from ironic_affinity import takeovers
from ironic_affinity.tests import base

UUIDS = st.sampled_from(['u%d' % i for i in range(12)])
# None: no conductor (placed), or none recorded (taken over).
CONDUCTORS = st.sampled_from([None, 'c1', 'c2', 'c3'])
PLACED = st.sampled_from(['c1', 'c2', 'c3'])
MAPPINGS = st.dictionaries(UUIDS, CONDUCTORS)


class PendingTestCase(base.TestCase):
    def test_each_case(self):
        placed = {
            'moved': 'c2',
            'stays': 'c1',
            'never-taken': 'c1',
            'orphan': None,
            'not-active': 'c2',
        }
        taken_by = {
            'moved': 'c1',
            'stays': 'c1',
            # Deployed before any conductor recorded itself.
            'never-taken': None,
            'orphan': 'c1',
            # Active, not in the tag cache yet: not placed.
            'unknown': 'c3',
        }
        self.assertEqual(2, takeovers.pending(placed, taken_by))

    def test_nothing_to_take(self):
        self.assertEqual(0, takeovers.pending({}, {}))
        self.assertEqual(0, takeovers.pending({'u1': 'c1'}, {}))

    @given(MAPPINGS, MAPPINGS)
    def test_never_more_than_the_placed_nodes_it_considers(
        self, placed, taken_by
    ):
        found = takeovers.pending(placed, taken_by)
        self.assertGreaterEqual(found, 0)
        self.assertLessEqual(
            found,
            sum(1 for uuid in taken_by if placed.get(uuid) is not None),
        )

    @given(MAPPINGS, MAPPINGS)
    def test_none_once_every_node_was_taken_by_its_conductor(
        self, placed, others
    ):
        # Nodes of ``others`` that the ring does not place add nothing.
        taken_by = {u: c for u, c in others.items() if u not in placed}
        taken_by.update(placed)
        self.assertEqual(0, takeovers.pending(placed, taken_by))

    @given(MAPPINGS, MAPPINGS, UUIDS, PLACED, CONDUCTORS)
    def test_one_takeover_done_is_one_fewer_pending(
        self, placed, taken_by, uuid, conductor, holder
    ):
        # The node is placed on ``conductor`` and was taken by another.
        assume(holder != conductor)
        placed = dict(placed, **{uuid: conductor})
        taken_by = dict(taken_by, **{uuid: holder})
        before = takeovers.pending(placed, taken_by)
        done = dict(taken_by, **{uuid: conductor})
        self.assertEqual(before - 1, takeovers.pending(placed, done))
