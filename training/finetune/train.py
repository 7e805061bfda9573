"""The fine-tuning loop: `model.fit` with AdamW/LAMB, evaluation each epoch, best kept.

`finetune(task, source, config)` builds the task's model on the source
checkpoint's encoder inside the distribution strategy's scope, trains it with
warmup + linear decay, evaluates the task's official metric after every epoch,
keeps the best weights (written to the output directory each time they improve,
as a checkpoint `albert-tf export` reads), stops early after `patience`
evaluations without improvement, logs to TensorBoard (evaluations at the global step
ending their epoch), warns once when the training loss stays at ln(C) (`PlateauHint`),
writes the task's prediction files with the best weights and `eval_results.json`
(`results_file`: run_glue's flat `eval_*` keys, the eval loss among them).
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
import time
from collections.abc import Callable
from typing import Protocol

import keras
import numpy as np
import tensorflow as tf

from albert_tf import AlbertConfig, save_checkpoint
from albert_tf.checkpoint import OpenedCheckpoint, open_checkpoint
from albert_tf.checkpoint.ours import CHECKPOINT_FILES
from albert_tf.config import SHORT_SEQ_LENGTH
from albert_tf.errors import UserError
from albert_tf.infra import arguments, atomic
from albert_tf.infra.arguments import number_field
from albert_tf.inputs import INPUT_NAMES

from ..runtime import layout as run_layout
from ..runtime.distribute import is_chief, resolve_jit_compile
from ..runtime.fit_steps import (
    check_accumulation,
    check_replica_accumulation,
    install_step_functions,
)
from ..runtime.optimization import create_optimizer
from ..runtime.tensorboard import ScalarLogger, write_scalars
from . import metrics
from .bucketing import Encoded, check_buckets, default_buckets, make_dataset

logger = logging.getLogger(__name__)

RESULTS_FILE = "eval_results.json"
# What every fine-tuning run writes into its directory; each task adds its prediction files.
RUN_FILES = (*CHECKPOINT_FILES, run_layout.TENSORBOARD_DIR, RESULTS_FILE)

Predict = Callable[[Encoded], "dict[str, list[np.ndarray]] | list[np.ndarray]"]


class FinetuneJob(Protocol):
    """What `finetune` needs from a fine-tuning job: one family's data read and
    tokenized, its model and metric (`SequenceTask`, `SquadTask`, `RaceTask`,
    `NerTask`; `families.build_task` makes one). Not the task table's `Task`: the
    model it builds brings that entry's loss and metrics (`compile()`)."""

    name: str
    main_metric: str  # key of `evaluate`'s result; higher is better
    label_names: list[str] | None
    train: Encoded | None
    evals: dict[str, Encoded]

    def build_model(self, config: AlbertConfig, encoder=None) -> keras.Model: ...

    def evaluate(self, predict: Predict) -> dict[str, float]: ...

    def write_predictions(self, predict: Predict, output_dir: str) -> list[str]: ...

    # Optional: `checkpoint_info() -> dict`, more `TaskRecord` fields saved with the
    # best model (SquadTask: doc_stride, max_query_length, ..., the tuned
    # no_answer_threshold; RaceTask: max_qa_length), which `albert-tf export` reads.


@dataclasses.dataclass
class TrainConfig:
    """Fine-tuning hyperparameters.

    `train_steps` (when set) wins over `epochs`; evaluation happens once per
    pass over the training data (an "epoch"), at least once in all. The warmup
    is `warmup_steps`, or `warmup_proportion` of all steps when that is None.
    `buckets` are padded lengths for length bucketing (None: the default powers
    of two up to `seq_length`; [] pads every batch to `seq_length`).
    `gradient_accumulation_steps` N runs each batch of `batch_size` as N parts of
    batch_size / N, one after another, whose gradients make one update: the same
    training in less memory (`fit_steps`; steps, warmup and the schedule count updates).
    """

    output_dir: str
    # Ranges: checked by `arguments.check_numbers` (here and by `albert-tf finetune`
    # before any data is read); seq_length by the length rule (config.check_sequence_length).
    epochs: int = number_field(3, minimum=1)
    train_steps: int | None = number_field(None, minimum=1)
    batch_size: int = number_field(32, minimum=1)
    eval_batch_size: int = number_field(64, minimum=1)
    learning_rate: float = number_field(2e-5, exclusive_minimum=0.0)
    warmup_steps: int | None = number_field(None, minimum=0)
    warmup_proportion: float = number_field(0.1, minimum=0.0, maximum=1.0)
    optimizer: str = "adamw"
    weight_decay: float = number_field(0.01, minimum=0.0)
    seq_length: int = SHORT_SEQ_LENGTH
    # --set buckets=none: [] (one padded shape); buckets=default: None.
    buckets: list[int] | None = dataclasses.field(default=None,
                                                  metadata={arguments.NONE_WORD: "default"})
    patience: int | None = number_field(None, minimum=1)
    gradient_accumulation_steps: int = number_field(1, minimum=1)
    seed: int = number_field(0, minimum=0)
    spm_model: str | None = None
    do_lower_case: bool = True
    keep_accents: bool = False
    tokenize_chinese_chars: bool = True  # WordPiece's option, recorded with the model
    # XLA; None (--set jit_compile=auto): on GPUs only (distribute.resolve_jit_compile)
    jit_compile: bool | None = dataclasses.field(default=True,
                                                 metadata={arguments.NONE_WORD: "auto"})
    # XLA for the evaluation passes too: off, as each (batch, length) shape compiles anew
    # (fit_steps.FitOverride, 6; benchmarks/bench_eval_xla.py)
    eval_jit_compile: bool = False
    verbose: int | str = "auto"

    def __post_init__(self):
        arguments.check_numbers(self)
        check_accumulation(self.batch_size, self.gradient_accumulation_steps)
        if self.buckets:
            check_buckets(self.buckets, self.seq_length)

    def bucket_lengths(self) -> list[int] | None:
        if self.buckets is None:
            return default_buckets(self.seq_length)
        return list(self.buckets) or None

    def schedule(self, num_examples: int) -> tuple[int, int, int, int]:
        """(epochs, steps per epoch, total steps, warmup steps) for `num_examples`."""
        per_epoch = max(1, num_examples // self.batch_size)
        total = self.train_steps or self.epochs * per_epoch
        epochs = max(1, math.ceil(total / per_epoch))
        per_epoch = math.ceil(total / epochs)
        warmup = self.warmup_steps if self.warmup_steps is not None else int(
            self.warmup_proportion * total)
        return epochs, per_epoch, epochs * per_epoch, warmup


def predict_rows(model: keras.Model, data: Encoded, batch_size: int, seq_length: int,
                 buckets: list[int] | None) -> dict[str, list[np.ndarray]] | list[np.ndarray]:
    """Runs `model` on `data` and returns every output as one row per example, in order:
    a list of rows for a single-output model (its array), else a dict of them by output.

    Examples are grouped by bucket (or all padded to `seq_length`), so each
    `model.predict` call sees one static length and rows of per-token outputs have
    that bucket's length T >= the example's length.
    """
    rows: dict[str, list] = {}
    single = False
    for length, indices in _bucket_groups(data, seq_length, buckets):
        ds = make_dataset(data.subset(indices), batch_size, length)
        ds = ds.map(lambda f, _: {name: f[name] for name in INPUT_NAMES})
        outputs = model.predict(ds, verbose=0)
        single = not isinstance(outputs, dict)
        for name, values in ({None: outputs} if single else outputs).items():
            column = rows.setdefault(name, [None] * len(data))
            for row, index in zip(values, indices):
                column[index] = row
    return rows[None] if single else rows


def _bucket_groups(data: Encoded, seq_length: int, buckets: list[int] | None
                   ) -> list[tuple[int, np.ndarray]]:
    """(padded length, example indices) per non-empty bucket: each example in the smallest
    bucket that holds it, or all at `seq_length` without buckets. One static length per
    group, and a dataset whose size tf.data knows (Keras warns of "running out of data"
    when it does not)."""
    if not buckets:
        return [(seq_length, np.arange(len(data)))]
    group_of = np.searchsorted(np.asarray(buckets), data.lengths())  # smallest bucket >= length
    return [(int(buckets[g]), np.nonzero(group_of == g)[0]) for g in range(len(buckets))
            if np.any(group_of == g)]


# The plateau hint: a training loss still within PLATEAU_TOLERANCE (relative) of ln(C),
# the loss of a uniform guess among C classes, at the first epoch end past PLATEAU_SHARE
# of the steps means the model is not learning.
PLATEAU_SHARE = 0.5
PLATEAU_TOLERANCE = 0.01


def chance_loss(task: FinetuneJob) -> float | None:
    """ln(C) for a task of C >= 2 classes (classification, NER); None otherwise."""
    classes = len(task.label_names or ())
    return math.log(classes) if classes >= 2 else None


class PlateauHint(keras.callbacks.Callback):
    """One WARNING when the epoch's mean training loss is still ln(C) once
    `PLATEAU_SHARE` of the steps are done, naming the learning rate and schedule."""

    def __init__(self, chance: float, classes: int, steps_per_epoch: int, total: int,
                 schedule: str):
        super().__init__()
        self.chance, self.classes, self.schedule = chance, classes, schedule
        self.steps_per_epoch, self.total = steps_per_epoch, total

    def on_epoch_end(self, epoch, logs=None):
        step = (epoch + 1) * self.steps_per_epoch
        if self.chance is None or step < PLATEAU_SHARE * self.total or "loss" not in (logs or {}):
            return
        loss, chance, self.chance = float(logs["loss"]), self.chance, None  # checked once
        if abs(loss - chance) <= PLATEAU_TOLERANCE * chance:
            logger.warning(
                "training loss %.4f is still ln(%d) = %.4f, a uniform guess among %d classes, "
                "after %d of %d steps: the model is not learning with %s; try another "
                "--learning-rate or --set warmup_steps=N", loss, self.classes, chance,
                self.classes, step, self.total, self.schedule)


class _EvaluateEachEpoch(keras.callbacks.Callback):
    """Evaluates the task after each epoch, keeps the best weights, stops early."""

    def __init__(self, task: FinetuneJob, predict: Predict, config: TrainConfig,
                 save: Callable[[], None], steps_per_epoch: int,
                 losses: Callable[[], dict[str, float]]):
        super().__init__()
        self.task, self.predict, self.config, self.save = task, predict, config, save
        self.steps_per_epoch, self.losses = steps_per_epoch, losses
        self.best, self.best_weights, self.best_results = None, None, None
        self.wait, self.history = 0, []
        self.writer = tf.summary.create_file_writer(
            run_layout.tensorboard_dir(config.output_dir, run_layout.EVAL_LOGS_DIR))

    def on_epoch_end(self, epoch, logs=None):
        start = time.time()
        results = {**self.losses(), **self.task.evaluate(self.predict)}
        value = results[self.task.main_metric]
        # The global step at the end of the epoch: the train curves' axis (ScalarLogger).
        write_scalars(self.writer, results, (epoch + 1) * self.steps_per_epoch)
        self.history.append({"epoch": epoch + 1, **results})
        logger.info("epoch %d evaluation (%.1fs): %s", epoch + 1, time.time() - start,
                    metrics.results_line(results))
        if self.best is None or value > self.best:
            self.best, self.wait = value, 0
            self.best_weights, self.best_results = self.model.get_weights(), self.history[-1]
            self.save()
            logger.info("new best %s=%.4f, saved to %s", self.task.main_metric, value,
                        self.config.output_dir)
            return
        self.wait += 1
        if self.config.patience and self.wait >= self.config.patience:
            logger.info("no better %s for %d evaluations: stopping early",
                        self.task.main_metric, self.wait)
            self.model.stop_training = True


def finetune(task: FinetuneJob, source: str | OpenedCheckpoint | AlbertConfig, config: TrainConfig,
             strategy: tf.distribute.Strategy | None = None) -> dict:
    """Fine-tunes `task` starting from `source` and saves the best model in `config.output_dir`.

    Args:
      task: the data, model, loss and metrics (a `FinetuneJob`).
      source: a checkpoint (a path `open_checkpoint` opens, or one already opened;
        its encoder is fine-tuned, its heads are dropped), or an `AlbertConfig` for
        random initialisation.
      config: hyperparameters and the output directory.
      strategy: a `tf.distribute` strategy (default: the current one).

    Returns:
      {"best": the best evaluation results (or None), "history": per-epoch
      results, "checkpoint": the output directory, "predictions": files written}.
    """
    if task.train is None or not len(task.train):
        raise UserError(f"{task.name}: no training examples")
    strategy = strategy or tf.distribute.get_strategy()
    check_replica_accumulation(config.batch_size, config.gradient_accumulation_steps, strategy,
                               "batch_size")
    os.makedirs(config.output_dir, exist_ok=True)
    keras.utils.set_random_seed(config.seed)
    epochs, per_epoch, total, warmup = config.schedule(len(task.train))
    buckets = config.bucket_lengths()
    model = _compiled_model(task, source, config, strategy, total, warmup)
    save = _Saver(task, model, config, is_chief(strategy))

    def predict(data: Encoded) -> dict[str, list[np.ndarray]] | list[np.ndarray]:
        return predict_rows(model, data, config.eval_batch_size, config.seq_length, buckets)

    parts = config.gradient_accumulation_steps
    logger.info("%s: %d examples, %d epochs x %d steps (batch %d%s), warmup %d, %s lr %g",
                task.name, len(task.train), epochs, per_epoch, config.batch_size,
                f" in {parts} parts of {config.batch_size // parts}" if parts > 1 else "",
                warmup, config.optimizer, config.learning_rate)
    schedule = (f"learning rate {config.learning_rate:g} ({config.optimizer}), warmup {warmup} "
                f"steps then linear decay to 0 at step {total}")
    callbacks = [ScalarLogger(run_layout.tensorboard_dir(config.output_dir),
                              every=max(1, min(100, per_epoch // 10))),
                 PlateauHint(chance_loss(task), len(task.label_names or ()), per_epoch, total,
                              schedule)]

    def losses() -> dict[str, float]:
        return eval_losses(model, task.evals, config.eval_batch_size, config.seq_length, buckets)

    evaluation = (_EvaluateEachEpoch(task, predict, config, save, per_epoch, losses)
                  if task.evals else None)
    callbacks += [evaluation] if evaluation else []
    train_ds = make_dataset(task.train, config.batch_size, config.seq_length, buckets,
                            training=True, seed=config.seed)
    model.fit(train_ds, epochs=epochs, steps_per_epoch=per_epoch, callbacks=callbacks,
              verbose=config.verbose, shuffle=False)  # the pipeline shuffles
    if evaluation is None:
        save()
    else:
        model.set_weights(evaluation.best_weights)
    history = evaluation.history if evaluation else []
    summary = {"best": evaluation.best_results if evaluation else None, "history": history,
               "checkpoint": config.output_dir, "predictions": []}
    if save.chief:
        summary["predictions"] = task.write_predictions(predict, config.output_dir)
        atomic.atomic_write_json(os.path.join(config.output_dir, RESULTS_FILE),
                                 results_file(summary["best"], history), indent=1)
    return summary


def results_file(best: dict | None, history: list[dict]) -> dict:
    """eval_results.json: the best epoch's results as flat `eval_*` keys beside `epoch`, as
    transformers' run_glue / run_ner write them (`eval_loss`, `eval_accuracy`, ...), then
    `best` and every epoch's `history`."""
    flat = {} if best is None else {
        "epoch": best["epoch"], **{f"eval_{k}": v for k, v in best.items() if k != "epoch"}}
    return {**flat, "best": best, "history": history}


def eval_losses(model: keras.Model, evals: dict[str, Encoded], batch_size: int, seq_length: int,
                buckets: list[int] | None) -> dict[str, float]:
    """The task's training loss (the model's compiled loss) on each labelled evaluation set:
    {"loss"}, or {"loss_<set>", ...} with several sets (the metrics' naming); a set without
    labels (SQuAD's dev, scored on its answer texts) has none."""
    losses = {}
    for name, data in evals.items():
        if not data.labels:
            continue
        total = 0.0  # Keras' evaluate: the batches' losses weighted by their sizes
        for length, indices in _bucket_groups(data, seq_length, buckets):
            ds = make_dataset(data.subset(indices), batch_size, length)
            total += len(indices) * model.evaluate(ds, verbose=0, return_dict=True)["loss"]
        losses["loss" + (f"_{name}" if len(evals) > 1 else "")] = float(total / len(data))
    return losses


def _compiled_model(task: FinetuneJob, source, config: TrainConfig, strategy, total: int,
                    warmup: int) -> keras.Model:
    """The task model on the source's encoder, compiled, its variables under `strategy`."""
    with strategy.scope():
        if isinstance(source, AlbertConfig):
            model = task.build_model(source)
        else:
            opened = source if isinstance(source, OpenedCheckpoint) else open_checkpoint(source)
            loaded = opened.load()
            model = task.build_model(loaded.config, encoder=loaded.encoder)
        model.config.check_sequence_length(config.seq_length)
        if not model.uses_pooled_output:
            # A head that never reads the pooler (NER, SQuAD 1.1) gives it no gradient: it
            # is kept as loaded, not handed to the optimizer (whose Keras base would warn
            # "Gradients do not exist for variables [...pooler...]" at every trace).
            model.encoder.pooler.trainable = False
        optimizer = create_optimizer(config.optimizer, config.learning_rate, total, warmup,
                                     weight_decay=config.weight_decay)
        # The loss and metrics are the task model's own (its entry in albert_tf.tasks).
        model.compile(optimizer=optimizer, jit_compile=resolve_jit_compile(config.jit_compile))
        # Each update is gradient_accumulation_steps parts of the batch, run in turn.
        install_step_functions(model, config.gradient_accumulation_steps,
                               evaluation_xla=config.eval_jit_compile)
    return model


class _Saver:
    """Writes the model as a checkpoint in the output directory (on the chief only)."""

    def __init__(self, task: FinetuneJob, model: keras.Model, config: TrainConfig, chief: bool):
        self.task, self.model, self.config, self.chief = task, model, config, chief

    def __call__(self) -> None:
        if not self.chief:  # under multi-worker training only the chief writes
            return
        # albert_task.json: the settings used, the one source `albert-tf export` reads.
        extra = {"keep_accents": self.config.keep_accents,
                 "tokenize_chinese_chars": self.config.tokenize_chinese_chars,
                 **getattr(self.task, "checkpoint_info", dict)()}
        save_checkpoint(self.model, self.config.output_dir, spm_model=self.config.spm_model,
                        label_names=self.task.label_names, do_lower_case=self.config.do_lower_case,
                        seq_length=self.config.seq_length, extra_info=extra,
                        keep_other_files=True)  # the run's logs beside the model

