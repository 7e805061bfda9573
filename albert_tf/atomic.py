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

`claimed_directory` writes a whole output directory for one writer at a time: it
holds a lock beside the target (".NAME.tmp-lock"; a second writer of the same
target fails at once), removes what killed writers left beside it (hidden
temporaries whose process is gone), stages the directory and renames it into
place, replacing an existing one only when asked. `check_not_input` refuses an
output that is, contains or lies inside one of the command's inputs.

Long because every rule about how an output reaches the disk (temporary names,
renames, claims, clean-up after killed writers) has this one home.

Remote paths (gs://, s3://, ...) go through TensorFlow's file systems, which
`albert_tf.training` and `albert_tf.serving` register when imported (the model
package imports no TensorFlow). No TensorFlow, no Keras here.
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import re
import shutil
import uuid
from typing import Any, Iterable, Iterator

from albert_tf.errors import UserError

try:  # POSIX; elsewhere a claim takes no lock (the staged rename still refuses a race)
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None

TMP_MARK = ".tmp-"  # hidden temporaries are ".NAME.tmp-..."; readers and resumes skip them
LOCK_MARK = ".tmp-lock"  # ".NAME.tmp-lock": the claim of `claimed_directory` on NAME

logger = logging.getLogger(__name__)


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


def missing_parents(path: str) -> list[str]:
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
    created = missing_parents(final_path)
    os.makedirs(os.path.dirname(final_path), exist_ok=True)
    staging = temporary_path(final_path)
    try:
        os.mkdir(staging, mode)
        os.chmod(staging, mode)  # not the umask's: a server may run as another user
        yield staging
        _rename_new(staging, final_path)
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
    old = temporary_path(os.path.normpath(path)) + ".old"  # see remove_stale_temporaries
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


def _rename_new(staging: str, final_path: str, allow_empty: bool = False) -> None:
    """Renames the complete directory `staging` to `final_path`, which must not exist
    (or, with `allow_empty`, be an empty directory): a target that appeared meanwhile,
    another writer's, is refused, never merged with or replaced."""
    appeared = UserError(f"{final_path} appeared while writing it; not overwriting it")
    if os.path.lexists(final_path):
        empty_directory = (os.path.isdir(final_path) and not os.path.islink(final_path)
                           and not os.listdir(final_path))
        if not (allow_empty and empty_directory):
            raise appeared
    try:
        os.rename(staging, final_path)  # over an empty directory only, atomically
    except OSError as e:
        if e.errno in (errno.ENOTEMPTY, errno.EEXIST, errno.ENOTDIR, errno.EISDIR):
            raise appeared from None
        raise


# ------------------------------------------------------------------ claims
def _pid_is_alive(pid: int) -> bool:
    """Whether process `pid` (of this machine) still runs; True when it cannot be told."""
    if pid == os.getpid():
        return True
    if os.name != "posix":  # os.kill would end the process there
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # e.g. another user's process
        return True
    return True


def _acquire_lock(lock: str, path: str) -> int:
    """An open descriptor of `lock`, exclusively locked (flock); UserError when another
    process holds it. A lock file removed by its holder while we opened it is retried."""
    while True:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            holder = os.read(fd, 32).decode("ascii", "replace").strip() or "unknown"
            os.close(fd)
            if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise UserError(f"{path} is being written by another process (pid {holder}); "
                                "wait for it to finish, or choose another output") from None
            raise
        try:
            current = os.stat(lock)
        except FileNotFoundError:
            current = None
        opened = os.fstat(fd)
        if current is not None and (current.st_dev, current.st_ino) == (opened.st_dev,
                                                                         opened.st_ino):
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()}\n".encode("ascii"))
            return fd
        os.close(fd)


@contextlib.contextmanager
def _claim(path: str) -> Iterator[None]:
    """Holds the lock ".NAME.tmp-lock" beside `path` (no lock where flock is missing:
    the staged rename still refuses a target that appeared). The lock file is removed
    on release; a killed holder's lock is released by the kernel and taken over."""
    if fcntl is None:
        yield
        return
    directory, name = os.path.split(path)
    lock = os.path.join(directory, f".{name}{LOCK_MARK}")
    fd = _acquire_lock(lock, path)
    try:
        yield
    finally:
        with contextlib.suppress(OSError):
            os.remove(lock)
        os.close(fd)


def remove_stale_temporaries(path: str | os.PathLike) -> list[str]:
    """Removes the hidden temporaries beside `path` whose writer's process is gone.

    They are what a killed writer of `path` leaves: staging directories and files
    (".NAME.tmp-PID-XXXX", nested ones included) and the previous directory a killed
    `replace_directory` had moved aside (".NAME.tmp-PID-XXXX.old"). When `path` itself
    is missing, that previous directory is put back (the interrupted replacement is
    undone) instead of removed. Temporaries of running processes are left alone;
    the PID is this machine's, so call it only while holding the claim on `path`
    (`claimed_directory` does). Returns the names removed or put back.
    """
    path = os.path.abspath(os.fspath(path))
    directory, name = os.path.split(path)
    pattern = re.compile(r"\.+" + re.escape(name) + re.escape(TMP_MARK) + r"(\d+)-")
    old = re.compile(r"\." + re.escape(name) + re.escape(TMP_MARK) + r"\d+-[0-9a-f]+\.old$")
    stale = sorted((entry for entry in os.listdir(directory)
                    if (m := pattern.match(entry)) and not _pid_is_alive(int(m.group(1)))),
                   key=lambda entry: os.lstat(os.path.join(directory, entry)).st_mtime)
    previous = [entry for entry in stale if old.match(entry)]
    if previous and not os.path.lexists(path):
        os.rename(os.path.join(directory, previous[-1]), path)
        logger.warning("%s: put back the previous directory that an interrupted "
                       "replacement had moved aside (%s)", path, previous[-1])
    for entry in stale:
        full = os.path.join(directory, entry)
        if not os.path.lexists(full):
            continue  # the one put back
        if os.path.isdir(full) and not os.path.islink(full):
            shutil.rmtree(full, ignore_errors=True)
        else:
            with contextlib.suppress(OSError):
                os.remove(full)
    if stale:
        logger.info("%s: cleaned up after killed writers: %s", path, ", ".join(stale))
    return stale


@contextlib.contextmanager
def claimed_directory(path: str | os.PathLike, replace: bool = False,
                      mode: int = 0o755) -> Iterator[str]:
    """Yields an empty hidden staging directory that becomes the whole of `path` on success.

    One writer at a time: `path` is claimed first (a lock beside it, held until the
    end), so a second writer fails at once with a UserError naming it, and what
    killed writers of `path` left beside it is cleaned up (`remove_stale_temporaries`).
    On success the staging directory is renamed to `path`: a new `path` (or an empty
    directory) is simply replaced; an existing non-empty one only with `replace`,
    as a whole (`replace_directory`: a reader sees the old or the new directory, never a
    mixture). On any failure or interrupt the staging directory, the lock and the
    parent directories this call created are removed: `path` is as it was.

    Symbolic links in `path` are resolved (the directory a link points to is the one
    written). Local paths only.

    Raises:
      UserError: another process holds the claim; `path` is not a directory or cannot
        be written; without `replace`, `path` is (or became while writing) a non-empty
        directory.

    Example:
        >>> with claimed_directory("runs/mrpc", replace=args.overwrite) as staging:
        ...     train(output_dir=staging)
    """
    path = os.path.realpath(os.path.abspath(os.fspath(path)))
    # The staging directory and the lock go beside `path`: checked before anything is created.
    check_writable_directory(os.path.dirname(path), f"{path}: its directory")
    created = missing_parents(path)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    try:
        with _claim(path):
            remove_stale_temporaries(path)
            if os.path.lexists(path) and not os.path.isdir(path):
                raise UserError(f"{path} exists and is not a directory")
            exists = os.path.isdir(path)
            if exists and not replace and os.listdir(path):
                raise UserError(f"{path} exists and is not empty; not overwriting it")
            staging = temporary_path(path)
            os.mkdir(staging, mode)
            # not the umask's: a server may run as another user; a replaced directory's own
            os.chmod(staging, (os.stat(path).st_mode & 0o7777) if exists else mode)
            try:
                yield staging
                if replace and os.path.isdir(path) and os.listdir(path):
                    replace_directory(staging, path)
                else:
                    _rename_new(staging, path, allow_empty=True)
            except BaseException:
                shutil.rmtree(staging, ignore_errors=True)
                raise
    except BaseException:
        for directory in reversed(created):
            with contextlib.suppress(OSError):
                os.rmdir(directory)  # only if still empty
        raise


def link_entries(source: str | os.PathLike, target: str | os.PathLike,
                 names: Iterable[str]) -> None:
    """Puts the entries `names` of directory `source` into directory `target` as hard
    links (files), recreated folders and copied symbolic links: cheap, and a file a
    writer still holds open stays the same file. Where the file system cannot link,
    the file is copied. For carrying files over into a `claimed_directory` staging
    directory that replaces `source`."""
    for name in names:
        src, dst = os.path.join(source, name), os.path.join(target, name)
        if os.path.islink(src):
            os.symlink(os.readlink(src), dst)
        elif os.path.isdir(src):
            shutil.copytree(src, dst, symlinks=True, copy_function=_link_or_copy)
        else:
            _link_or_copy(src, dst)


def _link_or_copy(src: str, dst: str) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def _inside(path: str, directory: str) -> bool:
    return path == directory or path.startswith(directory.rstrip(os.sep) + os.sep)


def check_not_input(output: str | os.PathLike, inputs: Iterable[tuple[str, str]],
                    option: str, consequence: str) -> None:
    """Refuses an output that is, lies inside or contains one of a command's inputs.

    Args:
      output: the output path as the user gave it.
      inputs: (what, path) pairs, e.g. ("--checkpoint directory", "albert_base/").
      option: how the output is named on the command line ("--output", "DST").
      consequence: what writing it would do, for the message.

    Raises:
      UserError: "OPTION OUTPUT is|lies inside|contains the WHAT REALPATH; CONSEQUENCE"
        (symbolic links resolved on both sides).
    """
    target = os.path.realpath(os.fspath(output))
    for what, path in inputs:
        source = os.path.realpath(os.fspath(path))
        if _inside(target, source) or _inside(source, target):
            relation = ("is" if target == source else "lies inside" if _inside(target, source)
                        else "contains")
            raise UserError(f"{option} {output} {relation} the {what} {source}; {consequence}")
