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

"""Serve ironic_affinity.integration.wsgi:application as uwsgi would.

``python -m ironic_affinity.tests.e2e.wsgi_server --config-file X``: the
application module is imported with the process's arguments, which
Ironic's WSGI module parses as its configuration, then served on
[api]host_ip:[api]port by the standard library's threaded WSGI server (a
stand-in for uwsgi or mod_wsgi, which are not installed here).
"""

import socketserver
from wsgiref import simple_server


class _ThreadingServer(socketserver.ThreadingMixIn, simple_server.WSGIServer):
    daemon_threads = True


class _QuietHandler(simple_server.WSGIRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass  # Ironic logs each request itself


def main() -> None:
    from ironic.conf import CONF

    from ironic_affinity.integration import wsgi

    server = simple_server.make_server(
        CONF.api.host_ip,
        CONF.api.port,
        wsgi.application,
        server_class=_ThreadingServer,
        handler_class=_QuietHandler,
    )
    server.serve_forever()


if __name__ == '__main__':
    main()
