"""Read-time (dynamic) whole-word n-gram masking with tensorflow-text.

Each batch gets fresh masks: the original tokens are restored from the
record's `masked_lm_ids`, words are rebuilt from `token_boundary`, and
`tensorflow_text.mask_language_model` masks them with

* `NgramItemSelector`, a `RandomItemSelector` that chooses whole-word n-grams with
  the rules of `masking.py` (visit word starts in random order, draw n with
  p(n) proportional to 1/n within the segment, fall back to shorter n-grams at
  the budget, skip overlaps; budget min(P, max(1, round(0.15 * length)))), and
* `tensorflow_text.MaskValuesChooser` for the 80% [MASK] / 10% random / 10%
  unchanged replacement (random ids uniform over the vocabulary, as in
  `masking.py`).
"""

from __future__ import annotations

import dataclasses

import tensorflow as tf
import tensorflow_text as tf_text

from ..data import masking


@dataclasses.dataclass(frozen=True)
class DynamicMasking:
    """What read-time masking needs: special ids, vocabulary size and the masking rates."""

    vocab_size: int
    mask_id: int
    cls_id: int
    sep_id: int
    pad_id: int = 0
    masked_lm_prob: float = 0.15
    max_ngram: int = masking.MAX_NGRAM

    @classmethod
    def from_tokenizer(cls, tokenizer, **kwargs) -> DynamicMasking:
        """From an `AlbertTokenizer` or a `WordPieceTokenizer` (kwargs: masked_lm_prob, max_ngram)."""
        return cls(tokenizer.vocab_size, tokenizer.mask_id, tokenizer.cls_id, tokenizer.sep_id,
                   tokenizer.pad_id, **kwargs)


def _shift_left(x: tf.Tensor, k: int, fill) -> tf.Tensor:
    """x[:, w + k], padded with `fill` past the end. x: [B, W]."""
    if k == 0:
        return x
    pad = tf.fill([tf.shape(x)[0], k], tf.constant(fill, x.dtype))
    return tf.concat([x[:, k:], pad], axis=1)


class NgramItemSelector(tf_text.RandomItemSelector):
    """Selects whole-word n-grams (items on axis 1 are words) up to a token budget.

    tensorflow-text's `RandomItemSelector` chooses single items up to a count
    of items; this subclass keeps its arguments and `get_selectable` but
    chooses n-grams of words, budgeted in tokens like the original.

    Args:
      max_selections: P, the most tokens selected per sequence.
      selection_rate: masked_lm_prob.
      max_ngram: the longest n-gram.
      unselectable_ids: ids of words never selected ([CLS], [SEP], <pad>).
    """

    def __init__(self, max_selections: int, selection_rate: float, max_ngram: int,
                 unselectable_ids: list[int]):
        super().__init__(max_selections, selection_rate, unselectable_ids)
        self.max_ngram = max_ngram

    def _ngram_cdfs(self) -> tf.Tensor:
        """[max_ngram + 1, max_ngram]: row r is the cdf of p(n) truncated to n <= r."""
        rows = [[1.0] * self.max_ngram]
        for r in range(1, self.max_ngram + 1):
            cdf = masking.ngram_probabilities(r).cumsum().tolist()
            rows.append(cdf + [1.0] * (self.max_ngram - r))
        return tf.constant(rows, tf.float32)

    def get_selection_mask(self, input_ids: tf.RaggedTensor, axis: int = 1) -> tf.RaggedTensor:
        """input_ids: [B, (words), (pieces)] -> bool [B, (words)]."""
        if axis != 1:
            raise ValueError(f"NgramItemSelector selects words on axis 1, not {axis}")
        selectable = self.get_selectable(input_ids, axis)  # [B, (W)]
        word_lengths = input_ids.row_lengths(axis=2)  # [B, (W)]
        num_words = selectable.row_lengths()
        sel = selectable.to_tensor(False)  # [B, Wm]
        lengths = tf.cast(word_lengths.to_tensor(0), tf.int32)  # [B, Wm]
        tokens = tf.reduce_sum(lengths, axis=1)
        budget = tf.cast(tf.round(tf.cast(tokens, tf.float32) * self.selection_rate), tf.int32)
        budget = tf.minimum(self.max_selections_per_batch, tf.maximum(1, budget))  # [B]
        n_max = self.max_ngram
        # reach: consecutive selectable words from w, capped at max_ngram; spans[..., n-1]:
        # pieces in words w .. w+n-1.
        run = tf.ones_like(sel)
        reach = tf.zeros_like(lengths)
        spans = []
        total = tf.zeros_like(lengths)
        for k in range(n_max):
            run = run & _shift_left(sel, k, False)
            reach += tf.cast(run, tf.int32)
            total += _shift_left(lengths, k, 0)
            spans.append(total)
        spans = tf.stack(spans, axis=-1)  # [B, Wm, N]
        cdf = tf.gather(self._ngram_cdfs(), reach)  # [B, Wm, N]
        u = tf.random.uniform(tf.shape(sel))
        drawn = 1 + tf.reduce_sum(tf.cast(u[..., None] >= cdf[..., :-1], tf.int32), axis=-1)
        drawn = tf.minimum(drawn, reach)  # [B, Wm]
        # Visit selectable words in a random order: sort random keys, unselectable last.
        keys = tf.where(sel, tf.random.uniform(tf.shape(sel)), 2.0)
        order = tf.argsort(keys, axis=1, stable=True)  # [B, Wm]
        covered = self._select(order, drawn, spans, budget, tf.reduce_sum(tf.cast(sel, tf.int32), 1))
        return tf.RaggedTensor.from_tensor(covered, lengths=num_words)

    def _select(self, order, drawn, spans, budget, num_selectable) -> tf.Tensor:
        """The greedy pass of `masking.select_ngrams`, vectorized over the batch."""
        batch, width = tf.shape(order)[0], tf.shape(order)[1]
        rows = tf.range(batch)
        positions = tf.range(width)[None, :]
        n_values = tf.range(1, self.max_ngram + 1)[None, :]  # [1, N]

        def step(k, covered, count):
            w = order[:, k]
            at = tf.stack([rows, w], axis=1)
            span = tf.gather_nd(spans, at)  # [B, N]
            fits = (count[:, None] + span <= budget[:, None]) & (n_values <= tf.gather_nd(drawn, at)[:, None])
            n = tf.reduce_max(tf.where(fits, n_values, 0), axis=1)  # [B], 0: nothing fits
            window = (positions >= w[:, None]) & (positions < (w + n)[:, None])
            clash = tf.reduce_any(window & covered, axis=1)
            take = (k < num_selectable) & (count < budget) & (n > 0) & ~clash
            covered = covered | (window & take[:, None])
            added = tf.gather(tf.concat([tf.zeros([batch, 1], tf.int32), span], 1), n, batch_dims=1)
            return k + 1, covered, count + tf.where(take, added, 0)

        def more(k, covered, count):
            return (k < width) & tf.reduce_any((k < num_selectable) & (count < budget))

        _, covered, _ = tf.while_loop(
            more, step, (tf.constant(0), tf.zeros([batch, width], tf.bool), tf.zeros([batch], tf.int32)))
        return covered


def original_ids(input_ids: tf.Tensor, positions: tf.Tensor, labels: tf.Tensor,
                 weights: tf.Tensor) -> tf.Tensor:
    """Undoes a record's static masking: [B, T] ids with the labels put back at their positions."""
    batch = tf.shape(positions)[0]
    rows = tf.broadcast_to(tf.range(batch)[:, None], tf.shape(positions))
    valid = weights > 0
    indices = tf.stack([tf.boolean_mask(rows, valid), tf.boolean_mask(positions, valid)], axis=1)
    return tf.tensor_scatter_nd_update(input_ids, indices, tf.boolean_mask(labels, valid))


def remask(features: dict, config: DynamicMasking, max_predictions: int) -> dict:
    """Fresh masks for a parsed batch.

    Args:
      features: int32 `[B, T]` input_ids, input_mask, token_boundary and int32 /
        float32 `[B, P]` masked_lm_positions, masked_lm_ids, masked_lm_weights.

    Returns:
      The same dict with input_ids and the three masked_lm_* entries replaced
      (same shapes and dtypes).
    """
    ids = original_ids(features["input_ids"], features["masked_lm_positions"],
                       features["masked_lm_ids"], features["masked_lm_weights"])
    batch, seq_length = tf.shape(ids)[0], ids.shape[1]
    lengths = tf.reduce_sum(features["input_mask"], axis=1)
    special = tf.equal(ids, config.cls_id) | tf.equal(ids, config.sep_id)
    after_special = tf.pad(special[:, :-1], [[0, 0], [1, 0]], constant_values=True)
    starts = (features["token_boundary"] > 0) | special | after_special
    tokens = tf.RaggedTensor.from_tensor(ids, lengths=lengths)
    flat_starts = tf.RaggedTensor.from_tensor(starts, lengths=lengths).flat_values
    pieces = tf.RaggedTensor.from_row_starts(tokens.flat_values, tf.where(flat_starts)[:, 0])
    words = tf.RaggedTensor.from_row_lengths(
        pieces, tf.reduce_sum(tf.cast(tf.RaggedTensor.from_tensor(starts, lengths=lengths), tf.int64), 1))
    selector = NgramItemSelector(max_predictions, config.masked_lm_prob, config.max_ngram,
                                 [config.cls_id, config.sep_id, config.pad_id])
    chooser = tf_text.MaskValuesChooser(config.vocab_size, config.mask_id,
                                        masking.MASK_RATE, masking.RANDOM_RATE)
    masked, positions, labels = tf_text.mask_language_model(words, selector, chooser, axis=1)
    out = dict(features)
    out["input_ids"] = masked.to_tensor(0, shape=[batch, seq_length])
    out["masked_lm_positions"] = tf.cast(positions.to_tensor(0, shape=[batch, max_predictions]), tf.int32)
    out["masked_lm_ids"] = labels.to_tensor(0, shape=[batch, max_predictions])
    out["masked_lm_weights"] = tf.ones_like(labels, tf.float32).to_tensor(0.0, shape=[batch, max_predictions])
    return out
