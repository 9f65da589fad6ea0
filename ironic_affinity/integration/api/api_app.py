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

"""The affinity middleware in front of Ironic's API, on every release.

Ironic 35 (2026.1) and later load middleware named in ``[api]
middleware``; Ironic 29 (2025.1) and 32 (2025.2) have no such option.
So that tags are refused at the door and the API announces itself on
all of them, whatever builds Ironic's API application (``ironic-api``,
the API embedded in ``ironic``, a WSGI server) gets it wrapped in
:class:`~ironic_affinity.integration.api.middleware.AffinityMiddleware`,
unless ``[api] middleware`` already lists ``affinity``: Ironic then
applies it itself, and twice would do every check twice.
"""

from typing import Any

from ironic.conf import CONF
from oslo_config import cfg

from ironic_affinity.integration.api import middleware
from ironic_affinity.integration.ring import loader

MIDDLEWARE_NAME = 'affinity'


def ironic_loads_middleware() -> bool:
    """Whether Ironic itself applies our middleware ([api]middleware)."""
    try:
        names = CONF.api.middleware
    except cfg.NoSuchOptError:  # Ironic before 35: no such option
        return False
    return MIDDLEWARE_NAME in (names or [])


def wrap(application: Any) -> Any:
    """Ironic's API application, behind our middleware unless Ironic put
    it there already. Call once the configuration is parsed."""
    if ironic_loads_middleware():
        return application
    return middleware.AffinityMiddleware(application)


def install(by: str) -> None:
    """Install the ring manager; make Ironic's API application come
    wrapped.

    Ironic's services build the application with
    ``ironic.api.app.VersionSelectorApplication()`` after parsing the
    configuration, looking the name up at that moment: replacing it
    before their main() runs is enough. Idempotent.

    :param by: the command that installs it (loader.enabled_by).
    """
    loader.install(by)
    from ironic.api import app

    original = app.VersionSelectorApplication
    if getattr(original, '_affinity_wrapped', False):
        return

    def build(*args: Any, **kwargs: Any) -> Any:
        return wrap(original(*args, **kwargs))

    build._affinity_wrapped = True  # type: ignore[attr-defined]
    app.VersionSelectorApplication = build
