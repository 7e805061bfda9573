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

`check_replaceable` is the one rule for an output that exists already: a command
replaces only what it writes, and only when asked (`--overwrite`, `--force`); a
directory holding anything else is refused, naming it. `check_resumable` is its
form for directories a command writes into and resumes (create-data, pretrain,
ablate). `claimed_directory` writes a whole output directory for one writer at a
time: it holds a lock beside the target (".NAME.tmp-lock"; a second writer of the
same target fails at once), removes what killed writers left beside it (hidden
temporaries whose process is gone), stages the directory and renames it into
place, replacing an existing one only when asked and the rule allows it; `claimed`
holds the same lock for a command that writes into its directory in place
(pretrain, demo). `check_not_input` refuses an output that is, contains or lies
inside one of the command's inputs.

Long because every rule about how an output reaches the disk (temporary names,
renames, claims, clean-up after killed writers) has this one home.

Remote paths (gs://, s3://, ...) go through TensorFlow's file systems (tf.io.gfile),
imported when the first remote path is met (`remote_filesystem`), never on import:
no TensorFlow, no Keras at this module's level.
"""

from __future__ import annotations

import contextlib
import errno
import fnmatch
import json
import logging
import os
import re
import shutil
import uuid
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from albert_tf.errors import UserError
from albert_tf.infra.exclusive import create_exclusive, open_exclusive, open_existing_lock, publish

try:  # POSIX; elsewhere a claim takes no lock (the staged rename still refuses a race)
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None

TMP_MARK = ".tmp-"  # hidden temporaries are ".NAME.tmp-..."; readers and resumes skip them
LOCK_MARK = ".tmp-lock"  # ".NAME.tmp-lock": the claim of `claimed_directory` on NAME

logger = logging.getLogger(__name__)


def _is_remote(path: str) -> bool:
    return "://" in path


# Remote file systems (gs://, s3://, ...) are TensorFlow's. The model package imports no
# TensorFlow at module level, so tf.io.gfile is imported here on the first remote path
# (a local path never pays for TensorFlow's start-up); importing a package registers
# nothing. `register_remote_filesystem` sets another: anything with GFile(path, mode),
# rename(src, dst, overwrite) and remove(path) will do.
_remote_filesystem = None


def register_remote_filesystem(filesystem) -> None:
    """Sets the file system that atomic writes use for `scheme://` paths (None: TensorFlow's,
    on the next remote path)."""
    global _remote_filesystem
    _remote_filesystem = filesystem


def remote_filesystem(path: str):
    """The file system for the remote `path`: the registered one, else tf.io.gfile
    (TensorFlow imported now, and registered for the next remote path)."""
    if _remote_filesystem is None:
        try:
            import tensorflow as tf  # deferred: only a remote path needs TensorFlow
        except ImportError:
            raise UserError(f"{path}: writing to a remote path needs TensorFlow's file systems "
                            "(pip install tensorflow)") from None
        register_remote_filesystem(tf.io.gfile)
    return _remote_filesystem


# A write the disk refused: the output cannot be written, whatever the input.
_WRITE_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS)


def write_failure(error: BaseException, path: str | os.PathLike,
                  consequence: str = "nothing was written") -> UserError | None:
    """`error` as one line naming the output `path` (never its hidden temporary name) when
    it is a refused write: a full disk, a quota, a read-only file system (an OSError, or
    TensorFlow's, h5py's or safetensors' error carrying the same reason); else None."""
    reason = None
    if isinstance(error, UserError):  # named already (an inner output's own line)
        return None
    if isinstance(error, OSError) and error.errno in _WRITE_ERRNOS:
        reason = error.strerror or os.strerror(error.errno)
    else:
        text = str(getattr(error, "message", error))
        reason = next((os.strerror(code) for code in _WRITE_ERRNOS
                       if os.strerror(code) in text), None)
    if reason is None:
        return None
    return UserError(f"cannot write {os.fspath(path)}: {reason}; {consequence}")


@contextlib.contextmanager
def naming_write_failures(path: str | os.PathLike,
                          consequence: str = "nothing was written") -> Iterator[None]:
    """Re-raises a refused write inside the block as one line naming `path`
    (`write_failure`); other errors pass unchanged."""
    try:
        yield
    except Exception as e:  # noqa: BLE001 - only refused writes are translated
        named = write_failure(e, path, consequence)
        if named is None:
            raise
        raise named from None


def temporary_path(path: str) -> str:
    """A hidden sibling of `path` (same directory, so the final rename is atomic)."""
    directory, name = os.path.split(path)
    return os.path.join(directory, f".{name}{TMP_MARK}{os.getpid()}-{uuid.uuid4().hex[:8]}")


def is_temporary(name: str) -> bool:
    return name.startswith(".") and TMP_MARK in name


@contextlib.contextmanager
def atomic_write(path: str | os.PathLike, mode: str = "w", encoding: str | None = "utf-8",
                 *, replace: bool = True):
    """Opens a hidden temporary beside `path`; on success it is fsynced and renamed to `path`.

    The temporary is created exclusively (O_CREAT|O_EXCL|O_NOFOLLOW: a link planted
    there is never followed). `replace`: an existing `path` is replaced (a file inside
    a directory the command owns, claimed or staged); False: the final name is taken
    exclusively at the rename, so a file that appeared meanwhile (another run's) is
    refused (`exclusive.OutputExistsError`) and kept: a user's single-file output.
    On any failure the temporary is removed and `path` is untouched. Remote paths
    (gs://...) go through `remote_filesystem`, tf.io.gfile unless another is set (no fsync
    there; its rename is the commit).

    Example:
        >>> with atomic_write("out/summary.json") as f:
        ...     f.write("{}")
    """
    path = os.fspath(path)
    tmp = temporary_path(path)
    binary = "b" in mode
    if _is_remote(path):
        fs = remote_filesystem(path)
        try:
            with fs.GFile(tmp, mode) as f:
                yield f
            fs.rename(tmp, path, overwrite=replace)
        except BaseException:
            with contextlib.suppress(Exception):
                fs.remove(tmp)
            raise
        return
    with naming_write_failures(path):
        stream = open_exclusive(tmp, mode, None if binary else encoding)  # nothing of ours yet
    try:
        with naming_write_failures(path):
            with stream as f:
                yield f
                f.flush()
                os.fsync(f.fileno())
            publish(tmp, path, replace)
    except BaseException:
        with contextlib.suppress(OSError):
            os.remove(tmp)
        raise


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike, *, replace: bool = True,
                suffix: str = "") -> Iterator[str]:
    """Yields a hidden temporary path for writers that open the file themselves
    (e.g. tf.io.TFRecordWriter); on success it is fsynced and renamed to `path`,
    on failure removed. The writer must be closed inside the block. The temporary
    exists already, created exclusively (an empty regular file of ours, so nothing
    planted under its name is followed); `replace` as in `atomic_write`; `suffix`
    ends the temporary name (a writer that checks it: Keras' ".keras").
    """
    path = os.fspath(path)
    tmp = temporary_path(path) + suffix
    fs = remote_filesystem(path) if _is_remote(path) else None
    if fs is None:
        with naming_write_failures(path):
            os.close(create_exclusive(tmp))  # a name planted there is not ours to remove
    try:
        with naming_write_failures(path):
            yield tmp
            if fs is not None:
                fs.rename(tmp, path, overwrite=replace)
            else:
                commit(tmp, path, replace=replace)
    except BaseException:
        with contextlib.suppress(Exception):
            if fs is not None:
                fs.remove(tmp)
            else:
                os.remove(tmp)
        raise


def commit(tmp: str | os.PathLike, path: str | os.PathLike, *, replace: bool = True) -> None:
    """Fsyncs the finished local file `tmp` (a `temporary_path` of `path`) and renames
    it to `path`: for tools that write a file by name (SentencePiece's trainer).
    Without `replace` the final name is taken exclusively (`exclusive.publish`)."""
    fd = os.open(tmp, os.O_RDONLY | os.O_NOFOLLOW)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    publish(tmp, path, replace)


def commit_group(files: list[tuple[str, str]], *, replace: bool = False) -> None:
    """Commits several finished temporaries [(tmp, final), ...] as one output: all or none.

    Each final name is taken exclusively, in the order given (put the file readers open
    last: a kill between the renames then leaves no reader-visible half). With `replace`
    the existing finals are moved aside first and put back if a new one cannot be placed;
    without it an existing final is refused and kept.
    """
    placed, aside = [], []
    try:
        if replace:
            for _, final in files:
                if os.path.lexists(final):
                    aside.append((temporary_path(final) + ".old", final))
                    os.replace(final, aside[-1][0])
        for tmp, final in files:
            commit(tmp, final, replace=False)
            placed.append(final)
    except BaseException:
        for final in placed:
            os.remove(final)  # ours: taken exclusively just now
        for old, final in aside:
            os.replace(old, final)
        raise
    for old, _ in aside:
        os.remove(old)


def atomic_write_json(path: str | os.PathLike, data: Any, indent: int = 2,
                      sort_keys: bool = False, ensure_ascii: bool = True, *,
                      replace: bool = True) -> None:
    """Writes `data` as JSON (one trailing newline) with `atomic_write`.

    The text is made before the file is opened: data that JSON cannot hold (a set,
    an object) fails with nothing written.
    """
    text = json.dumps(data, indent=indent, sort_keys=sort_keys, ensure_ascii=ensure_ascii) + "\n"
    with atomic_write(path, replace=replace) as f:
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
        with naming_write_failures(final_path):
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
    if os.statvfs(existing).f_flag & os.ST_RDONLY:
        raise UserError(f"{what} {path} is not writable: {existing} is on a read-only file "
                        "system")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise UserError(f"{what} {path} is not writable: no write permission in {existing}")
    probe = os.path.join(existing, f".write-test{TMP_MARK}{os.getpid()}-{uuid.uuid4().hex[:8]}")
    try:
        os.close(create_exclusive(probe))
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


# ------------------------------------------------------- replacing an output
def _listed(names: Sequence[str]) -> str:
    return ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")


def _entries(directory: str) -> list[str]:
    """The entries of `directory`, hidden temporaries (ours, killed writers') aside."""
    return sorted(name for name in os.listdir(directory) if not is_temporary(name))


def _is_written(name: str, writes: Sequence[str]) -> bool:
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in writes)


def check_replaceable(path: str | os.PathLike, writes: Sequence[str] | None = None, *,
                      replace: bool = False, option: str = "", flag: str | None = None,
                      product: str = "an output", writer: str = "this command",
                      keep_others: bool = False, error: type[UserError] = UserError
                      ) -> list[str]:
    """The one rule for an output that exists: replaced only when asked, and then only
    what the command writes. Every command runs it before any work.

    A missing `path` may be written; so may an empty directory (hidden temporaries
    aside). A file output (`writes` None) that exists is refused unless `replace`. A
    directory output that holds entries the command does not write (`writes`: names or
    glob patterns) is refused naming them, `replace` or not, unless `keep_others` (they
    are carried over); one holding only what it writes is refused unless `replace`.

    Args:
      path: the output as the user gave it.
      writes: the entries the command writes into the directory; None: `path` is a file.
      replace: the user asked to replace it (`flag`).
      option: how the output is named on the command line ("--output", "DST").
      flag: the option that asks to replace it ("--overwrite"); None: the command
        never replaces (a new name is the answer).
      product: what the command writes, for the message ("a checkpoint").
      writer: who writes it, for the message ("fine-tuning").
      keep_others: other entries are allowed (returned, for the caller to carry over).
      error: the UserError subclass to raise.

    Returns:
      The entries of the directory the command does not write (only with `keep_others`).

    Raises:
      `error`: "OPTION PATH holds files WRITER does not write (a, b); not replacing it",
        "OPTION PATH already holds PRODUCT; pass FLAG to replace it", "... exists", or
        a file where a directory is expected and the reverse.
    """
    path = os.fspath(path)
    if _is_remote(path) or not os.path.lexists(path):
        return []
    label = f"{option} {path}".strip()
    if writes is None:
        if os.path.isdir(path):
            raise error(f"{label} is a directory; give a file name")
        if not replace:
            asked = f"pass {flag} to replace it" if flag else "choose another name"
            raise error(f"{label} exists; {asked}")
        return []
    if not os.path.isdir(path):
        raise error(f"{label} exists and is not a directory")
    entries = _entries(path)
    others = [name for name in entries if not _is_written(name, writes)]
    if others and not keep_others:
        raise error(f"{label} holds files {writer} does not write ({_listed(others)}); "
                    "not replacing it: move them away or choose another directory")
    if len(entries) > len(others) and not replace:
        asked = f"pass {flag} to replace it" if flag else "choose another directory"
        raise error(f"{label} already holds {product}; {asked}")
    return others


def check_resumable(path: str | os.PathLike, writes: Sequence[str], markers: Sequence[str],
                    option: str, writer: str) -> None:
    """The rule for a directory a command writes into and resumes (create-data's shards,
    pretrain's checkpoints, ablate's runs): its own earlier run, recognised by one of
    `markers`, is continued; entries it writes (`writes`, names or glob patterns) in a
    directory without a marker are someone else's, and are refused, naming them. Other
    entries are left alone: such a command deletes nothing it did not write.

    Raises:
      UserError: "OPTION PATH holds a, b, which WRITER did not write; not overwriting them".
    """
    path = os.fspath(path)
    if _is_remote(path) or not os.path.isdir(path):
        return
    entries = _entries(path)
    if any(_is_written(name, markers) for name in entries):
        return
    clashes = [name for name in entries if _is_written(name, writes)]
    if clashes:
        raise UserError(f"{option} {path} holds {_listed(clashes)}, which {writer} did not "
                        "write; not overwriting them: choose another directory")


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
    process holds it. The lock file is created exclusively (O_CREAT|O_EXCL|O_NOFOLLOW);
    one a killed holder left is taken over only when it is a regular file of ours with
    one link (`exclusive.open_existing_lock`: a link or FIFO planted there is refused,
    naming it, and never written). A lock file removed by its holder meanwhile is retried.
    """
    while True:
        try:
            fd = create_exclusive(lock, 0o644, "lock file", os.O_RDWR)
        except UserError:
            try:
                fd = open_existing_lock(lock)
            except FileNotFoundError:
                continue  # its holder removed it meanwhile
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
            current = os.lstat(lock)
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
def claimed(path: str | os.PathLike) -> Iterator[str]:
    """Holds the claim on the directory `path` while a command writes into it in place
    (pretrain's checkpoints, the demo's stages): a second run into the same `path` fails
    at once with a UserError naming the first one's process id. Yields the resolved path;
    the lock is released (and its file removed) at the end, by the kernel if the process
    dies. Remote paths take no claim (no lock across machines).
    """
    path = os.fspath(path)
    if _is_remote(path):
        yield path
        return
    path = os.path.realpath(os.path.abspath(path))
    check_writable_directory(os.path.dirname(path), f"{path}: its directory")
    created = missing_parents(path)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    try:
        with _claim(path), naming_write_failures(path, "what was complete before it is kept"):
            yield path
    except BaseException:
        for directory in reversed(created):
            with contextlib.suppress(OSError):
                os.rmdir(directory)  # only if still empty
        raise


@contextlib.contextmanager
def claimed_directory(path: str | os.PathLike, replace: bool = False,
                      mode: int = 0o755, *, writes: Sequence[str] | None = None,
                      keep_others: bool = False, error: type[UserError] = UserError,
                      ) -> Iterator[str]:
    """Yields an empty hidden staging directory that becomes the whole of `path` on success.

    One writer at a time: `path` is claimed first (a lock beside it, held until the
    end), so a second writer fails at once with a UserError naming it, and what
    killed writers of `path` left beside it is cleaned up (`remove_stale_temporaries`).
    On success the staging directory is renamed to `path`: a new `path` (or an empty
    directory) is simply replaced; an existing non-empty one only with `replace`,
    and only when it holds nothing but `writes` (`check_replaceable`, checked again
    under the claim; `keep_others`: the caller carries the other entries over), as a
    whole (`replace_directory`: a reader sees the old or the new directory, never a
    mixture). On any failure or interrupt the staging directory, the lock and the
    parent directories this call created are removed: `path` is as it was.

    Symbolic links in `path` are resolved (the directory a link points to is the one
    written). Local paths only.

    Raises:
      UserError: another process holds the claim; `path` is not a directory or cannot
        be written; without `replace`, `path` is (or became while writing) a non-empty
        directory; it holds entries the writer does not write.

    Example:
        >>> with claimed_directory("runs/mrpc", replace=args.overwrite,
        ...                        writes=RUN_ENTRIES) as staging:
        ...     train(output_dir=staging)
    """
    if replace and writes is None:
        raise TypeError("claimed_directory(replace=True) needs `writes`: what may be replaced")
    path = os.path.realpath(os.path.abspath(os.fspath(path)))
    # The staging directory and the lock go beside `path`: checked before anything is created.
    check_writable_directory(os.path.dirname(path), f"{path}: its directory")
    created = missing_parents(path)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    try:
        with _claim(path):
            remove_stale_temporaries(path)
            if os.path.lexists(path) and not os.path.isdir(path):
                raise error(f"{path} exists and is not a directory")
            exists = os.path.isdir(path)
            if exists and writes is not None:
                check_replaceable(path, writes, replace=True, keep_others=keep_others,
                                  error=error)
            if exists and not replace and os.listdir(path):
                raise error(f"{path} exists and is not empty; not overwriting it")
            staging = temporary_path(path)
            os.mkdir(staging, mode)
            # not the umask's: a server may run as another user; a replaced directory's own
            os.chmod(staging, (os.stat(path).st_mode & 0o7777) if exists else mode)
            try:
                with naming_write_failures(path):  # a full disk: the output, not the staging
                    yield staging
                    if replace and os.path.isdir(path) and os.listdir(path):
                        replace_directory(staging, path)
                    else:
                        _rename_new(staging, path, allow_empty=True)
            except UserError as e:
                shutil.rmtree(staging, ignore_errors=True)
                if staging not in str(e):
                    raise
                # A writer inside (save_checkpoint into the staging directory) named it:
                # the user knows the output by its own name.
                message = str(e).replace(staging, path)
                try:
                    renamed = type(e)(message)
                except TypeError:  # an error class with other arguments
                    renamed = UserError(message)
                raise renamed from None
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
