"""What `albert-tf export` is asked to do, parsed and validated once: an `ExportPlan`.

  ExportRequest        the arguments as given (the Python API's, or the command line's
                       through `from_args`)
  plan(request)        the checkpoint opened once, then every option checked against it and
                       against the target, before any weight is read: an `ExportPlan`
  ExportPlan           what to export (the opened checkpoint, its task and task record with
                       the span windows and answer options applied), where (the version
                       directory or the .tflite file) and how (precision, sequence length,
                       tokenizer, batching, branches, quantization)
  source_directory     a task model in memory as a temporary checkpoint of it

`export.build(plan)` writes what a plan says; nothing here writes anything.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import tempfile
from collections.abc import Iterator

import keras

from albert_tf import precisions
from albert_tf.checkpoint import open_checkpoint, save_checkpoint
from albert_tf.checkpoint.hub import not_found_hint, resolve_checkpoint
from albert_tf.checkpoint.opened import OpenedCheckpoint
from albert_tf.checkpoint.task_record import TaskRecord, TaskRecordError
from albert_tf.checkpoint.tokenizer_files import MISSING_TOKENIZER
from albert_tf.config import check_sequence_length
from albert_tf.infra import atomic
from albert_tf.span_answers import QaOptions
from albert_tf.tokenizer.json_graph import check_graph_shape
from albert_tf.tokenizer.kinds import SENTENCEPIECE, is_tokenizer_json
from albert_tf.tokenizer.preprocessor import AlbertPreprocessor
from albert_tf.tokenizer.tokenizer_json import read_tokenizer_json

from . import layout, warmup
from .modules import ExportError, check_branches
from .options import FORMATS, QUANTIZE, Batching
from .signatures.base import PAD_MULTIPLE


@dataclasses.dataclass(frozen=True)
class ExportRequest:
    """The arguments of one export as given (`export.export` documents each); nothing
    checked yet. `checkpoint` is a path (a model in memory: `source_directory`)."""

    checkpoint: str
    output: str
    version: int | None
    task: str | None
    seq_length: int | None
    spm_model: str | None
    pad_multiple: int | None
    token_ids_only: bool
    precision: str
    format: str
    quantize: str
    batching: Batching | None
    doc_stride: int | None
    max_windows: int | None
    source_name: str | None
    branches: int
    answers: QaOptions | None


@dataclasses.dataclass(frozen=True)
class ExportPlan:
    """One export, validated: what, from what, and how.

    Attributes:
      request: what was asked, every option checked against the checkpoint and the
        target; its output (BASE/NAME, or the .tflite file), format, quantize and the
        SavedModel options (pad_multiple, batching, branches, token_ids_only) are
        written as given.
      source: the checkpoint, opened once; `.load()` gives the model to serve.
      source_name: what the provenance record names as the source.
      path: what is written: BASE/NAME/VERSION, or the .tflite file.
      task: the served task: the record's, or another that `--task` names ("encoder").
      record: the checkpoint's task record with export's span windows and answer options.
      dtype: the served precision, float32 or bfloat16.
      seq_length: tokens per request, within the model's position table.
      preprocessor: the tokenizer at `seq_length`, its vocabulary the model's size.
      tokenizer_kind: its vocabulary's kind, as the provenance record names it.
    """

    request: ExportRequest
    source: OpenedCheckpoint
    source_name: str
    path: str
    task: str
    record: TaskRecord
    dtype: str
    seq_length: int
    preprocessor: AlbertPreprocessor
    tokenizer_kind: str

    @property
    def records_windows(self) -> bool:
        """Whether the SavedModel records the span windows it serves with (a span model
        served as itself), for a client or a later reader to check."""
        return self.record.spec.span_windows and self.task == self.record.task


def plan(request: ExportRequest) -> ExportPlan:
    """`request` checked, in the order a user fixes it: the options' words, the checkpoint
    (any format; a directory that is not one gets that answer, not a question about its
    vocabulary), the target, the tokenizer, the task record, the sequence length.

    Raises:
      ExportError, TaskRecordError, CheckpointError, LayoutError, ...: one line each,
      before any weight is read or anything is written.
    """
    if request.format not in FORMATS:
        raise ExportError(f"--format {request.format!r}: expected one of {', '.join(FORMATS)}")
    precision = export_word(request.precision)
    source = open_checkpoint(request.checkpoint, request.task)
    path = _target(request, precision)
    files = source.tokenizer_files(request.spm_model)
    if files.spm_model is None:
        raise ExportError(f"{request.checkpoint} {MISSING_TOKENIZER}; pass --spm-model")
    _check_tokenizer_json(files, source.task_record, request.token_ids_only)
    if request.format == "savedmodel":
        warmup.require_serving_api()
    # The one source of the task's settings (export may set the span windows).
    record = with_windowing(source.task_record, request.doc_stride, request.max_windows)
    if request.answers is not None:
        record = with_answer_options(record, request.answers)
    seq_length = _seq_length(request, record, source.config)
    check_branches(request.branches, source.config)  # before the weights load
    preprocessor = _preprocessor(files, seq_length, source.config)
    return ExportPlan(
        request=request, source=source,
        source_name=request.source_name or os.path.abspath(request.checkpoint), path=path,
        task=request.task or record.task, record=record,
        dtype=precisions.served_dtype(precision, record.precision), seq_length=seq_length,
        preprocessor=preprocessor, tokenizer_kind=files.kind)


def from_args(args: argparse.Namespace) -> ExportPlan:
    """The plan of `albert-tf export`'s parsed arguments (`export_command.parser`). The
    flags are checked before the checkpoint is looked for (a hub handle is downloaded)."""
    batching = _batching(args)
    answers = QaOptions(top_k=args.top_k, max_answer_len=args.max_answer_len,
                        handle_impossible_answer=args.handle_impossible_answer)
    checkpoint = resolve_checkpoint(args.checkpoint)  # a hub handle or released name too
    if not os.path.lexists(checkpoint):
        raise ExportError(f"--checkpoint {checkpoint}: no such directory"
                          f"{not_found_hint(checkpoint)}")
    if not os.path.isdir(checkpoint):
        raise ExportError(f"--checkpoint {checkpoint} is a file; give the checkpoint's "
                          "directory")
    request = ExportRequest(
        checkpoint=checkpoint, output=args.output, version=args.version, task=args.task,
        seq_length=args.seq_length, spm_model=args.spm_model, pad_multiple=PAD_MULTIPLE,
        token_ids_only=args.token_ids_only, precision=args.precision, format=args.format,
        quantize=args.quantize, batching=batching, doc_stride=args.doc_stride,
        max_windows=args.max_windows, source_name=None, branches=args.branches,
        answers=answers)
    return plan(request)


@contextlib.contextmanager
def source_directory(checkpoint: str | keras.Model) -> Iterator[tuple[str, str | None]]:
    """(the checkpoint's path, the name a model in memory goes by): a task model with its
    preprocessor is saved to a temporary checkpoint (`save_checkpoint`), removed on exit."""
    if not isinstance(checkpoint, keras.Model):
        yield checkpoint, None
        return
    with tempfile.TemporaryDirectory(prefix="albert-tf-export-") as directory:
        save_checkpoint(checkpoint, directory)
        yield directory, f"{type(checkpoint).__name__} in memory"


# ------------------------------------------------------------------ the options' words
def export_word(precision: str) -> str:
    """An `--precision` word (`albert_tf.precisions`: as-trained, float32, bfloat16; the
    older `auto` is as-trained) with its alias resolved; ExportError naming the words."""
    try:
        return precisions.export_precision(precision)
    except ValueError as e:
        raise ExportError(str(e)) from None


def _batching(args: argparse.Namespace) -> Batching | None:
    """--batching's options (refused without it, or out of range)."""
    defaults = Batching()
    given = {"--batching-timeout-ms": args.batching_timeout_ms != defaults.timeout_ms,
             "--batching-max-size": args.batching_max_size != defaults.max_batch_size}
    if not args.batching:
        for flag in (f for f, changed in given.items() if changed):
            raise ExportError(f"{flag} goes with --batching")
        return None
    if not 0 <= args.batching_timeout_ms <= 1000:  # NaN fails this too
        raise ExportError(f"--batching-timeout-ms {args.batching_timeout_ms}: expected 0 to 1000")
    if not 1 <= args.batching_max_size <= 1024:
        raise ExportError(f"--batching-max-size {args.batching_max_size}: expected 1 to 1024")
    return Batching(max_batch_size=args.batching_max_size, timeout_ms=args.batching_timeout_ms)


# ------------------------------------------------------------------ the target
def _target(request: ExportRequest, precision: str) -> str:
    """What the export writes: the .tflite file, or BASE/NAME/VERSION (an existing version
    refused, an unwritable BASE/NAME named as the user wrote it, not its staging name)."""
    if request.format == "litert":  # one file, checked against the model before it is kept
        _check_litert_options(request, precision)
        return request.output
    if request.quantize != "none":
        raise ExportError("--quantize is for --format litert")
    if request.batching is not None and request.token_ids_only:
        raise ExportError("--batching goes with the text signatures, not --token-ids-only")
    _, path = layout.resolve_version(request.output, request.version)
    atomic.check_writable_directory(request.output, "--output")
    return path


def _check_litert_options(request: ExportRequest, precision: str) -> None:
    """Refuses what a .tflite export cannot honour, and an output it must not overwrite."""
    if request.quantize not in QUANTIZE:
        raise ExportError(f"--quantize {request.quantize!r}: expected one of "
                          f"{', '.join(QUANTIZE)}")
    for given, flag in ((request.version is not None, "--version"),
                        (request.token_ids_only, "--token-ids-only"),
                        (precision == "bfloat16", "--precision bfloat16")):
        if given:
            raise ExportError(f"{flag} is for SavedModels; a .tflite file is one version, always "
                              "has a token_ids signature, and is made smaller by --quantize")
    output = request.output
    if os.path.lexists(output):
        raise ExportError(f"--output {output} exists; a .tflite export never replaces a file")
    parent = os.path.dirname(os.path.abspath(output))
    if not os.path.isdir(parent):
        raise ExportError(f"--output {output}: no such directory {parent}")
    atomic.check_writable_directory(parent, "--output's directory")
    if request.batching is not None:
        raise ExportError("--batching is for SavedModels; a .tflite file answers one "
                          "caller at a time")
    if request.branches != 1:
        raise ExportError("--branches is for SavedModels; LiteRT runs a .tflite file's "
                          "ops one at a time")


# ------------------------------------------------------------------ the tokenizer
def _check_tokenizer_json(files, record: TaskRecord, token_ids_only: bool) -> None:
    """Refuses, before any work, what a Unigram tokenizer.json cannot serve: a
    pre-tokenizer the graph does not apply, and the signatures that need character
    offsets (`Task.char_offsets`; a SavedModel or a .tflite file alike)."""
    if not (is_tokenizer_json(files.spm_model) and files.kind == SENTENCEPIECE):
        return
    check_graph_shape(read_tokenizer_json(files.spm_model))
    if record.spec.char_offsets and not token_ids_only:
        raise ExportError(f"{files.spm_model}: a tokenizer.json's Unigram model gives no "
                          f"character offsets in the graph, which the {record.task} signatures "
                          f"need; export with --token-ids-only, or pass --spm-model with the "
                          f"model's original spiece.model")


def _preprocessor(files, seq_length: int, config) -> AlbertPreprocessor:
    """The tokenizer at `seq_length`; refused when its vocabulary is not the model's size."""
    preprocessor = files.preprocessor(seq_length)
    if preprocessor.tokenizer.vocab_size != config.vocab_size:
        raise ExportError(f"{files.spm_model} has {preprocessor.tokenizer.vocab_size} pieces but "
                          f"the model's vocab_size is {config.vocab_size}")
    return preprocessor


# ------------------------------------------------------------------ the task record
def with_windowing(record: TaskRecord, doc_stride: int | None,
                   max_windows: int | None) -> TaskRecord:
    """The record with export's --doc-stride / --max-windows (validated); refused for a
    record that is not a span model's (`Task.span_windows`)."""
    given = {k: v for k, v in (("doc_stride", doc_stride), ("max_windows", max_windows))
             if v is not None}
    if given and not record.spec.span_windows:
        flag = "--" + next(iter(given)).replace("_", "-")
        raise TaskRecordError(f"{flag} is for span (question answering) models; the "
                              f"checkpoint holds a {record.task} model")
    return record.replace(**given) if given else record


def with_answer_options(record: TaskRecord, options: QaOptions) -> TaskRecord:
    """The record with export's --top-k / --max-answer-len / --handle-impossible-answer
    mapped onto its own fields (`QaOptions.applied`); refused for a record that is not a
    span model's, and --top-k for a head that serves its best answer only."""
    given = _answer_flags(options)
    if given and not record.spec.span_windows:
        raise TaskRecordError(f"{given[0]} is for span (question answering) models; the "
                              f"checkpoint holds a {record.task} model")
    if (options.top_k or 1) > 1 and not record.spec.lists_answers:
        raise TaskRecordError(f"--top-k is for start/end span heads; the {record.task} head "
                              "serves its best answer")
    return options.applied(record)


def _answer_flags(answers: QaOptions) -> tuple[str, ...]:
    """The export flags `answers` sets (what a refusal names)."""
    flags = {"--top-k": answers.top_k is not None and answers.top_k != 1,
             "--max-answer-len": answers.max_answer_len is not None,
             "--handle-impossible-answer": answers.handle_impossible_answer is not None}
    return tuple(flag for flag, given in flags.items() if given)


def _seq_length(request: ExportRequest, record: TaskRecord, config) -> int:
    """--seq-length, else the fine-tuning length, else the config's default; within the
    position table."""
    seq_length = request.seq_length
    if seq_length is None:
        seq_length = record.seq_length or config.default_seq_length()
    check_sequence_length(seq_length, config.max_position_embeddings,
                          where=f"--seq-length, checkpoint {request.checkpoint}")
    return seq_length
