"""A served question's `top_k` answers (`export --top-k K`, the task record's top_k > 1):
`albert_tf.span_answers.pipeline_answers` with align_to_words False, in the graph.

Every candidate span of every window (`span.span_scores`: the n_best starts the window
gives the most context and its n_best ends, at most max_answer_length pieces, both on
pieces showing text) is ranked over the row's windows by start + end logit; a text is
listed once (its best span); the first K are the answers. The empty answer takes its
place by the model's no-answer rule (`empty_answer`): a start/end head's null score less
the threshold ranked among the spans, an answerability head's "" first when P(no answer)
exceeds the threshold, and "" alone for a row without any span.

Outputs beside the best answer's: "answers" (str [B, K]), "answers_start_char" and
"answers_end_char" (int32 [B, K], -1 for "" and past the list), "answers_score" (float32
[B, K], 0 past the list) and "answers_count" (int32 [B], how many are listed).
"""

from __future__ import annotations

import tensorflow as tf

from albert_tf.tokenizer.offsets import answer_text_and_chars

# Distinct texts are told apart by a 62-bit hash of (row, text).
HASH_BUCKETS = 1 << 62


def _ranked(batch, scores: tf.Tensor, n_best: int):
    """The candidates of all windows, flat [N], ordered by row, then best first:
    (row int64, score float32, first piece int64, last piece int64, valid bool)."""
    length = tf.shape(scores)[1]
    flat = tf.reshape(scores, [tf.shape(scores)[0], -1])  # [W, T*T]
    # a window has at most n_best * n_best candidates (its n_best starts x n_best ends)
    values, index = tf.math.top_k(flat, k=tf.minimum(n_best * n_best, tf.shape(flat)[1]))
    window = tf.repeat(tf.range(tf.shape(values, out_type=tf.int64)[0]),
                       tf.shape(values)[1])  # [N]
    score, index = tf.reshape(values, [-1]), tf.cast(tf.reshape(index, [-1]), tf.int64)
    width = tf.cast(length, tf.int64)
    first = tf.gather_nd(batch.piece, tf.stack([window, index // width], 1))
    last = tf.gather_nd(batch.piece, tf.stack([window, index % width], 1))
    row = tf.gather(batch.windows.row, window)
    order = tf.argsort(-score, stable=True)  # -inf (no span) last
    order = tf.gather(order, tf.argsort(tf.gather(row, order), stable=True))
    pick = lambda x: tf.gather(x, order)  # noqa: E731
    return pick(row), pick(score), pick(first), pick(last), pick(score) > float("-inf")


def _texts(batch, row, first, last, valid):
    """(text, start_char, end_char) [N] of each candidate (`offsets.answer_text_and_chars`)."""
    base = tf.gather(batch.starts.row_starts(), row)
    size = tf.shape(batch.starts.flat_values, out_type=tf.int64)[0]
    zero = tf.zeros([1], tf.int64)  # keeps the gathers valid when no row has a piece
    starts = tf.concat([tf.cast(batch.starts.flat_values, tf.int64), zero], 0)
    ends = tf.concat([tf.cast(batch.ends.flat_values, tf.int64), zero], 0)
    begin = tf.gather(starts, tf.where(valid, base + first, size))
    end = tf.gather(ends, tf.where(valid, base + last, size))
    return answer_text_and_chars(tf.gather(batch.context, row), begin, end, valid)


def top_answers(batch, scores: tf.Tensor, n_best: int, k: int, empty) -> dict:
    """The K answers of every row; `empty(score [B, K], count [B])` -> (position [B]
    (K or more: not listed), score [B]) of the empty answer (`SpanModule.empty_answer`)."""
    row, score, first, last, valid = _ranked(batch, scores, n_best)
    text, start_char, end_char = _texts(batch, row, first, last, valid)
    valid &= text != ""
    position = tf.range(tf.size(row, out_type=tf.int64))
    key = tf.strings.to_hash_bucket_fast(
        tf.strings.join([tf.strings.as_string(row), text], separator="\x00"), HASH_BUCKETS)
    _, same = tf.unique(tf.where(valid, key, -1 - position), out_idx=tf.int64)
    earliest = tf.math.unsorted_segment_min(position, same, tf.reduce_max(same) + 1)
    keep = valid & (tf.gather(earliest, same) == position)  # a text once: its best span
    rows = batch.windows.rows
    running = tf.cumsum(tf.cast(keep, tf.int64), exclusive=True)
    row_first = tf.math.unsorted_segment_min(position, row, rows)
    rank = running - tf.gather(running, tf.gather(row_first, row))
    chosen = keep & (rank < k)
    at = tf.boolean_mask(tf.stack([row, rank], 1), chosen)
    shape = tf.stack([rows, tf.constant(k, tf.int64)])

    def scatter(values, fill):
        return tf.tensor_scatter_nd_update(tf.fill(shape, fill), at, tf.boolean_mask(values,
                                                                                      chosen))

    listed = {"answers": scatter(text, ""), "answers_start_char": scatter(start_char, -1),
              "answers_end_char": scatter(end_char, -1), "answers_score": scatter(score, 0.0)}
    count = tf.math.unsorted_segment_sum(tf.cast(chosen, tf.int32), row, rows)
    return _with_empty(listed, count, *empty(listed["answers_score"], count), k)


def _with_empty(listed: dict, count, at, score, k: int) -> dict:
    """`listed` with "" at position `at` [B] (the rest shifted one down, the list cut at K)."""
    j = tf.range(k, dtype=tf.int64)[None]  # [1, K]
    at = tf.cast(at, tf.int64)[:, None]
    source = tf.clip_by_value(tf.where(j <= at, j, j - 1), 0, k - 1)
    here = j == at
    fills = {"answers": "", "answers_start_char": -1, "answers_end_char": -1}
    out = {}
    for name, values in listed.items():
        moved = tf.gather(values, source, batch_dims=1)
        value = (tf.broadcast_to(tf.cast(score, values.dtype)[:, None], tf.shape(moved))
                 if name == "answers_score" else tf.fill(tf.shape(moved), fills[name]))
        out[name] = tf.where(here & tf.ones_like(moved, tf.bool), value, moved)
    inserted = at[:, 0] < k
    out["answers_count"] = tf.where(inserted, tf.minimum(count + 1, k), count)
    return out


def rank_among(scores: tf.Tensor, count: tf.Tensor, score: tf.Tensor) -> tf.Tensor:
    """int32 [B]: where `score` [B] goes among the listed `scores` [B, K] (after every one
    at least as high: a tie answers the span)."""
    listed = tf.range(tf.shape(scores)[1])[None] < count[:, None]
    return tf.reduce_sum(tf.cast(listed & (scores >= score[:, None]), tf.int32), axis=1)
