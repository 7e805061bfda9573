"""The ablation grids of `albert-tf ablate`, as data: which configurations each paper table needs.

A configuration changes one design choice of a base model at a time, as the
paper does (Lan et al., 2020, Tables 3, 4, 5 and the dropout table):

  embedding   E = 64 / 128 / 256 (/ 768), cross-layer sharing all and none (Table 3)
  sharing     all / attention only / FFN only / none, at the base E (Table 4)
  objective   sentence-pair task none / NSP / SOP (Table 5)
  dropout     pretraining dropout off (ALBERT) / on (BERT's 0.1)  (the dropout table)

Configurations are identified by what they change, so one that two tables need
(the base model is in all four) is trained once. `paper` is the union.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from albert_tf import ranges
from albert_tf.config import SHARING_MODES
from albert_tf.errors import UsageError

from ...data import pairs

GRIDS = ("paper", "sharing", "embedding", "objective", "dropout")
# Dropout "on" is BERT's rate for both hidden and attention probabilities.
DROPOUT_ON = 0.1
EMBEDDING_SIZES = (64, 128, 256)  # the paper's, with 768 = H of ALBERT-base when affordable


def default_embedding_sizes(hidden_size: int) -> tuple[int, ...]:
    """The E values of the embedding table for a base model of width H.

    The paper's 64 / 128 / 256 / 768 for H >= 768 (its largest, E = H, as BERT);
    for narrower models the same span scaled down to end at E = H: H/4, H/2, H.
    """
    if hidden_size >= 768:
        return EMBEDDING_SIZES + (768,)
    return (hidden_size // 4, hidden_size // 2, hidden_size)


@dataclasses.dataclass(frozen=True)
class Setting:
    """One ablation configuration: the base model with these choices.

    Attributes:
      sharing: cross-layer sharing, one of `albert_tf.config.SHARING_MODES`.
      embedding_size: E, the factorized embedding width.
      objective: the sentence-pair objective of its pretraining data.
      dropout: hidden and attention dropout while pretraining.
    """

    sharing: str = "all"
    embedding_size: int = 128
    objective: str = pairs.DEFAULT_OBJECTIVE
    dropout: float = 0.0

    def __post_init__(self):
        if self.sharing not in SHARING_MODES:
            raise ValueError(f"sharing={self.sharing!r} is not one of {', '.join(SHARING_MODES)}")
        if self.embedding_size < 1:
            raise ValueError(f"embedding_size={self.embedding_size} must be at least 1")
        pairs.trains_sentence_pair(self.objective)  # validates the name
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout={self.dropout} must be in [0, 1)")

    @property
    def name(self) -> str:
        """A stable directory name, e.g. `share-all_E128_sop_drop0`."""
        return (f"share-{self.sharing}_E{self.embedding_size}_{self.objective}"
                f"_drop{self.dropout:g}")

    def albert_overrides(self, base: dict[str, Any]) -> dict[str, Any]:
        """The AlbertConfig fields of this configuration on top of `base`."""
        return {**base, "sharing": self.sharing, "embedding_size": self.embedding_size,
                "hidden_dropout_prob": self.dropout, "attention_probs_dropout_prob": self.dropout}

    def to_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "name": self.name}


def table_settings(base: Setting, embedding_sizes: tuple[int, ...] = EMBEDDING_SIZES,
                   ) -> dict[str, list[Setting]]:
    """The configurations of each paper table, each list in the paper's row order."""
    return {
        "embedding": [dataclasses.replace(base, sharing=s, embedding_size=e)
                      for s in ("none", "all") for e in embedding_sizes],
        "sharing": [dataclasses.replace(base, sharing=s) for s in SHARING_MODES],
        "objective": [dataclasses.replace(base, objective=o) for o in ("none", "nsp", "sop")],
        "dropout": [dataclasses.replace(base, dropout=d) for d in (DROPOUT_ON, 0.0)],
    }


def grid_settings(grid: str, base: Setting = Setting(),
                  embedding_sizes: tuple[int, ...] = EMBEDDING_SIZES) -> list[Setting]:
    """The distinct configurations `grid` trains, base first, in a fixed order."""
    if grid not in GRIDS:
        raise ValueError(f"grid={grid!r} is not one of {', '.join(GRIDS)}")
    tables = table_settings(base, embedding_sizes)
    # Objective and sharing first: a run stopped early has whole tables to show.
    order = ("objective", "sharing", "embedding", "dropout")
    chosen = [s for t in order for s in tables[t]] if grid == "paper" else tables[grid]
    ordered = [base] if base in chosen else []
    for setting in chosen:
        if setting not in ordered:
            ordered.append(setting)
    return ordered


def check_embedding_sizes(sizes: tuple[int, ...], hidden_size: int) -> None:
    """The rule for --embedding-sizes, before any data is made: at least one, each an
    integer from 1 to the base model's hidden_size (ALBERT factorizes E <= H), none twice.

    Raises:
      UsageError: naming the size and the rule.
    """
    if not sizes:
        raise UsageError("--embedding-sizes: give at least one size")
    for size in sizes:
        ranges.check_number("--embedding-sizes", size, int,
                            {ranges.MINIMUM: 1, ranges.MAXIMUM: hidden_size},
                            f" (E of the embedding table, at most the base model's "
                            f"hidden_size={hidden_size})")
    twice = sorted({size for size in sizes if sizes.count(size) > 1})
    if twice:
        raise UsageError(f"--embedding-sizes names {', '.join(map(str, twice))} twice")
