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

"""Membership over coordination servers that speak TLS only.

Each server has a certificate authority made for the test (certs.py).
A member process and the view in this process, both told to trust it,
must work as over a plain connection; a client that does not trust it,
or that does not speak TLS, must be refused, and say so without showing
any secret of its URL.
"""

import json
import os
import uuid

import fixtures

from ironic_affinity import profile
from ironic_affinity.membership import service
from ironic_affinity.tests import base
from ironic_affinity.tests.functional import certs
from ironic_affinity.tests.functional import servers
from ironic_affinity.tests.functional import test_membership

TAGS = test_membership.TAGS
TIMEOUT = test_membership.TIMEOUT

# requests (under the etcd driver) lets either variable, when set, take
# the place of the authority a client is given; some machines set them
# for everything. The tests clear them to test the URL as written (and
# test_environment_bundle_replaces_ca_cert shows the effect).
CA_BUNDLE_VARIABLES = ('REQUESTS_CA_BUNDLE', 'CURL_CA_BUNDLE')


class TLSHelpers(test_membership.MemberHelpers):
    """Members and views given any URL of the TLS server."""

    #: Strings that must show in no output and no log.
    secrets: tuple[str, ...] = ()

    def setUp(self):
        # Before MemberHelpers starts the view; member processes and
        # commands inherit the environment.
        for name in CA_BUNDLE_VARIABLES:
            self.useFixture(fixtures.EnvironmentVariable(name))
        super().setUp()

    def plain_url(self):
        """The server's address for a client that does not use TLS."""
        raise NotImplementedError

    def conf_file(self, name, url):
        path = os.path.join(self.conf_dir, '%s.conf' % name)
        with open(path, 'w') as handle:
            handle.write(
                '[affinity]\nbackend_url = %s\ngroup_name = %s\n'
                % (url, self.group)
            )
        return path

    def assertNoSecret(self, *texts):
        for secret in self.secrets:
            for text in texts:
                self.assertNotIn(secret, text)

    def assertRefused(self, url, name):
        """A view on ``url`` and ``ironic-affinity members`` with it both
        report the backend unreadable, show no member and no secret."""
        view = service.member_view(self.conf_for(url))
        snapshot = view.refresh_within(TIMEOUT)
        self.assertTrue(snapshot.stale, snapshot)
        self.assertEqual({}, dict(snapshot.members))
        self.assertNoSecret(snapshot.error)
        path = self.conf_file(name, url)
        # The Redis driver retries a refused connection for about a
        # minute before it fails: the command's own limit is what ends
        # the wait there, and a short one keeps the test short.
        result = self.members_command(
            path, '--debug', 'members', '-f', 'json', '--timeout', str(TIMEOUT)
        )
        self.assertEqual(1, result.returncode, result.stderr)
        self.assertNoSecret(result.stdout, result.stderr)
        report = json.loads(result.stdout)
        self.assertFalse(report['readable'])
        self.assertTrue(report['error'])
        self.assertEqual([], report['members'])


class TLSMixin(TLSHelpers):
    """What every TLS server must do."""

    def test_join_with_capabilities(self):
        self.start_member(
            'host-a:8091',
            extra=['--hardware-types', 'ipmi', '--conductor-group', 'rack-a'],
        )
        snapshot = self.wait_view(lambda s: 'host-a:8091' in s.members)
        self.assertEqual(
            profile.ConductorProfile.build(
                'host-a:8091',
                hardware_types=['ipmi'],
                conductor_group='rack-a',
                **TAGS,
            ),
            snapshot.members['host-a:8091'],
        )
        self.assertFalse(snapshot.stale)
        path = os.path.join(self.conf_dir, 'host-a:8091.conf')
        result = self.members_command(path, 'members', '-f', 'json')
        self.assertEqual(0, result.returncode, result.stderr)
        report = json.loads(result.stdout)
        self.assertTrue(report['readable'])
        self.assertEqual(
            ['host-a:8091'], [m['name'] for m in report['members']]
        )

    def test_client_without_the_ca_is_refused(self):
        self.start_member('a')
        self.wait_view(lambda s: 'a' in s.members)
        self.assertRefused(self.server.client_url(ca=False), 'untrusting')
        # The refused clients changed nothing for the others.
        self.assertEqual({'a'}, set(self.view.snapshot().members))
        self.assertFalse(self.view.snapshot().stale)
        self.assertNoSecret(self.logs())

    def test_plain_client_is_refused(self):
        self.start_member('a')
        self.wait_view(lambda s: 'a' in s.members)
        self.assertRefused(self.plain_url(), 'plain')


class ClientCertificateMixin(TLSHelpers):
    """A server that also asks every client for a certificate."""

    def test_member_with_certificate_joins(self):
        self.start_member('a')
        snapshot = self.wait_view(lambda s: 'a' in s.members)
        self.assertFalse(snapshot.stale)

    def test_client_without_certificate_is_refused(self):
        self.start_member('a')
        self.wait_view(lambda s: 'a' in s.members)
        self.assertRefused(
            self.server.client_url(client_cert=False), 'no-certificate'
        )


class RedisTLSTestCase(TLSMixin, base.TestCase):
    def make_server(self):
        return servers.RedisServer(tls=True)

    def plain_url(self):
        return 'redis://127.0.0.1:%d' % self.server.port


class RedisTLSPasswordTestCase(TLSMixin, base.TestCase):
    """TLS and requirepass together; the password shows nowhere."""

    PASSWORD = 'S3cret-%s' % uuid.uuid4().hex[:8]
    secrets = (PASSWORD,)

    def make_server(self):
        return servers.RedisServer(self.PASSWORD, tls=True)

    def plain_url(self):
        return 'redis://:%s@127.0.0.1:%d' % (self.PASSWORD, self.server.port)

    def test_password_never_shown(self):
        result = self.members_hiding(self.PASSWORD, ':***@127.0.0.1')
        # The URL shown keeps its TLS options too.
        self.assertIn('ssl=true', result.stdout)
        self.assertNoSecret(result.stdout, result.stderr, self.logs())


class RedisClientCertificateTestCase(ClientCertificateMixin, base.TestCase):
    def make_server(self):
        return servers.RedisServer(client_auth=True)


class EtcdTLSTestCase(TLSMixin, base.TestCase):
    def make_server(self):
        return servers.EtcdServer(tls=True)

    def plain_url(self):
        return 'etcd3+http://127.0.0.1:%d' % self.server.port

    def test_environment_bundle_replaces_ca_cert(self):
        """A CA bundle named in the environment wins over ca_cert.

        requests, which the etcd driver uses, takes REQUESTS_CA_BUNDLE
        (or CURL_CA_BUNDLE) in place of the authority the driver sets on
        its session. The documentation warns of it; this shows it is
        still so.
        """
        other = certs.generate(os.path.join(self.conf_dir, 'other'))
        self.useFixture(
            fixtures.EnvironmentVariable('REQUESTS_CA_BUNDLE', other.ca)
        )
        snapshot = service.member_view(
            self.conf_for(self.server.url)
        ).refresh_within(TIMEOUT)
        self.assertTrue(snapshot.stale, snapshot)


class EtcdClientCertificateTestCase(ClientCertificateMixin, base.TestCase):
    def make_server(self):
        return servers.EtcdServer(client_auth=True)


class ZooKeeperTLSTestCase(TLSMixin, base.TestCase):
    def make_server(self):
        return servers.ZooKeeperServer(tls=True)

    def plain_url(self):
        return 'zookeeper://127.0.0.1:%d' % self.server.port


class ZooKeeperClientCertificateTestCase(
    ClientCertificateMixin, base.TestCase
):
    def make_server(self):
        return servers.ZooKeeperServer(client_auth=True)
