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

import os
import sys
from unittest import mock

import fixtures
from oslo_config import cfg

from ironic_affinity import exception
from ironic_affinity.membership import backend
from ironic_affinity.tests import base


class BackendURLTestCase(base.TestCase):
    def fake_ironic(self):
        """An ``ironic`` package first on sys.path; its directory."""
        root = self.useFixture(fixtures.TempDir()).path
        os.mkdir(os.path.join(root, 'ironic'))
        open(os.path.join(root, 'ironic', '__init__.py'), 'w').close()
        self.useFixture(fixtures.MonkeyPatch('sys.path', [root] + sys.path))
        # Not one another test imported.
        modules = mock.patch.dict(sys.modules)
        modules.start()
        self.addCleanup(modules.stop)
        sys.modules.pop('ironic', None)
        return os.path.join(root, 'ironic')

    def test_default_is_file_under_state_path(self):
        self.conf.register_opt(cfg.StrOpt('state_path'))
        self.config(group=None, state_path='/srv/ironic')
        self.assertEqual(
            'file:///srv/ironic/affinity-membership',
            backend.backend_url(self.conf),
        )

    def test_without_state_path_ironics_default(self):
        # Ironic's [DEFAULT]state_path defaults to $pybasedir, its
        # package's directory, not to /var/lib/ironic.
        package = self.fake_ironic()
        self.assertEqual(package, backend.ironic_state_path())
        self.assertEqual(
            'file://%s/affinity-membership' % package,
            backend.backend_url(self.conf),
        )

    def test_without_state_path_nor_ironic(self):
        self.useFixture(
            fixtures.MonkeyPatch('importlib.util.find_spec', lambda name: None)
        )
        self.assertIsNone(backend.ironic_state_path())
        error = self.assertRaises(
            exception.MembershipUnavailable, backend.backend_url, self.conf
        )
        self.assertIn('[DEFAULT]state_path', str(error))
        self.assertIn('Ironic is not installed in this Python', str(error))

    def test_configured(self):
        self.config(backend_url='redis://h:6379')
        self.assertEqual('redis://h:6379', backend.backend_url(self.conf))

    def test_redact(self):
        self.assertEqual(
            'redis://:***@h:6379?db=1&password=***',
            backend.redact('redis://:s3cret@h:6379?db=1&password=other'),
        )
        self.assertEqual(
            'etcd3+http://user:***@h:2379',
            backend.redact('etcd3+http://user:pw@h:2379'),
        )
        for plain in ('zookeeper://h:2181', 'file:///var/lib/x'):
            self.assertEqual(plain, backend.redact(plain))

    def test_scrub(self):
        url = 'redis://:s3cret@h:6379?sentinel_password=other'
        self.assertEqual(
            'auth *** failed, ***',
            backend.scrub('auth s3cret failed, other', url),
        )

    def test_redact_keeps_paths_readable(self):
        self.assertEqual(
            'redis://:***@h:6379?ssl=true&ssl_ca_certs=/etc/ironic/ca.pem',
            backend.redact(
                'redis://:pw@h:6379?ssl=true&ssl_ca_certs=/etc/ironic/ca.pem'
            ),
        )

    def test_describe_uses_the_wrapped_reason(self):
        url = 'etcd3+https://u:s3cret@h:2379'
        try:
            try:
                raise OSError('TLS handshake with s3cret failed')
            except OSError as exc:
                raise RuntimeError() from exc
        except RuntimeError as exc:
            self.assertEqual(
                'RuntimeError: TLS handshake with *** failed',
                backend.describe(exc, url),
            )
        self.assertEqual(
            'refused ***', backend.describe(OSError('refused s3cret'), url)
        )
        self.assertEqual('KeyError()', backend.describe(KeyError(), url))

    def test_timeout_passed_unless_in_url(self):
        coordinator = backend.coordinator('file:///tmp/x', 'm', 7)
        self.assertEqual(7, coordinator._timeout)
        coordinator = backend.coordinator('file:///tmp/x?timeout=3', 'm', 7)
        self.assertEqual(3, coordinator._timeout)
