"""`albert-tf pretrain`'s command line: MLM + SOP pretraining with `model.fit` (`run.py`).

`parse` reads the options, importing no TensorFlow; the CLI imports the job
(`run.run_command`: TensorFlow, Keras) only after it, so `albert-tf pretrain --help` and
a usage error answer at once.
"""

from __future__ import annotations

import argparse

from albert_tf import precisions
from albert_tf.checkpoint.hub import CHECKPOINT_HELP
from albert_tf.infra import arguments


def parser() -> argparse.ArgumentParser:
    parser = arguments.ArgumentParser(prog="albert-tf pretrain", description=(
        "Pretrain ALBERT (MLM + SOP) with model.fit. Options override --config; "
        "KEY=VALUE overrides any PretrainConfig field (albert.FIELD=VALUE: the model config)."))
    parser.add_argument("overrides", nargs="*", metavar="KEY=VALUE")
    parser.add_argument("--config", help="JSON run configuration")
    parser.add_argument("--model", help="preset (albert-base, ...) or albert_config.json")
    parser.add_argument("--train-data", help="TFRecord glob(s) from albert-tf create-data")
    parser.add_argument("--eval-data", help="held-out TFRecord glob(s)")
    parser.add_argument("--output", "--output-dir", dest="output_dir",
                        help="checkpoints, TensorBoard logs and model/")
    parser.add_argument("--spm-model", help="the vocabulary to ship with the result: a "
                        "SentencePiece model, or a WordPiece vocab.txt")
    parser.add_argument("--init-checkpoint", help=f"start from these weights: {CHECKPOINT_HELP}")
    parser.add_argument("--global-batch-size", type=int)
    parser.add_argument("--train-steps", type=int)
    parser.add_argument("--gradient-accumulation-steps", type=int, metavar="N",
                        help="run each batch as N parts in turn, one update: less memory")
    parser.add_argument("--optimizer", choices=("lamb", "adamw"))
    parser.add_argument("--precision", help=precisions.listed(precisions.TRAINING_WORDS))
    parser.add_argument("--strategy", help="default, cpu, mirrored, multi_worker, tpu[:NAME]")
    parser.add_argument("--allow-change", action="append", default=[], metavar="FIELD[,FIELD]",
                        help="resume although these settings differ from the run's "
                             "run_config.json (e.g. global_batch_size, albert.num_hidden_layers)")
    return parser


def parse(argv: list[str]) -> argparse.Namespace:
    """The command line, parsed (`--help` exits here; a usage error is a UsageError)."""
    return parser().parse_intermixed_args(argv)
