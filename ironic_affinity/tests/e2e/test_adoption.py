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

"""A running deployment switched to affinity placement and back, one
service at a time (doc/source/admin/ironic.rst, "Switching a running
deployment, and rolling back").

One API and three conductors start with Ironic's own commands, 300
nodes, a third of them ACTIVE. The API, then each conductor, moves to
the plugin's commands with ``hash_ring_manager = stock``; then each
conductor turns to ``affinity``; then one turns back to ``stock``.

Evidence is Ironic's: the nodes' ``conductor`` field in the REST API,
sampled every second, against Ironic's own ring (tooz's hash ring over
the conductors Ironic lists, as Ironic builds it); the conductors' power
syncs, from their logs; and requests for the nodes made throughout.
"""

import collections
import itertools
import json
import os
import queue
import threading
import time

import sqlalchemy as sa
from tooz import hashring

from ironic_affinity.integration.data import ironic_db
from ironic_affinity.tests.e2e import base
from ironic_affinity.tests.e2e import deployment
from ironic_affinity.tests.e2e import load

NODES = 300
ACTIVE = 100
PERIOD = 30
WINDOW = 10
# Once a second: the moves are counted in windows of WINDOW seconds, and
# the processes read the group once a second; twice a second only
# doubled the API's listings of 300 nodes. (It did not make the case
# cheaper: about a CPU second a second either way, 391 CPU s in 450 s
# on Ironic 29 in .ci/run on 88e34ff.)
SAMPLE = 1.0
# Ironic's [DEFAULT]hash_partition_exponent, default.
PARTITIONS = 2**5
# [affinity]member_timeout: a switch starts this long after it is
# recorded.
LEAD = 5.0
# [conductor]sync_power_state_interval here (the deployments' 2 s kept
# half a core busy syncing 300 nodes, 5 s a third of one).
SYNC = 10
# How much later than its true start a power sync pass may be taken to
# begin (Ironic 29 logs no runtime: its first sync stands for its
# listing: on Ironic 39, at most 0.31 s after its start with three of
# these cases at once).
LISTED_LATE = 1.0
# [affinity]watch_interval (1 s), Ironic's hash_ring_reset_interval
# here (2 s): how late a process may see what has changed.
REFRESH = 3.0
# A fair draw of the ~200 moving nodes over 3 windows has a standard
# deviation of about 6.7 a window; processes read the group once a
# second, which shifts a second of moves (7) from one window to the next.
MARGIN = 25
TAKEOVER = 3
# Nodes created once the switch to affinity has begun.
LATE = 6
ACTORS = 4
# Seconds the power actions still asked for may take once the rollback
# is over: as long as one is answered every STALLED (a request times out
# after 30 s), SETTLED in all.
STALLED = 60
SETTLED = 600
# Power-state reads per second, round the nodes: a steady stream of
# requests for every node through the switch, without filling the API.
READS = 10
# Seconds within which the conductors take over the ACTIVE nodes that
# moved, once every node is placed: a third of 300 nodes, most of them
# taken over during the switch already, 8 per conductor every TAKEOVER.
TAKEN_WITHIN = 60
# The service launcher's bound on a stop: its first half is the plugin's
# to leave the group and drain (conductor_lifecycle.stop_budget). At 5 s, a
# conductor that took 1 s to leave and 4 s to drain was killed before
# Ironic deregistered it (in an earlier .ci/run, on every release).
GRACEFUL = 20
EXTRA_CONF = """
[DEFAULT]
graceful_shutdown_timeout = %d
[conductor]
sync_local_state_interval = %d
sync_power_state_interval = %d
graceful_shutdown_timeout = 5
[affinity]
adoption_period = %d
""" % (GRACEFUL, TAKEOVER, SYNC, PERIOD)


def ahead_of_pace(curve):
    """How many more nodes had moved, by the end of a window, than a
    steady pace over PERIOD moves in as long, at most."""
    share = sum(curve) * WINDOW / PERIOD
    return round(
        max(
            sum(curve[: end + 1]) - (end + 1) * share
            for end in range(len(curve))
        ),
        1,
    )


def rack(index):
    return 'rack%d' % (index % 3 + 1)


class Sampler:
    """The API's conductor of every node, and Ironic's active
    conductors, every SAMPLE seconds, from a thread of its own."""

    def __init__(self, dep):
        self.dep = dep
        self.samples = []  # (time, {uuid: conductor}, frozenset(hosts))
        self.api_errors = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._database = ironic_db.IronicDatabase(dep.database_url)

    def start(self):
        self._thread.start()

    def stop(self):
        self._stop.set()
        self._thread.join(30)
        self._database.dispose()

    def _run(self):
        # From start to start: a sample's own time (the API lists 300
        # nodes in about 0.3 s) does not slow the rate.
        due = time.monotonic()
        while True:
            due = max(due + SAMPLE, time.monotonic())
            if self._stop.wait(due - time.monotonic()):
                return
            try:
                active = self._database.active_conductors(
                    self.dep.timers['heartbeat_timeout']
                )
            except sa.exc.SQLAlchemyError:
                continue
            hosts = frozenset(active.get(':fake-hardware', ()))
            try:
                # Not ?fields=conductor: Ironic refuses to select a field
                # that is not a column ("type object 'Node' has no
                # attribute 'conductor'").
                status, body = self.dep._request(
                    'GET', '/v1/nodes/detail?limit=1000'
                )
            except OSError:
                continue  # the API restarting: see Requests
            if status != 200:
                self.api_errors.append((time.time(), status, body))
                continue
            self.samples.append(
                (
                    time.time(),
                    {n['uuid']: n['conductor'] for n in body['nodes']},
                    hosts,
                )
            )


class Requests:
    """Power-state reads round the nodes, from a thread of its own, and
    during each switch one power action per node, from another (so that
    a loaded machine's slow reads do not hold the actions past the
    switch); failures by node."""

    def __init__(self, dep, nodes):
        self.dep = dep
        self.nodes = nodes
        self.failures = []
        self.done = collections.Counter()
        self.paused = threading.Event()
        self._acts = queue.Queue()
        self._stop = threading.Event()
        # Power actions from ACTORS threads: on a loaded machine one
        # takes up to a second, and 300 must fit in a switch.
        self._threads = [threading.Thread(target=self._read, daemon=True)] + [
            threading.Thread(target=self._act, daemon=True)
            for _ in range(ACTORS)
        ]

    def start(self):
        for thread in self._threads:
            thread.start()

    def stop(self):
        """Once every power action asked for is made: as long as one is
        answered every STALLED seconds (a loaded machine's API answered
        586 of 600 within a fixed two minutes, in .ci/run --full on
        cbee586), and SETTLED seconds at most, so that a cleanup after
        a failure does not hang."""
        deadline = time.monotonic() + SETTLED
        left, since = self._acts.unfinished_tasks, time.monotonic()
        while left and time.monotonic() < deadline:
            time.sleep(0.2)
            if self._acts.unfinished_tasks < left:
                left, since = self._acts.unfinished_tasks, time.monotonic()
            elif time.monotonic() - since > STALLED:
                break
        self._stop.set()
        for thread in self._threads:
            thread.join(60)

    def act(self):
        """One power action per node, once each, from now."""
        for node in self.nodes:
            self._acts.put(node)

    def _read(self):
        while not self._stop.is_set():
            for node in self.nodes:
                if self._stop.wait(1.0 / READS):
                    return
                self._call('GET', '/v1/nodes/%s/states' % node, None, node)

    def _act(self):
        while not self._stop.is_set():
            try:
                node = self._acts.get(timeout=0.2)
            except queue.Empty:
                continue
            try:
                self._call(
                    'PUT',
                    '/v1/nodes/%s/states/power' % node,
                    {'target': 'power on'},
                    node,
                )
            finally:
                self._acts.task_done()

    def _call(self, method, path, body, node):
        while self.paused.is_set():
            time.sleep(0.2)
        # A failure keeps when the request was sent and answered: a PUT
        # sent while every node was on Ironic's ring reached a conductor
        # as it drained for its restart, and was answered 4.5 s later,
        # after the window where that error is expected had closed
        # (Ironic 29, in an earlier CI run), as dated by its answer alone.
        sent = time.time()
        try:
            status, answer = self.dep._request(method, path, body)
        except OSError as exc:
            if not self.paused.is_set():
                self.failures.append(
                    (sent, time.time(), node, method, repr(exc))
                )
            return
        self.done[method] += 1
        if status >= 400:
            self.failures.append(
                (sent, time.time(), node, method, status, answer)
            )


# In CI on every release, as an ordinary case. It was out of CI for a
# while, after failing on two releases in an earlier
# .ci/run, both explained since: on Ironic 35 the API middleware placed
# a node it had just created by hashing (fixed since); on Ironic 29 a power
# action sent while every node was on Ironic's ring reached a conductor
# draining for its restart, and was dated by its answer, after the
# window where that error is expected (a failure now keeps both times).
# Four at once, one per release: the drain of a conductor leaving the
# group (conductor_lifecycle.drain_seconds) was found too short for a request
# already on its way on Ironic 29, and lengthened.
class AdoptionTestCase(base.TestCase):
    # Two of these at once at most: three (one per stable release, at
    # the start of each suite) beside the README's suite failed on all
    # three in .ci/run --full on cbee586 (takeovers still pending after
    # TAKEN_WITHIN on Ironic 29; on 32 and 35, power actions unanswered
    # after two minutes), where they had passed on ba0336f.
    UNITS = 2
    # Not timed (machine_share.py): three of these at once, one per
    # release, passed (moves within the pace, no node held by two). In
    # .ci/run on e943304, timed, it took turns with the other timed
    # cases and made the stable releases' suites 380 to 1,150 s longer.
    # Its two failures run as an ordinary case were the test's own:
    # moves the loaded API showed late, counted window by window (the
    # pace is now checked cumulatively), and a node's syncs by one
    # conductor 20 s apart, around another's hold, merged into one
    # "run" (holds are now read from each power sync pass).

    def stop(self, name):
        """Stop a process as an operator's service manager does: SIGTERM,
        and wait for it (Ironic deregisters a conductor on the way)."""
        process = self.dep.processes[name]
        process.terminate()
        try:
            process.wait(60)
        except Exception:
            process.kill()
            process.wait(10)

    def restart_conductor(self, index, program, manager):
        stopped = time.time()
        self.stop('conductor%d' % index)
        self.dep.start_conductor(
            index,
            program=program,
            soft_affinity_tags=rack(index - 1),
            hash_ring_manager=manager,
        )
        self.dep.wait_conductors(index)
        self.restarts.append((stopped, time.time() + REFRESH))

    def restart_api(self, requests):
        requests.paused.set()
        self.stop('api')
        self.dep._start(
            'api',
            deployment.API_MODES['launcher']
            + ['--config-file', self.dep.conf],
        )
        self.dep.wait(
            lambda: self.dep._get('/v1') is not None, 60, 'API up again'
        )
        requests.paused.clear()

    def stock_answer(self, node, hosts):
        return (
            hashring.HashRing(hosts, partitions=PARTITIONS)
            .get_nodes(node.encode('utf-8'))
            .pop()
        )

    def test_switch_one_service_at_a_time_and_back(self):
        dep = self.useFixture(
            deployment.Deployment(
                'stock',
                api='plain',
                extra_conf=EXTRA_CONF,
                plain_when_stock=False,
            )
        )
        self.dep = dep
        self.restarts = []
        for index in (1, 2, 3):
            dep.start_conductor(
                index,
                program='ironic-conductor',
                soft_affinity_tags=rack(index - 1),
                hash_ring_manager='stock',
            )
        dep.wait_conductors(1, 2, 3)
        created = load.create_nodes(dep.api_port, NODES, tags=rack)
        nodes = [n.uuid for n in created]
        tag_of = {n.uuid: n.tags for n in created}
        self.make_active(nodes[:ACTIVE])

        sampler = Sampler(dep)
        requests = Requests(dep, nodes)
        sampler.start()
        self.addCleanup(sampler.stop)
        requests.start()
        self.addCleanup(requests.stop)
        offsets = dep.log_offsets()
        started = time.time()

        # 1. Every service to the plugin's commands, voting stock.
        self.restart_api(requests)
        for index in (1, 2, 3):
            self.restart_conductor(index, 'ironic-affinity-conductor', 'stock')
        # 2. Each conductor turns to affinity: the last one's stop makes
        # the switch due.
        for index in (1, 2):
            self.restart_conductor(
                index, 'ironic-affinity-conductor', 'affinity'
            )
        due = time.time()
        requests.act()
        self.restart_conductor(3, 'ironic-affinity-conductor', 'affinity')
        # Nodes created once the switch has begun: on affinity at once.
        late, began = self.create_once_switching()
        tag_of.update((n.uuid, n.tags) for n in late)
        names = {i: dep.conductor_name(i) for i in (1, 2, 3)}
        on_affinity = {n: names[int(tag_of[n][-1])] for n in tag_of}
        self.wait_for_placement(sampler, on_affinity, PERIOD + LEAD + 30)
        switched = time.time()
        takeovers = {'to_affinity': self.wait_taken_over(sampler)}
        # 3. One conductor turns back: the rollback is due.
        back = time.time()
        requests.act()
        self.restart_conductor(1, 'ironic-affinity-conductor', 'stock')
        hosts = frozenset(names.values())
        on_stock = {n: self.stock_answer(n, hosts) for n in tag_of}
        self.wait_for_placement(sampler, on_stock, PERIOD + LEAD + 30)
        ended = time.time()
        takeovers['back_to_stock'] = self.wait_taken_over(sampler)
        requests.stop()
        sampler.stop()

        samples = sampler.samples
        keep = os.environ.get('IRONIC_AFFINITY_E2E_KEEP_LOGS')
        if keep:
            os.makedirs(keep, exist_ok=True)
            with open(os.path.join(keep, 'adoption-samples.json'), 'w') as f:
                json.dump(
                    {
                        'samples': samples,
                        'restarts': self.restarts,
                        'due': due,
                        'began': began,
                        'back': back,
                        'tags': tag_of,
                        'names': names,
                    },
                    f,
                    default=sorted,
                )
        # Until the switch could begin, the API answers as Ironic's ring.
        before = [s for s in samples if s[0] < due + LEAD - 1]
        self.assertGreater(len(before), 20)
        self.assert_ironics_ring(before, on_affinity, names.values())
        # The late nodes were on affinity from their first sample until
        # the rollback.
        originals = set(nodes)
        late_seen = {
            node: placed[node]
            for at, placed, _hosts in samples
            if at < back
            for node in placed
            if node not in originals
        }
        self.assertEqual(
            {n.uuid: on_affinity[n.uuid] for n in late}, late_seen
        )
        wrong = [
            (round(at, 1), node, placed[node])
            for at, placed, _hosts in samples
            if at < back
            for node in late_seen
            if node in placed and placed[node] != on_affinity[node]
        ]
        self.assertEqual([], wrong[:5])
        # Moves within the pace, there and back: the late nodes only
        # back (they arrived on affinity as they were created).
        figures = {
            'to_affinity': self.moves(
                samples,
                due,
                switched,
                {n: on_affinity[n] for n in nodes},
            ),
            'back_to_stock': self.moves(samples, back, ended, on_stock),
        }
        moving = {key: sum(curve) for key, curve in figures.items()}
        # Never ahead of the pace: by the end of each window, no more
        # nodes have moved than the pace allows since the switch became
        # due, plus MARGIN. Not each window alone: moves the API shows
        # late (a loaded API's view read a few seconds late; in CI on
        # 6242d21, Ironic 35 showed 38 then 113 in two windows against a
        # share of 84) catch up without running ahead.
        ahead = {key: ahead_of_pace(curve) for key, curve in figures.items()}
        for key in figures:
            self.assertLessEqual(ahead[key], MARGIN, (ahead, figures))
        self.assertGreater(moving['to_affinity'], NODES / 2, figures)
        # Each node held by one conductor at a time, but around a
        # conductor's restart: Ironic's own ring moves a node to a
        # conductor that registers before the others' rings, cached for
        # hash_ring_reset_interval, do; and a node that moves at its
        # moment may move again as its conductor stops.
        passes = dep.power_sync_passes(offsets)
        interleaved = self.held_by_two(passes)
        doubles = {
            node: spans
            for node, spans in interleaved.items()
            if not self.at_restarts(spans)
        }
        # Requests: none failed, but for power actions routed by Ironic's
        # own ring to a conductor stopping meanwhile (Ironic answers them
        # 500 "Can not schedule new futures after being shutdown" until
        # every ring has read that the conductor deregistered, with or
        # without the plugin). Ironic's ring places every node until the
        # switch begins: LEAD after the last conductor to turn has
        # deregistered, which Ironic does at the end of its stop (on
        # Ironic 39 in this case, failures sent 5.2 s after that
        # conductor's stop began, the switch beginning 11.6 s after it).
        failed = [
            f
            for f in requests.failures
            if not (
                f[0] < began
                and any(a <= f[1] and f[0] <= b for a, b in self.restarts)
            )
        ]
        base.record(
            test='adoption',
            moves_per_window=figures,
            most_ahead_of_pace=ahead,
            samples=len(samples),
            requests=dict(requests.done),
            failed_requests=len(failed),
            failed_at_ironic_restarts=len(requests.failures) - len(failed),
            nodes_held_by_two_at_once=len(doubles),
            nodes_held_by_two_at_restarts=len(interleaved) - len(doubles),
            longest_power_sync_pass=round(
                max(
                    end - start for p in passes.values() for start, end, _ in p
                ),
                1,
            ),
            takeovers_pending=takeovers,
            late_nodes_on_affinity_at_once=len(late_seen),
            seconds=round(ended - started, 1),
        )
        self.assertEqual([], failed[:10])
        # One power action per node in each switch, answered or not
        # (a refused connection is the one failure not counted as done).
        self.assertEqual(
            2 * NODES,
            requests.done['PUT']
            + len(
                [f for f in requests.failures if f[3] == 'PUT' and len(f) == 5]
            ),
        )
        self.assertEqual([], sampler.api_errors[:5])
        self.assertEqual({}, dict(list(doubles.items())[:10]))

    def create_once_switching(self):
        """LATE nodes, created a second into the switch to affinity (as
        the API reports it), tagged as the others; and when the switch
        began. Not before every process can have read the last
        conductor back: created before, a node waits elsewhere until
        the conductor its tags prefer has joined (on Ironic 29, a node
        created 0.4 s before the API read the restarted conductor 3)."""
        since = []

        def begun():
            body = self.dep._get('/v1/affinity')
            found = (body or {}).get('placement') or {}
            if found.get('to') != 'affinity' or found.get('since') is None:
                return False
            since[:] = [found['since']]
            return time.time() > max(found['since'] + 1, self.restarts[-1][1])

        self.dep.wait(begun, 60, 'the switch to affinity begun', 0.5)
        late = load.create_nodes(
            self.dep.api_port, LATE, prefix='late', tags=rack
        )
        return late, since[0]

    def make_active(self, nodes):
        """ACTIVE straight in the database (a deploy of 100 fake nodes
        would take minutes), then wait until Ironic's takeover has given
        each one its conductor_affinity."""
        engine = sa.create_engine(self.dep.database_url)
        self.addCleanup(engine.dispose)
        with engine.begin() as connection:
            connection.execute(
                sa.text(
                    "UPDATE nodes SET provision_state = 'active', "
                    "power_state = 'power on' WHERE uuid IN :uuids"
                ).bindparams(sa.bindparam('uuids', expanding=True)),
                {'uuids': list(nodes)},
            )

        def taken():
            with engine.connect() as connection:
                return not connection.execute(
                    sa.text(
                        'SELECT count(*) FROM nodes WHERE uuid IN :uuids '
                        'AND conductor_affinity IS NULL'
                    ).bindparams(sa.bindparam('uuids', expanding=True)),
                    {'uuids': list(nodes)},
                ).scalar()

        self.dep.wait(taken, 60, 'active nodes taken over', interval=1.0)

    def wait_taken_over(self, sampler):
        """Once every node is placed: until ``GET /v1/affinity`` counts
        no takeover pending, then the same from the database, counted
        here: every ACTIVE node last taken over by the conductor the API
        names for it. Returns the counts the API gave, first and last."""
        seen = []

        def none_pending():
            body = self.dep._get('/v1/affinity')
            if body is None:
                return False
            seen.append(body['placement'].get('takeovers_pending'))
            return seen[-1] == 0

        self.dep.wait(
            none_pending,
            TAKEN_WITHIN,
            lambda: 'no takeover pending (the API counted %s)' % seen[-10:],
            interval=1.0,
        )
        engine = sa.create_engine(self.dep.database_url)
        self.addCleanup(engine.dispose)
        with engine.connect() as connection:
            taken = dict(
                connection.execute(
                    sa.text(
                        'SELECT nodes.uuid, conductors.hostname FROM nodes '
                        'LEFT JOIN conductors ON '
                        'conductors.id = nodes.conductor_affinity '
                        "WHERE nodes.provision_state = 'active'"
                    )
                ).all()
            )
        placed = sampler.samples[-1][1]
        self.assertEqual(ACTIVE, len(taken))
        self.assertEqual(
            {},
            {
                node: (host, placed[node])
                for node, host in taken.items()
                if host != placed[node]
            },
        )
        return [seen[0], seen[-1]]

    def wait_for_placement(self, sampler, wanted, timeout):
        def placed():
            if not sampler.samples:
                return False
            return sampler.samples[-1][1] == wanted

        self.dep.wait(placed, timeout, 'every node placed', interval=1.0)

    def assert_ironics_ring(self, samples, on_affinity, names):
        """Each sample gives every node the conductor Ironic's ring gives
        it over one set of conductors, or two (a request that spans the
        API's rebuild of its rings).

        Which set is not checked against the conductors Ironic lists:
        Ironic's rings are cached for hash_ring_reset_interval, so a
        conductor registered for a moment (one starting as another
        stops) may be in the API's ring for two seconds and in no read
        of ours. Affinity placement matches no such pair: it ignores
        the ring."""
        # Two conductors at least: one restarts at a time here, and a
        # ring of one would match any answer that names it.
        subsets = [
            frozenset(c)
            for size in range(2, len(names) + 1)
            for c in itertools.combinations(sorted(names), size)
        ]
        nodes = {node for _at, placed, _hosts in samples for node in placed}
        rings = {
            subset: {node: self.stock_answer(node, subset) for node in nodes}
            for subset in subsets
        }
        wrong = []
        for at, placed, _hosts in samples:
            answers = {
                subset: {
                    node
                    for node, conductor in placed.items()
                    if conductor == rings[subset][node]
                }
                for subset in subsets
            }
            best = max(
                (
                    (answers[a] | answers[b], a, b)
                    for a in subsets
                    for b in subsets
                ),
                key=lambda found: len(found[0]),
            )
            if len(best[0]) < len(placed):
                wrong.append(
                    {
                        'at': round(at, 1),
                        'nodes': len(placed),
                        'best rings': [sorted(best[1]), sorted(best[2])],
                        'matching them': len(best[0]),
                        'matching affinity': sum(
                            c == on_affinity[n] for n, c in placed.items()
                        ),
                    }
                )
        self.assertEqual([], wrong[:3], '%d samples in all' % len(wrong))

    def moves(self, samples, since, until, wanted):
        """Arrivals at the wanted conductor per WINDOW seconds from
        ``since``: a node counts once, at the sample it arrived in."""
        arrived = {}
        previous = None
        for at, placed, _hosts in samples:
            if since <= at <= until and previous is not None:
                for node, conductor in placed.items():
                    if (
                        node in wanted
                        and conductor == wanted[node]
                        and previous.get(node) != conductor
                    ):
                        arrived[node] = at
            previous = placed
        curve = [0] * (int((until - since) // WINDOW) + 1)
        for at in arrived.values():
            curve[int((at - since) // WINDOW)] += 1
        return curve

    def held_by_two(self, passes):
        """node -> (start, end) of each time two conductors held it at
        once.

        A conductor holds the nodes a power sync pass lists from the
        pass's start (:meth:`deployment.Deployment.power_sync_passes`).
        One that lists a node in two passes in a row held it throughout,
        as far as its logs show; another conductor listing the node
        between the two is the two holding it at once. At a handover
        the old conductor's last pass that lists the node began before
        the node's moment, the new one's first after it. The old one's
        syncs may go on as that pass runs on: for one sync interval when
        a pass takes less, longer on a loaded machine (the longest pass
        is recorded). That one pass is the issue's "one sync interval at
        its handover".
        """
        listed = collections.defaultdict(list)  # node -> [(start, name)]
        for conductor, found in passes.items():
            for began, _end, nodes in found:
                for node in nodes:
                    listed[node].append((began, conductor))
        doubles = collections.defaultdict(list)
        for conductor, found in passes.items():
            for (first, _, before), (second, _, after) in itertools.pairwise(
                found
            ):
                for node in before & after:
                    if any(
                        first + LISTED_LATE < at < second - LISTED_LATE
                        and other != conductor
                        for at, other in listed[node]
                    ):
                        doubles[node].append((first, second))
        return dict(doubles)

    def at_restarts(self, spans):
        """Whether every span overlaps a conductor's restart."""
        return all(
            any(a <= end and start <= b for a, b in self.restarts)
            for start, end in spans
        )
