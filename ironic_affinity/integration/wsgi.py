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

"""Ironic's API with affinity placement, for a WSGI server.

Point uwsgi (``module = ironic_affinity.integration.wsgi:application``),
mod_wsgi or gunicorn here instead of ``ironic.wsgi:application``, on any
supported Ironic release. Like Ironic's own WSGI module, importing this
one builds the application: it reads the configuration from the
process's arguments and Ironic's default configuration files.
"""

from ironic_affinity.integration.api import api_app
from ironic_affinity.integration.ring import loader

# Our options and ring manager before Ironic parses its configuration.
loader.install('ironic_affinity.integration.wsgi')

# Ironic's own WSGI module picks its service backend first (Ironic 32
# and later) and builds the application on import.
from ironic.wsgi import application as _ironic_application  # noqa: E402

application = api_app.wrap(_ironic_application)
