"""Conversions between rows of inputs/outputs and TF Serving's Predict API messages.

One place defines how a batch of named inputs becomes a REST body (row "instances"
or columnar "inputs" form), how TF Serving turns such a body back into tensors, and
how a gRPC `PredictRequest` is built and its reply read, for the client. The server's
half (how TF Serving reads a body, from its documented JSON mapping) is re-derived in
`tests/helpers/tf_serving.py`, where the tests check that every route reaches the
signature with the same tensors.

Strings travel as JSON strings when they are valid UTF-8 and as `{"b64": ...}`
objects otherwise, as TF Serving's REST API specifies. Output strings are always
valid UTF-8 (the exported graph replaces malformed bytes), so they come back as
plain JSON strings.

TensorFlow is imported for its TensorProto and dtype conversions (gRPC requests,
metadata replies); `tensorflow_serving.apis` lazily, when a gRPC request is built.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from albert_tf.errors import UserError

REST_FORMATS = ("instances", "inputs")
DEFAULT_SIGNATURE = "serving_default"

# TF Serving's type names in model metadata -> NumPy dtypes of the inputs we build.
_DTYPES = {"DT_STRING": object, "DT_INT32": np.int32, "DT_INT64": np.int64,
           "DT_FLOAT": np.float32, "DT_DOUBLE": np.float64, "DT_BOOL": np.bool_}


class RequestError(UserError):
    """A request or response that does not fit the signature or the API's format."""


class ReplyError(UserError):
    """A server's reply that is not what the API or the signature promises (exit 1:
    the server's fault, not the input's)."""

    exit_status = 1


# A signature's refusal of a request (`signatures.base.checked_inputs`), in TensorFlow's
# error text (in-process, gRPC details, REST "error"), among node and stack lines.
_ASSERTION = re.compile(r"assertion failed: \[(.*)\]\s*$", re.MULTILINE)
_FRAMING = ("Graph execution error", "Detected at node", "<stack traces unavailable>",
            "[[{{node")


def refusal_line(message: str) -> str:
    """The one line that says why a model refused a request.

    A failed input check reads "assertion failed: [MESSAGE]" (MESSAGE is returned,
    e.g. "text_pair: text_a has 3 rows but text_b has 1"); any other error gives its
    first line that is not TensorFlow's framing, without the "[Op:...]" suffix.
    """
    message = str(message)
    found = _ASSERTION.search(message)
    if found:
        return found.group(1)
    lines = [line.strip() for line in message.splitlines()]
    useful = [line for line in lines if line and not line.startswith(_FRAMING)]
    return re.sub(r"\s*\[Op:[^\]]*\]$", "", useful[0] if useful else message.strip())


# --------------------------------------------------------------- rows <-> columns
def to_bytes(value: str | bytes) -> bytes:
    """UTF-8 bytes of a text value; lone surrogates (from JSON escapes) are kept as bytes."""
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8", errors="surrogatepass")
    raise RequestError(f"expected a string, got {type(value).__name__} {value!r:.60}")


def columns_from_rows(rows: Sequence[Mapping[str, Any]],
                      dtypes: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """Stacks rows of named inputs into one array per input.

    Args:
      rows: one mapping per example, each with exactly the keys of `dtypes`; a
        value is a string/bytes, a number, or a (nested) list of them.
      dtypes: input name -> NumPy dtype (`object` for strings).

    Returns:
      name -> array of shape [len(rows), ...]; strings become `object` arrays of bytes.
    """
    columns = {}
    for name, dtype in dtypes.items():
        values = [row[name] for row in rows]
        if dtype is object:
            values = map_nested(values, to_bytes)
        array = stack(name, values, dtype)
        if array.ndim == 0 or array.shape[0] != len(rows):
            raise RequestError(f"input {name!r}: expected one value per row")
        columns[name] = array
    return columns


def stack(name: str, values: Any, dtype: Any) -> np.ndarray:
    """`values` (nested lists) as one rectangular array, or a RequestError naming `name`."""
    try:
        array = np.array(values, dtype=dtype)
    except (ValueError, TypeError) as e:  # ragged nesting or a non-number among numbers
        raise RequestError(f"input {name!r}: values do not stack into one array ({e})") from None
    # NumPy builds an object array of lists from ragged strings instead of failing.
    if array.dtype == object and any(isinstance(v, (list, tuple)) for v in array.flat):
        raise RequestError(f"input {name!r}: values do not stack into one array "
                           "(rows of different lengths)")
    return array


def rows_from_columns(outputs: Mapping[str, np.ndarray]) -> list[dict[str, Any]]:
    """Splits named output arrays [B, ...] into B JSON-ready rows (bytes -> str)."""
    sizes = {name: np.shape(value)[0] for name, value in outputs.items()}
    if len(set(sizes.values())) > 1:
        raise RequestError(f"outputs disagree on the batch size: {sizes}")
    batch = next(iter(sizes.values()), 0)
    return [{name: plain(np.asarray(value)[i]) for name, value in outputs.items()}
            for i in range(batch)]


def plain(value: Any) -> Any:
    """A NumPy value as JSON-ready Python: lists, floats, ints, bools, str."""
    if isinstance(value, np.ndarray):
        return [plain(v) for v in value] if value.dtype == object else \
            map_nested(value.tolist(), plain)
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    if isinstance(value, np.generic):
        return value.item()
    return value


def map_nested(value: Any, fn) -> Any:
    if isinstance(value, (list, tuple)):
        return [map_nested(v, fn) for v in value]
    return fn(value)


# ------------------------------------------------------------------------ REST
def rest_url(server: str, model: str, version: int | None = None, verb: str = "predict") -> str:
    """`http://host:8501/v1/models/NAME[/versions/N]:predict` (or `/metadata` for verb=None)."""
    url = f"{server.rstrip('/')}/v1/models/{model}"
    if version is not None:
        url += f"/versions/{int(version)}"
    return f"{url}/metadata" if verb == "metadata" else f"{url}:{verb}"


def json_value(value: Any) -> Any:
    """A request value for JSON: valid UTF-8 bytes as str, other bytes as {"b64": ...}."""
    if isinstance(value, (bytes, np.bytes_)):
        try:
            return bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            return {"b64": base64.b64encode(bytes(value)).decode("ascii")}
    if isinstance(value, np.ndarray):
        return [json_value(v) for v in value] if value.dtype == object else value.tolist()
    if isinstance(value, (list, tuple)):
        return [json_value(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    return value


def rest_body(inputs: Mapping[str, np.ndarray], signature_name: str = DEFAULT_SIGNATURE,
              fmt: str = "instances") -> dict[str, Any]:
    """A Predict REST body: row form `{"instances": [{name: value}, ...]}` or
    columnar form `{"inputs": {name: [values]}}`; every input is named in both."""
    if fmt not in REST_FORMATS:
        raise RequestError(f"REST format {fmt!r} is not one of {', '.join(REST_FORMATS)}")
    body: dict[str, Any] = {"signature_name": signature_name}
    if fmt == "inputs":
        body["inputs"] = {name: json_value(value) for name, value in inputs.items()}
    else:
        batch = len(next(iter(inputs.values())))
        body["instances"] = [{name: json_value(value[i]) for name, value in inputs.items()}
                             for i in range(batch)]
    return body


def rows_from_rest_response(response: Mapping[str, Any],
                            output_names: Sequence[str]) -> list[Any]:
    """Rows of named outputs from a Predict REST response in either form (each row a
    {name: value} dict when the reply has that shape; `client.replies` checks the rest).

    Raises:
      RequestError: the server refused the request ({"error": ...}).
      ReplyError: the reply is neither form (a string, null or a number where the rows
        or columns belong, columns of different lengths).
    """
    if "error" in response:
        raise RequestError(f"server error: {response['error']}")
    if "predictions" in response:
        rows = response["predictions"]
        if not isinstance(rows, list):
            raise ReplyError(f'"predictions" is a JSON {_json_type(rows)}, not a list of rows')
        if len(output_names) == 1 and not (rows and isinstance(rows[0], dict)):
            rows = [{output_names[0]: row} for row in rows]
        return list(rows)
    if "outputs" in response:
        columns = response["outputs"]
        if len(output_names) == 1 and not isinstance(columns, dict):
            columns = {output_names[0]: columns}
        if not isinstance(columns, dict) or not all(isinstance(c, list)
                                                    for c in columns.values()):
            raise ReplyError('"outputs" is not an object of one list of values per output')
        sizes = {len(c) for c in columns.values()}
        if len(sizes) > 1:
            raise ReplyError(f'the "outputs" columns have different lengths {sorted(sizes)}')
        batch = sizes.pop() if sizes else 0
        return [{name: value[i] for name, value in columns.items()} for i in range(batch)]
    raise ReplyError('a Predict response has neither "predictions" nor "outputs"')


def _json_type(value: Any) -> str:
    return {type(None): "null", str: "string", bool: "boolean", int: "number",
            float: "number", dict: "object", list: "array"}.get(type(value), type(value).__name__)


def _json_spec(info: Any) -> tuple[Any, int | None]:
    """(NumPy dtype or None, rank or None) of a TensorInfo in REST metadata JSON."""
    if not isinstance(info, dict):
        return None, None
    shape = info.get("tensor_shape")
    rank = None
    if isinstance(shape, dict) and not shape.get("unknown_rank") and isinstance(
            shape.get("dim", []), list):
        rank = len(shape.get("dim", []))
    return _DTYPES.get(info.get("dtype")), rank


def signatures_from_rest_metadata(metadata: Mapping[str, Any]) -> dict[str, dict]:
    """{signature: {"inputs": {name: dtype}, "outputs": [names], "output_specs": {name:
    (dtype or None, rank or None)}}} from /metadata JSON.

    Raises:
      ReplyError: metadata of another shape, naming what is missing or malformed.
    """
    try:
        defs = metadata["metadata"]["signature_def"]["signature_def"]
    except (KeyError, TypeError) as e:
        raise ReplyError(f"unexpected model metadata (missing {e})") from None
    if not isinstance(defs, dict):
        raise ReplyError("unexpected model metadata (signature_def is not an object)")
    result = {}
    for sig, d in defs.items():
        inputs, outputs = (d.get("inputs", {}), d.get("outputs", {})) if isinstance(
            d, dict) else (None, None)
        if not isinstance(inputs, dict) or not isinstance(outputs, dict) or not all(
                isinstance(t, dict) for t in inputs.values()):
            raise ReplyError(f"unexpected model metadata: signature {sig!r} has no objects "
                             "of inputs and outputs")
        result[sig] = {"inputs": {n: _DTYPES.get(t.get("dtype"), object)
                                  for n, t in inputs.items()},
                       "outputs": sorted(outputs),
                       "output_specs": {n: _json_spec(t) for n, t in outputs.items()}}
    return result


# ------------------------------------------------------------------------ gRPC
def predict_request(model_name: str, signature_name: str, inputs: Mapping[str, np.ndarray],
                    version: int | None = None):
    """A `tensorflow_serving.apis.predict_pb2.PredictRequest` carrying `inputs` as TensorProtos."""
    # Deferred: without tensorflow-serving-api, export refuses with one line
    # (warmup.require_serving_api) before anything reaches this.
    import tensorflow as tf  # deferred: `predict --help` reads this module's names alone
    from tensorflow_serving.apis import predict_pb2

    request = predict_pb2.PredictRequest()
    request.model_spec.name = model_name
    request.model_spec.signature_name = signature_name
    if version is not None:
        request.model_spec.version.value = int(version)
    for name, value in inputs.items():
        request.inputs[name].CopyFrom(tf.make_tensor_proto(value))
    return request


def rows_from_predict_response(response) -> list[dict[str, Any]]:
    """Rows of named outputs from a gRPC PredictResponse."""
    import tensorflow as tf  # deferred, as in predict_request

    return rows_from_columns({name: tf.make_ndarray(proto)
                              for name, proto in sorted(response.outputs.items())})


def signatures_from_signature_defs(signature_defs: Mapping[str, Any]) -> dict[str, dict]:
    """Like `signatures_from_rest_metadata`, from SignatureDef protos (gRPC metadata)."""
    from tensorflow.core.framework import types_pb2  # deferred, as in predict_request

    def spec(info):
        shape = info.tensor_shape
        return (_DTYPES.get(types_pb2.DataType.Name(info.dtype)),
                None if shape.unknown_rank else len(shape.dim))

    return {sig: {"inputs": {n: _DTYPES.get(types_pb2.DataType.Name(t.dtype), object)
                             for n, t in d.inputs.items()},
                  "outputs": sorted(d.outputs),
                  "output_specs": {n: spec(t) for n, t in d.outputs.items()}}
            for sig, d in signature_defs.items()}
