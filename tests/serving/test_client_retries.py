"""`albert-tf predict` under load and failure: --concurrency, retries, resume.

A 127.0.0.1 stand-in for TF Serving's REST API answers each text with values computed
from the text itself (its length and its SHA-256), so every output row can be checked
against its input row independently of the client, and the order of the output is the
order of the input. The server fails chosen requests (503, 429, 400) or stops answering
after some rows; the client is run in this process, or as a subprocess that is killed.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler

import pytest

from albert_tf.serving.client import backends, resume, retry
from albert_tf.serving.client import run as client
from tests.helpers.local_server import LocalServer, send_json, started

METADATA = {"model_spec": {"name": "m", "version": "1"}, "metadata": {"signature_def": {
    "signature_def": {"serving_default": {
        "inputs": {"text": {"dtype": "DT_STRING", "tensor_shape": {"dim": [{"size": "-1"}]}}},
        "outputs": {
            "length": {"dtype": "DT_INT64", "tensor_shape": {"dim": [{"size": "-1"}]}},
            "digest": {"dtype": "DT_STRING", "tensor_shape": {"dim": [{"size": "-1"}]}}}}}}}}


def expected_row(text: str) -> dict:
    """What the stand-in answers for `text` (and what each output line must hold)."""
    return {"digest": hashlib.sha256(text.encode()).hexdigest(), "length": len(text)}


class _Server(LocalServer):
    """The stand-in. `fail(n, texts)` -> None (answer) or an HTTP status for the n-th
    predict request (1-based, counted across threads) carrying `texts`; `delay` seconds
    before each answer make requests overlap."""

    def __init__(self, fail=lambda n, texts: None, delay: float = 0.0):
        outer = self
        self.lock = threading.Lock()
        self.predicts, self.statuses, self.in_flight, self.peak = 0, [], 0, 0

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _send(self, code, body):
                send_json(self, code, body)

            def do_GET(self):
                self._send(200, METADATA)

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                texts = [row["text"] for row in body["instances"]]
                with outer.lock:
                    outer.predicts += 1
                    number = outer.predicts
                    outer.in_flight += 1
                    outer.peak = max(outer.peak, outer.in_flight)
                try:
                    time.sleep(delay)
                    status = fail(number, texts)
                    with outer.lock:
                        outer.statuses.append(status or 200)
                    if status:
                        self._send(status, {"error": f"refused request {number}"})
                    else:
                        self._send(200, {"predictions": [expected_row(t) for t in texts]})
                finally:
                    with outer.lock:
                        outer.in_flight -= 1

        super().__init__(Handler)


@pytest.fixture
def serve():
    with started(_Server) as start:
        yield start


@pytest.fixture(autouse=True)
def quick_backoff(monkeypatch):
    monkeypatch.setattr(retry, "BASE_WAIT_S", 0.02)


def _texts(count):
    return [f"text {i} " + "x" * (i % 7) for i in range(count)]


def _write_input(tmp_path, texts):
    source = tmp_path / "in.txt"
    source.write_text("".join(t + "\n" for t in texts), encoding="utf-8")
    return source


def _args(server, source, output, *extra):
    return ["--server", server.url, "--model", "m", "--input", str(source),
            "--output", str(output), *extra]


def _rows(path):
    """The output rows without their "index", which must count the input rows from 0."""
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert [row.pop("index") for row in rows] == list(range(len(rows)))
    return rows


def test_concurrent_run_through_a_server_failing_every_third_request(tmp_path, serve, caplog):
    texts = _texts(60)
    server = serve(fail=lambda n, _: 503 if n % 3 == 0 else None, delay=0.05)
    source, output = _write_input(tmp_path, texts), tmp_path / "out.jsonl"
    with caplog.at_level("INFO"):
        assert client.main(_args(server, source, output, "--batch-size", "4",
                                 "--concurrency", "4")) == 0
    assert _rows(output) == [expected_row(t) for t in texts]  # every row, in input order
    failed = server.statuses.count(503)
    assert failed >= 5 and server.statuses.count(200) == 15  # 15 batches, each answered once
    assert server.peak > 1  # requests did overlap
    assert f"wrote 60 predictions to {output} ({failed} requests retried)" in caplog.text
    assert not os.path.exists(str(output) + resume.PARTIAL_SUFFIX)
    assert not os.path.exists(str(output) + resume.RECORD_SUFFIX)


def test_a_429_is_retried_and_a_400_is_not(tmp_path, serve, capsys):
    texts = _texts(8)
    source = _write_input(tmp_path, texts)
    busy = serve(fail=lambda n, _: 429 if n == 1 else None)
    assert client.main(_args(busy, source, tmp_path / "a.jsonl", "--batch-size", "8")) == 0
    assert busy.statuses == [429, 200] and _rows(tmp_path / "a.jsonl") == [
        expected_row(t) for t in texts]

    refused = serve(fail=lambda n, _: 400)
    code = client.main(_args(refused, source, tmp_path / "b.jsonl", "--batch-size", "8"))
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert code == 1 and refused.statuses == [400], refused.statuses  # asked once
    assert "HTTP 400: refused request 1" in line, line
    assert not list(tmp_path.glob("b.jsonl*"))  # no row written: nothing left behind


def test_retries_are_bounded_and_the_last_error_is_one_line(tmp_path, serve, capsys):
    source = _write_input(tmp_path, _texts(3))
    server = serve(fail=lambda n, _: 503)
    code = client.main(_args(server, source, tmp_path / "o.jsonl", "--retries", "2"))
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert code == 1 and server.statuses == [503, 503, 503], server.statuses
    assert "HTTP 503: refused request 3 (gave up after 2 retries)" in line, line


def test_a_failed_run_is_continued_without_repeating_a_row(tmp_path, serve):
    texts = _texts(40)
    source, output = _write_input(tmp_path, texts), tmp_path / "out.jsonl"
    asked = []

    def down_after_five_batches(n, batch):  # every request fails from the 6th on
        if n > 5:
            return 400
        asked.extend(batch)
        return None

    first = serve(fail=down_after_five_batches)
    assert client.main(_args(first, source, output, "--batch-size", "4")) == 1
    partial = tmp_path / ("out.jsonl" + resume.PARTIAL_SUFFIX)
    assert not output.exists() and _rows(partial) == [expected_row(t) for t in texts[:20]]

    second = serve(fail=lambda n, batch: asked.extend(batch))
    assert client.main(_args(second, source, output, "--batch-size", "4",
                             "--concurrency", "3")) == 0
    # Each text asked for once across both runs (concurrent requests arrive in any order).
    assert sorted(asked) == sorted(texts)
    assert _rows(output) == [expected_row(t) for t in texts]
    assert not partial.exists()
    # The continued output is byte for byte one run's, whatever the batches.
    whole = tmp_path / "whole.jsonl"
    assert client.main(_args(serve(), source, whole, "--batch-size", "7")) == 0
    assert output.read_bytes() == whole.read_bytes()


def test_an_output_line_is_its_index_then_the_outputs_in_sorted_order():
    line = client.output_line(7, {"probabilities": [0.25, 0.75], "label": "caf\u00e9",
                                  "label_id": 1})
    assert line == '{"index": 7, "label": "caf\u00e9", "label_id": 1, "probabilities": [0.25, 0.75]}\n'
    with pytest.raises(client.ClientError, match="an output named 'index'"):
        client.output_line(0, {"index": 3})


def test_a_killed_run_is_continued_without_duplicates(tmp_path, serve):
    texts = _texts(50)
    source, output = _write_input(tmp_path, texts), tmp_path / "out.jsonl"
    partial = tmp_path / ("out.jsonl" + resume.PARTIAL_SUFFIX)
    server = serve(delay=0.1)
    process = subprocess.Popen(
        [sys.executable, "-m", "albert_tf.serving.client.run",
         *_args(server, source, output, "--batch-size", "2", "--concurrency", "2")],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while not (partial.exists() and len(_rows(partial)) >= 10):
        assert process.poll() is None and time.monotonic() < deadline
        time.sleep(0.02)
    process.send_signal(signal.SIGKILL)
    process.wait()
    kept = len(_rows(partial))
    assert 10 <= kept < 50 and not output.exists()

    # A fresh server counts the rerun's requests alone (the killed client's last requests
    # may still reach the first one).
    rerun = serve()
    assert client.main(_args(rerun, source, output, "--batch-size", "2")) == 0
    assert _rows(output) == [expected_row(t) for t in texts]  # each row once, in order
    assert rerun.predicts == (50 - kept + 1) // 2  # only what was missing


def test_a_partial_output_of_another_input_is_refused(tmp_path, serve, capsys):
    server = serve()
    source, output = _write_input(tmp_path, _texts(4)), tmp_path / "out.jsonl"
    partial = tmp_path / ("out.jsonl" + resume.PARTIAL_SUFFIX)
    assert client.main(_args(server, source, output, "--retries", "0")) == 0
    os.rename(output, partial)  # as a killed run of another input would leave it
    resume.atomic.atomic_write_json(str(output) + resume.RECORD_SUFFIX,
                                    resume.run_record(str(source), {}))
    other = tmp_path / "other.txt"
    other.write_text("another text\n", encoding="utf-8")
    assert client.main(_args(server, other, output)) == 2
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert "holds the predictions of a run over another input" in line, line
    assert len(_rows(partial)) == 4  # untouched

    os.remove(str(output) + resume.RECORD_SUFFIX)  # not ours without its record
    assert client.main(_args(server, other, output, "--overwrite")) == 2
    assert "was not written by albert-tf predict" in capsys.readouterr().err

    assert client.main(_args(server, source, output, "--signature", "serving_default",
                             "--overwrite")) == 2  # still no record: never touched
    assert len(_rows(partial)) == 4


@pytest.mark.parametrize("code, transient", [("UNAVAILABLE", True), ("DEADLINE_EXCEEDED", True),
                                             ("INVALID_ARGUMENT", False), ("NOT_FOUND", False)])
def test_grpc_codes_that_are_retried(code, transient):
    import grpc

    class Refusal(grpc.RpcError):
        def code(self):
            return getattr(grpc.StatusCode, code)

        def details(self):
            return "no"

    def method(request, timeout):
        raise Refusal()

    backend = backends.GrpcBackend.__new__(backends.GrpcBackend)
    backend._grpc, backend.timeout = grpc, 1.0
    with pytest.raises(backends.ServerError, match=f"gRPC {code}: no") as raised:
        backend._rpc(method, None)
    assert isinstance(raised.value, backends.TransientServerError) is transient


def test_a_refused_connection_is_retried_then_one_line(tmp_path, capsys):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    listener.close()  # nothing listens there now
    source = _write_input(tmp_path, _texts(2))
    code = client.main(["--server", f"http://127.0.0.1:{port}", "--model", "m", "--input",
                        str(source), "--output", str(tmp_path / "o.jsonl"), "--retries", "3"])
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert code == 1 and "(gave up after 3 retries)" in line, line
    assert not list(tmp_path.glob("o.jsonl*"))


def _failed_run(tmp_path, serve, texts, batches_before_failing=2):
    """A run over `texts` whose server fails after `batches_before_failing` batches of 4:
    (input, output, FILE.partial holding those rows)."""
    source, output = _write_input(tmp_path, texts), tmp_path / "out.jsonl"
    server = serve(fail=lambda n, _: 400 if n > batches_before_failing else None)
    assert client.main(_args(server, source, output, "--batch-size", "4")) == 1
    partial = tmp_path / ("out.jsonl" + resume.PARTIAL_SUFFIX)
    assert len(_rows(partial)) == 4 * batches_before_failing
    return source, output, partial


def _renumbered(rows: list[str]) -> list[str]:
    """Output lines whose "index" counts 0, 1, ... as a run's own lines do."""
    return [json.dumps({**json.loads(r), "index": i}) + "\n" for i, r in enumerate(rows)]


@pytest.mark.parametrize("edit, words", [
    (lambda rows: _renumbered(rows + rows[:2] + rows),  # 20 rows for 10 inputs
     ":11: a row past the input's last row (the input holds 10 rows)"),
    (lambda rows: rows + rows[:1],  # a row that is another input's
     ":9: 'index' is 0, not this line's input row 8"),
    (lambda rows: rows[:1] + ['{"index": 1, "label": "pos"}\n'] + rows[2:],
     ":2: expected the outputs ['digest', 'length'], got ['label']"),
    (lambda rows: rows[:2] + ['{"index": 2, "digest": 7, "length": 3}\n'] + rows[3:],
     ":3: output 'digest' holds 7, not a string"),
], ids=["more_rows_than_input", "another_rows_index", "foreign_keys", "wrong_value_type"])
def test_a_partial_output_that_is_not_this_runs_rows_is_refused_and_kept(tmp_path, serve, capsys,
                                                                           edit, words):
    """Such a FILE.partial was resumed and published (20 rows out for 10 in)."""
    source, output, partial = _failed_run(tmp_path, serve, _texts(10))
    lines = partial.read_text(encoding="utf-8").splitlines(keepends=True)
    partial.write_text("".join(edit(lines)), encoding="utf-8")
    before = partial.read_bytes()
    capsys.readouterr()
    server = serve()
    assert client.main(_args(server, source, output)) == 2
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert f"{partial}{words}" in line and "pass --overwrite to start again" in line, line
    assert partial.read_bytes() == before and not output.exists()  # untouched
    assert server.predicts == 0

    assert client.main(_args(server, source, output, "--overwrite")) == 0  # as it says
    assert _rows(output) == [expected_row(t) for t in _texts(10)] and not partial.exists()
