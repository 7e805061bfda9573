"""Doc-stride windows in the graph, cut by `albert_tf.span_decoding`'s arithmetic.

A served span model answers a context of any length as fine-tuning's SQuAD
prediction does: the context's pieces are cut into windows (`split`: `room_of`
context pieces a window, a new window every `window_step` pieces, `window_count`
windows), every window of every row is packed `[CLS] question [SEP] window [SEP]`
and run as one batch (`features`), each piece is a start candidate only in the
window that gives it the most context (`max_context`, by `max_context_score`),
and the best span of each row is the best of its windows' (`best_window`). That
arithmetic is `albert_tf.span_decoding`'s own functions, called here with
TensorFlow's minimum and maximum; what stays here is how tensors hold the windows.

A row whose context needs more than `max_windows` windows is refused before the
model runs (`split`'s check), so one huge context cannot take the server's memory.
"""

from __future__ import annotations

import dataclasses

import tensorflow as tf

from albert_tf import span_decoding as rule
from albert_tf.tokenizer.ragged_rows import row_ids

from . import text_graph
from .base import _require


@dataclasses.dataclass
class Windows:
    """The windows of a batch of B rows, W windows in all (rows in order).

    Attributes:
      row: int64 [W], the request row of each window.
      first, count: int64 [W], its first context piece and how many it holds.
      offset: int64 [W], the sequence position of its first context piece.
      piece: int64 [W, (count)], each window piece's index among all the batch's
        context pieces (the flat values of the context's ragged pieces).
      max_context: bool [W, (count)], whether the window gives the piece its most context.
      rows: int, B (a scalar tensor).
    """

    row: tf.Tensor
    first: tf.Tensor
    count: tf.Tensor
    offset: tf.Tensor
    piece: tf.RaggedTensor
    max_context: tf.RaggedTensor
    rows: tf.Tensor


def split(query_lengths: tf.Tensor, pieces: tf.RaggedTensor, seq_length: int, doc_stride: int,
          max_windows: int, signature: str = "serving_default") -> Windows:
    """The windows of every row, refused past `max_windows` a row.

    Args:
      query_lengths: int64 [B], the question's pieces (already cut).
      pieces: [B, (P)] the context's pieces (any dtype; only the row lengths are read).

    Raises (at run time): InvalidArgumentError "SIG: the context of row i needs N
    windows, more than max_windows=M ..." before anything is packed.
    """
    num_pieces = pieces.row_lengths()  # [B] int64
    room = rule.room_of(seq_length, tf.cast(query_lengths, tf.int64))  # >= 1: the query is cut
    step = rule.window_step(room, doc_stride, tf.minimum)
    needed = rule.window_count(num_pieces, room, doc_stride, tf.minimum, tf.maximum)
    needed = _within_cap(needed, needed <= max_windows, needed, signature, " needs ",
                         " windows, more than ", max_windows, seq_length, doc_stride)
    index = tf.ragged.range(needed)  # [B, (n)] window index within the row
    row = row_ids(index)
    first = index.flat_values * tf.gather(step, row)
    count = tf.minimum(tf.gather(room, row), tf.gather(num_pieces, row) - first)
    local = tf.ragged.range(first, first + count)  # [W, (count)] piece index in the row
    piece = local + tf.gather(pieces.row_starts(), row)[:, None]
    offset = tf.gather(tf.cast(query_lengths, tf.int64), row) + 2  # [CLS] question [SEP]
    return Windows(row, first, count, offset, piece, max_context(piece, count, local - first[:, None]),
                   tf.shape(num_pieces, out_type=tf.int64)[0])


def check_words(query_lengths: tf.Tensor, context: tf.Tensor, seq_length: int, doc_stride: int,
                max_windows: int, signature: str = "serving_default") -> tf.Tensor:
    """`context`, released only if no row is sure to need more than `max_windows` windows.

    A cheap bound before tokenization, so a huge context is refused in milliseconds: every
    space-separated word with an ASCII letter or digit becomes at least one piece (nothing
    drops those characters, and no piece crosses a space), so more such words than
    `max_windows` windows hold pieces is refused as `split` would refuse it.
    """
    room = rule.room_of(seq_length, tf.cast(query_lengths, tf.int64))
    capacity = rule.pieces_held(max_windows, room, doc_stride, tf.minimum)
    words = tf.strings.split(context, sep=" ")  # [B, (parts)]
    solid = tf.strings.regex_full_match(words.flat_values, r"(?s).*[A-Za-z0-9].*")
    least = tf.math.unsorted_segment_sum(tf.cast(solid, tf.int64), row_ids(words),
                                         words.nrows())  # [B]
    return _within_cap(context, least <= capacity, least, signature, " has at least ",
                       " pieces, more than ", max_windows, seq_length, doc_stride,
                       " windows hold")


def _within_cap(value: tf.Tensor, fits: tf.Tensor, counts: tf.Tensor, signature: str,
                middle: str, what: str, max_windows: int, seq_length: int, doc_stride: int,
                held: str = "") -> tf.Tensor:
    """`value`, released only if every row `fits` [B]; else InvalidArgumentError naming the
    first row that does not and its count: "SIG: the context of row R{middle}N{what}
    max_windows=M{held} (seq_length S, doc_stride D); shorten it or export with a larger
    --max-windows" (the one wording of the window cap)."""
    tail = (f"{what}max_windows={max_windows}{held} (seq_length {seq_length}, doc_stride "
            f"{doc_stride}); shorten it or export with a larger --max-windows")
    # The first row past the cap (a sentinel keeps argmax defined for an empty batch).
    over = tf.argmax(tf.concat([tf.cast(tf.logical_not(fits), tf.int32), [1]], 0),
                     output_type=tf.int64)
    check = _require(tf.reduce_all(fits), f"{signature}: the context of row ", over, middle,
                     tf.gather(tf.concat([counts, tf.zeros([1], counts.dtype)], 0), over), tail)
    with tf.control_dependencies([check]):
        return tf.identity(value)


def max_context(piece: tf.RaggedTensor, count: tf.Tensor, index: tf.RaggedTensor) -> tf.RaggedTensor:
    """bool [W, (count)]: the window gives its piece the highest `max_context_score`
    (MAX_CONTEXT_SCALE * shorter side + window length), a tie to the earlier window."""
    window = row_ids(index)
    length = tf.gather(count, window)
    at = index.flat_values
    score = rule.max_context_score(at, length, tf.minimum)  # [N] int64
    key = piece.flat_values
    slots = tf.reduce_max(tf.concat([key + 1, [0]], 0))  # pieces the windows cover
    best = tf.gather(tf.math.unsorted_segment_max(score, key, slots), key) == score
    window = tf.cast(window, tf.int64)
    earliest = tf.math.unsorted_segment_min(tf.where(best, window, tf.int64.max), key, slots)
    return index.with_flat_values(best & (tf.gather(earliest, key) == window))


def features(pre, query: tf.RaggedTensor, ids: tf.RaggedTensor, windows: Windows):
    """The model's inputs [W, seq_length] of every window (nothing is cut: each fits)."""
    window_ids = tf.RaggedTensor.from_row_lengths(
        tf.gather(ids.flat_values, windows.piece.flat_values), windows.count)
    packed, _ = text_graph.pack(pre, [tf.gather(query, windows.row), window_ids])
    return packed


def positions(windows: Windows, length: tf.Tensor, values: list[tf.Tensor]):
    """Per window and sequence position [W, T]: (the row's context piece index, int64;
    in_context, bool; then each of `values` — bool [W, (count)] ragged or flat [N_pieces]
    per batch piece — at that position, False outside the window's pieces)."""
    index = tf.range(tf.cast(length, tf.int64))[None] - windows.offset[:, None]  # [W,T]
    inside = (index >= 0) & (index < windows.count[:, None])
    out = [windows.first[:, None] + index, inside]
    for value in values:
        if not isinstance(value, tf.RaggedTensor):  # per piece of the batch
            value = windows.piece.with_flat_values(tf.gather(value, windows.piece.flat_values))
        dense = tf.concat([value.to_tensor(False, shape=[None, None]),
                           tf.zeros_like(index[:, :1], tf.bool)], axis=1)
        width = tf.shape(dense, tf.int64)[1]
        safe = tf.where(inside & (index < width - 1), index, width - 1)
        out.append(tf.gather(dense, safe, batch_dims=1) & inside)
    return out


def best_window(windows: Windows, score: tf.Tensor, found: tf.Tensor):
    """Per row, the window with the highest span score (the earliest of equal ones).

    Args:
      score: float32 [W]; found: bool [W].

    Returns:
      (window int64 [B] (0 where none), found bool [B], score float32 [B]).
    """
    score = tf.where(found, score, float("-inf"))
    best = tf.math.unsorted_segment_max(score, windows.row, windows.rows)
    candidate = found & (score == tf.gather(best, windows.row))
    number = tf.range(tf.size(windows.row, out_type=tf.int64))
    window = tf.math.unsorted_segment_min(tf.where(candidate, number, tf.int64.max),
                                          windows.row, windows.rows)
    any_found = tf.math.unsorted_segment_max(tf.cast(found, tf.int32), windows.row,
                                             windows.rows) > 0
    return tf.where(any_found, window, 0), any_found, best


def row_max(windows: Windows, values: tf.Tensor) -> tf.Tensor:
    """float [B]: the highest of each row's windows' `values` [W]."""
    return tf.math.unsorted_segment_max(values, windows.row, windows.rows)


def row_min(windows: Windows, values: tf.Tensor) -> tf.Tensor:
    """float [B]: the lowest of each row's windows' `values` [W]."""
    return tf.math.unsorted_segment_min(values, windows.row, windows.rows)
