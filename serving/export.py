"""`albert-tf export`: a checkpoint -> BASE/NAME/VERSION/, a SavedModel TF Serving loads as is.

The SavedModel's signatures take raw text (see `signatures/`: `tasks.py`, `span.py`),
tokenize it in the graph with the checkpoint's own SentencePiece model (embedded
in the graph, so nothing is read from this machine at serve time), and carry
`assets.extra/tf_serving_warmup_requests`. Versions are written atomically: a
hidden staging directory is renamed into place when complete.

With `--format litert` it writes one .tflite file instead (`litert/`): raw text in,
LiteRT builtins plus tensorflow-text's FastSentencepieceTokenize, checked against the
Keras model before it is kept.

Example:
    albert-tf export --checkpoint runs/sst2 --output models/albert_sst2
    # -> models/albert_sst2/1/ (then 2/, 3/, ... on later exports)
    #    and models/albert_sst2/batching_parameters.txt (written once, then kept)
    albert-tf export --checkpoint runs/sst2 --output sst2.tflite --format litert --quantize int8
"""

from __future__ import annotations

import argparse
import importlib.metadata
import logging
import os
import sys
import tempfile
from collections.abc import Sequence

import keras
import tensorflow as tf

import albert_tf
from albert_tf import precisions
from albert_tf.checkpoint import open_checkpoint, save_checkpoint
from albert_tf.checkpoint.hub import not_found_hint, resolve_checkpoint
from albert_tf.checkpoint.tokenizer_files import MISSING_TOKENIZER
from albert_tf.config import check_sequence_length
from albert_tf.infra import atomic, cli
from albert_tf.span_answers import QaOptions
from albert_tf.tokenizer.json_graph import check_graph_shape
from albert_tf.tokenizer.kinds import SENTENCEPIECE, is_tokenizer_json
from albert_tf.tokenizer.tokenizer_json import read_tokenizer_json

from . import export_command, layout, provenance, server_releases, warmup
from .litert import convert as litert
from .modules import (  # noqa: F401 - SERVING_MODULES, save_module: export's public names too
    SERVING_MODULES,
    TASKS,
    ExportError,
    build_module,
    custom_ops,
    save_module,
    served_model,
)
from .options import FORMATS, QUANTIZE, Batching
from .signatures import span_windows
from .signatures.base import PAD_MULTIPLE

logger = logging.getLogger(__name__)



def serving_precision(precision: str, trained: str | None) -> str:
    """float32 or bfloat16 for an `--precision` word (`albert_tf.precisions`: as-trained,
    float32, bfloat16; the older `auto` is as-trained): as-trained serves in bfloat16 when
    `trained` (the task record's policy, None when it has none) computes in bfloat16."""
    return precisions.served_dtype(export_word(precision), trained)


def export_word(precision: str) -> str:
    """An `--precision` word with its alias resolved; ExportError naming the words."""
    try:
        return precisions.export_precision(precision)
    except ValueError as e:
        raise ExportError(str(e)) from None


# The signatures that give character offsets, which a Unigram tokenizer.json has not in the graph.
_OFFSET_SIGNATURES = ("span", "span_beam", "token_labels")


def _check_tokenizer_json(files, record, token_ids_only: bool) -> None:
    """Refuses, before any work, what a Unigram tokenizer.json cannot serve: a
    pre-tokenizer the graph does not apply, and the signatures that need character
    offsets (a SavedModel or a .tflite file alike)."""
    if not (is_tokenizer_json(files.spm_model) and files.kind == SENTENCEPIECE):
        return
    check_graph_shape(read_tokenizer_json(files.spm_model))
    if record.spec.serving in _OFFSET_SIGNATURES and not token_ids_only:
        raise ExportError(f"{files.spm_model}: a tokenizer.json's Unigram model gives no "
                          f"character offsets in the graph, which the {record.task} signatures "
                          f"need; export with --token-ids-only, or pass --spm-model with the "
                          f"model's original spiece.model")


def export(checkpoint: str | keras.Model, output: str, version: int | None = None,
           task: str | None = None, seq_length: int | None = None, spm_model: str | None = None,
           pad_multiple: int | None = PAD_MULTIPLE, token_ids_only: bool = False,
           precision: str = precisions.AS_TRAINED, format: str = "savedmodel",
           quantize: str = "none",
           batching: Batching | None = None, doc_stride: int | None = None,
           max_windows: int | None = None, source_name: str | None = None,
           branches: int = 1, answers: QaOptions | None = None) -> str:
    """Exports a checkpoint (or a task model) to `output`/VERSION; returns that path.

    Args:
      checkpoint: ours (albert_config.json + model.weights.h5 + spiece.model +
        albert_task.json), a Hugging Face ALBERT directory, or an original TF1
        checkpoint directory: fine-tuned ones serve their heads. Or a task model in
        memory with its preprocessor (`from_preset`, a `.keras` file), exported
        through a temporary checkpoint of it (`save_checkpoint`).
      output: BASE/NAME, the directory TF Serving's --model_base_path points at.
      version: the version to write (default: the next free one; never overwrites).
      task: override the checkpoint's task ("encoder" for features only); names it
        for TF1 checkpoints that fit two scripts (regression / multiple_choice).
      seq_length: maximum tokens per request (default: the checkpoint's
        fine-tuning length, else `AlbertConfig.default_seq_length()`: 512, at most
        max_position_embeddings, as from_preset).
      spm_model: SentencePiece model, when the checkpoint directory has none
        (spiece.model, or the one *.model file beside a TF1 checkpoint).
      pad_multiple: dynamic padding granularity (None: always `seq_length`).
      token_ids_only: only the `token_ids` signature (no tensorflow-text ops).
      precision: float32, bfloat16 (variables and matmuls; inputs and outputs of the
        signatures unchanged) or as-trained (bfloat16 if the task record says the model
        was trained in bfloat16; `albert_tf.precisions`, where "auto" is its older name).
      format: savedmodel (BASE/NAME/VERSION/ for TF Serving) or litert (`output` is the
        .tflite file; see `litert.convert.write_litert`).
      quantize: for litert: none (float32), float16 or int8 (dynamic range).
      batching: in-graph batching of concurrent requests (`Batching`; savedmodel only).
      doc_stride, max_windows: span models: the context pieces between window starts
        and the windows a served context may need (default: the task record's); the
        SavedModel records the settings it serves with in assets.extra/albert_task.json.
      answers: span models: transformers' pipeline options that change the graph
        (`QaOptions`' top_k, max_answer_len and handle_impossible_answer; top_k None: the
        record's), mapped onto the record's settings (`QaOptions.applied`).
      source_name: what the provenance record names as the source (default: the
        checkpoint's absolute path).
      branches: each encoder sublayer as this many independent branches
        (`modules.served_model`; savedmodel only), for a server that runs one
        request on several cores with one thread per op (docs/serving.md).

    Every SavedModel carries VERSION/assets/albert_tf_export.json (`provenance`): its task
    record and label names, tokenizer, versions, source and weights hash, custom ops and
    the oldest tensorflow/serving release that links them (`server_releases`).
    """

    if format not in FORMATS:
        raise ExportError(f"--format {format!r}: expected one of {', '.join(FORMATS)}")
    precision = export_word(precision)
    if isinstance(checkpoint, keras.Model):
        with tempfile.TemporaryDirectory(prefix="albert-tf-export-") as directory:
            save_checkpoint(checkpoint, directory)
            return export(directory, output, version, task, seq_length, spm_model,
                          pad_multiple, token_ids_only, precision, format, quantize, batching,
                          doc_stride, max_windows,
                          source_name or f"{type(checkpoint).__name__} in memory", branches,
                          answers)
    # The checkpoint first (any format; a foreign one serves its head): a directory
    # that is not one gets that answer, not a question about its vocabulary.
    source = open_checkpoint(checkpoint, task)
    if format == "litert":  # one file, checked against the model before it is kept
        _check_litert_options(output, version, token_ids_only, precision, quantize)
        if batching is not None:
            raise ExportError("--batching is for SavedModels; a .tflite file answers one "
                              "caller at a time")
        if branches != 1:
            raise ExportError("--branches is for SavedModels; LiteRT runs a .tflite file's "
                              "ops one at a time")
    else:
        # Then the target, before anything is loaded: an existing version is refused, an
        # unwritable BASE/NAME named as the user wrote it (not its hidden staging name).
        if quantize != "none":
            raise ExportError("--quantize is for --format litert")
        if batching is not None and token_ids_only:
            raise ExportError("--batching goes with the text signatures, not --token-ids-only")
        version, path = layout.resolve_version(output, version)
        atomic.check_writable_directory(output, "--output")
    files = source.tokenizer_files(spm_model)
    spm_model = files.spm_model
    if spm_model is None:
        raise ExportError(f"{checkpoint} {MISSING_TOKENIZER}; pass --spm-model")
    _check_tokenizer_json(files, source.task_record, token_ids_only)
    if format == "savedmodel":
        warmup.require_serving_api()
    # The one source of the task's settings (export may set the span windows).
    record = span_windows.with_windowing(source.task_record, doc_stride, max_windows)
    if answers is not None:
        record = span_windows.with_answer_options(record, answers, _answer_flags(answers))
    dtype = serving_precision(precision, record.precision)
    model = source.load()
    limit = model.config.max_position_embeddings
    if seq_length is None:
        seq_length = record.seq_length or model.config.default_seq_length()
    check_sequence_length(seq_length, limit, where=f"--seq-length, checkpoint {checkpoint}")
    preprocessor = files.preprocessor(seq_length)
    if preprocessor.tokenizer.vocab_size != model.config.vocab_size:
        raise ExportError(f"{spm_model} has {preprocessor.tokenizer.vocab_size} pieces but the "
                          f"model's vocab_size is {model.config.vocab_size}")
    if format == "litert":
        litert.write_litert(model, preprocessor.tokenizer, record, output, task or model.task,
                            seq_length, quantize)
        return output
    module = build_module(served_model(model, dtype, branches), preprocessor, task, record,
                          pad_multiple, batching)
    staging = ""
    try:
        with layout.staged_directory(path) as staging:
            save_module(module, staging, os.path.basename(os.path.normpath(output)),
                        token_ids_only)
            if record.doc_stride is not None and (task or model.task) == record.task:
                # What it serves with: the settings a client or a later reader can check.
                record.at_seq_length(seq_length).write(os.path.join(staging, warmup.WARMUP_DIR))
            needed = custom_ops(staging)
            record_of_export = provenance.provenance(
                record, source_name or os.path.abspath(checkpoint), model, needed,
                _versions(), task or model.task, seq_length, dtype, files.kind,
                batching.as_record() if batching is not None else None, branches)
            provenance.write_provenance(staging, record_of_export)
    except (OSError, tf.errors.OpError) as e:
        # A full disk or a permission, named by the version and not by its hidden staging
        # directory (removed, with any BASE/NAME this export created).
        reason = (e.strerror if isinstance(e, OSError) and e.strerror
                  else str(getattr(e, "message", e)).strip().splitlines()[0])
        reason = reason.replace(staging, path) if staging else reason
        raise ExportError(f"cannot write {path}: {reason}; nothing was written") from None
    try:
        layout.write_batching_parameters(output)
    except OSError as e:
        raise ExportError(f"wrote {path} but cannot write "
                          f"{os.path.join(output, layout.BATCHING_FILE)}: {e.strerror}") from None
    logger.info("exported %s (%s, seq_length %d, %s) to %s", checkpoint, task or model.task,
                seq_length, dtype, path)
    oldest = server_releases.oldest_release(needed, dtype)
    logger.info("the server needs these ops beyond core TensorFlow: %s; the oldest "
                "tensorflow/serving with them: %s (exported with TensorFlow %s; image %s)",
                ", ".join(needed) or "none",
                oldest or "none: no release links " + ", ".join(
                    server_releases.unlinked_ops(needed)),
                tf_version(), server_releases.image(server_releases.NEWEST_RELEASE))
    return path


def _versions() -> dict[str, str]:
    """The versions that made an export (its provenance record)."""
    return {"albert_tf": albert_tf.__version__, "tensorflow": tf_version(),
            "tensorflow_text": importlib.metadata.version("tensorflow-text"),
            "keras": keras.__version__}


def _check_litert_options(output: str, version, token_ids_only: bool, precision: str,
                          quantize: str) -> None:
    """Refuses what a .tflite export cannot honour, and an output it must not overwrite."""
    if quantize not in QUANTIZE:
        raise ExportError(f"--quantize {quantize!r}: expected one of {', '.join(QUANTIZE)}")
    for given, flag in ((version is not None, "--version"), (token_ids_only, "--token-ids-only"),
                        (precision == "bfloat16", "--precision bfloat16")):
        if given:
            raise ExportError(f"{flag} is for SavedModels; a .tflite file is one version, always "
                              "has a token_ids signature, and is made smaller by --quantize")
    if os.path.lexists(output):
        raise ExportError(f"--output {output} exists; a .tflite export never replaces a file")
    parent = os.path.dirname(os.path.abspath(output))
    if not os.path.isdir(parent):
        raise ExportError(f"--output {output}: no such directory {parent}")
    atomic.check_writable_directory(parent, "--output's directory")


def tf_version() -> str:

    return tf.__version__


def _batching(args) -> Batching | None:
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


def _answer_flags(answers: QaOptions) -> tuple[str, ...]:
    """The export flags `answers` sets (what a refusal names)."""
    flags = {"--top-k": answers.top_k is not None and answers.top_k != 1,
             "--max-answer-len": answers.max_answer_len is not None,
             "--handle-impossible-answer": answers.handle_impossible_answer is not None}
    return tuple(flag for flag, given in flags.items() if given)


def run_command(args: argparse.Namespace) -> int:
    """`albert-tf export` with its parsed arguments (`export_command.parser`)."""
    cli.setup_logging()
    checkpoint = resolve_checkpoint(args.checkpoint)  # a hub handle or released name too
    if not os.path.lexists(checkpoint):
        raise ExportError(f"--checkpoint {checkpoint}: no such directory"
                          f"{not_found_hint(checkpoint)}")
    if not os.path.isdir(checkpoint):
        raise ExportError(f"--checkpoint {checkpoint} is a file; give the checkpoint's "
                          "directory")
    path = export(checkpoint, args.output, args.version, args.task, args.seq_length,
                  args.spm_model, token_ids_only=args.token_ids_only, precision=args.precision,
                  format=args.format, quantize=args.quantize, batching=_batching(args),
                  doc_stride=args.doc_stride, max_windows=args.max_windows,
                  branches=args.branches,
                  answers=QaOptions(top_k=args.top_k, max_answer_len=args.max_answer_len,
                                    handle_impossible_answer=args.handle_impossible_answer))
    print(path)
    return 0


@cli.command("export")
def main(argv: Sequence[str] | None = None) -> int:
    return run_command(export_command.parse(sys.argv[1:] if argv is None else argv))


if __name__ == "__main__":
    sys.exit(main())
