"""Ragged token rows in TensorFlow ops: the preprocessor's cuts, its packing and its
digit-comma table.

* `trim_segments`: the original `_truncate_seq_pair` on one or two [B, (n)] segments;
* `keep_first` / `keep_last`: the first or last tokens of each row;
* `keep_where` / `row_ids` / `positions`: the items a mask keeps, each item's row (for
  the normaliser's code points too), and its place in that row;
* `pack_rows`: `[CLS] A [SEP] (B [SEP])` padded to the sequence length;
* `digit_comma_table`: each SentencePiece id's ids after the digit-comma rule.

These are written with a few core ops each (a position per item, then one gather or
scatter): every text graph traces them, and `tf.ragged.boolean_mask`, `value_rowids` or
tensorflow-text's `combine_segments` and `pad_model_inputs` trace several times the ops.
"""

from __future__ import annotations

import logging

import numpy as np
import tensorflow as tf

from albert_tf.tokenizer.spm import AlbertTokenizer

__all__ = ["digit_comma_table", "keep_first", "keep_last", "keep_where", "pack_rows", "positions",
           "row_ids", "trim_segments"]

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


def row_ids(ids: tf.RaggedTensor) -> tf.Tensor:
    """Each value's row, for the values of the outer ragged dimension of `ids`: its
    `value_rowids`, by a binary search of the row ends (`value_rowids` traces twice the ops)."""
    splits = ids.row_splits
    index = tf.range(splits[-1])
    return tf.searchsorted(splits[1:], index, side="right", out_type=splits.dtype)


def positions(ids: tf.RaggedTensor) -> tuple[tf.Tensor, tf.Tensor]:
    """Each flat value's row and its position in that row, for [B, (n)] (both of the
    row splits' dtype)."""
    rows = row_ids(ids)
    return rows, tf.range(ids.row_splits[-1]) - tf.gather(ids.row_splits, rows)


def keep_where(ids: tf.RaggedTensor, keep: tf.Tensor) -> tf.RaggedTensor:
    """The items of [B, (n)] whose flat `keep` [N] is true, rows kept (what
    `tf.ragged.boolean_mask` gives, in a few ops)."""
    kept_before = tf.concat([tf.zeros([1], ids.row_splits.dtype),
                             tf.cumsum(tf.cast(keep, ids.row_splits.dtype))], 0)
    return tf.RaggedTensor.from_row_splits(tf.gather(ids.values, tf.where(keep)[:, 0]),
                                           tf.gather(kept_before, ids.row_splits), validate=False)


def keep_first(ids: tf.RaggedTensor, counts: tf.Tensor) -> tf.RaggedTensor:
    """The first `counts[b]` items of each row b of a [B, (n)] ragged tensor (none where
    `counts[b]` is negative)."""
    lengths = ids.row_lengths()
    keep = tf.minimum(tf.maximum(tf.cast(counts, lengths.dtype), 0), lengths)
    rows, position = positions(ids)
    kept = tf.where(position < tf.gather(keep, rows))[:, 0]
    return tf.RaggedTensor.from_row_lengths(tf.gather(ids.values, kept), keep, validate=False)


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
    return [keep_first(s, k) for s, k in zip(segments, keep)]


def pack_rows(segments: list[tf.RaggedTensor], seq_length: int, cls_id: int, sep_id: int,
              pad_id: int) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """`[CLS] A [SEP] (B [SEP])` of one or two segments [B, (n)] that fit `seq_length`
    (`trim_segments`), padded with `pad_id`: (word ids, mask, type ids), int32 [B, seq_length].

    What tensorflow-text's `combine_segments` then `pad_model_inputs` give (A's type 0, B's
    1, each [SEP] its segment's), as one scatter of every token to its place.
    """
    batch = segments[0].nrows(out_type=tf.int64)
    row_starts = tf.range(batch) * seq_length
    ends = tf.ones([batch], tf.int64)  # each row's next free place: after [CLS]
    places, values, types = [row_starts], [tf.fill([batch], cls_id)], [tf.zeros([batch], tf.int32)]
    for kind, segment in enumerate(segments):
        segment = segment.with_row_splits_dtype(tf.int64)
        rows, position = positions(segment)
        places.append(tf.gather(row_starts + ends, rows) + position)
        values.append(tf.cast(segment.values, tf.int32))
        types.append(tf.fill(tf.shape(rows), kind))
        ends += segment.row_lengths()
        places += [row_starts + ends]
        values += [tf.fill([batch], sep_id)]
        types += [tf.fill([batch], kind)]
        ends += 1
    places = tf.concat(places, 0)[:, None]
    size = tf.reshape(batch * seq_length, [1])
    word_ids = tf.tensor_scatter_nd_update(tf.fill(size, tf.constant(pad_id, tf.int32)), places,
                                           tf.concat(values, 0))
    type_ids = tf.scatter_nd(places, tf.concat(types, 0), size)
    mask = tf.sequence_mask(ends, seq_length, tf.int32)
    return (tf.reshape(word_ids, [-1, seq_length]), mask,
            tf.reshape(type_ids, [-1, seq_length]))
