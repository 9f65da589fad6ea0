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

"""A throwaway certificate authority for the TLS functional tests.

Made at test time with the openssl command into a folder the caller
owns (a server fixture's temporary folder), so that no key is ever
committed and none outlives its test. The authority signs one server
certificate, valid for 127.0.0.1 and localhost (the servers listen on
loopback only), and one client certificate for servers that ask for
one.
"""

import dataclasses
import os
import subprocess

# Valid for a day: long enough for any test run, useless after.
DAYS = '1'

# EC keys only sign, hence no keyEncipherment. The server certificate is
# also good for clients because etcd's HTTP gateway connects to etcd's
# own gRPC port with it, which a server asking for client certificates
# then checks.
SERVER_EXTENSIONS = (
    'basicConstraints = critical, CA:FALSE\n'
    'keyUsage = critical, digitalSignature\n'
    'extendedKeyUsage = serverAuth, clientAuth\n'
    'subjectAltName = IP:127.0.0.1, DNS:localhost\n'
)
CLIENT_EXTENSIONS = (
    'basicConstraints = critical, CA:FALSE\n'
    'keyUsage = critical, digitalSignature\n'
    'extendedKeyUsage = clientAuth\n'
)


@dataclasses.dataclass(frozen=True)
class Certificates:
    """Paths of PEM files; the keys are unencrypted PKCS#8."""

    ca: str
    server_cert: str
    server_key: str
    client_cert: str
    client_key: str


def _openssl(folder: str, *args: str) -> None:
    result = subprocess.run(
        ['openssl', *args],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    if result.returncode:
        raise RuntimeError(
            'openssl %s failed: %s' % (args[0], result.stderr.strip())
        )


def _key(folder: str, name: str) -> str:
    # P-256 keys take milliseconds to make, where RSA would slow every
    # test down; genpkey writes PKCS#8, which every server here reads
    # (ZooKeeper's PEM loader reads no other form).
    path = os.path.join(folder, name)
    _openssl(
        folder,
        'genpkey',
        '-algorithm', 'EC',
        '-pkeyopt', 'ec_paramgen_curve:P-256',
        '-out', path,
    )  # fmt: skip
    return path


def _signed(
    folder: str, name: str, subject: str, extensions: str, ca: str
) -> tuple[str, str]:
    key = _key(folder, name + '.key')
    request = os.path.join(folder, name + '.csr')
    extfile = os.path.join(folder, name + '.ext')
    cert = os.path.join(folder, name + '.pem')
    with open(extfile, 'w') as handle:
        handle.write(extensions)
    _openssl(
        folder, 'req', '-new', '-key', key, '-subj', subject, '-out', request
    )
    _openssl(
        folder,
        'x509', '-req',
        '-in', request,
        '-CA', ca,
        '-CAkey', os.path.join(folder, 'ca.key'),
        '-CAcreateserial',
        '-days', DAYS,
        '-sha256',
        '-extfile', extfile,
        '-out', cert,
    )  # fmt: skip
    return cert, key


def generate(folder: str) -> Certificates:
    """Write a new authority and the certificates it signs into
    ``folder`` (created if missing)."""
    os.makedirs(folder, exist_ok=True)
    ca_key = _key(folder, 'ca.key')
    ca = os.path.join(folder, 'ca.pem')
    _openssl(
        folder,
        'req', '-new', '-x509',
        '-key', ca_key,
        '-subj', '/CN=ironic-affinity test CA',
        '-days', DAYS,
        '-sha256',
        '-addext', 'basicConstraints = critical, CA:TRUE',
        '-addext', 'keyUsage = critical, keyCertSign, cRLSign',
        '-out', ca,
    )  # fmt: skip
    server_cert, server_key = _signed(
        folder, 'server', '/CN=127.0.0.1', SERVER_EXTENSIONS, ca
    )
    client_cert, client_key = _signed(
        folder, 'client', '/CN=ironic-affinity', CLIENT_EXTENSIONS, ca
    )
    return Certificates(ca, server_cert, server_key, client_cert, client_key)
