"""SQuAD 1.1 and 2.0: span extraction, n-best decoding across windows, official evaluation.

Decoding is `albert_tf.span_decoding`'s, the one rule the served graph and a span
model's `predict` follow too. It is the original post-processing: in every window the `n_best`
highest start and end logits over context tokens form candidate spans (end >=
start, at most `max_answer_length` tokens, the start in the window that gives it
the most context); a span's score is start + end logit; candidates of all the
question's windows are ranked together and the answer text is the original
context between the first piece's first character and the last piece's last.
For SQuAD 2.0 the model's answerability logit (the highest over the question's
windows) gives a no-answer probability, and the threshold above which a
question is answered "" is tuned on the evaluation set to maximise F1.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable

import keras
import numpy as np

from albert_tf import AlbertSpanExtractor
from albert_tf.checkpoint.task_record import TaskRecord
from albert_tf.infra import atomic
from albert_tf.span_decoding import (  # noqa: F401 (is_ignorable re-exported)
    is_ignorable,
    no_answer_probability,
    rank,
    window_candidates,
)

from . import metrics
from .bucketing import Encoded
from .squad_data import ContextPieces, SquadExample, Window, build_windows

logger = logging.getLogger(__name__)
# What `SquadTask.write_predictions` writes into a run directory.
# The ALBERT README's SQuAD length (run_squad_v1/v2 --max_seq_length=384).
SQUAD_SEQ_LENGTH = 384
PREDICTION_FILES = ("predictions.json", "nbest_predictions.json", "null_odds.json")

Predict = Callable[[Encoded], dict[str, list[np.ndarray]]]


def decode_answers(examples: list[SquadExample], windows: list[Window], contexts: list[ContextPieces],
                   outputs: dict[str, list[np.ndarray]], n_best: int,
                   max_answer_length: int) -> tuple[dict[str, str], dict[str, list[dict]], dict[str, float]]:
    """Answers of every question from its windows' logits.

    Args:
      examples, windows, contexts: as `build_windows` returned them.
      outputs: per window, "start_logits" / "end_logits" rows [T_w] and, for
        SQuAD 2.0, "answerable_logits" scalars.
      n_best: candidates kept per window side and per question.
      max_answer_length: longest answer in pieces.

    Returns:
      (qid -> best non-empty answer ("" if none is valid), qid -> n-best list of
      {"text", "probability", "score", "start", "end"} with character offsets,
      qid -> no-answer probability (only when "answerable_logits" is given)).
    """
    candidates = [[] for _ in examples]
    answerable = [[] for _ in examples]
    for w, window in enumerate(windows):
        candidates[window.example] += window_candidates(
            window, outputs["start_logits"][w], outputs["end_logits"][w], n_best, max_answer_length)
        if "answerable_logits" in outputs:
            answerable[window.example].append(float(outputs["answerable_logits"][w]))
    best, nbest, no_answer = {}, {}, {}
    for index, example in enumerate(examples):
        entries = rank(example.context, contexts[index], candidates[index], n_best)
        nbest[example.qid] = entries
        best[example.qid] = entries[0]["text"] if entries else ""
        if "answerable_logits" in outputs:
            no_answer[example.qid] = no_answer_probability(answerable[index])
    return best, nbest, no_answer


class SquadTask:
    """SQuAD 1.1 / 2.0 fine-tuning on `AlbertSpanExtractor` (2.0 adds the answerability head).

    Args:
      version: "v1.1" or "v2.0".
      train_examples, eval_examples: the questions (either may be empty/None).
      tokenizer: an `AlbertTokenizer`.
      seq_length, doc_stride, max_query_length: windowing.
      n_best, max_answer_length: decoding.
      no_answer_threshold: SQuAD 2.0: answer "" above this no-answer probability;
        None tunes it on the evaluation set to maximise F1.
    Settings left None take `albert_tf.checkpoint.task_record`'s defaults (the original's
    128, 64, 20, 30). They are validated, and saved with the model as its
    `TaskRecord` (`record`), which export and serving read.
    """

    label_names = None

    def __init__(self, version: str, train_examples, eval_examples, tokenizer, seq_length: int = SQUAD_SEQ_LENGTH,
                 doc_stride: int | None = None, max_query_length: int | None = None,
                 n_best: int | None = None, max_answer_length: int | None = None,
                 no_answer_threshold: float | None = None):
        if version not in ("v1.1", "v2.0"):
            raise ValueError(f"unknown SQuAD version {version!r}; use v1.1 or v2.0")
        self.name = f"squad/{version}"
        self.answerability = version == "v2.0"
        given = {k: v for k, v in dict(doc_stride=doc_stride, max_query_length=max_query_length,
                                       n_best=n_best, max_answer_length=max_answer_length,
                                       no_answer_threshold=no_answer_threshold).items()
                 if v is not None}
        self.record = TaskRecord.create(
            "span", seq_length=seq_length, do_lower_case=tokenizer.do_lower_case,
            keep_accents=getattr(tokenizer, "keep_accents", False),
            answerability=self.answerability, **given)
        # A threshold given by the user is kept (and picks the model by its F1); else tuned.
        self.tune_threshold = self.answerability and no_answer_threshold is None
        self.main_metric = "best_f1" if self.tune_threshold else "f1"
        self.n_best, self.max_answer_length = self.record.n_best, self.record.max_answer_length
        window_args = (seq_length, self.record.doc_stride, self.record.max_query_length)
        self.train = None
        if train_examples:
            self.train = build_windows(tokenizer, train_examples, *window_args, training=True,
                                       answerability=self.answerability)[0]
        self.eval_examples = eval_examples or []
        self.evals = {}
        if self.eval_examples:
            data, self.windows, self.contexts = build_windows(
                tokenizer, self.eval_examples, *window_args, training=False)
            self.evals = {"eval": data}
        self.gold = {e.qid: e.answers for e in self.eval_examples}
        self.threshold = self.record.no_answer_threshold

    def build_model(self, config, encoder=None) -> keras.Model:
        return AlbertSpanExtractor(config, answerability=self.answerability, encoder=encoder)

    def _decode(self, predict: Predict):
        outputs = predict(self.evals["eval"])
        return decode_answers(self.eval_examples, self.windows, self.contexts, outputs,
                              self.n_best, self.max_answer_length)

    def evaluate(self, predict: Predict) -> dict[str, float]:
        """Official EM/F1 (percent); for 2.0 also at the F1-tuned no-answer threshold."""
        best, _, no_answer = self._decode(predict)
        if not self.answerability:
            return metrics.squad_evaluate(self.gold, best)
        answered = metrics.apply_no_answer_threshold(best, no_answer,
                                                     self.record.no_answer_threshold)
        result = metrics.squad_evaluate(self.gold, answered)
        exact, _ = metrics.squad_scores(self.gold, best)
        result["best_exact"], _ = metrics.best_no_answer_threshold(self.gold, best, no_answer, exact)
        result["best_f1"], result["best_f1_threshold"] = self._best_threshold(best, no_answer)
        if self.tune_threshold:
            self.threshold = result["best_f1_threshold"]
        return result

    def _best_threshold(self, best: dict[str, str], no_answer: dict[str, float]) -> tuple[float, float]:
        """(F1 at the F1-maximising threshold, that threshold)."""
        _, f1 = metrics.squad_scores(self.gold, best)
        score, threshold = metrics.best_no_answer_threshold(self.gold, best, no_answer, f1)
        # "Below every probability" (answer nothing) comes back negative; 0 says the same
        # for every probability above 0 and keeps the task record's threshold a probability.
        return score, max(0.0, threshold)

    def checkpoint_info(self) -> dict:
        """The record's span fields as albert_task.json holds them (`save_checkpoint`'s
        extra_info), with the no-answer threshold tuned at the last evaluation."""
        return {"doc_stride": self.record.doc_stride,
                "max_query_length": self.record.max_query_length, "n_best": self.record.n_best,
                "max_answer_length": self.record.max_answer_length,
                "no_answer_threshold": float(self.threshold)}

    def write_predictions(self, predict: Predict, output_dir: str) -> list[str]:
        """predictions.json (qid -> answer), nbest_predictions.json, and for 2.0
        null_odds.json (qid -> no-answer probability); 2.0 answers use the threshold
        tuned on these predictions."""
        if not self.eval_examples:
            return []
        best, nbest, no_answer = self._decode(predict)
        predictions, nbest_name, null_odds = PREDICTION_FILES
        files = {predictions: best, nbest_name: nbest}
        if self.answerability:
            if self.tune_threshold:  # the threshold of these (the best) weights
                self.threshold = self._best_threshold(best, no_answer)[1]
            files[predictions] = metrics.apply_no_answer_threshold(best, no_answer,
                                                                   self.threshold)
            files[null_odds] = no_answer
        paths = []
        for name, content in files.items():
            paths.append(os.path.join(output_dir, name))
            atomic.atomic_write_json(paths[-1], content, indent=1, ensure_ascii=False)
        return paths

