"""The pretraining TFRecord format: exactly the original ALBERT features.

Every record is a `tf.train.Example` with (T = max_seq_length, P = max_predictions_per_seq):

| feature | dtype | shape | meaning |
|---|---|---|---|
| input_ids | int64 | [T] | [CLS] A [SEP] B [SEP], masked, zero-padded |
| input_mask | int64 | [T] | 1 for real tokens |
| segment_ids | int64 | [T] | 0 for [CLS] A [SEP], 1 for B [SEP] |
| token_boundary | int64 | [T] | 1 where a word, [CLS] or [SEP] starts |
| masked_lm_positions | int64 | [P] | positions of the masked tokens, zero-padded |
| masked_lm_ids | int64 | [P] | their original ids |
| masked_lm_weights | float32 | [P] | 1.0 for real predictions, 0.0 for padding |
| next_sentence_labels | int64 | [1] | the sentence-order label: 1 = A and B swapped |

so files written by the original create_pretraining_data.py are read here and
ours are read by the original run_pretraining.py.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import tensorflow as tf

from albert_tf import errors
from albert_tf.infra import atomic

from .pairs import Instance

SEQUENCE_FEATURES = ("input_ids", "input_mask", "segment_ids", "token_boundary")
PREDICTION_INT_FEATURES = ("masked_lm_positions", "masked_lm_ids")
WEIGHTS_FEATURE = "masked_lm_weights"
LABEL_FEATURE = "next_sentence_labels"
FEATURE_NAMES = SEQUENCE_FEATURES + PREDICTION_INT_FEATURES + (WEIGHTS_FEATURE, LABEL_FEATURE)


def feature_spec(seq_length: int, max_predictions: int) -> dict[str, tf.io.FixedLenFeature]:
    """The parsing spec of one record, for `tf.io.parse_example`."""
    spec = {name: tf.io.FixedLenFeature([seq_length], tf.int64) for name in SEQUENCE_FEATURES}
    spec.update({name: tf.io.FixedLenFeature([max_predictions], tf.int64)
                 for name in PREDICTION_INT_FEATURES})
    spec[WEIGHTS_FEATURE] = tf.io.FixedLenFeature([max_predictions], tf.float32)
    spec[LABEL_FEATURE] = tf.io.FixedLenFeature([1], tf.int64)
    return spec


def _pad(values: np.ndarray, length: int) -> np.ndarray:
    if len(values) > length:
        raise ValueError(f"{len(values)} values do not fit in {length}")
    padded = np.zeros(length, values.dtype)
    padded[:len(values)] = values
    return padded


def _int_feature(values: np.ndarray) -> tf.train.Feature:
    return tf.train.Feature(int64_list=tf.train.Int64List(value=values.tolist()))


def serialize_instance(instance: Instance, max_seq_length: int, max_predictions: int) -> bytes:
    """Pads one instance to the fixed shapes and serializes it as a tf.train.Example."""
    length = len(instance.input_ids)
    num_masked = len(instance.masked.positions)
    features = {
        "input_ids": _int_feature(_pad(instance.input_ids, max_seq_length)),
        "input_mask": _int_feature(_pad(np.ones(length, np.int32), max_seq_length)),
        "segment_ids": _int_feature(_pad(instance.segment_ids, max_seq_length)),
        "token_boundary": _int_feature(_pad(instance.token_boundary, max_seq_length)),
        "masked_lm_positions": _int_feature(_pad(instance.masked.positions, max_predictions)),
        "masked_lm_ids": _int_feature(_pad(instance.masked.labels, max_predictions)),
        WEIGHTS_FEATURE: tf.train.Feature(float_list=tf.train.FloatList(
            value=_pad(np.ones(num_masked, np.float32), max_predictions).tolist())),
        LABEL_FEATURE: _int_feature(np.array([instance.sentence_order_label])),
    }
    example = tf.train.Example(features=tf.train.Features(feature=features))
    # deterministic=True orders the feature map, so equal instances give equal bytes
    # in every process (the Beam pipeline is compared with the local one on this).
    return example.SerializeToString(deterministic=True)


def parse_record(record: bytes) -> dict[str, np.ndarray]:
    """Decodes one serialized record into NumPy arrays (for tests and inspection)."""
    example = tf.train.Example.FromString(record)
    out = {}
    for name, feature in example.features.feature.items():
        kind = feature.WhichOneof("kind")
        values = getattr(feature, kind).value
        out[name] = np.array(values, np.float32 if kind == "float_list" else np.int64)
    return out


def temporary_path(path: str) -> str:
    """Where `path` is written before it is renamed: hidden, and unique to this process."""
    return atomic.temporary_path(path)


def write_records(path: str, records: Iterable[bytes]) -> int:
    """Writes serialized records to a TFRecord file atomically; returns how many.

    The file appears under its final name only when complete: a killed writer
    leaves a hidden temporary file that no shard pattern matches.
    """
    count = 0
    with atomic.atomic_path(path) as tmp, tf.io.TFRecordWriter(tmp) as writer:
        for record in records:
            writer.write(record)
            count += 1
    return count


def read_records(path: str) -> list[bytes]:
    """All serialized records of one TFRecord file, in order; the error names the file."""
    try:
        return [r.numpy() for r in tf.data.TFRecordDataset(path)]
    except (tf.errors.DataLossError, tf.errors.NotFoundError) as e:
        raise errors.UserError(f"{path}: cannot read TFRecords: {e.message}") from None
