"""RACE multiple choice from its released files: article + question + 4 options, accuracy.

The release unpacks to `RACE/{train,dev,test}/{middle,high}/*.txt`, each file one
JSON object `{"id", "article", "questions": [...], "options": [[4 x str], ...],
"answers": ["A".."D", ...]}`. Each option becomes `[CLS] article [SEP] qa [SEP]`,
where qa is the question with its blank ("_") filled by the option, or question
and option joined by a space, as the original `race_utils`: qa keeps its last
`max_qa_length` tokens (`albert_tf.checkpoint.task_record`'s default: 128) and the article is cut
to fit `seq_length` (`DEFAULTS`: run_race's 512, `albert_tf.config.DEFAULT_SEQ_LENGTH`).
"""

from __future__ import annotations

import dataclasses
import glob
import json
import logging
import os

import keras
import numpy as np

from albert_tf import AlbertMultipleChoice
from albert_tf.checkpoint.task_record import TaskRecord
from albert_tf.config import DEFAULT_SEQ_LENGTH
from albert_tf.infra import atomic, textio
from albert_tf.inputs import INPUT_NAMES
from albert_tf.tokenizer.spm import cut_choice

from . import metrics
from .bucketing import Encoded
from .examples import DataError, progress, write_tsv

logger = logging.getLogger(__name__)

LEVELS = ("middle", "high")
CHOICES = "ABCD"
# What `RaceTask.write_predictions` writes into a run directory.
PREDICTION_FILES = ("predictions_dev.tsv", "race_test.json")
# run_race.py / README: 12000 steps, 1000 warmup, batch 32, lr 1e-5 (the v2 value),
# 512 tokens, DEFAULT_SEQ_LENGTH (of which at most max_qa_length for question + option:
# albert_tf.checkpoint.task_record).
DEFAULTS = {"train_steps": 12000, "warmup_steps": 1000, "batch_size": 32, "learning_rate": 1e-5,
            "seq_length": DEFAULT_SEQ_LENGTH}


@dataclasses.dataclass
class RaceExample:
    """One question: `label` indexes `options` (-1 if unknown)."""

    qid: str
    level: str
    article: str
    question: str
    options: list[str]
    label: int


def find_split(root: str, split: str) -> str:
    """The directory of `split` under `root` (the RACE directory or its parent)."""
    for candidate in (os.path.join(root, split), os.path.join(root, "RACE", split)):
        if os.path.isdir(candidate):
            return candidate
    raise DataError(f"{root}: no RACE {split!r} directory (expected {root}/{split}/middle and "
                    f"{root}/{split}/high with the released *.txt files)")


def read_race(split_dir: str) -> list[RaceExample]:
    """Reads every `<level>/*.txt` under one split directory (e.g. RACE/dev)."""
    examples = []
    for level in LEVELS:
        for path in sorted(glob.glob(os.path.join(split_dir, level, "*.txt"))):
            for line, record in _records(path):
                examples.extend(_questions(record, path, line, level))
    if not examples:
        raise DataError(f"{split_dir}: no RACE questions in {'/ or '.join(LEVELS)}/*.txt")
    return examples


def _records(path: str):
    """One JSON object per file as released; a JSON-lines file (all.txt) also works."""
    text = textio.read_text(path)  # not UTF-8: the file, line and byte offset
    if not text.strip():
        raise DataError(f"{path}: the file is empty")
    try:
        yield 1, json.loads(text)
        return
    except json.JSONDecodeError:
        pass
    for number, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            try:
                yield number, json.loads(line)
            except json.JSONDecodeError as e:
                raise DataError(f"{path}:{number}: not valid JSON ({e.msg})") from None


def _questions(record, path, line, level):
    where = f"{path}:{line}"
    if not isinstance(record, dict):
        raise DataError(f"{where}: expected a JSON object")
    for name in ("article", "questions", "options", "answers"):
        if name not in record:
            raise DataError(f"{where}: no {name!r} field")
    questions, options, answers = record["questions"], record["options"], record["answers"]
    if not isinstance(record["article"], str):
        raise DataError(f"{where}: 'article' is a {type(record['article']).__name__}, not text")
    for name, value in (("questions", questions), ("options", options), ("answers", answers)):
        if not isinstance(value, list):
            raise DataError(f"{where}: {name!r} is a {type(value).__name__}, not a list")
    if not len(questions) == len(options) == len(answers):
        raise DataError(f"{where}: {len(questions)} questions, {len(options)} option lists and "
                        f"{len(answers)} answers differ in number")
    base = str(record.get("id", os.path.basename(path)))
    for i, (question, choices, answer) in enumerate(zip(questions, options, answers)):
        if not isinstance(choices, list):
            raise DataError(f"{where}: the options of question {i} are a "
                            f"{type(choices).__name__}, not a list")
        if len(choices) != len(CHOICES):
            raise DataError(f"{where}: question {i} has {len(choices)} options, not {len(CHOICES)}")
        if not all(isinstance(text, str) for text in (question, *choices)):
            raise DataError(f"{where}: question {i} or one of its options is not text")
        # Exactly one letter: "" and "AB" are not answers (a substring test took them for A).
        letter = answer.strip() if isinstance(answer, str) else answer
        if not isinstance(letter, str) or len(letter) != 1 or letter not in CHOICES:
            raise DataError(f"{where}: question {i} has answer {answer!r}, not one of A, B, C, D")
        # Ids are unique per split only with the level ("middle/..." and "high/...").
        yield RaceExample(f"{level}/{base}-{i}", level, record["article"], question, list(choices),
                          CHOICES.index(letter))


def qa_text(question: str, option: str) -> str:
    """The question with its blank filled by `option`, else question + " " + option."""
    return question.replace("_", option) if "_" in question else f"{question} {option}"


def encode_race(tokenizer, examples: list[RaceExample], seq_length: int,
                max_qa_length: int) -> Encoded:
    """Features [4, L_i] per example (L_i: the longest option's length) and labels [N]."""
    features = {name: [] for name in INPUT_NAMES}
    for example in progress(examples, len(examples), "RACE"):
        article = tokenizer.encode(example.article)
        rows = []
        for option in example.options:
            context, qa = cut_choice(article, tokenizer.encode(qa_text(example.question, option)),
                                     seq_length, max_qa_length)
            rows.append(([tokenizer.cls_id, *context, tokenizer.sep_id, *qa, tokenizer.sep_id],
                         len(context) + 2))
        length = max(len(ids) for ids, _ in rows)
        packed = np.zeros((3, len(rows), length), np.int32)  # word ids, mask, type ids
        for k, (ids, first_b) in enumerate(rows):
            packed[0, k, :len(ids)] = ids
            packed[1, k, :len(ids)] = 1
            packed[2, k, first_b:len(ids)] = 1
        packed[0][packed[1] == 0] = tokenizer.pad_id
        for name, values in zip(INPUT_NAMES, packed):
            features[name].append(values)
    return Encoded(features, {"logits": np.array([e.label for e in examples], np.int64)})


class RaceTask:
    """RACE on `AlbertMultipleChoice`: model selection on dev accuracy, test accuracy at the end."""

    label_names = None
    main_metric = "accuracy"

    def __init__(self, tokenizer, train: list[RaceExample] | None, dev: list[RaceExample] | None,
                 test: list[RaceExample] | None = None,
                 seq_length: int = DEFAULTS["seq_length"],
                 max_qa_length: int | None = None):
        self.name = "race"
        # Validated (and defaulted) before any encoding; saved with the model for serving.
        self.record = TaskRecord.create(
            "multiple_choice", seq_length=seq_length, do_lower_case=tokenizer.do_lower_case,
            keep_accents=getattr(tokenizer, "keep_accents", False),
            **({} if max_qa_length is None else {"max_qa_length": max_qa_length}))
        max_qa_length = self.record.max_qa_length
        def encode(examples):
            return encode_race(tokenizer, examples, seq_length, max_qa_length) if examples else None

        self.train = encode(train)
        self.evals = {"dev": encode(dev)} if dev else {}
        self.levels = {"dev": [e.level for e in dev or []], "test": [e.level for e in test or []]}
        self.dev_ids = [e.qid for e in dev or []]
        self.test, self.test_ids = encode(test), [e.qid for e in test or []]

    def build_model(self, config, encoder=None) -> keras.Model:
        return AlbertMultipleChoice(config, encoder=encoder)

    def checkpoint_info(self) -> dict:
        """The record's fields beyond `save_checkpoint`'s own (its extra_info)."""
        return {"max_qa_length": self.record.max_qa_length}

    def _accuracies(self, predict, data: Encoded, levels: list[str]) -> tuple[dict, np.ndarray]:
        predicted = np.argmax(np.stack(predict(data)), axis=-1)  # [N,K] -> [N]
        gold, levels = data.labels["logits"], np.array(levels)
        result = {"accuracy": metrics.accuracy(gold, predicted)}
        for level in LEVELS:
            if np.any(levels == level):
                result[f"accuracy_{level}"] = metrics.accuracy(gold[levels == level],
                                                               predicted[levels == level])
        return result, predicted

    def evaluate(self, predict) -> dict[str, float]:
        """Accuracy on dev, overall and per level (middle / high)."""
        return self._accuracies(predict, self.evals["dev"], self.levels["dev"])[0]

    def write_predictions(self, predict, output_dir: str) -> list[str]:
        """predictions_dev.tsv (id, level, label, prediction as letters) and, with a
        test set, race_test.json with its accuracies and the predicted letters."""
        paths = []
        if self.evals:
            data = self.evals["dev"]
            _, predicted = self._accuracies(predict, data, self.levels["dev"])
            paths.append(os.path.join(output_dir, PREDICTION_FILES[0]))
            write_tsv(paths[-1], ("id", "level", "label", "prediction"),
                      zip(self.dev_ids, self.levels["dev"], (CHOICES[i] for i in data.labels["logits"]),
                          (CHOICES[i] for i in predicted)))
        if self.test is None:
            return paths
        result, predicted = self._accuracies(predict, self.test, self.levels["test"])
        logger.info("RACE test: %s", metrics.results_line(result))
        path = os.path.join(output_dir, PREDICTION_FILES[1])
        atomic.atomic_write_json(path, {"results": result, "predictions": dict(zip(
            self.test_ids, (CHOICES[i] for i in predicted)))}, indent=1)
        return [*paths, path]
