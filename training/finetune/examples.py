"""Text examples of single-text and text-pair tasks, and their encoding to model inputs."""

from __future__ import annotations

import dataclasses
import itertools
import logging
from collections.abc import Iterable, Sequence

import numpy as np
from tqdm.auto import tqdm

from albert_tf.errors import UserError
from albert_tf.infra.atomic import atomic_write
from albert_tf.inputs import INPUT_NAMES

from .bucketing import Encoded

logger = logging.getLogger(__name__)


class DataError(UserError):
    """Unusable input data; the message names the file, line and field."""


@dataclasses.dataclass
class TextExamples:
    """N examples of a sequence classification or regression task.

    Attributes:
      texts_a: first text of each example.
      texts_b: second text of each pair, or None for single-text tasks.
      labels: [N] int class ids or float targets; None for unlabelled data.
      ids: an identifier per example (GLUE's `idx`, or "file:line") used in
        prediction files and error messages.
    """

    texts_a: list[str]
    texts_b: list[str] | None
    labels: np.ndarray | None
    ids: list[str]

    def __post_init__(self):
        sizes = {len(self.texts_a), len(self.ids)}
        if self.texts_b is not None:
            sizes.add(len(self.texts_b))
        if self.labels is not None:
            sizes.add(len(self.labels))
        if len(sizes) != 1:
            raise ValueError(f"text example fields differ in length: {sorted(sizes)}")

    def __len__(self) -> int:
        return len(self.texts_a)


def encode_texts(tokenizer, examples: TextExamples, seq_length: int,
                 label_key: str | None = None) -> Encoded:
    """Tokenizes and packs each example as `[CLS] a [SEP] (b [SEP])`, unpadded.

    Args:
      tokenizer: an `AlbertTokenizer`.
      examples: the texts (and labels).
      seq_length: the longest packed length; longer pairs are truncated longest
        segment first (as `AlbertTokenizer.encode_pair`).
      label_key: name of the label in `Encoded.labels` (the model output the loss
        applies to, e.g. "logits" or "score"); None leaves the labels out.

    Returns:
      `Encoded` with int32 arrays [L_i] (L_i <= seq_length) per example.
    """
    features = {name: [] for name in INPUT_NAMES}
    texts_b = examples.texts_b or [None] * len(examples)
    for text_a, text_b in progress(zip(examples.texts_a, texts_b), len(examples), "tokenizing"):
        packed = tokenizer.encode_pair(text_a, text_b, seq_length=seq_length)
        length = int(np.sum(packed["input_mask"]))
        for name in INPUT_NAMES:
            features[name].append(np.asarray(packed[name][:length], np.int32))
    labels = {}
    if label_key is not None and examples.labels is not None:
        labels[label_key] = np.asarray(examples.labels)
    return Encoded(features, labels)


_LINE_BREAKS = {"\t": "a tab", "\n": "a line break", "\r": "a line break"}


def check_label_name(name: str, where: str) -> None:
    """A class name is a cell of the prediction files (`write_tsv`) and what the served
    model answers: DataError naming `where` if it is empty or holds a tab or line break."""
    if not name:
        raise DataError(f"{where}: the label is empty")
    bad = next((c for c in name if c in _LINE_BREAKS), None)
    if bad is not None:
        raise DataError(f"{where}: label {name!r} holds {_LINE_BREAKS[bad]}; class names "
                        "are written as cells of tab-separated prediction files")


def regression_target(text: str, where: str, name: str = "label",
                      column: str | int | None = None) -> float:
    """A regression label as a finite float; DataError naming `where` (and the column)
    for anything else: NaN or an infinity would train a model of NaN weights."""
    what = f"{name} {text!r}" + ("" if column is None else f" in column {column!r}")
    try:
        value = float(text)
    except ValueError:
        raise DataError(f"{where}: {what} is not a number") from None
    if not np.isfinite(value):
        raise DataError(f"{where}: {what} is not a finite number")
    return value


def label_ids(values: Sequence[str], label_names: Sequence[str], where: Sequence[str]) -> np.ndarray:
    """Maps label strings to class ids; an unknown label raises DataError naming `where`."""
    index = {name: i for i, name in enumerate(label_names)}
    ids = np.empty(len(values), np.int64)
    for i, (value, place) in enumerate(zip(values, where)):
        if value not in index:
            raise DataError(f"{place}: unknown label {value!r}; the labels are "
                            f"{', '.join(map(repr, label_names))}")
        ids[i] = index[value]
    return ids


def write_tsv(path: str, header: Sequence[str], rows: Iterable[Sequence[str]]) -> None:
    """Writes a tab-separated file (header first) atomically (`atomic.atomic_write`).

    A tab or newline inside a cell would shift or split the row, so it is an error.
    """
    with atomic_write(path) as f:
        for row in itertools.chain([header], rows):
            cells = [str(c) for c in row]
            if any(("\t" in c or "\n" in c) for c in cells):
                raise ValueError(f"{path}: a cell holds a tab or newline: {cells}")
            f.write("\t".join(cells) + "\n")


def progress(iterable, total: int, desc: str):
    """A tqdm bar over `iterable` for jobs big enough to take a while (>= 1000 items)."""
    return tqdm(iterable, total=total, desc=desc, unit="ex", mininterval=2.0,
                disable=total < 1000, leave=False)
