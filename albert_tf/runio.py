"""Run plumbing shared by every `albert-tf` command and library writer.

One home for:
  * `UserError`: bad input the user can fix. Every module's error class derives
    from it; a command reports it as one line `albert-tf COMMAND: message` on
    stderr and exits with status 2.
  * `command`: the wrapper around each command's `main(argv)` that turns errors
    into that one line (unexpected ones too, with a hint to rerun with `--debug`,
    which shows the traceback).
  * `setup_logging`: one log format for all commands.
  * `atomic_write` / `atomic_write_json` / `staged_directory`: outputs are
    written under a hidden temporary name, flushed to disk and renamed, so a
    reader never sees a partial file and a failure leaves nothing behind.
  * `parse_overrides`: the one `KEY=VALUE` grammar of `--set` and pretrain's
    positional overrides.

Imports nothing heavy (no TensorFlow, no Keras): the model package uses it too.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import functools
import json
import logging
import os
import shutil
import sys
import traceback
import uuid
from typing import Any, Callable, Iterator, Sequence

DEBUG_ENV = "ALBERT_TF_DEBUG"
LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
TMP_MARK = ".tmp-"  # hidden temporaries are ".NAME.tmp-..."; readers and resumes skip them


class UserError(ValueError):
    """Bad input the user can fix: reported as one line naming what and where, exit 2.

    A ValueError so that library callers catching ValueError keep working.
    `exit_status` is the command's exit status (2; a subclass for trouble that is
    not the input's, such as an unreachable server, uses 1).
    """

    exit_status = 2


class UsageError(UserError):
    """A bad command line (unknown option, missing argument, malformed value)."""


class ArgumentParser(argparse.ArgumentParser):
    """argparse that raises UsageError (one line, exit 2) instead of printing its usage."""

    def error(self, message):
        raise UsageError(message)


# ------------------------------------------------------------------ commands
def debug_enabled() -> bool:
    return os.environ.get(DEBUG_ENV, "") not in ("", "0")


def set_debug(enabled: bool) -> None:
    """`--debug`: tracebacks instead of one-line errors (also for child processes)."""
    if enabled:
        os.environ[DEBUG_ENV] = "1"


def _os_error_line(e: OSError) -> str:
    where = e.filename if e.filename is not None else ""
    if getattr(e, "filename2", None):
        where = f"{where} -> {e.filename2}"
    reason = e.strerror or str(e)
    return f"{where}: {reason}" if where else reason


def _user_facing(e: BaseException) -> str | None:
    """The one-line message of an error the user can act on, else None."""
    if isinstance(e, UserError):
        return str(e)
    if isinstance(e, (FileNotFoundError, FileExistsError, PermissionError, IsADirectoryError,
                      NotADirectoryError)):
        return _os_error_line(e) if e.filename is not None else str(e)
    if isinstance(e, OSError) and (e.filename is not None or e.errno in (
            errno.ENOSPC, errno.EACCES, errno.EROFS, errno.EDQUOT, errno.ENOENT)):
        return _os_error_line(e)
    tf = sys.modules.get("tensorflow")
    if tf is not None and isinstance(e, (tf.errors.NotFoundError, tf.errors.PermissionDeniedError,
                                         tf.errors.DataLossError, tf.errors.ResourceExhaustedError)):
        # TensorFlow's file errors carry the path in their message; keep its first line.
        return f"{type(e).__name__}: {str(e.message).strip().splitlines()[0]}"
    return None


def report_error(name: str, e: BaseException) -> int:
    """Prints one line for `e` on stderr; returns the exit status (2: user error, 1: bug)."""
    message = _user_facing(e)
    if message is not None:
        print(f"albert-tf {name}: {message}", file=sys.stderr)
        return getattr(e, "exit_status", 2)
    first = str(e).strip().splitlines()[0] if str(e).strip() else ""
    print(f"albert-tf {name}: unexpected error: {type(e).__name__}"
          f"{': ' + first if first else ''} (rerun with --debug for the traceback)",
          file=sys.stderr)
    return 1


def command(name: str) -> Callable[[Callable[..., int]], Callable[..., int]]:
    """Decorates a command's `main(argv)`: errors become one line on stderr and a status.

    UserError (and file-system errors naming their path) -> status 2; anything
    else -> status 1 with a hint; with `--debug` (ALBERT_TF_DEBUG=1) the
    traceback is printed in full instead.
    """
    def wrap(main: Callable[..., int]) -> Callable[..., int]:
        @functools.wraps(main)
        def run(*args, **kwargs) -> int:
            try:
                return int(main(*args, **kwargs) or 0)
            except KeyboardInterrupt:
                print(f"albert-tf {name}: interrupted", file=sys.stderr)
                return 130
            except Exception as e:  # noqa: BLE001 - the one place errors become exit codes
                if debug_enabled():
                    traceback.print_exc()
                    return getattr(e, "exit_status", 2) if _user_facing(e) is not None else 1
                return report_error(name, e)
        return run
    return wrap


def setup_logging(level: int = logging.INFO) -> None:
    """One log format for every command (INFO by default; DEBUG with --debug)."""
    logging.basicConfig(level=logging.DEBUG if debug_enabled() else level, format=LOG_FORMAT,
                        datefmt="%H:%M:%S")


# -------------------------------------------------------------- atomic writes
def _is_remote(path: str) -> bool:
    return "://" in path


# Remote file systems (gs://, s3://, ...) are TensorFlow's: the model package imports no
# TensorFlow, so `albert_tf.training` and `albert_tf.serving` register `tf.io.gfile` here
# when they are imported. Anything with GFile(path, mode), rename(src, dst, overwrite)
# and remove(path) will do.
_remote_filesystem = None


def register_remote_filesystem(filesystem) -> None:
    """Sets the file system that atomic writes use for `scheme://` paths."""
    global _remote_filesystem
    _remote_filesystem = filesystem


def _remote_fs(path: str):
    if _remote_filesystem is None:
        raise UserError(f"{path}: writing to a remote path needs TensorFlow's file systems "
                        "(import albert_tf.training or albert_tf.serving first)")
    return _remote_filesystem


def temporary_path(path: str) -> str:
    """A hidden sibling of `path` (same directory, so the final rename is atomic)."""
    directory, name = os.path.split(path)
    return os.path.join(directory, f".{name}{TMP_MARK}{os.getpid()}-{uuid.uuid4().hex[:8]}")


def is_temporary(name: str) -> bool:
    return name.startswith(".") and TMP_MARK in name


@contextlib.contextmanager
def atomic_write(path: str | os.PathLike, mode: str = "w", encoding: str | None = "utf-8"):
    """Opens a hidden temporary beside `path`; on success it is fsynced and renamed to `path`.

    On any failure the temporary is removed and `path` is untouched. Remote paths
    (gs://...) go through the registered remote file system, tf.io.gfile (no fsync
    there; its rename is the commit).

    Example:
        >>> with atomic_write("out/summary.json") as f:
        ...     f.write("{}")
    """
    path = os.fspath(path)
    tmp = temporary_path(path)
    binary = "b" in mode
    if _is_remote(path):
        fs = _remote_fs(path)
        try:
            with fs.GFile(tmp, mode) as f:
                yield f
            fs.rename(tmp, path, overwrite=True)
        except BaseException:
            with contextlib.suppress(Exception):
                fs.remove(tmp)
            raise
        return
    try:
        with open(tmp, mode, encoding=None if binary else encoding) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.remove(tmp)
        raise


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[str]:
    """Yields a hidden temporary path for writers that open the file themselves
    (e.g. tf.io.TFRecordWriter); on success it is fsynced and renamed to `path`,
    on failure removed. The writer must be closed inside the block.
    """
    path = os.fspath(path)
    tmp = temporary_path(path)
    fs = _remote_fs(path) if _is_remote(path) else None
    try:
        yield tmp
        if fs is not None:
            fs.rename(tmp, path, overwrite=True)
        else:
            fd = os.open(tmp, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(Exception):
            if fs is not None:
                fs.remove(tmp)
            else:
                os.remove(tmp)
        raise


def atomic_write_json(path: str | os.PathLike, data: Any, indent: int = 2,
                      sort_keys: bool = False) -> None:
    """Writes `data` as JSON (one trailing newline) with `atomic_write`."""
    text = json.dumps(data, indent=indent, sort_keys=sort_keys) + "\n"
    with atomic_write(path) as f:
        f.write(text)


def _missing_parents(path: str) -> list[str]:
    """The ancestors of `path` that do not exist yet, outermost first."""
    missing = []
    parent = os.path.dirname(os.path.abspath(path))
    while parent and not os.path.exists(parent):
        missing.append(parent)
        up = os.path.dirname(parent)
        if up == parent:
            break
        parent = up
    return missing[::-1]


@contextlib.contextmanager
def staged_directory(final_path: str | os.PathLike, mode: int = 0o755) -> Iterator[str]:
    """Yields an empty hidden directory beside `final_path`, renamed to it on success.

    On failure the staging directory is removed, and so are the parent
    directories this call created, so a failed command leaves no empty output
    directory behind. `final_path` must not exist (the caller decides about
    overwriting before staging).
    """
    final_path = os.path.abspath(os.fspath(final_path))
    created = _missing_parents(final_path)
    os.makedirs(os.path.dirname(final_path), exist_ok=True)
    staging = temporary_path(final_path)
    try:
        os.mkdir(staging, mode)
        os.chmod(staging, mode)  # not the umask's: a server may run as another user
        yield staging
        if os.path.exists(final_path):
            raise UserError(f"{final_path} appeared while writing it; not overwriting it")
        os.rename(staging, final_path)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        for directory in reversed(created):
            with contextlib.suppress(OSError):
                os.rmdir(directory)  # only if still empty
        raise


def check_writable_directory(path: str, what: str = "output directory") -> None:
    """Raises UserError unless `path` is (or can be made) a writable directory.

    Creates nothing that is not already there: it probes the nearest existing
    ancestor, so a refused run leaves no empty directory.
    """
    if _is_remote(path):
        return
    path = os.path.abspath(path)
    existing = path
    while not os.path.exists(existing):
        existing = os.path.dirname(existing)
    if not os.path.isdir(existing):
        raise UserError(f"{what} {path} is not writable: {existing} is not a directory")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise UserError(f"{what} {path} is not writable: no write permission in {existing}")
    probe = os.path.join(existing, f".write-test{TMP_MARK}{os.getpid()}-{uuid.uuid4().hex[:8]}")
    try:
        with open(probe, "w"):
            pass
    except OSError as e:
        raise UserError(f"{what} {path} is not writable: {existing}: {e.strerror}") from None
    finally:
        with contextlib.suppress(OSError):
            os.remove(probe)


# ------------------------------------------------------------ KEY=VALUE grammar
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
