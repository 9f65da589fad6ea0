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

"""Rendezvous (highest random weight) hashing.

Among conductors tied for the top score a node goes to the one with the
highest weight ``mix(hash(node) XOR hash(conductor))``. Each weight depends
only on that node and that conductor, which is what gives the guarantees
the RFE needs: removing a conductor moves only its own nodes, adding one
moves nodes only onto it, and nodes spread over tied conductors as evenly
as a fair random draw. Why this family and not a ring is in
doc/source/contributor/placement-algorithm.rst, with the figures.

Hashes are BLAKE2b, never Python's ``hash()``, so every process on every
host computes the same placement.

Two ways to compute one answer. A conductor or an API worker asks for one
node at a time, over a few tied conductors: plain integer arithmetic
here, about 0.4 us a weight. Many weights at once (``plan``, the
placement metrics, or ties among :data:`VECTOR_CELLS` conductors or more)
go to :mod:`ironic_affinity.rendezvous_vector`, numpy, about 13 us a call
whatever its size, imported only then: numpy adds 13 MiB to a process
(measured over Ironic 39's conductor), which a conductor that asks node
by node among a few tied conductors should not pay. Both give the same
winners (property-tested).
"""

from collections.abc import Iterable
from collections.abc import Sequence
import hashlib

from ironic_affinity.rendezvous_mix import C1
from ironic_affinity.rendezvous_mix import C2
from ironic_affinity.rendezvous_mix import MASK64
from ironic_affinity.rendezvous_mix import SHIFT

# Batches of at least this many (node, conductor) weights are computed by
# numpy: below it, numpy's per-call cost is more than the arithmetic.
VECTOR_CELLS = 64


def hash64(data: bytes) -> int:
    """A stable 64-bit hash of ``data``."""
    digest = hashlib.blake2b(data, digest_size=8).digest()
    return int.from_bytes(digest, 'little')


def hash_names(names: Iterable[str]) -> list[int]:
    """The 64-bit hashes of conductor names, in the order given."""
    return [hash64(name.encode('utf-8')) for name in names]


def hash_keys(keys: Iterable[bytes]) -> list[int]:
    """The 64-bit hashes of node keys, in the order given."""
    return [hash64(key) for key in keys]


def weight(key: int, member: int) -> int:
    """The rendezvous weight of node hash ``key`` on one member hash."""
    value = key ^ member
    value ^= value >> SHIFT
    value = (value * C1) & MASK64
    value ^= value >> SHIFT
    value = (value * C2) & MASK64
    return value ^ (value >> SHIFT)


def winner(key: int, members: Sequence[int]) -> int:
    """The index of the highest-weight member for one node hash.

    A tie between two weights (two conductor names hashing alike) goes to
    the lower index, so callers pass members in a canonical order.
    """
    best, best_weight = 0, -1
    for index, member in enumerate(members):
        found = weight(key, member)
        if found > best_weight:
            best, best_weight = index, found
    return best


def winners(keys: Sequence[int], members: Sequence[int]) -> list[int]:
    """For each node hash, the index of its highest-weight member."""
    if len(members) == 1:
        return [0] * len(keys)
    if len(keys) * len(members) >= VECTOR_CELLS:
        from ironic_affinity import rendezvous_vector

        return rendezvous_vector.winners(keys, members)
    return [winner(key, members) for key in keys]


def rankings(
    keys: Sequence[int], members: Sequence[int], limit: int
) -> list[list[int]]:
    """For each node hash, the indexes of its ``limit`` highest-weight
    members, highest first; equal weights in the order given."""
    if len(keys) * len(members) >= VECTOR_CELLS:
        from ironic_affinity import rendezvous_vector

        return rendezvous_vector.rankings(keys, members, limit)
    found = []
    for key in keys:
        weights = [weight(key, member) for member in members]
        order = sorted(range(len(members)), key=lambda i: (-weights[i], i))
        found.append(order[:limit])
    return found


def ranking(key: bytes, names: Sequence[str]) -> list[str]:
    """``names`` from the highest rendezvous weight for ``key`` down.

    The first is what :func:`winners` picks for the same names in the
    same order; each next one is who a node goes to when every name
    before it is gone. Ties keep the order given.
    """
    node = hash64(key)
    found = [weight(node, member) for member in hash_names(names)]
    order = sorted(range(len(names)), key=lambda i: (-found[i], i))
    return [names[i] for i in order]
