"""In-graph token offsets: each token's byte range in the raw (not the normalised) text.

The tokenizer segments the *normalised* text (whitespace collapsed, NFKD,
combining marks dropped, lowercased), and SentencePiece reports offsets into
that. Every normalisation step except whitespace collapsing is per character, so
each raw character contributes a known number of normalised bytes
(`pre.normalize` of the character alone; ASCII is always one byte), and a
whitespace run contributes one byte (the collapsed space) or none at the ends. A
running sum of those lengths maps normalised offsets back to raw characters.

Limits: a piece boundary inside one raw character (e.g. "ﬁ" -> "f" "i") maps to
the whole character; with keep_accents, canonical reordering of stacked
combining marks may shift a boundary within the cluster.

Everything works on the flat values of ragged tensors, so the cost follows the
total text length, not batch size x longest text. Per-row searches use one
sorted key per row `row * ROW_STRIDE + local key`.

Part of the in-graph tokenizer (TensorFlow at module level): the served span and
token-classification signatures and a task model's Python answers on raw text
(`text_answers`) read offsets here.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from albert_tf.tokenizer.normalize import unicode_tables
from albert_tf.tokenizer.ragged_rows import row_ids
from albert_tf.tokenizer.spm_proto import SPIECE_UNDERLINE
from albert_tf.tokenizer.wordpiece_graph import row_cumsum as _row_cumsum

# Characters an answer never starts or ends with, and that alone do not make a token
# visible: whitespace, controls and format characters (SentencePiece drops most of
# them), combining marks without a base, and U+FFFD (what invalid bytes became).
IGNORABLE = r"[\s\p{Z}\p{Cc}\p{Cf}\p{M}\x{FFFD}]"
# What an answer never ends with: IGNORABLE less the combining marks, which stay with their
# base character.
TRAILING_IGNORABLE = IGNORABLE.replace(r"\p{M}", "")
# Local keys (twice a normalised byte offset) stay far below this: rows never mix.
ROW_STRIDE = 1 << 40


def sanitize(texts: tf.Tensor) -> tf.Tensor:
    """Valid UTF-8: each malformed sequence becomes U+FFFD, as the tokenizer does (the
    offsets of this module refer to the sanitized bytes)."""
    return tf.strings.unicode_transcode(texts, "UTF-8", "UTF-8", errors="replace",
                                        replacement_char=0xFFFD)


def tokenize_with_offsets(pre, texts: tf.Tensor):
    """`pre.tokenize` with each token's byte range in the raw text.

    The ids are `pre.tokenize`'s own. For WordPiece, see `_wordpiece_offsets`; for
    SentencePiece, their offsets come from the classic
    SentencePiece op's `tokenize_with_offsets` on the same normalised text: both
    segment one string, so piece lengths place each id on the classic pieces.
    Inside a classic piece whose text has the length of its normalised range the
    position is exact; elsewhere (rare: where the two segmentations differ, on
    exact Viterbi ties such as "::" ":" / ":" "::" or the digit-comma rule, inside
    a piece that normalisation changed) a token's range widens to the classic
    pieces it overlaps.

    Args:
      pre: an `AlbertPreprocessor`.
      texts: tf.string [B], already `sanitize`d (offsets refer to these bytes).

    Returns:
      (ids int32, starts int64, ends int64, visible bool), each [B, (n)]: [start,
      end) covers the raw characters the token came from (a "▁word" token
      includes the space before the word); `visible`: the range holds a
      character that is not IGNORABLE.
    """
    if pre.wordpiece is not None:
        return _wordpiece_offsets(pre, texts)
    normalized = pre.normalize(texts)
    ids = pre.tokenize(texts)  # [B, (K)]
    classic, begin, end = pre.sentencepiece.tokenize_with_offsets(normalized)  # [B, (J)]
    begin, end = tf.cast(begin, tf.int64), tf.cast(end, tf.int64)
    classic_len, id_len = _piece_lengths(pre, classic, begin, end, ids)
    norm_length = tf.cast(tf.strings.length(normalized), tf.int64)  # [B]
    norm_begin, norm_end = _place(classic.with_flat_values(classic_len), begin.flat_values,
                                  end.flat_values, ids.with_flat_values(id_len), norm_length)
    return (ids, *_to_raw_offsets(pre, texts, ids.with_flat_values(norm_begin),
                                  norm_end))


def _flat_chars(texts: tf.Tensor, rows: tf.Tensor, byte_offsets: tf.Tensor):
    """(code points of `texts` [C] flat, the flat index of the character at each byte
    offset [N] of texts[rows] (on character boundaries; a row's end gives its limit),
    each row's first flat index [B])."""
    codes, byte_start = tf.strings.unicode_decode_with_offsets(texts, "UTF-8")  # [B, (C)]
    key = row_ids(codes) * ROW_STRIDE + byte_start.flat_values  # sorted
    index = tf.searchsorted(key, tf.cast(rows, tf.int64) * ROW_STRIDE + byte_offsets,
                            side="left", out_type=tf.int64)
    return codes.flat_values, index, codes.row_starts()


def chars_before(texts: tf.Tensor, rows: tf.Tensor, byte_offsets: tf.Tensor) -> tf.Tensor:
    """int64 [N]: the characters of texts[rows] before each byte offset [N] (valid UTF-8,
    offsets on character boundaries), in time and memory linear in the texts and N (a
    prefix per offset would copy its text N times: quadratic in the text)."""
    _, index, row_starts = _flat_chars(texts, rows, byte_offsets)
    return index - tf.gather(row_starts, rows)


def substrings(texts: tf.Tensor, rows: tf.Tensor, begin: tf.Tensor, end: tf.Tensor) -> tf.Tensor:
    """tf.string [N]: texts[rows][begin:end] for byte ranges [N] on character boundaries of
    valid UTF-8, linear in the texts and the ranges' lengths (`tf.strings.substr` on
    `tf.gather(texts, rows)` copies a whole text per range)."""
    codes, first, _ = _flat_chars(texts, rows, begin)
    _, limit, _ = _flat_chars(texts, rows, end)
    index = tf.ragged.range(first, tf.maximum(limit, first))  # [N, (characters)]
    return tf.strings.unicode_encode(index.with_flat_values(tf.gather(codes, index.flat_values)),
                                     "UTF-8")


def _wordpiece_offsets(pre, texts: tf.Tensor):
    """`tokenize_with_offsets` for a WordPiece vocabulary: the ranges come from following
    each code point through BERT's normalisation (`WordPieceGraph.tokenize_with_offsets`),
    exact for every token; `visible` as for SentencePiece."""
    ids, starts, ends = pre.wordpiece.tokenize_with_offsets(texts)
    rows = row_ids(ids)
    spelled = substrings(texts, rows, starts.flat_values, ends.flat_values)
    visible = ~tf.strings.regex_full_match(spelled, IGNORABLE + "*")
    ids = tf.cast(ids, tf.int32).with_row_splits_dtype(tf.int64)
    return ids, starts, ends, ids.with_flat_values(visible)


def _at(values: tf.Tensor, index: tf.Tensor, valid: tf.Tensor, fallback: tf.Tensor):
    """values[index] where `valid`, else `fallback` (index may be len(values))."""
    padded = tf.concat([values, tf.zeros([1], values.dtype)], 0)
    return tf.where(valid, tf.gather(padded, index), fallback)


def _piece_lengths(pre, classic, begin, end, ids):
    """Lengths of both segmentations' pieces [N] in one shared measure: the piece's
    bytes with "▁" as one (the space it stands for); an <unk> run gets its
    normalised length, the k-th <unk> of both sequences the same."""
    unk = pre.tokenizer.unk_id
    spelled = lambda x: tf.cast(tf.strings.length(tf.strings.regex_replace(  # noqa: E731
        pre.sentencepiece.id_to_string(x), SPIECE_UNDERLINE, " ")), tf.int64)
    classic_unk = classic.flat_values == unk
    classic_len = tf.where(classic_unk, tf.maximum(end.flat_values - begin.flat_values, 1),
                           spelled(classic.flat_values))
    unk_len = tf.concat([tf.boolean_mask(classic_len, classic_unk), [1]], axis=0)
    is_unk = ids.flat_values == unk
    nth = tf.minimum(tf.cumsum(tf.cast(is_unk, tf.int32), exclusive=True), tf.size(unk_len) - 1)
    return classic_len, tf.where(is_unk, tf.gather(unk_len, nth), spelled(ids.flat_values))


def _place(classic_len, begin, end, id_len, norm_length):
    """Normalised byte ranges [K] of the ids, from the classic pieces' ranges.

    Args:
      classic_len, id_len: [B, (J)] and [B, (K)] piece lengths (`_piece_lengths`).
      begin, end: [J] the classic pieces' normalised byte ranges.
      norm_length: [B] normalised text lengths ("past the end").
    """
    rows = row_ids(classic_len)
    lengths = classic_len.flat_values
    classic_end = _row_cumsum(lengths, rows, classic_len.row_starts())
    classic_start = classic_end - lengths
    key = rows * ROW_STRIDE + classic_end  # sorted
    linear = end - begin == lengths  # maps byte for byte
    id_rows = row_ids(id_len)
    id_end = _row_cumsum(id_len.flat_values, id_rows, id_len.row_starts())
    id_start = id_end - id_len.flat_values
    limit = tf.gather(classic_len.row_limits(), id_rows)
    past_end = tf.gather(norm_length, id_rows)
    first = tf.searchsorted(key, id_rows * ROW_STRIDE + id_start, side="right",
                            out_type=tf.int64)
    last = tf.searchsorted(key, id_rows * ROW_STRIDE + tf.maximum(id_end - 1, id_start),
                           side="right", out_type=tf.int64)
    ok_first, ok_last = first < limit, last < limit
    shift_first = _at(begin - classic_start, first, ok_first, 0)
    shift_last = _at(begin - classic_start, last, ok_last, 0)
    norm_begin = tf.where(_at(linear, first, ok_first, False), id_start + shift_first,
                          _at(begin, first, ok_first, past_end))
    norm_end = tf.where(_at(linear, last, ok_last, False), id_end + shift_last,
                        _at(end, last, ok_last, past_end))
    return norm_begin, tf.maximum(norm_end, norm_begin)


def _normalized_lengths(pre, codes: tf.Tensor, rows: tf.Tensor, row_starts: tf.Tensor):
    """Bytes each raw code point [N] (rows `rows`) contributes to `pre.normalize` of its row.

    Returns:
      (lengths int64 [N]; ignorable bool [N], see IGNORABLE).
    """
    # str.isspace, the tokenizer's whitespace: sorted inclusive (starts, ends) ranges.
    starts, ends = (tf.constant(np.asarray(r, np.int32)) for r in unicode_tables().whitespace)
    index = tf.searchsorted(starts, codes, side="right") - 1
    space = (index >= 0) & (codes <= tf.gather(ends, tf.maximum(index, 0)))
    # A whitespace run becomes one space, unless it leads or trails the text.
    solid = tf.cast(~space, tf.int64)
    solid_through = _row_cumsum(solid, rows, row_starts)
    solid_in_row = tf.gather(tf.math.unsorted_segment_sum(
        solid, rows, tf.shape(row_starts, tf.int64)[0]), rows)
    first_in_row = tf.range(tf.size(codes, tf.int64)) == tf.gather(row_starts, rows)
    previous_space = tf.roll(space, 1, axis=0) & ~first_in_row
    collapsed = (space & ~previous_space & (solid_through > 0)
                 & (solid_through < solid_in_row))
    # Each distinct character normalised alone (cheap even for 1 MB); ASCII is 1 byte.
    unique, which = tf.unique(codes)
    chars = tf.strings.unicode_encode(tf.expand_dims(unique, 1), "UTF-8")
    unique_len = tf.where(unique < 0x80, 1, tf.strings.length(pre.normalize(chars)))
    solid_len = tf.cast(tf.gather(unique_len, which), tf.int64)
    ignorable = tf.gather(tf.strings.regex_full_match(chars, IGNORABLE), which)
    return tf.where(space, tf.cast(collapsed, tf.int64), solid_len), ignorable | space


def _to_raw_offsets(pre, texts, starts: tf.RaggedTensor, ends: tf.Tensor):
    """Maps normalised byte offsets [B, (n)] (`ends` as its flat values [n]) to byte
    offsets in the raw `texts` [B]. Returns (begin, end, visible), each [B, (n)]."""
    codes, raw_start = tf.strings.unicode_decode_with_offsets(texts, "UTF-8")  # [B, (C)]
    rows, row_starts = row_ids(codes), codes.row_starts()
    norm_len, ignorable = _normalized_lengths(pre, codes.flat_values, rows, row_starts)
    norm_end = _row_cumsum(norm_len, rows, row_starts)
    norm_start = norm_end - norm_len
    # Zero-length characters (dropped marks, collapsed spaces) at offset e belong to
    # the token that ends at e: key 2*start-1 sorts them before 2*e.
    end_key = rows * ROW_STRIDE + norm_end
    start_key = rows * ROW_STRIDE + 2 * norm_start - tf.cast(norm_len == 0, tf.int64)
    piece_rows = row_ids(starts)
    base = piece_rows * ROW_STRIDE
    limit = tf.gather(codes.row_limits(), piece_rows)
    raw = raw_start.flat_values
    past_end = tf.gather(tf.cast(tf.strings.length(texts), tf.int64), piece_rows)
    first = tf.searchsorted(end_key, base + starts.flat_values, side="right", out_type=tf.int64)
    after = tf.maximum(first, tf.searchsorted(start_key, base + 2 * ends, side="left",
                                              out_type=tf.int64))
    begin = _at(raw, first, first < limit, past_end)
    end = tf.maximum(_at(raw, after, after < limit, past_end), begin)
    # Non-ignorable characters before each character (a row's total past its end).
    shown = tf.cast(~ignorable, tf.int64)
    shown_before = _row_cumsum(shown, rows, row_starts) - shown
    shown_in_row = tf.gather(tf.math.unsorted_segment_sum(shown, rows, codes.nrows()),
                             piece_rows)
    visible = (_at(shown_before, after, after < limit, shown_in_row)
               > _at(shown_before, first, first < limit, shown_in_row))
    return tuple(starts.with_flat_values(x) for x in (begin, end, visible))


def answer_text_and_chars(context: tf.Tensor, begin: tf.Tensor, end: tf.Tensor,
                          found: tf.Tensor):
    """Answer text and its character offsets from a byte range of valid-UTF-8 `context`.

    Surrounding whitespace and other ignorable characters are trimmed (a piece
    like "▁paris" covers the space before the word). Character offsets count
    Unicode code points, so for valid UTF-8 input `context.decode()[start_char:end_char] == answer`.

    Args:
      context: tf.string [B], valid UTF-8.
      begin, end: int64 [B] byte offsets on character boundaries.
      found: bool [B].

    Returns:
      (answer tf.string [B], start_char int32 [B], end_char int32 [B]); "", -1, -1
      where not found.
    """
    raw = tf.strings.substr(context, begin, end - begin)
    # Trim what cannot begin or end an answer (offsets.IGNORABLE; trailing
    # combining marks stay with their base character).
    left_trimmed = tf.strings.regex_replace(raw, f"^{IGNORABLE}+", "")
    leading = tf.strings.length(raw) - tf.strings.length(left_trimmed)
    answer = tf.strings.regex_replace(left_trimmed, f"{TRAILING_IGNORABLE}+$", "")
    begin = begin + tf.cast(leading, tf.int64)
    start_char = tf.strings.length(tf.strings.substr(context, tf.zeros_like(begin), begin),
                                   unit="UTF8_CHAR")
    end_char = start_char + tf.strings.length(answer, unit="UTF8_CHAR")
    missing = tf.fill(tf.shape(start_char), -1)
    return (tf.where(found, answer, ""), tf.where(found, start_char, missing),
            tf.where(found, end_char, missing))
