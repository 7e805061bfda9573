"""Answers of a span model over every window of a question: `AlbertSpanExtractor.predict`
(the served signature's outputs) and `AlbertSpanExtractor.answer` (transformers'
question-answering pipeline's options and output).

The windows, candidates and ranking are `albert_tf.span_decoding`'s rule; this module
runs the model over the windows and reads the answers out. Python decodes any number of
windows (inputs and logits linear in the context); `max_windows` bounds a served
context only (`serving/signatures/span_windows.py`).

The pipeline's options, mapped onto the task record's settings (`QaOptions.applied`):

* `top_k`: answers per question, the record's `top_k` (its `n_best` stays the candidate
  pool of each window; it grows to `top_k` when that is larger); a served model with
  top_k > 1 lists them in the graph (`serving/signatures/span_top.py`);
* `max_answer_len`: the longest answer in pieces, the record's `max_answer_length`;
* `handle_impossible_answer`: True: the empty answer competes. A start/end head
  (Hugging Face's AlbertForQuestionAnswering) scores it as the lowest [CLS] null score of
  the windows minus the record's `null_score_diff_threshold` (0 when it has none, as the
  pipeline) and "" wins when that beats the best span; an answerability head (SQuAD 2.0
  fine-tuning) answers "" when P(no answer) > `no_answer_threshold`. False: never "" (the
  best span always, as the pipeline's default). None: the record's rule as it stands;
* `align_to_words`: an answer grows to the whole whitespace-separated words of the
  context it touches (a piece may be part of a word).

This module is plain Python and NumPy (no TensorFlow, no Keras).
"""

from __future__ import annotations

import dataclasses
import numbers

import numpy as np

from albert_tf.span_decoding import (
    align_context,
    no_answer_probability,
    null_score_diff,
    question_windows,
    rank,
    window_candidates,
)


@dataclasses.dataclass(frozen=True)
class QaOptions:
    """transformers' question-answering pipeline options (see the module docstring)."""

    top_k: int | None = 1  # None: the record's (export without --top-k)
    max_answer_len: int | None = None
    handle_impossible_answer: bool | None = None
    align_to_words: bool = False

    def __post_init__(self):
        # The upper bounds are the task record's (`applied` validates it).
        for name in ("top_k", "max_answer_len"):
            value = getattr(self, name)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
                raise ValueError(f"{name}={value!r}: expected an integer >= 1")
        for name in ("handle_impossible_answer", "align_to_words"):
            value = getattr(self, name)
            if not (isinstance(value, bool) or (value is None and name != "align_to_words")):
                raise ValueError(f"{name}={value!r}: expected True or False")

    def applied(self, record):
        """`record` (a span TaskRecord) with these options in its own fields."""
        changes = {}
        if self.max_answer_len is not None:
            changes["max_answer_length"] = int(self.max_answer_len)
        if self.top_k is not None and self.top_k != (record.top_k or 1):
            changes["top_k"] = int(self.top_k)
        if self.top_k is not None and self.top_k > record.n_best:
            changes["n_best"] = int(self.top_k)
        if self.handle_impossible_answer is False:
            changes.update(null_score_diff_threshold=None, no_answer_threshold=1.0)
        elif self.handle_impossible_answer and not record.answerability:
            threshold = record.null_score_diff_threshold
            changes["null_score_diff_threshold"] = 0.0 if threshold is None else threshold
        return record.replace(**changes) if changes else record


def whole_words(context: str, start: int, end: int) -> tuple[int, int]:
    """[start, end) grown to the whitespace-separated words it touches (`str.isspace`,
    the words `span_decoding.align_context` tokenizes one at a time)."""
    while start > 0 and not context[start - 1].isspace():
        start -= 1
    while end < len(context) and not context[end].isspace():
        end += 1
    return start, end


# ------------------------------------------------------------------ windows and model
@dataclasses.dataclass
class Decoded:
    """A batch's windows and the model's outputs for them (`run_windows`)."""

    contexts: list[str]
    aligned: list  # [B] span_decoding.ContextPieces
    windows: list  # [W] span_decoding.Window
    outputs: dict  # name -> [W, ...]

    def rows(self) -> list[list[int]]:
        """Each row's window numbers."""
        by_row = [[] for _ in self.contexts]
        for w, window in enumerate(self.windows):
            by_row[window.example].append(w)
        return by_row


def run_windows(tokenizer, record, seq_length: int, questions, contexts, run,
                where: str = "predict") -> Decoded:
    """Every (question, context) row cut into windows and run (`run`: features
    {name: int32 [W, seq_length]} -> outputs [W, ...]); no cap on the windows."""
    questions, contexts = [_text(q) for q in questions], [_text(c) for c in contexts]
    if len(questions) != len(contexts):
        raise ValueError(f"{where}: {len(questions)} questions but {len(contexts)} contexts")
    rows, windows, aligned = [], [], []
    for index, (question, context) in enumerate(zip(questions, contexts)):
        pieces = align_context(tokenizer, context)
        ids, found = question_windows(tokenizer, question, pieces, seq_length, record.doc_stride,
                                      record.max_query_length, index)
        rows += ids
        windows += found
        aligned.append(pieces)
    outputs = {}
    if rows:  # an empty batch runs nothing
        outputs = {k: np.asarray(v) for k, v in run(_pad(rows, windows, seq_length,
                                                         tokenizer)).items()}
    return Decoded(contexts, aligned, windows, outputs)


def _text(value) -> str:
    return value.decode("utf-8", errors="replace") if isinstance(value, bytes) else str(value)


def _pad(rows: list[list[int]], windows: list, seq_length: int, tokenizer):
    """The windows' model inputs, int32 [W, seq_length]."""
    word_ids = np.full([len(rows), seq_length], tokenizer.pad_id, np.int32)
    mask = np.zeros_like(word_ids)
    type_ids = np.zeros_like(word_ids)
    for i, (row, window) in enumerate(zip(rows, windows)):
        word_ids[i, :len(row)] = row
        mask[i, :len(row)] = 1
        type_ids[i, window.offset:len(row)] = 1
    return {"input_word_ids": word_ids, "input_mask": mask, "input_type_ids": type_ids}


# ------------------------------------------------------------------ read-outs
def _row(record, decoded: Decoded, row: int, mine: list[int], top_k: int | None):
    """(the `top_k` (None: all) ranked distinct span entries, the no-answer rule's name or
    None, its value, answered)."""
    out = decoded.outputs
    spans = []
    for w in mine:
        spans += window_candidates(decoded.windows[w], out["start_logits"][w],
                                   out["end_logits"][w], record.n_best, record.max_answer_length)
    entries = rank(decoded.contexts[row], decoded.aligned[row], spans,
                   len(spans) + 1 if top_k is None else top_k)
    best = entries[0]["score"] if entries else None
    if record.null_score_diff_threshold is not None:
        value = null_score_diff([out["start_logits"][w] for w in mine],
                                [out["end_logits"][w] for w in mine], best)
        return entries, "null_score_diff", value, value <= record.null_score_diff_threshold
    if "answerable_logits" in out:
        value = no_answer_probability([out["answerable_logits"][w] for w in mine])
        return entries, "no_answer_probability", value, value <= record.no_answer_threshold
    return entries, None, None, True


def served_answers(record, decoded: Decoded, align_to_words: bool = False) -> dict:
    """The served signature's outputs of every row (`AlbertSpanExtractor.predict`):
    {"answer": str [B] (object), "start_char", "end_char": int32 [B] (-1 without an
    answer), "score": float32 [B] (0 without a span), "has_answer": bool [B]}, plus
    "no_answer_probability" [B] (an answerability head) or "null_score_diff" [B] (a
    foreign head's null-score rule)."""
    names = ("answer", "start_char", "end_char", "score", "has_answer")
    out = {name: [] for name in names}
    for row, mine in enumerate(decoded.rows()):
        entries, rule, value, answered = _row(record, decoded, row, mine, 1)
        best = entries[0] if entries else None
        answered = answered and best is not None
        if rule:
            out.setdefault(rule, []).append(value)
        start, end = (best["start"], best["end"]) if answered else (-1, -1)
        if answered and align_to_words:
            start, end = whole_words(decoded.contexts[row], start, end)
        out["answer"].append(decoded.contexts[row][start:end] if answered else "")
        out["start_char"].append(start)
        out["end_char"].append(end)
        out["score"].append(best["score"] if best else 0.0)
        out["has_answer"].append(answered)
    dtypes = {"answer": object, "start_char": np.int32, "end_char": np.int32,
              "has_answer": bool}
    return {name: np.array(values, dtypes.get(name, np.float32)) for name, values in out.items()}


def pipeline_answers(record, decoded: Decoded, options: QaOptions) -> list[list[dict]]:
    """Per row, its `options.top_k` answers best first as transformers' pipeline gives
    them: {"score", "start", "end", "answer"} (characters; score = start + end logit).

    The empty answer ({"start": 0, "end": 0, "answer": ""}) is listed when the record's
    rule lets it compete (`QaOptions.applied`): under a null-score rule with the score
    null score - threshold, ranked among the spans (first only when it beats the best
    span by more than the threshold, as served); with an answerability head first, with
    the score P(no answer), when that exceeds no_answer_threshold."""
    answers = []
    for row, mine in enumerate(decoded.rows()):
        # Every candidate ranked: whole words can make two spans one answer text.
        entries, rule, value, answered = _row(record, decoded, row, mine, None)
        context, listed, seen = decoded.contexts[row], [], set()
        for entry in entries:
            start, end = entry["start"], entry["end"]
            if options.align_to_words:
                start, end = whole_words(context, start, end)
            if context[start:end] not in seen and len(listed) < options.top_k:
                seen.add(context[start:end])
                listed.append({"score": entry["score"], "start": start, "end": end,
                               "answer": context[start:end]})
        empty = {"start": 0, "end": 0, "answer": ""}
        if rule == "null_score_diff" and mine:
            null = null_score_diff([decoded.outputs["start_logits"][w] for w in mine],
                                   [decoded.outputs["end_logits"][w] for w in mine], 0.0)
            score = null - record.null_score_diff_threshold  # the lowest null score, less it
            # "" goes before the spans it beats strictly (a tie answers the span, as served)
            at = sum(entry["score"] >= score for entry in listed)
            listed.insert(at, {"score": float(score), **empty})
        elif rule == "no_answer_probability" and not answered:
            listed.insert(0, {"score": float(value), **empty})
        elif not entries:
            listed.append({"score": 0.0, **empty})
        answers.append(listed[:options.top_k])
    return answers


def pipeline_form(answers: list[list[dict]], single: bool, top_k: int):
    """The pipeline's shapes: a dict per question (a list of top_k dicts when top_k > 1),
    and for one question given as a string, that alone."""
    shaped = [row[0] if top_k == 1 else row for row in answers]
    return shaped[0] if single else shaped


def question_context_rows(x):
    """(questions, contexts) as lists when `x` is raw (question, context) text, else None."""
    if not isinstance(x, (tuple, list)) or len(x) != 2:
        return None
    rows = [[part] if isinstance(part, (str, bytes)) else part for part in x]
    if not all(isinstance(part, (list, tuple)) or getattr(part, "ndim", None) == 1
               for part in rows):
        return None
    if not all(isinstance(v, (str, bytes)) for part in rows for v in part):
        return None
    return [list(part) for part in rows]


class SpanAnswers:
    """Raw-text answers of a span model (`AlbertSpanExtractor`'s `predict` on
    (questions, contexts) and `answer`); the class it is mixed into is a Keras model
    with `preprocessor` and `task_record`."""

    def predict(self, x, batch_size=None, verbose="auto", steps=None, callbacks=None):
        """`keras.Model.predict`; raw text `(questions, contexts)` is answered as the served
        signature answers it: every doc-stride window of the context (any number of them)
        searched and decoded by `albert_tf.span_decoding` (the task record's settings, the
        preprocessor's seq_length), strings and character offsets out.

        Returns, for raw text, {"answer": str [B], "start_char", "end_char": int32 [B],
        "score": float32 [B], "has_answer": bool [B]} plus "no_answer_probability" (SQuAD
        2.0 head) or "null_score_diff" (a foreign head's rule); else the logits.
        """
        pairs = question_context_rows(x)
        if pairs is None:
            return super().predict(x, batch_size=batch_size, verbose=verbose, steps=steps,
                                   callbacks=callbacks)
        decoded = self._run_windows(pairs, f"{type(self).__name__}.predict", self.task_record,
                                    batch_size=batch_size, verbose=verbose, steps=steps,
                                    callbacks=callbacks)
        return served_answers(self.task_record, decoded)

    def answer(self, questions, contexts, top_k: int = 1, max_answer_len: int | None = None,
               handle_impossible_answer: bool | None = None, align_to_words: bool = True,
               batch_size=None):
        """transformers' question-answering pipeline: `answer(question, context)` ->
        {"score", "start", "end", "answer"}, a list of them per question when top_k > 1,
        and a list of those for lists of questions and contexts. The options are the
        pipeline's, mapped onto the task record (`albert_tf.span_answers`; None: the
        record's max_answer_length and no-answer rule); docs/transformers-users.md."""
        options = QaOptions(top_k, max_answer_len, handle_impossible_answer, align_to_words)
        single = isinstance(questions, (str, bytes))
        pairs = question_context_rows((questions, contexts))
        if pairs is None:
            raise TypeError(f"{type(self).__name__}.answer takes a question and a context (str), "
                            "or lists of them")
        record = options.applied(self.task_record)
        decoded = self._run_windows(pairs, f"{type(self).__name__}.answer", record,
                                    batch_size=batch_size, verbose=0)
        return pipeline_form(pipeline_answers(record, decoded, options), single, top_k)

    def _run_windows(self, pairs, where, record, **predict_args):
        if self.preprocessor is None:
            raise ValueError(f"{type(self).__name__} has no preprocessor for raw text: load it "
                             "with from_preset, or set model.preprocessor")
        run = lambda features: super(SpanAnswers, self).predict(  # noqa: E731
            features, **predict_args)
        return run_windows(self.preprocessor.tokenizer, record, self.preprocessor.seq_length,
                           *pairs, run, where)
