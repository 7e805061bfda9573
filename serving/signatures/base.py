"""The base of the serving modules: a Keras model, its preprocessor, dynamic padding.

Each task's module (`tasks.py`, `span.py`, ...) subclasses `ServingModule` and
lists its tf.functions in `signatures()`; `warmup_examples()` gives a few real
requests per signature for TF Serving's warmup file. `checked_inputs` is the one
check of a request's inputs against their specs and each other: every signature
reads its inputs through it, so a malformed request is an InvalidArgumentError.
`run_by_length` runs a batch's rows in length groups, each padded to its own longest.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from albert_tf.inputs import INPUT_NAMES
from albert_tf.tokenizer.traced import graph_function

from ..options import Batching  # noqa: F401 - the serving modules' name for it
from . import text_graph

# Dynamic padding granularity (tokens): 1 pads a request only to its longest row. Without
# XLA every length runs the same graph; a length not seen before costs about 1 ms once
# (oneDNN kernels for the new shape), less than the rounding to 16 cost each call.
PAD_MULTIPLE = 1
GROUP_ROWS = 8  # rows per length group of `run_by_length`
# The most rows one request may hold when the export batches in the graph (`Batching`):
# the batching op's input limit; larger requests are refused by the op.
MAX_REQUEST_ROWS = 4096
# The function attribute that keeps a call op from being inlined into its caller.
NO_INLINE = "_noinline"



TEXT_SPEC = tf.TensorSpec([None], tf.string)
IDS_SPEC = tf.TensorSpec([None, None], tf.int32)

# A few real requests per signature for the warmup file: the empty string, mixed
# scripts and invalid UTF-8 included, so every code path is loaded before traffic.
WARMUP_TEXTS = [b"", b"The quick brown fox jumps over the lazy dog.",
                "Caf\u00e9 M\u00fcller \u2014 na\u00efve \u00fcber \U0001F600".encode(),
                b"bad \xff\xfe bytes", b"A longer request. " * 40]


def strings(values) -> np.ndarray:
    """A NumPy object array of bytes: how string inputs travel."""
    return np.array(values, dtype=object)


def checked_inputs(signature: str, inputs: dict[str, tf.Tensor], *, same_shape: bool = False,
                   min_columns: dict[str, int] | None = None) -> tuple[tf.Tensor, ...]:
    """The values of `inputs`, released only after an in-graph check that they fit together.

    Every signature calls this first and reads its inputs only through what it
    returns, so every later op waits for the check. A request that does not fit is
    answered with tf.errors.InvalidArgumentError naming the signature, the inputs and
    their sizes, instead of what it did before: texts that disagree on the batch size
    abort the whole server process in tensorflow-text's packing (std::length_error),
    or give answers for only part of the batch; a [B, 2] string tensor where [B] is
    declared is read as its first column (neither TensorFlow nor TF Serving checks a
    request against the signature's shapes).

    Checks (the dimensions are read only once every rank is right):
      * each input has the rank of its TensorSpec: "SIG: text has rank 2 but the
        signature takes rank 1";
      * all agree on dimension 0, the batch: "SIG: text_a has 3 rows but text_b has 1";
        with `same_shape`, on every dimension (the token_ids inputs): "SIG:
        input_word_ids has shape [2 7] but input_mask has shape [2 5]";
      * `min_columns` {name: n}: dimension 1 of that input is at least n (multiple
        choice's options [B, K], K >= 1): "SIG: options has 0 columns but needs at least 1".

    Args:
      signature: the signature's name, for the message.
      inputs: {input name: the tf.function's argument}, in the signature's order; the
        expected rank is the argument's static rank (its TensorSpec).

    Returns:
      The inputs' values in the same order, each depending on every check.
    """
    names = list(inputs)
    shapes = {name: tf.shape(x, out_type=tf.int64) for name, x in inputs.items()}
    checks = []
    for name, x in inputs.items():
        # The rank the request has: the length of its runtime shape. tf.rank (and
        # Grappler's folding of Rank and Size) answers the TensorSpec's rank instead.
        rank = tf.reduce_sum(tf.cast(shapes[name] >= 0, tf.int32))
        checks.append(_require(tf.equal(rank, x.shape.rank), f"{signature}: {name} has rank ",
                               rank, f" but the signature takes rank {x.shape.rank}"))
    with tf.control_dependencies(checks):  # dimensions are read once the ranks are right
        first = names[0]
        for name in names[1:]:
            if same_shape:
                checks.append(_require(
                    tf.reduce_all(tf.equal(shapes[first], shapes[name])),
                    f"{signature}: {first} has shape ", shapes[first], f" but {name} has shape ",
                    shapes[name]))
            else:
                rows, other = shapes[first][0], shapes[name][0]
                checks.append(_require(
                    tf.equal(rows, other), f"{signature}: {first} has ", rows,
                    tf.where(tf.equal(rows, 1), " row", " rows"), f" but {name} has ", other))
        for name, least in (min_columns or {}).items():
            checks.append(_require(shapes[name][1] >= least, f"{signature}: {name} has ",
                                   shapes[name][1], f" columns but needs at least {least}"))
    with tf.control_dependencies(checks):
        return tuple(tf.identity(x) for x in inputs.values())


def checked_ids(signature: str, features: dict[str, tf.Tensor], vocab_size: int,
                type_vocab_size: int) -> dict[str, tf.Tensor]:
    """`features` released only once their ids are in range: word ids in [0, vocab_size),
    type ids in [0, type_vocab_size), a 0/1 mask. Keras' embedding lookup on TensorFlow
    reads a negative id from the end of the table, and a GPU reads zeros past it:
    "SIG: input_word_ids holds ids from -3 to 7, outside [0, 41)"."""
    checks = []
    for name, limit in (("input_word_ids", vocab_size), ("input_type_ids", type_vocab_size),
                        ("input_mask", 2)):
        values = tf.reshape(features[name], [-1])  # empty: min INT_MAX, max INT_MIN, fits
        low, high = tf.reduce_min(values), tf.reduce_max(values)
        checks.append(_require((low >= 0) & (high < limit), f"{signature}: {name} holds ids "
                               "from ", low, " to ", high, f", outside [0, {limit})"))
    with tf.control_dependencies(checks):
        return {name: tf.identity(value) for name, value in features.items()}


def run_by_length(run, features: dict[str, tf.Tensor], multiple: int | None,
                  element_shape: list, rows: int | None = None) -> tf.Tensor:
    """`run(features)` for the rows grouped by length; float32 [B, ...] in the request's order.

    The rows ([B, T], or [B, K, T] whose length is that of the longest of the K) are
    sorted by length and run `rows` at a time, each group cut to its own longest
    row (`text_graph.trim_padding`), so a batch of mixed lengths pays for each
    group's longest text instead of the batch's (half the tokens for a batch of 32
    sentences). A row's outputs do not depend on the padding, so they equal one
    call on the whole batch; `run` must return [b, ...] with no token axis.

    Args:
      run: features [b, ..., T'] -> float32 [b, ...].
      features: the model's inputs, already checked.
      multiple: each group's padding granularity (see `text_graph.trim_padding`).
      element_shape: the static shape of `run`'s output, batch axis None.
      rows: rows per group (default GROUP_ROWS).
    """
    rows = rows or GROUP_ROWS
    lengths = tf.reduce_sum(features["input_mask"], axis=-1)  # [B] or [B, K]
    if lengths.shape.rank == 2:
        lengths = tf.reduce_max(lengths, axis=-1)
    order = tf.argsort(lengths, stable=True)  # shortest first
    ranked = {name: tf.gather(value, order) for name, value in features.items()}
    # At least one group: an empty batch runs once, empty, for its outputs' shapes.
    groups = tf.maximum((tf.size(order) + rows - 1) // rows, 1)

    def step(index, outputs):
        group = {name: value[index * rows:(index + 1) * rows] for name, value in ranked.items()}
        return index + 1, outputs.write(index, run(text_graph.trim_padding(group, multiple)))

    outputs = tf.TensorArray(tf.float32, size=groups, infer_shape=False,
                             element_shape=tf.TensorShape(element_shape))
    _, outputs = tf.while_loop(lambda index, _: index < groups, step, (0, outputs))
    return tf.gather(outputs.concat(), tf.math.invert_permutation(order))


def _require(condition: tf.Tensor, *parts):
    """An Assert op: InvalidArgumentError "assertion failed: [MESSAGE]" unless `condition`.

    MESSAGE joins `parts`: Python and tf.string scalars as they are, number scalars as
    digits, shapes as "[2 7]".
    """
    text = [part if isinstance(part, str) or part.dtype == tf.string
            else tf.strings.as_string(part) if part.shape.rank == 0
            else tf.strings.format("{}", part) for part in parts]
    return tf.debugging.Assert(condition, [tf.strings.join(text)])


class ServingModule:
    """Base: a Keras model, its preprocessor, and the text -> features steps.

    A plain object, not a tf.Module: the SavedModel must not track the Keras
    model as a child, or TensorFlow 1's loader (TF Serving's C++ path) finds its
    variables twice and restores the wrong copy ("Could not find variable").
    `modules.write_signatures` saves the signatures with a root that tracks exactly
    the variables and resources the signatures use.

    Args:
      model: the Keras model (`albert_tf.models`).
      preprocessor: an `AlbertPreprocessor` (fixes the maximum sequence length).
      pad_multiple: dynamic padding granularity; None pads every request to
        `preprocessor.seq_length`.
    """

    # In-graph batching of concurrent calls (`Batching`), set by `modules.build_module` on
    # the modules whose model call runs one row per text through `run_rows`.
    batching: Batching | None = None
    batchable = False

    _traced_model = None  # `run_model`'s graph function, made on first use

    def __init__(self, model, preprocessor, pad_multiple: int | None = PAD_MULTIPLE):
        self.model = model
        self.preprocessor = preprocessor
        self.pad_multiple = pad_multiple

    def run_model(self, features: dict[str, tf.Tensor]):
        """`model(features, training=False)` as one graph function of the module that every
        signature calls (its inputs' shapes relaxed to any size): an export traces and writes
        the model's graph once instead of once per signature."""
        if self._traced_model is None:
            spec = {name: tf.TensorSpec([None] * value.shape.rank, value.dtype)
                    for name, value in features.items()}
            self._traced_model = graph_function(
                lambda inputs: self.model(inputs, training=False), input_signature=[spec])
        return self._traced_model(features)

    def run_rows(self, run, features: dict[str, tf.Tensor], element_shape: list) -> tf.Tensor:
        """`run_by_length(run, features, ...)`, through the batching op when the export asks
        for it (`Batching`): concurrent calls are then run as one batch."""
        if self.batching is None:
            return run_by_length(run, features, self.pad_multiple, element_shape)
        options, length = self.batching, self.preprocessor.seq_length
        names = list(features)

        # The function BatchFunction runs is not passed through grappler, so its matmuls
        # would run without the oneDNN fusions the plain export gets (bias and GELU op by
        # op: `benchmarks/bench_load.py --profile`). A call op that is never inlined is
        # optimized when it is first run, as a plain signature is.
        @graph_function(experimental_attributes={NO_INLINE: True})
        def optimized(*values):
            return run_by_length(run, dict(zip(names, values)), self.pad_multiple, element_shape)

        # A request larger than max_batch_size is split (enable_large_batch_splitting);
        # every size up to it is allowed, so a joined batch is never padded with rows.
        @tf.nondifferentiable_batch_function(
            num_batch_threads=options.threads, max_batch_size=MAX_REQUEST_ROWS,
            allowed_batch_sizes=list(range(1, options.max_batch_size + 1)),
            batch_timeout_micros=int(options.timeout_ms * 1000),
            max_enqueued_batches=options.max_enqueued_batches, enable_large_batch_splitting=True)
        def batched(*values):
            return optimized(*values)

        # Each call's rows padded to the export's length, so that calls can be joined.
        padded = [tf.pad(value, [[0, 0]] * (value.shape.rank - 1) +
                         [[0, length - tf.shape(value)[-1]]]) for value in features.values()]
        return batched(*padded)

    def _text_features(self, text) -> dict[str, tf.Tensor]:
        """`serving_default(text)`'s input, checked (`checked_inputs`), packed and trimmed."""
        (text,) = checked_inputs("serving_default", {"text": text})
        return text_graph.trim_padding(self.preprocessor(text), self.pad_multiple)

    def _pair_features(self, text_a, text_b) -> dict[str, tf.Tensor]:
        """`text_pair(text_a, text_b)`'s inputs, checked, packed as pairs and trimmed."""
        pair = checked_inputs("text_pair", {"text_a": text_a, "text_b": text_b})
        return text_graph.trim_padding(self.preprocessor(pair), self.pad_multiple)

    def _trim_ids(self, input_word_ids, input_mask, input_type_ids) -> dict[str, tf.Tensor]:
        """The `token_ids` signature's inputs, checked (`checked_inputs`) and trimmed."""
        features = dict(zip(INPUT_NAMES, checked_inputs(
            "token_ids", dict(zip(INPUT_NAMES, (input_word_ids, input_mask, input_type_ids))),
            same_shape=True)))
        config = self.model.config
        features = checked_ids("token_ids", features, config.vocab_size, config.type_vocab_size)
        return text_graph.trim_padding(features, self.pad_multiple)

    def signatures(self) -> dict:
        """{signature name: tf.function with an input signature}, for tf.saved_model.save."""
        raise NotImplementedError

    def warmup_examples(self) -> dict[str, list[dict[str, np.ndarray]]]:
        """{signature name: [inputs, ...]}: a few real requests for the warmup file."""
        tok = self.preprocessor.tokenizer
        ids = {"input_word_ids": np.array([[tok.cls_id, tok.sep_id, tok.pad_id]], np.int32),
               "input_mask": np.array([[1, 1, 0]], np.int32),
               "input_type_ids": np.zeros([1, 3], np.int32)}
        return {"token_ids": [ids]}

    def text_warmup_examples(self) -> dict[str, list[dict[str, np.ndarray]]]:
        """Warmup requests for modules with `serving_default(text)` and `text_pair`."""
        texts = strings(WARMUP_TEXTS)
        return {**ServingModule.warmup_examples(self),
                "serving_default": [{"text": texts}, {"text": texts[1:2]}],
                "text_pair": [{"text_a": texts, "text_b": texts[::-1]}]}
