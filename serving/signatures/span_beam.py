"""Span decoding of the foreign SQuAD heads, each as its source decides "no answer".

* `BeamSpanModule`: the original run_squad_v2 head (`AlbertSpanBeamExtractor`).
  The model returns the start beam and, for each start, the end beam; the answer
  is the best start + end log-probability pair whose start and end lie in the
  context (end >= start, at most the record's max_answer_length pieces), as the original's
  `accumulate_predictions_v2` / `write_predictions_v2` pick it. The question has
  no answer when `cls_logits` (the original's score_diff) is not below the
  threshold; with threshold None the best span is always given, as the original
  before its threshold is tuned.
* `NullScoreSpanModule`: start/end logits without an answerability head (Hugging
  Face's AlbertForQuestionAnswering, run_squad_v1): the best span as `SpanModule`
  finds it, and, for SQuAD 2.0, "" when the null score (start + end logit of
  [CLS]) exceeds the best span's score by more than the threshold, as Hugging
  Face's question-answering post-processing does.

Both pack `[CLS] question [SEP] context [SEP]` as `SpanModule` does and answer
with the same outputs, plus `null_score_diff` [B] (the quantity compared with the
threshold).
"""

from __future__ import annotations

import tensorflow as tf

from . import text_graph
from .base import IDS_SPEC, PAD_MULTIPLE, TEXT_SPEC
from .span import SpanModule, _gather_rows, best_spans, context_positions


def _pad_to(features, length: int):
    """Pads [B,T] inputs with padding positions to at least `length` (the beam's k)."""
    missing = tf.maximum(length - tf.shape(features["input_mask"])[1], 0)
    return {name: tf.pad(value, [[0, 0], [0, missing]]) for name, value in features.items()}


def best_beam_spans(out, in_context, max_answer_length: int):
    """The best valid (start, end) pair of the beam per row.

    Args:
      out: the model's outputs: start_top_index / start_top_log_probs [B,k1],
        end_top_index / end_top_log_probs [B,k1*k2] (row i*k2+j: end j of start i).
      in_context: bool [B,T], the positions an answer may start or end on.

    Returns:
      (start [B] int32, end [B] int32, score [B] float32 = start + end log-prob,
      found [B] bool); -1, -1, -inf where no pair is valid.
    """
    k1 = tf.shape(out["start_top_index"])[1]
    k2 = tf.shape(out["end_top_index"])[1] // k1
    start = tf.repeat(out["start_top_index"], k2, axis=1)  # [B,k1*k2], row i*k2+j
    start_lp = tf.repeat(out["start_top_log_probs"], k2, axis=1)
    end = out["end_top_index"]
    valid = (tf.gather(in_context, start, batch_dims=1) & tf.gather(in_context, end, batch_dims=1)
             & (end >= start) & (end - start + 1 <= max_answer_length))
    score = tf.where(valid, start_lp + out["end_top_log_probs"], float("-inf"))
    best = tf.argmax(score, axis=1, output_type=tf.int32)  # the first of equal scores
    found = tf.reduce_any(valid, axis=1)
    pick = lambda x: tf.gather(x, best[:, None], batch_dims=1)[:, 0]  # noqa: E731
    return (tf.where(found, pick(start), -1), tf.where(found, pick(end), -1),
            tf.reduce_max(score, axis=1), found)


class _ForeignSpanModule(SpanModule):
    """`SpanModule`'s packing and text read-out with the source's own decision rule."""

    def __init__(self, model, preprocessor, record, pad_multiple=PAD_MULTIPLE):
        super().__init__(model, preprocessor, record, pad_multiple)
        threshold = record.null_score_diff_threshold
        self.null_score_diff_threshold = None if threshold is None else float(threshold)

    def _decode(self, features, out, in_context, allowed):
        """(start, end, score, found, null_score_diff), positions in the sequence;
        `allowed`: the context pieces that show text."""
        raise NotImplementedError

    @tf.function(input_signature=[IDS_SPEC, IDS_SPEC, IDS_SPEC])
    def answer_ids(self, input_word_ids, input_mask, input_type_ids):
        features = self._trim_ids(input_word_ids, input_mask, input_type_ids)
        return dict(self.model(_pad_to(features, self._min_length()), training=False))

    @tf.function(input_signature=[TEXT_SPEC, TEXT_SPEC])
    def answer(self, question, context):
        question, context = self._checked(question, context)
        context = text_graph.sanitize(context)
        features, query, ids, starts, ends, visible = self._tokenize(question, context)
        features = _pad_to(features, self._min_length())
        first, piece, in_context = context_positions(features, query, ids)
        out = self.model(features, training=False)
        start, end, score, found, diff = self._decode(
            features, out, in_context, in_context & _gather_rows(visible, piece))
        outputs = {"score": tf.where(found, score, 0.0), "null_score_diff": diff}
        if self.null_score_diff_threshold is not None:
            found &= self._answers(diff)
        return self._read_out(outputs, context, starts, ends, first, start, end, found)

    def _min_length(self) -> int:
        return 1

    def _answers(self, diff):
        raise NotImplementedError


class NullScoreSpanModule(_ForeignSpanModule):
    """Start/end logits; SQuAD 2.0 by the null score of [CLS] (Hugging Face's rule)."""

    def _decode(self, features, out, in_context, allowed):
        start, end, score, found = best_spans(out["start_logits"], out["end_logits"], allowed,
                                              self.record.max_answer_length)
        null = out["start_logits"][:, 0] + out["end_logits"][:, 0]  # [CLS]
        return start, end, score, found, tf.where(found, null - score, float("inf"))

    def _answers(self, diff):
        return diff <= self.null_score_diff_threshold  # "" when null > best + threshold


class BeamSpanModule(_ForeignSpanModule):
    """The original run_squad_v2 head: beam search over starts and ends, cls_logits."""

    def _min_length(self) -> int:
        return max(self.model.start_n_top, self.model.end_n_top)  # top_k needs T >= k

    def _decode(self, features, out, in_context, allowed):
        # The original checks the context only (not whether a piece shows text).
        start, end, score, found = best_beam_spans(out, in_context,
                                                   self.record.max_answer_length)
        return start, end, score, found, out["cls_logits"]

    def _answers(self, diff):
        return diff < self.null_score_diff_threshold  # the original's score_diff rule
