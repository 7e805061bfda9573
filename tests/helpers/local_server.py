"""A test HTTP server on 127.0.0.1 (an ephemeral port, never another address), served from a
daemon thread, the JSON reply the stand-ins of TF Serving's REST API send, and free local
ports for the multi-worker runs' TF_CONFIG."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class LocalServer:
    """Serves `handler` (a BaseHTTPRequestHandler class) at `url` until `close()`."""

    def __init__(self, handler: type[BaseHTTPRequestHandler]):
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@contextlib.contextmanager
def started(make):
    """Yields `start(*args, **kwargs)`, which makes a server with `make` and returns it; every
    server it made is closed on exit (a test's fixture)."""
    servers = []

    def start(*args, **kwargs):
        servers.append(make(*args, **kwargs))
        return servers[-1]

    try:
        yield start
    finally:
        for server in servers:
            server.close()


def send_json(handler: BaseHTTPRequestHandler, code: int, body) -> None:
    """Replies `body` as JSON with status `code` and its Content-Length."""
    data = json.dumps(body).encode()
    handler.send_response(code)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)


def free_ports(n: int) -> list[int]:
    """`n` distinct ports on localhost that were free a moment ago (bound, then released)."""
    sockets = [socket.socket() for _ in range(n)]
    for s in sockets:
        s.bind(("localhost", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports
