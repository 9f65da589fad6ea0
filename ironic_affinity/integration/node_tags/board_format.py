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

"""What the node tags board publishes: buckets and their index.

Nodes are split into :data:`BUCKETS` buckets by a hash of their uuid.
The holder of the reader's lock joins one tooz group per bucket,
``<group>.node-tags.<xx>``, with that bucket's ``{uuid: text}`` as its
capabilities, each node's text written by :mod:`.node_facts` (about 50
KB a bucket at 100,000 nodes, within every driver's value size); and
the index group ``<group>.node-tags`` with a digest of each bucket and
the time it took the lock. Digests, not counters: a new holder after a
failover, which publishes anew under its own member id, costs readers
nothing for the buckets that did not change meanwhile.

The board does not look inside a node's text. Entries follow the rule
of members' entries (:mod:`ironic_affinity.membership.capabilities`):
readers ignore keys they do not know, and a change an older reader
would misread bumps :data:`FORMAT_VERSION`.
"""

from collections.abc import Mapping
import dataclasses
import hashlib
import json
from typing import Any
import zlib

from ironic_affinity import exception
from ironic_affinity._i18n import _

FORMAT_VERSION = 1
BUCKETS = 256
# Far above a bucket's size at a million nodes (about 300 KB with their
# creation times), below the smallest value bound of a supported driver
# (ZooKeeper's 1 MiB is the server default; Redis and etcd allow more).
MAX_BUCKET_BYTES = 1024 * 1024

Bucket = dict[str, str]


def bucket_of(uuid: str) -> int:
    """The bucket of a node: stable across processes and hash seeds."""
    return zlib.crc32(uuid.encode('utf-8')) % BUCKETS


def digest(bucket: Mapping[str, str]) -> str:
    """A bucket's digest: equal contents give equal digests in every
    process."""
    # Of the canonical JSON.
    text = json.dumps(dict(bucket), sort_keys=True, separators=(',', ':'))
    return hashlib.blake2b(text.encode('utf-8'), digest_size=8).hexdigest()


EMPTY_DIGEST = digest({})


def index_group(group: str) -> bytes:
    return ('%s.node-tags' % group).encode('utf-8')


def bucket_group(group: str, bucket: int) -> bytes:
    return ('%s.node-tags.%02x' % (group, bucket)).encode('utf-8')


def lock_name(group: str) -> bytes:
    return ('%s.node-tags-reader' % group).encode('utf-8')


@dataclasses.dataclass(frozen=True)
class Index:
    """What the holder published: who it is, since when, and the digest
    of each bucket; and, so that a process taking over can carry on
    without reading every node again, when its last full read began
    (seconds since the epoch) and the number of the last change notice
    it had read from each API process. Those two may lag (they are
    published with the buckets), which only makes a successor read more.
    """

    publisher: bytes
    since: float
    digests: tuple[str, ...]
    full_at: float | None = None
    notices_seen: Mapping[str, int] | None = None


def _decode(raw: Any) -> Any:
    if isinstance(raw, bytes):
        raw = raw.decode('utf-8')
    if isinstance(raw, str):
        if len(raw) > MAX_BUCKET_BYTES:
            raise exception.InvalidCapabilities(_('larger than 1 MiB'))
        raw = json.loads(raw) if raw else None
    if not isinstance(raw, dict) or raw.get('format') != FORMAT_VERSION:
        raise exception.InvalidCapabilities(
            _('not a node-tags publication of format %d') % FORMAT_VERSION
        )
    return raw


def decode_index(publisher: bytes, raw: Any) -> Index:
    """:raises: InvalidCapabilities for anything but an index."""
    found = _decode(raw)
    digests = found.get('digests')
    since = found.get('since')
    if (
        not isinstance(digests, list)
        or len(digests) != BUCKETS
        or not all(isinstance(d, str) for d in digests)
        or not isinstance(since, (int, float))
    ):
        raise exception.InvalidCapabilities(_('malformed node-tags index'))
    full_at = found.get('full_at')
    seen = found.get('notices_seen')
    if not isinstance(full_at, (int, float)) or isinstance(full_at, bool):
        full_at = None
    if not isinstance(seen, dict) or not all(
        isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool)
        for k, v in seen.items()
    ):
        seen = None
    return Index(
        publisher,
        float(since),
        tuple(digests),
        None if full_at is None else float(full_at),
        seen,
    )


def decode_bucket(raw: Any) -> Bucket:
    """A bucket's ``{uuid: text}``.

    :raises: InvalidCapabilities for anything but a bucket.
    """
    found = _decode(raw)
    nodes = found.get('nodes')
    if not isinstance(nodes, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in nodes.items()
    ):
        raise exception.InvalidCapabilities(_('malformed node-tags bucket'))
    return nodes
