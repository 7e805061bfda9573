"""What `albert-tf predict` accepts from a server: the signature's outputs, one row per input.

A reply is checked before any of it is written: as many rows as inputs sent, each row an
object holding exactly the signature's outputs, each value nested as deep as the output's
rank (when the metadata gives it) and made of the output's kind of value (text, integers,
numbers, booleans), numbers finite. Anything else is a `ReplyError` (one line, exit 1)
naming the row and the output: a server that answers "abc" for three rows, NaN, null or a
bare number does not become three lines of output.

Also the route's own settings, checked before anything is sent: `check_route`.
"""

from __future__ import annotations

import math
import urllib.parse
from collections.abc import Mapping
from typing import Any

import numpy as np

from albert_tf import ranges
from albert_tf.errors import UsageError

from ..layout import MAX_VERSION
from ..requests import ReplyError

REST_SCHEMES = ("http", "https")
MAX_TIMEOUT_S = 86_400.0  # a day: a longer wait is a hang, not a timeout


def check_route(server: str | None, grpc: str | None, timeout: float,
                version: int | None) -> None:
    """Refuses, before any request, a REST address that is not http(s)://HOST[:PORT], a
    gRPC target given as a URL, a timeout that is not a finite number of seconds in (0,
    a day], and a version outside int64.

    Raises:
      UsageError: one line naming the option and the value.
    """
    ranges.check_number("--timeout", timeout, float,
                        {ranges.EXCLUSIVE_MINIMUM: 0.0, ranges.MAXIMUM: MAX_TIMEOUT_S},
                        " (seconds per request)")
    if version is not None:
        ranges.check_number("--version", version, int,
                            {ranges.MINIMUM: 0, ranges.MAXIMUM: MAX_VERSION})
    if server is not None:
        parsed = urllib.parse.urlsplit(server)
        if parsed.scheme not in REST_SCHEMES or not parsed.netloc:
            raise UsageError(f"--server {server!r}: expected http://HOST:PORT or "
                             "https://HOST:PORT (TF Serving's REST address)")
    if grpc is not None and urllib.parse.urlsplit(grpc).scheme in (*REST_SCHEMES, "ftp"):
        raise UsageError(f"--grpc {grpc!r}: expected HOST:PORT (TF Serving's gRPC port), "
                         "not a URL")


def check_rows(rows: Any, specs: Mapping[str, tuple[Any, int | None]], count: int
               ) -> list[dict[str, Any]]:
    """`rows` (a backend's reply to `count` inputs) if every row fits the signature's
    outputs `specs` ({name: (NumPy dtype or None, rank or None)}).

    Raises:
      ReplyError: "row 2: output 'probabilities' holds NaN, not a finite number", ...
    """
    if not isinstance(rows, list):
        raise ReplyError(f"the reply holds a {type(rows).__name__}, not a list of rows")
    if len(rows) != count:
        raise ReplyError(f"the reply holds {len(rows)} predictions for {count} inputs")
    for number, row in enumerate(rows, 1):
        check_row(row, specs, f"row {number}")
    return rows


# The first key of every output line: its input row's 0-based position (blank JSON Lines
# are not rows), so a line names its input whatever the concurrency, route or resume.
INDEX_KEY = "index"


def check_row(row: Any, specs: Mapping[str, tuple[Any, int | None]], where: str) -> None:
    """The one rule for a prediction row (a reply's, or one a resumed output holds): a dict
    of exactly the signature's outputs, each of its dtype and rank; ReplyError naming
    `where` else."""
    names = sorted(specs)
    if not isinstance(row, dict) or sorted(row) != names:
        got = sorted(row) if isinstance(row, dict) else f"a {type(row).__name__}"
        raise ReplyError(f"{where}: expected the outputs {names}, got {got}")
    for name, (dtype, rank) in specs.items():
        _check_value(row[name], dtype, None if rank is None else rank - 1,
                     f"{where}: output {name!r}")


def _check_value(value: Any, dtype: Any, depth: int | None, where: str) -> None:
    """`value` is nested `depth` lists deep (None: any depth) around values of `dtype`."""
    if isinstance(value, (list, tuple)):
        if depth == 0:
            raise ReplyError(f"{where} is a list where the signature has one value")
        for item in value:
            _check_value(item, dtype, None if depth is None else depth - 1, where)
        return
    if depth:
        raise ReplyError(f"{where} holds {_shown(value)} where the signature has a list")
    expected = _kind(dtype)
    if not _is_kind(value, dtype):
        raise ReplyError(f"{where} holds {_shown(value)}, not {expected}")


def _kind(dtype: Any) -> str:
    if dtype is None:
        return "a string, a number or a boolean"
    if dtype is object:
        return "a string"
    if dtype is np.bool_:
        return "a boolean"
    if np.issubdtype(dtype, np.integer):
        return "an integer"
    return "a finite number"


def _is_kind(value: Any, dtype: Any) -> bool:
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    finite = number and math.isfinite(value)
    if dtype is None:
        return isinstance(value, (str, bool)) or finite
    if dtype is object:
        return isinstance(value, str)
    if dtype is np.bool_:
        return isinstance(value, bool)
    if np.issubdtype(dtype, np.integer):
        return finite and float(value).is_integer()
    return finite


def _shown(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value).replace("nan", "NaN").replace("inf", "Infinity")
    return f"{value!r:.40}"

