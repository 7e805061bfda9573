"""`albert-tf create-data`: SOP (or NSP, or no) pairs with whole-word n-gram masking, in sharded TFRecords.

The command line (`create_data.py` does the work): `parser` holds the options (the
generation ones shared with the Beam pipeline, `add_generation_arguments`); `parse` reads
them, importing no TensorFlow, and the CLI imports the job only after it, so
`albert-tf create-data --help` and a usage error answer at once.
"""

from __future__ import annotations

import argparse

from albert_tf import errors
from albert_tf.infra import arguments

from . import pairs as sop

DOCUMENTS_PER_SHARD = 256

CommandLineError = errors.UsageError
CommandLineParser = arguments.ArgumentParser


def add_generation_arguments(parser: argparse.ArgumentParser) -> None:
    """The generation options, shared with the Beam pipeline's command line."""
    defaults = sop.GenerationOptions()
    parser.add_argument("--input", default=None, help=(
        "corpus: comma-separated text files or globs (one sentence per line, blank line "
        "between documents; .gz allowed), tfds:NAME[:SPLIT[:TEXT_FIELD]], or 'embedded' "
        "(the default: the embedded stdlib-prose corpus)"))
    parser.add_argument("--output", "--output-dir", dest="output_dir", required=True,
                        help="where the shards and summary.json go")
    parser.add_argument("--spm-model", required=True,
                        help="the vocabulary: a SentencePiece model (spiece.model) or a WordPiece "
                        "vocab.txt (a .txt file)")
    parser.add_argument("--cased", action="store_true", help="do not lower-case (cased vocabularies)")
    parser.add_argument("--seq-length", "--max-seq-length", dest="max_seq_length", type=int,
                        default=defaults.max_seq_length,
                        help="tokens per instance incl. [CLS]/[SEP] (default %(default)s)")
    parser.add_argument("--max-predictions-per-seq", type=int, default=defaults.max_predictions_per_seq,
                        help="masked positions per instance (default %(default)s)")
    parser.add_argument("--masked-lm-prob", type=float, default=defaults.masked_lm_prob,
                        help="fraction of tokens masked (default %(default)s)")
    parser.add_argument("--short-seq-prob", type=float, default=defaults.short_seq_prob,
                        help="probability of a shorter target length (default %(default)s)")
    parser.add_argument("--dupe-factor", type=int, default=defaults.dupe_factor,
                        help="passes over each document, each with new masks (default %(default)s)")
    parser.add_argument("--seed", type=int, default=defaults.seed, help="random seed (default %(default)s)")
    parser.add_argument("--objective", choices=tuple(sop.OBJECTIVES), default=defaults.objective,
                        help="sentence-pair task: sop (ALBERT), nsp (BERT: negatives from other "
                        "documents) or none (no sentence-pair loss) (default %(default)s)")


def options_from_args(args: argparse.Namespace) -> sop.GenerationOptions:
    return sop.GenerationOptions(
        max_seq_length=args.max_seq_length, max_predictions_per_seq=args.max_predictions_per_seq,
        masked_lm_prob=args.masked_lm_prob, short_seq_prob=args.short_seq_prob,
        dupe_factor=args.dupe_factor, seed=args.seed, objective=args.objective)


def parser() -> argparse.ArgumentParser:
    p = CommandLineParser(prog="albert-tf create-data", description=__doc__.split("\n\n")[0])
    add_generation_arguments(p)
    p.add_argument("--documents-per-shard", type=int, default=DOCUMENTS_PER_SHARD,
                   help="documents per output shard (default %(default)s)")
    p.add_argument("--processes", type=int, default=None,
                   help="worker processes (default: all cores)")
    return p


def parse(argv: list[str]) -> argparse.Namespace:
    """The command line, parsed (`--help` exits here; a usage error is a UsageError)."""
    return parser().parse_args(argv)
