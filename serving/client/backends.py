"""The three routes `albert-tf predict` takes to a signature: REST, gRPC, local SavedModel.

Each backend offers `signatures()` -> {name: {"inputs": {input: dtype}, "outputs":
[names], "output_specs": {output: (dtype, rank)}}}, `predict(signature, inputs)` -> one
JSON-ready dict per row, and `where` (its address, for messages), so the client treats
them alike and the tests can check that they agree.
"""

from __future__ import annotations

import errno
import http.client
import json
import socket
import threading
import urllib.parse
from collections.abc import Mapping
from typing import Any

import grpc
import numpy as np
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the SentencePiece ops a SavedModel uses)
from tensorflow_serving.apis import get_model_metadata_pb2, prediction_service_pb2_grpc

from albert_tf.errors import UserError

from .. import requests as rq


class ServerError(UserError, RuntimeError):
    """The server could not be reached or refused a request (one-line message, exit 1)."""

    exit_status = 1


class TransientServerError(ServerError):
    """A refusal worth asking again (`retry.with_retries`): HTTP 429/503, gRPC UNAVAILABLE or
    DEADLINE_EXCEEDED, a connection refused or reset. Other failures are final."""


# Why these and no others: the server says "not now" (429, 503, UNAVAILABLE), a request ran
# past its deadline on the server's side (DEADLINE_EXCEEDED), or the server is restarting
# (connection refused/reset). A 400 or a malformed reply would be the same answer again.
TRANSIENT_HTTP_STATUSES = (429, 503)
TRANSIENT_GRPC_CODES = ("UNAVAILABLE", "DEADLINE_EXCEEDED")
TRANSIENT_ERRNOS = (errno.ECONNREFUSED, errno.ECONNRESET)


# The largest reply either route reads (REST body, gRPC message): a [32, 512, 4096]
# sequence_output is ~0.8 GB as JSON. A reply that says or grows larger is refused as it
# arrives, before it is held whole.
MAX_REPLY_BYTES = 1 << 30
_CHUNK = 1 << 16


def http_call(url: str, body: bytes | None, timeout: float,
              max_bytes: int | None = None) -> tuple[int, bytes]:
    """POSTs `body` (GET when None) to `url`; (HTTP status, reply body).

    `timeout` bounds the whole request (connecting, the headers, the body), not each
    read: a server trickling bytes is cut off at the deadline. Redirects are not
    followed (a 3xx is an error naming its Location: a predict request turned into a
    GET elsewhere would write that host's answers as predictions). The body is read
    in chunks, at most `max_bytes` (MAX_REPLY_BYTES).

    Raises:
      ServerError: unreachable, past the deadline, a redirect, or a reply too large.
    """
    max_bytes = MAX_REPLY_BYTES if max_bytes is None else max_bytes
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ServerError(f"{url}: not an http:// or https:// address")
    kind = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    connection = kind(parts.hostname, parts.port, timeout=timeout)
    expired = threading.Event()
    opened: list[socket.socket] = []  # the reply keeps reading it after the connection lets go

    def cut_off():  # a read blocked in the kernel returns once the socket is shut
        expired.set()
        for sock in opened:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    timer = threading.Timer(timeout, cut_off)
    timer.daemon = True
    timer.start()
    try:
        connection.connect()
        opened.append(connection.sock)
        if expired.is_set():
            cut_off()
        target = parts.path + (f"?{parts.query}" if parts.query else "")
        connection.request("GET" if body is None else "POST", target or "/", body=body,
                           headers={"Content-Type": "application/json"})
        response = connection.getresponse()
        if 300 <= response.status < 400:
            location = response.getheader("Location") or "no Location given"
            raise ServerError(f"{url}: HTTP {response.status} redirects to {location}; "
                              "redirects are not followed: give the server's own address")
        declared = response.getheader("Content-Length")
        if declared and declared.isdigit() and int(declared) > max_bytes:
            raise ServerError(f"{url}: the reply is {int(declared):,} bytes, more than the "
                              f"{max_bytes:,} a reply may hold")
        chunks, size = [], 0
        while True:
            chunk = response.read1(_CHUNK) if hasattr(response, "read1") else response.read(_CHUNK)
            if not chunk:
                break
            size += len(chunk)
            if size > max_bytes:
                raise ServerError(f"{url}: the reply exceeds the {max_bytes:,} bytes a reply "
                                  "may hold; not reading further")
            chunks.append(chunk)
        if expired.is_set():
            raise TimeoutError
        return response.status, b"".join(chunks)
    except (OSError, http.client.HTTPException) as e:
        if expired.is_set() or isinstance(e, (TimeoutError, socket.timeout)):
            raise ServerError(f"{url}: no complete reply within --timeout {timeout:g} s") \
                from None
        transient = isinstance(e, (ConnectionRefusedError, ConnectionResetError)) or (
            isinstance(e, OSError) and e.errno in TRANSIENT_ERRNOS)  # RemoteDisconnected too
        error = TransientServerError if transient else ServerError
        raise error(f"{url}: {getattr(e, 'strerror', None) or e}") from None
    finally:
        timer.cancel()
        connection.close()


class RestBackend:
    """TF Serving's REST API at `server` (e.g. http://localhost:8501)."""

    def __init__(self, server: str, model: str, version: int | None = None,
                 fmt: str = "instances", timeout: float = 60.0):
        if fmt not in rq.REST_FORMATS:
            raise ValueError(f"REST format {fmt!r} is not one of {rq.REST_FORMATS}")
        self.server, self.model, self.version = server, model, version
        self.fmt, self.timeout = fmt, timeout
        self.where = server  # what a message names
        self._signatures: dict | None = None

    def _call(self, url: str, body: dict | None = None) -> dict:
        data = None if body is None else json.dumps(body).encode("utf-8")
        status, raw = http_call(url, data, self.timeout)
        if status >= 400:  # TF Serving puts {"error": ...} in the body
            detail = raw.decode("utf-8", errors="replace")
            try:
                detail = json.loads(detail)["error"]
            except (ValueError, KeyError, TypeError):
                pass
            error = TransientServerError if status in TRANSIENT_HTTP_STATUSES else ServerError
            raise error(f"{url}: HTTP {status}: {rq.refusal_line(detail)}")
        try:
            reply = json.loads(raw)
        except ValueError as e:  # JSONDecodeError, or bytes that are not UTF-8
            shown = raw[:60].decode("utf-8", errors="replace")
            raise ServerError(f"{url}: the reply is not JSON ({e}); it starts {shown!r}; is "
                              "this a TF Serving REST port?") from None
        if not isinstance(reply, dict):
            raise ServerError(f"{url}: the reply is a JSON {type(reply).__name__}, not an object")
        return reply

    def signatures(self) -> dict[str, dict]:
        if self._signatures is None:
            url = rq.rest_url(self.server, self.model, self.version, verb="metadata")
            try:
                self._signatures = rq.signatures_from_rest_metadata(self._call(url))
            except rq.ReplyError as e:
                raise ServerError(f"{url}: {e}") from None
        return self._signatures

    def predict(self, signature: str, inputs: Mapping[str, np.ndarray]) -> list[dict[str, Any]]:
        body = rq.rest_body(inputs, signature, self.fmt)
        response = self._call(rq.rest_url(self.server, self.model, self.version), body)
        return rq.rows_from_rest_response(response, self.signatures()[signature]["outputs"])


class GrpcBackend:
    """TF Serving's gRPC PredictionService at `target` (e.g. localhost:8500)."""

    def __init__(self, target: str, model: str, version: int | None = None,
                 timeout: float = 60.0):

        self.model, self.version, self.timeout = model, version, timeout
        self.where = target
        self._grpc = grpc
        # Long contexts and [B, T, H] outputs exceed gRPC's 4 MB default message size.
        options = [("grpc.max_send_message_length", MAX_REPLY_BYTES),
                   ("grpc.max_receive_message_length", MAX_REPLY_BYTES)]
        self._stub = prediction_service_pb2_grpc.PredictionServiceStub(
            grpc.insecure_channel(target, options=options))
        self._signatures: dict | None = None

    def _rpc(self, method, request):
        try:
            return method(request, timeout=self.timeout)
        except self._grpc.RpcError as e:
            code = e.code().name
            error = TransientServerError if code in TRANSIENT_GRPC_CODES else ServerError
            raise error(f"gRPC {code}: {rq.refusal_line(e.details())}") from None

    def signatures(self) -> dict[str, dict]:
        if self._signatures is None:

            request = get_model_metadata_pb2.GetModelMetadataRequest(
                metadata_field=["signature_def"])
            request.model_spec.name = self.model
            if self.version is not None:
                request.model_spec.version.value = self.version
            response = self._rpc(self._stub.GetModelMetadata, request)
            defs = get_model_metadata_pb2.SignatureDefMap()
            response.metadata["signature_def"].Unpack(defs)
            self._signatures = rq.signatures_from_signature_defs(defs.signature_def)
        return self._signatures

    def predict(self, signature: str, inputs: Mapping[str, np.ndarray]) -> list[dict[str, Any]]:
        request = rq.predict_request(self.model, signature, inputs, self.version)
        return rq.rows_from_predict_response(self._rpc(self._stub.Predict, request))


class LocalBackend:
    """The SavedModel at `path`, loaded in this process (TF + tensorflow-text ops)."""

    def __init__(self, path: str):

        try:
            self._model = tf.saved_model.load(path)
        except (OSError, ValueError) as e:
            raise ServerError(f"cannot load a SavedModel from {path}: {e}") from None
        self._tf = tf
        self.where = path

    def signatures(self) -> dict[str, dict]:
        result = {}
        for name, fn in self._model.signatures.items():
            specs = fn.structured_input_signature[1]
            outputs = fn.structured_outputs
            result[name] = {"inputs": {n: self._dtype(s) for n, s in specs.items()},
                            "outputs": sorted(outputs),
                            "output_specs": {n: (self._dtype(s), s.shape.rank)
                                             for n, s in outputs.items()}}
        return result

    def _dtype(self, spec):
        return object if spec.dtype == self._tf.string else spec.dtype.as_numpy_dtype

    def predict(self, signature: str, inputs: Mapping[str, np.ndarray]) -> list[dict[str, Any]]:
        """Raises RequestError (one line) when the signature refuses the inputs."""
        fn = self._model.signatures[signature]
        try:
            outputs = fn(**{name: self._tf.constant(value) for name, value in inputs.items()})
        except self._tf.errors.InvalidArgumentError as e:
            raise rq.RequestError(rq.refusal_line(e.message)) from None
        return rq.rows_from_columns({name: value.numpy() for name, value in outputs.items()})
