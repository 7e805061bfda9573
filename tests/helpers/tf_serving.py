"""TF Serving's server half of the Predict API, re-derived for the tests: how it reads a
REST body (its documented JSON mapping), answers in each format, and decodes a gRPC
PredictRequest's TensorProtos. The product's client half is `albert_tf.serving.requests`;
tests push every route through both and compare the tensors a signature receives."""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

import numpy as np

from albert_tf.serving.requests import (
    DEFAULT_SIGNATURE,
    REST_FORMATS,
    RequestError,
    map_nested,
    plain,
    rows_from_columns,
    stack,
)


def parse_rest_body(body: Mapping[str, Any], dtypes: Mapping[str, Any]) -> tuple[str, dict]:
    """What TF Serving makes of a Predict REST body: (signature name, input arrays).

    Follows the documented JSON mapping: exactly one of "instances" (a list of
    objects keyed by input name, or of bare values when the signature has one
    input) and "inputs" (an object keyed by input name, or a bare value for a
    single input); `{"b64": ...}` objects are binary strings.

    Args:
      body: the decoded JSON body.
      dtypes: the signature's inputs, name -> NumPy dtype (`object` for strings).
    """
    keys = [k for k in REST_FORMATS if k in body]
    if len(keys) != 1:
        raise RequestError('a Predict body needs exactly one of "instances" and "inputs"')
    signature = body.get("signature_name", DEFAULT_SIGNATURE)
    data = body[keys[0]]
    names = list(dtypes)
    if keys[0] == "instances":
        if not isinstance(data, list) or not data:
            raise RequestError('"instances" must be a non-empty list')
        if all(_is_named(row) for row in data):
            columns = {n: [_field(row, n, i) for i, row in enumerate(data)] for n in names}
        elif len(names) == 1:
            columns = {names[0]: data}
        else:
            raise RequestError(f'"instances" must be objects naming the inputs {names}')
    elif _is_named(data):
        columns = data
    elif len(names) == 1:
        columns = {names[0]: data}
    else:
        raise RequestError(f'"inputs" must be an object naming the inputs {names}')
    if set(columns) != set(names):
        raise RequestError(f"inputs {sorted(columns)} do not match the signature's {names}")
    return signature, {n: stack(n, map_nested(columns[n], _from_json), dtypes[n])
                       for n in names}


def _is_named(value: Any) -> bool:
    """An object keyed by input names (not a {"b64": ...} value)."""
    return isinstance(value, dict) and set(value) != {"b64"}


def _field(row: Mapping[str, Any], name: str, index: int) -> Any:
    if name not in row:
        raise RequestError(f"input {name!r} is missing from instance {index}")
    return row[name]


def _from_json(value: Any) -> Any:
    if isinstance(value, dict):
        if set(value) != {"b64"}:
            raise RequestError(f"unexpected object {value!r:.60} "
                               '(only {"b64": ...} is allowed)')
        return base64.b64decode(value["b64"], validate=True)
    return value.encode("utf-8") if isinstance(value, str) else value


def rest_response(outputs: Mapping[str, np.ndarray], fmt: str) -> dict[str, Any]:
    """What TF Serving answers for outputs of a body in `fmt`: {"predictions": rows}
    or {"outputs": columns}; a single output is not named."""
    if fmt == "inputs":
        columns = {name: plain(np.asarray(v)) for name, v in outputs.items()}
        return {"outputs": next(iter(columns.values())) if len(columns) == 1 else columns}
    rows = rows_from_columns(outputs)
    if len(outputs) == 1:
        (name,) = outputs
        rows = [row[name] for row in rows]
    return {"predictions": rows}


def inputs_from_predict_request(request) -> dict[str, np.ndarray]:
    """The arrays a PredictRequest carries, as the server decodes its TensorProtos."""
    import tensorflow as tf  # deferred, as in predict_request

    return {name: tf.make_ndarray(proto) for name, proto in request.inputs.items()}
