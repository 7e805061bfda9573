"""`[CLS] A [SEP] (B [SEP])` packing and pair truncation: the one definition both Python
tokenizers (`spm.AlbertTokenizer`, `wordpiece.WordPieceTokenizer`) share.

The in-graph side (`AlbertPreprocessor.pack`) does the same with tensorflow-text's
`RoundRobinTrimmer`, `combine_segments` and `pad_model_inputs`. No TensorFlow here.
"""

from __future__ import annotations

from collections.abc import Sequence

from albert_tf.config import SHORT_SEQ_LENGTH, check_sequence_length  # the one length rule
from albert_tf.tokenizer.batch import BatchTokenizerMixin

__all__ = ["Packing", "truncate_seq_pair", "cut_text", "text_byte_cap", "MAX_BYTES_PER_TOKEN"]

# The bytes of a text one token of a window can use: no SentencePiece piece is longer than
# 16 characters (max_sentencepiece_length) of at most 4 UTF-8 bytes. A text is cut to
# `text_byte_cap(seq_length)` bytes before it is tokenized whole, so a 1 MB text costs what
# a window costs; what lies past the cap could not reach the window unless the text is
# mostly whitespace or characters normalization drops (or, with WordPiece, words of more
# than 16 characters, each one [UNK] or several pieces).
MAX_BYTES_PER_TOKEN = 64


def text_byte_cap(seq_length: int) -> int:
    """The most bytes of one text a window of `seq_length` tokens reads."""
    return seq_length * MAX_BYTES_PER_TOKEN


def cut_text(text: str | bytes, seq_length: int, keep_last: bool = False) -> str | bytes:
    """`text`'s first (or, `keep_last`, last) `text_byte_cap(seq_length)` UTF-8 bytes,
    as the in-graph preprocessor cuts it (`AlbertPreprocessor.cut`); a character the
    cut splits becomes U+FFFD, as invalid UTF-8 does. Short texts are returned as given."""
    cap = text_byte_cap(seq_length)
    if isinstance(text, str):
        if 4 * len(text) <= cap:  # short: nothing to cut, whatever its characters
            return text
        text = text.encode("utf-8", errors="surrogatepass")
    elif not isinstance(text, bytes):
        raise TypeError(f"text must be str or bytes, got {type(text).__name__}: {text!r:.80}")
    if len(text) <= cap:
        return text
    text = text[len(text) - cap:] if keep_last else text[:cap]
    return text.decode("utf-8", errors="replace")


def truncate_seq_pair(tokens_a: Sequence, tokens_b: Sequence,
                      max_length: int) -> tuple[list, list]:
    """Shortens a pair to `max_length` items in total, the longer one first, B on ties.

    The original `_truncate_seq_pair` (ALBERT's and BERT's). The result equals
    tensorflow-text's `RoundRobinTrimmer` for two segments (tested exhaustively),
    whereas its `ShrinkLongestTrimmer` breaks ties the other way.
    """
    len_a, len_b = len(tokens_a), len(tokens_b)
    while len_a + len_b > max_length:
        if len_a > len_b:
            len_a -= 1
        else:
            len_b -= 1
    return list(tokens_a[:len_a]), list(tokens_b[:len_b])


class Packing(BatchTokenizerMixin):
    """Packing for a tokenizer that has `encode(text)` and `cls_id`, `sep_id`, `pad_id`; the
    batch call (`tok(texts, texts_pair, padding=..., ...)`, `BatchTokenizerMixin`) with it."""

    cls_id: int
    sep_id: int
    pad_id: int

    def encode(self, text: str | bytes) -> list[int]:  # pragma: no cover - each tokenizer's
        raise NotImplementedError

    def pack(self, ids_a: Sequence[int], ids_b: Sequence[int] | None = None,
             seq_length: int = SHORT_SEQ_LENGTH) -> dict[str, list[int]]:
        """Packs token ids as `[CLS] A [SEP] (B [SEP])`, truncated and padded to `seq_length`.

        Returns: {"input_word_ids", "input_mask", "input_type_ids"}, lists of
        `seq_length` ints. A single segment keeps its first `seq_length - 2`
        ids; a pair is cut by `truncate_seq_pair` to `seq_length - 3`. An empty
        B still gets its [SEP] (pass None for a single segment).
        """
        check_sequence_length(seq_length)
        if ids_b is None:
            word_ids = [self.cls_id, *ids_a[:seq_length - 2], self.sep_id]
            type_ids = [0] * len(word_ids)
        else:
            ids_a, ids_b = truncate_seq_pair(ids_a, ids_b, seq_length - 3)
            word_ids = [self.cls_id, *ids_a, self.sep_id, *ids_b, self.sep_id]
            type_ids = [0] * (len(ids_a) + 2) + [1] * (len(ids_b) + 1)
        padding = seq_length - len(word_ids)
        return {
            "input_word_ids": [int(i) for i in word_ids] + [self.pad_id] * padding,
            "input_mask": [1] * len(word_ids) + [0] * padding,
            "input_type_ids": type_ids + [0] * padding,
        }

    def encode_pair(self, text_a: str | bytes, text_b: str | bytes | None = None,
                    seq_length: int = SHORT_SEQ_LENGTH) -> dict[str, list[int]]:
        """Tokenizes and packs one segment or a pair (see `pack`), as the preprocessor does:
        each text cut to what the window can use first (`cut_text`)."""
        check_sequence_length(seq_length)
        ids_b = None if text_b is None else self.encode(cut_text(text_b, seq_length))
        return self.pack(self.encode(cut_text(text_a, seq_length)), ids_b, seq_length)
