"""Sequence classification and regression tasks: GLUE and your own files.

A `SequenceTask` holds encoded train / evaluation / test data and knows its model,
loss, official metrics and prediction files; `train.finetune` drives it.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence

import keras
import numpy as np

from albert_tf import AlbertSequenceClassifier, AlbertSequenceRegressor

from . import files, glue, glue_files, metrics
from .bucketing import Encoded
from .examples import DataError, encode_texts, write_tsv

logger = logging.getLogger(__name__)

METRICS: dict[str, Callable[[np.ndarray, np.ndarray], float]] = {
    "accuracy": metrics.accuracy,
    "f1": metrics.f1_binary,
    "matthews_corrcoef": metrics.matthews_corrcoef,
    "pearson": metrics.pearson,
    "spearman": metrics.spearman,
}

Predict = Callable[[Encoded], "dict[str, list[np.ndarray]] | list[np.ndarray]"]
# Evaluation predictions go to <output>/predictions_<set>.tsv (id, label, prediction, and for
# classification a probability column per class, PROBABILITY + its name).
EVAL_PREDICTIONS = "predictions"
PROBABILITY = "prob_"
# What `SequenceTask.write_predictions` writes into a run directory (names or patterns).
PREDICTION_FILES = (f"{EVAL_PREDICTIONS}_*.tsv", *glue.SUBMISSION_FILES)


class SequenceTask:
    """Classification (`label_names` given) or regression (`label_names=None`) of texts.

    Args:
      name: task name for logs ("glue/cola", "csv").
      label_names: the classes; None for regression.
      metric_names: keys of `METRICS` computed on every evaluation set.
      main_metric: the metric that picks the best checkpoint; with several
        evaluation sets it is "<metric>_<set>" (e.g. "accuracy_matched").
      train: encoded training data (labels under "logits" or "score", the task's
        `label_output`).
      evals: evaluation set name -> encoded labelled data.
      tests: prediction file stem -> (example ids, encoded unlabelled data).
      format_predictions: class ids or scores [N] -> the strings written to test files.
      eval_ids: evaluation set name -> example ids, for its predictions file.
      output_names: the strings written for each class id in evaluation predictions
        (default `label_names`; GLUE: the labels as its files write them).
    """

    def __init__(self, name: str, label_names: Sequence[str] | None, metric_names: Sequence[str],
                 main_metric: str, train: Encoded | None, evals: dict[str, Encoded],
                 tests: dict[str, tuple[list[str], Encoded]] | None = None,
                 format_predictions: Callable[[np.ndarray], list[str]] | None = None,
                 eval_ids: dict[str, list[str]] | None = None,
                 output_names: Sequence[str] | None = None):
        self.name = name
        self.label_names = list(label_names) if label_names is not None else None
        self.metric_names = tuple(metric_names)
        self.main_metric = main_metric
        self.train = train
        self.evals = evals
        self.tests = tests or {}
        self.format_predictions = format_predictions or (lambda v: [str(x) for x in v])
        self.output_key = "score" if self.regression else "logits"
        self.eval_ids = eval_ids or {}
        self.output_names = list(output_names) if output_names is not None else self.label_names

    @property
    def regression(self) -> bool:
        return self.label_names is None

    def build_model(self, config, encoder=None) -> keras.Model:
        if self.regression:
            return AlbertSequenceRegressor(config, encoder=encoder)
        return AlbertSequenceClassifier(config, len(self.label_names), encoder=encoder)

    def predictions(self, outputs: list[np.ndarray]) -> np.ndarray:
        """Model output rows (logits [C] or a score each) -> class ids [N] (or scores [N]
        for regression)."""
        values = np.stack(outputs)  # [N] scores or [N, C] logits
        return values if self.regression else np.argmax(values, axis=-1)

    def evaluate(self, predict: Predict) -> dict[str, float]:
        """The official metrics on every evaluation set."""
        results = {}
        for set_name, data in self.evals.items():
            predicted = self.predictions(predict(data))
            gold = data.labels[self.output_key]
            suffix = f"_{set_name}" if len(self.evals) > 1 else ""
            for metric in self.metric_names:
                results[metric + suffix] = METRICS[metric](gold, predicted)
        return results

    def write_predictions(self, predict: Predict, output_dir: str) -> list[str]:
        """Writes each evaluation set's predictions as `predictions_<set>.tsv` (id, label,
        prediction, then for classification `prob_<class>`: each class's softmax
        probability) and each test set's as `<stem>.tsv`; returns the paths."""
        paths = []
        for set_name, data in self.evals.items():
            ids = self.eval_ids.get(set_name) or [str(i) for i in range(len(data))]
            outputs = predict(data)
            gold = self._strings(data.labels[self.output_key])
            predicted = self._strings(self.predictions(outputs))
            header, columns = ["id", "label", "prediction"], [ids, gold, predicted]
            if not self.regression:
                header += [PROBABILITY + name for name in self.output_names]
                columns += [[repr(float(p)) for p in column]
                            for column in softmax(np.stack(outputs)).T]
            paths.append(os.path.join(output_dir, f"{EVAL_PREDICTIONS}_{set_name}.tsv"))
            write_tsv(paths[-1], header, zip(*columns))
        for stem, (ids, data) in self.tests.items():
            path = os.path.join(output_dir, f"{stem}.tsv")
            glue.write_submission(path, ids, self.format_predictions(self.predictions(predict(data))))
            paths.append(path)
        return paths

    def _strings(self, values: np.ndarray) -> list[str]:
        """Class ids -> their names; scores -> full-precision decimals (to recompute metrics)."""
        if self.regression:
            return [repr(float(v)) for v in values]
        return [self.output_names[int(i)] for i in values]


def softmax(logits: np.ndarray) -> np.ndarray:
    """Class probabilities [N, C] of logits [N, C], in float64."""
    shifted = np.asarray(logits, np.float64)
    shifted = shifted - shifted.max(axis=-1, keepdims=True)  # no overflow in exp
    exp = np.exp(shifted)
    return exp / exp.sum(axis=-1, keepdims=True)


def glue_task(name: str, tokenizer, seq_length: int, data_dir: str | None = None,
              with_test: bool = True) -> SequenceTask:
    """A GLUE task, tokenized; its test sets give submission files.

    Args:
      name: "glue/cola", "mnli", ...
      tokenizer: an `AlbertTokenizer`.
      seq_length: the longest packed length.
      data_dir: glue_data/ as download_glue_data.py writes it (or one task's
        folder), read directly; None loads tensorflow-datasets' copy.
      with_test: read the test sets too.
    """
    spec = glue.get_task(name)
    key = "score" if spec.regression else "logits"
    if data_dir is not None:
        train, evals, tests = glue_files.read_task(spec, data_dir, with_test)
    else:
        train = glue.load_split(spec, "train")
        evals = {set_name: glue.load_split(spec, split) for set_name, split in spec.eval_splits.items()}
        tests = {stem: glue.load_split(spec, split, dataset=dataset, labelled=False)
                 for stem, (dataset, split) in (spec.test_splits.items() if with_test else ())}
    for set_name, examples in [("train", train), *evals.items(), *tests.items()]:
        logger.info("glue/%s %s: %d examples", spec.name, set_name, len(examples))
    return SequenceTask(
        f"glue/{spec.name}", spec.label_names, spec.metrics, spec.main_metric,
        encode_texts(tokenizer, train, seq_length, key),
        {n: encode_texts(tokenizer, e, seq_length, key) for n, e in evals.items()},
        {stem: (e.ids, encode_texts(tokenizer, e, seq_length)) for stem, e in tests.items()},
        lambda v: glue.submission_values(spec, v),
        eval_ids={n: e.ids for n, e in evals.items()}, output_names=spec.file_labels)


def file_task(train_file: str, eval_file: str | None, text_columns: Sequence[files.Column],
              label_column: files.Column, regression: bool, tokenizer, seq_length: int,
              label_names: Sequence[str] | None = None) -> SequenceTask:
    """Classification or regression on your own CSV / TSV / TXT / JSONL files.

    Classes come from the training file (or `label_names`, the classes in id
    order, which the file's labels name or index 0..K-1); an evaluation label
    not among them is an error naming its line. Metrics: accuracy (+ F1 of
    class 1 and Matthews correlation when binary) for classification, Pearson
    and Spearman for regression.
    """
    key = "score" if regression else "logits"
    if label_names is not None and regression:
        raise DataError("label names are for classification, not regression")
    train, label_names = files.read_text_file(train_file, text_columns, label_column, regression,
                                              label_names)
    evals, eval_ids = {}, {}
    if eval_file:
        dev, _ = files.read_text_file(eval_file, text_columns, label_column, regression, label_names)
        evals["eval"] = encode_texts(tokenizer, dev, seq_length, key)
        eval_ids["eval"] = dev.ids
    if regression:
        metric_names = ("pearson", "spearman")
    else:
        if len(label_names) < 2:
            raise DataError(f"{train_file}: only one label ({label_names[0]!r}); "
                            "classification needs at least two")
        metric_names = (("accuracy", "f1", "matthews_corrcoef") if len(label_names) == 2
                        else ("accuracy",))
    logger.info("%s: %d training examples, labels %s", train_file, len(train), label_names)
    return SequenceTask("files", label_names, metric_names, metric_names[0],
                        encode_texts(tokenizer, train, seq_length, key), evals, eval_ids=eval_ids)
