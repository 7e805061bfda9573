"""Raw text for a task model's `fit`, `evaluate` and `predict`: a `tf.data` pipeline
through the model's `AlbertPreprocessor`.

Part of the in-graph preprocessor (TensorFlow at module level); the models import it
only when they are given text, so they run on any Keras backend with token ids.

Accepted `x`: a string, a list / NumPy array / `tf.string` tensor of texts [B], a
pair `(texts_a, texts_b)` of two such columns, for multiple choice `(contexts,
choices)` with choices [B, K] (lists of K strings, a 2-D array or tensor: each option
is the pair (context, choice), the model's [B, K, T] input), or a `tf.data.Dataset`
whose elements are such texts (alone, or with labels and sample weights). Labels `y`
that are not a dict become the target of the task's `label_output`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import tensorflow as tf

from albert_tf.tasks import CHOICE_TEXTS
from albert_tf.tokenizer.preprocessor import AlbertPreprocessor

__all__ = ["is_text", "text_form", "as_dataset", "keyed_dataset", "AlbertPreprocessor", "DEFAULT_BATCH_SIZE"]

# Keras' own default batch size for arrays.
DEFAULT_BATCH_SIZE = 32


def _is_text_column(x) -> bool:
    if isinstance(x, (list, tuple)):
        return bool(x) and all(isinstance(v, (str, bytes)) for v in x)
    if isinstance(x, np.ndarray):
        return x.dtype.kind in "SU" or (x.dtype == object and x.size > 0
                                        and isinstance(x.flat[0], (str, bytes)))
    return isinstance(x, tf.Tensor) and x.dtype == tf.string


def _is_choices_column(x) -> bool:
    """Rows of K strings each, K the same for every row ([B, K])."""
    if isinstance(x, (list, tuple)):
        return bool(x) and all(isinstance(row, (list, tuple)) and _is_text_column(row)
                               for row in x) and len({len(row) for row in x}) == 1
    if isinstance(x, np.ndarray):
        return x.ndim == 2 and _is_text_column(x)
    return isinstance(x, tf.Tensor) and x.dtype == tf.string and x.shape.rank == 2


def _is_choices_pair(x) -> bool:
    return (isinstance(x, tuple) and len(x) == 2 and _is_text_column(x[0])
            and not _is_choices_column(x[0]) and _is_choices_column(x[1]))


def choices_problem(x) -> str | None:
    """Why `x`, shaped like (contexts, choices), is not one (None: it is, or is not shaped so)."""
    if not (isinstance(x, tuple) and len(x) == 2 and isinstance(x[1], (list, tuple)) and x[1]
            and all(isinstance(row, (list, tuple)) for row in x[1])):
        return None
    counts = [len(row) for row in x[1]]
    for i, count in enumerate(counts):
        if count != counts[0]:
            return (f"choices must hold as many options in every row: row 0 has {counts[0]}, "
                    f"row {i} has {count}")
    if isinstance(x[0], (str, bytes)) or not _is_text_column(x[0]):
        return "contexts must be a list of strings, one per row of choices"
    return None


def is_text(x) -> bool:
    """Whether `x` is raw text in a form `as_dataset` takes (datasets: whether their
    inputs are strings)."""
    return text_form(x) is not None


def _is_text_spec(spec) -> bool:
    specs = spec if isinstance(spec, tuple) else (spec,)
    return 1 <= len(specs) <= 2 and all(
        isinstance(s, tf.TensorSpec) and s.dtype == tf.string for s in specs)


def _is_choices_spec(spec) -> bool:
    """A batch's (contexts [B], choices [B, K]) in a dataset's element spec."""
    return (isinstance(spec, tuple) and len(spec) == 2 and _is_text_spec(spec)
            and spec[1].shape.rank == spec[0].shape.rank + 1)


def _dataset_inputs(spec):
    """A dataset element's inputs: the element, or its first part when it is (x, y[, w])."""
    if isinstance(spec, tuple) and spec and not _is_text_spec(spec):
        return spec[0]
    return spec


def text_form(x) -> int | str | None:
    """The raw-text form of `x`: 1 (texts), 2 ((texts_a, texts_b)), `CHOICE_TEXTS`
    ((contexts, choices)), or None when `x` is not raw text."""
    if isinstance(x, tf.data.Dataset):
        inputs = _dataset_inputs(x.element_spec)
        if not _is_text_spec(inputs):
            return None
        if _is_choices_spec(inputs):
            return CHOICE_TEXTS
        return len(inputs) if isinstance(inputs, tuple) else 1
    if isinstance(x, (str, bytes)):
        return 1
    if _is_choices_pair(x):
        return CHOICE_TEXTS
    if isinstance(x, tuple) and len(x) == 2 and all(_is_text_column(c) for c in x):
        return 2
    return 1 if _is_text_column(x) else None


def _column(x) -> tf.Tensor:
    return tf.convert_to_tensor([x] if isinstance(x, (str, bytes)) else x, tf.string)


def _target(y, label_output: str | None):
    """`y` keyed by the task's output when it is not a dict already."""
    if y is None or isinstance(y, dict) or label_output is None:
        return y
    return {label_output: y}


def as_dataset(preprocessor, x, y=None, sample_weight=None, *, label_output: str | None,
               batch_size: int | None = None, shuffle: bool = False,
               max_qa_length: int | None = None) -> tf.data.Dataset:
    """A batched dataset of (model inputs, labels[, sample weights]) from raw text.

    Args:
      preprocessor: the model's `AlbertPreprocessor`.
      x: texts (see the module docstring); a dataset's elements may carry their labels.
      y, sample_weight: labels and weights for in-memory `x` (row-aligned with it).
      label_output: the output a label array is the target of (`Task.label_output`).
      batch_size: rows per batch for in-memory `x` (default 32; a dataset is taken
        as batched).
      shuffle: reshuffle in-memory rows every epoch (as Keras does for arrays).
      max_qa_length: for (contexts, choices): the pieces each choice keeps
        (`AlbertPreprocessor.pack_choices`, the task record's).
    """
    if isinstance(x, tf.data.Dataset):
        if y is not None or sample_weight is not None:
            raise ValueError("a dataset carries its own labels; pass y and sample_weight "
                             "inside its elements")
        dataset = x
    else:
        texts = tuple(_column(c) for c in x) if text_form(x) != 1 else _column(x)
        if isinstance(texts, tuple) and texts[0].shape[0] != texts[1].shape[0]:
            raise ValueError(f"the two text columns differ in rows: {texts[0].shape[0]} and "
                             f"{texts[1].shape[0]}")
        parts: Any = (texts,) + tuple(v for v in (y, sample_weight) if v is not None)
        if y is None and sample_weight is not None:
            raise ValueError("sample_weight needs y")
        dataset = tf.data.Dataset.from_tensor_slices(parts if len(parts) > 1 else texts)
        if shuffle:
            dataset = dataset.shuffle(int(dataset.cardinality()), reshuffle_each_iteration=True)
        dataset = dataset.batch(batch_size or DEFAULT_BATCH_SIZE)

    def inputs(texts):
        if _is_choices_spec(tf.nest.map_structure(tf.TensorSpec.from_tensor, texts)):
            if max_qa_length is None:
                raise ValueError("(contexts, choices) needs max_qa_length")
            return preprocessor.pack_choices(*texts, max_qa_length)
        return preprocessor(texts)

    if _is_text_spec(dataset.element_spec):  # texts alone
        prepare = lambda *texts: inputs(texts if len(texts) == 2 else texts[0])  # noqa: E731
    else:  # (texts, labels[, sample weights])
        prepare = lambda texts, labels, *weights: (  # noqa: E731
            inputs(texts), _target(labels, label_output), *weights)
    return dataset.map(prepare, num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)


def keyed_dataset(dataset: tf.data.Dataset, label_output: str | None,
                  single_output: bool = False) -> tf.data.Dataset:
    """A dataset of tokenized (x, y[, w]) whose plain labels are keyed by `label_output`;
    `single_output` (the model returns one array): labels keyed by it are unwrapped."""
    spec = dataset.element_spec
    if not isinstance(spec, tuple) or len(spec) < 2 or label_output is None:
        return dataset
    if single_output:
        if isinstance(spec[1], dict) and set(spec[1]) == {label_output}:
            return dataset.map(lambda x, y, *w: (x, y[label_output], *w))
        return dataset
    if isinstance(spec[1], dict):
        return dataset
    return dataset.map(lambda x, y, *w: (x, {label_output: y}, *w))
