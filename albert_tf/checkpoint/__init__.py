"""Checkpoints: the weights people already have, and albert-tf's own format.

`open_checkpoint(path, task=None)` is the one door: it detects the format once
(`formats.py`, the table of readers) and returns an `OpenedCheckpoint` whose
`.config`, `.task_record` and `.tokenizer` are read once, and whose `.load()` builds
the task model. The formats:

* the original google-research ALBERT TF1 checkpoints: a directory with
  `albert_config.json` and `model.ckpt-*` (or a checkpoint prefix); the TF-Hub
  `module/` prefix, optimizer slots (`adam_m`, `adam_v`) and `global_step` are
  ignored. Reading them needs TensorFlow (imported only then, by `readers.py`,
  which reads all foreign files).
* Hugging Face ALBERT directories: `config.json` + `model.safetensors` (read with
  `safetensors.numpy`, no torch) or `pytorch_model.bin` (needs torch).
* ours: `albert_config.json` + `model.weights.h5` + `albert_task.json`
  (+ `spiece.model`), written by `save_checkpoint` (`ours.py`).
* KerasHub presets (`kerashub.py`): `config.json` registered as
  `keras_hub>AlbertBackbone` + `model.weights.h5` (+ a task's `task.json`,
  `task.weights.h5`); read with h5py, keras-hub is not needed.
* TF Model Garden TF2 checkpoints (`model_garden.py`): `bert_model.ckpt-*` written by
  `tf.train.Checkpoint`, told from TF1 by its object graph and read through it, with
  `albert_config.json`; and TF-Hub SavedModels (`tfhub.py`): `saved_model.pb` +
  `variables/`, the config recovered from the SavedModel. Both need TensorFlow.

`albert-tf convert --to hf|kerashub` writes the Hugging Face and KerasHub formats
(`writers.py`), by the same name tables.

TF1 and Hugging Face weights are placed through NAME_TABLE (`names.py`), one
explicit row per tensor; their task record is derived from the config and the
tensor names (`heads.py`). Whatever cannot be placed (missing, unexpected or
mis-shaped tensors) is reported in one `CheckpointError` that lists every problem.

This package's modules never import it back: it imports them, one way.
"""

from __future__ import annotations

import os

from albert_tf.checkpoint.formats import FORMATS, detect_format, open_checkpoint
from albert_tf.checkpoint.names import NAME_TABLE
from albert_tf.checkpoint.opened import OpenedCheckpoint, task_model_kwargs
from albert_tf.checkpoint.ours import WEIGHTS_FILE, save_checkpoint, task_record_of
from albert_tf.checkpoint.readers import CONFIG_FILE, CheckpointError
from albert_tf.checkpoint.task_record import TASK_FILE, TaskRecord, TaskRecordError
from albert_tf.checkpoint.tokenizer_files import SPM_FILE, TokenizerFiles

__all__ = ["open_checkpoint", "OpenedCheckpoint", "load_checkpoint", "save_checkpoint",
           "task_record_of", "detect_format", "FORMATS", "task_model_kwargs",
           "CheckpointError", "NAME_TABLE", "TaskRecord", "TaskRecordError", "TokenizerFiles",
           "CONFIG_FILE", "WEIGHTS_FILE", "TASK_FILE", "SPM_FILE"]


def load_checkpoint(path: str | os.PathLike, task: str | None = None):
    """Reads a TF1, Hugging Face or albert-tf checkpoint into a model:
    `open_checkpoint(path, task).load()`.

    Args:
      path: a TF1 checkpoint directory (albert_config.json + model.ckpt-*) or
        prefix, a Hugging Face ALBERT directory, or one of our directories.
      task: for a TF1 checkpoint whose variables fit two of the original scripts
        (`output_weights` [1, H]: "regression" or "multiple_choice"); elsewhere, if
        given, it must be the checkpoint's task (or "encoder").

    Returns:
      The task model of `albert_tf.models.TASK_MODELS` the checkpoint holds, with
      its head: for foreign checkpoints as their task record derives it (the HF
      architecture, or the original script from the variable names; a pretraining
      checkpoint gives an `AlbertPretrainer` whose absent heads keep their
      initialisation, with a warning); for ours, the one `albert_task.json` names.
      `open_checkpoint(path).task_record` is the matching record (label names, ...).

    Raises:
      CheckpointError: unreadable files, or tensors that do not fit the config
        (every missing, unexpected and mis-shaped tensor listed at once).

    Example:
        >>> model = load_checkpoint("albert_base/")  # albert_config.json + model.ckpt-best
    """
    return open_checkpoint(path, task).load()
