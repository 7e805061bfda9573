"""`albert-tf predict --output FILE` survives a failed or killed run: the rerun continues.

While a run writes FILE, its rows go to `FILE.partial` (visible: it is the user's work so
far), one complete JSON line per input row in input order, flushed as each batch is
written; beside it `FILE.partial.json` records what the rows are predictions of: the
SHA-256 of the input file and the options that change a row (signature, model, version,
input format). FILE appears (renamed from FILE.partial) only when every row is written.

A rerun with the same --output finds FILE.partial: when its record matches this run's,
the rows it holds (its complete lines; a line cut off by a kill is dropped) are kept and
the run continues with the next input row, appending; nothing is asked twice, nothing is
written twice. A record of another input or options is refused, naming what differs,
unless --overwrite (then the run starts again). A FILE.partial without its record is not
ours and is never touched. One writer per output at a time (`atomic.claimed`). A run that
fails before its first row is written leaves nothing behind.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
from collections.abc import Iterator, Mapping
from typing import Any

from albert_tf.errors import UserError
from albert_tf.infra import atomic
from albert_tf.infra.exclusive import open_exclusive, publish

from ..requests import ReplyError
from . import replies

PARTIAL_SUFFIX = ".partial"
RECORD_SUFFIX = ".partial.json"
# 2: output lines begin with their row's index (`run.output_line`); a partial output of
# format 1 has none, so it is not continued.
RECORD_FORMAT = 2
_HASH_CHUNK = 1 << 20

logger = logging.getLogger(__name__)


class ResumeError(UserError):
    """A FILE.partial that this run cannot continue (one line, exit 2)."""


def input_sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as stream:
        for chunk in iter(lambda: stream.read(_HASH_CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def run_record(input_path: str, options: Mapping[str, Any]) -> dict:
    """What FILE.partial.json holds for a run over `input_path` with `options`."""
    return {"format": RECORD_FORMAT, "input_sha256": input_sha256(input_path),
            "options": dict(options)}


def _differences(old: Any, new: dict) -> str:
    if not isinstance(old, dict) or old.get("format") != RECORD_FORMAT:
        return "a record this version cannot read"
    if old.get("input_sha256") != new["input_sha256"]:
        return "another input (its SHA-256 differs)"
    options = old.get("options") if isinstance(old.get("options"), dict) else {}
    changed = [f"{k} {options.get(k)!r} -> {v!r}" for k, v in new["options"].items()
               if options.get(k) != v]
    return "other options (" + ", ".join(changed) + ")" if changed else ""


class Written:
    """What the rows of a FILE.partial may be: at most `input_rows` rows (the input's),
    each a prediction of the signature's outputs `specs` (`replies.check_row`)."""

    def __init__(self, input_rows: int, specs: Mapping[str, tuple[Any, int | None]]):
        self.input_rows, self.specs = input_rows, specs


def complete_rows(partial: str, written: Written | None = None) -> int:
    """The number of complete JSON lines of `partial`; a trailing cut-off line is cut off
    the file (a run killed while writing it). ResumeError, the file untouched, when a
    complete line is not a JSON object, not a prediction row of `written.specs`, or past
    the input's `written.input_rows` rows (the file was edited, or is another's)."""
    count, end = 0, 0
    with open(partial, "rb") as stream:
        for number, line in enumerate(stream, 1):
            if not line.endswith(b"\n"):
                break
            try:
                row = json.loads(line)
            except ValueError:
                row = None
            if not isinstance(row, dict):
                _refuse(f"{partial}:{number}: not a prediction row (a JSON object)")
            if written is not None:
                if count >= written.input_rows:
                    _refuse(f"{partial}:{number}: a row past the input's last row (the input "
                            f"holds {written.input_rows} rows)")
                if row.get(replies.INDEX_KEY) != count:
                    _refuse(f"{partial}:{number}: {replies.INDEX_KEY!r} is "
                            f"{str(row.get(replies.INDEX_KEY))[:40]}, not this line's input row "
                            f"{count}")
                try:
                    replies.check_row({k: v for k, v in row.items() if k != replies.INDEX_KEY},
                                      written.specs, f"{partial}:{number}")
                except ReplyError as e:
                    _refuse(f"not a prediction row of this model: {e}")
            count, end = count + 1, end + len(line)
    if os.path.getsize(partial) != end:
        os.truncate(partial, end)
    return count


def _refuse(what: str):
    raise ResumeError(f"{what}; it cannot be continued: remove it, or pass --overwrite to "
                      "start again")


def _open_partial(partial: str, record_path: str, record: dict, overwrite: bool,
                  written: Written | None = None):
    """(append stream, rows already written) of FILE.partial: continued, or started."""
    if os.path.lexists(partial):
        if not os.path.isfile(partial) or os.path.islink(partial):
            raise ResumeError(f"{partial} exists and is not a regular file; move it away")
        try:
            with open(record_path, encoding="utf-8") as f:
                old = json.load(f)
        except (OSError, ValueError):
            raise ResumeError(f"{partial} exists but {record_path} does not say what it holds; "
                              "it was not written by albert-tf predict: move it away") from None
        why = _differences(old, record)
        if not why:
            try:
                done = complete_rows(partial, written)
                return open(partial, "a", encoding="utf-8"), done
            except ResumeError:
                if not overwrite:
                    raise
        elif not overwrite:
            raise ResumeError(f"{partial} holds the predictions of a run over {why}; pass "
                              "--overwrite to start again, or remove it")
        os.remove(partial)
    atomic.atomic_write_json(record_path, record)  # first: a partial file never lacks one
    return open_exclusive(partial, "w", "utf-8"), 0


@contextlib.contextmanager
def resumable_output(path: str, record: dict, overwrite: bool, written: Written | None = None
                     ) -> Iterator[tuple[Any, int]]:
    """Yields (stream, rows already written) for the JSONL output `path`; the rows of a
    FILE.partial continued are checked against `written` first.

    Write the rows after the first `done` input rows to `stream`, flushing as they go. On
    success FILE.partial is fsynced and renamed to `path` (an existing `path` replaced only
    with `overwrite`) and the record removed; on any failure both stay for the rerun.
    """
    with atomic.claimed(os.path.abspath(path)):
        partial, record_path = path + PARTIAL_SUFFIX, path + RECORD_SUFFIX
        stream, done = _open_partial(partial, record_path, record, overwrite, written)
        if done:
            logger.info("continuing %s: %d rows were written before", partial, done)
        try:
            with atomic.naming_write_failures(path, f"the rows so far stay in {partial}"):
                with stream:
                    yield stream, done
                    stream.flush()
                    os.fsync(stream.fileno())
                publish(partial, path, overwrite, "--output")
        except BaseException:
            _keep_or_remove(partial, record_path)
            raise
        with contextlib.suppress(OSError):
            os.remove(record_path)


def _keep_or_remove(partial: str, record_path: str) -> None:
    """After a failure: a FILE.partial holding rows stays for the rerun; an empty one
    (the first request failed) is removed with its record, leaving nothing, as before."""
    with contextlib.suppress(OSError):
        if os.path.getsize(partial) == 0:
            os.remove(partial)
            os.remove(record_path)
            return
    logger.warning("the rows written so far stay in %s; run the same command again to "
                   "continue", partial)
