"""Text files are UTF-8, and a file read whole is bounded: the one way every reader
turns a file into bytes and bytes into text.

`decode(data, path)` decodes UTF-8 (a leading byte-order mark dropped) or raises
`EncodingError` naming the file, the line, the byte offset and the value of the first
byte that is not UTF-8; `read_text(path)` reads a whole file that way. A reader that
skips what it cannot decode (a corpus) catches `EncodingError` and counts it; every
other reader lets it through as the command's one-line error. No TensorFlow, no Keras.

`check_file(path)` is the one size rule for a file read whole (`read_bytes`,
`read_text`, `read_json_object`; a SentencePiece model, a saved_model.pb, `predict`'s
input): a regular file of at most MAX_FILE_BYTES, else `FileSizeError` naming the
file and the limit, before a byte is read. A device (/dev/zero), a FIFO or a socket
never ends, so it is refused whatever its size. `check_regular(path)` is the same rule
without the size, for a file read as a stream (a corpus, a data file): a missing path
says "no such file", a directory, device, FIFO or socket says what it is; and
`open_regular(path)` opens one without blocking on a FIFO and refuses what it is not.

Example:
    >>> decode(b"caf\\xe9\\n", "menu.txt")
    EncodingError: menu.txt:1: byte 0xe9 at byte offset 3 is not UTF-8 (invalid
    continuation byte); save the file as UTF-8
"""

from __future__ import annotations

import codecs
import json
import os
import stat

from albert_tf.errors import UserError

ENCODING = "utf-8"
# The most bytes a file read whole may hold: configs, task records, shard indexes,
# SentencePiece models, a SavedModel's saved_model.pb, and the data files fine-tuning
# reads whole (GLUE's largest, MNLI's train.tsv, is 0.4 GB). Reading one costs about
# three times its size (bytes, text, parsed values).
MAX_FILE_BYTES = 1 << 30


class FileSizeError(UserError):
    """A file to be read whole that is not a regular file, or is larger than MAX_FILE_BYTES."""


class NotRegularFileError(FileSizeError):
    """A path to be read that is missing, or is a directory, device, FIFO or socket."""


class EncodingError(UserError):
    """Bytes that are not UTF-8, with where they are.

    Attributes:
      path: the file.
      line: the line (from 1) holding the first bad byte.
      offset: that byte's offset in the file (from 0).
      byte: its value.
      reason: the codec's reason ("invalid continuation byte", ...).
    """

    def __init__(self, path: str, line: int, offset: int, byte: int, reason: str):
        self.path, self.line, self.offset, self.byte, self.reason = path, line, offset, byte, reason
        super().__init__(f"{path}:{line}: {self.detail}; save the file as UTF-8")

    @property
    def detail(self) -> str:
        """What is wrong, without the file and line: for a reader's skip counts."""
        return f"byte 0x{self.byte:02x} at byte offset {self.offset} is not UTF-8 ({self.reason})"

    def __reduce__(self):  # crosses process boundaries (create-data's workers) intact
        return type(self), (self.path, self.line, self.offset, self.byte, self.reason)


def decode(data: bytes, path: str | os.PathLike, line: int = 1, offset: int = 0) -> str:
    """`data` as text: UTF-8, a byte-order mark at its start dropped.

    Args:
      data: the bytes: a whole file, or a part of one (a line) starting at `line`
        and at byte `offset` of the file, so the error names the place in the file.
      path: the file, for the error.

    Raises:
      EncodingError: naming the file, line and byte offset of the first bad byte.
    """
    skip = len(codecs.BOM_UTF8) if data.startswith(codecs.BOM_UTF8) else 0
    try:
        return data[skip:].decode(ENCODING)
    except UnicodeDecodeError as e:
        at = skip + e.start
        raise EncodingError(os.fspath(path), line + data.count(b"\n", 0, at), offset + at,
                            data[at], e.reason) from None


def file_kind(mode: int) -> str:
    """What a stat mode is, in words: "a regular file", "a FIFO", "a directory", ..."""
    return ("a regular file" if stat.S_ISREG(mode)
            else "a directory" if stat.S_ISDIR(mode)
            else "a character device" if stat.S_ISCHR(mode)
            else "a block device" if stat.S_ISBLK(mode)
            else "a FIFO" if stat.S_ISFIFO(mode)
            else "a socket" if stat.S_ISSOCK(mode) else "not a file")


def _refuse_irregular(path: str, status: os.stat_result) -> None:
    # a FIFO or device never ends (or blocks the open); a directory is not read as text
    if not stat.S_ISREG(status.st_mode):
        raise NotRegularFileError(f"{path} is {file_kind(status.st_mode)}, not a regular "
                                  "file; albert-tf reads only regular files there")


def _check_status(path: str, status: os.stat_result) -> int:
    _refuse_irregular(path, status)
    if status.st_size > MAX_FILE_BYTES:
        raise FileSizeError(f"{path} holds {status.st_size:,} bytes, more than the "
                            f"{MAX_FILE_BYTES:,} a file read whole may hold")
    return status.st_size


def check_file(path: str | os.PathLike) -> int:
    """The size of `path`, a regular file of at most MAX_FILE_BYTES (links followed):
    the one rule for a file read whole, applied before it is opened.

    Raises:
      FileSizeError: naming the file and what it is (a device, a FIFO, a directory)
        or its size and the limit.
      OSError: it does not exist or cannot be examined.
    """
    path = os.fspath(path)
    return _check_status(path, os.stat(path))


def check_regular(path: str | os.PathLike) -> None:
    """`path` is a regular file (links followed), whatever its size: the rule for a file
    read as a stream, applied before it is opened.

    Raises:
      NotRegularFileError: "PATH: no such file", or naming what it is (a FIFO, a
        directory, a character device).
      OSError: it cannot be examined (no permission on a parent directory).
    """
    path = os.fspath(path)
    try:
        status = os.stat(path)
    except FileNotFoundError:
        raise NotRegularFileError(f"{path}: no such file") from None
    _refuse_irregular(path, status)


def open_regular(path: str | os.PathLike):
    """`path` opened for binary reading, refused unless it is a regular file.

    The open does not block (O_NONBLOCK: a FIFO swapped in after `check_regular` would
    block a plain open until a writer came) and the opened file is the one checked.

    Raises NotRegularFileError as `check_regular`; OSError (unreadable) propagates.
    """
    path = os.fspath(path)
    check_regular(path)
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    try:
        _refuse_irregular(path, os.fstat(fd))
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_bytes(path: str | os.PathLike) -> bytes:
    """The whole file, checked by `check_file` before it is opened (a FIFO would block
    the open) and again on the opened file, and never more than MAX_FILE_BYTES read.

    Raises FileSizeError as `check_file`; OSError (missing, unreadable) propagates.
    """
    path = os.fspath(path)
    check_file(path)
    with open_regular(path) as f:
        size = _check_status(path, os.fstat(f.fileno()))  # the file opened is the one checked
        data = f.read(size + 1)  # not read(MAX_FILE_BYTES + 1), which allocates that much
        if len(data) > size:  # it grew since
            data += f.read(MAX_FILE_BYTES + 1 - len(data))
    if len(data) > MAX_FILE_BYTES:
        raise FileSizeError(f"{path} holds more than the {MAX_FILE_BYTES:,} bytes a file read "
                            "whole may hold")
    return data


def read_text(path: str | os.PathLike) -> str:
    """The whole file as text (`read_bytes`, `decode`); FileSizeError and EncodingError
    name the file; OSError (missing, unreadable) propagates."""
    return decode(read_bytes(path), path)


def read_json_object(path: str | os.PathLike, error: type[UserError] = UserError) -> dict:
    """A JSON file that must hold one object, read with `read_text`.

    Raises `error` naming the file (and line:column for invalid JSON, or the byte for
    bad UTF-8) when it cannot be read, is not a regular file of at most
    MAX_FILE_BYTES, is not JSON, or holds something else.
    """
    path = os.fspath(path)
    try:
        value = json.loads(read_text(path))
    except json.JSONDecodeError as e:
        raise error(f"{path}:{e.lineno}:{e.colno}: invalid JSON: {e.msg}") from None
    except (EncodingError, FileSizeError) as e:
        raise error(str(e)) from None
    except OSError as e:
        raise error(f"{path}: cannot read: {e.strerror or e}") from None
    except RecursionError:  # [[[[... nested deeper than the parser goes
        raise error(f"{path}: invalid JSON: nested too deeply") from None
    if not isinstance(value, dict):
        raise error(f"{path}: expected a JSON object, not {json_type(value)}")
    return value


def json_type(value) -> str:
    """What a JSON value is, in JSON's words: "an array", "a string", ..."""
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool):
        return "a boolean"
    if value is None:
        return "null"
    return "a number"
