"""`albert-tf predict` against servers that misbehave: every reply bounded in size and time.

* A reply body that never ends is refused once it passes the reply cap (memory bounded).
* A reply trickling one byte at a time is cut off at the total deadline (`--timeout`),
  not reset by each byte.
* A 3xx is an error naming its Location; the other host is never asked.

Local 127.0.0.1 servers only. Each case checks the exit status, the one line naming the
server and the cause, that no output was written, and what proves the bound (memory grown,
bytes the server sent); times are lower bounds or safety nets only.
"""

from __future__ import annotations

import json
import resource
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler

import pytest

from albert_tf.serving.client import backends
from albert_tf.serving.client import run as client
from tests.helpers.fresh_process import SAFETY_NET_S
from tests.helpers.local_server import LocalServer, started


class _Server(LocalServer):
    """A 127.0.0.1 HTTP server whose every reply is `behaviour(handler)`; counts requests."""

    def __init__(self, behaviour):
        outer = self
        self.requests = []

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                outer.requests.append(("GET", self.path))
                try:
                    behaviour(self)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            do_POST = do_GET

        super().__init__(Handler)


@pytest.fixture
def serve():
    with started(_Server) as start:
        yield start


def _endless(handler):
    handler.send_response(200)
    handler.send_header("Content-Type", "application/json")
    handler.end_headers()
    chunk = b"[" + b"0," * (1 << 15)
    while True:
        handler.wfile.write(chunk)


# 600 bytes in 120 s: a client that resets its timeout at every byte reads them all.
TRICKLED = b'{"model_version_status": []}' * 20


def _trickle(handler):
    handler.send_response(200)
    handler.end_headers()
    handler.server.trickled = 0
    for byte in TRICKLED:
        handler.wfile.write(bytes([byte]))
        handler.wfile.flush()
        handler.server.trickled += 1
        time.sleep(0.2)


def _run(capsys, tmp_path, server_url, *extra):
    source = tmp_path / "in.txt"
    source.write_text("one text\n", encoding="utf-8")
    start = time.monotonic()
    code = client.main(["--server", server_url, "--model", "m", "--input", str(source),
                        "--output", str(tmp_path / "o.jsonl"), *extra])
    elapsed = time.monotonic() - start
    err = capsys.readouterr().err.strip().splitlines()
    assert not (tmp_path / "o.jsonl").exists()  # nothing half-written
    return code, (err[-1] if err else ""), elapsed


def test_a_reply_that_never_ends_is_refused_at_the_cap(capsys, tmp_path, serve, monkeypatch):
    monkeypatch.setattr(backends, "MAX_REPLY_BYTES", 8 << 20)
    server = serve(_endless)
    peak_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    code, line, _ = _run(capsys, tmp_path, server.url)
    assert code == 1 and line.startswith("albert-tf predict: "), line
    assert server.url in line and "exceeds the 8,388,608 bytes a reply may hold" in line, line
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak_before) / 1024
    assert grown_mb < 64, grown_mb  # the cap's bytes, not the endless body


def test_a_declared_oversized_reply_is_refused_before_reading(tmp_path, serve):
    def huge(handler):
        handler.send_response(200)
        handler.send_header("Content-Length", str(1 << 40))
        handler.end_headers()

    server = serve(huge)
    with pytest.raises(backends.ServerError, match="1,099,511,627,776 bytes, more than"):
        backends.http_call(server.url + "/v1/models/m/metadata", None, 10)


def test_a_trickling_reply_is_cut_off_at_the_total_deadline(capsys, tmp_path, serve):
    server = serve(_trickle)
    code, line, elapsed = _run(capsys, tmp_path, server.url, "--timeout", "2")
    sent = server.server.trickled
    assert code == 1 and server.url in line, line
    assert "no complete reply within --timeout 2 s" in line, line
    # Cut off with most of the reply unsent (a slower machine only waits longer, never less).
    assert sent < len(TRICKLED) and elapsed > 1.5, (sent, elapsed)


def test_a_redirect_is_an_error_naming_its_location_and_never_followed(capsys, tmp_path, serve):
    elsewhere = serve(lambda h: (h.send_response(200), h.end_headers(),
                                 h.wfile.write(json.dumps({"predictions": [[1.0]]}).encode())))

    def redirect(handler):
        handler.send_response(302)
        handler.send_header("Location", elsewhere.url + "/v1/models/m:predict")
        handler.send_header("Content-Length", "0")
        handler.end_headers()

    server = serve(redirect)
    code, line, _ = _run(capsys, tmp_path, server.url)
    assert code == 1 and f"HTTP 302 redirects to {elsewhere.url}/v1/models/m:predict" in line
    assert "redirects are not followed" in line and elsewhere.requests == []


def test_a_server_that_accepts_and_never_answers_is_cut_off(tmp_path):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    raised = []

    def call():
        try:
            backends.http_call(f"http://127.0.0.1:{listener.getsockname()[1]}/", None, 1)
        except backends.ServerError as e:
            raised.append(str(e))

    try:
        caller = threading.Thread(target=call, daemon=True)
        caller.start()
        caller.join(timeout=SAFETY_NET_S)  # a safety net for a hang, not the verdict
        assert not caller.is_alive(), "the call never returned"
        assert len(raised) == 1 and "no complete reply within --timeout 1 s" in raised[0], raised
    finally:
        listener.close()


def test_a_well_behaved_reply_is_read_whole(serve):
    body = json.dumps({"ok": list(range(50_000))}).encode()

    def good(handler):
        handler.rfile.read(int(handler.headers.get("Content-Length", 0)))  # else a reset
        handler.send_response(200)
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)

    server = serve(good)
    assert backends.http_call(server.url + "/x", b"{}", 10) == (200, body)
