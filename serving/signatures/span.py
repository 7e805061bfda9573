"""In-graph span decoding for extractive QA: best token span -> answer text and offsets.

The model scores each token as an answer start and end; the answer is the span
(start <= end < start + max_answer_length, both inside the context, the start among
the n_best highest start logits and the end among the n_best highest end logits)
with the highest start + end logit, as in the original SQuAD post-processing and
fine-tuning's decoding. Every such setting comes from the model's task record
(`albert_tf.checkpoint.task_record`), the one source fine-tuning wrote them to. The span's
pieces carry byte offsets into the raw context, which become the answer text (a
substring of the context, ignorable characters trimmed) and character offsets.
"""

from __future__ import annotations

import tensorflow as tf

from . import offsets, text_graph
from .base import (
    IDS_SPEC,
    PAD_MULTIPLE,
    TEXT_SPEC,
    WARMUP_TEXTS,
    ServingModule,
    checked_inputs,
    strings,
)
from .offsets import IGNORABLE

TRAILING_IGNORABLE = IGNORABLE.replace(r"\p{M}", "")


def best_spans(start_logits: tf.Tensor, end_logits: tf.Tensor, allowed: tf.Tensor,
               max_answer_length: int, n_best: int | None = None, pool: tf.Tensor | None = None):
    """The highest-scoring span per row.

    Args:
      start_logits, end_logits: float32 [B, T].
      allowed: bool [B, T], the tokens an answer may start or end on (the context).
      max_answer_length: longest span in tokens.
      n_best: if given, a span starts among the row's `n_best` highest start logits
        and ends among its `n_best` highest end logits, of the tokens in `pool`.
      pool: bool [B, T], the tokens the n_best are drawn from (default: `allowed`;
        fine-tuning draws them from every context token, then drops spans with no
        visible text).

    Returns:
      (start [B] int32, end [B] int32 inclusive, score [B] float32 = start + end
      logit, found [B] bool). Rows without any allowed token have found=False and
      start = end = -1, score = -inf.
    """
    length = tf.shape(start_logits)[1]
    pair = start_logits[:, :, None] + end_logits[:, None, :]  # [B,T(start),T(end)]
    index = tf.range(length)
    width = index[None, :] - index[:, None]  # [T,T] end - start
    band = (width >= 0) & (width < max_answer_length)
    starts, ends = allowed, allowed
    if n_best is not None:
        pool = allowed if pool is None else pool
        starts = allowed & _top_n(start_logits, pool, n_best)
        ends = allowed & _top_n(end_logits, pool, n_best)
    valid = band[None] & starts[:, :, None] & ends[:, None, :]  # [B,T,T]
    scores = tf.where(valid, pair, tf.fill(tf.shape(pair), float("-inf")))
    flat = tf.reshape(scores, [tf.shape(scores)[0], -1])  # [B,T*T]
    best = tf.argmax(flat, axis=1, output_type=tf.int32)
    found = tf.reduce_any(valid, axis=[1, 2])
    start = tf.where(found, best // length, -1)
    end = tf.where(found, best % length, -1)
    return start, end, tf.reduce_max(flat, axis=1), found


def _top_n(logits: tf.Tensor, allowed: tf.Tensor, n: int) -> tf.Tensor:
    """bool [B, T]: logits at least the row's n-th highest allowed logit."""
    masked = tf.where(allowed, logits, tf.fill(tf.shape(logits), float("-inf")))
    k = tf.minimum(n, tf.shape(logits)[1])
    kth = tf.math.top_k(masked, k=k).values[:, -1:]  # [B, 1]
    return masked >= kth


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


# ------------------------------------------------------------------ the module
def context_positions(features, query, ids):
    """(first [B] int64: sequence position of context piece 0, piece [B,T] int64: the
    context piece index of every position, in_context [B,T] bool)."""
    first = query.row_lengths() + 2  # after [CLS] question [SEP]
    piece = tf.range(tf.shape(features["input_mask"], tf.int64)[1])[None] - first[:, None]
    return first, piece, (piece >= 0) & (piece < ids.row_lengths()[:, None])


def _gather_rows(values: tf.RaggedTensor, index: tf.Tensor) -> tf.Tensor:
    """values [B, (n)] at index [B, T] (out-of-row indices give False)."""
    dense = tf.concat([values.to_tensor(False), tf.zeros_like(index[:, :1], tf.bool)], axis=1)
    width = tf.shape(dense, tf.int64)[1]
    safe = tf.where((index >= 0) & (index < width - 1), index, width - 1)
    return tf.gather(dense, safe, batch_dims=1)


class SpanModule(ServingModule):
    """Extractive QA: the answer's text and character offsets in the raw context.

    Packs `[CLS] question [SEP] context [SEP]` as SQuAD fine-tuning does (the
    question cut to the record's max_query_length tokens, the context to the rest;
    one window: text past `seq_length` is not searched). Answers start and end on
    pieces with visible text, among the n_best best starts and ends, and are at
    most max_answer_length pieces long. With an answerability head (SQuAD 2.0) the
    answer is "" when no_answer_probability > the record's no_answer_threshold.

    Args:
      model: an `AlbertSpanExtractor`.
      preprocessor: `AlbertPreprocessor` with the serving sequence length.
      record: the model's `TaskRecord` (task "span"), the source of every setting.
      pad_multiple: dynamic padding granularity.
    """

    def __init__(self, model, preprocessor, record, pad_multiple=PAD_MULTIPLE):
        super().__init__(model, preprocessor, pad_multiple)
        if record.task not in ("span", "span_beam"):
            raise ValueError(f"a span model needs a span task record, not {record.task!r}")
        self.record = record
        self.no_answer_threshold = float(record.no_answer_threshold)

    @staticmethod
    def _checked(question, context):
        """`serving_default(question, context)`'s inputs, checked (`checked_inputs`)."""
        return checked_inputs("serving_default", {"question": question, "context": context})

    def _tokenize(self, question, context):
        pre = self.preprocessor
        query = text_graph.keep_first(pre.tokenize(question), tf.fill(
            tf.shape(question), min(self.record.max_query_length, pre.seq_length - 4)))
        pieces = offsets.tokenize_with_offsets(pre, context)
        room = pre.seq_length - 3 - query.row_lengths()
        ids, starts, ends, visible = (text_graph.keep_first(x, room) for x in pieces)
        features, _ = text_graph.pack(pre, [query, ids])
        features = text_graph.trim_padding(features, self.pad_multiple)
        return features, query, ids, starts, ends, visible

    @tf.function(input_signature=[TEXT_SPEC, TEXT_SPEC])
    def answer(self, question, context):
        question, context = self._checked(question, context)
        context = text_graph.sanitize(context)
        features, query, ids, starts, ends, visible = self._tokenize(question, context)
        out = self.model(features, training=False)
        first, piece, in_context = context_positions(features, query, ids)
        start, end, score, found = best_spans(out["start_logits"], out["end_logits"],
                                              in_context & _gather_rows(visible, piece),
                                              self.record.max_answer_length, self.record.n_best,
                                              pool=in_context)
        outputs = {"score": tf.where(found, score, 0.0)}
        if "answerable_logits" in out:
            no_answer = tf.sigmoid(-out["answerable_logits"])
            outputs["no_answer_probability"] = no_answer
            found &= no_answer <= self.no_answer_threshold
        return self._read_out(outputs, context, starts, ends, first, start, end, found)

    @staticmethod
    def _read_out(outputs, context, starts, ends, first, start, end, found):
        """`outputs` plus the answer text and character offsets of the sequence positions
        start..end (where `found`), read from `context` by the pieces' byte offsets."""
        first32 = tf.cast(first, tf.int32)
        begin, end_byte = span_offsets(starts, ends, start - first32, end - first32, found)
        answer, start_char, end_char = answer_text_and_chars(context, begin, end_byte, found)
        outputs.update(answer=answer, start_char=start_char, end_char=end_char,
                       has_answer=found)
        return outputs

    @tf.function(input_signature=[IDS_SPEC, IDS_SPEC, IDS_SPEC])
    def answer_ids(self, input_word_ids, input_mask, input_type_ids):
        out = self.model(self._trim_ids(input_word_ids, input_mask, input_type_ids),
                         training=False)
        return dict(out)

    def signatures(self):
        return {"serving_default": self.answer, "token_ids": self.answer_ids}

    def warmup_examples(self):
        examples = super().warmup_examples()
        texts = strings(WARMUP_TEXTS)
        examples["serving_default"] = [{"question": texts, "context": texts[::-1]}]
        return examples
