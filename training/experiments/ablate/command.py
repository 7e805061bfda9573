"""`albert-tf ablate`: the paper's ablations (sharing, embedding size, objective, dropout) in one command.

The command line (`run.py` runs the grid): `AblateOptions`, what an ablation is asked,
checked when made; `parse_args`, its options. It imports no TensorFlow: the CLI imports
the job only after parsing, so `albert-tf ablate --help` and a usage error answer at once.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

from albert_tf import AlbertConfig
from albert_tf.errors import UsageError
from albert_tf.infra import arguments
from albert_tf.infra.arguments import number_field

from ...data import pairs as sop
from . import grid as ablate_grid

# The base model for two CPU cores: the paper's shape (heads = H/64, FFN = 4H,
# all layers shared, E = 128), narrow and shallow; sized by measurement (README).
# E = H/2 (the paper's base has E = H/6; a 128-wide model has little to factorize).
SMALL_MODEL = {"hidden_size": 128, "num_hidden_layers": 6, "num_attention_heads": 2,
               "intermediate_size": 512, "embedding_size": 64, "max_position_embeddings": 128}


@dataclasses.dataclass(frozen=True)
class AblateOptions:
    """One ablation run. Everything but `output` and `grid` must match on a rerun."""

    output: str
    grid: str = "paper"
    corpus: str | None = None           # corpus spec; None: the embedded corpus
    size: str | None = None             # base model: a size or albert_config.json; None: SMALL_MODEL
    # Numbers: ranges checked by `arguments.check_numbers` (the one numeric check).
    steps: int = number_field(600, minimum=1)
    batch_size: int = number_field(32, minimum=1)
    seq_length: int = 64
    optimizer: str = "adamw"            # at batch 32 (LAMB is for the paper's 4096)
    learning_rate: float = number_field(0.001, exclusive_minimum=0.0)
    vocab_size: int = number_field(3000, minimum=1)
    dupe_factor: int = number_field(2, minimum=1)
    embedding_sizes: tuple[int, ...] | None = None  # None: ablate_grid.default_embedding_sizes
    finetune_steps: int = number_field(100, minimum=1)
    finetune_learning_rate: float = number_field(1e-4, exclusive_minimum=0.0)
    seed: int = number_field(12345, minimum=0)

    def __post_init__(self):
        if self.grid not in ablate_grid.GRIDS:
            raise ValueError(f"--grid {self.grid!r} is not one of {', '.join(ablate_grid.GRIDS)}")
        arguments.check_numbers(self, names={name: "--" + name.replace("_", "-") for name in (
            "steps", "batch_size", "vocab_size", "dupe_factor", "finetune_steps", "seed")})
        # Before any data is made: the base model's position table bounds it.
        sop.check_pair_seq_length(self.seq_length, base_model(self)["max_position_embeddings"],
                                  where="--seq-length")
        if self.embedding_sizes is not None:
            ablate_grid.check_embedding_sizes(self.embedding_sizes,
                                              base_model(self)["hidden_size"])

    def budget(self) -> dict[str, Any]:
        """What every configuration's result depends on besides its setting."""
        return {k: v for k, v in dataclasses.asdict(self).items() if k not in ("output", "grid")}


def base_model(opts: AblateOptions) -> dict[str, Any]:
    """The base model's AlbertConfig fields: a size, a config file, or SMALL_MODEL."""

    if not opts.size:
        return {**AlbertConfig().to_dict(), **SMALL_MODEL}
    if opts.size in AlbertConfig.size_names():
        return AlbertConfig.from_size(opts.size).to_dict()
    return AlbertConfig.from_json_file(opts.size).to_dict()


def parse_args(argv: list[str]) -> tuple[AblateOptions, bool]:
    d = AblateOptions(output="")
    p = arguments.ArgumentParser(prog="albert-tf ablate", description=__doc__.split("\n\n")[0])
    p.add_argument("--output", required=True, help="where the data, runs, tables and plots go")
    p.add_argument("--grid", default=d.grid, choices=ablate_grid.GRIDS,
                   help="paper (all four tables) or one of them (default %(default)s)")
    source = p.add_mutually_exclusive_group()
    source.add_argument("--corpus", help="text files or globs (one sentence per line, blank "
                        "line between documents); default: the embedded corpus")
    source.add_argument("--tfds", help="a tensorflow-datasets corpus NAME[:SPLIT[:FIELD]]")
    arguments.add_renamed(p, "--size", "--preset", help="base model: a size (albert-base, "
                          "...: `albert-tf params`) or an "
                   "albert_config.json; default: a small ALBERT for CPUs")
    p.add_argument("--steps", type=int, default=d.steps, help="pretraining steps per "
                   "configuration (default %(default)s)")
    p.add_argument("--batch-size", type=int, default=d.batch_size)
    p.add_argument("--seq-length", type=int, default=d.seq_length)
    p.add_argument("--embedding-sizes", help="E values of the embedding table, e.g. "
                   "64,128,256,768 (default: the paper's for H >= 768, else H/4,H/2,H)")
    p.add_argument("--vocab-size", type=int, default=d.vocab_size,
                   help="SentencePiece pieces (default %(default)s)")
    p.add_argument("--dupe-factor", type=int, default=d.dupe_factor,
                   help="masked copies of the training text per objective, each with other "
                   "masks and pairs (default %(default)s)")
    p.add_argument("--finetune-steps", type=int, default=d.finetune_steps,
                   help="downstream fine-tuning steps per model (default %(default)s)")
    p.add_argument("--seed", type=int, default=d.seed)
    p.add_argument("--report-only", action="store_true",
                   help="train nothing: write the tables and plots of the finished configurations")
    args = p.parse_args(argv)
    try:
        sizes = (tuple(int(x) for x in args.embedding_sizes.split(","))
                 if args.embedding_sizes else None)
    except ValueError:
        raise UsageError(f"--embedding-sizes {args.embedding_sizes!r}: expected "
                         "comma-separated integers") from None
    if args.size:

        if args.size not in AlbertConfig.size_names() and not os.path.isfile(args.size):
            raise UsageError(f"--size {args.size!r} is neither a size "
                             f"({', '.join(AlbertConfig.size_names())}) nor a file")
    corpus = f"tfds:{args.tfds}" if args.tfds else args.corpus
    return AblateOptions(output=args.output, grid=args.grid, corpus=corpus, size=args.size,
                         steps=args.steps, batch_size=args.batch_size,
                         seq_length=args.seq_length, vocab_size=args.vocab_size,
                         dupe_factor=args.dupe_factor, embedding_sizes=sizes,
                         finetune_steps=args.finetune_steps,
                         seed=args.seed), args.report_only


def parse(argv: list[str]) -> tuple[AblateOptions, bool]:
    """The command line as (options, --report-only), checked (`parse_args`)."""
    return parse_args(argv)
