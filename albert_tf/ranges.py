"""The one numeric range rule: a value of a kind (int or finite float) within bounds.

The layers check their own arguments with it (a head's `num_classes`, beam sizes), the
command lines theirs (`albert_tf.infra.arguments.check_numbers` over a dataclass's
`number_field`s, and single options such as `--concurrency`); the message is one line,
"NAME=VALUE must be ...". No Keras, no file.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from albert_tf.errors import UserError

__all__ = ["MINIMUM", "EXCLUSIVE_MINIMUM", "MAXIMUM", "EXCLUSIVE_MAXIMUM", "BOUNDS",
           "check_number"]

# Field metadata keys: the range of a numeric field (`number_field`, `check_numbers`).
MINIMUM, EXCLUSIVE_MINIMUM = "minimum", "exclusive_minimum"
MAXIMUM, EXCLUSIVE_MAXIMUM = "maximum", "exclusive_maximum"
BOUNDS = (MINIMUM, EXCLUSIVE_MINIMUM, MAXIMUM, EXCLUSIVE_MAXIMUM)
_WITHIN = {MINIMUM: lambda v, limit: v >= limit, EXCLUSIVE_MINIMUM: lambda v, limit: v > limit,
           MAXIMUM: lambda v, limit: v <= limit, EXCLUSIVE_MAXIMUM: lambda v, limit: v < limit}


def check_number(name: str, value: Any, kind: type = float,
                 bounds: Mapping[str, float] | None = None, where: str = "") -> None:
    """Raises UserError "NAME=VALUE must be ..." unless `value` is a `kind` (int: an
    integer, not a bool; float: a finite int or float) within `bounds` (`BOUNDS` keys)."""
    bounds = bounds or {}
    accepted = (int, float) if kind is float else int
    number = not isinstance(value, bool) and isinstance(value, accepted)
    ok = number and math.isfinite(value) and all(
        _WITHIN[key](value, limit) for key, limit in bounds.items())
    if not ok:
        raise UserError(f"{name}={value!r} must be {_need(kind, bounds)}{where}")


def _need(kind: type, bounds: Mapping[str, float]) -> str:
    """"a positive integer", "a finite number > 0", "a finite number in [0, 1)", ..."""
    if kind is int and bounds == {MINIMUM: 1}:
        return "a positive integer"
    what = "an integer" if kind is int else "a finite number"
    low = next(((k, v) for k, v in bounds.items() if k in (MINIMUM, EXCLUSIVE_MINIMUM)), None)
    high = next(((k, v) for k, v in bounds.items() if k in (MAXIMUM, EXCLUSIVE_MAXIMUM)), None)
    if low and high:
        return (f"{what} in {'[' if low[0] == MINIMUM else '('}{low[1]:g}, "
                f"{high[1]:g}{']' if high[0] == MAXIMUM else ')'}")
    symbols = {MINIMUM: ">=", EXCLUSIVE_MINIMUM: ">", MAXIMUM: "<=", EXCLUSIVE_MAXIMUM: "<"}
    return " ".join([what, *(f"{symbols[k]} {v:g}" for k, v in filter(None, (low, high)))])
