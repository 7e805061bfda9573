"""Encoded fine-tuning examples and their tf.data pipelines: length buckets or fixed padding.

Examples are kept unpadded in memory (`Encoded`). `make_dataset` batches them
either padded to one fixed length, or grouped by length with
`tf.data.Dataset.bucket_by_sequence_length`, every batch of a bucket padded to that
bucket's upper bound. Bucketing only removes padding: the attention mask hides it,
so model outputs are the same as with fixed-length padding (tests check this),
while short examples cost a fraction of the compute. Each bucket has one static
sequence length, so XLA or a TPU compiles one program per bucket, not per batch.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np
import tensorflow as tf

from albert_tf.errors import UserError
from albert_tf.tasks import IGNORED_LABEL

INDEX_KEY = "example_index"


@dataclasses.dataclass
class Encoded:
    """Unpadded model inputs and labels of N examples.

    Attributes:
      features: input name -> N int32 arrays, each [L_i] (or [K, L_i] for multiple
        choice), where L_i is the example's real length.
      labels: label name -> array [N, ...] (empty for unlabelled data), or an object
        array of N int arrays [L_i] for per-token labels (padded with IGNORED_LABEL).
    """

    features: dict[str, list[np.ndarray]]
    labels: dict[str, np.ndarray] = dataclasses.field(default_factory=dict)

    def __post_init__(self):
        sizes = {name: len(values) for name, values in {**self.features, **self.labels}.items()}
        if len(set(sizes.values())) > 1:
            raise ValueError(f"features and labels differ in length: {sizes}")

    def __len__(self) -> int:
        return len(self.features["input_word_ids"])

    def lengths(self) -> np.ndarray:
        """Real sequence length of every example, [N] (the longest choice for [K, L])."""
        return np.array([ids.shape[-1] for ids in self.features["input_word_ids"]], np.int64)

    def subset(self, indices: Sequence[int]) -> Encoded:
        return Encoded({k: [v[i] for i in indices] for k, v in self.features.items()},
                       {k: v[np.asarray(indices, np.int64)] for k, v in self.labels.items()})


def default_buckets(seq_length: int, smallest: int = 16) -> list[int]:
    """Padded lengths of the buckets: powers of two from `smallest`, capped by `seq_length`.

    >>> default_buckets(128)
    [16, 32, 64, 128]
    >>> default_buckets(384)
    [16, 32, 64, 128, 256, 384]
    """
    buckets, length = [], smallest
    while length < seq_length:
        buckets.append(length)
        length *= 2
    return buckets + [seq_length]


def make_dataset(data: Encoded, batch_size: int, seq_length: int,
                 buckets: Sequence[int] | None = None, training: bool = False,
                 seed: int | None = None, with_index: bool = False) -> tf.data.Dataset:
    """A batched tf.data pipeline over `data`.

    Args:
      data: the encoded examples; no example may be longer than `seq_length`.
      batch_size: examples per batch.
      seq_length: the fixed padded length, and the largest bucket.
      buckets: the padded lengths of the length buckets (sorted, the last one
        `seq_length`); None pads every batch to `seq_length`.
      training: shuffle, repeat forever and drop incomplete batches (static batch size).
      seed: shuffle seed.
      with_index: add each example's position in `data` to the features under
        "example_index" [B], to put outputs back in order (batching by length
        reorders examples).

    Returns:
      A dataset of `(features, labels)`: features are the three int32 inputs
      `[B, T]` (`[B, K, T]` for multiple choice), T the bucket's length.
    """
    if len(data) == 0:
        raise ValueError("no examples to batch")
    if data.lengths().max() > seq_length:
        raise ValueError(f"an example has {data.lengths().max()} tokens, more than "
                         f"seq_length={seq_length}")
    ds = _examples_dataset(data, with_index)
    if training:
        ds = ds.shuffle(len(data), seed=seed, reshuffle_each_iteration=True).repeat()
    padding = _padding_values(ds.element_spec)
    if buckets is None:
        ds = ds.padded_batch(batch_size, _padded_shapes(ds.element_spec, seq_length),
                             padding_values=padding, drop_remainder=training)
    else:
        buckets = check_buckets(buckets, seq_length)
        ds = ds.bucket_by_sequence_length(
            element_length_func=lambda f, _: tf.shape(f["input_word_ids"])[-1],
            # Bucket i holds lengths in [b_{i-1} + 1, b_i] and is padded to b_i.
            bucket_boundaries=[b + 1 for b in buckets],
            bucket_batch_sizes=[batch_size] * (len(buckets) + 1),
            padded_shapes=_padded_shapes(ds.element_spec, None), padding_values=padding,
            pad_to_bucket_boundary=True,
            drop_remainder=training)
    if training:  # a static batch dimension, as TPUs need
        ds = ds.map(lambda f, l: tf.nest.map_structure(
            lambda t: tf.ensure_shape(t, [batch_size] + [None] * (t.shape.rank - 1)), (f, l)))
    return ds.prefetch(tf.data.AUTOTUNE)


def _examples_dataset(data: Encoded, with_index: bool) -> tf.data.Dataset:
    """One unpadded `(features, labels)` element per example, int32 inputs."""
    features = {name: _ragged(values) for name, values in data.features.items()}
    if with_index:
        features[INDEX_KEY] = np.arange(len(data), dtype=np.int32)
    # [L] per example, or [K, L] with K fixed: padding must never touch K.
    inner_shapes = {name: values[0].shape[:-1] + (None,) for name, values in data.features.items()}

    labels = {name: _ragged(list(values)) if _per_token(values) else values
              for name, values in data.labels.items()}

    def densify(features, labels):
        features = {k: tf.ensure_shape(tf.cast(v.to_tensor(), tf.int32), inner_shapes[k])
                    if isinstance(v, tf.RaggedTensor) else v for k, v in features.items()}
        labels = {k: tf.cast(v.to_tensor(), tf.int32) if isinstance(v, tf.RaggedTensor) else v
                  for k, v in labels.items()}
        return features, labels

    ds = tf.data.Dataset.from_tensor_slices((features, labels))
    return ds.map(densify, num_parallel_calls=tf.data.AUTOTUNE)


def _per_token(values) -> bool:
    """Whether labels are N arrays [L_i] (an object array), not one array [N, ...]."""
    return isinstance(values, np.ndarray) and values.dtype == object


def _ragged(values: list[np.ndarray]) -> tf.RaggedTensor:
    """N arrays [L_i] or [K, L_i] -> a RaggedTensor [N, (L_i)] or [N, K, (L_i)]."""
    first = values[0]
    flat = np.concatenate([v.reshape(-1) for v in values])
    # The smallest integer type that holds the values (masks and type ids fit int8,
    # most vocabularies int16): the in-memory copy is a quarter of int32's.
    for dtype in (np.int8, np.int16, np.int32):
        if flat.size == 0 or (flat.min() >= np.iinfo(dtype).min and flat.max() <= np.iinfo(dtype).max):
            flat = flat.astype(dtype)
            break
    if first.ndim == 1:
        return tf.RaggedTensor.from_row_lengths(flat, [len(v) for v in values])
    choices = first.shape[0]
    if any(v.shape[0] != choices for v in values):
        raise ValueError("every multiple-choice example needs the same number of choices")
    row_lengths = [v.shape[1] for v in values for _ in range(choices)]
    return tf.RaggedTensor.from_nested_row_lengths(flat, [[choices] * len(values), row_lengths])


def _padded_shapes(spec, length):
    features, labels = spec
    shapes = {k: s.shape[:-1].concatenate([length]) if s.shape.rank else s.shape
              for k, s in features.items()}
    # Per-token labels [L] pad as the inputs do; other labels have fixed shapes.
    return shapes, {k: tf.TensorShape([length]) if s.shape.rank == 1 and s.shape[0] is None
                    else s.shape for k, s in labels.items()}


def _padding_values(spec):
    """Zeros for the inputs; IGNORED_LABEL for per-token labels (the loss skips them)."""
    features, labels = spec
    zero = lambda s: tf.constant(0, s.dtype)  # noqa: E731
    return ({k: zero(s) for k, s in features.items()},
            {k: tf.constant(IGNORED_LABEL, s.dtype)
             if s.shape.rank == 1 and s.shape[0] is None else zero(s) for k, s in labels.items()})


def check_buckets(buckets: Sequence[int], seq_length: int) -> list[int]:
    """The padded bucket lengths as ints; UserError unless increasing, positive and
    ending at `seq_length` (`TrainConfig` checks them before any data is read)."""
    buckets = [int(b) for b in buckets]
    if buckets != sorted(set(buckets)) or buckets[0] < 1 or buckets[-1] != seq_length:
        raise UserError(f"buckets={','.join(map(str, buckets))} must be increasing positive "
                        f"lengths ending at seq_length={seq_length}")
    return buckets
