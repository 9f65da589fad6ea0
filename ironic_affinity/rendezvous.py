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

"""Rendezvous (highest random weight) hashing, vectorised.

Among conductors tied for the top score a node goes to the one with the
highest weight ``mix(hash(node) XOR hash(conductor))``. Each weight depends
only on that node and that conductor, which is what gives the guarantees
the RFE needs: removing a conductor moves only its own nodes, adding one
moves nodes only onto it, and nodes spread over tied conductors as evenly
as a fair random draw. Why this family and not a ring is in
doc/source/contributor/placement-algorithm.rst, with the figures.

Weights are computed for all tied conductors in one numpy operation: over
1,000 tied conductors a Python loop costs about 470 us a node, numpy 13 us
one node at a time and under 3 us in batches (tools/benchmark_placement.py,
2 cores). Hashes are BLAKE2b, never Python's ``hash()``, so every process
on every host computes the same placement.
"""

from collections.abc import Iterable
from collections.abc import Sequence
import hashlib

import numpy as np
import numpy.typing as npt

Hashes = npt.NDArray[np.uint64]

# The finaliser of MurmurHash3's 64-bit variant: a bijection on 64-bit
# integers in which every input bit affects every output bit.
_C1 = np.uint64(0xFF51AFD7ED558CCD)
_C2 = np.uint64(0xC4CEB9FE1A85EC53)
_SHIFT = np.uint64(33)

# Rows of (nodes x conductors) weights computed at once: large enough to
# amortise numpy's per-call cost, small enough to stay in cache.
_CHUNK_CELLS = 1 << 18


def hash64(data: bytes) -> int:
    """A stable 64-bit hash of ``data``."""
    digest = hashlib.blake2b(data, digest_size=8).digest()
    return int.from_bytes(digest, 'little')


def hash_names(names: Iterable[str]) -> Hashes:
    """The 64-bit hashes of conductor names, in the order given."""
    return np.fromiter(
        (hash64(name.encode('utf-8')) for name in names), dtype=np.uint64
    )


def hash_keys(keys: Iterable[bytes]) -> Hashes:
    """The 64-bit hashes of node keys, in the order given."""
    return np.fromiter((hash64(key) for key in keys), dtype=np.uint64)


def _mix(values: Hashes) -> Hashes:
    values = values ^ (values >> _SHIFT)
    values *= _C1
    values ^= values >> _SHIFT
    values *= _C2
    values ^= values >> _SHIFT
    return values


def weights(key: int, members: Hashes) -> Hashes:
    """The rendezvous weight of one node key on each member."""
    return _mix(members ^ np.uint64(key))


def winners(keys: Hashes, members: Hashes) -> npt.NDArray[np.intp]:
    """For each node key, the index of its highest-weight member.

    A tie between two weights (two conductor names hashing alike) goes to
    the lower index, so callers pass members in a canonical order.
    """
    result = np.empty(len(keys), dtype=np.intp)
    if len(members) == 1:
        result.fill(0)
        return result
    rows = max(1, _CHUNK_CELLS // max(1, len(members)))
    for start in range(0, len(keys), rows):
        block = keys[start : start + rows, np.newaxis] ^ members[np.newaxis]
        result[start : start + rows] = _mix(block).argmax(axis=1)
    return result


def ranking(key: bytes, names: Sequence[str]) -> list[str]:
    """``names`` from the highest rendezvous weight for ``key`` down.

    The first is what :func:`winners` picks for the same names in the
    same order; each next one is who a node goes to when every name
    before it is gone. Ties keep the order given.
    """
    if not names:
        return []
    found = weights(hash64(key), hash_names(names)).tolist()
    order = sorted(range(len(names)), key=lambda i: (-found[i], i))
    return [names[i] for i in order]
