"""In-graph text handling the serving signatures add on top of `AlbertPreprocessor`.

* `pack`: `[CLS] A [SEP] (B [SEP])` packing of token-id segments the serving graph
  tokenizes itself: `AlbertPreprocessor.pack`, the one packing function;
* `trim_padding`: dynamic padding, so short requests do not pay for seq_length;
* `keep_first` / `keep_last`: the preprocessor's cuts of ragged token rows;
* `tokenize_with_masks`: "[MASK]" written in raw text becomes the [MASK] id
  (SentencePiece never produces a control symbol from text).

* `sanitize`: malformed UTF-8 as U+FFFD (`albert_tf.tokenizer.offsets`, where token
  offsets in the raw text are).
"""

from __future__ import annotations

import tensorflow as tf

from albert_tf.tokenizer.offsets import sanitize  # noqa: F401 (re-exported)
from albert_tf.tokenizer.ragged_rows import keep_first, keep_last, positions  # noqa: F401 (the first two re-exported)
from albert_tf.tokenizer.spm import MASK_PIECE


def pack(pre, segments: list[tf.RaggedTensor]):
    """Packs one or two id segments [B, (n)] with `pre`'s special ids and length.

    Returns:
      (features: the three int32 [B, seq_length] inputs, trimmed: the segments as
      kept after truncation); see `AlbertPreprocessor.pack`.
    """
    return pre.pack(segments)


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


def tokenize_with_masks(pre, texts: tf.Tensor) -> tf.RaggedTensor:
    """Token ids [B, (n)] of `texts`, each literal "[MASK]" becoming the [MASK] id.

    The text is split on "[MASK]" and each part tokenized on its own (so the word
    after a mask starts a new word, as with a space), then the mask ids are spliced
    in between.
    """
    parts = tf.strings.split(texts, sep=MASK_PIECE)  # [B, (parts)]
    ids = pre.tokenize(parts.flat_values)  # [N, (n)]
    rows, position = positions(parts)
    follows = position < tf.gather(parts.row_lengths(), rows) - 1
    masks = tf.RaggedTensor.from_row_lengths(
        tf.fill([tf.reduce_sum(tf.cast(follows, tf.int32))], tf.cast(pre.tokenizer.mask_id,
                                                                       ids.dtype)),
        tf.cast(follows, tf.int64))
    return parts.with_flat_values(tf.concat([ids, masks], axis=1)).merge_dims(1, 2)
