"""The JSON-over-HTTP plumbing of the controller apps' APIs on 127.0.0.1 (the circuit switch's,
:mod:`controllers.api`; a WAN slice's, :mod:`controllers.wan_te`): a request handler that reads
and answers JSON objects, and a server run on the framework's hub.
"""

from __future__ import annotations

import json
import logging
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from controllers.sdn import hub

LOG = logging.getLogger("ocslab.http")
#: Largest request body accepted (bytes); a rotor of many configurations fits easily.
MAX_BODY_BYTES = 16 << 20


class JsonHandler(BaseHTTPRequestHandler):
    """A request handler whose bodies are JSON objects: :meth:`read_json`, :meth:`send_json`;
    access lines go to the debug log, not stderr."""

    def log_message(self, fmt, *args):
        LOG.debug(fmt, *args)

    def send_json(self, code: int, body: object, headers: dict[str, str] | None = None) -> None:
        """Answer HTTP status ``code`` with ``body`` as JSON, and ``headers`` (name: value)."""
        data = json.dumps(body).encode()
        self.send_response(code)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def read_json(self) -> dict:
        """The request's body (an empty one is ``{}``).

        :raises ValueError: a Content-Length outside [0, MAX_BODY_BYTES], not JSON, or not an
            object (JSONDecodeError and UnicodeDecodeError are ValueErrors).
        """
        length = int(self.headers.get("Content-Length", 0))
        if not 0 <= length <= MAX_BODY_BYTES:
            raise ValueError(f"Content-Length must be in [0, {MAX_BODY_BYTES}], got {length}")
        body = json.loads(self.rfile.read(length) or b"{}")
        if not isinstance(body, dict):
            raise ValueError(f"the body must be a JSON object, got {type(body).__name__}")
        return body


def serve(port: int, handler: type[JsonHandler]) -> ThreadingHTTPServer:
    """Serve ``handler`` on 127.0.0.1:``port`` (0: any free port) from a hub thread; the
    server (``shutdown()`` stops it)."""
    server = ThreadingHTTPServer(("127.0.0.1", port), handler)
    server.daemon_threads = True
    hub.spawn(server.serve_forever)
    return server
