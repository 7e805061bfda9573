"""`albert-tf pretrain`: MLM + SOP pretraining with `model.fit` under any strategy.

One run configuration (`PretrainConfig`) comes from defaults, an optional JSON
file, the CLI options and `key=value` overrides, in that order. The run writes to
`output_dir`:

  run_config.json          the resolved configuration (chief)
  checkpoints/ckpt-STEP.*  model + optimizer + step, every `checkpoint_every` steps
  tensorboard/{train,eval} losses, accuracies, learning rate, examples/s, tokens/s
  model/                   the result: albert_config.json + model.weights.h5 +
                           spiece.model + albert_task.json (`albert_tf.load_checkpoint`)

Resume: rerunning the same command restores the latest checkpoint (weights,
optimizer slots, the step, hence the learning-rate position) and skips the
batches the checkpointed run had consumed, so training continues exactly where
the checkpoint was taken (see `_data_offset`). A resumed run is compared with the
run_config.json of the run it continues (`progress.check_resume`): a change of the
model, the data or its order, or the optimizer (`progress.RESUME_FIXED`) is refused,
naming the fields (old -> new), unless `allow_changes` (--allow-change) names them;
the schedule's length, the checkpoint cadence, evaluation, logging and the strategy
may change freely.

A time budget instead of a step count (`run(cfg, calibration=Calibration(...))`,
the Python API the demo uses): the steps after the first execution are timed, then
the caller's rule turns the measured seconds per step into the run's train_steps and
warmup_steps, over which the learning rate is laid from then on (no recompilation:
the rate is set between steps); run_config.json records the chosen counts and the
measurement, so a resume passes them as a plain config.

Long because the run, its data, its model and its calibration share the one
resolved configuration; split, they would pass it around in pieces.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import logging
import math
import os
import re
import tempfile
import time
from collections.abc import Callable, Iterable

import keras
import tensorflow as tf

from albert_tf import AlbertConfig, AlbertPretrainer, precisions, save_checkpoint
from albert_tf.checkpoint import open_checkpoint
from albert_tf.checkpoint.opened import check_vocab_size
from albert_tf.errors import UserError
from albert_tf.infra import atomic, cli
from albert_tf.tokenizer.kinds import python_tokenizer

from ..data import pairs
from ..data.create_data import DATA_CONFIG_FILE
from ..runtime import distribute, fit_steps, optimization
from ..runtime import layout as run_layout
from . import command, precision
from . import pipeline as input_pipeline
from .config import PretrainConfig, load_config
from .dynamic_masking import DynamicMasking
from .pipeline import check_files, list_files, pretraining_dataset
from .progress import (
    RUN_CONFIG_FILE,
    RUN_ENTRIES,
    Checkpoints,
    DivergedError,
    PretrainProgress,
    check_allowed_changes,
    check_resume,
    read_run_config,
)

logger = logging.getLogger(__name__)

# ------------------------------------------------------------------ the model
def model_config(cfg: PretrainConfig, vocab_size: int | None):
    """The AlbertConfig of the run: preset or file, `albert` overrides, dropout."""

    from_preset = cfg.model in AlbertConfig.size_names()
    base = AlbertConfig.from_size_or_file(cfg.model)
    changes = dict(cfg.albert)
    if vocab_size is not None and "vocab_size" not in changes and from_preset:
        changes["vocab_size"] = vocab_size  # a preset adopts the vocabulary's size
    changes.update(hidden_dropout_prob=cfg.dropout, attention_probs_dropout_prob=cfg.dropout)
    return AlbertConfig.from_dict({**base.to_dict(), **changes},
                                  source=None if from_preset else cfg.model)


def _data_config(cfg: PretrainConfig) -> dict:
    """create_data_config.json beside the first training file ({}: data from elsewhere)."""
    path = os.path.join(os.path.dirname(input_pipeline.list_files(cfg.train_data)[0]),
                        DATA_CONFIG_FILE)
    if not tf.io.gfile.exists(path):
        return {}
    with tf.io.gfile.GFile(path) as f:
        return json.load(f)


def sentence_pair_loss(cfg: PretrainConfig) -> bool:
    """Whether the run trains the sentence-pair head: the config's, else the data's objective."""
    if cfg.sentence_pair_loss is not None:
        return cfg.sentence_pair_loss
    written = _data_config(cfg)
    if not written:
        return True  # data from elsewhere (the original scripts): SOP or NSP labels
    return pairs.trains_sentence_pair(written.get("objective", pairs.DEFAULT_OBJECTIVE))


def dynamic_masking(cfg: PretrainConfig) -> DynamicMasking | None:
    """The read-time masking of the training data (None: the written masks are kept),
    with the masked_lm_prob and max_ngram the data was written with."""
    if not cfg.dynamic_masking:
        return None
    written = _data_config(cfg)
    rates = {key: written[key] for key in ("masked_lm_prob", "max_ngram") if key in written}
    return DynamicMasking.from_tokenizer(python_tokenizer(cfg.spm_model), **rates)


def run_model_config(cfg: PretrainConfig, vocab_size: int | None):
    """(the AlbertConfig the run trains, the opened init_checkpoint or None); the
    vocabulary (cfg.spm_model) is checked against it (`check_vocab_size`)."""

    opened = open_checkpoint(cfg.init_checkpoint) if cfg.init_checkpoint else None
    if opened is not None:
        config = opened.config.replace(hidden_dropout_prob=cfg.dropout,
                                       attention_probs_dropout_prob=cfg.dropout)
    else:
        config = model_config(cfg, vocab_size)
    if cfg.spm_model:
        check_vocab_size(cfg.spm_model, config.vocab_size,
                         opened.config_path if opened is not None else f"model {cfg.model}")
    return config, opened


def build_model(cfg: PretrainConfig, strategy, vocab_size: int | None, resolved=None,
                learning_rate: tf.Variable | None = None):
    """AlbertPretrainer compiled with the run's optimizer, created in `strategy`'s scope.

    `resolved`: `run_model_config(cfg, vocab_size)` when the caller has it already (the
    init_checkpoint is opened once). `learning_rate`: a variable the optimizer reads at
    every step instead of its schedule (a calibrated run sets it between steps)."""

    config, opened = resolved or run_model_config(cfg, vocab_size)
    if opened is not None:
        logger.info("init_checkpoint %s: its config replaces model=%s", cfg.init_checkpoint,
                    cfg.model)
    source = opened.load() if opened is not None else None  # the weights once the checks pass
    jit = distribute.resolve_jit_compile(cfg.jit_compile)
    keras.utils.set_random_seed(cfg.seed)
    with strategy.scope():
        # run() resolves None from the data; a bare build trains the head.
        model = AlbertPretrainer(config, sentence_pair_loss=cfg.sentence_pair_loss is not False,
                                 name="albert_pretrainer")
        if source is not None:  # the encoder always; heads when the source has them
            model.encoder.set_weights(source.encoder.get_weights())
            if isinstance(source, AlbertPretrainer):
                model.set_weights(source.get_weights())
        optimizer = optimization.create_optimizer(
            cfg.optimizer, cfg.learning_rate, cfg.train_steps, cfg.warmup_steps,
            cfg.poly_power, cfg.weight_decay, cfg.clipnorm or None)
        if learning_rate is not None:
            optimizer.learning_rate = lambda: learning_rate
        # compile adds loss scaling for mixed_float16; install_step_functions
        # makes it agree across replicas.
        model.compile(optimizer=optimizer, steps_per_execution=cfg.steps_per_execution,
                      jit_compile=jit)
        fit_steps.install_step_functions(model, cfg.gradient_accumulation_steps)
        model.optimizer.build(model.trainable_variables)  # slots exist before a restore
    return model


# ------------------------------------------------------------ precision
def resolve_precision(cfg: PretrainConfig, strategy, resolved, vocab_size: int | None,
                      shapes: tuple[int, int], resuming: bool) -> precision.PrecisionChoice:
    """The (precision, XLA) the run trains with: "auto" on one CPU replica is measured.

    A resumed run keeps the choice its run_config.json records (a different precision
    would not continue it). On a TPU, a GPU or several replicas, and for a run shorter
    than `precision.MEASURE_MIN_STEPS`, "auto" is `distribute.set_precision`'s (each
    replica timing on its own could disagree; a short run would not win back the trials).
    """
    recorded = _recorded_choice(cfg) if resuming and cfg.precision == precisions.AUTO else None
    if recorded is not None:
        return recorded
    if cfg.precision == precisions.AUTO and (isinstance(strategy, tf.distribute.TPUStrategy)
                                    or strategy.num_replicas_in_sync > 1
                                    or cfg.train_steps < precision.MEASURE_MIN_STEPS):
        return precision.PrecisionChoice(precisions.AUTO, cfg.jit_compile, {})
    candidates = distribute.cpu_training_candidates(cfg.precision, cfg.jit_compile)
    batch = None
    if len(candidates) > 1:  # one batch of the run's data, trained on again and again
        batch = tf.data.Dataset.from_tensors(next(iter(pretraining_dataset(
            cfg.train_data, cfg.global_batch_size, *shapes, shuffle_buffer=cfg.shuffle_buffer,
            seed=cfg.seed)))).repeat()

    def build_step(policy: str, jit: bool | None):
        model = build_model(dataclasses.replace(cfg, precision=policy, jit_compile=jit,
                                                steps_per_execution=1),
                            strategy, vocab_size, resolved)
        data = iter(strategy.experimental_distribute_dataset(batch))
        train = model.make_train_function()
        return lambda: train(data)

    return precision.choose(candidates, build_step)


def choose_precision(cfg: PretrainConfig) -> precision.PrecisionChoice:
    """`resolve_precision` for a run about to start: its data, model and strategy, no
    checkpoint (the demo decides once, before its first training job)."""
    cfg.validate()
    strategy = distribute.create_strategy(cfg.strategy)
    shapes = data_shapes(cfg.train_data)
    cfg = dataclasses.replace(cfg, sentence_pair_loss=sentence_pair_loss(cfg))
    vocab_size = python_tokenizer(cfg.spm_model).vocab_size if cfg.spm_model else None
    return resolve_precision(cfg, strategy, run_model_config(cfg, vocab_size), vocab_size,
                             shapes, resuming=False)


def _recorded_choice(cfg: PretrainConfig) -> precision.PrecisionChoice | None:
    """The precision and XLA setting a run's run_config.json recorded (None: no record)."""
    record = read_run_config(cfg.output_dir)
    if record is None:
        return None
    resolved = record.get("resolved", {})
    if not isinstance(resolved, dict):
        raise UserError(f"{os.path.join(cfg.output_dir, RUN_CONFIG_FILE)}: field 'resolved' "
                        "is not an object; repair it or use a new output_dir")
    if "precision" not in resolved:
        return None
    return precision.PrecisionChoice(resolved["precision"], resolved.get("xla", cfg.jit_compile),
                                     resolved.get("precision_candidates", {}))


# ------------------------------------------------------------ calibration
@dataclasses.dataclass(frozen=True)
class Calibration:
    """A run whose length is chosen once its step time is measured.

    The first execution (tracing, compilation) is not timed; the `steps` after it
    are. `choose(seconds_per_step, step)` then returns (train_steps, warmup_steps):
    the run stops at train_steps (at most the config's, the upper bound) and the
    config's warmup and polynomial decay are laid over those counts from the next
    step on. Until then the schedule is the config's own (its warmup_steps over
    train_steps). Needs steps_per_execution=1: the rate is set between steps.

    `deadline()`, when given, is read after the choice: the time.monotonic() by which
    training must end. Every RECHECK_EVERY steps, once PACE_WINDOW_S have passed since
    the choice, the pace since the choice (evaluations and checkpoints included, so
    spread over enough steps) is measured again, and a run that would overrun (a
    machine that slowed down) by more than PACE_TOLERANCE of its steps is shortened to
    the steps that still fit, its decay laid over the new count; a run is never
    lengthened.
    """

    steps: int
    choose: Callable[[float, int], tuple[int, int]]
    deadline: Callable[[], float] | None = None


RECHECK_EVERY = 25  # steps between two checks of a calibrated run's pace against its deadline
PACE_WINDOW_S = 60.0  # the least time since the choice over which the pace is measured
PACE_TOLERANCE = 0.01  # a shortfall under this share of the steps is left to the margin


class _CalibratedSchedule(keras.callbacks.Callback):
    """Sets the learning-rate variable before every step from a `WarmupPolynomialDecay`,
    times the calibration steps and replaces the schedule once with the chosen counts.

    `on_chosen(train_steps, warmup_steps, seconds_per_step)` records the choice.
    """

    def __init__(self, rate: tf.Variable, cfg: PretrainConfig, calibration: Calibration,
                 on_chosen: Callable[[int, int, float], None]):
        super().__init__()
        self.rate, self.cfg, self.calibration, self.on_chosen = rate, cfg, calibration, on_chosen
        self.schedule = self._schedule(cfg.train_steps, cfg.warmup_steps)
        self.done, self.timer, self.chosen = 0, None, None
        self.overhead_s = 0.0  # what setting the rate cost, all steps together

    def _schedule(self, train_steps: int, warmup_steps: int):
        return optimization.WarmupPolynomialDecay(self.cfg.learning_rate, train_steps,
                                                  warmup_steps, self.cfg.poly_power)

    def on_train_batch_begin(self, batch, logs=None):
        began = time.perf_counter()
        self.rate.assign(float(self.schedule(int(self.model.optimizer.iterations))))
        self.overhead_s += time.perf_counter() - began

    def on_train_batch_end(self, batch, logs=None):
        self.done += 1
        if self.done == 1:  # the first execution traced and compiled: time from here
            self.timer = time.perf_counter()
        elif self.chosen is None and self.done == 1 + self.calibration.steps:
            seconds = (time.perf_counter() - self.timer) / self.calibration.steps
            step = int(self.model.optimizer.iterations)
            train_steps, warmup_steps = self.calibration.choose(seconds, step)
            train_steps = min(max(int(train_steps), step + 1), self.cfg.train_steps)
            warmup_steps = max(0, int(warmup_steps))
            self.schedule = self._schedule(train_steps, warmup_steps)
            self.chosen = {"train_steps": train_steps, "warmup_steps": warmup_steps,
                           "seconds_per_step": seconds, "measured_steps": self.calibration.steps,
                           "at_step": step}
            self.on_chosen(train_steps, warmup_steps, seconds)
            self.paced = (time.monotonic(), step)
        elif self.chosen is not None and self.calibration.deadline is not None and (
                self.done % RECHECK_EVERY == 0):
            self._keep_pace(int(self.model.optimizer.iterations))

    def _keep_pace(self, step: int) -> None:
        """Shortens the run when the pace since the choice would miss the deadline."""
        now, (then, then_step) = time.monotonic(), self.paced
        if step <= then_step or now - then < PACE_WINDOW_S:
            return
        pace = (now - then) / (step - then_step)
        fits = step + max(1, math.floor((self.calibration.deadline() - now) / pace))
        if fits >= self.chosen["train_steps"] * (1 - PACE_TOLERANCE):
            return
        logger.info("behind the budget at step %d (%.3f s/step since step %d): train_steps "
                    "%d -> %d", step, pace, then_step, self.chosen["train_steps"], fits)
        warmup_steps = min(self.chosen["warmup_steps"], fits)
        self.schedule = self._schedule(fits, warmup_steps)
        self.chosen.update(train_steps=fits, warmup_steps=warmup_steps,
                           shortened_at=step, pace_s_per_step=pace)
        self.on_chosen(fits, warmup_steps, self.chosen["seconds_per_step"])


def _check_calibration(cfg: PretrainConfig, calibration: Calibration, start: int) -> None:
    if cfg.steps_per_execution != 1:
        raise UserError(f"a calibrated run sets the learning rate between steps: it needs "
                        f"steps_per_execution=1, not {cfg.steps_per_execution}")
    if start:
        raise UserError(f"{cfg.output_dir} holds a run at step {start}: resume it with the "
                        "train_steps and warmup_steps its run_config.json records, not a "
                        "new calibration")
    if calibration.steps < 1 or calibration.steps + 1 >= cfg.train_steps:
        raise UserError(f"calibration over {calibration.steps} steps needs train_steps (the "
                        f"upper bound) above {calibration.steps + 1}, not {cfg.train_steps}")


# ------------------------------------------------------------------- the data
def data_shapes(file_pattern: str) -> tuple[int, int]:
    """(seq_length, max_predictions) of the first record of the first file."""

    path = input_pipeline.list_files(file_pattern)[0]
    try:
        record = next(iter(tf.data.TFRecordDataset(path).take(1)), None)
    except tf.errors.OpError as e:
        raise UserError(f"{path}: cannot read TFRecords: {e.message}") from None
    if record is None:
        raise UserError(f"{path}: holds no records")
    try:
        feature = tf.train.Example.FromString(record.numpy()).features.feature
    except Exception as e:  # protobuf's DecodeError: a TFRecord of something else
        raise UserError(f"{path}: the first record is not a tf.train.Example ({e})") from None
    for name in ("input_ids", "masked_lm_positions"):
        if name not in feature:
            raise UserError(f"{path}: records lack the feature {name!r}")
    return (len(feature["input_ids"].int64_list.value),
            len(feature["masked_lm_positions"].int64_list.value))


def _data_offset(cfg: PretrainConfig, step: int, context) -> tuple[int, int]:
    """(batches this input pipeline skips, shuffle seed) for a run resumed at `step`.

    "skip": the record stream is a function of the seed, so skipping the batches
    the earlier run consumed (each of the pipeline's replicas drew one per step)
    continues the same stream; it re-reads, but does not train on, that data. The
    training pipeline's parallel map may swap neighbouring batches unless
    `deterministic` is set, which makes a resumed run bit-identical to an
    uninterrupted one. "reseed": restart with a seed derived from the step: no
    re-reading, a fresh order.
    """
    if cfg.data_resume == "reseed":
        return 0, cfg.seed + step
    replicas_per_pipeline = context.num_replicas_in_sync // context.num_input_pipelines
    return step * replicas_per_pipeline, cfg.seed


def make_datasets(cfg: PretrainConfig, strategy, seq_length: int, max_predictions: int,
                  step: int, config: AlbertConfig | None = None):
    """Distributed (train, eval or None) datasets; train resumes after `step` steps.

    `config`: the model's; records with ids past its vocabulary or segments past its
    type_vocab_size are refused as they are read (`pipeline._checked`)."""

    masking = dynamic_masking(cfg)
    sizes = {} if config is None else {"vocab_size": config.vocab_size,
                                       "type_vocab_size": config.type_vocab_size}

    def train_fn(context):
        skip, seed = _data_offset(cfg, step, context)
        dataset = pretraining_dataset(
            cfg.train_data, cfg.global_batch_size, seq_length, max_predictions,
            input_context=context, dynamic_masking=masking, shuffle_buffer=cfg.shuffle_buffer,
            seed=seed, **sizes)
        return dataset.skip(skip) if skip else dataset

    def eval_fn(context):
        # The same first `eval_steps` batches at every evaluation: fit keeps the
        # validation iterator between epochs, so the held-out stream cycles.
        per_pipeline = cfg.eval_steps * (context.num_replicas_in_sync
                                         // context.num_input_pipelines)
        return pretraining_dataset(cfg.eval_data, cfg.global_batch_size, seq_length,
                                   max_predictions, is_training=False, input_context=context,
                                   **sizes).take(per_pipeline).repeat()

    train = strategy.distribute_datasets_from_function(train_fn)
    evaluation = (strategy.distribute_datasets_from_function(eval_fn)
                  if cfg.eval_data else None)
    return train, evaluation


# -------------------------------------------------------------------- the run
def _export(model, cfg: PretrainConfig, seq_length: int) -> str:
    """Writes model/ (our checkpoint format); via a local directory for gs:// outputs."""

    target = run_layout.model_dir(cfg.output_dir)
    spm = cfg.spm_model or None
    if "://" not in target:
        return save_checkpoint(model, target, spm_model=spm, seq_length=seq_length)
    with tempfile.TemporaryDirectory() as local:
        staged = save_checkpoint(model, run_layout.model_dir(local), spm_model=spm,
                                 seq_length=seq_length)
        tf.io.gfile.makedirs(target)
        for name in os.listdir(staged):
            with atomic.atomic_path(os.path.join(target, name)) as tmp:  # each file whole
                tf.io.gfile.copy(os.path.join(staged, name), tmp, overwrite=True)
    return target


def run(cfg: PretrainConfig, allow_changes: Iterable[str] = (),
        calibration: Calibration | None = None,
        precision_choice: precision.PrecisionChoice | None = None) -> dict:
    """Pretrains as configured (resuming from output_dir/checkpoints if present).

    A resume is compared with the run it continues first (`progress.check_resume`):
    changed model, data or optimizer settings are refused unless `allow_changes`
    names them (run_config.json's names, albert.FIELD for the model).
    `calibration`: choose train_steps and warmup_steps from the measured step time
    (`Calibration`; cfg.train_steps is then the upper bound); a fresh run only.
    `precision_choice`: the precision decided before the run (`choose_precision`, as the
    demo does for all its jobs), trained with and recorded as is.

    Returns a summary: the start and end step, the exported directory (chief), the
    examples/s of this run (with and without the first step's compilation), the
    per-epoch training and eval metrics, and the calibration (None without one:
    the chosen counts, the measured seconds per step, what setting the rate cost).
    """

    cfg.validate()
    allow_changes = check_allowed_changes(allow_changes)
    if cfg.deterministic:
        # Also forces tf.data's parallel map/interleave into order, which the
        # input pipeline leaves free for speed when training.
        tf.config.experimental.enable_op_determinism()
    strategy = distribute.create_strategy(cfg.strategy)
    chief = distribute.is_chief(strategy)
    # One run per output_dir: a second one is refused at once, naming the first one's
    # process (the other workers of a multi-worker run write no output_dir of their own).
    with atomic.claimed(cfg.output_dir) if chief else contextlib.nullcontext():
        return _run(cfg, allow_changes, calibration, strategy, chief, precision_choice)


def _run(cfg: PretrainConfig, allow_changes: list[str], calibration: Calibration | None,
         strategy, chief: bool, precision_choice: precision.PrecisionChoice | None) -> dict:
    """`run` once the strategy is built and output_dir claimed, in five steps: set-up
    (every check before any work), the precision and the run's record, the model (restored
    from its last checkpoint), fit, and the finish (divergence, export, summary)."""
    setup = _setup(cfg, strategy)
    choice = precision_choice or resolve_precision(
        setup.cfg, strategy, setup.resolved, setup.vocab_size,
        (setup.seq_length, setup.max_predictions), setup.resuming)
    cfg = dataclasses.replace(setup.cfg, jit_compile=choice.jit_compile)
    policy = distribute.set_precision(choice.precision, strategy)
    record = _RunRecord(cfg.output_dir, _run_record(setup, choice, policy, strategy), chief)
    if setup.resuming:  # the same run?
        check_resume(cfg.output_dir, record.values, allow_changes)
    model, checkpoints, start, rate = _restored_model(cfg, setup, strategy, chief, calibration)
    record.write()
    history, progress, scheduled = _fit(model, cfg, setup, strategy, chief, start, checkpoints,
                                        record, calibration, rate)
    checkpoints.close()
    _check_diverged(progress, setup.checkpoint_dir)
    exported = _export(model, cfg, setup.seq_length) if chief else None
    return {"start_step": start, "step": progress.step, "exported": exported,
            "precision": policy, "jit_compile": bool(model.jit_compile),
            "precision_candidates": choice.candidates,
            "examples_per_sec": progress.throughput() if history else 0.0,
            "steady_examples_per_sec": progress.steady_throughput() if history else None,
            "history": {k: [float(x) for x in v] for k, v in history.items()},
            "calibration": None if scheduled is None else {
                **(scheduled.chosen or {}), "schedule_overhead_s": scheduled.overhead_s}}


@dataclasses.dataclass(frozen=True)
class _Setup:
    """What the checks before any work found: the run's config (sentence-pair loss
    decided), the data's shapes, the vocabulary's size, the resolved model config."""

    cfg: PretrainConfig
    seq_length: int
    max_predictions: int
    vocab_size: int | None
    resolved: tuple  # run_model_config's
    checkpoint_dir: str
    resuming: bool

    @property
    def config(self):
        return self.resolved[0]


def _setup(cfg: PretrainConfig, strategy) -> _Setup:
    """Every check before any work: the batch over the replicas, the data's shards, the
    output directory, the vocabulary against the model, the sequence length."""
    distribute.scale_batch(cfg.global_batch_size, strategy)  # splits across the replicas
    fit_steps.check_replica_accumulation(cfg.global_batch_size, cfg.gradient_accumulation_steps,
                                         strategy, "global_batch_size")
    shapes = data_shapes(cfg.train_data)
    cfg = dataclasses.replace(cfg, sentence_pair_loss=sentence_pair_loss(cfg))
    seq_length = shapes[0] if cfg.seq_length is None else cfg.seq_length
    max_predictions = shapes[1] if cfg.max_predictions is None else cfg.max_predictions
    # Before any step: every shard readable, whole and of the same shapes.
    for pattern in filter(None, (cfg.train_data, cfg.eval_data)):
        check_files(list_files(pattern), seq_length, max_predictions)
    atomic.check_writable_directory(cfg.output_dir, "output_dir")
    # A checkpoint or model beside no run_config.json is not a run of ours to resume.
    atomic.check_resumable(cfg.output_dir, RUN_ENTRIES, (RUN_CONFIG_FILE,), "output_dir",
                           "pretrain")
    vocab_size = python_tokenizer(cfg.spm_model).vocab_size if cfg.spm_model else None
    resolved = run_model_config(cfg, vocab_size)  # checks the vocabulary's size
    resolved[0].check_sequence_length(seq_length, where=f"data {cfg.train_data}")
    checkpoint_dir = run_layout.checkpoints_dir(cfg.output_dir)
    return _Setup(cfg, seq_length, max_predictions, vocab_size, resolved, checkpoint_dir,
                  tf.train.latest_checkpoint(checkpoint_dir) is not None)


def _run_record(setup: _Setup, choice: precision.PrecisionChoice, policy: str,
                strategy) -> dict:
    """run_config.json: the options as asked, and what they resolved to."""
    return {**dataclasses.asdict(setup.cfg), "resolved": {
        "seq_length": setup.seq_length, "max_predictions": setup.max_predictions,
        "precision": policy, "xla": distribute.resolve_jit_compile(choice.jit_compile),
        "precision_candidates": choice.candidates, "replicas": strategy.num_replicas_in_sync,
        "albert_config": setup.config.to_dict(),
        "sentence_pair_loss": setup.cfg.sentence_pair_loss is not False,
        # What the run trains on: a resume on other data is refused (progress.check_resume).
        "train_files": input_pipeline.fingerprint(list_files(setup.cfg.train_data))}}


class _RunRecord:
    """run_config.json's values, written (by the chief) whenever they change."""

    def __init__(self, output_dir: str, values: dict, chief: bool):
        self.output_dir, self.values, self.chief = output_dir, values, chief

    def write(self) -> None:
        if self.chief:
            tf.io.gfile.makedirs(self.output_dir)
            atomic.atomic_write_json(os.path.join(self.output_dir, RUN_CONFIG_FILE),
                                     self.values, sort_keys=True)


def _restored_model(cfg: PretrainConfig, setup: _Setup, strategy, chief: bool,
                    calibration: Calibration | None):
    """(the model, its Checkpoints, the step restored, the calibrated learning-rate
    variable or None)."""
    rate = None
    if calibration is not None:
        with strategy.scope():
            rate = tf.Variable(0.0, trainable=False, dtype=tf.float32, name="learning_rate")
    model = build_model(cfg, strategy, setup.vocab_size, setup.resolved, learning_rate=rate)
    checkpoints = Checkpoints(model, setup.checkpoint_dir, cfg.keep_checkpoints, chief)
    start = checkpoints.restore()
    if calibration is not None:
        _check_calibration(cfg, calibration, start)
    return model, checkpoints, start, rate


def _fit(model, cfg: PretrainConfig, setup: _Setup, strategy, chief: bool, start: int,
         checkpoints, record: _RunRecord, calibration: Calibration | None, rate):
    """`model.fit` from `start` to train_steps, an epoch per checkpoint: (its history,
    the progress callback, the calibrated schedule or None)."""
    train, evaluation = make_datasets(cfg, strategy, setup.seq_length, setup.max_predictions,
                                      start, setup.config)
    progress = PretrainProgress(
        start_step=start, train_steps=cfg.train_steps,
        examples_per_step=cfg.global_batch_size,
        tokens_per_step=cfg.global_batch_size * setup.seq_length, log_every=cfg.log_every,
        tensorboard_dir=run_layout.tensorboard_dir(cfg.output_dir) if chief else None,
        save=checkpoints.save)
    callbacks = [progress]
    scheduled = None
    if calibration is not None:
        def chosen(train_steps: int, warmup_steps: int, seconds: float) -> None:
            # Recorded before any checkpoint exists: a resume finds these counts.
            progress.train_steps = train_steps
            record.values.update(train_steps=train_steps, warmup_steps=warmup_steps,
                                 calibration=scheduled.chosen)
            record.write()
            if "shortened_at" not in scheduled.chosen:  # a shortening logs its own line
                logger.info("calibrated: %.3f s/step over %d steps -> train_steps=%d, "
                            "warmup_steps=%d", seconds, calibration.steps, train_steps,
                            warmup_steps)

        scheduled = _CalibratedSchedule(rate, cfg, calibration, chosen)
        callbacks.insert(0, scheduled)  # the stop step is set before progress checks it
    if start >= cfg.train_steps:
        logger.info("checkpoint is at step %d >= train_steps=%d: nothing to train",
                    start, cfg.train_steps)
        return {}, progress, scheduled
    initial_epoch = start // cfg.checkpoint_every
    epochs = initial_epoch + math.ceil((cfg.train_steps - start) / cfg.checkpoint_every)
    try:
        history = model.fit(train, steps_per_epoch=cfg.checkpoint_every, epochs=epochs,
                            initial_epoch=initial_epoch, validation_data=evaluation,
                            validation_steps=cfg.eval_steps if evaluation else None,
                            callbacks=callbacks, shuffle=False,
                            verbose=1 if chief else 0).history
    except tf.errors.InvalidArgumentError as e:
        raise _data_error(e) from e
    return history, progress, scheduled


def _check_diverged(progress: PretrainProgress, checkpoint_dir: str) -> None:
    """DivergedError when the loss stopped being finite (nothing exported; the
    checkpoints before it stay)."""
    if progress.diverged is None:
        return
    step, loss = progress.diverged
    latest = tf.train.latest_checkpoint(checkpoint_dir)
    kept = (f"{latest} is kept: rerun with a lower learning_rate and --allow-change "
            "learning_rate to resume from it" if latest else "no checkpoint was written: "
            "rerun with a lower learning_rate (or clipnorm)")
    raise DivergedError(f"pretraining stopped at step {step}: the loss is {loss}; nothing "
                        f"was exported; {kept}")


def _data_error(e) -> Exception:
    """The input pipeline's refusals (a corrupt or truncated TFRecord file, a record the
    model cannot use) as one line."""

    refused = input_pipeline.record_error(e)
    if refused is not None:
        return refused
    match = re.search(r"corrupt or truncated TFRecord file\]\s*\[([^\]]+)\]", e.message)
    if match is None:
        return e
    return UserError(f"{match.group(1)}: corrupt or truncated TFRecord file (found while "
                     "training; the latest checkpoint is kept): rewrite it or leave it out")


# ------------------------------------------------------------------------ CLI
def run_command(args: argparse.Namespace) -> int:
    """`albert-tf pretrain` with its parsed arguments (`command.parser`); returns 0, or
    raises a UserError (one line on stderr, exit 2)."""
    options = {k: v for k, v in vars(args).items()
               if k not in ("config", "overrides", "allow_change")}
    cfg = load_config(args.config, args.overrides, **options)
    allow = [name for item in args.allow_change for name in item.split(",") if name]
    cli.setup_logging()
    summary = run(cfg, allow)
    logger.info("pretraining done: %s", json.dumps(summary))
    return 0


@cli.command("pretrain")
def main(argv: list[str]) -> int:
    """`albert-tf pretrain`; returns 0, or 2 with one line on stderr for bad input."""
    return run_command(command.parse(argv))
