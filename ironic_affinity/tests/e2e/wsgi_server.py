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

import io
import socketserver
from typing import Any
from wsgiref import simple_server


class _ThreadingServer(socketserver.ThreadingMixIn, simple_server.WSGIServer):
    daemon_threads = True


class _QuietHandler(simple_server.WSGIRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass  # Ironic logs each request itself


def _bounded_input(application: Any) -> Any:
    """Give the application a request body that ends where the request
    does, as uwsgi and mod_wsgi do: wsgiref hands over the socket itself,
    and Ironic 32 and later read it to its end, which then never comes."""

    def serve(environ: dict[str, Any], start_response: Any) -> Any:
        try:
            length = int(environ.get('CONTENT_LENGTH') or 0)
        except ValueError:
            length = 0
        body = environ['wsgi.input'].read(length) if length > 0 else b''
        environ['wsgi.input'] = io.BytesIO(body)
        return application(environ, start_response)

    return serve


def main() -> None:
    from ironic.conf import CONF

    from ironic_affinity.integration import wsgi

    server = simple_server.make_server(
        CONF.api.host_ip,
        CONF.api.port,
        _bounded_input(wsgi.application),
        server_class=_ThreadingServer,
        handler_class=_QuietHandler,
    )
    server.serve_forever()


if __name__ == '__main__':
    main()
