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

"""One process cut off from Redis or PostgreSQL while the others are not.

Each process reaches both servers through proxies of its own
(cut_proxy.py), so a test cuts one link as a broken cable or a firewall
would: refused, or black-holed. What is measured is what Ironic itself
does: which conductor runs each node's power sync, second by second, and
how often a conductor takes an active node over.
"""

import collections
import time

from ironic_affinity.tests.e2e import base

# How long a link stays cut.
CUT = 40.0
NODES = 30
# Deployed, so that Ironic's takeover of active nodes runs on them.
ACTIVE = 3
# The deployment's timers: [affinity]member_timeout (the default), the
# power sync interval (deployment.py) and a short takeover interval
# (Ironic's [conductor]sync_local_state_interval, 180 s by default), so
# that a ping-pong would show within the cut.
MEMBER_TIMEOUT = 5.0
SYNC = 2.0
TAKEOVER = 4
# A node is worked by two conductors at a moment when both ran its power
# sync within this window (a sync every SYNC seconds each).
DOUBLE_WINDOW = 1.5 * SYNC
# The failover time: the member timeout, a watch interval, two syncs.
FAILOVER = MEMBER_TIMEOUT + 1.0 + 2 * SYNC
# A conductor cut from the database: Ironic drops it once its heartbeat
# is [conductor]heartbeat_timeout old (5 s in these deployments) and its
# rings are rebuilt (2 s), and its nodes wait up to two syncs; a second
# for the sampling.
DB_FAILOVER = 5.0 + 2.0 + 2 * SYNC + 1.0
# ...and back: a heartbeat (1 s), a ring rebuild (2 s), a sync, a second;
# and a sync more, because a ring is rebuilt at the first lookup after
# the interval, and the lookups here are the syncs, every 2 s: on Ironic
# 29 (plugin, idle machine) conductor3 read the conductors at 13.72,
# just before conductor1's first heartbeat after the heal, and its sync
# at 15.72 found that read not yet 2 s old, so it synced conductor1's
# nodes once more, 4 s after conductor1 was back; 5.0 s was measured,
# and an earlier CI run (loaded) exceeded the 6 s bound this lacked.
DB_HEAL = 1.0 + 2.0 + SYNC + SYNC + 1.0
# One owner per node again after the heal: the cut conductor's next
# heartbeat (1 s) and its client's reconnection (about 1 s), the others'
# next read of the group and its own, begun after that heartbeat (a
# watch interval, 1 s, each), the two syncs of a handover counted as a
# double (a sync), and a second for the sampling. 5 s was the bound
# before: the code of 1f77083 exceeded it too, 5.004 s in one of two
# runs on Ironic 35; 2.0 to 6.0 s measured since.
REDIS_HEAL = 1.0 + 1.0 + 2 * 1.0 + SYNC + 1.0
# The API reports its view stale by then: the watch interval, a read's
# deadline (the member timeout), one sample interval and a second.
API_STALE = 1.0 + MEMBER_TIMEOUT + 1.0 + 1.0
_TAKING_OVER = 'taking over node '


class Timeline:
    """Power syncs and takeovers, read from the conductors' logs every
    second: (seconds since the start, node, conductor).

    A sync's moment is the one its log line gives, not the sample's: a
    sample may come late (the API answers slowly while it is cut from
    Redis, up to a read's deadline), and a sync stamped with it would
    seem later than it was. In CI on Ironic 35 one node seemed 12.1 s
    without a conductor, beyond the 10 s failover, with sample times.
    """

    def __init__(self, dep) -> None:
        self.dep = dep
        self.start = time.monotonic()
        # The logs' clock at the same moment.
        self.wall_start = time.time()
        self.offsets = dep.log_offsets()
        self.syncs: list[tuple[float, str, str]] = []
        self.takeovers: collections.Counter[str] = collections.Counter()

    def now(self) -> float:
        return time.monotonic() - self.start

    def sample(self) -> None:
        offsets = self.dep.log_offsets()
        for at, node, conductor in self.dep.power_syncs_logged(self.offsets):
            self.syncs.append((at - self.wall_start, node, conductor))
        for name, offset in self.offsets.items():
            text = self.dep.log_since(name, offset, offsets[name])
            for line in text.splitlines():
                if _TAKING_OVER in line:
                    node = line.split(_TAKING_OVER, 1)[1].split()[0]
                    self.takeovers[node] += 1
        self.offsets = offsets

    def run(self, seconds: float) -> None:
        end = self.now() + seconds
        while self.now() < end:
            time.sleep(1.0)
            self.sample()

    def doubles(self, since: float) -> dict[str, list[float]]:
        """node -> moments (from ``since`` on) when two conductors ran
        its power sync within DOUBLE_WINDOW."""
        by_node: dict[str, list[tuple[float, str]]] = {}
        for at, node, conductor in self.syncs:
            if at >= since:
                by_node.setdefault(node, []).append((at, conductor))
        found: dict[str, list[float]] = {}
        for node, events in by_node.items():
            for at, conductor in events:
                others = {
                    c
                    for t, c in events
                    if c != conductor and at - DOUBLE_WINDOW <= t <= at
                }
                if others:
                    found.setdefault(node, []).append(at)
        return found

    def longest_gap(self, nodes, since: float, until: float) -> float:
        """The longest time, between ``since`` and ``until``, that any
        node went without a power sync by any conductor."""
        worst = 0.0
        for node in nodes:
            times = sorted(
                at for at, n, _c in self.syncs if n == node and at >= since
            )
            times = [t for t in times if t <= until]
            edges = [since] + times + [until]
            worst = max(
                worst,
                max(b - a for a, b in zip(edges, edges[1:], strict=False)),
            )
        return worst

    def owners(self, since: float) -> dict[str, set[str]]:
        found: dict[str, set[str]] = {}
        for at, node, conductor in self.syncs:
            if at >= since:
                found.setdefault(node, set()).add(conductor)
        return found


class PartitionTestCase(base.TestCase):
    TIMED = True

    def _deploy(self, manager='affinity', conductors=4):
        dep = self.deploy(
            {index: {} for index in range(1, conductors + 1)},
            manager=manager,
            cuttable=True,
            extra_conf='\n[conductor]\nsync_local_state_interval = %d\n'
            % TAKEOVER,
        )
        nodes = [dep.create_node('n%02d' % i, '') for i in range(NODES)]
        for node in nodes[:ACTIVE]:
            dep.make_active(node)
        placed = {}

        def all_placed():
            placed.update((n, dep.conductor_of(n)) for n in nodes)
            return None not in placed.values()

        dep.wait(all_placed, 60, 'every node placed')
        self.wait_power_sync(placed)
        return dep, nodes

    def test_conductors_cut_from_redis_stand_down(self):
        # conductor1's link to Redis refused, conductor2's black-holed,
        # and the API's refused, all for CUT seconds.
        dep, nodes = self._deploy()
        timeline = Timeline(dep)
        timeline.run(2)
        cut_at = timeline.now()
        dep.cut('conductor1', 'redis', 'refuse')
        dep.cut('conductor2', 'redis', 'blackhole')
        dep.cut('api', 'redis', 'refuse')
        api_errors = 0
        api_stale_after = None
        end = cut_at + CUT
        while timeline.now() < end:
            time.sleep(1.0)
            timeline.sample()
            # The API keeps answering, by its last view...
            if dep.get('/v1/nodes/%s' % nodes[0]) is None:
                api_errors += 1
            # ...and says that view is stale.
            answer = dep.get('/v1/affinity') or {}
            readable = answer.get('membership', {}).get('readable')
            if readable is False and api_stale_after is None:
                api_stale_after = timeline.now() - cut_at
        healed_at = timeline.now()
        for name in ('conductor1', 'conductor2', 'api'):
            dep.heal(name, 'redis')
        timeline.run(15)

        during = timeline.doubles(cut_at)
        cut_doubles = {
            n: [t for t in at if t < healed_at] for n, at in during.items()
        }
        cut_doubles = {n: at for n, at in cut_doubles.items() if at}
        heal_doubles = {
            n: [t for t in at if t >= healed_at] for n, at in during.items()
        }
        heal_doubles = {n: at for n, at in heal_doubles.items() if at}
        last_cut_double = max(
            (max(at) for at in cut_doubles.values()), default=cut_at
        )
        last_heal_double = max(
            (max(at) for at in heal_doubles.values()), default=healed_at
        )
        gap = timeline.longest_gap(nodes, cut_at, timeline.now())
        base.record(
            test='partition_redis',
            nodes_double_during_cut=len(cut_doubles),
            double_until_after_cut=round(last_cut_double - cut_at, 1),
            nodes_double_after_heal=len(heal_doubles),
            double_until_after_heal=round(last_heal_double - healed_at, 1),
            longest_without_conductor=round(gap, 1),
            most_takeovers_of_a_node=max(
                timeline.takeovers.values(), default=0
            ),
            api_errors=api_errors,
            api_stale_after=api_stale_after,
        )
        # Two conductors work a node at most until the others drop the
        # cut one, and a sync interval: the cut one stood down before.
        self.assertLessEqual(
            last_cut_double - cut_at,
            MEMBER_TIMEOUT + SYNC,
            'nodes worked by two conductors: %s' % sorted(cut_doubles),
        )
        # No ping-pong: taken over once by the cut, once by the heal.
        for node, count in timeline.takeovers.items():
            self.assertLessEqual(count, 2, (node, timeline.takeovers))
        # One owner per node soon after the heal.
        self.assertLessEqual(
            last_heal_double - healed_at,
            REDIS_HEAL,
            'nodes worked by two conductors: %s' % sorted(heal_doubles),
        )
        # No node went without a conductor longer than a failover.
        self.assertLessEqual(gap, FAILOVER)
        self.assertEqual(0, api_errors)
        # Its view is marked stale at its first failed read: within a
        # watch interval and the member timeout (a read's deadline),
        # and the one second between two of these samples.
        self.assertIsNotNone(api_stale_after)
        self.assertLessEqual(api_stale_after, API_STALE)
        # Every node is back with the conductor the API names.
        self.assert_power_sync({n: dep.conductor_of(n) for n in nodes})
        for name in ('conductor1', 'conductor2'):
            log = dep.log(name)
            self.assertIn('Standing down', log)
            self.assertIn('is back in the affinity group', log)
            # It rejoined once (on Redis the entry expired meanwhile).
            self.assertLessEqual(log.count('joined group e2e on'), 2, name)

    def test_a_conductor_cut_from_the_database_no_worse_than_stock(self):
        # conductor1's link to PostgreSQL refused for CUT seconds, through
        # the plugin and through Ironic's own ring, one after the other.
        # In CI on the oldest release only (tox.ini, [e2e-release]).
        figures = {}
        for manager in ('affinity', 'stock'):
            dep, nodes = self._deploy(manager, conductors=3)
            timeline = Timeline(dep)
            timeline.run(2)
            cut_at = timeline.now()
            dep.cut('conductor1', 'database', 'refuse')
            timeline.run(CUT)
            healed_at = timeline.now()
            dep.heal('conductor1', 'database')
            timeline.run(15)
            doubles = timeline.doubles(cut_at)
            heal_doubles = [
                t for at in doubles.values() for t in at if t >= healed_at
            ]
            figures[manager] = {
                'nodes_double': len(doubles),
                'double_until_after_heal': round(
                    max(heal_doubles, default=healed_at) - healed_at, 1
                ),
                'longest_without_conductor': round(
                    timeline.longest_gap(nodes, cut_at, timeline.now()), 1
                ),
                'most_takeovers_of_a_node': max(
                    timeline.takeovers.values(), default=0
                ),
            }
            base.record(
                test='partition_database', ring=manager, **figures[manager]
            )
            dep.stop_all()
        # Both rings are held to the bounds Ironic's own timers set; one
        # run of the stock ring is too noisy a bound by itself (its gap
        # was 6 to 9 s, the plugin's 7 to 9 s, in three runs).
        for found in figures.values():
            self.assertLessEqual(
                found['longest_without_conductor'], DB_FAILOVER, figures
            )
            self.assertLessEqual(
                found['double_until_after_heal'], DB_HEAL, figures
            )
        # Takeovers are recorded, not bounded: both rings were seen to
        # take one node over 4 times (the stock ring in a trial; the
        # plugin in CI on e943304 and 6db4b6e, Ironic 29, beside the
        # adoption case, against the stock ring's 2 in the same case).
        # Both follow Ironic's conductor list here (the database is what
        # is cut, not Redis), and under load the cut conductor's
        # heartbeats may flap around heartbeat_timeout after the heal;
        # one run of each ring cannot show which does more. The Redis
        # cut bounds the plugin's own takeovers (at most 2).
