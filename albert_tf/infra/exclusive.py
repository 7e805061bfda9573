"""Files created only by us and final names taken only when free: the primitives under
`albert_tf.infra.atomic`.

`create_exclusive(path)` makes a new regular file with O_CREAT|O_EXCL|O_NOFOLLOW: a
name that exists already (a planted symbolic link, a FIFO, someone's file) is never
opened, followed or truncated. `open_existing_lock(path)` opens a lock file a killed
writer left (taken over only when it is a regular file with one link, owned by us;
a link, FIFO, device or directory there is refused naming it). `publish(tmp, path,
replace)` renames a finished temporary to its final name: with `replace` the usual
atomic replace; without it the final name is taken exclusively at the rename
(renameat2 RENAME_NOREPLACE, else a hard link then unlink), so a file that appeared
meanwhile, or a concurrent writer's, is refused and left as it is.

No TensorFlow, no Keras; POSIX (elsewhere O_NOFOLLOW is 0 and the exclusive rename
falls back to a check before the rename).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
import stat

from albert_tf.errors import UserError

O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
O_NONBLOCK = getattr(os, "O_NONBLOCK", 0)  # opening a FIFO planted there must not block
_RENAME_NOREPLACE = 1  # linux/fs.h


class OutputExistsError(UserError):
    """The final name of an output appeared while it was written (not replaced)."""


def kind_of(mode: int) -> str:
    """What a non-regular file is, for a message ("a symbolic link", "a FIFO", ...)."""
    for test, name in ((stat.S_ISLNK, "a symbolic link"), (stat.S_ISFIFO, "a FIFO"),
                       (stat.S_ISDIR, "a directory"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


def refuse_existing(path: str, what: str) -> UserError:
    """The one line for a name we meant to create that something else holds."""
    try:
        mode = os.lstat(path).st_mode
    except OSError:
        return UserError(f"{what} {path} appeared while creating it; not touching it")
    kind = "a file" if stat.S_ISREG(mode) else kind_of(mode)
    return UserError(f"{what} {path} is {kind} that albert-tf did not create; not following "
                     "or replacing it: remove it or choose another output")


def create_exclusive(path: str | os.PathLike, mode: int = 0o666, what: str = "temporary file",
                     flags: int = os.O_WRONLY) -> int:
    """A descriptor of the new regular file `path` (O_CREAT|O_EXCL|O_NOFOLLOW).

    Raises:
      UserError: `path` exists (whatever it is: a link is never followed).
    """
    path = os.fspath(path)
    try:
        return os.open(path, flags | os.O_CREAT | os.O_EXCL | O_NOFOLLOW, mode)
    except FileExistsError:
        raise refuse_existing(path, what) from None


def open_exclusive(path: str | os.PathLike, mode: str = "w", encoding: str | None = "utf-8",
                   what: str = "temporary file"):
    """`open(path, mode)` for a new file only (`create_exclusive`): "w", "wb" or "x"."""
    fd = create_exclusive(path, what=what)
    try:
        return os.fdopen(fd, mode.replace("x", "w"),
                         encoding=None if "b" in mode else encoding)
    except BaseException:
        os.close(fd)
        raise


def open_existing_lock(path: str) -> int:
    """A read-write descriptor of the lock file `path` another (perhaps killed) writer
    made: taken only when it is a regular file with one link owned by this user, opened
    without following a link or blocking on a FIFO.

    Raises:
      UserError: a link, FIFO, device, directory, a file with other hard links or
        another user's file where the lock should be, naming it.
    """
    try:
        fd = os.open(path, os.O_RDWR | O_NOFOLLOW | O_NONBLOCK)
    except OSError as e:
        if e.errno in (errno.ELOOP, errno.EMLINK, errno.ENXIO, errno.EISDIR, errno.EWOULDBLOCK):
            raise refuse_existing(path, "lock file") from None
        raise
    status = os.fstat(fd)
    if (not stat.S_ISREG(status.st_mode) or status.st_nlink != 1
            or (hasattr(os, "geteuid") and status.st_uid != os.geteuid())):
        os.close(fd)
        why = ("has other hard links" if stat.S_ISREG(status.st_mode) and status.st_nlink != 1
               else "belongs to another user" if stat.S_ISREG(status.st_mode)
               else f"is {kind_of(status.st_mode)}")
        raise UserError(f"lock file {path} {why}; albert-tf did not create it and does not "
                        "write into it: remove it or choose another output")
    return fd


def _renameat2():
    """libc's renameat2, or None where it is missing (not Linux, an old glibc)."""
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name, use_errno=True)
        function = libc.renameat2
    except (OSError, AttributeError, TypeError):
        return None
    function.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p,
                         ctypes.c_uint]
    function.restype = ctypes.c_int
    return function


_RENAMEAT2 = _renameat2()
_AT_FDCWD = -100


def rename_noreplace(src: str, dst: str) -> None:
    """Renames `src` to `dst` only if `dst` does not exist, atomically.

    renameat2(RENAME_NOREPLACE) where the kernel and file system have it; else a hard
    link (which fails on an existing name) then unlink of `src`; else (a file system
    without either) a check then a rename, the one window left.

    Raises:
      FileExistsError: `dst` exists (nothing changed).
    """
    if _RENAMEAT2 is not None:
        result = _RENAMEAT2(_AT_FDCWD, os.fsencode(src), _AT_FDCWD, os.fsencode(dst),
                            _RENAME_NOREPLACE)
        if result == 0:
            return
        code = ctypes.get_errno()
        if code == errno.EEXIST:
            raise FileExistsError(code, os.strerror(code), dst)
        if code not in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP, errno.EOPNOTSUPP):
            raise OSError(code, os.strerror(code), src)
    if not os.path.isdir(src):
        try:
            os.link(src, dst, follow_symlinks=False)
        except FileExistsError:
            raise
        except OSError as e:
            if e.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV,
                               errno.EMLINK):
                raise
        else:
            os.unlink(src)
            return
    if os.path.lexists(dst):
        raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), dst)
    os.rename(src, dst)


def publish(tmp: str | os.PathLike, path: str | os.PathLike, replace: bool,
            what: str = "") -> None:
    """Renames the finished `tmp` to `path`: replacing it only with `replace`.

    Raises:
      OutputExistsError: without `replace`, `path` exists (it appeared while writing,
        or a concurrent run took it first); `tmp` is left for the caller to remove.
    """
    tmp, path = os.fspath(tmp), os.fspath(path)
    if replace:
        os.replace(tmp, path)
        return
    try:
        rename_noreplace(tmp, path)
    except FileExistsError:
        label = f"{what} {path}".strip()
        raise OutputExistsError(f"{label} appeared while writing it (another run, or another "
                                "program); not replacing it, nothing was written") from None
