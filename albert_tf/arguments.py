"""Command-line arguments: the one argument parser class and the one KEY=VALUE grammar.

`ArgumentParser` raises `UsageError` (one line, exit 2) instead of printing usage;
`parse_overrides` / `json_value` read the `KEY=VALUE` items of pretrain's
positional overrides and finetune's `--set`. No TensorFlow, no Keras.
"""

from __future__ import annotations

import argparse
import json
from typing import Any, Sequence

from albert_tf.errors import UsageError, UserError


class ArgumentParser(argparse.ArgumentParser):
    """argparse that raises UsageError (one line, exit 2) instead of printing its usage."""

    def error(self, message):
        raise UsageError(message)



def parse_override(item: str, flag: str = "override") -> tuple[str, str]:
    """"KEY=VALUE" -> (KEY, VALUE text); KEY is a name (dots allowed), VALUE may be empty."""
    key, sep, text = item.partition("=")
    key = key.strip()
    if not sep or not key or not all(part.isidentifier() for part in key.split(".")):
        raise UsageError(f"{flag} {item!r}: expected KEY=VALUE")
    return key, text


def parse_overrides(items: Sequence[str], flag: str = "override") -> dict[str, str]:
    """KEY=VALUE items -> {KEY: VALUE text}, in order; a key given twice is an error."""
    result: dict[str, str] = {}
    for item in items:
        key, text = parse_override(item, flag)
        if key in result:
            raise UsageError(f"{flag} {key}: given twice ({result[key]!r} and {text!r})")
        result[key] = text
    return result


def json_value(text: str) -> Any:
    """An override's value: JSON where it parses (numbers, true/false/null, lists), else the text.

    NaN and infinities are refused: no hyperparameter may be one.
    """
    try:
        value = json.loads(text, parse_constant=_refuse_constant)
    except json.JSONDecodeError:
        return text
    return value


def _refuse_constant(name: str):
    raise UsageError(f"{name} is not a valid value")


def require_positive(name: str, value: Any, where: str = "") -> None:
    """Raises UserError unless `value` is an int >= 1 (no `0 means default`)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise UserError(f"{name}={value!r} must be a positive integer{where}")
