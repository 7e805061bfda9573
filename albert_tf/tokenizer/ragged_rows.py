"""Ragged token rows in TensorFlow ops: the preprocessor's cuts and its digit-comma table.

* `trim_segments`: the original `_truncate_seq_pair` on one or two [B, (n)] segments;
* `keep_first` / `keep_last`: the first or last tokens of each row;
* `digit_comma_table`: each SentencePiece id's ids after the digit-comma rule.
"""

from __future__ import annotations

import logging

import numpy as np
import tensorflow as tf

from albert_tf.tokenizer.spm import AlbertTokenizer

__all__ = ["digit_comma_table", "keep_first", "keep_last", "trim_segments"]

logger = logging.getLogger(__name__)


def digit_comma_table(tokenizer: AlbertTokenizer) -> tuple[np.ndarray, np.ndarray]:
    """Each vocabulary id's ids after the digit-comma rule, as ragged (values, row_lengths).

    The rule depends only on the piece, so it is applied once per vocabulary
    piece by the Python tokenizer itself. Unknown text comes out of
    SentencePiece as one `<unk>` piece per run of unknown characters; such a run
    cannot end in "," when "," is a piece, so the table covers every case then.
    """
    if tokenizer.piece_to_id(",") == tokenizer.unk_id:
        logger.warning("%s has no ',' piece: an unknown digit before a comma yields one <unk> "
                       "in the graph where the Python tokenizer gives two",
                       tokenizer.spm_model_path)
    rows = []
    for piece_id in range(tokenizer.vocab_size):
        pieces = tokenizer.split_piece(tokenizer.id_to_piece(piece_id))
        rows.append([piece_id] if len(pieces) == 1 else [tokenizer.piece_to_id(p) for p in pieces])
    return (np.array([i for row in rows for i in row], np.int32),
            np.array([len(row) for row in rows], np.int64))


def keep_first(ids: tf.RaggedTensor, counts: tf.Tensor) -> tf.RaggedTensor:
    """The first `counts[b]` items of each row b of a [B, (n)] ragged tensor."""
    rows = ids.value_rowids()
    position = tf.range(tf.size(ids.flat_values, out_type=tf.int64)) - tf.gather(
        ids.row_starts(), rows)
    keep = position < tf.gather(tf.cast(counts, tf.int64), rows)
    return tf.RaggedTensor.from_value_rowids(tf.boolean_mask(ids.flat_values, keep),
                                             tf.boolean_mask(rows, keep), nrows=ids.nrows())


def keep_last(ids: tf.RaggedTensor, count: int) -> tf.RaggedTensor:
    """The last `count` items of each row of a [B, (n)] ragged tensor."""
    return ids[:, -count:]


def trim_segments(segments: list[tf.RaggedTensor], budget: int) -> list[tf.RaggedTensor]:
    """One or two segments [B, (n)] cut to `budget` tokens per row by the original
    `_truncate_seq_pair` (`spm.truncate_seq_pair`: the longer loses first, B on ties).

    tensorflow-text's RoundRobinTrimmer gives the same rows, but its op (TFText>RoundRobinTrim)
    is missing from the tensorflow-text that TF Serving 2.12-2.19 link; the closed form of
    the rule in core ops serves there: A keeps min(la, max(ceil(m/2), m - lb)), B the rest.
    """
    lengths = [tf.cast(s.row_lengths(), tf.int32) for s in segments]  # [B] each
    if len(segments) == 1:
        keep = [tf.minimum(lengths[0], budget)]
    else:
        len_a, len_b = lengths
        keep_a = tf.minimum(len_a, tf.maximum((budget + 1) // 2, budget - len_b))
        keep = [keep_a, tf.minimum(len_b, budget - keep_a)]
    return [tf.ragged.boolean_mask(s, tf.ragged.range(n) < k[:, None])
            for s, n, k in zip(segments, lengths, keep)]
