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
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import math
import os
import re
import tempfile
from typing import Iterable

import keras
import tensorflow as tf

from albert_tf import (
    AlbertConfig,
    AlbertPretrainer,
    arguments,
    atomic,
    cli,
    save_checkpoint,
)
from albert_tf.checkpoint import open_checkpoint
from albert_tf.checkpoint.opened import check_vocab_size
from albert_tf.errors import UserError
from albert_tf.tokenizer.spm import AlbertTokenizer

from ..data import pairs
from ..data.create_data import CONFIG_FILE
from ..runtime import distribute, fit_steps, optimization
from . import pipeline as input_pipeline
from .config import PretrainConfig, load_config
from .pipeline import check_files, list_files, pretraining_dataset
from .progress import (
    RUN_CONFIG_FILE,
    Checkpoints,
    PretrainProgress,
    check_allowed_changes,
    check_resume,
)

logger = logging.getLogger(__name__)

# ------------------------------------------------------------------ the model
def model_config(cfg: PretrainConfig, vocab_size: int | None):
    """The AlbertConfig of the run: preset or file, `albert` overrides, dropout."""

    from_preset = cfg.model in AlbertConfig.preset_names()
    base = AlbertConfig.from_preset_or_file(cfg.model)
    changes = dict(cfg.albert)
    if vocab_size is not None and "vocab_size" not in changes and from_preset:
        changes["vocab_size"] = vocab_size  # a preset adopts the vocabulary's size
    changes.update(hidden_dropout_prob=cfg.dropout, attention_probs_dropout_prob=cfg.dropout)
    return AlbertConfig.from_dict({**base.to_dict(), **changes},
                                  source=None if from_preset else cfg.model)


def sentence_pair_loss(cfg: PretrainConfig) -> bool:
    """Whether the run trains the sentence-pair head: the config's, else the data's objective."""
    if cfg.sentence_pair_loss is not None:
        return cfg.sentence_pair_loss

    path = os.path.join(os.path.dirname(input_pipeline.list_files(cfg.train_data)[0]), CONFIG_FILE)
    if not tf.io.gfile.exists(path):
        return True  # data from elsewhere (the original scripts): SOP or NSP labels
    with tf.io.gfile.GFile(path) as f:
        objective = json.load(f).get("objective", pairs.DEFAULT_OBJECTIVE)
    return pairs.trains_sentence_pair(objective)


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


def build_model(cfg: PretrainConfig, strategy, vocab_size: int | None, resolved=None):
    """AlbertPretrainer compiled with the run's optimizer, created in `strategy`'s scope.

    `resolved`: `run_model_config(cfg, vocab_size)` when the caller has it already (the
    init_checkpoint is opened once)."""

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
            if source.task == "pretraining":
                model.set_weights(source.get_weights())
        optimizer = optimization.create_optimizer(
            cfg.optimizer, cfg.learning_rate, cfg.train_steps, cfg.warmup_steps,
            cfg.poly_power, cfg.weight_decay, cfg.clipnorm or None)
        # compile adds loss scaling for mixed_float16; install_step_functions
        # makes it agree across replicas.
        model.compile(optimizer=optimizer, steps_per_execution=cfg.steps_per_execution,
                      jit_compile=jit)
        fit_steps.install_step_functions(model)
        model.optimizer.build(model.trainable_variables)  # slots exist before a restore
    return model


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
                  step: int):
    """Distributed (train, eval or None) datasets; train resumes after `step` steps."""

    def train_fn(context):
        skip, seed = _data_offset(cfg, step, context)
        dataset = pretraining_dataset(
            cfg.train_data, cfg.global_batch_size, seq_length, max_predictions,
            input_context=context, shuffle_buffer=cfg.shuffle_buffer, seed=seed)
        return dataset.skip(skip) if skip else dataset

    def eval_fn(context):
        # The same first `eval_steps` batches at every evaluation: fit keeps the
        # validation iterator between epochs, so the held-out stream cycles.
        per_pipeline = cfg.eval_steps * (context.num_replicas_in_sync
                                         // context.num_input_pipelines)
        return pretraining_dataset(cfg.eval_data, cfg.global_batch_size, seq_length,
                                   max_predictions, is_training=False,
                                   input_context=context).take(per_pipeline).repeat()

    train = strategy.distribute_datasets_from_function(train_fn)
    evaluation = (strategy.distribute_datasets_from_function(eval_fn)
                  if cfg.eval_data else None)
    return train, evaluation


# -------------------------------------------------------------------- the run
def _export(model, cfg: PretrainConfig, seq_length: int) -> str:
    """Writes model/ (our checkpoint format); via a local directory for gs:// outputs."""

    target = os.path.join(cfg.output_dir, "model")
    spm = cfg.spm_model or None
    if "://" not in target:
        return save_checkpoint(model, target, spm_model=spm, seq_length=seq_length)
    with tempfile.TemporaryDirectory() as local:
        save_checkpoint(model, os.path.join(local, "model"), spm_model=spm,
                        seq_length=seq_length)
        tf.io.gfile.makedirs(target)
        for name in os.listdir(os.path.join(local, "model")):
            with atomic.atomic_path(os.path.join(target, name)) as tmp:  # each file whole
                tf.io.gfile.copy(os.path.join(local, "model", name), tmp, overwrite=True)
    return target


def run(cfg: PretrainConfig, allow_changes: Iterable[str] = ()) -> dict:
    """Pretrains as configured (resuming from output_dir/checkpoints if present).

    A resume is compared with the run it continues first (`progress.check_resume`):
    changed model, data or optimizer settings are refused unless `allow_changes`
    names them (run_config.json's names, albert.FIELD for the model).

    Returns a summary: the start and end step, the exported directory (chief), the
    examples/s of this run (with and without the first step's compilation), and
    the per-epoch training and eval metrics.
    """

    cfg.validate()
    allow_changes = check_allowed_changes(allow_changes)
    if cfg.deterministic:
        # Also forces tf.data's parallel map/interleave into order, which the
        # input pipeline leaves free for speed when training.
        tf.config.experimental.enable_op_determinism()
    strategy = distribute.create_strategy(cfg.strategy)
    policy = distribute.set_precision(cfg.precision, strategy)
    distribute.scale_batch(cfg.global_batch_size, strategy)

    shapes = data_shapes(cfg.train_data)
    cfg = dataclasses.replace(cfg, sentence_pair_loss=sentence_pair_loss(cfg))
    seq_length = shapes[0] if cfg.seq_length is None else cfg.seq_length
    max_predictions = shapes[1] if cfg.max_predictions is None else cfg.max_predictions
    # Before any step: every shard readable, whole and of the same shapes.
    for pattern in filter(None, (cfg.train_data, cfg.eval_data)):
        check_files(list_files(pattern), seq_length, max_predictions)
    atomic.check_writable_directory(cfg.output_dir, "output_dir")
    vocab_size = None
    if cfg.spm_model:
        vocab_size = AlbertTokenizer(cfg.spm_model).vocab_size
    chief = distribute.is_chief(strategy)
    resolved = run_model_config(cfg, vocab_size)  # checks the vocabulary's size
    config = resolved[0]
    config.check_sequence_length(seq_length, where=f"data {cfg.train_data}")
    record = {**dataclasses.asdict(cfg), "resolved": {
        "seq_length": seq_length, "max_predictions": max_predictions,
        "precision": policy, "replicas": strategy.num_replicas_in_sync,
        "albert_config": config.to_dict(),
        "sentence_pair_loss": cfg.sentence_pair_loss is not False}}
    checkpoint_dir = os.path.join(cfg.output_dir, "checkpoints")
    if tf.train.latest_checkpoint(checkpoint_dir) is not None:  # a resume: the same run?
        check_resume(cfg.output_dir, record, allow_changes)
    model = build_model(cfg, strategy, vocab_size, resolved)
    checkpoints = Checkpoints(model, checkpoint_dir, cfg.keep_checkpoints, chief)
    start = checkpoints.restore()
    if chief:
        tf.io.gfile.makedirs(cfg.output_dir)
        atomic.atomic_write_json(os.path.join(cfg.output_dir, RUN_CONFIG_FILE), record,
                                 sort_keys=True)
    train, evaluation = make_datasets(cfg, strategy, seq_length, max_predictions, start)
    progress = PretrainProgress(
        start_step=start, train_steps=cfg.train_steps,
        examples_per_step=cfg.global_batch_size,
        tokens_per_step=cfg.global_batch_size * seq_length, log_every=cfg.log_every,
        tensorboard_dir=os.path.join(cfg.output_dir, "tensorboard") if chief else None,
        save=checkpoints.save)
    history = {}
    if start < cfg.train_steps:
        initial_epoch = start // cfg.checkpoint_every
        epochs = initial_epoch + math.ceil((cfg.train_steps - start) / cfg.checkpoint_every)
        try:
            history = model.fit(train, steps_per_epoch=cfg.checkpoint_every, epochs=epochs,
                                initial_epoch=initial_epoch, validation_data=evaluation,
                                validation_steps=cfg.eval_steps if evaluation else None,
                                callbacks=[progress], shuffle=False,
                                verbose=1 if chief else 0).history
        except tf.errors.InvalidArgumentError as e:
            raise _data_error(e) from e
    else:
        logger.info("checkpoint is at step %d >= train_steps=%d: nothing to train",
                    start, cfg.train_steps)
    checkpoints.close()
    exported = _export(model, cfg, seq_length) if chief else None
    return {"start_step": start, "step": progress.step, "exported": exported,
            "precision": policy, "jit_compile": bool(model.jit_compile),
            "examples_per_sec": progress.throughput() if history else 0.0,
            "steady_examples_per_sec": progress.steady_throughput() if history else None,
            "history": {k: [float(x) for x in v] for k, v in history.items()}}


def _data_error(e) -> Exception:
    """The input pipeline's "corrupt or truncated TFRecord file" assertion as one line."""

    match = re.search(r"corrupt or truncated TFRecord file\]\s*\[([^\]]+)\]", e.message)
    if match is None:
        return e
    return UserError(f"{match.group(1)}: corrupt or truncated TFRecord file (found while "
                     "training; the latest checkpoint is kept): rewrite it or leave it out")


# ------------------------------------------------------------------------ CLI
def _parser() -> argparse.ArgumentParser:
    parser = arguments.ArgumentParser(prog="albert-tf pretrain", description=(
        "Pretrain ALBERT (MLM + SOP) with model.fit. Options override --config; "
        "KEY=VALUE overrides any PretrainConfig field (albert.FIELD=VALUE: the model config)."))
    parser.add_argument("overrides", nargs="*", metavar="KEY=VALUE")
    parser.add_argument("--config", help="JSON run configuration")
    parser.add_argument("--model", help="preset (albert-base, ...) or albert_config.json")
    parser.add_argument("--train-data", help="TFRecord glob(s) from albert-tf create-data")
    parser.add_argument("--eval-data", help="held-out TFRecord glob(s)")
    parser.add_argument("--output-dir", help="checkpoints, TensorBoard logs and model/")
    parser.add_argument("--spm-model", help="SentencePiece model to ship with the result")
    parser.add_argument("--init-checkpoint", help="start from these weights (TF1, HF or ours)")
    parser.add_argument("--global-batch-size", type=int)
    parser.add_argument("--train-steps", type=int)
    parser.add_argument("--optimizer", choices=("lamb", "adamw"))
    parser.add_argument("--precision", help="auto, float32, mixed_float16, mixed_bfloat16")
    parser.add_argument("--strategy", help="default, cpu, mirrored, multi_worker, tpu[:NAME]")
    parser.add_argument("--allow-change", action="append", default=[], metavar="FIELD[,FIELD]",
                        help="resume although these settings differ from the run's "
                             "run_config.json (e.g. global_batch_size, albert.num_hidden_layers)")
    return parser


@cli.command("pretrain")
def main(argv: list[str]) -> int:
    """`albert-tf pretrain`; returns 0, or 2 with one line on stderr for bad input."""
    args = _parser().parse_intermixed_args(argv)
    options = {k: v for k, v in vars(args).items()
               if k not in ("config", "overrides", "allow_change")}
    cfg = load_config(args.config, args.overrides, **options)
    allow = [name for item in args.allow_change for name in item.split(",") if name]
    cli.setup_logging()
    summary = run(cfg, allow)
    logger.info("pretraining done: %s", json.dumps(summary))
    return 0
