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

"""Rendezvous winners of many nodes at once, with numpy.

The same weights as :mod:`ironic_affinity.rendezvous`, over a whole batch
of nodes in a few array operations: over 1,000 tied conductors a Python
loop costs about 470 us a node, numpy under 3 us in batches
(tools/benchmark_placement.py, 2 cores). Imported only by callers that
place many nodes at once; see that module for why.
"""

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from ironic_affinity import rendezvous_mix

Hashes = npt.NDArray[np.uint64]

_C1 = np.uint64(rendezvous_mix.C1)
_C2 = np.uint64(rendezvous_mix.C2)
_SHIFT = np.uint64(rendezvous_mix.SHIFT)

# Rows of (nodes x conductors) weights computed at once: large enough to
# amortise numpy's per-call cost, small enough to stay in cache.
_CHUNK_CELLS = 1 << 18


def as_hashes(values: Sequence[int]) -> Hashes:
    return np.fromiter(values, dtype=np.uint64, count=len(values))


def _mix(values: Hashes) -> Hashes:
    values = values ^ (values >> _SHIFT)
    values *= _C1
    values ^= values >> _SHIFT
    values *= _C2
    values ^= values >> _SHIFT
    return values


def winners_of(keys: Hashes, members: Hashes) -> npt.NDArray[np.intp]:
    """For each node hash, the index of its highest-weight member; ties
    to the lower index, as :func:`ironic_affinity.rendezvous.winner`."""
    result = np.empty(len(keys), dtype=np.intp)
    if len(members) == 1:
        result.fill(0)
        return result
    rows = max(1, _CHUNK_CELLS // max(1, len(members)))
    for start in range(0, len(keys), rows):
        block = keys[start : start + rows, np.newaxis] ^ members[np.newaxis]
        result[start : start + rows] = _mix(block).argmax(axis=1)
    return result


def winners(keys: Sequence[int], members: Sequence[int]) -> list[int]:
    """:func:`winners_of` on plain integers."""
    found: list[int] = winners_of(as_hashes(keys), as_hashes(members)).tolist()
    return found


def rankings(
    keys: Sequence[int], members: Sequence[int], limit: int
) -> list[list[int]]:
    """:func:`ironic_affinity.rendezvous.rankings`, a block of nodes at
    a time."""
    node_hashes, member_hashes = as_hashes(keys), as_hashes(members)
    found: list[list[int]] = []
    rows = max(1, _CHUNK_CELLS // max(1, len(members)))
    for start in range(0, len(keys), rows):
        block = node_hashes[start : start + rows, np.newaxis] ^ member_hashes
        # ~w sorts the highest weight first; stable keeps equal weights
        # in the order given, as the plain version does.
        order = np.argsort(~_mix(block), axis=1, kind='stable')
        found.extend(order[:, :limit].tolist())
    return found
