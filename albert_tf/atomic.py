"""Outputs written whole or not at all: hidden temporary name, fsync, rename.

`atomic_write` / `atomic_write_json` / `atomic_path` (one file) and
`staged_directory` (a whole directory) write under a hidden temporary name beside
the target (".NAME.tmp-PID-XXXX") and rename it into place only when complete, so a
reader never sees a partial output and a failure leaves nothing behind. `commit`
(a finished file that a tool wrote under `temporary_path`) and `replace_directory`
(a finished directory in place of an existing one) are the same last step for
writers that cannot write through a file object. Every output of every command is
written by this module: no other module renames an output into place.
`check_writable_directory` refuses an unwritable output before any work is done.

Remote paths (gs://, s3://, ...) go through TensorFlow's file systems, which
`albert_tf.training` and `albert_tf.serving` register when imported (the model
package imports no TensorFlow). No TensorFlow, no Keras here.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import uuid
from typing import Any, Iterator

from albert_tf.errors import UserError

TMP_MARK = ".tmp-"  # hidden temporaries are ".NAME.tmp-..."; readers and resumes skip them


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
            commit(tmp, path)
    except BaseException:
        with contextlib.suppress(Exception):
            if fs is not None:
                fs.remove(tmp)
            else:
                os.remove(tmp)
        raise


def commit(tmp: str | os.PathLike, path: str | os.PathLike) -> None:
    """Fsyncs the finished local file `tmp` (a `temporary_path` of `path`) and renames
    it to `path`: for tools that write a file by name (SentencePiece's trainer)."""
    fd = os.open(tmp, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)


def atomic_write_json(path: str | os.PathLike, data: Any, indent: int = 2,
                      sort_keys: bool = False, ensure_ascii: bool = True) -> None:
    """Writes `data` as JSON (one trailing newline) with `atomic_write`.

    The text is made before the file is opened: data that JSON cannot hold (a set,
    an object) fails with nothing written.
    """
    text = json.dumps(data, indent=indent, sort_keys=sort_keys, ensure_ascii=ensure_ascii) + "\n"
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


def replace_directory(staging: str | os.PathLike, path: str | os.PathLike) -> None:
    """Puts the complete directory `staging` (a `temporary_path` of `path`) in place of
    the existing directory `path`, then removes the old tree.

    Two renames: `path` to a hidden sibling, `staging` to `path`; if the second fails
    the old directory is put back. A reader sees the old or the new directory, never
    a mixture, and never a half-written one.
    """
    staging, path = os.fspath(staging), os.fspath(path)
    old = temporary_path(os.path.normpath(path) + ".old")
    os.replace(path, old)
    try:
        os.replace(staging, path)
    except BaseException:
        os.replace(old, path)
        raise
    shutil.rmtree(old, ignore_errors=True)


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

