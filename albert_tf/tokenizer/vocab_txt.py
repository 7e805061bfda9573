"""vocab.txt, read as the original `load_vocab` and transformers' BertTokenizer read it.

`read_vocab` is the one reader: one token a "\n"-ended line as the original reads it,
UTF-8, no byte-order mark, [PAD] [UNK] [CLS] [SEP] [MASK] present; its id is the line
number - 1. Pure Python, no TensorFlow.
"""

from __future__ import annotations

import codecs
import logging
import os

from albert_tf.errors import UserError
from albert_tf.infra import textio

__all__ = ["VocabFileError", "read_vocab", "SPECIAL_TOKENS", "PAD_TOKEN", "UNK_TOKEN",
           "CLS_TOKEN", "SEP_TOKEN", "MASK_TOKEN"]

logger = logging.getLogger(__name__)

PAD_TOKEN, UNK_TOKEN, CLS_TOKEN, SEP_TOKEN, MASK_TOKEN = "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"
SPECIAL_TOKENS = (PAD_TOKEN, UNK_TOKEN, CLS_TOKEN, SEP_TOKEN, MASK_TOKEN)


class VocabFileError(UserError):
    """A vocab.txt that cannot be used: names the file and the line."""


def read_vocab(path: str | os.PathLike) -> list[str]:
    """The tokens of a vocab.txt, id = line number - 1, read as the original reads it.

    One token a "\\n"-ended line, whatever the line holds: U+2028 (line 344 of the
    21,128-line Chinese vocabulary every Chinese ALBERT ships), U+0085, form feed,
    spaces; a "\\r" before the "\\n" is dropped (Windows line ends). Empty lines and
    repeated tokens are accepted as the original `load_vocab` and BertTokenizer accept
    them (an empty line still takes its id; a repeated token's later line wins the token,
    the earlier id keeps its row), with one warning naming the lines.

    Raises:
      VocabFileError: naming the file and the line: a byte-order mark, bytes that are
        not UTF-8, a missing special token, an empty file.
      FileNotFoundError: no such file.
    """
    path = os.fspath(path)
    if not os.path.lexists(path):
        raise FileNotFoundError(f"WordPiece vocabulary not found: {path}")
    data = textio.read_bytes(path)
    if data.startswith(codecs.BOM_UTF8):
        raise VocabFileError(f"{path}:1: starts with a UTF-8 byte-order mark, which "
                             "BertTokenizer reads as part of the first token; save the file "
                             "without it")
    try:
        text = textio.decode(data, path)
    except textio.EncodingError as err:
        raise VocabFileError(str(err)) from None
    lines = text.split("\n")  # "\n" alone ends a line: not str.splitlines, which splits at U+2028
    if lines and lines[-1] == "":
        lines.pop()  # the final newline ends the last line
    tokens = [line[:-1] if line.endswith("\r") else line for line in lines]
    if not tokens:
        raise VocabFileError(f"{path}: the vocabulary is empty")
    first: dict[str, int] = {}
    for number, token in enumerate(tokens, 1):
        first.setdefault(token, number)
    missing = [t for t in SPECIAL_TOKENS if t not in first]
    if missing:
        raise VocabFileError(f"{path}: has no {', '.join(missing)} line; a WordPiece "
                             f"vocabulary for ALBERT needs {' '.join(SPECIAL_TOKENS)}")
    _warn_unreachable(path, tokens, first)
    return tokens


def _warn_unreachable(path: str, tokens: list[str], first: dict[str, int]) -> None:
    """One warning naming the empty lines and the repeated tokens' lines, if any."""
    empty = [n for n, t in enumerate(tokens, 1) if t == ""]
    repeats = [f"{t!r:.40} on lines {first[t]} and {n}" for n, t in enumerate(tokens, 1)
               if t and first[t] != n]
    parts = []
    if empty:
        parts.append(f"{len(empty)} empty line(s) ({_some(map(str, empty))}), ids no text "
                     "can produce")
    if repeats:
        parts.append(f"{len(repeats)} repeated token(s) ({_some(repeats)}): the later line "
                     "wins the token, as in the original and BertTokenizer, and the earlier "
                     "id keeps a row no text can produce")
    if parts:
        logger.warning("%s: %s", path, "; ".join(parts))


def _some(items, most: int = 5) -> str:
    items = list(items)
    more = f", and {len(items) - most} more" if len(items) > most else ""
    return ", ".join(items[:most]) + more
