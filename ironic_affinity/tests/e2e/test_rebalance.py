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

"""[affinity]rebalance_period through Ironic: a tag change that moves
300 nodes moves them in steps over the period, and a conductor killed
meanwhile loses its nodes at once; under capacity, a change that moves
200 nodes onto a conductor with max_nodes 200 moves them in steps too,
never over its capacity.

Evidence is Ironic's: the nodes' ``conductor`` field in the REST API,
sampled twice a second, and which conductor's power sync works each node
and when (the conductors' logs).
"""

from concurrent import futures
import datetime
import json
import re
import time

from ironic_affinity.integration.node_tags import tag_board
from ironic_affinity.tests.e2e import base
from ironic_affinity.tests.e2e import deployment
from ironic_affinity.tests.e2e import load

MOVING = 300
BYSTANDERS = 20
# Created just after the change began, with the moving nodes' tags.
LATE = 10
PERIOD = 60
WINDOW = 10
SAMPLE = 0.5
# The even share of a window, and the margin allowed over it: a fair
# draw of 300 moves over 6 windows has a standard deviation of 6.5 a
# window; the API reads the group once a second, which shifts a second
# of moves (5) from one window to the next.
EVEN_SHARE = MOVING * WINDOW / PERIOD
MARGIN = 25
# Under capacity: conductor1 takes this many of the moving nodes, over a
# shorter period (the run is in every release's core set).
CAPACITY = 200
CAPACITY_PERIOD = 40
# [affinity]watch_interval (1 s) plus Ironic's hash_ring_reset_interval
# here (2 s): how late a process may see what has changed.
REFRESH = 3.0
# [conductor]sync_power_state_interval here.
SYNC_INTERVAL = 2.0
# [affinity]member_timeout where a conductor is reloaded with SIGHUP alone:
# Ironic 39 restarts its worker, which takes the old one's entry over if
# it joins within the member timeout, and publishes the new tags as a
# change; joining later, it is a new member. Under CI's load the default
# 5 s was too short twice on 2026-12-07 (the wait for the change timed
# out at 60 s; by hand, with three CPU hogs beside it, the new worker
# took the entry over 2.6 s after the old one handed it over). Ironic
# lists a crashed conductor as gone after its heartbeat timeout (5 s
# here) whatever this is, so the crash below moves its nodes as soon.
RELOAD_MEMBER_TIMEOUT = 30

_SYNC = re.compile(
    r'^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}) .*Attempting to get shared '
    r'lock on node (\S+) \(for power state sync\)',
    re.MULTILINE,
)


def moves_per_window(arrived, changed_at, period):
    """Moves in each WINDOW seconds from the change, the period's
    windows then one for any later."""
    curve = [0] * (period // WINDOW + 1)
    for at in arrived.values():
        curve[min(int((at - changed_at) // WINDOW), len(curve) - 1)] += 1
    return curve


# What the conductors log when their membership lapses or returns.
_MEMBERSHIP_WORDS = (
    'Standing down',
    'back in the affinity group',
    'joined group',
    # A worker restarted on SIGHUP, and its successor.
    'is being replaced',
    'taking the entry over',
)


_API_WORDS = (
    'as read by this process',
    'Placement under capacity',
    'New profile published',
    'Cannot read group',
)


class RebalanceTestCase(base.TestCase):
    TIMED = True

    def membership_events(self):
        """The conductors' lines about standing down or rejoining, for
        a failure's message: a node may move back because its conductor
        lost the group under load, not because of the rollout."""
        found = []
        for index in (1, 2):
            for line in self.dep.log('conductor%d' % index).splitlines():
                if any(word in line for word in _MEMBERSHIP_WORDS):
                    found.append(line[:200])
        # And what the API placed by: its view's changes, its
        # computations under capacity.
        for line in self.dep.log('api').splitlines():
            if any(word in line for word in _API_WORDS):
                found.append(line[:300])
        return found or 'none'

    def wait_every_process_holds(self, nodes):
        """Until every process's node tag cache holds ``nodes``: the
        reader has published them, and one refresh more has passed.

        Under capacity, a process that computes the placement while its
        cache lacks some nodes (enrolled a moment before) places them as
        newcomers; once they arrive, the next computation may choose
        other nodes to move (integration/ring/capacity_state.py). That
        is the documented lag of a new node, not the rollout under test:
        the nodes here exist before the change, in every process."""
        board = tag_board.TagBoard(
            self.dep.redis.url, 'e2e', 'test-rebalance', 5
        )
        self.addCleanup(board.stop)

        def published():
            index = board.read_index()
            if index is None:
                return False
            held = set()
            for number in range(len(index.digests)):
                bucket = board.read_bucket(index.publisher, number)
                held.update(bucket or ())
            return set(nodes) <= held

        self.dep.wait(published, 60, 'the nodes published', interval=0.5)
        # [affinity]node_tags_interval (2 s), twice: every follower reads
        # the publication within one, and a read under way may predate it.
        time.sleep(2 * 2.0)

    def on(self, nodes, conductor):
        placed = self.placements()
        return {placed.get(n) for n in nodes} == {conductor}

    def syncs(self, index, since):
        """node uuid -> the times (seconds since the epoch) conductor
        ``index`` began a power sync of it, from ``since``."""
        found = {}
        text = self.dep.log('conductor%d' % index)
        for stamp, node in _SYNC.findall(text):
            # The logs' local time, as this process's.
            at = datetime.datetime.strptime(
                stamp, '%Y-%m-%d %H:%M:%S.%f'
            ).timestamp()
            if at >= since:
                found.setdefault(node, []).append(at)
        return found

    def test_a_tag_change_moves_nodes_in_steps(self):
        dep = self.deploy(
            {
                1: {},
                2: {'soft_affinity_tags': 'rack10'},
                3: {'soft_affinity_tags': 'rack30'},
            },
            extra_conf='[affinity]\nmember_timeout = %d\n'
            % RELOAD_MEMBER_TIMEOUT,
        )
        first, second, third = self.name(1), self.name(2), self.name(3)
        moving = {
            n.uuid
            for n in load.create_nodes(
                dep.api_port, MOVING, prefix='move', tags=lambda i: 'rack10'
            )
        }
        staying = {
            n.uuid
            for n in load.create_nodes(
                dep.api_port,
                BYSTANDERS,
                prefix='stay',
                tags=lambda i: 'rack30',
            )
        }
        dep.wait(
            lambda: self.on(moving, second) and self.on(staying, third),
            120,
            'every node on its first conductor',
        )
        # And every conductor agrees: the handover below is measured from
        # conductor1's first sync of a node, which must be a move, not
        # a node whose tags conductor1 has not read yet.
        settled_in = self.wait_power_sync(
            {
                **{node: second for node in moving},
                **{node: third for node in staying},
            }
        )

        # conductor1 comes to prefer rack10, paced over PERIOD seconds.
        dep.reload(
            1, soft_affinity_tags='rack10:5', rebalance_period=str(PERIOD)
        )
        changed_at = self.wait_change(first)
        # Nodes created once the change has begun follow it at once: no
        # conductor held them before it, so nothing is saved by waiting.
        # Created beside the sampling, which starts at once: created
        # before it, they delayed it, and in the full matrix of
        # 2026-12-07 no move was seen in the first window and 104 in the
        # second (bound 75), as a first sample 10 s late gives.
        pool = futures.ThreadPoolExecutor(max_workers=1)
        self.addCleanup(pool.shutdown)
        creating = pool.submit(
            load.create_nodes,
            dep.api_port,
            LATE,
            prefix='late',
            tags=lambda i: 'rack10',
        )
        late: set[str] = set()
        # The API places by the change from its first refresh after it:
        # the command line saw the change published, the API may see it
        # up to a refresh later (two on a loaded machine: in CI the
        # case once failed on Ironic 29 24 s in, about the first sample,
        # when this bound was none), and meanwhile places a late node as
        # before the change (conductor2), then on conductor1 for good.
        # Paced, 9 in 10 of them would wait longer than that.
        late_settled = changed_at + 2 * REFRESH

        arrived = {}
        late_arrived = {}
        killed_at = None
        bystanders_left = {}
        first_sample = time.time()
        while time.time() < changed_at + PERIOD + REFRESH + 5:
            now = time.time()
            placed = self.placements()
            if not late and creating.done():
                late = {n.uuid for n in creating.result()}
            for node in late:
                if placed.get(node) == first:
                    late_arrived.setdefault(node, now)
                elif node in late_arrived or now >= late_settled:
                    self.fail(
                        'late node %s on %s, %.1f s after the change; '
                        'membership meanwhile: %s'
                        % (
                            node,
                            placed.get(node),
                            now - changed_at,
                            self.membership_events(),
                        )
                    )
            self.count_arrivals(moving, placed, first, second, arrived, now)
            if killed_at is None and now >= changed_at + PERIOD / 2:
                # Halfway: conductor3 crashes. Its nodes are not paced.
                dep.crash(3)
                killed_at = time.time()
            if killed_at is not None:
                for node in staying:
                    if placed.get(node) != third:
                        bystanders_left.setdefault(node, now)
            time.sleep(SAMPLE)

        self.assertEqual(LATE, len(late), 'late nodes created in time')
        # Every move happened, within the period and one refresh.
        self.assertEqual(moving, set(arrived))
        last = max(arrived.values())
        self.assertLess(last, changed_at + PERIOD + REFRESH + SAMPLE)
        curve = moves_per_window(arrived, changed_at, PERIOD)
        for count in curve:
            self.assertLessEqual(count, EVEN_SHARE + MARGIN, curve)
        # Not all at once either: some moved in each window of the period.
        self.assertTrue(all(curve[: PERIOD // WINDOW]), curve)

        # The killed conductor's nodes moved at once: together, as soon as
        # the conductor was out of Ironic's list.
        self.assertEqual(staying, set(bystanders_left))
        spread = max(bystanders_left.values()) - min(bystanders_left.values())
        self.assertLessEqual(spread, 2 * SAMPLE, bystanders_left)
        detected = min(bystanders_left.values()) - killed_at

        # Handover: once conductor1 has taken a node, conductor2's power
        # syncs of it stop (a sync it began before it saw the move may
        # still run: Ironic's lock keeps the two apart). Not before the
        # change: a node just created goes to any conductor until its
        # tags are read.
        taken = self.syncs(1, changed_at)
        given = self.syncs(2, changed_at)
        overlaps = []
        for node in moving:
            if node in taken and node in given:
                overlaps.append(max(given[node]) - min(taken[node]))
        self.assertGreater(len(overlaps), MOVING // 2)
        worst_overlap = max(overlaps)
        # Ironic decides which nodes are its own once per power-sync
        # pass, then works through them without asking again (its
        # _sync_power_state_nodes_task says so), and logs each lock it
        # tries as it comes to it: under eventlet, on two busy cores, a
        # pass over 300 nodes has taken over 30 s. So conductor2 may log
        # a sync of a node up to one pass after it saw the node move.
        # A pass's length: the longest time between two syncs of one of
        # the moving nodes while conductor2 still had it (the others
        # change hands when conductor3 is killed).
        longest_pass = max(
            (
                later - earlier
                for times in (given.get(node, []) for node in moving)
                for earlier, later in zip(times, times[1:], strict=False)
            ),
            default=0.0,
        )
        # So within a refresh (conductor2 sees the move), a sync
        # interval (its next pass starts) and one pass. Without
        # wait_power_sync above, up to 56 s was seen here on Ironic 29:
        # the change came right after the nodes were created, and
        # conductor1 was still syncing nodes whose tags it had not read
        # (placed by hashing, as new nodes are), which counted as its
        # first syncs.
        self.assertLess(worst_overlap, REFRESH + SYNC_INTERVAL + longest_pass)
        placed = self.placements()
        self.assert_power_sync({n: placed[n] for n in moving | late})
        # Nor did conductor2 sync a late node past the moment it must
        # have seen the change, by the bound above: a late node goes to
        # conductor1 at once, not at its moment in the period.
        late_given = {n: given[n] for n in late if n in given}
        late_synced_until = 0.0
        if late_given:
            late_synced_until = (
                max(max(times) for times in late_given.values()) - changed_at
            )
            self.assertLess(
                late_synced_until,
                REFRESH + SYNC_INTERVAL + longest_pass,
                late_given,
            )

        base.record(
            test='rebalance',
            nodes=MOVING,
            period=PERIOD,
            moves_per_10s=curve,
            last_move_after=round(last - changed_at, 1),
            killed_nodes_moved_after=round(detected, 1),
            killed_nodes_spread=round(spread, 1),
            worst_sync_overlap=round(worst_overlap, 1),
            longest_power_sync_pass=round(longest_pass, 1),
            conductors_agreed_after=round(settled_in, 1),
            late_nodes_moved_after=round(
                max(late_arrived.values()) - changed_at, 1
            ),
            late_synced_by_conductor2=len(late_given),
            first_sample_after=round(first_sample - changed_at, 1),
            late_synced_until=round(late_synced_until, 1),
        )

    def test_under_capacity_moves_are_paced_and_capacity_holds(self):
        dep = self.deploy({1: {}, 2: {'soft_affinity_tags': 'rack10'}})
        first, second = self.name(1), self.name(2)
        moving = {
            n.uuid
            for n in load.create_nodes(
                dep.api_port, MOVING, prefix='cap', tags=lambda i: 'rack10'
            )
        }
        dep.wait(lambda: self.on(moving, second), 120, 'every node on c2')
        self.wait_every_process_holds(moving)

        # conductor1 comes to prefer rack10 but holds CAPACITY nodes:
        # that many move, over CAPACITY_PERIOD seconds.
        dep.reload(
            1,
            soft_affinity_tags='rack10:5',
            max_nodes=str(CAPACITY),
            rebalance_period=str(CAPACITY_PERIOD),
        )
        changed_at = self.wait_change(first)

        arrived = {}
        most = 0
        # plan --live runs beside the sampling: run in line, its seconds
        # under load left a window unsampled and its moves counted in the
        # next one (full matrix, 2026-12-07: 9 then 76 moves, share 50).
        plan_run = None
        longest_gap = 0.0
        sampled_at = changed_at
        with futures.ThreadPoolExecutor(max_workers=1) as pool:
            while time.time() < changed_at + CAPACITY_PERIOD + REFRESH + 5:
                now = time.time()
                placed = self.placements()
                longest_gap = max(longest_gap, now - sampled_at)
                sampled_at = now
                held = self.count_arrivals(
                    moving, placed, first, second, arrived, now
                )
                most = max(most, held)
                if plan_run is None and now >= changed_at + 10:
                    # What plan --live says mid-rollout: the moves to come.
                    plan_run = pool.submit(
                        dep.cli, 'plan', '--live', '-f', 'json'
                    )
                time.sleep(SAMPLE)
            result = plan_run.result()
        self.assertEqual(0, result.returncode, result.stderr)
        plan = json.loads(result.stdout)
        pending_seen = plan['rollout']['nodes_to_move']
        waiting = [p for p in plan['placements'] if p.get('pending')]
        self.assertEqual(pending_seen, len(waiting))
        for row in waiting:
            self.assertEqual(second, row['conductor'])
            self.assertEqual(first, row['pending'][0]['to'])

        self.assertEqual(CAPACITY, len(arrived))
        self.assertLessEqual(most, CAPACITY)
        self.assertGreater(pending_seen, 0)
        self.assertLess(pending_seen, CAPACITY)
        last = max(arrived.values())
        self.assertLess(last, changed_at + CAPACITY_PERIOD + REFRESH + SAMPLE)
        windows = CAPACITY_PERIOD // WINDOW
        curve = moves_per_window(arrived, changed_at, CAPACITY_PERIOD)
        for count in curve:
            self.assertLessEqual(
                count,
                CAPACITY * WINDOW / CAPACITY_PERIOD + MARGIN,
                (curve, 'longest gap between samples %.1f s' % longest_gap),
            )
        self.assertTrue(all(curve[:windows]), curve)
        placed = self.placements()
        self.assert_power_sync({n: placed[n] for n in moving})
        base.record(
            test='rebalance_under_capacity',
            nodes=MOVING,
            max_nodes=CAPACITY,
            period=CAPACITY_PERIOD,
            moves_per_10s=curve,
            most_on_the_full_conductor=most,
            pending_after_10s=pending_seen,
            last_move_after=round(last - changed_at, 1),
            longest_sample_gap=round(longest_gap, 1),
        )

    def count_arrivals(self, moving, placed, first, second, arrived, now):
        """How many moving nodes the API shows on first, noting when each
        came; a node never goes back to second."""
        held = 0
        for node in moving:
            where = placed.get(node)
            if where == first:
                held += 1
                arrived.setdefault(node, now)
            elif node in arrived:
                self.fail(
                    '%s went back to %s; membership meanwhile: %s'
                    % (node, where, self.membership_events())
                )
            else:
                self.assertEqual(second, where, node)
        return held

    def wait_change(self, name):
        """When the conductor's change was published (its own clock)."""
        seen = {}

        def published():
            result = self.dep.cli('members', '-f', 'json')
            if result.returncode != 0:
                return False
            for member in json.loads(result.stdout)['members']:
                if member['name'] == name:
                    seen['member'] = member
                    if member['changes']:
                        seen['at'] = member['changes'][-1]['at']
                        return member['changes'][-1]['kind'] == 'changed'
            return False

        try:
            self.dep.wait(
                published,
                60,
                'a change of %s published' % name,
                interval=deployment.CLI_POLL,
            )
        except AssertionError as exc:
            # What was published instead, and the group's history.
            raise AssertionError(
                '%s; last seen: %s; membership: %s'
                % (exc, seen.get('member'), self.membership_events())
            ) from exc
        return seen['at']
