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

"""The deployment read from memory (as the placement metrics place it)
is the deployment read from the database."""

import dataclasses
import json
import os
import types

import fixtures

from ironic_affinity import adoption
from ironic_affinity import engine
from ironic_affinity import profile
from ironic_affinity.integration.data import ironic_db
from ironic_affinity.integration.data import live
from ironic_affinity.integration.node_tags import tag_board
from ironic_affinity.integration.node_tags import tag_cache
from ironic_affinity.membership import view_snapshot
from ironic_affinity.tests.unit.membership import fakes

NODES = ironic_db.NODES
T0 = 1_800_000_000.0  # after every switch of the agreements here


class FromMemoryTestCase(fakes.BackendTestCase):
    def setUp(self):
        super().setUp()
        directory = self.useFixture(fixtures.TempDir()).path
        url = 'sqlite:///' + os.path.join(directory, 'ironic.db')
        self.database = ironic_db.IronicDatabase(url)
        self.addCleanup(self.database.dispose)
        ironic_db.METADATA.create_all(self.database.engine)
        with self.database.engine.begin() as connection:
            for index, name in enumerate(('c1', 'c2', 'c3'), start=1):
                connection.execute(
                    ironic_db.CONDUCTORS.insert(),
                    {
                        'id': index,
                        'hostname': name,
                        'conductor_group': 'g' if name == 'c3' else '',
                        'online': True,
                    },
                )
                for hardware_type in ('ipmi', 'redfish'):
                    connection.execute(
                        ironic_db.HARDWARE_INTERFACES.insert(),
                        {
                            'conductor_id': index,
                            'hardware_type': hardware_type,
                        },
                    )
            connection.execute(
                NODES.insert(),
                [
                    {
                        'uuid': '00000000-0000-4000-8000-%012d' % i,
                        'name': 'node-%d' % i,
                        'driver': ('ipmi', 'redfish')[i % 2],
                        # Ironic matches groups whatever their case.
                        'conductor_group': ('', 'G')[i % 3 == 0],
                        'extra': json.dumps(
                            {'affinity_tags': ['rack1', 'rack2'][i % 2]}
                        ),
                    }
                    for i in range(40)
                ],
            )
        self.conf = types.SimpleNamespace(
            affinity=types.SimpleNamespace(node_tags_key='affinity_tags'),
            conductor=types.SimpleNamespace(heartbeat_timeout=60),
        )
        build = profile.ConductorProfile.build
        members = {
            'c1': build('c1', soft_affinity_tags='rack1'),
            'c2': build('c2', soft_affinity_tags='rack2'),
            'c3': build('c3', conductor_group='g'),
        }
        self.snapshot = view_snapshot.Snapshot(
            1, types.MappingProxyType(members), types.MappingProxyType({}), 0.0
        )

    def test_same_nodes_and_placement_as_the_database(self):
        cache = tag_cache.NodeTagCache(
            self.database,
            tag_board.TagBoard(
                'redis://x', 'conductors', 'a', 5, clock=self.clock
            ),
            'affinity_tags',
            2.0,
            60.0,
            'conductors.api',
            clock=self.clock,
        )
        self.addCleanup(cache.stop)
        cache.poll()
        from_db = live.read(self.conf, self.snapshot, self.database)
        in_memory = live.from_memory(
            self.conf, self.snapshot, self.database, cache.nodes()
        )
        self.assertEqual(from_db.conductors, in_memory.conductors)
        self.assertEqual(from_db.not_members, in_memory.not_members)

        def by_uuid(deployment):
            placements = engine.PlacementEngine(
                deployment.conductors
            ).place_all(deployment.nodes)
            return {
                node.uuid: (node.tags, node.driver, node.conductor_group, p)
                for node, p in zip(deployment.nodes, placements, strict=True)
            }

        expected = by_uuid(from_db)
        found = by_uuid(in_memory)
        self.assertEqual(40, len(found))
        # Equal but for the placement's node name (uuid, not name).
        for uuid, (tags, driver, group, placement) in expected.items():
            self.assertEqual(
                (tags, driver, group, placement.conductor, placement.tied),
                found[uuid][:3] + (found[uuid][3].conductor,
                                   found[uuid][3].tied),
            )  # fmt: skip
        # Both groups and both tags in use: the comparison means something.
        self.assertEqual(
            {'c1', 'c2', 'c3'},
            {p.conductor for *_rest, p in found.values()},
        )

    def test_who_took_the_nodes_over_is_read_from_the_database_only(self):
        with self.database.engine.begin() as connection:
            # Every node active and last taken over by c1 (id 1).
            connection.execute(
                NODES.update().values(
                    provision_state='active',
                    maintenance=False,
                    conductor_affinity=1,
                )
            )
        from_db = live.read(self.conf, self.snapshot, self.database)
        self.assertEqual(
            {node.uuid: 'c1' for node in from_db.nodes}, from_db.taken_by
        )
        in_memory = live.from_memory(
            self.conf, self.snapshot, self.database, []
        )
        self.assertEqual({}, in_memory.taken_by)
        # Group g (a third of the nodes) is on c3, rack2 (half the rest)
        # on c2: every node placed elsewhere than c1 awaits its takeover.
        self.assertEqual(14 + 13, live.takeovers_pending(from_db, T0))

    def test_takeovers_while_ironic_s_ring_places(self):
        from_db = live.read(self.conf, self.snapshot, self.database)
        stock = dataclasses.replace(
            from_db,
            agreement=adoption.agree(
                {
                    'c1': adoption.Published(
                        adoption.Vote('stock', T0, 60.0),
                        (adoption.Switch('stock', adoption.ORIGIN_AT, 0.0),),
                    )
                },
                (),
            ),
            taken_by={node.uuid: 'c2' for node in from_db.nodes[:5]},
        )
        # Where Ironic's ring puts them is known only to Ironic's rings.
        self.assertIsNone(live.takeovers_pending(stock, T0))
        self.assertEqual(
            5, live.takeovers_pending(stock, T0, lambda node: 'c1')
        )
        self.assertEqual(
            0, live.takeovers_pending(stock, T0, lambda node: 'c2')
        )
