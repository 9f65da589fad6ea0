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

"""Every node's published facts, held in this process's memory.

Ironic asks for a node's conductor by uuid alone, many times a second,
so each process holds uuid -> facts in as many dictionaries as the
backend has buckets, each replaced whole: a lookup reads without a lock
while a refresh installs. A process follows what the reader publishes
(:mod:`ironic_affinity.integration.node_tags.tag_reader`) by reading the
backend's index, then only the buckets whose digest differs from the
digest of what it holds: an idle deployment costs a follower one read.
The reader installs what it publishes here too, so that the digests it
publishes are the ones its followers compute of the same contents.

Nothing here reads the database.
"""

from collections.abc import Iterable
import threading
import time

from ironic_affinity.integration.node_tags import board_format
from ironic_affinity.integration.node_tags import node_facts
from ironic_affinity.integration.node_tags import tag_board

BUCKETS = board_format.BUCKETS


class TagFollower:
    """uuid -> facts for every node, as last published or read."""

    def __init__(self, board: tag_board.TagBoard) -> None:
        """:param board: the published tags on the coordination backend."""
        self.board = board
        # Replaced whole, one bucket at a time: lookups read without a
        # lock.
        self._buckets: list[dict[str, node_facts.NodeFacts]] = [
            {} for _ in range(BUCKETS)
        ]
        self._digests = [board_format.EMPTY_DIGEST] * BUCKETS
        # The last index read whole: see take_followed.
        self._followed: board_format.Index | None = None
        #: Shares facts between nodes: also for rows read for one lookup.
        self.decoder = node_facts.Decoder()
        self._installing = threading.Lock()
        #: Set once every node's tags have been read at least once.
        self.loaded = threading.Event()
        #: Where the tags in use were read from, for the start's log line.
        self.source = ''
        #: Bumped whenever any node's tags change, for callers' caches.
        self.version = 0
        #: Buckets read from the backend since start, for measurements.
        self.buckets_read = 0

    def held(self, uuid: str) -> node_facts.NodeFacts | None:
        return self._buckets[board_format.bucket_of(uuid)].get(uuid)

    def nodes(self) -> list[tuple[str, node_facts.NodeFacts]]:
        """(uuid, facts) of every node held."""
        return [item for bucket in self._buckets for item in bucket.items()]

    def __len__(self) -> int:
        return sum(len(bucket) for bucket in self._buckets)

    def digests(self) -> list[str]:
        """Each bucket's digest as installed: what followers compute of
        the same contents."""
        return list(self._digests)

    def as_published(self) -> list[board_format.Bucket]:
        """Every bucket held, as the text it was published as."""
        return [
            {
                uuid: node_facts.encode_facts(facts)
                for uuid, facts in nodes.items()
            }
            for nodes in self._buckets
        ]

    def take_followed(self) -> board_format.Index | None:
        """The index last read whole, if any since the last call: a
        process taking the lock carries on from it once, never from one
        read before it last led."""
        index, self._followed = self._followed, None
        return index

    def follow(self) -> bool:
        """Install the buckets that the publisher's index says changed.

        :returns: False when nobody has published anything.
        :raises: tooz errors when the backend cannot be reached.
        """
        index = self.board.read_index()
        if index is None:
            return False
        complete = True
        for number, wanted in enumerate(index.digests):
            if wanted == self._digests[number]:
                continue
            found = self.board.read_bucket(index.publisher, number)
            self.buckets_read += 1
            if found is None:
                complete = False  # mid-publication: next time
                continue
            self.install(number, found)
        if complete:
            self._followed = index
            self.loaded_from('from the coordination backend')
        return True

    def loaded_from(self, source: str) -> None:
        """Every node's tags are held, read as ``source`` says."""
        self.source = source
        self.loaded.set()

    def install_all(self, buckets: Iterable[board_format.Bucket]) -> None:
        """Every bucket, read from the database by this process for
        itself alone."""
        for number, bucket in enumerate(buckets):
            self.install(number, bucket)
        self.loaded_from('from the database, for this process alone')

    def install(self, number: int, bucket: board_format.Bucket) -> None:
        """Make one bucket's published contents the tags of its nodes."""
        decode = self.decoder.decode
        nodes = {uuid: decode(text) for uuid, text in bucket.items()}
        with self._installing:
            if nodes != self._buckets[number]:
                self._buckets[number] = nodes
                self.version += 1
            self._digests[number] = board_format.digest(bucket)
        time.sleep(0)  # see tag_reader.BATCH
