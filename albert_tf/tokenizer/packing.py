"""`[CLS] A [SEP] (B [SEP])` packing and pair truncation: the one definition both Python
tokenizers (`spm.AlbertTokenizer`, `wordpiece.WordPieceTokenizer`) share.

The in-graph side (`AlbertPreprocessor.pack`) does the same with tensorflow-text's
`RoundRobinTrimmer`, `combine_segments` and `pad_model_inputs`. No TensorFlow here.
"""

from __future__ import annotations

from typing import Sequence

from albert_tf.config import SHORT_SEQ_LENGTH, check_sequence_length  # the one length rule

__all__ = ["Packing", "truncate_seq_pair"]


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


class Packing:
    """Packing for a tokenizer that has `encode(text)` and `cls_id`, `sep_id`, `pad_id`."""

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
        """Tokenizes and packs one segment or a pair (see `pack`), as the preprocessor does."""
        check_sequence_length(seq_length)
        ids_b = None if text_b is None else self.encode(text_b)
        return self.pack(self.encode(text_a), ids_b, seq_length)
