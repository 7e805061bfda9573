"""The tf.data pipeline that feeds pretraining from the TFRecord shards.

`pretraining_dataset` reads files in the original ALBERT format (ours or the
original create_pretraining_data.py's), shards them per host, interleaves
them in parallel, shuffles, batches with drop_remainder, parses batch-wise,
casts int64 to int32 and renames the features to the model's inputs and
labels; optionally it re-masks every batch (`dynamic_masking.py`).

Each file's readable bytes are checked against its size, so that a corrupt or
truncated file raises an error naming it (TFRecordDataset's own error only
gives a byte offset); records carry their file name and index into
`tf.io.parse_example`, so a record that does not match the expected features
(for example data made with another max_seq_length) names its file too, and
every parsed record is checked against what the model can use (`_checked`: ids
within the vocabulary, positions within the sequence, labels in range, finite
weights) before it reaches a step; `record_error` turns a refusal into one line
naming the file and the record.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

import tensorflow as tf

from albert_tf.errors import UserError

from ..data import records as tfrecords
from .dynamic_masking import DynamicMasking, remask


def list_files(file_pattern: str | Sequence[str]) -> list[str]:
    """Sorted files matching one or more (comma-separated) patterns.

    Raises:
      ValueError: a pattern matches nothing.
    """
    patterns = file_pattern.split(",") if isinstance(file_pattern, str) else list(file_pattern)
    files: list[str] = []
    for pattern in filter(None, (p.strip() for p in patterns)):
        matches = sorted(tf.io.gfile.glob(pattern))
        if not matches:
            raise UserError(f"no TFRecord files match {pattern!r}")
        files.extend(m for m in matches if m not in files)
    return files


def check_framing(path: str) -> None:
    """Walks the TFRecord headers of a local file; UserError naming it if it is truncated.

    Reads 12 bytes per record (its length and that length's CRC) and seeks past
    the data, so checking is cheap next to training; remote files are checked
    while they are read (`_read_file`).
    """
    if "://" in path:
        return
    size = os.path.getsize(path)
    offset = records = 0
    with open(path, "rb") as f:
        while offset < size:
            header = f.read(12)
            if len(header) < 12:
                break
            length = int.from_bytes(header[:8], "little")
            offset += _RECORD_OVERHEAD + length
            records += 1
            f.seek(offset)
    if offset != size:
        raise UserError(f"{path}: corrupt or truncated TFRecord file (record {records} "
                        f"ends at byte {offset}, the file has {size} bytes); rewrite it "
                        "(rerun create-data) or leave it out")


def check_files(files: Sequence[str], seq_length: int, max_predictions: int) -> None:
    """Before training: every file's first record has the expected features and lengths
    (mixed-length shards are refused) and every local file's framing is whole.

    Raises:
      UserError naming the first bad file.
    """

    def check(path):
        check_file(path, seq_length, max_predictions)
        check_framing(path)

    with ThreadPoolExecutor(min(8, len(files))) as pool:
        list(pool.map(check, files))  # re-raises the first failure, in file order


def check_file(path: str, seq_length: int, max_predictions: int) -> None:
    """Checks the first record of a file against the expected features.

    Raises:
      ValueError: naming the file and the feature that is missing, of the wrong
        type, or of the wrong length.
    """
    try:
        first = next(iter(tf.data.TFRecordDataset(path).take(1)), None)
    except (tf.errors.DataLossError, tf.errors.NotFoundError) as e:
        raise UserError(f"{path}: cannot read TFRecords: {e.message}") from None
    if first is None:
        raise UserError(f"{path}: holds no records")
    try:
        example = tf.train.Example.FromString(first.numpy())
    except Exception as e:  # protobuf's DecodeError: a TFRecord of something else
        raise UserError(f"{path}: the first record is not a tf.train.Example ({e})") from None
    for name, spec in tfrecords.feature_spec(seq_length, max_predictions).items():
        if name not in example.features.feature:
            raise UserError(f"{path}: records lack the feature {name!r}; expected the original ALBERT "
                             f"features {list(tfrecords.FEATURE_NAMES)}")
        feature = example.features.feature[name]
        kind = "float_list" if spec.dtype == tf.float32 else "int64_list"
        if feature.WhichOneof("kind") != kind:
            raise UserError(f"{path}: feature {name!r} is {feature.WhichOneof('kind')}, expected {kind}")
        size = len(getattr(feature, kind).value)
        if size != spec.shape[0]:
            which = "seq_length" if name in tfrecords.SEQUENCE_FEATURES else "max_predictions"
            raise UserError(f"{path}: feature {name!r} has {size} values but {which} is {spec.shape[0]}; "
                             f"read it with the {which} it was written with")


_RECORD_OVERHEAD = 16  # TFRecord framing per record: length (8), its CRC (4), data CRC (4)


def _not_end_marker(record):
    return record, False


def _read_file(path: tf.Tensor, size: tf.Tensor) -> tf.data.Dataset:
    """(path, record) pairs of one file; fails naming the file if it cannot be read whole.

    TFRecordDataset's own error gives only a byte offset, so reading errors are
    caught per file and the bytes read are compared with the file's size at
    its end: a corrupt or truncated file stops the pipeline with its name.
    """
    records = tf.data.TFRecordDataset(path).ignore_errors()
    end = tf.data.Dataset.from_tensors((tf.constant(b""), True))
    marked = records.map(_not_end_marker).concatenate(end)

    def count(read, item):
        record, is_end = item
        read += tf.cast(tf.strings.length(record), tf.int64) + _RECORD_OVERHEAD * tf.cast(~is_end, tf.int64)
        ok = tf.debugging.Assert(~is_end | tf.equal(read, size), [
            "corrupt or truncated TFRecord file", path, "readable bytes:", read, "file size:", size])
        with tf.control_dependencies([ok]):
            return read, (tf.identity(record), is_end)

    def keep(record, is_end):
        return ~is_end

    def with_path(index, item):
        return path, index, item[0]

    checked = marked.scan(tf.constant(0, tf.int64), count)
    return checked.filter(keep).enumerate().map(with_path)  # (path, index in the file, record)


def _to_model_inputs(features: dict) -> tuple[dict, dict]:
    inputs = {
        "input_word_ids": features["input_ids"],
        "input_mask": features["input_mask"],
        "input_type_ids": features["segment_ids"],
        "masked_lm_positions": features["masked_lm_positions"],
    }
    labels = {
        "masked_lm_ids": features["masked_lm_ids"],
        "masked_lm_weights": features["masked_lm_weights"],
        "sentence_order_label": features["next_sentence_labels"][:, 0],
    }
    return inputs, labels


def _records(files: list[str], input_context, is_training: bool, cycle_length: int,
             seed: int | None) -> tf.data.Dataset:
    """(path, index, record) triples of this host's share of the files, interleaved (repeated when training)."""
    sizes = [tf.io.gfile.stat(f).length for f in files]
    dataset = tf.data.Dataset.from_tensor_slices((files, tf.constant(sizes, tf.int64)))
    hosts = input_context.num_input_pipelines if input_context is not None else 1
    shard_records = hosts > len(files)  # too few files: every host reads all, keeps its records
    if hosts > 1 and not shard_records:
        dataset = dataset.shard(hosts, input_context.input_pipeline_id)
    if is_training and not shard_records:
        dataset = dataset.shuffle(len(files), seed=seed, reshuffle_each_iteration=True).repeat()
    dataset = dataset.interleave(
        _read_file, cycle_length=min(cycle_length, len(files)), block_length=1,
        num_parallel_calls=tf.data.AUTOTUNE, deterministic=not is_training or seed is not None)
    if shard_records:
        dataset = dataset.shard(hosts, input_context.input_pipeline_id)
        dataset = dataset.repeat() if is_training else dataset
    return dataset


def pretraining_dataset(file_pattern: str | Sequence[str], batch_size: int, seq_length: int,
                        max_predictions: int, *, is_training: bool = True,
                        input_context: tf.distribute.InputContext | None = None,
                        dynamic_masking: DynamicMasking | None = None, shuffle_buffer: int = 10_000,
                        cycle_length: int = 8, seed: int | None = None,
                        vocab_size: int | None = None,
                        type_vocab_size: int | None = None) -> tf.data.Dataset:
    """The pretraining input pipeline.

    Args:
      file_pattern: TFRecord files: a glob, comma-separated globs, or a list.
      batch_size: the global batch size; with `input_context`, each replica's
        batch is `input_context.get_per_replica_batch_size(batch_size)`.
      seq_length, max_predictions: T and P the files were written with.
      is_training: shuffle files and records and repeat forever; otherwise one
        pass in file order.
      input_context: from `strategy.distribute_datasets_from_function`; files
        are split across input pipelines (hosts) by it.
      dynamic_masking: re-mask every batch at read time (new masks each epoch).
      shuffle_buffer: records in the shuffle buffer.
      cycle_length: files read in parallel.
      seed: seed of the file and record shuffles; with a seed the order of
        the examples is reproducible (parallel reads keep their order), without
        one training reads whichever file is ready first. Dynamic masks are
        drawn afresh either way.
      vocab_size, type_vocab_size: the model's; token ids and segment ids at or past
        them are refused (None: not checked). Positions are checked against
        `seq_length`, labels and weights always.

    Returns:
      A dataset of `(features, labels)` with static shapes (B = per-replica batch):
      features {"input_word_ids", "input_mask", "input_type_ids": int32 [B, T],
      "masked_lm_positions": int32 [B, P]}; labels {"masked_lm_ids": int32 [B, P],
      "masked_lm_weights": float32 [B, P], "sentence_order_label": int32 [B]}.

    Raises:
      ValueError: no files, or the first file's records do not match T and P.
      tf.errors.InvalidArgumentError while iterating: a record the model cannot use
        (`record_error` makes it one line naming the file and the record).
    """
    files = list_files(file_pattern)
    check_file(files[0], seq_length, max_predictions)
    if input_context is not None:
        batch_size = input_context.get_per_replica_batch_size(batch_size)
    dataset = _records(files, input_context, is_training, cycle_length, seed)
    if is_training:
        dataset = dataset.shuffle(shuffle_buffer, seed=seed, reshuffle_each_iteration=True)
    dataset = dataset.batch(batch_size, drop_remainder=True)
    spec = tfrecords.feature_spec(seq_length, max_predictions)

    def parse(paths, indices, records):
        parsed = tf.io.parse_example(records, spec, example_names=paths)
        parsed = _checked(parsed, paths, indices, seq_length, vocab_size, type_vocab_size)
        features = {name: tf.cast(value, tf.int32) if value.dtype == tf.int64 else value
                    for name, value in parsed.items()}
        if dynamic_masking is not None:
            features = remask(features, dynamic_masking, max_predictions)
        inputs, labels = _to_model_inputs(features)
        for value in list(inputs.values()) + list(labels.values()):
            value.set_shape([batch_size] + value.shape[1:])
        return inputs, labels

    dataset = dataset.map(parse, num_parallel_calls=tf.data.AUTOTUNE,
                          deterministic=not is_training or seed is not None)
    dataset = dataset.prefetch(tf.data.AUTOTUNE)
    if not is_training:
        dataset = dataset.with_options(_eval_options())
    return dataset


# ------------------------------------------------------- records the model can use
_RECORD_REFUSED = "record the model cannot use: "  # marks the check's message in TF's error


def _id_range(size: int | None, what: str):
    if size is None:
        return None
    return lambda v: (v < 0) | (v >= size), f"{what} (0 to {size - 1})"


def _checks(seq_length: int, vocab_size: int | None, type_vocab_size: int | None) -> list:
    """(feature, bad(values) -> bool tensor, what it must be) for every checked feature."""
    vocabulary = f"an id of the {vocab_size}-piece vocabulary"
    checks = [
        ("input_ids", _id_range(vocab_size, vocabulary)),
        ("segment_ids", _id_range(type_vocab_size, f"a segment of type_vocab_size="
                                                   f"{type_vocab_size}")),
        ("input_mask", (lambda v: (v != 0) & (v != 1), "0 or 1")),
        ("masked_lm_positions", (lambda v: (v < 0) | (v >= seq_length),
                                 f"a position in the sequence (0 to {seq_length - 1})")),
        ("masked_lm_ids", _id_range(vocab_size, vocabulary)),
        ("masked_lm_weights", (lambda v: ~tf.math.is_finite(v) | (v < 0),
                               "a finite weight >= 0")),
        ("next_sentence_labels", (lambda v: (v != 0) & (v != 1),
                                  "0 or 1 (the sentence-pair label)")),
    ]
    return [(name, *check) for name, check in checks if check is not None]


def _checked(parsed: dict, paths, indices, seq_length: int, vocab_size: int | None,
             type_vocab_size: int | None) -> dict:
    """`parsed` ([B, N] features of B records), once every record is one the model can
    use; else the batch fails with an InvalidArgumentError naming the first bad record's
    file, index, feature and value (`record_error` reads it). An id past the vocabulary
    or a position past the sequence would fail a gather mid-step on a CPU and read zeros
    silently on a GPU; a NaN weight would train a NaN model."""
    message = tf.constant("")
    problems = []
    for name, bad, expected in reversed(_checks(seq_length, vocab_size, type_vocab_size)):
        values = parsed[name]
        wrong = bad(values)                                      # [B, N]
        rows = tf.reduce_any(wrong, axis=1)                      # [B]
        row = tf.argmax(tf.cast(rows, tf.int32), output_type=tf.int32)
        column = tf.argmax(tf.cast(wrong[row], tf.int32), output_type=tf.int32)
        text = tf.strings.join([
            paths[row], ": record ", tf.strings.as_string(indices[row]), " (counting from 0): ",
            name, " holds ", tf.strings.as_string(values[row, column]), ", not ", expected])
        found = tf.reduce_any(rows)
        message = tf.where(found, text, message)  # reversed: the first check's wins
        problems.append(found)
    ok = ~tf.reduce_any(tf.stack(problems))
    check = tf.debugging.Assert(ok, [tf.strings.join([_RECORD_REFUSED, message])],
                                summarize=1)
    with tf.control_dependencies([check]):
        return {name: tf.identity(value) for name, value in parsed.items()}


def record_error(error: Exception) -> UserError | None:
    """The one line of a record `_checked` refused (from TensorFlow's error text), or None."""
    found = re.search(re.escape(_RECORD_REFUSED) + r"(.*?)\]?\s*$",
                      str(getattr(error, "message", error)), re.MULTILINE)
    if found is None:
        return None
    return UserError(f"{found.group(1)}; fix the record or rewrite the file (create-data), "
                     "or leave the file out")


def fingerprint(files: Sequence[str]) -> dict[str, str]:
    """{file: "SIZE:HASH"} of data files: their size and a hash of their first and last
    64 KiB, cheap for any size, so that a resume on other data is noticed."""
    result = {}
    for path in files:
        size = tf.io.gfile.stat(path).length
        digest = hashlib.sha256(str(size).encode())
        with tf.io.gfile.GFile(path, "rb") as f:
            digest.update(f.read(1 << 16))
            if size > 1 << 16:
                f.seek(max(size - (1 << 16), 1 << 16))
                digest.update(f.read())
        result[path] = f"{size}:{digest.hexdigest()[:16]}"
    return result


def _eval_options() -> tf.data.Options:
    """Evaluation pipelines run without tf.data's autotuning thread: `fit` drops the
    validation iterator at every evaluation, and destroying an iterator waits for that
    thread's optimization period (measured 28-41 s of idle cores per evaluation on 2
    cores, a third of the demo's pretraining time)."""
    options = tf.data.Options()
    options.autotune.enabled = False
    return options

