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

Both window the context and pick the best span over the windows as `SpanModule`
does (the start in the window that gives it the most context) and answer with the
same outputs, plus `null_score_diff` [B] (the quantity compared with the threshold;
the null score is the lowest over the row's windows, as both sources take it).
"""

from __future__ import annotations

import tensorflow as tf

from albert_tf.tokenizer.traced import graph_function

from . import span_top, span_windows
from .base import IDS_SPEC, PAD_MULTIPLE
from .span import SpanModule, pad_to


def best_beam_spans(out, may_start, may_end, max_answer_length: int):
    """The best valid (start, end) pair of the beam per row (window).

    Args:
      out: the model's outputs: start_top_index / start_top_log_probs [B,k1],
        end_top_index / end_top_log_probs [B,k1*k2] (row i*k2+j: end j of start i).
      may_start, may_end: bool [B,T], the positions an answer may start / end on.

    Returns:
      (start [B] int32, end [B] int32, score [B] float32 = start + end log-prob,
      found [B] bool); -1, -1, -inf where no pair is valid.
    """
    k1 = tf.shape(out["start_top_index"])[1]
    k2 = tf.shape(out["end_top_index"])[1] // k1
    start = tf.repeat(out["start_top_index"], k2, axis=1)  # [B,k1*k2], row i*k2+j
    start_lp = tf.repeat(out["start_top_log_probs"], k2, axis=1)
    end = out["end_top_index"]
    valid = (tf.gather(may_start, start, batch_dims=1) & tf.gather(may_end, end, batch_dims=1)
             & (end >= start) & (end - start + 1 <= max_answer_length))
    score = tf.where(valid, start_lp + out["end_top_log_probs"], float("-inf"))
    best = tf.argmax(score, axis=1, output_type=tf.int32)  # the first of equal scores
    found = tf.reduce_any(valid, axis=1)
    pick = lambda x: tf.gather(x, best[:, None], batch_dims=1)[:, 0]  # noqa: E731
    return (tf.where(found, pick(start), -1), tf.where(found, pick(end), -1),
            tf.reduce_max(score, axis=1), found)


class _ForeignSpanModule(SpanModule):
    """`SpanModule`'s windows and text read-out with the source's own decision rule."""

    def __init__(self, model, preprocessor, record, pad_multiple=PAD_MULTIPLE):
        super().__init__(model, preprocessor, record, pad_multiple)
        threshold = record.null_score_diff_threshold
        self.null_score_diff_threshold = None if threshold is None else float(threshold)

    @graph_function(input_signature=[IDS_SPEC, IDS_SPEC, IDS_SPEC])
    def answer_ids(self, input_word_ids, input_mask, input_type_ids):
        features = self._trim_ids(input_word_ids, input_mask, input_type_ids)
        return dict(self.run_model(pad_to(features, self._min_length())))

    def _null_score_diff(self, batch, out, score, found):
        """[B]: the quantity compared with the threshold."""
        raise NotImplementedError

    def _answer_outputs(self, batch, out, score, found):
        diff = self._null_score_diff(batch, out, score, found)
        if self.null_score_diff_threshold is not None:
            found &= self._answers(diff)
        return {"null_score_diff": diff}, found

    def _answers(self, diff):
        raise NotImplementedError


class NullScoreSpanModule(_ForeignSpanModule):
    """Start/end logits; SQuAD 2.0 by the null score of [CLS] (Hugging Face's rule): the
    lowest over the row's windows, against the best span's score."""

    def _null_score_diff(self, batch, out, score, found):
        null = out["start_logits"][:, 0] + out["end_logits"][:, 0]  # [W], [CLS]
        return tf.where(found, span_windows.row_min(batch.windows, null) - score, float("inf"))

    def empty_answer(self, batch, out, scores, count):
        """"" ranked among a top_k list's spans with the lowest null score less the
        threshold (transformers' pipeline with handle_impossible_answer, threshold 0)."""
        null = out["start_logits"][:, 0] + out["end_logits"][:, 0]  # [W], [CLS]
        score = span_windows.row_min(batch.windows, null) - self.null_score_diff_threshold
        return span_top.rank_among(scores, count, score), score

    def _answers(self, diff):
        return diff <= self.null_score_diff_threshold  # "" when null > best + threshold


class BeamSpanModule(_ForeignSpanModule):
    """The original run_squad_v2 head: beam search over starts and ends, cls_logits (the
    lowest over the row's windows, as the original's score_null)."""

    def _min_length(self) -> int:
        return max(self.model.start_n_top, self.model.end_n_top)  # top_k needs T >= k

    def _window_spans(self, batch, out):
        # The original checks the context (and a start's max context), not whether a
        # piece shows text.
        return best_beam_spans(out, batch.in_context & batch.max_context, batch.in_context,
                               self.record.max_answer_length)

    def _null_score_diff(self, batch, out, score, found):
        return span_windows.row_min(batch.windows, out["cls_logits"])

    def _answers(self, diff):
        return diff < self.null_score_diff_threshold  # the original's score_diff rule
