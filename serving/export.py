"""`albert-tf export`: a checkpoint -> BASE/NAME/VERSION/, a SavedModel TF Serving loads as is.

The SavedModel's signatures take raw text (see `signatures/`: `tasks.py`, `span.py`),
tokenize it in the graph with the checkpoint's own SentencePiece model (embedded
in the graph, so nothing is read from this machine at serve time), and carry
`assets.extra/tf_serving_warmup_requests`. Versions are written atomically: a
hidden staging directory is renamed into place when complete.

With `--format litert` it writes one .tflite file instead (`litert/`): raw text in,
LiteRT builtins plus tensorflow-text's FastSentencepieceTokenize, checked against the
Keras model before it is kept.

`export(...)` and `run_command(args)` read the request into one validated `ExportPlan`
(`export_plan.py`: every refusal, before any weight is read); `build(plan)` writes it.

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
from collections.abc import Sequence

import keras
import tensorflow as tf

import albert_tf
from albert_tf import precisions
from albert_tf.infra import cli
from albert_tf.span_answers import QaOptions

from . import export_command, export_plan, layout, provenance, server_releases, warmup
from .export_plan import ExportPlan
from .litert import convert as litert
from .modules import (  # noqa: F401 - SERVING_MODULES, TASKS: export's public names too
    SERVING_MODULES,
    TASKS,
    ExportError,
    build_module,
    custom_ops,
    save_module,
    served_model,
)
from .options import Batching
from .signatures.base import PAD_MULTIPLE

logger = logging.getLogger(__name__)


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

    with export_plan.source_directory(checkpoint) as (directory, in_memory):
        request = export_plan.ExportRequest(
            checkpoint=directory, output=output, version=version, task=task,
            seq_length=seq_length, spm_model=spm_model, pad_multiple=pad_multiple,
            token_ids_only=token_ids_only, precision=precision, format=format,
            quantize=quantize, batching=batching, doc_stride=doc_stride,
            max_windows=max_windows, source_name=source_name or in_memory, branches=branches,
            answers=answers)
        plan = export_plan.plan(request)
        return build(plan)


def build(plan: ExportPlan) -> str:
    """Writes what `plan` says (`export_plan.plan`); returns the path written."""
    model = plan.source.load()
    if plan.request.format == "litert":
        return _write_litert(plan, model)
    return _write_savedmodel(plan, model)


def _write_litert(plan: ExportPlan, model) -> str:
    """The .tflite file, checked against the model before it is kept (`litert.convert`)."""
    litert.write_litert(model, plan.preprocessor.tokenizer, plan.record, plan.path, plan.task,
                        plan.seq_length, plan.request.quantize)
    return plan.path


def _write_savedmodel(plan: ExportPlan, model) -> str:
    """BASE/NAME/VERSION, and BASE/NAME's batching parameters (written once, then kept)."""
    asked = plan.request
    served = served_model(model, plan.dtype, asked.branches)
    module = build_module(served, plan.preprocessor, plan.task, plan.record, asked.pad_multiple,
                          asked.batching)
    needed = _write_version(plan, model, module)
    try:
        layout.write_batching_parameters(asked.output)
    except OSError as e:
        raise ExportError(f"wrote {plan.path} but cannot write "
                          f"{os.path.join(asked.output, layout.BATCHING_FILE)}: "
                          f"{e.strerror}") from None
    _log_export(plan, needed)
    return plan.path


def _write_version(plan: ExportPlan, model, module) -> list[str]:
    """Writes BASE/NAME/VERSION (staged, then renamed): the SavedModel, the span windows it
    serves with, its provenance record; returns the custom ops it needs."""
    asked, staging = plan.request, ""
    try:
        with layout.staged_directory(plan.path) as staging:
            save_module(module, staging, os.path.basename(os.path.normpath(asked.output)),
                        asked.token_ids_only)
            if plan.records_windows:
                # What it serves with: the settings a client or a later reader can check.
                plan.record.at_seq_length(plan.seq_length).write(
                    os.path.join(staging, warmup.WARMUP_DIR))
            needed = custom_ops(staging)
            record_of_export = provenance.provenance(
                plan.record, plan.source_name, model, needed, _versions(), plan.task,
                plan.seq_length, plan.dtype, plan.tokenizer_kind,
                asked.batching.as_record() if asked.batching is not None else None,
                asked.branches)
            provenance.write_provenance(staging, record_of_export)
    except (OSError, tf.errors.OpError) as e:
        # A full disk or a permission, named by the version and not by its hidden staging
        # directory (removed, with any BASE/NAME this export created).
        reason = (e.strerror if isinstance(e, OSError) and e.strerror
                  else str(getattr(e, "message", e)).strip().splitlines()[0])
        reason = reason.replace(staging, plan.path) if staging else reason
        raise ExportError(f"cannot write {plan.path}: {reason}; nothing was written") from None
    return needed


def _log_export(plan: ExportPlan, needed: list[str]) -> None:
    """What was exported, and the oldest server that runs it."""
    logger.info("exported %s (%s, seq_length %d, %s) to %s", plan.source.path, plan.task,
                plan.seq_length, plan.dtype, plan.path)
    oldest = server_releases.oldest_release(needed, plan.dtype)
    logger.info("the server needs these ops beyond core TensorFlow: %s; the oldest "
                "tensorflow/serving with them: %s (exported with TensorFlow %s; image %s)",
                ", ".join(needed) or "none",
                oldest or "none: no release links " + ", ".join(
                    server_releases.unlinked_ops(needed)),
                tf_version(), server_releases.image(server_releases.NEWEST_RELEASE))


def _versions() -> dict[str, str]:
    """The versions that made an export (its provenance record)."""
    return {"albert_tf": albert_tf.__version__, "tensorflow": tf_version(),
            "tensorflow_text": importlib.metadata.version("tensorflow-text"),
            "keras": keras.__version__}


def tf_version() -> str:

    return tf.__version__


def run_command(args: argparse.Namespace) -> int:
    """`albert-tf export` with its parsed arguments (`export_command.parser`)."""
    cli.setup_logging()
    plan = export_plan.from_args(args)
    print(build(plan))
    return 0


@cli.command("export")
def main(argv: Sequence[str] | None = None) -> int:
    return run_command(export_command.parse(sys.argv[1:] if argv is None else argv))


if __name__ == "__main__":
    sys.exit(main())
