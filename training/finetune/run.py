"""`albert-tf finetune`'s job: fine-tune a checkpoint on GLUE, SQuAD, RACE or your own files.

`run(FinetuneOptions(...))` checks every setting, then fine-tunes into a claimed, staged
--output. The tasks, their data and the settings are listed in `command.py` (the command
line, and `albert-tf finetune --help`).
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import sys
import tempfile

from albert_tf import errors, precisions, tasks
from albert_tf.checkpoint import OpenedCheckpoint, open_checkpoint
from albert_tf.checkpoint.hub import resolve_checkpoint
from albert_tf.checkpoint.task_record import TaskRecord, TaskRecordError
from albert_tf.checkpoint.tokenizer_files import MISSING_TOKENIZER
from albert_tf.infra import arguments, atomic, cli

from ..runtime import distribute
from ..runtime.fit_steps import check_accumulation
from . import command, metrics, ner, race, sequence, squad
from .bucketing import check_buckets
from .families import build_task, canonical_task, family, listed, task_defaults
from .train import RUN_FILES, TrainConfig, finetune

logger = logging.getLogger("albert_tf.finetune")

# --set keys that are task record fields (TaskRecord holds their types and defaults).
TASK_KEYS = tasks.SET_FIELDS
# What a fine-tuning run may hold: what --overwrite replaces (anything else is refused).
RUN_ENTRIES = (*RUN_FILES, *sequence.PREDICTION_FILES, *squad.PREDICTION_FILES,
               *race.PREDICTION_FILES, *ner.PREDICTION_FILES)
# --set keys that are TrainConfig fields the tokenizer set-up reads, not the training loop.
RUN_KEYS = ("spm_model", "do_lower_case", "keep_accents")


UsageError = errors.UsageError


@dataclasses.dataclass
class FinetuneOptions:
    """What `albert-tf finetune` is asked, as typed values (the command line's flags;
    see the module docstring). A job that fine-tunes calls `run(FinetuneOptions(...))`."""

    task: str
    checkpoint: str
    output: str
    data: list[str] | None = None
    columns: str | None = None
    label_names: str | None = None
    epochs: int | None = None
    batch_size: int | None = None
    learning_rate: float | None = None
    seq_length: int | None = None
    gradient_accumulation_steps: int | None = None
    strategy: str = "default"
    precision: str = precisions.AUTO
    set: list[str] = dataclasses.field(default_factory=list)  # KEY=VALUE overrides
    overwrite: bool = False


def parse_overrides(items: list[str]) -> tuple[dict, dict, dict]:
    """--set KEY=VALUE items -> (TrainConfig fields, task options, run options), each value
    converted by its field's type (`albert_tf.infra.arguments`: the one KEY=VALUE grammar)."""

    texts = arguments.parse_overrides(items, "--set")
    task_texts = {key: texts.pop(key) for key in list(texts) if key in TASK_KEYS}
    task = arguments.convert_overrides(TaskRecord, task_texts, "--set")
    train = arguments.convert_overrides(TrainConfig, texts, "--set",
                                        exclude=("output_dir", "verbose"))
    run = {key: train.pop(key) for key in RUN_KEYS if key in train}
    return train, task, run


def _tokenizer(checkpoint: OpenedCheckpoint, run: dict):

    files = checkpoint.tokenizer_files(run.get("spm_model"), run.get("do_lower_case"),
                                       run.get("keep_accents"))
    if not files.spm_model:
        raise UsageError(f"{checkpoint.path} {MISSING_TOKENIZER}; pass --set spm_model=PATH")
    return files.load(), files  # AlbertTokenizer or WordPieceTokenizer


def check_settings(settings: dict, flags: dict, train_set: dict) -> None:
    """Refuses a TrainConfig setting out of its range (NaN, 0, a negative rate, ...),
    naming it as the user gave it (--learning-rate, --set weight_decay), before any work."""
    names = {**{key: f"--set {key}" for key in train_set},
             **{key: "--" + key.replace("_", "-") for key, value in flags.items()
                if value is not None}}
    arguments.check_numbers(TrainConfig, settings, names=names)
    check_accumulation(settings["batch_size"], settings.get("gradient_accumulation_steps") or 1,
                       f" ({names.get('gradient_accumulation_steps', 'the settings')})")
    if settings.get("buckets"):
        check_buckets(settings["buckets"], settings["seq_length"])


def check_task_options(task: str, seq_length: int, options: dict) -> None:
    """Refuses --set task options that do not apply to `task` or do not fit, before any work."""
    kind = family(task).record_task
    if kind is None:
        if options:
            raise UsageError(f"--set {next(iter(options))}: applies to "
                             f"{listed(lambda other: other.record_task)} only, not {task}")
        return
    # The classes come from the data; one stands in for them while the options are checked.
    classes = {"num_classes": 1} if tasks.get(kind).classes else {}
    try:
        TaskRecord.create(kind, seq_length=seq_length, **classes, **options)
    except TaskRecordError as e:
        raise UsageError(f"--set: {e}") from None


def check_output(checkpoint: str, output: str, overwrite: bool, data: list[str] | None = None
                 ) -> bool:
    """Refuses an --output that would destroy --checkpoint or a --data path or, without
    `overwrite`, an existing run. Returns whether `output` exists and is to be replaced."""
    source = checkpoint if os.path.isdir(checkpoint) else os.path.dirname(checkpoint) or "."
    atomic.check_not_input(output, [("--checkpoint directory", source)], "--output",
                           "fine-tuning would overwrite the model it starts from")
    atomic.check_not_input(
        output, [(f"--data {'directory' if os.path.isdir(path) else 'file'}", path)
                 for path in data or ()],
        "--output", "fine-tuning would overwrite the data it reads")
    if os.path.isdir(output) and not os.listdir(output):
        return False
    # The one rule (atomic.check_replaceable): a run is replaced only with --overwrite,
    # and a directory holding anything a run does not write never is.
    atomic.check_replaceable(output, RUN_ENTRIES, replace=overwrite, option="--output",
                             flag="--overwrite", product="a fine-tuned model",
                             writer="fine-tuning", error=UsageError)
    return os.path.lexists(output)


def run(args: FinetuneOptions) -> dict:
    """Builds the strategy, tokenizer, task and config from `args`, then fine-tunes.

    Returns:
      {"best", "history", "checkpoint" (the output), "predictions" (files written)}.
    Raises:
      UserError (and its kinds): a refusal, one line naming what and where.
    """
    # An alias (--task classify) runs, and is named, as the table's name.
    args = dataclasses.replace(args, task=canonical_task(args.task))
    settings = task_defaults(args.task)
    train_set, task_options, run_options = parse_overrides(args.set)
    settings.update(train_set)
    flags = {"epochs": args.epochs, "batch_size": args.batch_size,
             "learning_rate": args.learning_rate, "seq_length": args.seq_length,
             "gradient_accumulation_steps": args.gradient_accumulation_steps}
    settings.update({k: v for k, v in flags.items() if v is not None})
    if args.epochs is not None and "train_steps" not in train_set:
        settings["train_steps"] = None  # --epochs replaces a default step count
    check_settings(settings, flags, train_set)
    check_task_options(args.task, settings["seq_length"], task_options)
    checkpoint = resolve_checkpoint(args.checkpoint)  # a hub handle or released name too
    replace = check_output(checkpoint, args.output, args.overwrite, args.data)
    source = open_checkpoint(checkpoint)  # once: config, tokenizer and weights
    source.config.check_sequence_length(  # before any data is read
        settings["seq_length"], where=f"checkpoint {args.checkpoint}")
    strategy = distribute.create_strategy(args.strategy)
    policy = distribute.set_precision(args.precision, strategy)
    tokenizer, files = _tokenizer(source, run_options)
    task = build_task(args, tokenizer, settings["seq_length"], task_options)
    logger.info("%s on %s with %s, %s", task.name, args.checkpoint, type(strategy).__name__, policy)

    def train(output_dir: str) -> dict:
        config = TrainConfig(output_dir=output_dir, spm_model=files.spm_model,
                             do_lower_case=tokenizer.do_lower_case,
                             keep_accents=tokenizer.keep_accents,
                             tokenize_chinese_chars=files.tokenize_chinese_chars, **settings)
        return finetune(task, source, config, strategy)

    return _train_into(args.output, replace, train, distribute.is_chief(strategy))


def _train_into(output: str, replace: bool, train, chief: bool = True) -> dict:
    """`train(directory)` into a hidden staging directory that becomes `output` only once
    the run is complete (`atomic.claimed_directory`: `output` is claimed meanwhile, so a
    second run into it fails at once; `replace` lets it replace an existing `output`
    as a whole). A failure or interrupt removes the staging directory: `output` is as
    it was. Only the chief of a multi-worker run writes `output`; the other workers
    train into a scratch directory that is removed."""
    if not chief:
        with tempfile.TemporaryDirectory(prefix="albert-tf-finetune-worker-") as scratch:
            return train(scratch)
    with atomic.claimed_directory(output, replace=replace, writes=RUN_ENTRIES,
                                  error=UsageError) as staging:
        logger.info("writing the run to %s, which becomes %s when complete", staging, output)
        summary = train(staging)
    summary["checkpoint"] = output
    summary["predictions"] = [os.path.join(output, os.path.relpath(p, staging))
                              for p in summary["predictions"]]
    return summary


def run_command(args: argparse.Namespace) -> int:
    """`albert-tf finetune` with its parsed arguments (`command.parser`)."""
    cli.setup_logging()
    # errors: one line, exit 2 (cli.command)
    summary = run(FinetuneOptions(**vars(args)))
    best = summary["best"]
    if best:
        logger.info("best: %s", metrics.results_line(best))
    logger.info("fine-tuned model in %s%s", summary["checkpoint"],
                "; predictions: " + ", ".join(summary["predictions"]) if summary["predictions"] else "")
    return 0


@cli.command("finetune")
def main(argv: list[str]) -> int:
    return run_command(command.parse(argv))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
