"""The running DevStack as tools/devstack/checks.py sees it.

Commands run with DevStack's virtual environment first on the PATH, the
openstack client with DevStack's system-scoped cloud, and Ironic's API
polled through the Keystone catalog without a CLI.
"""

import configparser
import os
import subprocess
import sys
import time

import openstack

CLOUD = 'devstack-system-admin'
IRONIC_CONF = '/etc/ironic/ironic.conf'
POLL = 0.25


def run(*argv):
    # The commands of DevStack's virtual environment, this Python's.
    path = os.path.dirname(sys.executable) + os.pathsep + os.environ['PATH']
    done = subprocess.run(
        argv, capture_output=True, text=True, env=dict(os.environ, PATH=path)
    )
    return done.returncode, done.stdout + done.stderr


def baremetal(*args):
    return run(
        'openstack',
        '--os-cloud',
        CLOUD,
        '--os-baremetal-api-version',
        'latest',
        'baremetal',
        *args,
    )


def ini(path):
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.read(path)
    return parser


class Api:
    """Ironic's API through the Keystone catalog, polled without a CLI."""

    def __init__(self):
        self.conn = openstack.connect(cloud=CLOUD)
        self.url = self.conn.endpoint_for('baremetal').rstrip('/')
        self.headers = {'X-OpenStack-Ironic-API-Version': 'latest'}

    def get(self, path):
        response = self.conn.session.get(
            self.url + path, headers=self.headers, raise_exc=False
        )
        response.raise_for_status()
        return response.json()

    def placement(self):
        """{node uuid: conductor or None}."""
        # Not ?fields=uuid,conductor: Ironic master (7bc6aba7) answers it
        # with a 500 ("type object 'Node' has no attribute 'conductor'").
        found = self.get('/v1/nodes/detail')
        return {n['uuid']: n.get('conductor') for n in found['nodes']}

    def alive_conductors(self):
        found = self.get('/v1/conductors?fields=hostname,alive')
        return sorted(c['hostname'] for c in found['conductors'] if c['alive'])


def affinity_option(name, default):
    value = ini(IRONIC_CONF).get('affinity', name, fallback=None)
    return float(value) if value else default


def failover_bound():
    """Seconds within which the docs say a gone conductor's nodes move."""
    return affinity_option('member_timeout', 5) + affinity_option(
        'watch_interval', 1
    )


def hold_seconds():
    """How long an answer must last to be every API process's.

    Each API process (uwsgi runs two here) places with its own view and
    tag cache; a tag written through one reaches the others within about
    twice [affinity]node_tags_interval (doc/source/admin/ironic.rst), so
    one poll may see the new placement and the next the old one.
    """
    return 2 * affinity_option('node_tags_interval', 2) + 1


def wait_until(api, want, timeout, forbidden=None):
    """Poll until every node of want is where it says, and stays there.

    want: {uuid: conductor}; forbidden: {uuid: conductor it must never
    have}. Returns (seconds from the call to the first poll of the
    stretch that held for hold_seconds(), or None after timeout; the
    placements seen against forbidden).
    """
    start = time.monotonic()
    hold = hold_seconds()
    since = None
    broken = []
    while True:
        placed = api.placement()
        now = time.monotonic()
        for uuid, never in (forbidden or {}).items():
            if placed.get(uuid) == never:
                broken.append((round(now - start, 2), uuid))
        if all(placed.get(u) == c for u, c in want.items()):
            since = now if since is None else since
            if now - since >= hold:
                return since - start, broken
        else:
            since = None
        if now - start > timeout:
            return None, broken
        time.sleep(POLL)


def systemctl(*args):
    return run('sudo', 'systemctl', *args)
