"""Monitoring and step-exact checkpoints for `albert-tf pretrain`.

* `PretrainProgress`: a Keras callback that adds the learning rate, examples/s and
  tokens/s to the logs (the progress bar shows them), writes TensorBoard scalars,
  checkpoints at the end of every "epoch" (= `checkpoint_every` steps) and stops
  at `train_steps`.
* `Checkpoints`: model + optimizer + step in a `tf.train.CheckpointManager`.
* `check_resume`: a resumed run against the run_config.json of the run it continues
  (which fields may change: `RESUME_FIXED`, docs/pretraining.md).

TensorBoard scalars go through `albert_tf.training.runtime.tensorboard.write_scalars`, the
writer every training job shares.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import keras
import tensorflow as tf

from albert_tf import AlbertConfig
from albert_tf.errors import UsageError, UserError
from albert_tf.infra import cli, textio

from ..runtime import layout as run_layout
from ..runtime.tensorboard import write_scalars

logger = logging.getLogger(__name__)

RUN_CONFIG_FILE = "run_config.json"
CHECKPOINT_NAME = "ckpt"  # the pretraining checkpoints are ckpt-STEP.{index,data-*}
# The run's directory: RUN_CONFIG_FILE marks it; these are what the run writes beside it.
RUN_ENTRIES = (run_layout.CHECKPOINTS_DIR, run_layout.TENSORBOARD_DIR, run_layout.MODEL_DIR)
# What a resumed run must share with the run it continues, by run_config.json's names:
# the data and its order (the offset counts batches of global_batch_size), the
# optimizer and the shape of its schedule, and (resolved, under "resolved") the model
# as albert.FIELD, the sequence shapes, the precision, the sentence-pair head and the
# training files themselves (train_files: each file's size and a hash of its ends).
# Everything else (train_steps, checkpoint_every, keep_checkpoints, eval_data,
# eval_steps, log_every, strategy, steps_per_execution, jit_compile, deterministic)
# may change on resume.
RESUME_FIXED = ("train_data", "spm_model", "global_batch_size", "seed", "shuffle_buffer",
                "dynamic_masking",
                "data_resume", "optimizer", "learning_rate", "warmup_steps", "poly_power",
                "weight_decay", "clipnorm")
RESUME_FIXED_RESOLVED = ("seq_length", "max_predictions", "precision", "sentence_pair_loss",
                         "train_files")


class DivergedError(UserError):
    """Training reached a loss that is not finite: one line, exit status 1, nothing exported."""

    exit_status = 1


class PretrainProgress(keras.callbacks.Callback):
    """Throughput, learning rate, TensorBoard, checkpoints and the stop at `train_steps`.

    A loss that is not finite (NaN, inf) stops training at once, and no checkpoint is
    written after it: `diverged` holds (step, loss) for the run to refuse to export.

    `step` counts the batches trained, earlier runs included; Keras calls
    `on_train_batch_end` once per `steps_per_execution` steps.

    Args:
        start_step: the step the run (re)starts from.
        train_steps: stop when `step` reaches this.
        examples_per_step, tokens_per_step: the global batch, and batch x seq_length.
        log_every: steps between two TensorBoard points.
        tensorboard_dir: where `train/` and `eval/` event files go; None: none.
        save: called with the step at the end of every epoch (the checkpoint).
    """

    def __init__(self, start_step: int, train_steps: int, examples_per_step: int,
                 tokens_per_step: int, log_every: int, tensorboard_dir: str | None,
                 save: Callable[[int], None]):
        super().__init__()
        self.start_step = self.step = start_step
        self.train_steps = train_steps
        self.examples_per_step, self.tokens_per_step = examples_per_step, tokens_per_step
        self.log_every, self.save = log_every, save
        self.writers = None
        if tensorboard_dir:
            self.writers = {kind: tf.summary.create_file_writer(
                os.path.join(tensorboard_dir, kind)) for kind in ("train", "eval")}
        self.start_time = self.last_time = time.perf_counter()
        self.first_end = None  # (time, step) after the first execution (tracing, compiling)
        self.diverged: tuple[int, float] | None = None

    def on_train_begin(self, logs=None):
        self.start_time = self.last_time = time.perf_counter()

    def on_train_batch_end(self, batch, logs=None):
        steps = self.model.steps_per_execution
        now = time.perf_counter()
        elapsed, self.last_time = max(now - self.last_time, 1e-9), now
        self.step += steps
        if self.first_end is None:
            self.first_end = (now, self.step)
        logs["learning_rate"] = float(keras.ops.convert_to_numpy(
            self.model.optimizer.learning_rate))
        logs["examples_per_sec"] = steps * self.examples_per_step / elapsed
        logs["tokens_per_sec"] = steps * self.tokens_per_step / elapsed
        if self.writers and self.step % self.log_every < steps:
            write_scalars(self.writers["train"], _numbers(logs), self.step)
        if self.step >= self.train_steps:
            self.model.stop_training = True
        loss = logs.get("loss")
        if loss is not None and not math.isfinite(float(loss)):
            self.diverged = (self.step, float(loss))
            self.model.stop_training = True
            logger.error("step %d: the loss is %s; stopping without a checkpoint", self.step,
                         float(loss))

    def on_epoch_end(self, epoch, logs=None):
        if self.diverged is not None:  # the weights are not finite: nothing to keep
            return
        evaluation = {k[len("val_"):]: v for k, v in (logs or {}).items()
                      if k.startswith("val_")}
        if self.writers and evaluation:
            write_scalars(self.writers["eval"], _numbers(evaluation), self.step)
        self.save(self.step)

    def on_train_end(self, logs=None):
        for writer in (self.writers or {}).values():
            writer.flush()

    def throughput(self) -> float:
        """Examples per second over this run's steps (compilation included)."""
        elapsed = time.perf_counter() - self.start_time
        return (self.step - self.start_step) * self.examples_per_step / max(elapsed, 1e-9)

    def steady_throughput(self) -> float | None:
        """Examples per second after the first execution (no tracing); None before a second."""
        if self.first_end is None or self.step == self.first_end[1]:
            return None
        elapsed = time.perf_counter() - self.first_end[0]
        return (self.step - self.first_end[1]) * self.examples_per_step / max(elapsed, 1e-9)


def _numbers(logs: Mapping) -> dict[str, float]:
    out = {}
    for name, value in logs.items():
        try:
            out[name] = float(value)
        except (TypeError, ValueError):
            continue
    return out


class Checkpoints:
    """Model + optimizer (slots, iterations) + step, kept N deep under `directory`.

    Under MultiWorkerMirroredStrategy every worker saves (TF's recipe for
    collective variables), but only the chief into `directory`; the others write
    to a local scratch directory (one checkpoint deep) that `close` deletes.
    """

    def __init__(self, model: keras.Model, directory: str, keep: int, chief: bool):
        self.directory = directory
        self.step = tf.Variable(0, dtype=tf.int64, trainable=False, name="step")
        self.checkpoint = tf.train.Checkpoint(model=model, optimizer=model.optimizer,
                                              step=self.step)
        self.scratch = None if chief else tempfile.mkdtemp(prefix="albert-ckpt-")
        if chief:
            self._remove_killed_saves()
        self.manager = tf.train.CheckpointManager(
            self.checkpoint, self.scratch or directory, max_to_keep=keep if chief else 1,
            checkpoint_name=CHECKPOINT_NAME)

    def _remove_killed_saves(self) -> None:
        """Removes the temporary directories (`ckpt-N_temp`) of saves a killed run
        left; the output directory is claimed by this run, so none is being written."""
        for path in tf.io.gfile.glob(os.path.join(self.directory, f"{CHECKPOINT_NAME}-*_temp")):
            logger.info("removing %s, left by a run killed while saving", path)
            tf.io.gfile.rmtree(path)

    def restore(self) -> int:
        """Restores the newest checkpoint in `directory`; returns its step (0: none).

        Raises:
          UserError: the checkpoint does not fit this run's model or optimizer (one
            line naming it; e.g. a shape change that --allow-change let through).
        """
        latest = tf.train.latest_checkpoint(self.directory)
        if latest is None:
            return 0
        try:
            self.checkpoint.restore(latest).assert_existing_objects_matched()
        except (ValueError, AssertionError, tf.errors.OpError) as e:
            reason = (str(e).strip().splitlines() or [type(e).__name__])[0]
            raise UserError(f"{latest}: does not fit this run's model or optimizer ({reason}); "
                            f"use a new output_dir") from None
        logger.info("resumed from %s at step %d", latest, int(self.step))
        return int(self.step)

    def save(self, step: int) -> None:
        """Writes checkpoint `ckpt-STEP` whole: the manager writes it under a temporary
        name and renames it, and a SIGTERM meanwhile waits until it is done (an interrupt
        inside TensorFlow's Python half-way leaves the temporary directory behind)."""
        self.step.assign(step)
        with cli.termination_deferred():
            path = self.manager.save(checkpoint_number=step)
        if not self.scratch:
            logger.info("saved %s", path)

    def close(self) -> None:
        """Removes a non-chief worker's scratch directory."""
        if self.scratch:
            shutil.rmtree(self.scratch, ignore_errors=True)


# ------------------------------------------------------------------ resume
def resume_settings(record: Mapping[str, Any]) -> dict[str, Any]:
    """The settings of a run_config.json record that a resume compares, by name:
    `RESUME_FIXED`, the resolved `RESUME_FIXED_RESOLVED` and albert.FIELD for every
    field of the resolved model config (a name an older file lacks is left out)."""
    resolved = record.get("resolved", {})
    settings = {name: record[name] for name in RESUME_FIXED if name in record}
    settings.update({name: resolved[name] for name in RESUME_FIXED_RESOLVED if name in resolved})
    settings.update({f"albert.{name}": value
                     for name, value in resolved.get("albert_config", {}).items()})
    return settings


def check_allowed_changes(names: Iterable[str]) -> list[str]:
    """The --allow-change names, each one a setting a resume compares (UsageError if not)."""
    known = [*RESUME_FIXED, *RESUME_FIXED_RESOLVED,
             *(f"albert.{f.name}" for f in dataclasses.fields(AlbertConfig))]
    names = list(names)
    for name in names:
        if name not in known:
            raise UsageError(f"--allow-change {name}: not a setting that a resume compares "
                             f"({', '.join(known[:len(RESUME_FIXED) + len(RESUME_FIXED_RESOLVED)])} "
                             "or albert.FIELD); the others may change without it")
    return names


def read_run_config(output_dir: str) -> dict | None:
    """The run_config.json of the run in `output_dir` (None: there is none), read through
    the one size rule (`textio.read_json_object`: a regular file of at most
    MAX_FILE_BYTES holding a JSON object), else one line naming the file.
    """
    path = os.path.join(output_dir, RUN_CONFIG_FILE)
    repair = "it records the run this one would resume: repair it or use a new output_dir"
    if "://" not in path:
        if not os.path.lexists(path):
            return None
        try:
            return textio.read_json_object(path)
        except UserError as e:
            raise UserError(f"{e}; {repair}") from None
    if not tf.io.gfile.exists(path):
        return None
    try:
        if tf.io.gfile.stat(path).length > textio.MAX_FILE_BYTES:
            raise UserError(f"{path}: larger than the {textio.MAX_FILE_BYTES:,} bytes a file "
                            f"read whole may hold; {repair}")
        with tf.io.gfile.GFile(path) as f:
            record = json.load(f)
    except (json.JSONDecodeError, tf.errors.OpError, UnicodeDecodeError) as e:
        raise UserError(f"{path}: unreadable ({e}); {repair}") from None
    if not isinstance(record, dict):
        raise UserError(f"{path}: expected a JSON object, not {textio.json_type(record)}; "
                        f"{repair}")
    return record


def check_resume(output_dir: str, record: Mapping[str, Any], allow_changes: Iterable[str] = ()
                 ) -> None:
    """Refuses to resume the run in `output_dir` with other model, data or optimizer
    settings than its run_config.json holds, naming each field (old -> new), unless
    `allow_changes` names it. Call it only when there is a checkpoint to resume.

    Args:
      output_dir: the run's directory (its run_config.json).
      record: what this run would write to run_config.json.
      allow_changes: setting names (as in the message) allowed to differ.
    """
    path = os.path.join(output_dir, RUN_CONFIG_FILE)
    previous = read_run_config(output_dir)
    if previous is None:
        logger.warning("%s: not found; resuming without comparing the settings", path)
        return
    old, new = resume_settings(previous), resume_settings(record)
    changed = [name for name in new if name in old and old[name] != new[name]]
    allowed = set(allow_changes)
    refused = [name for name in changed if name not in allowed]
    if refused:
        fields = ", ".join(_change(name, old[name], new[name]) for name in refused)
        raise UserError(f"{output_dir} holds a run with other settings ({path}): {fields}; "
                        f"resume it with its own settings, use a new output_dir, or pass "
                        f"--allow-change {','.join(refused)} to continue with the new ones")
    for name in changed:
        logger.warning("resuming with %s (--allow-change)", _change(name, old[name], new[name]))


def _change(name: str, old: Any, new: Any) -> str:
    """"name OLD -> NEW"; for a mapping (train_files), only the entries that differ."""
    if not (isinstance(old, dict) and isinstance(new, dict)):
        return f"{name} {json.dumps(old)} -> {json.dumps(new)}"
    keys = [k for k in sorted(set(old) | set(new)) if old.get(k) != new.get(k)]
    shown = "; ".join(f"{k} {old.get(k, 'absent')} -> {new.get(k, 'absent')}" for k in keys[:3])
    more = f"; and {len(keys) - 3} more" if len(keys) > 3 else ""
    return f"{name} ({shown}{more})"
