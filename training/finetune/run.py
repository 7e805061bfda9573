"""`albert-tf finetune`: fine-tune a checkpoint on GLUE, SQuAD, RACE or your own files.

Tasks and their data (--data):
  glue/<task>   cola sst2 mrpc qqp stsb mnli qnli rte wnli, from tensorflow-datasets
                (--data: the TFDS data directory, optional); test predictions are
                written in the GLUE submission format (<Task>.tsv)
  squad/v1.1    SQuAD from tensorflow-datasets, or the official JSON files:
  squad/v2.0    --data DIR holding train-v2.0.json / dev-v2.0.json, or --data TRAIN DEV
  race          --data RACE (the released directory: train/dev/test/{middle,high}/*.txt)
  classify      your CSV / TSV / JSONL files: --data TRAIN [EVAL] and
  regress       --columns TEXT[,TEXT2][:LABEL] (LABEL defaults to "label")

Defaults per task are the original ALBERT scripts' (run_glue.sh, README for SQuAD,
run_race.py); flags and --set KEY=VALUE override them. --set keys: train_steps,
warmup_steps, warmup_proportion, optimizer (adamw|lamb), weight_decay, eval_batch_size,
patience, seed, buckets (e.g. 32,64,128 or none), jit_compile, spm_model,
do_lower_case, doc_stride, max_query_length, n_best, max_answer_length, max_qa_length.

Example:
  albert-tf finetune --task glue/mrpc --checkpoint albert_base/ --output out/mrpc
  albert-tf finetune --task classify --checkpoint albert_base/ --output out/reviews \\
      --data train.csv dev.csv --columns review:sentiment --epochs 3
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import sys

from albert_tf import runio
from albert_tf.checkpoint import check_seq_length

logger = logging.getLogger("albert_tf.finetune")

FILE_TASKS = ("classify", "regress")
SQUAD_TASKS = ("squad/v1.1", "squad/v2.0")
# Original defaults: SQuAD from the ALBERT README, RACE from run_race.py / README
# (v2 learning rate), own files as BERT's usual fine-tuning recipe.
SQUAD_DEFAULTS = dict(epochs=2, train_steps=None, warmup_proportion=0.1, learning_rate=5e-5,
                      batch_size=48, seq_length=384)
FILE_DEFAULTS = dict(epochs=3, train_steps=None, warmup_proportion=0.1, learning_rate=2e-5,
                     batch_size=32, seq_length=128)
TASK_KEYS = {"doc_stride": int, "max_query_length": int, "n_best": int,
             "max_answer_length": int, "max_qa_length": int}
RUN_KEYS = {"spm_model": str, "do_lower_case": "bool"}


UsageError = runio.UsageError


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line and status 2, not argparse's usage dump
        raise UsageError(message)


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="albert-tf finetune", description=__doc__.splitlines()[0],
                formatter_class=argparse.RawDescriptionHelpFormatter,
                epilog="\n".join(__doc__.splitlines()[2:]))
    p.add_argument("--task", required=True, help="glue/<task>, squad/v1.1, squad/v2.0, race, "
                                                 "classify or regress")
    p.add_argument("--checkpoint", required=True,
                   help="TF1, Hugging Face or albert-tf checkpoint to start from")
    p.add_argument("--output", required=True, help="directory for the fine-tuned model")
    p.add_argument("--data", nargs="+", metavar="PATH", help="see the task list below")
    p.add_argument("--columns", help="TEXT[,TEXT2][:LABEL] for classify / regress")
    p.add_argument("--epochs", type=int, help="passes over the training data (overrides the "
                                              "default number of steps)")
    p.add_argument("--batch-size", type=int)
    p.add_argument("--learning-rate", type=float)
    p.add_argument("--seq-length", type=int)
    p.add_argument("--strategy", default="default",
                   help="default, cpu, mirrored, multi_worker, tpu or tpu:NAME")
    p.add_argument("--precision", default="auto",
                   help="auto, float32, mixed_float16 or mixed_bfloat16")
    p.add_argument("--set", nargs="+", default=[], metavar="KEY=VALUE",
                   help="other hyperparameters (see below)")
    return p


def task_defaults(task: str) -> dict:
    """The original scripts' hyperparameters for `task` (TrainConfig fields)."""
    from albert_tf.training.finetune import glue, race

    if task.startswith("glue/"):
        spec = glue.get_task(task)
        return dict(train_steps=spec.train_steps, warmup_steps=spec.warmup_steps,
                    learning_rate=spec.learning_rate, batch_size=spec.batch_size, seq_length=512)
    if task in SQUAD_TASKS:
        return dict(SQUAD_DEFAULTS)
    if task == "race":
        return {k: v for k, v in race.DEFAULTS.items() if k != "max_qa_length"}
    if task in FILE_TASKS:
        return dict(FILE_DEFAULTS)
    raise UsageError(f"--task {task!r}: expected glue/<task>, squad/v1.1, squad/v2.0, race, "
                     "classify or regress")


def parse_overrides(items: list[str]) -> tuple[dict, dict, dict]:
    """--set KEY=VALUE items -> (TrainConfig fields, task options, run options)."""
    from albert_tf.training.finetune.train import TrainConfig

    train_types = {f.name: f.type for f in dataclasses.fields(TrainConfig)
                   if f.name not in ("output_dir", "verbose", *RUN_KEYS)}
    train, task, run = {}, {}, {}
    for key, text in runio.parse_overrides(items, "--set").items():
        for table, kinds in ((train, train_types), (task, TASK_KEYS), (run, RUN_KEYS)):
            if key in kinds:
                table[key] = _convert(key, text, kinds[key])
                break
        else:
            raise UsageError(f"--set {key!r}: unknown key")
    return train, task, run


def _convert(key: str, text: str, kind):
    kind = str(kind)
    try:
        if key == "buckets":
            return [] if text.lower() == "none" else [int(x) for x in text.split(",")]
        if key == "jit_compile":  # "auto": XLA on GPUs only (distribute.resolve_jit_compile)
            return None if text == "auto" else _bool(text)
        if "bool" in kind:
            return _bool(text)
        if "float" in kind:
            return float(text)
        if "int" in kind:
            return None if text.lower() == "none" else int(text)
        return text
    except ValueError:
        raise UsageError(f"--set {key}={text!r}: not a valid value") from None


def _bool(text: str) -> bool:
    if text.lower() in ("1", "true", "yes"):
        return True
    if text.lower() in ("0", "false", "no"):
        return False
    raise ValueError(text)


def parse_columns(spec: str | None) -> tuple[list[str], str]:
    """"a,b:label" -> (["a", "b"], "label"); the label column defaults to "label"."""
    if not spec:
        raise UsageError("classify / regress need --columns TEXT[,TEXT2][:LABEL]")
    texts, _, label = spec.partition(":")
    columns = [c for c in texts.split(",") if c]
    if not 1 <= len(columns) <= 2:
        raise UsageError(f"--columns {spec!r}: give one or two text columns")
    return columns, label or "label"


def build_task(args, tokenizer, seq_length: int, options: dict):
    """The task object for `args.task`, its data read and tokenized."""
    from albert_tf.training.finetune import race, sequence
    from albert_tf.training.finetune.examples import DataError

    data = args.data or []
    if args.task.startswith("glue/"):
        return sequence.glue_task(args.task, tokenizer, seq_length, data[0] if data else None)
    if args.task in SQUAD_TASKS:
        return _squad_task(args.task.split("/")[1], data, tokenizer, seq_length, options)
    if args.task == "race":
        if len(data) != 1:
            raise UsageError("race needs --data RACE_DIR (with train/ and dev/)")
        splits = {s: race.read_race(race.find_split(data[0], s)) for s in ("train", "dev")}
        try:  # the test split is optional: its accuracy is reported at the end
            test = race.read_race(race.find_split(data[0], "test"))
        except DataError:
            test = None
        return race.RaceTask(tokenizer, splits["train"], splits["dev"], test, seq_length,
                             options.get("max_qa_length", race.DEFAULTS["max_qa_length"]))
    if not 1 <= len(data) <= 2:
        raise UsageError(f"{args.task} needs --data TRAIN_FILE [EVAL_FILE]")
    columns, label = parse_columns(args.columns)
    return sequence.file_task(data[0], data[1] if len(data) == 2 else None, columns, label,
                              args.task == "regress", tokenizer, seq_length)


def _squad_task(version: str, data: list[str], tokenizer, seq_length: int, options: dict):
    from albert_tf.training.finetune import squad, squad_data

    names = (f"train-{version}.json", f"dev-{version}.json")
    if len(data) == 1 and all(os.path.isfile(os.path.join(data[0], n)) for n in names):
        data = [os.path.join(data[0], n) for n in names]
    if len(data) == 2 or (len(data) == 1 and os.path.isfile(data[0])):
        train = squad_data.read_squad_json(data[0])
        dev = squad_data.read_squad_json(data[1]) if len(data) == 2 else None
    elif len(data) <= 1:
        data_dir = data[0] if data else None
        train = squad_data.load_squad_tfds(version, "train", data_dir)
        dev = squad_data.load_squad_tfds(version, "validation", data_dir)
    else:
        raise UsageError("squad takes --data DIR, or --data TRAIN.json [DEV.json]")
    return squad.SquadTask(version, train, dev, tokenizer, seq_length, **options)


def _tokenizer(checkpoint: str, run: dict):
    from albert_tf.checkpoint_tokenizer import checkpoint_tokenizer
    from albert_tf.tokenizer import AlbertTokenizer

    files = checkpoint_tokenizer(checkpoint, run.get("spm_model"), run.get("do_lower_case"))
    if not files.spm_model:
        raise UsageError(f"no SentencePiece model found beside {checkpoint}; "
                         "pass --set spm_model=PATH")
    return AlbertTokenizer(files.spm_model, do_lower_case=files.do_lower_case), files.spm_model


def run(args) -> dict:
    """Builds the strategy, tokenizer, task and config from parsed `args`, then fine-tunes."""
    from albert_tf.training import distribute
    from albert_tf.training.finetune.train import TrainConfig, finetune

    settings = task_defaults(args.task)
    train_set, task_options, run_options = parse_overrides(args.set)
    settings.update(train_set)
    flags = {"epochs": args.epochs, "batch_size": args.batch_size,
             "learning_rate": args.learning_rate, "seq_length": args.seq_length}
    settings.update({k: v for k, v in flags.items() if v is not None})
    if args.epochs is not None and "train_steps" not in train_set:
        settings["train_steps"] = None  # --epochs replaces a default step count
    check_seq_length(args.checkpoint, settings["seq_length"])  # before any data is read
    strategy = distribute.create_strategy(args.strategy)
    policy = distribute.set_precision(args.precision, strategy)
    tokenizer, spm_model = _tokenizer(args.checkpoint, run_options)
    task = build_task(args, tokenizer, settings["seq_length"], task_options)
    config = TrainConfig(output_dir=args.output, spm_model=spm_model,
                         do_lower_case=tokenizer.do_lower_case, **settings)
    logger.info("%s on %s with %s, %s", task.name, args.checkpoint, type(strategy).__name__, policy)
    return finetune(task, args.checkpoint, config, strategy)


@runio.command("finetune")
def main(argv: list[str]) -> int:
    runio.setup_logging()
    summary = run(_parser().parse_args(argv))  # errors: one line, exit 2 (runio.command)
    best = summary["best"]
    if best:
        logger.info("best: %s", ", ".join(f"{k}={v:.4f}" for k, v in best.items()))
    logger.info("fine-tuned model in %s%s", summary["checkpoint"],
                "; predictions: " + ", ".join(summary["predictions"]) if summary["predictions"] else "")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
