"""The kinds of `albert-tf finetune --task`: each one's defaults, data and options.

A `Family` per kind (glue/<task>, squad/v1.1, squad/v2.0, race, classification,
regression, ner) holds the original scripts' hyperparameters, how its data is read into a
fine-tuning job (`sequence.SequenceTask`, `squad.SquadTask`, `race.RaceTask`,
`ner.NerTask`), which task record's options `--set` may give it and whether it takes
`--label-names`; `run.py` asks the family of `--task` instead of comparing names, and the
messages list the table's names. `classification` and `regression` are the task table's
names (`albert_tf.tasks`); its aliases (`classify`, `regress`) are accepted too.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from typing import Any

from albert_tf import (
    AlbertMultipleChoice,
    AlbertSequenceClassifier,
    AlbertSequenceRegressor,
    AlbertSpanExtractor,
    AlbertTokenClassifier,
    errors,
    tasks,
)
from albert_tf.config import DEFAULT_SEQ_LENGTH

from . import conll, glue, ner, race, sequence, squad, squad_data
from .examples import DataError, check_label_name
from .train import TrainConfig

UsageError = errors.UsageError

SQUAD_TASKS = ("squad/v1.1", "squad/v2.0")
# Original defaults: SQuAD from the ALBERT README, RACE from run_race.py / README
# (v2 learning rate), own files as BERT's usual fine-tuning recipe.
SQUAD_DEFAULTS = dict(epochs=2, train_steps=None, warmup_proportion=0.1, learning_rate=5e-5,
                      batch_size=48, seq_length=squad.SQUAD_SEQ_LENGTH)
# Own files: TrainConfig's own defaults (BERT's usual recipe), read from there.
FILE_DEFAULTS = {field.name: field.default for field in dataclasses.fields(TrainConfig)
                 if field.name in ("epochs", "train_steps", "warmup_proportion", "learning_rate",
                                   "batch_size", "seq_length")}


@dataclasses.dataclass(frozen=True)
class Family:
    """One kind of `--task`: its defaults, how its data is read, what it may be given.

    Attributes:
      defaults: `--task` value -> the original scripts' hyperparameters (TrainConfig fields).
      build: (args, tokenizer, seq_length, task options) -> the task object, its data
        read and tokenized.
      record_task: the task whose record fields `--set` may give it (doc_stride,
        max_qa_length, ...); None: no such options.
      label_names: whether it takes `--label-names`.
    """

    defaults: Callable[[str], dict]
    build: Callable[..., Any]
    record_task: str | None = None
    label_names: bool = False


def _glue_defaults(task: str) -> dict:
    spec = glue.get_task(task)
    return dict(train_steps=spec.train_steps, warmup_steps=spec.warmup_steps,
                learning_rate=spec.learning_rate, batch_size=spec.batch_size,
                seq_length=DEFAULT_SEQ_LENGTH)


def canonical_task(task: str) -> str:
    """A `--task` value under its table name (the task table's aliases resolved:
    classify -> classification)."""
    return tasks.canonical_name(task)


def family(task: str) -> Family:
    """The `Family` of a `--task` value (an alias resolved; glue/<name> share one:
    the entry keyed "glue" + PER_TASK)."""
    task = canonical_task(task)
    found = FAMILIES.get(task) or FAMILIES.get(task.partition("/")[0] + PER_TASK)
    if found is None:
        raise UsageError(f"--task {task!r}: expected {listed()}")
    return found


def listed(which: Callable[[Family], Any] = lambda kind: True, last: str = "or") -> str:
    """The names of the families `which` selects, as a message lists them: "a, b or c"."""
    names = [name for name, kind in FAMILIES.items() if which(kind)]
    return f"{', '.join(names[:-1])} {last} {names[-1]}" if len(names) > 1 else "".join(names)


def task_defaults(task: str) -> dict:
    """The original scripts' hyperparameters for `task` (TrainConfig fields)."""
    return family(task).defaults(task)


def parse_columns(spec: str | None, task: str = "") -> tuple[list, str | int]:
    """"a,b:label" -> (["a", "b"], "label"), the label column defaulting to "label";
    "3:1" -> ([3], 1): positions (from 0) in a file without a header row. `task`:
    the --task that needs them, for the message."""
    if not spec:
        raise UsageError(f"--task {canonical_task(task)} needs --columns TEXT[,TEXT2][:LABEL]")
    texts, _, label = spec.partition(":")
    columns = [c for c in texts.split(",") if c]
    if not 1 <= len(columns) <= 2:
        raise UsageError(f"--columns {spec!r}: give one or two text columns")
    if all(c.isdigit() for c in columns):
        if not label.isdigit():
            raise UsageError(f"--columns {spec!r}: positions need the label's position too "
                             "(e.g. 3:1)")
        return [int(c) for c in columns], int(label)
    if label.isdigit() or any(c.isdigit() for c in columns):
        raise UsageError(f"--columns {spec!r}: give all columns as header names or all as positions")
    return columns, label or "label"


def parse_label_names(spec: str | None) -> list[str] | None:
    """"neg,pos" -> ["neg", "pos"]; names must be distinct and non-empty."""
    if spec is None:
        return None
    names = spec.split(",")
    if len(names) < 2 or any(not n for n in names) or len(set(names)) != len(names):
        raise UsageError(f"--label-names {spec!r}: give two or more distinct names, comma-separated")
    for name in names:
        check_label_name(name, "--label-names")
    return names


def build_task(args, tokenizer, seq_length: int, options: dict):
    """The task object for `args.task`, its data read and tokenized."""
    kind = family(args.task)
    if args.label_names is not None and not kind.label_names:
        raise UsageError(f"--label-names is for --task "
                         f"{listed(lambda other: other.label_names, 'and')}, "
                         f"not {canonical_task(args.task)}")
    return kind.build(args, tokenizer, seq_length, options)


def _glue_task(args, tokenizer, seq_length: int, options: dict):
    data = args.data or []
    if len(data) > 1:
        raise UsageError(f"{args.task} takes one --data directory: glue_data/ (or its task folder)")
    return sequence.glue_task(args.task, tokenizer, seq_length, data[0] if data else None)


def _race_task(args, tokenizer, seq_length: int, options: dict):
    data = args.data or []
    if len(data) != 1:
        raise UsageError("race needs --data RACE_DIR (with train/ and dev/)")
    splits = {s: race.read_race(race.find_split(data[0], s)) for s in ("train", "dev")}
    try:  # the test split is optional: its accuracy is reported at the end
        test = race.read_race(race.find_split(data[0], "test"))
    except DataError:
        test = None
    return race.RaceTask(tokenizer, splits["train"], splits["dev"], test, seq_length,
                         options.get("max_qa_length"))


def _file_task(regression: bool):
    def build(args, tokenizer, seq_length: int, options: dict):
        data = args.data or []
        if not 1 <= len(data) <= 2:
            raise UsageError(f"{args.task} needs --data TRAIN_FILE [EVAL_FILE]")
        columns, label = parse_columns(args.columns, args.task)
        return sequence.file_task(data[0], data[1] if len(data) == 2 else None, columns, label,
                                  regression, tokenizer, seq_length,
                                  parse_label_names(args.label_names))
    return build


def _ner_task(args, tokenizer, seq_length: int, options: dict):
    data = args.data or []
    if len(data) > 3:
        raise UsageError("ner takes --data TRAIN [DEV [TEST]]: CoNLL-layout or JSONL files "
                         "(or no --data: TensorFlow Datasets' conll2003)")
    files = ([conll.read_tagged(path, tokenizer.is_word_separator) for path in data] if data
             else [conll.tfds_tagged(split) for split in conll.TFDS_SPLITS])
    evals = dict(zip(("dev", "test"), files[1:]))
    return ner.NerTask(files[0], evals, tokenizer, seq_length, parse_label_names(args.label_names),
                       options.get("tag_scheme"))


def _squad_task(args, tokenizer, seq_length: int, options: dict):
    version = args.task.split("/")[1]
    data = args.data or []
    if len(data) > 2:
        raise UsageError("squad takes --data DIR, or --data TRAIN.json [DEV.json]")
    if len(data) == 1 and os.path.isdir(data[0]):
        data = _squad_files(data[0], version)
    if data:  # the user's files: never a download (into their directory or anywhere)
        train = squad_data.read_squad_json(data[0], version)
        dev = squad_data.read_squad_json(data[1], version) if len(data) == 2 else None
    else:
        train = squad_data.load_squad_tfds(version, "train")
        dev = squad_data.load_squad_tfds(version, "validation")
    return squad.SquadTask(version, train, dev, tokenizer, seq_length, **options)


def _squad_files(directory: str, version: str) -> list[str]:
    """[train, dev] of the official names in `directory`; UsageError naming what is missing."""
    names = (f"train-{version}.json", f"dev-{version}.json")
    missing = [n for n in names if not os.path.isfile(os.path.join(directory, n))]
    if missing:
        held = sorted(os.listdir(directory))
        listing = ", ".join(held[:5]) + (", ..." if len(held) > 5 else "") if held else "nothing"
        raise UsageError(f"--data {directory}: no {' or '.join(missing)} in this directory "
                         f"(it holds {listing}); give the directory holding "
                         f"{' and '.join(names)}, or --data TRAIN.json [DEV.json]")
    return [os.path.join(directory, n) for n in names]


def _file_defaults(task: str) -> dict:
    return dict(FILE_DEFAULTS)


_SQUAD = Family(lambda task: dict(SQUAD_DEFAULTS), _squad_task,
                record_task=AlbertSpanExtractor.task)
# A family keyed NAME + PER_TASK takes every `--task NAME/<task>` (GLUE's tasks).
PER_TASK = "/<task>"
# Every --task of albert-tf finetune, as help and messages list them (aliases:
# albert_tf.tasks.ALIASES).
FAMILIES = {
    "glue" + PER_TASK: Family(_glue_defaults, _glue_task),
    **{task: _SQUAD for task in SQUAD_TASKS},
    "race": Family(lambda task: dict(race.DEFAULTS), _race_task,
                   record_task=AlbertMultipleChoice.task),
    AlbertSequenceClassifier.task: Family(_file_defaults, _file_task(regression=False),
                                          label_names=True),
    AlbertSequenceRegressor.task: Family(_file_defaults, _file_task(regression=True)),
    "ner": Family(_file_defaults, _ner_task, record_task=AlbertTokenClassifier.task,
                  label_names=True),
}
