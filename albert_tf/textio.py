"""Text files are UTF-8: the one way every reader turns bytes into text.

`decode(data, path)` decodes UTF-8 (a leading byte-order mark dropped) or raises
`EncodingError` naming the file, the line, the byte offset and the value of the first
byte that is not UTF-8; `read_text(path)` reads a whole file that way. A reader that
skips what it cannot decode (a corpus) catches `EncodingError` and counts it; every
other reader lets it through as the command's one-line error. No TensorFlow, no Keras.

Example:
    >>> decode(b"caf\\xe9\\n", "menu.txt")
    EncodingError: menu.txt:1: byte 0xe9 at byte offset 3 is not UTF-8 (invalid
    continuation byte); save the file as UTF-8
"""

from __future__ import annotations

import codecs
import json
import os

from albert_tf.errors import UserError

ENCODING = "utf-8"


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


def read_text(path: str | os.PathLike) -> str:
    """The whole file as text (`decode`); OSError (missing, unreadable) propagates."""
    with open(path, "rb") as f:
        return decode(f.read(), path)


def read_json_object(path: str | os.PathLike, error: type[UserError] = UserError) -> dict:
    """A JSON file that must hold one object, read with `read_text`.

    Raises `error` naming the file (and line:column for invalid JSON, or the byte for
    bad UTF-8) when it cannot be read, is not JSON, or holds something else.
    """
    path = os.fspath(path)
    try:
        value = json.loads(read_text(path))
    except json.JSONDecodeError as e:
        raise error(f"{path}:{e.lineno}:{e.colno}: invalid JSON: {e.msg}") from None
    except EncodingError as e:
        raise error(str(e)) from None
    except OSError as e:
        raise error(f"{path}: cannot read: {e.strerror or e}") from None
    if not isinstance(value, dict):
        raise error(f"{path}: expected a JSON object")
    return value
