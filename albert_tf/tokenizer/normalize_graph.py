"""Unicode rules on int32 code points in TensorFlow ops, shared by both in-graph tokenizers.

`TextNormalizer` is `spm.normalize_text` (SentencePiece's path in `AlbertPreprocessor`);
its `_lower` (`str.lower` with Final_Sigma) and `member` (a code point's membership in a
range table, ASCII by lookup) serve `wordpiece_graph` too. The tables come from
`normalize.unicode_tables` (Python's own definitions).
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf
import tensorflow_text as tf_text

from albert_tf.tokenizer.normalize import unicode_tables
from albert_tf.tokenizer.ragged_rows import keep_where, row_ids

__all__ = ["TextNormalizer", "member"]

_SIGMA, _FINAL_SIGMA = 0x3A3, 0x3C2


def _in_ranges(code_points: tf.Tensor, ranges: tuple[np.ndarray, np.ndarray]) -> tf.Tensor:
    """Whether each int32 code point lies in one of the sorted inclusive `ranges`; same shape."""
    starts, ends = tf.constant(ranges[0]), tf.constant(ranges[1])
    index = tf.searchsorted(starts, code_points, side="right") - 1
    return (index >= 0) & (code_points <= tf.gather(ends, tf.maximum(index, 0)))


def _with_non_ascii(values: tf.Tensor, ascii_result: tf.Tensor, fn) -> tf.Tensor:
    """`ascii_result` [N] with its non-ASCII positions replaced by `fn(those code points)`.

    Most text is ASCII, answered by 128-entry tables; only the rest pays for a
    binary search.
    """
    where = tf.where(values >= 0x80)  # [M, 1]
    return tf.tensor_scatter_nd_update(ascii_result, where, fn(tf.gather_nd(values, where)))


def member(values: tf.Tensor, ranges: tuple[np.ndarray, np.ndarray]) -> tf.Tensor:
    """`_in_ranges` for int32 code points [N], with a table for ASCII."""
    ascii_table = np.zeros(128, bool)
    for start, end in zip(*ranges):
        ascii_table[min(start, 128):min(end + 1, 128)] = True
    in_ascii = tf.gather(tf.constant(ascii_table), tf.minimum(values, 127))
    return _with_non_ascii(values, in_ascii, lambda wide: _in_ranges(wide, ranges))


class TextNormalizer:
    """`normalize_text` in TF ops: `tf.string [B]` -> `tf.string [B]`.

    Works on code points (`unicode_decode`, which also replaces invalid UTF-8
    exactly as Python's errors="replace" does) except for NFKD, which needs ICU.
    """

    def __init__(self, do_lower_case: bool, keep_accents: bool):
        self.do_lower_case = do_lower_case
        self.keep_accents = keep_accents
        self.tables = unicode_tables()
        ascii_lower = np.arange(128, dtype=np.int32)
        for key, value in zip(self.tables.lower_keys, self.tables.lower_values):
            if key < 128:
                ascii_lower[key] = value
        self._ascii_lower = ascii_lower

    def __call__(self, texts: tf.Tensor) -> tf.Tensor:
        chars = tf.strings.unicode_decode(texts, "UTF-8", errors="replace",
                                          replacement_char=0xFFFD)  # int32 [B, (C)]
        chars = self._collapse_whitespace(chars)
        if not self.keep_accents:
            texts = tf_text.normalize_utf8(tf.strings.unicode_encode(chars, "UTF-8"), "NFKD")
            chars = tf.strings.unicode_decode(texts, "UTF-8")
            chars = keep_where(chars, ~member(chars.flat_values, self.tables.combining))
        elif self.do_lower_case:
            # str.lower's only one-to-many mapping (NFKD has split it otherwise).
            texts = tf.strings.regex_replace(tf.strings.unicode_encode(chars, "UTF-8"),
                                             "\u0130", "i\u0307")
            chars = tf.strings.unicode_decode(texts, "UTF-8")
        if self.do_lower_case:
            chars = chars.with_flat_values(self.lower(chars.flat_values, row_ids(chars)))
        return tf.strings.unicode_encode(chars, "UTF-8")

    def _collapse_whitespace(self, chars: tf.RaggedTensor) -> tf.RaggedTensor:
        """`" ".join(text.split())` on code points [B, (C)]."""
        values, rows = chars.flat_values, row_ids(chars)
        space = member(values, self.tables.whitespace)
        position = tf.range(tf.size(values, out_type=rows.dtype))
        after_space = (position == tf.gather(chars.row_splits, rows)) | tf.concat(
            [[True], space[:-1]], 0)  # a row start counts as after a space: strips the left
        last_word_char = tf.math.unsorted_segment_max(
            tf.where(space, tf.constant(-1, rows.dtype), position), rows, chars.nrows())
        keep = ~space | (~after_space & (position < tf.gather(last_word_char, rows)))
        return keep_where(chars.with_flat_values(tf.where(space, 0x20, values)), keep)

    def lower(self, chars: tf.Tensor, rows: tf.Tensor | None, final_sigma: bool = True) -> tf.Tensor:
        """`str.lower` on the flat code points [N] of rows `rows` [N]; `final_sigma=False`
        (`rows` unused, may be None):
        code point by code point (a capital sigma is always "σ", as `tokenizers` lowers)."""
        lowered = tf.gather(tf.constant(self._ascii_lower), tf.minimum(chars, 127))
        lowered = _with_non_ascii(chars, lowered, self._lower_non_ascii)
        if not final_sigma:
            return lowered
        final = tf.cond(tf.reduce_any(chars == _SIGMA), lambda: self._final_sigma(chars, rows),
                        lambda: tf.zeros_like(chars, tf.bool))
        return tf.where(final, _FINAL_SIGMA, lowered)

    def _lower_non_ascii(self, chars: tf.Tensor) -> tf.Tensor:
        keys = tf.constant(self.tables.lower_keys)
        index = tf.minimum(tf.searchsorted(keys, chars), tf.size(keys) - 1)
        hit = tf.gather(keys, index) == chars
        return tf.where(hit, tf.gather(tf.constant(self.tables.lower_values), index), chars)

    def _final_sigma(self, chars: tf.Tensor, rows: tf.Tensor) -> tf.Tensor:
        """Unicode's Final_Sigma context, as CPython's str.lower applies it: bool [N].

        A capital sigma is final when the nearest non-case-ignorable character
        before it (same row) is cased, and the nearest one after it is not.
        """
        relevant = ~member(chars, self.tables.case_ignorable)
        cased = member(chars, self.tables.cased)
        # Positions of the relevant characters, then a sentinel N that is in no row.
        n = tf.size(chars, out_type=tf.int64)
        positions = tf.concat([tf.where(relevant)[:, 0], [n]], 0)
        rows_ext = tf.concat([rows, [-1]], 0)
        cased_ext = tf.concat([cased, [False]], 0)
        upto = tf.cumsum(tf.cast(relevant, tf.int64))  # relevant characters in [0, i]
        before_count = upto - tf.cast(relevant, tf.int64)  # ... in [0, i)
        before = tf.gather(positions, tf.maximum(before_count - 1, 0))
        cased_before = ((before_count > 0) & (tf.gather(rows_ext, before) == rows)
                        & tf.gather(cased_ext, before))
        after = tf.gather(positions, upto)  # the first relevant character after i
        cased_after = (tf.gather(rows_ext, after) == rows) & tf.gather(cased_ext, after)
        return (chars == _SIGMA) & cased_before & ~cased_after
