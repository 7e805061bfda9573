"""The tasks: one entry per task, owning what every stage needs to know about it.

A `Task` says, for one task: the model class that holds it, the constructor
arguments its head takes from the task record, the record's fields and their
defaults, the loss and metrics `compile()` picks, which inputs the model takes
(text segments, masked positions, choices), the serving module that answers for
it, and the Hugging Face / KerasHub heads it maps to. Checkpoint readers and
writers, export, fine-tuning and the demo ask the entry (`get(name)`, or
`model.task_spec`, `record.spec`); they do not compare task names.

This module imports neither Keras nor TensorFlow: reading a task record or a
foreign checkpoint's config needs it, not the model.

| task | model | head arguments (= record fields) | text in fit/predict |
|---|---|---|---|
| encoder | AlbertEncoder | | |
| pretraining | AlbertPretrainer | | |
| masked_lm | AlbertMaskedLM | mlm_layer_norm_epsilon | |
| classification | AlbertSequenceClassifier | num_classes | text, (text_a, text_b) |
| regression | AlbertSequenceRegressor | | text, (text_a, text_b) |
| token_classification | AlbertTokenClassifier | num_classes | text |
| span | AlbertSpanExtractor | answerability | (question, context) |
| span_beam | AlbertSpanBeamExtractor | start_n_top, end_n_top | (question, context) |
| multiple_choice | AlbertMultipleChoice | | |

These names are the one vocabulary of tasks (records, models, serving, LiteRT and
`albert-tf finetune --task`); `classify` and `regress`, older `--task` spellings, are
aliases declared on their entries (`Task.aliases`, `ALIASES`, `canonical_name`).
"""

from __future__ import annotations

import dataclasses
import types
from collections.abc import Mapping
from typing import Any

from albert_tf.numerics import LAYER_NORM_EPSILON

__all__ = ["Task", "TASKS", "RECORD_TASKS", "ENCODER", "get", "ALIASES", "canonical_name",
           "COMMON_FIELDS", "SPAN_DEFAULTS",
           "IGNORED_LABEL",
           "MULTIPLE_CHOICE_DEFAULTS", "BEAM_DEFAULTS", "MASKED_LM_DEFAULTS", "SET_FIELDS",
           "TF1_ONE_OUTPUT_TASKS"]

# The original scripts' values: run_squad_v1/v2 (--doc_stride 128, --max_query_length 64,
# --max_answer_length 30, --n_best_size 20) and run_race (--max_qa_length 128).
SPAN_DEFAULTS = {"answerability": False, "doc_stride": 128, "max_query_length": 64,
                 "max_answer_length": 30, "n_best": 20, "no_answer_threshold": 0.5,
                 # Served contexts: at most this many doc-stride windows a row (32 windows
                 # of 384 pieces with stride 128: about 4,200 pieces, 20,000 characters).
                 "max_windows": 32,
                 # Answers a served question lists (transformers' pipeline's top_k).
                 "top_k": 1}
MULTIPLE_CHOICE_DEFAULTS = {"max_qa_length": 128}
# The raw-text form of multiple choice: (contexts [B], choices [B, K]).
CHOICE_TEXTS = "choices"
# run_squad_v2's beam (--start_n_top 5, --end_n_top 5): the XLNet-style head of `span_beam`.
BEAM_DEFAULTS = {"start_n_top": 5, "end_n_top": 5}
# The masked-LM head's LayerNorm epsilon: the original's (and Hugging Face's); a KerasHub
# AlbertMaskedLM's is 1e-5 (albert_tf.checkpoint.kerashub).
MASKED_LM_DEFAULTS = {"mlm_layer_norm_epsilon": LAYER_NORM_EPSILON}
# The label of a position the loss ignores (a word's pieces after its first, [CLS],
# [SEP], padding), as Hugging Face's token classifiers mark it.
IGNORED_LABEL = -100
# The fields every task's record holds.
COMMON_FIELDS = ("task", "seq_length", "tokenizer", "do_lower_case", "keep_accents",
                 "tokenize_chinese_chars", "split_characters", "precision")
_CLASSES = ("num_classes", "label_names")
# SQuAD decisions of the foreign span heads: "" when the null score exceeds the best
# answer's by more than this (Hugging Face's run_qa and the original run_squad_v2 both
# default to 0.0 before tuning it on dev data).
NULL_SCORE_DIFF_THRESHOLD = 0.0

_EMPTY: Mapping[str, Any] = types.MappingProxyType({})


@dataclasses.dataclass(frozen=True)
class Task:
    """What one task is, for every stage that handles it.

    Attributes:
      name: the task's name, as albert_task.json and `--task` write it.
      model_class: the name of the Keras class that holds it (the class itself:
        `albert_tf.models.TASK_MODELS`, or `albert_tf.encoder.AlbertEncoder`; this
        table imports no Keras).
      head_args: the model's constructor arguments the task record holds, under
        the same names (`model_kwargs(record)`; `record_fields_of(model)` reads
        them back).
      fields: the record's fields beyond COMMON_FIELDS, in albert_task.json's order.
      defaults: the record's defaults for fields not given.
      recorded: whether a checkpoint's task record can name it (the encoder is
        served or loaded from any checkpoint, never recorded).
      losses: output name -> (loss kind, weight) for `compile()` without a loss
        (kinds: "sparse_categorical_crossentropy", "token_crossentropy" (the same,
        positions labelled IGNORED_LABEL left out), "binary_crossentropy",
        "mean_squared_error", all on logits / raw outputs); empty: the model
        computes its own (pretraining) or has no training loss here.
      metrics: output name -> metric kinds ("accuracy", "token_accuracy", "mae") for
        `compile()`.
      label_output: the output a plain label array `y` is the target of (None:
        `y` must be a dict keyed by output); a single-output task's one output goes by
        this name outside the model (encoded labels, the serving signatures).
      labels: the plain label array the task trains on, checked before the graph
        (`albert_tf.api_inputs`): "class_ids" [B] (or [B, C] of 0/1, multi-label),
        "scores" [B], "token_class_ids" [B, T], "choice_ids" [B]; None: unchecked.
      single_output: the model's `call`/`predict` returns its one output as an array,
        not a dict (KerasHub's convention for its classifiers).
      text_segments: the raw-text forms `fit`/`predict` accept (1: texts, 2:
        (text_a, text_b) tuples, CHOICE_TEXTS: (contexts [B], choices [B, K]) tuples,
        one (context, choice) pair per option); empty: tokenized only.
      masked_positions: the model takes `masked_lm_positions` [B,P] too.
      choices: the inputs are [B,K,T] (one row per option).
      optional_heads: parts a checkpoint of this task may lack as a whole (then
        they keep their initialisation, with a warning).
      serving: the serving module kind that answers for it
        (`albert_tf.serving.modules.SERVING_MODULES`).
      hf_architecture: the Hugging Face class `convert --to hf` writes for it (None: none).
      hf_fields: record fields a Hugging Face head of this task implies.
      hf_problem_type: the `problem_type` Hugging Face's config gives this task when its
        class holds several (regression is a one-output AlbertForSequenceClassification).
      hf_problem_types: the record's problem_type -> Hugging Face's `problem_type` for a
        class that holds several (classification's single_label / multi_label).
      keras_hub: the KerasHub task class it is written as / read from (None: none).
      tf1_one_output: an original (TF1) checkpoint of it has one-column output_weights
        [1, H], as another task's may (`convert --task` / a task hint tells them apart).
      set_fields: the record fields `albert-tf finetune --set KEY=VALUE` may give.
      lists_answers: its served signature can list several answers a question
        (`export --top-k`); a head without it serves its best answer.
      char_offsets: its served signatures give character offsets into the raw text
        (answers, entities), which the graph of a Unigram tokenizer.json cannot give.
      litert: the LiteRT module kind that serves it in a .tflite file
        (`albert_tf.serving.litert.tasks.LITE_MODULES`); None: refused, `litert_refusal`
        saying why.
      aliases: older names `albert-tf finetune --task` still accepts for it (never
        printed, never written to a record; `canonical_name`).
    """

    name: str
    model_class: str
    head_args: tuple[str, ...] = ()
    fields: tuple[str, ...] = ()
    defaults: Mapping[str, Any] = dataclasses.field(default_factory=lambda: _EMPTY)
    recorded: bool = True
    losses: Mapping[str, tuple[str, float]] = dataclasses.field(default_factory=lambda: _EMPTY)
    metrics: Mapping[str, tuple[str, ...]] = dataclasses.field(default_factory=lambda: _EMPTY)
    label_output: str | None = None
    labels: str | None = None
    single_output: bool = False
    text_segments: tuple[int | str, ...] = ()
    masked_positions: bool = False
    choices: bool = False
    optional_heads: tuple[str, ...] = ()
    serving: str = "features"
    hf_architecture: str | None = None
    hf_fields: Mapping[str, Any] = dataclasses.field(default_factory=lambda: _EMPTY)
    hf_problem_type: str | None = None
    hf_problem_types: Mapping[str, str] = dataclasses.field(default_factory=lambda: _EMPTY)
    keras_hub: str | None = None
    tf1_one_output: bool = False
    set_fields: tuple[str, ...] = ()
    lists_answers: bool = False
    char_offsets: bool = False
    litert: str | None = None
    litert_refusal: str | None = None
    aliases: tuple[str, ...] = ()

    @property
    def record_fields(self) -> tuple[str, ...]:
        """Every field of the task's record (COMMON_FIELDS first)."""
        return COMMON_FIELDS + self.fields

    @property
    def classes(self) -> bool:
        """Whether the task has classes (num_classes, label_names)."""
        return "num_classes" in self.fields

    @property
    def span_windows(self) -> bool:
        """Whether it is a span (question answering) task: its record holds the doc-stride
        windows a served context is cut into (doc_stride, max_windows) and the answer rules."""
        return "doc_stride" in self.fields

    def model_kwargs(self, record) -> dict[str, Any]:
        """The constructor arguments `record` (a TaskRecord) gives `model_class`."""
        return {name: getattr(record, name) for name in self.head_args}

    def record_fields_of(self, model) -> dict[str, Any]:
        """The record fields `model`'s head decides (its head_args, read back)."""
        return {name: getattr(model, name) for name in self.head_args}

    def __str__(self) -> str:
        return self.name


def _task(name: str, model_class: str, **kwargs) -> Task:
    for key in ("defaults", "losses", "metrics", "hf_fields", "hf_problem_types"):
        if key in kwargs:
            kwargs[key] = types.MappingProxyType(dict(kwargs[key]))
    return Task(name, model_class, **kwargs)


_SPAN_FIELDS = tuple(SPAN_DEFAULTS) + ("null_score_diff_threshold",)
# What fine-tuning's --set may give a span model's record (answerability is the task
# family's, max_windows and the threshold export's and evaluation's).
_SPAN_SET = ("doc_stride", "max_query_length", "n_best", "max_answer_length",
             "no_answer_threshold")
_NO_OFFSETS = ("its answer is a substring of the context found through SentencePiece's byte "
               "offsets, and LiteRT has no kernel that gives them or cuts strings")
_ACCURACY = {"logits": ("accuracy",)}
_CROSS_ENTROPY = {"logits": ("sparse_categorical_crossentropy", 1.0)}

ENCODER = _task("encoder", "AlbertEncoder", recorded=False, text_segments=(1, 2),
                litert="encoder")

TASKS: Mapping[str, Task] = types.MappingProxyType({spec.name: spec for spec in (
    _task("pretraining", "AlbertPretrainer", masked_positions=True,
          optional_heads=("mlm_head", "sop_head"), hf_architecture="AlbertForPreTraining",
          litert="fill_mask"),
    _task("masked_lm", "AlbertMaskedLM", head_args=tuple(MASKED_LM_DEFAULTS),
          fields=tuple(MASKED_LM_DEFAULTS), defaults=MASKED_LM_DEFAULTS, masked_positions=True,
          losses={"mlm_logits": ("sparse_categorical_crossentropy", 1.0)},
          metrics={"mlm_logits": ("accuracy",)}, label_output="mlm_logits",
          hf_architecture="AlbertForMaskedLM", keras_hub="keras_hub>AlbertMaskedLM",
          litert="fill_mask"),
    _task("classification", "AlbertSequenceClassifier", head_args=("num_classes",),
          fields=_CLASSES + ("problem_type",), defaults={"problem_type": "single_label"},
          losses=_CROSS_ENTROPY, metrics=_ACCURACY, label_output="logits",
          labels="class_ids", single_output=True, text_segments=(1, 2), serving="classifier",
          hf_architecture="AlbertForSequenceClassification",
          hf_problem_types={"single_label": "single_label_classification",
                            "multi_label": "multi_label_classification"},
          keras_hub="keras_hub>AlbertTextClassifier", aliases=("classify",),
          litert="classifier"),
    _task("regression", "AlbertSequenceRegressor",
          losses={"score": ("mean_squared_error", 1.0)}, metrics={"score": ("mae",)},
          label_output="score", labels="scores", single_output=True, text_segments=(1, 2),
          serving="regressor",
          hf_architecture="AlbertForSequenceClassification", hf_problem_type="regression",
          aliases=("regress",), tf1_one_output=True, litert="regressor"),
    _task("token_classification", "AlbertTokenClassifier", head_args=("num_classes",),
          fields=_CLASSES + ("tag_scheme",),
          losses={"logits": ("token_crossentropy", 1.0)},
          metrics={"logits": ("token_accuracy",)}, label_output="logits",
          labels="token_class_ids", single_output=True, text_segments=(1,),
          serving="token_labels", char_offsets=True,
          hf_architecture="AlbertForTokenClassification", set_fields=("tag_scheme",),
          litert_refusal="its outputs are per-piece character offsets and entities cut from "
                         "the raw text, and LiteRT has no kernel that gives SentencePiece's "
                         "offsets or cuts strings"),
    _task("span", "AlbertSpanExtractor", head_args=("answerability",), fields=_SPAN_FIELDS,
          defaults=SPAN_DEFAULTS,
          losses={"start_logits": ("sparse_categorical_crossentropy", 0.5),
                  "end_logits": ("sparse_categorical_crossentropy", 0.5),
                  "answerable_logits": ("binary_crossentropy", 1.0)},
          text_segments=(2,), serving="span", char_offsets=True,
          hf_architecture="AlbertForQuestionAnswering",
          hf_fields={"answerability": False,
                     "null_score_diff_threshold": NULL_SCORE_DIFF_THRESHOLD},
          set_fields=_SPAN_SET, lists_answers=True, litert_refusal=_NO_OFFSETS),
    _task("span_beam", "AlbertSpanBeamExtractor", head_args=tuple(BEAM_DEFAULTS),
          fields=_SPAN_FIELDS + tuple(BEAM_DEFAULTS), defaults={**SPAN_DEFAULTS, **BEAM_DEFAULTS},
          text_segments=(2,), serving="span_beam", char_offsets=True, set_fields=_SPAN_SET,
          litert_refusal=_NO_OFFSETS),
    _task("multiple_choice", "AlbertMultipleChoice", fields=tuple(MULTIPLE_CHOICE_DEFAULTS),
          defaults=MULTIPLE_CHOICE_DEFAULTS, losses=_CROSS_ENTROPY, metrics=_ACCURACY,
          label_output="logits", labels="choice_ids", single_output=True, choices=True,
          text_segments=(CHOICE_TEXTS,),
          serving="multiple_choice",
          hf_architecture="AlbertForMultipleChoice", tf1_one_output=True,
          set_fields=tuple(MULTIPLE_CHOICE_DEFAULTS), litert="multiple_choice"),
)})
# The tasks a checkpoint's task record can name.
RECORD_TASKS = tuple(TASKS)
# Every task: what `export --task` and `open_checkpoint(task=...)` accept.
ALL_TASKS: Mapping[str, Task] = types.MappingProxyType({**TASKS, ENCODER.name: ENCODER})
# The record fields `finetune --set` may give, over every task.
SET_FIELDS = tuple(dict.fromkeys(f for spec in TASKS.values() for f in spec.set_fields))
# The tasks whose original (TF1) checkpoints have [1, H] output_weights.
TF1_ONE_OUTPUT_TASKS = tuple(name for name, spec in TASKS.items() if spec.tf1_one_output)
# Older spellings of task names (`--task classify`): alias -> the entry's name.
ALIASES: Mapping[str, str] = types.MappingProxyType(
    {alias: spec.name for spec in ALL_TASKS.values() for alias in spec.aliases})


def canonical_name(name: str) -> str:
    """`name` with an alias (ALIASES: "classify", "regress") replaced by its entry's
    name; any other string is returned as is."""
    return ALIASES.get(name, name)


def get(name: str | Task) -> Task:
    """The task named `name` (a `Task` is returned as is).

    Raises:
      KeyError: no such task, naming the known ones.
    """
    if isinstance(name, Task):
        return name
    try:
        return ALL_TASKS[name]
    except (KeyError, TypeError):
        raise KeyError(f"task={name!r} is not one of {', '.join(ALL_TASKS)}") from None
