"""`albert-tf demo`: the whole job, end to end, on real text with no download.

The command line (`run.py` runs the stages): `DemoOptions`, what the demo is asked, and
`parser`, its options. It imports no TensorFlow: the CLI imports the job only after
parsing, so `albert-tf demo --help` and a usage error answer at once.
"""

from __future__ import annotations

import argparse
import dataclasses

from albert_tf import precisions
from albert_tf.infra import arguments

from . import budget as demo_budget


@dataclasses.dataclass(frozen=True)
class DemoOptions:
    """What `albert-tf demo` is asked (its command line's values, and the recipe's)."""

    output: str = "albert_demo"
    corpus: str | None = None       # text files/globs; None: the embedded corpus
    tfds: str | None = None         # NAME[:SPLIT[:FIELD]] of a tensorflow-datasets corpus
    size: str | None = None         # None: the small demo model
    steps: int | None = None        # None: as many as fit in `minutes` (budget.py)
    minutes: float = demo_budget.DEFAULT_MINUTES
    batch_size: int = 64
    seq_length: int = 64
    vocab_size: int = 2000
    dupe_factor: int = 3  # distinct pairs for the ~4,000+ steps a budget run takes (27,900 at 1)
    learning_rate: float = 0.01
    classifier_epochs: int = 3
    classifier_learning_rate: float = 2e-4
    # auto: the faster on this CPU of float32 under XLA and (with bf16 instructions)
    # mixed_bfloat16, timed on the demo's model (pretrain/precision.py); the classifiers
    # are fine-tuned the same way.
    precision: str = precisions.AUTO
    questions: str | None = None    # JSON [{"text", "answer"}] of fill-mask questions to score


def parser() -> argparse.ArgumentParser:
    defaults = DemoOptions()
    p = arguments.ArgumentParser(prog="albert-tf demo", description=__doc__.split("\n")[0])
    p.add_argument("--output", default=defaults.output, help="where every stage writes")
    source = p.add_mutually_exclusive_group()
    source.add_argument("--corpus", help="text files or globs (one sentence per line, blank "
                        "line between documents, .gz allowed); default: the embedded corpus")
    source.add_argument("--tfds", help="a tensorflow-datasets corpus NAME[:SPLIT[:FIELD]], "
                        "e.g. wikipedia/20230601.en:train:text")
    arguments.add_renamed(p, "--size", "--preset", help="the model's size (albert-base, "
                          "albert-large, ...: `albert-tf params`); "
                   "default: a small ALBERT for CPUs")
    budget = p.add_mutually_exclusive_group()
    budget.add_argument("--minutes", type=float, default=defaults.minutes,
                        help="the time budget: pretraining takes as many steps as fit, "
                        "measured during its first steps (default %(default)g)")
    budget.add_argument("--steps", type=int, help="a fixed number of pretraining steps "
                        "instead (no measuring: an exactly reproducible run)")
    p.add_argument("--batch-size", type=int, default=defaults.batch_size)
    p.add_argument("--seq-length", type=int, default=defaults.seq_length)
    p.add_argument("--vocab-size", type=int, default=defaults.vocab_size)
    p.add_argument("--classifier-epochs", type=int, default=defaults.classifier_epochs)
    p.add_argument("--precision", default=defaults.precision,
                   help="auto (mixed_bfloat16 where the CPU has bf16 instructions, else "
                   "float32 with XLA), float32 or mixed_bfloat16")
    p.add_argument("--questions", help="JSON list of {\"text\", \"answer\"} fill-mask "
                   "questions to score (top 5)")
    return p


def parse(argv: list[str]) -> argparse.Namespace:
    """The command line, parsed (`--help` exits here; a usage error is a UsageError);
    `run.options_from_args` checks its values."""
    return parser().parse_args(argv)
