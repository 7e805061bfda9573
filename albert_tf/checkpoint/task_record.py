"""The task record: what fine-tuning decided that preprocessing and decoding need.

A fine-tuned checkpoint carries one `albert_task.json`, read and written only
through `TaskRecord`. Fine-tuning writes it with the settings it actually used
(its defaults, the command line's flags and `--set` overrides); export, predict and
every serving signature read it and nothing else, so a model is always served the
way it was trained. Which fields a task's record holds, and their defaults, are
that task's entry in `albert_tf.tasks`; this module validates, reads and writes them.

| field | tasks | meaning (default) |
|---|---|---|
| task | all | pretraining, masked_lm, classification, regression, token_classification, span, span_beam, multiple_choice |
| seq_length | all | tokens per sequence at fine-tuning (None: not fine-tuned) |
| tokenizer | all | the tokenizer's kind: sentencepiece (spiece.model) or wordpiece (vocab.txt, BERT's rules) (sentencepiece) |
| do_lower_case, keep_accents | all | the tokenizer's normalisation (True, False); for WordPiece, keep_accents False strips accents |
| tokenize_chinese_chars | all | WordPiece: every CJK ideograph a word of its own (True; SentencePiece ignores it) |
| split_characters | all | WordPiece: every character a word of its own, as in training files of one character a line (Chinese NER) (False; SentencePiece ignores it) |
| num_classes, label_names | classification, token_classification | classes and their names |
| problem_type | classification | single_label (softmax) or multi_label (sigmoid) |
| tag_scheme | token_classification | the entity tags' scheme fine-tuning read: iob1, iob2 or bioes (None: not recorded, e.g. a foreign head) |
| answerability | span | SQuAD 2.0's no-answer head (False) |
| doc_stride | span | context pieces between window starts (128) |
| max_query_length | span | question pieces kept (64, at most seq_length - 4) |
| max_answer_length | span | longest answer in pieces (30) |
| n_best | span | candidate starts / ends per window (20) |
| max_windows | span | doc-stride windows a served context may need (32); more is refused |
| top_k | span | answers a served question lists, best first (1, also when None: the best alone; transformers' pipeline's top_k) |
| no_answer_threshold | span | "" when P(no answer) exceeds it (0.5; SQuAD 2.0 fine-tuning tunes it) |
| null_score_diff_threshold | span, span_beam | a foreign head's rule: "" when the [CLS] null score beats the best span by more (None: our own heads' rule) |
| start_n_top, end_n_top | span_beam | run_squad_v2's beam sizes (5, 5) |
| max_qa_length | multiple_choice | question + option pieces kept (128, at most seq_length - 3) |
| mlm_layer_norm_epsilon | masked_lm | the head's LayerNorm epsilon (1e-12, the original's; KerasHub's AlbertMaskedLM: 1e-5) |
| precision | all | the Keras dtype policy the model was trained under, e.g. float32 or mixed_bfloat16 (None: not recorded); `export --precision as-trained` serves in it |

Example:
    >>> record = TaskRecord.create("span", seq_length=384, max_query_length=32)
    >>> record.max_answer_length
    30
    >>> record.write("out/squad")  # out/squad/albert_task.json, atomically
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from collections.abc import Mapping
from typing import Any

from albert_tf.config import (
    MAX_SEQ_LENGTH,
    MAX_WINDOWS,
    MIN_SEQ_LENGTH,
    ConfigError,
    check_num_classes,
    check_sequence_length,
    check_size,
)
from albert_tf.errors import UserError
from albert_tf.infra.atomic import atomic_write_json
from albert_tf.infra.textio import EncodingError, FileSizeError, read_text
from albert_tf.precisions import POLICIES
from albert_tf.tagging import SCHEMES
from albert_tf.tasks import (
    BEAM_DEFAULTS,
    MASKED_LM_DEFAULTS,
    MULTIPLE_CHOICE_DEFAULTS,
    RECORD_TASKS,
    SPAN_DEFAULTS,
    Task,
)
from albert_tf.tasks import TASKS as _TASK_TABLE
from albert_tf.tokenizer.kinds import TOKENIZER_KINDS

__all__ = ["TaskRecord", "TaskRecordError", "TASK_FILE", "TASKS", "SPAN_DEFAULTS",
           "MULTIPLE_CHOICE_DEFAULTS", "BEAM_DEFAULTS", "MASKED_LM_DEFAULTS"]

TASK_FILE = "albert_task.json"
# The tasks a record names; each one's fields and defaults are its entry's (albert_tf.tasks).
TASKS = RECORD_TASKS
PROBLEM_TYPES = ("single_label", "multi_label")
# `precision`: the Keras dtype policy the model carries (which training chose it, and
# how, is training's business: albert_tf.training.runtime.distribute); the words'
# one home is albert_tf.precisions.
PRECISIONS = POLICIES
# Fields older albert_task.json files wrote for every task (as null when not applicable).
_LEGACY_NULLS = ("num_classes", "label_names")


class TaskRecordError(UserError):
    """An invalid task record; the message names the field, the value and the file."""


@dataclasses.dataclass(frozen=True)
class TaskRecord:
    """Every setting of a fine-tuned model that preprocessing and decoding need.

    Build one with `TaskRecord.create` (fills the task's defaults) or read one with
    `TaskRecord.read`; the constructor validates either way. Fields that do not
    apply to `task` are None. `source` (the file it came from or goes to) only
    makes error messages name it.
    """

    task: str
    seq_length: int | None = None
    do_lower_case: bool = True
    keep_accents: bool = False
    tokenizer: str = TOKENIZER_KINDS[0]
    tokenize_chinese_chars: bool = True
    split_characters: bool = False
    num_classes: int | None = None
    label_names: tuple[str, ...] | None = None
    problem_type: str | None = None
    tag_scheme: str | None = None
    answerability: bool | None = None
    doc_stride: int | None = None
    max_query_length: int | None = None
    max_answer_length: int | None = None
    n_best: int | None = None
    max_windows: int | None = None
    top_k: int | None = None
    no_answer_threshold: float | None = None
    max_qa_length: int | None = None
    null_score_diff_threshold: float | None = None
    start_n_top: int | None = None
    end_n_top: int | None = None
    mlm_layer_norm_epsilon: float | None = None
    precision: str | None = None
    source: str | None = dataclasses.field(default=None, compare=False, repr=False)

    # ------------------------------------------------------------ building
    @classmethod
    def create(cls, task: str, source: str | None = None, **fields) -> TaskRecord:
        """A record for `task`: the given fields, and this module's defaults for the rest.

        Defaults that depend on `seq_length` shrink to fit it (max_query_length is
        at most seq_length - 4, max_qa_length at most seq_length - 3); a value given
        explicitly that does not fit is an error.
        """
        where = f" in {source}" if source else ""
        if task not in TASKS:
            raise TaskRecordError(f"task={task!r}{where} is not one of {', '.join(TASKS)}")
        unknown = sorted(set(fields) - {f.name for f in dataclasses.fields(cls)})
        if unknown:
            raise TaskRecordError(f"unknown field {unknown[0]}={fields[unknown[0]]!r}{where}; "
                                  f"a {task} record holds {', '.join(_TASK_TABLE[task].record_fields)}")
        spec = _TASK_TABLE[task]
        given = dict(fields)
        seq_length = given.get("seq_length")
        if spec.classes and given.get("num_classes") is None and \
                isinstance(given.get("label_names"), (list, tuple)):
            given["num_classes"] = len(given["label_names"])
        for name, value in spec.defaults.items():
            if given.get(name) is None:
                given[name] = _fit_default(name, value, seq_length)
        if isinstance(given.get("label_names"), list):
            given["label_names"] = tuple(given["label_names"])
        return cls(task=task, source=source, **given)

    @classmethod
    def from_dict(cls, data: Any, source: str | None = None) -> TaskRecord:
        """A record from albert_task.json's content (missing fields: the defaults)."""
        where = f" in {source}" if source else ""
        if not isinstance(data, Mapping):
            raise TaskRecordError(f"expected a JSON object{where}, got {type(data).__name__}")
        if "task" not in data:
            raise TaskRecordError(f"no 'task' field{where}")
        fields = dict(data)
        task = fields.pop("task")
        if task in TASKS:
            for name in _LEGACY_NULLS:  # older files wrote these as null for every task
                if name not in _TASK_TABLE[task].record_fields and fields.get(name, 0) is None:
                    del fields[name]
        if "source" in fields:
            raise TaskRecordError(f"unknown field source={fields['source']!r}{where}")
        return cls.create(task, source=source, **fields)

    @classmethod
    def read(cls, path: str | os.PathLike) -> TaskRecord:
        """The record of one of our checkpoint directories (or an albert_task.json path).

        A directory without albert_task.json is a pretraining checkpoint. The record
        of any checkpoint, foreign ones included, is `open_checkpoint(path).task_record`.
        """
        path = os.fspath(path)
        if os.path.isdir(path):
            path = os.path.join(path, TASK_FILE)
            if not os.path.exists(path):
                return cls.create("pretraining", source=path)
        try:
            data = json.loads(read_text(path))  # a regular file of bounded size, UTF-8
        except json.JSONDecodeError as e:
            raise TaskRecordError(f"{path}:{e.lineno}:{e.colno}: invalid JSON: {e.msg}") from None
        except (EncodingError, FileSizeError) as e:
            raise TaskRecordError(str(e)) from None
        except RecursionError:  # [[[[... nested deeper than the parser goes
            raise TaskRecordError(f"{path}: invalid JSON: nested too deeply") from None
        except OSError as e:
            raise TaskRecordError(f"{path}: cannot read: {e.strerror or e}") from None
        return cls.from_dict(data, source=path)

    @property
    def spec(self) -> Task:
        """The task's entry in `albert_tf.tasks`: its model, head arguments, loss, serving."""
        return _TASK_TABLE[self.task]

    def class_names(self) -> list[str]:
        """The classes' names as predictions and the serving signatures give them: the
        record's `label_names`, else "0", "1", ... (num_classes of them)."""
        return list(self.label_names or [str(i) for i in range(self.num_classes or 0)])

    def replace(self, **changes) -> TaskRecord:
        """A copy with `changes`, validated."""
        return dataclasses.replace(self, **changes)

    def at_seq_length(self, seq_length: int) -> TaskRecord:
        """This record for sequences of `seq_length` (a model served or loaded at another
        length): max_query_length and max_qa_length cut to fit it, as the defaults are."""
        changes = {"seq_length": seq_length}
        for name in ("max_query_length", "max_qa_length"):
            if getattr(self, name) is not None:
                changes[name] = _fit_default(name, getattr(self, name), seq_length)
        return self.replace(**changes)

    # ------------------------------------------------------------ validation
    def __post_init__(self):
        where = f" in {self.source}" if self.source else ""
        if self.task not in TASKS:
            raise TaskRecordError(f"task={self.task!r}{where} is not one of {', '.join(TASKS)}")
        applicable = self.spec.record_fields
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if field.name not in applicable and field.name != "source" and value is not None:
                raise TaskRecordError(f"{field.name}={value!r}{where} does not apply to "
                                      f"task={self.task!r} (it holds {', '.join(applicable)})")
        # Each check applies where the task's record holds its fields.
        self._check_common(where)
        if "num_classes" in applicable:
            self._check_classes(where)
        if "doc_stride" in applicable:
            self._check_span(where)
        if "mlm_layer_norm_epsilon" in applicable:
            value = self.mlm_layer_norm_epsilon
            if isinstance(value, bool) or not isinstance(value, (int, float)) or \
                    not math.isfinite(value) or value <= 0:
                raise TaskRecordError(f"mlm_layer_norm_epsilon={value!r}{where}: expected a "
                                      "positive number")
        if "max_qa_length" in applicable:
            _check_int("max_qa_length", self.max_qa_length, 1, where)
            if self.seq_length is not None and self.max_qa_length > self.seq_length - 3:
                raise TaskRecordError(f"max_qa_length={self.max_qa_length} exceeds seq_length="
                                      f"{self.seq_length} - 3 (the [CLS] and two [SEP]){where}")

    def _check_common(self, where: str) -> None:
        if self.seq_length is not None:
            try:  # the one length rule; the record's error type
                check_sequence_length(self.seq_length, where=where.strip())
            except ConfigError as e:
                raise TaskRecordError(str(e)) from None
        _check_bool("do_lower_case", self.do_lower_case, where)
        _check_bool("keep_accents", self.keep_accents, where)
        _check_bool("tokenize_chinese_chars", self.tokenize_chinese_chars, where)
        _check_bool("split_characters", self.split_characters, where)
        if self.tokenizer not in TOKENIZER_KINDS:
            raise TaskRecordError(f"tokenizer={self.tokenizer!r}{where} is not one of "
                                  f"{', '.join(TOKENIZER_KINDS)}")
        if self.precision is not None and self.precision not in PRECISIONS:
            raise TaskRecordError(f"precision={self.precision!r}{where} is not one of "
                                  f"{', '.join(PRECISIONS)}")

    def _check_classes(self, where: str) -> None:
        if self.num_classes is None:
            raise TaskRecordError(f"num_classes is missing{where} (a {self.task} record needs it)")
        _check_int("num_classes", self.num_classes, 1, where)
        check_num_classes(self.num_classes, where.strip(), TaskRecordError)
        if self.label_names is not None:
            names = self.label_names
            if not isinstance(names, tuple) or not all(isinstance(n, str) for n in names):
                raise TaskRecordError(f"label_names={names!r}{where}: expected a list of strings")
            if len(names) != self.num_classes:
                raise TaskRecordError(f"label_names has {len(names)} names but num_classes="
                                      f"{self.num_classes}{where}")
            duplicates = sorted({n for n in names if names.count(n) > 1})
            if duplicates:
                raise TaskRecordError(f"label_names repeats {duplicates[0]!r}{where}")
        if "problem_type" in self.spec.fields and self.problem_type not in PROBLEM_TYPES:
            raise TaskRecordError(f"problem_type={self.problem_type!r}{where} is not one of "
                                  f"{', '.join(PROBLEM_TYPES)}")
        if self.tag_scheme is not None and self.tag_scheme not in SCHEMES:
            raise TaskRecordError(f"tag_scheme={self.tag_scheme!r}{where} is not one of "
                                  f"{', '.join(SCHEMES)}")

    def _check_span(self, where: str) -> None:
        _check_bool("answerability", self.answerability, where)
        for name in ("doc_stride", "max_query_length", "max_answer_length", "n_best") + \
                (("top_k",) if self.top_k is not None else ()):  # None: 1 (older records)
            _check_int(name, getattr(self, name), 1, where)  # each counts pieces of a window
            check_size(name, getattr(self, name), MAX_SEQ_LENGTH, where.strip(), TaskRecordError)
        _check_int("max_windows", self.max_windows, 1, where)
        check_size("max_windows", self.max_windows, MAX_WINDOWS, where.strip(), TaskRecordError)
        value = self.no_answer_threshold
        if isinstance(value, bool) or not isinstance(value, (int, float)) or \
                not math.isfinite(value) or not 0.0 <= value <= 1.0:
            raise TaskRecordError(f"no_answer_threshold={value!r}{where}: expected a "
                                  "probability in [0, 1]")
        diff = self.null_score_diff_threshold
        if diff is not None and (isinstance(diff, bool) or not isinstance(diff, (int, float))
                                 or not math.isfinite(diff)):
            raise TaskRecordError(f"null_score_diff_threshold={diff!r}{where}: expected a "
                                  "finite number or null")
        for name in BEAM_DEFAULTS:
            if name in self.spec.fields:
                _check_int(name, getattr(self, name), 1, where)
                check_size(name, getattr(self, name), MAX_SEQ_LENGTH, where.strip(),
                           TaskRecordError)
        if self.seq_length is not None and self.max_query_length > self.seq_length - 4:
            raise TaskRecordError(f"max_query_length={self.max_query_length} exceeds seq_length="
                                  f"{self.seq_length} - 4 (the [CLS], two [SEP] and at least one "
                                  f"context piece){where}")

    # ------------------------------------------------------------ writing
    def to_dict(self) -> dict[str, Any]:
        """The JSON object albert_task.json holds: the fields of this record's task."""
        out = {}
        for name in self.spec.record_fields:
            value = getattr(self, name)
            out[name] = list(value) if isinstance(value, tuple) else value
        return out

    def write(self, directory: str | os.PathLike) -> str:
        """Writes `directory`/albert_task.json atomically; returns its path."""
        path = os.path.join(os.fspath(directory), TASK_FILE)
        atomic_write_json(path, self.to_dict(), ensure_ascii=False)
        return path


def _fit_default(name: str, value, seq_length: int | None):
    """A default that depends on seq_length, shrunk to fit (never below 1)."""
    if isinstance(seq_length, int) and not isinstance(seq_length, bool) and \
            seq_length >= MIN_SEQ_LENGTH:  # else validation refuses it
        if name == "max_query_length":
            return max(1, min(value, seq_length - 4))
        if name == "max_qa_length":
            return max(1, min(value, seq_length - 3))
    return value


def _check_int(name: str, value, minimum: int, where: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TaskRecordError(f"{name}={value!r}{where}: expected an integer >= {minimum}")
    if value < minimum:
        raise TaskRecordError(f"{name}={value}{where}: must be >= {minimum}")


def _check_bool(name: str, value, where: str) -> None:
    if not isinstance(value, bool):
        raise TaskRecordError(f"{name}={value!r}{where}: expected true or false")
