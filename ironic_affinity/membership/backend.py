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

"""The coordination backend: its URL, and tooz coordinators on it."""

import contextlib
import importlib.util
import os
import threading
from typing import Any
import urllib.parse

from oslo_config import cfg
from tooz import coordination

from ironic_affinity import exception
from ironic_affinity._i18n import _

FILE_DIRECTORY = 'affinity-membership'

# The client library each tooz driver imports, and the extra of this
# project that installs it (pyproject.toml).
LIBRARY_EXTRAS = {'redis': 'redis', 'etcd3gw': 'etcd', 'kazoo': 'zookeeper'}


def ironic_state_path() -> str | None:
    """Ironic's default [DEFAULT]state_path, ``$pybasedir``: the directory
    of the ironic package, found without importing it; None where Ironic
    is not installed in this Python."""
    try:
        spec = importlib.util.find_spec('ironic')
    except (ImportError, ValueError):  # a module without a spec
        return None
    # A directory without __init__.py is not Ironic.
    if spec is None or spec.origin is None:
        return None
    if not spec.submodule_search_locations:
        return None
    return os.path.abspath(list(spec.submodule_search_locations)[0])


def backend_url(conf: cfg.ConfigOpts) -> str:
    """The configured backend URL, or the file driver under state_path.

    :raises: MembershipUnavailable when neither is known.
    """
    url: str | None = conf.affinity.backend_url
    if url:
        return url
    try:
        state_path = conf.state_path
    except cfg.NoSuchOptError:  # a process without Ironic's options
        state_path = ironic_state_path()
    if not state_path:
        raise exception.MembershipUnavailable(
            _(
                '[affinity]backend_url is not set, nor is '
                '[DEFAULT]state_path, whose default is the directory of '
                'Ironic\'s package, and Ironic is not installed in this '
                'Python: set either as the services have it'
            )
        )
    return 'file://' + os.path.join(state_path, FILE_DIRECTORY)


def require_file_directory(url: str) -> None:
    """Refuse a file:// backend whose directory does not exist.

    tooz's file driver creates its directory when a client starts, so a
    read-only command pointed at the wrong place would leave one behind
    and report an empty group instead of the mistake.

    :raises: MembershipUnavailable naming the directory.
    """
    parts = urllib.parse.urlsplit(url)
    if parts.scheme == 'file' and not os.path.isdir(parts.path):
        raise exception.MembershipUnavailable(
            _(
                '%(url)s: no such directory, so no conductor has joined '
                'there; check [affinity]backend_url (or [DEFAULT]state_path '
                'for the default) against the services\' configuration'
            )
            % {'url': redact(url)}
        )


def redact(url: str) -> str:
    """The URL with any password replaced, fit for logs and output."""
    parts = urllib.parse.urlsplit(url)
    netloc = parts.netloc
    if '@' in netloc:
        userinfo, host = netloc.rsplit('@', 1)
        user = userinfo.split(':', 1)[0]
        netloc = '%s:***@%s' % (user, host) if ':' in userinfo else netloc
    secrets = _secrets(url)
    query = [
        (k, '***' if v and v in secrets else v)
        for k, v in urllib.parse.parse_qsl(parts.query, keep_blank_values=True)
    ]
    return urllib.parse.urlunsplit(
        parts._replace(
            netloc=netloc, query=urllib.parse.urlencode(query, safe='*/:')
        )
    )


def _secrets(url: str) -> list[str]:
    parts = urllib.parse.urlsplit(url)
    found = [parts.password] if parts.password else []
    for key, value in urllib.parse.parse_qsl(parts.query):
        if value and ('password' in key.lower() or 'secret' in key.lower()):
            found.append(value)
    return found


def scrub(text: str, url: str) -> str:
    r"""\`\`text\`\` (an error message, say) without the URL's secrets."""
    for secret in _secrets(url):
        text = text.replace(secret, '***')
    return text


def describe(exc: BaseException, url: str) -> str:
    """What went wrong, for a person, without the URL's secrets.

    Some tooz errors carry no message of their own (the etcd driver's
    ConnectionFailedError, say): the reason is then in the error they
    wrap.
    """
    text = str(exc)
    cause = exc.__cause__ or exc.__context__
    if not text and cause is not None:
        text = '%s: %s' % (type(exc).__name__, cause)
    return scrub(text or repr(exc), url)


def coordinator(
    url: str, member_id: str, timeout: int
) -> coordination.CoordinationDriver:
    """A tooz coordinator (not started) for ``member_id``.

    :param timeout: seconds after which a silent member is dropped; passed
        as the driver's "timeout" option unless the URL sets one, so an
        operator's explicit choice wins.
    """
    query = urllib.parse.parse_qs(urllib.parse.urlsplit(url).query)
    options: dict[str, Any] = (
        {} if 'timeout' in query else {'timeout': str(timeout)}
    )
    try:
        return coordination.get_coordinator(
            url, member_id.encode('utf-8'), **options
        )
    except ModuleNotFoundError as exc:
        extra = LIBRARY_EXTRAS.get(exc.name or '')
        if extra is None:
            raise
        raise exception.BackendLibraryMissing(
            _(
                'the %(scheme)s:// backend needs the Python library '
                '%(library)s, which is not installed here: install '
                "ironic-affinity[%(extra)s] (or %(library)s) beside Ironic"
            )
            % {
                'scheme': urllib.parse.urlsplit(url).scheme,
                'library': exc.name,
                'extra': extra,
            }
        ) from exc


def decode_member_id(member_id: bytes | str) -> str:
    """A member id as tooz returns it (bytes or, from some drivers, str)."""
    if isinstance(member_id, bytes):
        return member_id.decode('utf-8', errors='replace')
    return member_id


def discard(coordinator: coordination.CoordinationDriver) -> None:
    """Stop a started coordinator for good, without leaving its groups.

    tooz's ``stop()`` first leaves every group the client joined and
    waits for each answer without a deadline. That is wrong for a client
    given up after an outage: the entry is to stay for the next client of
    this process to take over (a member that leaves would drop out of
    every view). And it blocks: kazoo queues the request until it
    reconnects, which after a long ZooKeeper outage can be many seconds
    after the server is back, and then deletes the entry that late, so
    the member vanishes from views well after they stopped holding it.
    So the client is told it joined nothing before it stops.

    And tooz's Redis driver's stop deletes the heartbeat key of its
    member id, which a newer client of the same member has set by then
    when the old one was given up on during an outage: readers would
    then drop the live member until it joins again. So that driver's
    Redis client is taken from it before it stops, and closed here.

    The stop itself runs in a thread of its own: it waits for the
    driver's worker, which may sit in a read from a server that stopped
    answering for as long as the URL's ``socket_timeout`` allows (60 s,
    retried once, in Kolla-Ansible's URL), and the caller needs a new
    client now (after a Sentinel failover, one asking for the new
    master).
    """
    joined = getattr(coordinator, '_joined_groups', None)
    if isinstance(joined, set):
        joined.clear()
    redis_client = None
    if type(coordinator).__module__ == 'tooz.drivers.redis':
        redis_client = getattr(coordinator, '_client', None)
        coordinator._client = None  # type: ignore[attr-defined]

    def stop() -> None:
        try:
            coordinator.stop()
        except Exception:  # noqa: BLE001, S110 - discarding it anyway
            pass
        if redis_client is not None:
            with contextlib.suppress(Exception):
                redis_client.connection_pool.disconnect()

    threading.Thread(target=stop, name='affinity-discard', daemon=True).start()
