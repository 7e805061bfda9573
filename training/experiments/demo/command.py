"""`albert-tf demo`: the whole job, end to end, on real text with no download.

The command line (`run.py` runs the stages): `DemoOptions`, what the demo is asked,
`parser`, its options, and `parse`, which checks their values. It imports no TensorFlow:
the CLI imports the job only after parsing, so `albert-tf demo --help`, a usage error and
a bad value answer at once.
"""

from __future__ import annotations

import argparse
import dataclasses
import os

from albert_tf import precisions, ranges
from albert_tf.config import AlbertConfig
from albert_tf.errors import UserError
from albert_tf.infra import arguments, atomic

from ...data import corpus, pairs
from . import budget as demo_budget


class DemoError(UserError):
    """Bad input for the demo: reported as one line."""


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


def parse(argv: list[str]) -> DemoOptions:
    """The command line, parsed (`--help` exits here; a usage error is a UsageError) and
    checked (`options_from_args`)."""
    return options_from_args(parser().parse_args(argv))


def options_from_args(args: argparse.Namespace) -> DemoOptions:
    """The parsed command line as DemoOptions; a bad value is a DemoError (one line), found
    before any stage runs (and before TensorFlow is imported)."""
    if args.size and args.size not in AlbertConfig.size_names():
        raise DemoError(f"unknown size {args.size!r}; choose one of "
                        f"{', '.join(AlbertConfig.size_names())}")
    for name in ("steps", "batch_size", "vocab_size", "classifier_epochs"):
        if getattr(args, name) is not None and getattr(args, name) < 1:
            raise DemoError(f"--{name.replace('_', '-')} must be at least 1")
    try:  # the budget's rule
        ranges.check_number("--minutes", args.minutes, float,
                            {ranges.EXCLUSIVE_MINIMUM: 0.0,
                            ranges.MAXIMUM: demo_budget.MAX_MINUTES},
                            " (the time budget in minutes; --steps for a fixed count)")
    except UserError as e:
        raise DemoError(str(e)) from None
    # The sequences must fit the position table of the size (without one, the demo's model
    # is albert-base resized, its table sized from --seq-length up to the size's) and hold a
    # pretraining pair.
    pairs.check_pair_seq_length(args.seq_length, AlbertConfig.from_size(
        args.size or "albert-base").max_position_embeddings, where="--seq-length")
    try:
        precisions.training_precision(args.precision)
    except ValueError as e:
        raise DemoError(f"--precision: {e}") from None
    if args.questions and not os.path.isfile(args.questions):
        raise DemoError(f"--questions {args.questions}: no such file")
    if args.corpus:
        try:  # a glob that matches nothing (remote ones load TensorFlow to ask)
            corpus.expand_patterns(args.corpus)
        except UserError as e:
            raise DemoError(str(e)) from None
    atomic.check_writable_directory(args.output, "--output")
    return DemoOptions(output=args.output, corpus=args.corpus, tfds=args.tfds,
                       size=args.size, steps=args.steps, minutes=args.minutes,
                       batch_size=args.batch_size,
                       seq_length=args.seq_length, vocab_size=args.vocab_size,
                       classifier_epochs=args.classifier_epochs, questions=args.questions,
                       precision=args.precision)
