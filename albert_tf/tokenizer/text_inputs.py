"""Raw text for a task model's `fit`, `evaluate` and `predict`: in-memory text becomes
token-id arrays through the model's `AlbertPreprocessor` traced once (`TracedText`,
`as_arrays`), a `tf.data` pipeline of text is mapped through it (`as_dataset`).

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

from albert_tf.inputs import INPUT_NAMES
from albert_tf.tasks import CHOICE_TEXTS
from albert_tf.tokenizer.preprocessor import AlbertPreprocessor
from albert_tf.tokenizer.traced import graph_function

__all__ = ["is_text", "text_form", "check_text_form", "as_dataset", "as_arrays", "label_arrays",
           "keyed_dataset", "PreprocessorFunctions", "TracedText", "AlbertPreprocessor"]

# Rows tokenized per call of a traced preprocessor (`as_arrays`): bounds the graph's
# intermediate tensors on a large list, and any count reuses the one trace.
ARRAY_CHUNK_ROWS = 1024


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


def check_text_form(model, x) -> None:
    """Refuses raw text `x` of a form the task model does not take, or a model without a
    preprocessor: a TypeError / ValueError naming the model's class."""
    owner, spec = type(model).__name__, model.task_spec
    segments = text_form(x)
    if segments is None:
        problem = choices_problem(x)
        raise TypeError(f"{owner}: {problem}" if problem else
                        f"{owner} takes a dict of token ids ({', '.join(INPUT_NAMES)}) or raw "
                        f"text, not {type(x).__name__}")
    if segments not in spec.text_segments:
        forms = {1: "one text per example", 2: "(text_a, text_b) pairs",
                 CHOICE_TEXTS: "(contexts, choices) with choices [B, K]"}
        takes = " or ".join(forms[s] for s in spec.text_segments) or "token ids only"
        raise TypeError(f"{owner} ({model.task}) takes {takes} as raw text, "
                        f"not {forms[segments]}")
    if model.preprocessor is None:
        raise ValueError(f"{owner} has no preprocessor for raw text: load it with from_preset "
                         "(a checkpoint with its SentencePiece model), or set "
                         "model.preprocessor = AlbertPreprocessor(...)")


def _column(x) -> tf.Tensor:
    return tf.convert_to_tensor([x] if isinstance(x, (str, bytes)) else x, tf.string)


def _target(y, label_output: str | None):
    """`y` keyed by the task's output when it is not a dict already."""
    if y is None or isinstance(y, dict) or label_output is None:
        return y
    return {label_output: y}


def as_dataset(preprocessor, dataset: tf.data.Dataset, *, label_output: str | None,
               max_qa_length: int | None = None) -> tf.data.Dataset:
    """A dataset of (model inputs, labels[, sample weights]) from a batched dataset of raw
    text (in-memory text takes `as_arrays`).

    Args:
      preprocessor: the model's `AlbertPreprocessor`.
      dataset: batches of texts (see the module docstring), alone or with their labels.
      label_output: the output a label array is the target of (`Task.label_output`).
      max_qa_length: for (contexts, choices): the pieces each choice keeps
        (`AlbertPreprocessor.pack_choices`, the task record's).
    """

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


class PreprocessorFunctions:
    """`tf.function`s built for one preprocessor, each traced once and reused (tracing
    costs seconds; running, milliseconds). `cached(preprocessor, key, build)` gives the
    function of (preprocessor, its seq_length, key), building it on first use; a
    preprocessor replaced or resized leaves its old functions behind, so they are dropped.

    A plain object, not a dict or a `tf.Module`: a SavedModel of the model that holds it
    must not save these functions.
    """

    def __init__(self):
        self._functions: dict[tuple, Any] = {}

    def cached(self, preprocessor, key: tuple, build):
        full = (id(preprocessor), preprocessor.seq_length, *key)
        entry = self._functions.get(full)
        if entry is not None and entry[0] is preprocessor:
            return entry[1]
        function = build()
        self._functions = {k: v for k, v in self._functions.items()
                           if v[0] is preprocessor and k[1] == preprocessor.seq_length}
        self._functions[full] = (preprocessor, function)
        return function


class TracedText(PreprocessorFunctions):
    """A model's raw-text preprocessing traced once and reused: one `tf.function` per
    (preprocessor, seq_length, text form, max_qa_length), each with a fixed input
    signature ([None] texts, [None, None] choices), so every later call with any
    number of rows runs the traced graph."""

    def function(self, preprocessor, form, max_qa_length: int | None = None):
        """The traced preprocessing of `form` (1, 2 or CHOICE_TEXTS) by `preprocessor`."""
        column = tf.TensorSpec([None], tf.string)
        if form == CHOICE_TEXTS and max_qa_length is None:
            raise ValueError("(contexts, choices) needs max_qa_length")

        def build():
            if form == CHOICE_TEXTS:
                return graph_function(
                    lambda contexts, choices: preprocessor.pack_choices(contexts, choices,
                                                                        max_qa_length),
                    input_signature=[column, tf.TensorSpec([None, None], tf.string)])
            # `call`, not the layer's __call__: under another Keras backend (JAX) __call__
            # would convert the graph's string tensors to that backend's arrays.
            if form == 2:
                return graph_function(lambda a, b: preprocessor.call((a, b)),
                                      input_signature=[column, column])
            return graph_function(preprocessor.call, input_signature=[column])

        return self.cached(preprocessor, (form, max_qa_length), build)


def as_arrays(traced: TracedText, preprocessor, x, *,
              max_qa_length: int | None = None) -> dict[str, np.ndarray]:
    """In-memory raw text `x` (not a dataset) as the model's token-id arrays
    {input_word_ids, input_mask, input_type_ids}: int32 [B, seq_length] ([B, K,
    seq_length] for (contexts, choices)), through `traced`'s function, ARRAY_CHUNK_ROWS
    rows per call."""
    form = text_form(x)
    columns = tuple(_column(c) for c in x) if form != 1 else (_column(x),)
    if len(columns) == 2 and columns[0].shape[0] != columns[1].shape[0]:
        raise ValueError(f"the two text columns differ in rows: {columns[0].shape[0]} and "
                         f"{columns[1].shape[0]}")
    function = traced.function(preprocessor, form, max_qa_length)
    rows = int(columns[0].shape[0])
    chunks = [function(*(c[start:start + ARRAY_CHUNK_ROWS] for c in columns))
              for start in range(0, max(rows, 1), ARRAY_CHUNK_ROWS)]
    return {name: np.concatenate([chunk[name].numpy() for chunk in chunks])
            for name in chunks[0]}


def label_arrays(v):
    """Labels or weights given as Python lists as NumPy arrays (beside `as_arrays`' token
    ids, Keras takes arrays only), dicts of them key by key."""
    if isinstance(v, dict):
        return {name: label_arrays(value) for name, value in v.items()}
    return np.asarray(v) if isinstance(v, (list, tuple)) else v


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
