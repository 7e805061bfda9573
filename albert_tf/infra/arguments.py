"""Command-line arguments: the one argument parser class and the one KEY=VALUE grammar.

`ArgumentParser` raises `UsageError` (one line, exit 2) instead of printing usage.
`parse_overrides` splits the `KEY=VALUE` items of pretrain's positional overrides and
finetune's `--set`; `convert_overrides` turns each VALUE text into a value of the
dataclass field KEY names, by the field's type:

  bool          true / false (also yes / no, 1 / 0; any case)
  int           an integer: 128
  float         a finite number: 2e-5 (nan and inf are refused, naming the field)
  str           the text as is
  list[X]       comma-separated X: 32,64,128; `none` or nothing is the empty list
  dict          a JSON object: {"hidden_size": 64}
  X | None      `none` (or `null`) is None, unless the field names its own word for
                None in its metadata (`{NONE_WORD: "auto"}`: jit_compile=auto); else X

`check_numbers` is the one range check of numeric hyperparameters: a field declares its
range next to its default (`number_field(2e-5, exclusive_minimum=0.0)`), and every
command checks its settings with it (finite, of the field's type, within the range;
one line naming the field and the value) before any data is read.

No TensorFlow, no Keras.
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import json
import logging
import math
import sys
import types
import typing
from collections.abc import Mapping, Sequence
from typing import Any

from albert_tf.errors import UsageError
from albert_tf.ranges import BOUNDS, MINIMUM, check_number

# Field metadata key: the word that spells None for that field (instead of none / null).
NONE_WORD = "none_word"
_NONE_WORDS = ("none", "null")
_TRUE_WORDS = ("true", "yes", "1")
_FALSE_WORDS = ("false", "no", "0")
HINT = "hint"  # field metadata: what to do instead of a refused value


class _StoreOnce(argparse._StoreAction):
    """A single-valued option given twice is refused, not silently the last one."""

    def __call__(self, parser, namespace, values, option_string=None):
        given = namespace.__dict__.setdefault(_GIVEN, {})
        if self.dest in given:
            raise UsageError(f"{option_string} is given twice ({given[self.dest]!r}, then "
                             f"{values!r}); give it once")
        given[self.dest] = values
        setattr(namespace, self.dest, values)


_GIVEN = "_albert_tf_given"  # the single-valued options met so far in one parse


class _Renamed(_StoreOnce):
    """An option with its old spelling still accepted (`add_renamed`): the old one warns."""

    old = ""

    def __call__(self, parser, namespace, values, option_string=None):
        if option_string == self.old:
            logging.getLogger("albert_tf").warning(
                "%s is now %s; the old name goes in a later release", self.old,
                self.option_strings[0])
        super().__call__(parser, namespace, values, option_string)


def add_renamed(parser: argparse.ArgumentParser, new: str, old: str, **kwargs) -> None:
    """`new` (its help shown), with `old` accepted for one release and warned about."""
    action = type("Renamed", (_Renamed,), {"old": old})
    parser.add_argument(new, old, action=action, **kwargs)


class ArgumentParser(argparse.ArgumentParser):
    """argparse that raises UsageError (one line, exit 2) instead of printing its usage.

    The one rule for a repeated option, in every command: a list option (`nargs` "+"
    or "*") accumulates (`--data A --data B` is `--data A B`; `--set a=1 --set b=2`
    is `--set a=1 b=2`, a key given twice refused by the override grammar); a
    single-valued one given twice is refused naming both values.
    """

    def error(self, message):
        raise UsageError(message)

    def add_argument(self, *args, **kwargs):
        if kwargs.get("action") in (None, "store") and args and args[0].startswith("-"):
            if kwargs.get("nargs") in ("+", "*"):
                kwargs["action"] = "extend"
            elif kwargs.get("nargs") in (None, "?"):
                kwargs["action"] = _StoreOnce
        return super().add_argument(*args, **kwargs)

    def parse_known_args(self, args=None, namespace=None):
        namespace, extras = super().parse_known_args(args, namespace)
        namespace.__dict__.pop(_GIVEN, None)
        return namespace, extras

    def parse_args(self, args=None, namespace=None):
        """argparse's, with a mistyped option refused first, naming the closest one
        (before a missing required option is reported: the typo is the cause)."""
        self.check_options(sys.argv[1:] if args is None else list(args))
        return super().parse_args(args, namespace)

    def parse_intermixed_args(self, args=None, namespace=None):
        """argparse's, with `parse_args`' check of mistyped options first."""
        self.check_options(sys.argv[1:] if args is None else list(args))
        return super().parse_intermixed_args(args, namespace)

    def check_options(self, args: Sequence[str]) -> None:
        """Refuses the first `--option` of `args` that names none of this parser's
        options (nor abbreviates exactly one): "unrecognized option --chekpoint; did
        you mean --checkpoint?" when one is close (`suggestion`)."""
        known = [s for s in self._option_string_actions if s.startswith("--")]
        for arg in args:
            if arg == "--":
                return
            option = arg.split("=", 1)[0]
            if not option.startswith("--") or option in known or (
                    self.allow_abbrev and any(k.startswith(option) for k in known)):
                continue
            options = [k for k in known if k != "--help"]  # never the suggestion for a typo
            raise UsageError(f"unrecognized option {option}{suggestion(option, options)}")


def suggestion(word: str, choices: Sequence[str]) -> str:
    """"; did you mean X?" for the choice closest to a mistyped `word` (difflib), or ""."""
    close = difflib.get_close_matches(word, list(choices), n=1)
    return f"; did you mean {close[0]}?" if close else ""



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


def convert_overrides(fields_of: Any, overrides: Mapping[str, str], flag: str = "override",
                      exclude: Sequence[str] = (), prefix: str = "") -> dict[str, Any]:
    """{KEY: VALUE text} -> {KEY: value}, each converted by the type of the dataclass field KEY.

    Args:
      fields_of: the dataclass (or an instance) whose fields the keys name.
      overrides: from `parse_overrides`.
      flag: names the option in messages ("override", "--set").
      exclude: fields that may not be set this way.
      prefix: put before the key in messages ("albert." for pretrain's model fields).

    Raises UsageError naming the option, the key and the text for an unknown key or a
    text that is not a value of the field's type (see the module docstring).

    Example:
        >>> convert_overrides(TrainConfig, {"learning_rate": "3e-5", "buckets": "32,64"}, "--set")
        {'learning_rate': 3e-05, 'buckets': [32, 64]}
    """
    cls = fields_of if isinstance(fields_of, type) else type(fields_of)
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init and f.name not in exclude}
    hints = typing.get_type_hints(cls)
    values = {}
    for key, text in overrides.items():
        if key not in fields:
            raise UsageError(f"{flag} {prefix + key!r}: unknown key")
        kind, none_word = hints[key], fields[key].metadata.get(NONE_WORD)
        try:
            values[key] = _convert(text, kind, none_word)
        except ValueError:
            raise UsageError(f"{flag} {prefix}{key}={text!r}: expected "
                             f"{_describe(kind, none_word)}") from None
    return values


def _optional(kind: Any) -> Any | None:
    """X for `X | None` / `Optional[X]`; None for any other type."""
    if typing.get_origin(kind) not in (typing.Union, types.UnionType):
        return None
    others = [a for a in typing.get_args(kind) if a is not type(None)]
    if len(others) != 1 or len(typing.get_args(kind)) != 2:
        raise TypeError(f"no override grammar for the field type {kind}")
    return others[0]


def _convert(text: str, kind: Any, none_word: str | None = None) -> Any:
    """`text` as a value of `kind`; ValueError if it is not one."""
    word = text.strip().lower()
    inner = _optional(kind)
    if inner is not None:
        return None if word in ((none_word,) if none_word else _NONE_WORDS) else \
            _convert(text, inner)
    origin = typing.get_origin(kind)
    if kind is bool:
        if word in _TRUE_WORDS or word in _FALSE_WORDS:
            return word in _TRUE_WORDS
        raise ValueError(text)
    if kind is int:
        return int(word)
    if kind is float:
        value = float(word)
        if not math.isfinite(value):  # no hyperparameter may be NaN or infinite
            raise ValueError(text)
        return value
    if kind is str:
        return text
    if origin in (list, tuple):
        item = typing.get_args(kind)[0] if typing.get_args(kind) else str
        parts = [] if word in ("", "none") else text.strip().split(",")
        items = [_convert(part, item) for part in parts]
        return items if origin is list else tuple(items)
    if kind is dict or origin is dict:
        value = json.loads(text, parse_constant=_refuse_constant)  # JSONDecodeError: ValueError
        if not isinstance(value, dict):
            raise ValueError(text)
        return value
    raise TypeError(f"no override grammar for the field type {kind}")


def _describe(kind: Any, none_word: str | None = None) -> str:
    """What `_convert` accepts for `kind`, for error messages."""
    inner = _optional(kind)
    if inner is not None:
        return f"{_describe(inner)} or {none_word or 'none'}"
    origin = typing.get_origin(kind)
    if origin in (list, tuple):
        args = typing.get_args(kind)
        return f"comma-separated values (each {_describe(args[0] if args else str)})"
    return {bool: "true or false", int: "an integer", float: "a finite number", str: "text",
            dict: "a JSON object"}.get(origin or kind, str(kind))


def _refuse_constant(name: str):
    raise ValueError(f"{name} is not a valid value")


def require_positive(name: str, value: Any, where: str = "") -> None:
    """Raises UserError unless `value` is an int >= 1 (no `0 means default`)."""
    check_number(name, value, int, {MINIMUM: 1}, where)


def positive_int(text: str) -> int:
    """An argparse `type`: a whole number >= 1, else a usage error naming the value."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} must be >= 1")
    return value


def number_field(default: Any, hint: str = "", **bounds: float) -> Any:
    """A dataclass field holding a number in a range `check_numbers` checks.

    Args:
      default: the field's default.
      hint: what to do instead, added to the message ("omit it to read it from the data").
      bounds: any of minimum, exclusive_minimum, maximum, exclusive_maximum.

    Example:
        >>> learning_rate: float = number_field(2e-5, exclusive_minimum=0.0)
    """
    unknown = set(bounds) - set(BOUNDS)
    if unknown:
        raise TypeError(f"number_field: unknown bounds {sorted(unknown)}; use {', '.join(BOUNDS)}")
    return dataclasses.field(default=default, metadata={**bounds, **({HINT: hint} if hint else {})})


def check_numbers(fields_of: Any, values: Mapping[str, Any] | None = None, where: str = "",
                  names: Mapping[str, str] | None = None) -> None:
    """Checks the numbers of a dataclass: each of the field's type and within its range.

    Every `int` field must hold an integer (not a bool), every `float` field a finite
    number (NaN and infinities are refused whatever the range), `X | None` fields may
    also hold None; the range is the field's metadata (`number_field`). This is the one
    numeric check of every command's hyperparameters (finetune, pretrain, create-data),
    run before any data is read.

    Args:
      fields_of: the dataclass, or an instance (then its values are checked).
      values: {field: value} to check instead of the instance's (only those given).
      where: appended to the message (e.g. " (in run.json)").
      names: how the user spelled a field ({"learning_rate": "--learning-rate"}).

    Raises:
      UserError: one line, "NAME=VALUE must be ...", for the first bad value.
    """
    cls = fields_of if isinstance(fields_of, type) else type(fields_of)
    hints = typing.get_type_hints(cls)
    if values is None:
        values = {f.name: getattr(fields_of, f.name) for f in dataclasses.fields(cls)}
    for field in dataclasses.fields(cls):
        kind = _numeric(hints[field.name])
        if kind is None or field.name not in values:
            continue
        value = values[field.name]
        if value is None and kind[1]:
            continue
        bounds = {k: v for k, v in field.metadata.items() if k in BOUNDS}
        hint = f" ({field.metadata[HINT]})" if HINT in field.metadata else ""
        check_number((names or {}).get(field.name, field.name), value, kind[0], bounds,
                     hint + where)


def _numeric(kind: Any) -> tuple[type, bool] | None:
    """(int or float, whether None is allowed) for int, float and their `| None`; else None."""
    if kind in (int, float):
        return kind, False
    if typing.get_origin(kind) in (typing.Union, types.UnionType):
        args = typing.get_args(kind)
        others = [a for a in args if a is not type(None)]
        if len(args) == 2 and len(others) == 1 and others[0] in (int, float):
            return others[0], True
    return None
