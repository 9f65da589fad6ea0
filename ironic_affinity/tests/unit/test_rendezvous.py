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

"""The tie-break's two computations give one answer, and a process that
places node by node never loads numpy."""

import subprocess
import sys
import textwrap

from hypothesis import given
from hypothesis import strategies as st

from ironic_affinity import rendezvous
from ironic_affinity import rendezvous_mix
from ironic_affinity import rendezvous_vector
from ironic_affinity.tests import base

HASHES = st.integers(min_value=0, max_value=rendezvous_mix.MASK64)


class RendezvousTestCase(base.TestCase):
    @given(
        st.lists(HASHES, max_size=50),
        # Repeated members too: a tie goes to the lower index in both.
        st.lists(st.sampled_from([0, 1, rendezvous_mix.MASK64]) | HASHES,
                 min_size=1, max_size=40),
    )  # fmt: skip
    def test_integer_and_numpy_winners_agree(self, keys, members):
        expected = [rendezvous.winner(key, members) for key in keys]
        self.assertEqual(expected, rendezvous_vector.winners(keys, members))

    @given(
        st.lists(HASHES, max_size=30),
        st.lists(st.sampled_from([0, 1, rendezvous_mix.MASK64]) | HASHES,
                 min_size=1, max_size=40),
        st.integers(1, 45),
    )  # fmt: skip
    def test_integer_and_numpy_rankings_agree(self, keys, members, limit):
        # The plain rankings, written from the definition.
        expected = [
            sorted(
                range(len(members)),
                key=lambda i, k=key: (-rendezvous.weight(k, members[i]), i),
            )[:limit]
            for key in keys
        ]
        self.assertEqual(
            expected, rendezvous_vector.rankings(keys, members, limit)
        )
        self.assertEqual(expected, rendezvous.rankings(keys, members, limit))
        for key, ranked in zip(keys, expected, strict=True):
            self.assertEqual(rendezvous.winner(key, members), ranked[0])

    def test_large_batches_give_what_one_by_one_gives(self):
        keys = rendezvous.hash_keys(b'node-%d' % i for i in range(2000))
        members = rendezvous.hash_names('c%d' % i for i in range(7))
        self.assertGreaterEqual(
            len(keys) * len(members), rendezvous.VECTOR_CELLS
        )
        found = rendezvous.winners(keys, members)
        self.assertEqual([rendezvous.winner(k, members) for k in keys], found)
        # And the spread is a fair draw's: each of 7 within 15% of 1/7.
        for index in range(7):
            self.assertAlmostEqual(
                1 / 7, found.count(index) / len(keys), delta=0.15 / 7
            )

    def test_ranking_starts_with_the_winner(self):
        names = ['c%d' % i for i in range(9)]
        members = rendezvous.hash_names(names)
        for i in range(200):
            key = b'node-%d' % i
            order = rendezvous.ranking(key, names)
            self.assertEqual(sorted(names), sorted(order))
            winner = rendezvous.winner(rendezvous.hash64(key), members)
            self.assertEqual(names[winner], order[0])
            # Without the winner, the next in the ranking wins.
            rest = [n for n in names if n != order[0]]
            second = rendezvous.winner(
                rendezvous.hash64(key), rendezvous.hash_names(rest)
            )
            self.assertEqual(order[1], rest[second])

    def test_node_by_node_placement_loads_no_numpy(self):
        script = textwrap.dedent(
            """
            import sys
            from ironic_affinity import engine, profile
            conductors = [profile.ConductorProfile.build('c%d' % i)
                          for i in range(8)]
            placer = engine.PlacementEngine(conductors)
            nodes = [profile.NodeRequest(name='n%d' % i, tags=frozenset())
                     for i in range(3000)]
            for node in nodes:
                placer.place(node)
                placer.fallback_order(node)
            placer.place_all(nodes[:7])
            print('numpy' in sys.modules)
            placer.place_all(nodes)
            print('numpy' in sys.modules)
            """
        )
        found = subprocess.run(
            [sys.executable, '-c', script],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        self.assertEqual(['False', 'True'], found)

    def test_a_large_tie_is_placed_as_a_batch_places_it(self):
        from ironic_affinity import engine
        from ironic_affinity import profile

        conductors = [
            profile.ConductorProfile.build('c%03d' % i)
            for i in range(rendezvous.VECTOR_CELLS + 36)
        ]
        nodes = [
            profile.NodeRequest(name='n%d' % i, tags=frozenset())
            for i in range(300)
        ]
        expected = engine.PlacementEngine(conductors).place_all(nodes)
        placer = engine.PlacementEngine(conductors)
        self.assertEqual(expected, [placer.place(n) for n in nodes])
        self.assertEqual(expected, [placer.place(n) for n in nodes])
        self.assertEqual(
            [p.conductor for p in expected],
            [placer.fallback_order(n)[0] for n in nodes],
        )
