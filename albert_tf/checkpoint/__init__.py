"""Checkpoints: the weights people already have, and albert-tf's own format.

`load_checkpoint(path)` recognises three formats:

* the original google-research ALBERT TF1 checkpoints: a directory with
  `albert_config.json` and `model.ckpt-*` (or a checkpoint prefix); the TF-Hub
  `module/` prefix, optimizer slots (`adam_m`, `adam_v`) and `global_step` are
  ignored. Reading them needs TensorFlow (imported only then, by
  `albert_tf.checkpoint.readers`, which reads all foreign files).
* Hugging Face ALBERT directories: `config.json` + `model.safetensors` (read with
  `safetensors.numpy`, no torch) or `pytorch_model.bin` (needs torch).
* ours: `albert_config.json` + `model.weights.h5` + `albert_task.json`
  (+ `spiece.model`), written by `save_checkpoint`.

TF1 and Hugging Face weights are placed through NAME_TABLE, one explicit row per
tensor. Whatever cannot be placed (missing, unexpected or mis-shaped tensors) is
reported in one `CheckpointError` that lists every problem.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import uuid
from typing import Any

import numpy as np

from albert_tf.checkpoint.heads import hf_task_record, tf1_task_record
from albert_tf.checkpoint.names import NAME_TABLE, POOLER, place
from albert_tf.checkpoint.readers import (
    HF_CONFIG_FILE,
    HF_WEIGHT_FILES,
    CheckpointError,
    TensorSource,
    h5_shapes,
    read_hf,
    read_tf1,
    tf1_prefix,
)
from albert_tf.checkpoint.tokenizer_files import SPM_FILE
from albert_tf.config import AlbertConfig
from albert_tf.checkpoint.task_record import TASK_FILE, TaskRecord, TaskRecordError

__all__ = ["load_checkpoint", "save_checkpoint", "detect_format", "read_task_info",
           "task_record_of", "task_record", "task_model_kwargs", "CheckpointError",
           "NAME_TABLE"]

logger = logging.getLogger(__name__)

CONFIG_FILE = "albert_config.json"
WEIGHTS_FILE = "model.weights.h5"


# ----------------------------------------------------------------------------------
# Formats and the public API.
# ----------------------------------------------------------------------------------
def detect_format(path: str | os.PathLike) -> str:
    """Which checkpoint `path` holds: "albert_tf", "hf" or "tf1"; CheckpointError if none."""
    path = os.fspath(path)
    if os.path.isdir(path) and os.path.isfile(os.path.join(path, WEIGHTS_FILE)):
        return "albert_tf"
    if os.path.isdir(path) and os.path.isfile(os.path.join(path, HF_CONFIG_FILE)) and any(
            os.path.isfile(os.path.join(path, f)) for f in HF_WEIGHT_FILES):
        return "hf"
    if tf1_prefix(path) is not None:
        return "tf1"
    if not os.path.exists(path) and not os.path.exists(path + ".index"):
        raise CheckpointError(f"{path}: no such file or directory")
    raise CheckpointError(
        f"{path}: not a checkpoint: expected {WEIGHTS_FILE} (albert-tf), {HF_CONFIG_FILE} + "
        f"{' or '.join(HF_WEIGHT_FILES)} (Hugging Face), or model.ckpt-*.index (TF1)")


def read_config(path: str | os.PathLike) -> AlbertConfig:
    """The model config of any checkpoint `load_checkpoint` reads, without its weights."""
    path = os.fspath(path)
    kind = detect_format(path)
    if kind == "albert_tf":
        return AlbertConfig.from_json_file(os.path.join(path, CONFIG_FILE))
    return AlbertConfig.from_json_file(_foreign_config_path(path, kind))


def check_seq_length(checkpoint: str | os.PathLike, seq_length: int) -> None:
    """Raises ConfigError unless `seq_length` fits the position table of `checkpoint`.

    Cheap (reads the config only): call it before reading data or building models.
    """
    read_config(checkpoint).check_sequence_length(seq_length,
                                                  where=f"checkpoint {os.fspath(checkpoint)}")


def _read_config(path: str) -> AlbertConfig:
    if not os.path.isfile(path):
        raise CheckpointError(f"{path}: not found (the checkpoint's model config)")
    config = AlbertConfig.from_json_file(path)
    if config.sharing != "all":
        raise CheckpointError(
            f"{path}: sharing={config.sharing!r}, but TF1 and Hugging Face checkpoints hold "
            f"weights per group shared across depth, i.e. sharing='all'")
    return config


def _foreign_config_path(path: str, kind: str) -> str:
    prefix = tf1_prefix(path) if kind == "tf1" else None
    return (os.path.join(os.path.dirname(prefix), CONFIG_FILE) if prefix
            else os.path.join(path, HF_CONFIG_FILE))


def _foreign_source(path: str, kind: str) -> TensorSource:
    return read_tf1(tf1_prefix(path)) if kind == "tf1" else read_hf(path)


def _foreign_record(path: str, kind: str, source: TensorSource, task: str | None) -> dict:
    if kind == "tf1":
        return tf1_task_record(source.path, source.shapes, task)
    return hf_task_record(path, source.shapes, task)


def task_model_kwargs(record: dict[str, Any]) -> dict[str, Any]:
    """The constructor arguments a task record gives its `TASK_MODELS` class."""
    task = record["task"]
    if task in ("classification", "token_classification"):
        return {"num_classes": record.get("num_classes")}
    if task == "span":
        return {"answerability": bool(record.get("answerability", False))}
    if task == "span_beam":
        return {k: record[k] for k in ("start_n_top", "end_n_top") if k in record}
    return {}


def _load_foreign(path: str, kind: str, task: str | None = None):
    from albert_tf.models import TASK_MODELS

    config_path = _foreign_config_path(path, kind)
    config = _read_config(config_path)  # first: a bad config fails before any tensor is read
    source = _foreign_source(path, kind)
    record = _foreign_record(path, kind, source, task)
    model = TASK_MODELS[record["task"]](config, **task_model_kwargs(record))
    for part in place(model, source, config_path):
        logger.warning("%s has no %s weights; %s keeps its random initialisation",
                       source.path, part, "the pooler (unused by this model)"
                       if part == POOLER else "that head")
    logger.info("loaded %d tensors from %s (%s, %s)", len(source.shapes), source.path, kind,
                record["task"])
    return model


def task_record(path: str | os.PathLike, task: str | None = None) -> TaskRecord:
    """The validated `TaskRecord` of any checkpoint.

    Ours: its albert_task.json (pretraining if absent). Hugging Face and TF1:
    derived from the config and tensor names (`albert_tf.checkpoint.heads`); `task`
    names the task where a TF1 checkpoint's variables fit two of the original scripts.
    """
    path = os.fspath(path)
    try:
        kind = detect_format(path)
    except CheckpointError:  # no weights (yet): albert_task.json alone still answers
        kind = "albert_tf"
    if kind == "albert_tf":
        return TaskRecord.read(path)
    record = _foreign_record(path, kind, _foreign_source(path, kind), task)
    return TaskRecord.from_dict(record, source=path)


def read_task_info(directory: str | os.PathLike, task: str | None = None) -> dict[str, Any]:
    """`task_record(directory, task).to_dict()`: the checkpoint's task fields as a dict,
    defaults filled in for older files (pretraining if the file is absent)."""
    return task_record(directory, task).to_dict()


def _ensure_built(model) -> None:
    """Calls `model` once on a dummy batch if Keras does not consider it built yet.

    The models create all their weights in __init__; Keras' save/load_weights still
    insist on the `built` flag, which a first call sets.
    """
    if model.built:
        return
    shape = (1, 1, 2) if model.task == "multiple_choice" else (1, 2)
    from albert_tf.inputs import INPUT_MASK, INPUT_TYPE_IDS, INPUT_WORD_IDS

    inputs = {name: np.zeros(shape, np.int32) for name in (INPUT_WORD_IDS, INPUT_TYPE_IDS)}
    inputs[INPUT_MASK] = np.ones(shape, np.int32)
    if model.task in ("pretraining", "masked_lm"):
        inputs["masked_lm_positions"] = np.zeros((1, 1), np.int32)
    model(inputs)


def _load_ours(directory: str):
    from albert_tf.models import TASK_MODELS

    config = AlbertConfig.from_json_file(os.path.join(directory, CONFIG_FILE))
    record = TaskRecord.read(directory)
    task = record.task
    if task not in TASK_MODELS:
        raise CheckpointError(f"{os.path.join(directory, TASK_FILE)}: task={task!r} is not one "
                              f"of {', '.join(TASK_MODELS)}")
    model = TASK_MODELS[task](config, **task_model_kwargs(record.to_dict()))
    _ensure_built(model)
    weights = os.path.join(directory, WEIGHTS_FILE)
    keras_error = None
    try:
        model.load_weights(weights)
    except (ValueError, OSError) as e:
        keras_error = e
    # Keras ignores tensors the model has no place for; the count catches them.
    if keras_error is not None or len(h5_shapes(weights)) != len(model.weights):
        problems = _weights_file_problems(model, weights) or [f"keras: {keras_error}"]
        raise CheckpointError(
            f"{weights}: {len(problems)} tensor(s) do not fit the {task} model of "
            f"{CONFIG_FILE} and {TASK_FILE}:\n  " + "\n  ".join(problems))
    return model


def _weights_file_problems(model, weights: str) -> list[str]:
    """Missing, mis-shaped and unexpected datasets of `weights`, against what Keras
    writes for `model` (the layout is Keras'; it is the reference)."""
    with tempfile.TemporaryDirectory() as tmp:
        model.save_weights(os.path.join(tmp, WEIGHTS_FILE))
        expected = h5_shapes(os.path.join(tmp, WEIGHTS_FILE))
    found = h5_shapes(weights)
    problems = [f"missing: {n}" for n in expected if n not in found]
    problems += [f"mis-shaped: {n}: {found[n]} in the file, model needs {shape}"
                 for n, shape in expected.items() if n in found and found[n] != shape]
    problems += [f"unexpected: {n}" for n in found if n not in expected]
    return problems


def _save_model_weights(model, path: str) -> None:
    """`model.save_weights` without the optimizer's state: a checkpoint holds the model
    (resumable training state lives in the training run's own checkpoints)."""
    from albert_tf import keras_compat

    optimizer = getattr(model, "optimizer", None)
    keras_compat.save_weights_only(model, path,
                                   objects_to_skip=[optimizer] if optimizer is not None else None)


def load_checkpoint(path: str | os.PathLike, task: str | None = None):
    """Reads a TF1, Hugging Face or albert-tf checkpoint into a model.

    Args:
      path: a TF1 checkpoint directory (albert_config.json + model.ckpt-*) or
        prefix, a Hugging Face ALBERT directory, or one of our directories.
      task: for a TF1 checkpoint whose variables fit two of the original scripts
        (`output_weights` [1, H]: "regression" or "multiple_choice"); elsewhere, if
        given, it must be the checkpoint's task (or "encoder").

    Returns:
      The task model of `albert_tf.models.TASK_MODELS` the checkpoint holds, with
      its head: for foreign checkpoints as `read_task_info` derives it (the HF
      architecture, or the original script from the variable names; a pretraining
      checkpoint gives an `AlbertPretrainer` whose absent heads keep their
      initialisation, with a warning); for ours, the one `albert_task.json` names.
      `read_task_info(path)` gives the matching task record (label names, ...).

    Raises:
      CheckpointError: unreadable files, or tensors that do not fit the config
        (every missing, unexpected and mis-shaped tensor listed at once).

    Example:
        >>> model = load_checkpoint("albert_base/")  # albert_config.json + model.ckpt-best
    """
    path = os.fspath(path)
    kind = detect_format(path)
    if kind != "albert_tf":
        return _load_foreign(path, kind, task)
    model = _load_ours(path)
    if task not in (None, "encoder", model.task):
        raise CheckpointError(f"{path}: holds a {model.task} model, not {task}")
    return model


def save_checkpoint(model, directory: str | os.PathLike, spm_model: str | None = None,
                    label_names: list[str] | None = None, do_lower_case: bool = True,
                    seq_length: int | None = None, extra_info: dict | None = None) -> str:
    """Writes `model` as albert_config.json + model.weights.h5 + albert_task.json (+ spiece.model).

    The files are written in a temporary directory next to `directory` and moved in
    only when complete, so a crash never leaves a partial checkpoint behind.
    albert_task.json is the model's `TaskRecord`, validated before anything is written.

    Args:
      model: an `AlbertPretrainer` or a fine-tuning model from `albert_tf.models`.
      directory: where to write (created if needed; our files in it are replaced).
      spm_model: the SentencePiece model to copy in as spiece.model.
      label_names: class names, one per class, for classification tasks.
      do_lower_case: whether the tokenizer lower-cases (recorded for serving).
      seq_length: the sequence length the model was fine-tuned with, if any.
      extra_info: more `TaskRecord` fields (e.g. a span model's "max_query_length"
        or SQuAD 2.0's tuned "no_answer_threshold"); they may not replace the
        fields above, and fields they leave out take `task_record`'s defaults.

    Returns:
      `directory`.

    Raises:
      TaskRecordError: a field that is unknown, invalid or does not apply to the task.
    """
    directory = os.path.abspath(os.fspath(directory))
    record = task_record_of(model, label_names=label_names, do_lower_case=do_lower_case,
                            seq_length=seq_length, extra_info=extra_info,
                            source=os.path.join(directory, TASK_FILE))
    if spm_model is not None and not os.path.isfile(spm_model):
        raise FileNotFoundError(f"SentencePiece model not found: {spm_model}")
    parent = os.path.dirname(directory)
    os.makedirs(parent, exist_ok=True)
    # A unique sibling (not mkdtemp, whose 0700 mode would survive the rename).
    tmp = os.path.join(parent, f".{os.path.basename(directory)}.tmp-{uuid.uuid4().hex}")
    os.makedirs(tmp)
    try:
        model.config.to_json_file(os.path.join(tmp, CONFIG_FILE))
        _ensure_built(model)
        _save_model_weights(model, os.path.join(tmp, WEIGHTS_FILE))
        if spm_model is not None:
            shutil.copyfile(spm_model, os.path.join(tmp, SPM_FILE))
        record.write(tmp)
        if not os.path.exists(directory):
            os.replace(tmp, directory)
            return directory
        for name in (WEIGHTS_FILE, CONFIG_FILE, SPM_FILE, TASK_FILE):  # file by file
            if os.path.exists(os.path.join(tmp, name)):
                os.replace(os.path.join(tmp, name), os.path.join(directory, name))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return directory


def task_record_of(model, label_names: list[str] | None = None, do_lower_case: bool = True,
                   seq_length: int | None = None, extra_info: dict | None = None,
                   source: str | None = None) -> TaskRecord:
    """The `TaskRecord` of `model` with these settings (what `save_checkpoint` writes).

    Raises:
      TaskRecordError: as `TaskRecord.create`; ValueError if `extra_info` repeats a
        field the model or the other arguments decide.
    """
    decided = {"task": model.task, "do_lower_case": bool(do_lower_case), "seq_length": seq_length,
               "precision": model.dtype_policy.name}
    if model.task in ("classification", "token_classification"):
        decided["num_classes"] = model.num_classes
        decided["label_names"] = list(label_names) if label_names is not None else None
    elif label_names is not None:
        raise TaskRecordError(f"label_names given for a {model.task} model")
    if model.task == "span":
        decided["answerability"] = bool(model.answerability)
    if model.task == "span_beam":
        decided.update(start_n_top=model.start_n_top, end_n_top=model.end_n_top)
    clashes = sorted(set(extra_info or {}) & (set(decided) | {"num_classes", "label_names"}))
    if clashes:
        raise ValueError(f"extra_info may not replace albert_task.json fields: {clashes}")
    fields = {k: v for k, v in decided.items() if k != "task"}
    return TaskRecord.create(model.task, source=source, **fields, **(extra_info or {}))
