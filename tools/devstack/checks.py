"""Checks of ironic-affinity against a running DevStack.

Run by tools/devstack/stack-here.sh, as the stack user, with the Python of
DevStack's virtual environment (where openstacksdk, the openstack client
and this project are installed):

    checks.py launcher|ironic-conf

It expects what stack-here.sh's local.conf sets up: Ironic's conductor
(ir-cond) preferring tag rack1, one extra conductor (ir-affinity-cond1)
preferring rack2 and refusing quarantine, fake-hardware nodes, and the
clouds.yaml that DevStack writes. Every check prints PASS or FAIL and a
line of detail; the figures go to one JSON line at the end, "figures:".
The exit status is 1 when any check failed.
"""

import argparse
import json
import subprocess
import sys
import time

from devstack_cloud import IRONIC_CONF
from devstack_cloud import Api
from devstack_cloud import baremetal
from devstack_cloud import failover_bound
from devstack_cloud import hold_seconds
from devstack_cloud import ini
from devstack_cloud import run
from devstack_cloud import systemctl
from devstack_cloud import wait_until

UNITS = '/etc/systemd/system'
EXTRA_CONF = '/etc/ironic/ironic-affinity-cond1.conf'

FAILED = []
FIGURES = {}


def report(ok, name, detail):
    print('%s %s: %s' % ('PASS' if ok else 'FAIL', name, detail), flush=True)
    if not ok:
        FAILED.append(name)
    return ok


def check_mode(mode):
    unit = ini('%s/devstack@ir-cond.service' % UNITS)
    start = unit.get('Service', 'ExecStart', fallback='')
    extra = ini('%s/devstack@ir-affinity-cond1.service' % UNITS)
    extra_start = extra.get('Service', 'ExecStart', fallback='')
    manager = ini(IRONIC_CONF).get(
        'DEFAULT', 'hash_ring_manager', fallback=None
    )
    if mode == 'launcher':
        ok = (
            '/ironic-affinity-conductor ' in start
            and '/ironic-affinity-conductor ' in extra_start
            and manager is None
        )
    else:
        ok = (
            '/ironic-conductor ' in start
            and '/ironic-conductor ' in extra_start
            and manager == 'affinity'
        )
    report(
        ok,
        'enabled via %s' % mode,
        'ir-cond runs %s; ir-affinity-cond1 runs %s; '
        '[DEFAULT]hash_ring_manager=%s'
        % (start.split()[0], extra_start.split()[0], manager),
    )


def check_members(api):
    status, output = baremetal('affinity', 'list', '-f', 'json')
    if not report(
        status == 0, 'openstack baremetal affinity list', output[:300]
    ):
        return None, None
    members = json.loads(output)
    by_tag = {}
    for member in members:
        # One string, "network1:5, rack10" (the soft lists carry weights).
        for item in member['Soft Affinity Tags'].split(','):
            by_tag[item.strip().split(':')[0]] = member['Name']
    names = sorted(m['Name'] for m in members)
    alive = api.alive_conductors()
    report(
        names == alive and set(by_tag) >= {'rack1', 'rack2'},
        'members are the live conductors',
        'members %s, alive in the API %s, preferring %s'
        % (names, alive, by_tag),
    )
    for member in members:
        print(
            '  %s: soft %s, hard anti %s, %s nodes'
            % (
                member['Name'],
                member['Soft Affinity Tags'],
                member['Hard Anti Affinity Tags'],
                member['Nodes'],
            )
        )
    return by_tag.get('rack1'), by_tag.get('rack2')


def tag_nodes(api, main, other):
    """Tag the enrolled nodes; return {uuid: tags} and {uuid: expected}."""
    uuids = sorted(api.placement())
    tags = {}
    for index, uuid in enumerate(uuids):
        if index == len(uuids) - 1:
            tags[uuid] = 'rack2 quarantine'
        elif index < len(uuids) // 2:
            tags[uuid] = 'rack1'
        else:
            tags[uuid] = 'rack2'
    for uuid, value in tags.items():
        status, output = baremetal(
            'node', 'set', '--extra', 'affinity_tags=%s' % value, uuid
        )
        if status:
            report(False, 'tag node %s' % uuid, output)
    # The RFE's rule: the hard lists filter (quarantine keeps a node off
    # the conductor that refuses it), then the soft ones score.
    expected = {
        uuid: other if value == 'rack2' else main
        for uuid, value in tags.items()
    }
    status, output = baremetal(
        'node', 'set', '--extra', 'affinity_tags=not/a-tag', uuids[0]
    )
    report(
        status != 0 and 'HTTP 400' in output,
        'a bad tag is refused at the API',
        output.strip().splitlines()[-1] if output.strip() else '(no output)',
    )
    return tags, expected


def check_placement(api, tags, expected, main, other):
    seconds, _ = wait_until(api, expected, 30)
    placed = api.placement()
    counts = {}
    for conductor in placed.values():
        counts[conductor] = counts.get(conductor, 0) + 1
    FIGURES['nodes_per_conductor'] = counts
    report(
        seconds is not None,
        'tagged nodes go where the rule says',
        '%s; nodes per conductor %s'
        % (
            'placed %.1f s after tagging, and held %.0f s'
            % (seconds, hold_seconds())
            if seconds is not None
            else 'not placed as expected after 30 s: %s' % placed,
            counts,
        ),
    )
    quarantined = [u for u, t in tags.items() if 'quarantine' in t][0]
    status, output = baremetal(
        'node', 'affinity', 'show', quarantined, '-f', 'json'
    )
    shown = json.loads(output) if status == 0 else {}
    refused = [
        v
        for v in shown.get('verdicts') or []
        if v.get('conductor') == other
        and v.get('verdict') == 'excluded'
        and 'quarantine' in v.get('reason', '')
    ]
    report(
        shown.get('conductor') == main and bool(refused),
        'node affinity show explains the hard tag',
        'conductor %s; verdicts %s'
        % (shown.get('conductor'), shown.get('verdicts', output[:300])),
    )

    # Enrolled with its tags: placed at once, nothing to move later.
    status, output = baremetal(
        'node',
        'create',
        '--driver',
        'fake-hardware',
        '--name',
        'affinity-enrolled',
        '--extra',
        'affinity_tags=rack2',
        '-f',
        'json',
    )
    if report(status == 0, 'enroll a node with tags', output[:200]):
        uuid = json.loads(output)['uuid']
        seconds, _ = wait_until(api, {uuid: other}, 30)
        report(
            seconds is not None,
            'a node enrolled with rack2 goes to %s' % other,
            'within %.1f s' % seconds
            if seconds is not None
            else 'on %s' % api.placement().get(uuid),
        )
        baremetal('node', 'delete', uuid)


def check_power(api, tags, other):
    uuid = [u for u, t in tags.items() if t == 'rack2'][0]
    status, output = baremetal(
        'node', 'power', 'off', '--power-timeout', '60', uuid
    )
    state = api.get('/v1/nodes/%s?fields=power_state' % uuid)['power_state']
    report(
        status == 0 and state == 'power off',
        'a power action reaches %s' % other,
        'power state %s %s' % (state, output.strip()[:200]),
    )


def check_stop(api, tags, expected, main, other):
    """systemctl stop of Ironic's conductor: its nodes move, and back."""
    bound = failover_bound()
    quarantined = [u for u, t in tags.items() if 'quarantine' in t][0]
    moved = {
        u: other for u, c in expected.items() if c == main and u != quarantined
    }
    # Polled while the stop runs: the launcher leaves the group first and
    # then drains, so the nodes move before the command returns.
    start = time.monotonic()
    stopping = subprocess.Popen(
        ['sudo', 'systemctl', 'stop', 'devstack@ir-cond'],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    seconds, broken = wait_until(
        api, moved, 60, forbidden={quarantined: other}
    )
    output = stopping.communicate()[0]
    stopped = time.monotonic() - start
    FIGURES['stop_seconds'] = seconds and round(seconds, 2)
    FIGURES['stop_command_seconds'] = round(stopped, 2)
    report(
        stopping.returncode == 0
        and seconds is not None
        and seconds <= bound + 2,
        'systemctl stop devstack@ir-cond: %d nodes move to %s'
        % (len(moved), other),
        'in %s s from the stop (bound %.0f s: member_timeout + '
        'watch_interval + 2 s of polling); the stop command took %.1f s %s'
        % (seconds and round(seconds, 2), bound, stopped, output[-200:]),
    )
    left = api.placement().get(quarantined)
    report(
        not broken and left != other,
        'the quarantined node never goes to %s' % other,
        'its conductor while %s is down: %s; seen on %s: %s'
        % (main, left, other, broken or 'never'),
    )
    start = time.monotonic()
    status, output = systemctl('start', 'devstack@ir-cond')
    seconds, broken = wait_until(
        api, expected, 120, forbidden={quarantined: other}
    )
    FIGURES['restart_back_seconds'] = seconds and round(seconds, 2)
    report(
        status == 0 and seconds is not None and not broken,
        'systemctl start devstack@ir-cond: its nodes come back',
        'in %s s %s' % (seconds and round(seconds, 2), output.strip()[:200]),
    )


def check_crash(api, tags, expected, main, other):
    """SIGKILL of the extra conductor: the stated failover time."""
    bound = failover_bound()
    moved = {u: main for u, c in expected.items() if c == other}
    # The master process and its worker, which oslo.service renames
    # (its command line no longer names the file): both at once, as a
    # host that dies.
    status, master = run('pgrep', '-f', EXTRA_CONF)
    pids = master.split()
    for pid in master.split():
        pids += run('pgrep', '-P', pid)[1].split()
    run('sudo', 'kill', '-9', *pids)
    seconds, _ = wait_until(api, moved, 60)
    FIGURES['crash_failover_seconds'] = seconds and round(seconds, 2)
    report(
        status == 0 and seconds is not None and seconds <= bound + 2,
        'SIGKILL of ir-affinity-cond1: %d nodes move to %s'
        % (len(moved), main),
        'in %s s (stated: member_timeout + watch_interval = %.0f s; 2 s of '
        'polling allowed); pids %s'
        % (seconds and round(seconds, 2), bound, pids),
    )
    systemctl('stop', 'devstack@ir-affinity-cond1')
    status, output = systemctl('start', 'devstack@ir-affinity-cond1')
    seconds, _ = wait_until(api, expected, 120)
    FIGURES['crash_back_seconds'] = seconds and round(seconds, 2)
    report(
        status == 0 and seconds is not None,
        'ir-affinity-cond1 started again: its nodes come back',
        'in %s s %s' % (seconds and round(seconds, 2), output.strip()[:200]),
    )


def check_commands():
    for argv in (
        ('ironic-affinity', '--config-file', IRONIC_CONF, 'check'),
        (
            'ironic-affinity-status',
            '--config-file',
            IRONIC_CONF,
            'upgrade',
            'check',
        ),
    ):
        status, output = run(*argv)
        report(
            status == 0,
            ' '.join(argv[:1] + argv[3:]),
            'exit status %d\n%s' % (status, output.rstrip()),
        )


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('mode', choices=('launcher', 'ironic-conf'))
    args = parser.parse_args()

    check_mode(args.mode)
    api = Api()
    main_name, other = check_members(api)
    if main_name and other:
        tags, expected = tag_nodes(api, main_name, other)
        check_placement(api, tags, expected, main_name, other)
        check_power(api, tags, other)
        check_stop(api, tags, expected, main_name, other)
        check_crash(api, tags, expected, main_name, other)
    check_commands()
    print('figures: %s' % json.dumps(dict(FIGURES, mode=args.mode)))
    print(
        '%d check(s) failed: %s' % (len(FAILED), ', '.join(FAILED))
        if FAILED
        else 'every check passed'
    )
    return 1 if FAILED else 0


if __name__ == '__main__':
    sys.exit(main())
