"""In-graph text handling the serving signatures add on top of `AlbertPreprocessor`.

* `pack`: `[CLS] A [SEP] (B [SEP])` packing of token-id segments, the same steps
  as `AlbertPreprocessor.call`, for segments the serving graph tokenizes itself;
* `trim_padding`: dynamic padding, so short requests do not pay for seq_length;
* `tokenize_with_masks`: "[MASK]" written in raw text becomes the [MASK] id
  (SentencePiece never produces a control symbol from text);
* `tokenize_with_offsets`: ids plus each token's byte range in the raw string.

Offsets are honest about normalisation. The tokenizer segments the *normalised*
text (whitespace collapsed, NFKD, combining marks dropped, lowercased), and
SentencePiece reports offsets into that. Every normalisation step except
whitespace collapsing is per character, so each raw character contributes a known
number of normalised bytes (`pre.normalize` applied to the character alone;
ASCII is always one byte); whitespace runs contribute one byte (the collapsed
space) or none at the ends. A cumulative sum of those lengths maps normalised
offsets back to raw characters. Limits: a piece boundary inside one raw character
(e.g. "ﬁ" -> "f" "i") maps to the whole character; with keep_accents, canonical
reordering of stacked combining marks may shift a boundary within the cluster.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf
import tensorflow_text as tf_text

from albert_tf.tokenizer import MASK_PIECE
from albert_tf.tokenizer_unicode import unicode_tables

INPUT_NAMES = ("input_word_ids", "input_mask", "input_type_ids")


def sanitize(texts: tf.Tensor) -> tf.Tensor:
    """Valid UTF-8: each malformed sequence becomes U+FFFD, as the tokenizer does."""
    return tf.strings.unicode_transcode(texts, "UTF-8", "UTF-8", errors="replace",
                                        replacement_char=0xFFFD)


def pack(pre, segments: list[tf.RaggedTensor]):
    """Packs one or two id segments [B, (n)] like `AlbertPreprocessor.call`.

    Returns:
      (features: the three int32 [B, seq_length] inputs, trimmed: the segments as
      kept after truncation).
    """
    tok = pre.tokenizer
    trimmed = tf_text.RoundRobinTrimmer(pre.seq_length - 1 - len(segments)).trim(segments)
    word_ids, type_ids = tf_text.combine_segments(
        trimmed, start_of_sequence_id=tok.cls_id, end_of_segment_id=tok.sep_id)
    word_ids, mask = tf_text.pad_model_inputs(word_ids, pre.seq_length, pad_value=tok.pad_id)
    type_ids, _ = tf_text.pad_model_inputs(type_ids, pre.seq_length, pad_value=0)
    features = {"input_word_ids": tf.cast(word_ids, tf.int32),
                "input_mask": tf.cast(mask, tf.int32),
                "input_type_ids": tf.cast(type_ids, tf.int32)}
    return features, trimmed


def trim_padding(features: dict[str, tf.Tensor], multiple: int | None) -> dict[str, tf.Tensor]:
    """Cuts [..., T] inputs to the longest row, rounded up to `multiple` (at most T).

    Outputs equal those of full padding: padded positions are masked out of
    attention (an additive -10000, exactly zero after softmax in float32) and
    never feed a real position. `multiple=None` keeps the full length. The
    rounding keeps the number of distinct shapes (and kernel caches) small.
    """
    if multiple is None:
        return features
    full = tf.shape(features["input_mask"])[-1]
    longest = tf.reduce_max(tf.reduce_sum(features["input_mask"], axis=-1))  # INT_MIN if B=0
    length = tf.clip_by_value((longest + multiple - 1) // multiple * multiple, 1, full)
    return {name: value[..., :length] for name, value in features.items()}


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


def tokenize_with_masks(pre, texts: tf.Tensor) -> tf.RaggedTensor:
    """Token ids [B, (n)] of `texts`, each literal "[MASK]" becoming the [MASK] id.

    The text is split on "[MASK]" and each part tokenized on its own (so the word
    after a mask starts a new word, as with a space), then the mask ids are spliced
    in between.
    """
    parts = tf.strings.split(texts, sep=MASK_PIECE)  # [B, (parts)]
    ids = pre.tokenize(parts.flat_values)  # [N, (n)]
    position = tf.range(tf.size(parts.flat_values, out_type=tf.int64)) - tf.gather(
        parts.row_starts(), parts.value_rowids())
    follows = position < tf.gather(parts.row_lengths(), parts.value_rowids()) - 1
    masks = tf.RaggedTensor.from_row_lengths(
        tf.fill([tf.reduce_sum(tf.cast(follows, tf.int32))], tf.cast(pre.tokenizer.mask_id,
                                                                       ids.dtype)),
        tf.cast(follows, tf.int64))
    return parts.with_flat_values(tf.concat([ids, masks], axis=1)).merge_dims(1, 2)


def tokenize_with_offsets(pre, texts: tf.Tensor):
    """`pre.tokenize` with each token's byte range in the raw text.

    The ids are `pre.tokenize`'s own. Their offsets come from the classic
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
    normalized = pre.normalize(texts)
    ids = pre.tokenize(texts)  # [B, (K)]
    classic, begin, end = pre.sentencepiece.tokenize_with_offsets(normalized)  # [B, (J)]
    begin, end = tf.cast(begin, tf.int64), tf.cast(end, tf.int64)
    classic_len, id_len = _piece_lengths(pre, classic, begin, end, ids)
    sentinel = tf.cast(tf.strings.length(normalized), tf.int64)[:, None]
    norm_begin, norm_end = _place(classic.with_flat_values(classic_len), begin, end,
                                  ids.with_flat_values(id_len), sentinel)
    return (ids, *_to_raw_offsets(pre, texts, norm_begin, norm_end))


def _piece_lengths(pre, classic, begin, end, ids):
    """Lengths of both segmentations' pieces [N] in one shared measure: the piece's
    bytes with "▁" as one (the space it stands for); an <unk> run gets its
    normalised length, the k-th <unk> of both sequences the same."""
    unk = pre.tokenizer.unk_id
    spelled = lambda x: tf.cast(tf.strings.length(tf.strings.regex_replace(  # noqa: E731
        pre.sentencepiece.id_to_string(x), "\u2581", " ")), tf.int64)
    classic_unk = classic.flat_values == unk
    classic_len = tf.where(classic_unk, tf.maximum(end.flat_values - begin.flat_values, 1),
                           spelled(classic.flat_values))
    unk_len = tf.concat([tf.boolean_mask(classic_len, classic_unk), [1]], axis=0)
    is_unk = ids.flat_values == unk
    nth = tf.minimum(tf.cumsum(tf.cast(is_unk, tf.int32), exclusive=True), tf.size(unk_len) - 1)
    return classic_len, tf.where(is_unk, tf.gather(unk_len, nth), spelled(ids.flat_values))


def _place(classic_len, begin, end, id_len, sentinel):
    """Normalised byte ranges of the ids, from the classic pieces' ranges.

    Args:
      classic_len, id_len: [B, (J)] and [B, (K)] piece lengths (`_piece_lengths`).
      begin, end: [B, (J)] the classic pieces' normalised byte ranges.
      sentinel: [B, 1] the normalised lengths.
    """
    lengths = classic_len.to_tensor()
    classic_end = tf.cumsum(lengths, axis=1)  # [B, J]
    inside = tf.range(tf.shape(lengths, tf.int64)[1])[None] < classic_len.row_lengths()[:, None]
    classic_end = tf.where(inside, classic_end, tf.int64.max)
    extend = lambda x: tf.concat([x, sentinel], axis=1)  # noqa: E731  ("past the end")
    begin_d, end_d = extend(begin.to_tensor()), extend(end.to_tensor())
    start_d = extend(classic_end - lengths)
    # Pieces whose normalised range is as long as their text map byte for byte.
    linear = tf.pad(inside & (end.to_tensor() - begin.to_tensor() == lengths), [[0, 0], [0, 1]])
    id_end = tf.cumsum(id_len.to_tensor(), axis=1)  # [B, K]
    id_start = id_end - id_len.to_tensor()
    at = lambda x, j: tf.gather(x, j, batch_dims=1)  # noqa: E731
    first = tf.searchsorted(classic_end, id_start, side="right")
    last = tf.searchsorted(classic_end, tf.maximum(id_end - 1, id_start), side="right")
    norm_begin = tf.where(at(linear, first), at(begin_d, first) + id_start - at(start_d, first),
                          at(begin_d, first))
    norm_end = tf.where(at(linear, last), at(begin_d, last) + id_end - at(start_d, last),
                        at(end_d, last))
    norm_end = tf.maximum(norm_end, norm_begin)
    rows = id_len.row_lengths()
    return (tf.RaggedTensor.from_tensor(norm_begin, lengths=rows),
            tf.RaggedTensor.from_tensor(norm_end, lengths=rows))


# Characters an answer never starts or ends with, and that alone do not make a token
# visible: whitespace, controls and format characters (SentencePiece drops most of
# them), combining marks without a base, and U+FFFD (what invalid bytes became).
IGNORABLE = r"[\s\p{Z}\p{Cc}\p{Cf}\p{M}\x{FFFD}]"


def _normalized_lengths(pre, codes: tf.Tensor, valid: tf.Tensor):
    """Bytes each raw code point contributes to `pre.normalize` of its row.

    Args:
      codes: int32 [B, C] code points (dense; `valid` marks the real ones).
    Returns:
      (lengths int64 [B, C], 0 on padding; ignorable bool [B, C], see IGNORABLE).
    """
    # str.isspace, the tokenizer's whitespace: sorted inclusive (starts, ends) ranges.
    starts, ends = (tf.constant(np.asarray(r, np.int32)) for r in unicode_tables().whitespace)
    index = tf.reshape(tf.searchsorted(starts, tf.reshape(codes, [-1]), side="right") - 1,
                       tf.shape(codes))
    space = valid & (index >= 0) & (codes <= tf.gather(ends, tf.maximum(index, 0)))
    # A whitespace run becomes one space, unless it leads or trails the text.
    solid = tf.cast(valid & ~space, tf.int32)
    solid_before = tf.cumsum(solid, axis=1, exclusive=True) > 0
    solid_after = tf.cumsum(solid, axis=1, exclusive=True, reverse=True) > 0
    previous_space = tf.pad(space[:, :-1], [[0, 0], [1, 0]])
    collapsed = space & ~previous_space & solid_before & solid_after
    # Each distinct character normalised alone (cheap even for 1 MB); ASCII is 1 byte.
    unique, which = tf.unique(tf.boolean_mask(codes, valid))
    chars = tf.strings.unicode_encode(tf.expand_dims(unique, 1), "UTF-8")
    unique_len = tf.where(unique < 0x80, 1, tf.strings.length(pre.normalize(chars)))
    where = tf.where(valid)
    solid_len = tf.scatter_nd(where, tf.cast(tf.gather(unique_len, which), tf.int64),
                              tf.shape(codes, tf.int64))
    ignorable = tf.scatter_nd(where, tf.gather(tf.strings.regex_full_match(chars, IGNORABLE),
                                               which), tf.shape(codes, tf.int64))
    return tf.where(space, tf.cast(collapsed, tf.int64), solid_len), ignorable | space


def _to_raw_offsets(pre, texts, starts, ends):
    """Maps normalised byte offsets [B, (n)] to byte offsets in the raw `texts` [B].

    Returns (begin, end, visible), each [B, (n)]."""
    codes, raw_start = tf.strings.unicode_decode_with_offsets(texts, "UTF-8")  # [B, (C)]
    codes = codes.to_tensor(-1)  # [B, C]
    valid = codes >= 0
    norm_len, ignorable = _normalized_lengths(pre, codes, valid)
    norm_end = tf.cumsum(norm_len, axis=1)
    norm_start = norm_end - norm_len
    text_len = tf.cast(tf.strings.length(texts), tf.int64)[:, None]  # [B,1]
    big = tf.constant(tf.int64.max // 4, tf.int64)
    # Dense [B, C+1] rows for searchsorted; the extra column stands for "past the end".
    extend = lambda x, v: tf.concat([tf.where(valid, x, v), v * tf.ones_like(text_len)], 1)  # noqa
    norm_end = extend(norm_end, big)
    # Zero-length characters (dropped marks, collapsed spaces) at offset e belong to
    # the token that ends at e: key 2*start-1 sorts them before 2*e.
    key = extend(2 * norm_start - tf.cast(norm_len == 0, tf.int64), big)
    raw_start = extend(tf.cast(raw_start.to_tensor(), tf.int64), text_len)
    begin_char = tf.searchsorted(norm_end, tf.cast(starts, tf.int64).to_tensor(), side="right")
    end_char = tf.searchsorted(key, 2 * tf.cast(ends, tf.int64).to_tensor(), side="left")
    begin = tf.gather(raw_start, begin_char, batch_dims=1)
    end = tf.maximum(tf.gather(raw_start, end_char, batch_dims=1), begin)
    # Non-ignorable characters before each character index (C+1 columns).
    solid = tf.pad(tf.cumsum(tf.cast(valid & ~ignorable, tf.int32), axis=1), [[0, 0], [1, 0]])
    visible = (tf.gather(solid, tf.maximum(end_char, begin_char), batch_dims=1)
               > tf.gather(solid, begin_char, batch_dims=1))
    lengths = starts.row_lengths()
    return tuple(tf.RaggedTensor.from_tensor(x, lengths=lengths) for x in (begin, end, visible))
