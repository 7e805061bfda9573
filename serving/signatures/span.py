"""In-graph span decoding for extractive QA: best token span -> answer text and offsets.

The context is cut into doc-stride windows (`span_windows`), all run as one batch.
The model scores each token as an answer start and end; the answer is the span
(start <= end < start + max_answer_length, both inside the context, the start among
the n_best highest start logits of the pieces the window gives the most context and
the end among the n_best highest end logits) with the highest start + end logit over
all the row's windows: `albert_tf.span_decoding`'s rule, which fine-tuning's SQuAD
prediction and `AlbertSpanExtractor.predict` follow. Every such setting comes from the model's task record
(`albert_tf.checkpoint.task_record`), the one source fine-tuning wrote them to. The span's
pieces carry byte offsets into the raw context, which become the answer text (a
substring of the context, ignorable characters trimmed) and character offsets.
"""

from __future__ import annotations

import dataclasses

import tensorflow as tf

from albert_tf.span_decoding import query_limit
from albert_tf.tokenizer import offsets
from albert_tf.tokenizer.offsets import answer_text_and_chars
from albert_tf.tokenizer.traced import graph_function

from . import span_top, span_windows, text_graph
from .base import (
    IDS_SPEC,
    PAD_MULTIPLE,
    TEXT_SPEC,
    WARMUP_TEXTS,
    ServingModule,
    checked_inputs,
    strings,
)


def best_spans(start_logits: tf.Tensor, end_logits: tf.Tensor, allowed: tf.Tensor,
               max_answer_length: int, n_best: int | None = None,
               start_pool: tf.Tensor | None = None, end_pool: tf.Tensor | None = None):
    """The highest-scoring span per row (per window).

    Args:
      start_logits, end_logits: float32 [B, T].
      allowed: bool [B, T], the tokens an answer may start or end on (the context
        pieces that show text).
      max_answer_length: longest span in tokens.
      n_best: if given, a span starts among the row's `n_best` highest start logits
        of the tokens in `start_pool` and ends among its `n_best` highest end logits
        of `end_pool` (fine-tuning draws the starts from the pieces the window gives
        the most context, the ends from all its context pieces, then drops spans with
        no visible text).
      start_pool, end_pool: bool [B, T] (default: `allowed`).

    Returns:
      (start [B] int32, end [B] int32 inclusive, score [B] float32 = start + end
      logit, found [B] bool). Rows without any allowed token have found=False and
      start = end = -1, score = -inf.
    """
    length = tf.shape(start_logits)[1]
    scores = span_scores(start_logits, end_logits, allowed, max_answer_length, n_best,
                         start_pool, end_pool)
    flat = tf.reshape(scores, [tf.shape(scores)[0], -1])  # [B,T*T]
    best = tf.argmax(flat, axis=1, output_type=tf.int32)
    found = tf.reduce_any(flat > float("-inf"), axis=1)
    start = tf.where(found, best // length, -1)
    end = tf.where(found, best % length, -1)
    return start, end, tf.reduce_max(flat, axis=1), found


def span_scores(start_logits, end_logits, allowed, max_answer_length: int, n_best=None,
                start_pool=None, end_pool=None) -> tf.Tensor:
    """float32 [B, T(start), T(end)]: start + end logit of every span `best_spans` may
    choose (its arguments), -inf elsewhere."""
    pair = start_logits[:, :, None] + end_logits[:, None, :]  # [B,T(start),T(end)]
    index = tf.range(tf.shape(start_logits)[1])
    width = index[None, :] - index[:, None]  # [T,T] end - start
    band = (width >= 0) & (width < max_answer_length)
    starts, ends = allowed, allowed
    if n_best is not None:
        start_pool = allowed if start_pool is None else start_pool
        end_pool = allowed if end_pool is None else end_pool
        starts = allowed & _top_n(start_logits, start_pool, n_best)
        ends = allowed & _top_n(end_logits, end_pool, n_best)
    valid = band[None] & starts[:, :, None] & ends[:, None, :]  # [B,T,T]
    return tf.where(valid, pair, tf.fill(tf.shape(pair), float("-inf")))


def _top_n(logits: tf.Tensor, pool: tf.Tensor, n: int) -> tf.Tensor:
    """bool [B, T]: the tokens of `pool` whose logit is at least the row's n-th highest
    in `pool` (all of `pool` when it has fewer than n)."""
    masked = tf.where(pool, logits, tf.fill(tf.shape(logits), float("-inf")))
    k = tf.minimum(n, tf.shape(logits)[1])
    kth = tf.math.top_k(masked, k=k).values[:, -1:]  # [B, 1]
    return pool & (masked >= kth)


def span_offsets(piece_starts: tf.RaggedTensor, piece_ends: tf.RaggedTensor,
                 first_piece: tf.Tensor, last_piece: tf.Tensor, found: tf.Tensor):
    """Byte range [begin, end) in the context covered by pieces first..last.

    Args:
      piece_starts, piece_ends: int [B, (pieces)] byte offsets of the context's
        pieces in the raw context.
      first_piece, last_piece: int32 [B] piece indices (valid where `found`).
      found: bool [B].

    Returns:
      (begin [B], end [B]) int64 byte offsets; 0, 0 where not found.
    """
    # A zero column keeps the gather valid when no row has a context piece.
    starts = tf.concat([tf.cast(piece_starts.to_tensor(), tf.int64),
                        tf.zeros_like(first_piece, tf.int64)[:, None]], axis=1)
    ends = tf.concat([tf.cast(piece_ends.to_tensor(), tf.int64),
                      tf.zeros_like(first_piece, tf.int64)[:, None]], axis=1)
    safe_first = tf.where(found, first_piece, 0)[:, None]
    safe_last = tf.where(found, last_piece, 0)[:, None]
    begin = tf.gather(starts, safe_first, batch_dims=1)[:, 0]
    end = tf.gather(ends, safe_last, batch_dims=1)[:, 0]
    zero = tf.zeros_like(begin)
    return tf.where(found, begin, zero), tf.where(found, end, zero)


# ------------------------------------------------------------------ the module
def pad_to(features, length: int):
    """Pads [B,T] inputs with padding positions to at least `length` (the beam's k)."""
    missing = tf.maximum(length - tf.shape(features["input_mask"])[1], 0)
    return {name: tf.pad(value, [[0, 0], [0, missing]]) for name, value in features.items()}


@dataclasses.dataclass
class WindowBatch:
    """A request cut into windows: what decoding reads beside the model's outputs.

    Attributes:
      context: tf.string [B], the sanitized contexts (offsets refer to these bytes).
      features: the model's inputs [W, T], every window of every row.
      windows: `span_windows.Windows`.
      starts, ends: int64 [B, (P)] each context piece's byte range in its context.
      piece: int64 [W, T] the row's context piece at each position (valid in context).
      in_context, max_context, allowed: bool [W, T]: a context piece; one this window
        gives the most context (an answer may start there); one showing text.
    """

    context: tf.Tensor
    features: dict
    windows: span_windows.Windows
    starts: tf.RaggedTensor
    ends: tf.RaggedTensor
    piece: tf.Tensor = None
    in_context: tf.Tensor = None
    max_context: tf.Tensor = None
    allowed: tf.Tensor = None


class SpanModule(ServingModule):
    """Extractive QA over contexts of any length: the answer's text and character offsets.

    Windows the context as SQuAD fine-tuning does (`span_windows`: the question cut to
    the record's max_query_length pieces, the context cut into windows of the rest
    every doc_stride pieces, at most max_windows a row) and runs every window of every
    row as one batch. Answers are decoded across a row's windows by
    `albert_tf.span_decoding`'s rule: starts among the n_best best of the pieces a
    window gives the most context, ends among the n_best best of its context pieces,
    both showing visible text, at most max_answer_length pieces long, the best start +
    end logit of all windows. With an answerability head (SQuAD 2.0) the answer is ""
    when no_answer_probability (1 - sigmoid of the highest window's logit) > the
    record's no_answer_threshold.

    Args:
      model: an `AlbertSpanExtractor`.
      preprocessor: `AlbertPreprocessor` with the serving sequence length.
      record: the model's `TaskRecord` (task "span"), the source of every setting
        (doc_stride and max_windows as export may override them).
      pad_multiple: dynamic padding granularity.
    """

    def __init__(self, model, preprocessor, record, pad_multiple=PAD_MULTIPLE):
        super().__init__(model, preprocessor, pad_multiple)
        if record.spec is not model.task_spec:
            raise ValueError(f"a {model.task} model needs a {model.task} task record, not "
                             f"{record.task!r}")
        self.record = record
        self.no_answer_threshold = float(record.no_answer_threshold)

    @staticmethod
    def _checked(question, context):
        """`serving_default(question, context)`'s inputs, checked (`checked_inputs`)."""
        return checked_inputs("serving_default", {"question": question, "context": context})

    def _windowed(self, question, context) -> WindowBatch:
        """Tokenizes, windows and packs a request (refused past max_windows a row)."""
        question, context = self._checked(question, context)
        context = text_graph.sanitize(context)
        pre, record = self.preprocessor, self.record
        limit = query_limit(record.max_query_length, pre.seq_length)
        query = text_graph.keep_first(pre.tokenize(question), tf.fill(tf.shape(question), limit))
        context = span_windows.check_words(query.row_lengths(), context, pre.seq_length,
                                           record.doc_stride, record.max_windows)
        ids, starts, ends, visible = offsets.tokenize_with_offsets(pre, context)
        windows = span_windows.split(query.row_lengths(), ids, pre.seq_length,
                                     record.doc_stride, record.max_windows)
        features = span_windows.features(pre, query, ids, windows)
        features = pad_to(text_graph.trim_padding(features, self.pad_multiple),
                          self._min_length())
        batch = WindowBatch(context, features, windows, starts, ends)
        batch.piece, batch.in_context, batch.max_context, shown = span_windows.positions(
            windows, tf.shape(batch.features["input_mask"])[1],
            [windows.max_context, visible.flat_values])
        batch.allowed = batch.in_context & shown
        return batch

    def _min_length(self) -> int:
        """The fewest positions the model takes (the beam head's top-k)."""
        return 1

    def _window_spans(self, batch: WindowBatch, out):
        """(start, end, score, found) [W] of each window, positions in the sequence."""
        return best_spans(out["start_logits"], out["end_logits"], batch.allowed,
                          self.record.max_answer_length, self.record.n_best,
                          start_pool=batch.in_context & batch.max_context,
                          end_pool=batch.in_context)

    def _answer_outputs(self, batch: WindowBatch, out, score, found):
        """(outputs beyond the span, found) [B]: the head's no-answer decision."""
        outputs = {}
        if "answerable_logits" in out:
            no_answer = tf.sigmoid(-span_windows.row_max(batch.windows, out["answerable_logits"]))
            outputs["no_answer_probability"] = no_answer
            found &= no_answer <= self.no_answer_threshold
        return outputs, found

    @graph_function(input_signature=[TEXT_SPEC, TEXT_SPEC])
    def answer(self, question, context):
        batch = self._windowed(question, context)
        out = self.run_model(batch.features)
        start, end, score, found = self._window_spans(batch, out)
        window, found, score = span_windows.best_window(batch.windows, score, found)
        # The row's context pieces the best window's span starts and ends on.
        first_piece, last_piece = (
            tf.gather_nd(batch.piece, tf.stack(
                [window, tf.cast(tf.gather(tf.maximum(position, 0), window), tf.int64)], 1))
            for position in (start, end))
        extra, answered = self._answer_outputs(batch, out, score, found)
        outputs = {"score": tf.where(found, score, 0.0), **extra}
        begin, end_byte = span_offsets(batch.starts, batch.ends, tf.cast(first_piece, tf.int32),
                                       tf.cast(last_piece, tf.int32), answered)
        answer, start_char, end_char = answer_text_and_chars(batch.context, begin, end_byte,
                                                             answered)
        outputs.update(answer=answer, start_char=start_char, end_char=end_char,
                       has_answer=answered)
        if (self.record.top_k or 1) > 1:
            outputs.update(span_top.top_answers(
                batch, self._candidate_scores(batch, out), self.record.n_best,
                self.record.top_k, lambda scores, count: self.empty_answer(batch, out, scores,
                                                                           count)))
        return outputs

    def _candidate_scores(self, batch: WindowBatch, out) -> tf.Tensor:
        """[W, T, T] the start + end logit of every span `_window_spans` chooses among."""
        return span_scores(out["start_logits"], out["end_logits"], batch.allowed,
                           self.record.max_answer_length, self.record.n_best,
                           start_pool=batch.in_context & batch.max_context,
                           end_pool=batch.in_context)

    def empty_answer(self, batch: WindowBatch, out, scores, count):
        """(position, score) [B] of "" in a top_k list (`span_top`): first with P(no
        answer) where an answerability head says no answer, first with 0 in a row without
        any span, else not listed (position top_k)."""
        at = tf.where(count == 0, 0, self.record.top_k)
        score = tf.zeros(tf.shape(count), tf.float32)
        if "answerable_logits" in out:
            no_answer = tf.sigmoid(-span_windows.row_max(batch.windows, out["answerable_logits"]))
            at = tf.where(no_answer > self.no_answer_threshold, 0, at)
            score = tf.where(no_answer > self.no_answer_threshold, no_answer, score)
        return at, score

    @graph_function(input_signature=[IDS_SPEC, IDS_SPEC, IDS_SPEC])
    def answer_ids(self, input_word_ids, input_mask, input_type_ids):
        return dict(self.run_model(self._trim_ids(input_word_ids, input_mask, input_type_ids)))

    def signatures(self):
        return {"serving_default": self.answer, "token_ids": self.answer_ids}

    def warmup_examples(self):
        examples = super().warmup_examples()
        texts = strings(WARMUP_TEXTS)
        examples["serving_default"] = [{"question": texts, "context": texts[::-1]}]
        return examples
