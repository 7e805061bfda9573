"""The tf.data pretraining pipeline: round trip, sharding, errors naming files, dynamic masking."""

from __future__ import annotations

import collections
import glob
import shutil

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.tokenizer.spm import AlbertTokenizer
from albert_tf.training.data import (
    create_data,
    masking,
    pairs,
)
from albert_tf.training.data import (
    records as tfrecords,
)
from albert_tf.training.data.corpus import open_corpus, write_corpus_file
from albert_tf.training.pretrain.dynamic_masking import DynamicMasking
from albert_tf.training.pretrain.pipeline import pretraining_dataset

SEQ, PRED, BATCH = 64, 10, 6


@pytest.fixture(scope="module")
def shards(tmp_path_factory, corpus_documents, spm_model_path):
    """5 shards from 30 documents: (directory, records in file order)."""
    root = tmp_path_factory.mktemp("pipeline")
    write_corpus_file(str(root / "c.txt"), iter(corpus_documents[:30]))
    out = root / "data"
    options = pairs.GenerationOptions(max_seq_length=SEQ, max_predictions_per_seq=PRED, dupe_factor=2)
    create_data.create_pretraining_data(open_corpus(str(root / "c.txt")), str(out), spm_model_path,
                                             options, documents_per_shard=6, processes=1)
    files = sorted(glob.glob(f"{out}/pretrain-*.tfrecord"))
    assert len(files) == 5
    return out, [r for f in files for r in tfrecords.read_records(f)]


def _rows(batches) -> list[tuple]:
    """One hashable row per example, from (features, labels) batches."""
    rows = []
    for features, labels in batches:
        for i in range(len(labels["sentence_order_label"])):
            rows.append(tuple(np.asarray(v[i]).tobytes() for d in (features, labels) for v in
                              (d[k] for k in sorted(d))))
    return rows


def _expected_row(record: bytes) -> tuple:
    f = tfrecords.parse_record(record)
    features = {"input_mask": f["input_mask"], "input_type_ids": f["segment_ids"],
                "input_word_ids": f["input_ids"], "masked_lm_positions": f["masked_lm_positions"]}
    labels = {"masked_lm_ids": f["masked_lm_ids"], "masked_lm_weights": f["masked_lm_weights"],
              "sentence_order_label": f["next_sentence_labels"][0]}
    cast = lambda v: v.astype(np.float32 if v.dtype == np.float32 else np.int32)  # noqa: E731
    return tuple(cast(np.asarray(d[k])).tobytes() for d in (features, labels) for k in sorted(d))


def test_round_trip_reads_every_record_with_model_names_and_types(shards):
    out, records = shards
    ds = pretraining_dataset(f"{out}/*.tfrecord", BATCH, SEQ, PRED, is_training=False)
    features, labels = ds.element_spec
    assert {k: (v.shape.as_list(), v.dtype) for k, v in features.items()} == {
        "input_word_ids": ([BATCH, SEQ], tf.int32), "input_mask": ([BATCH, SEQ], tf.int32),
        "input_type_ids": ([BATCH, SEQ], tf.int32), "masked_lm_positions": ([BATCH, PRED], tf.int32)}
    assert {k: (v.shape.as_list(), v.dtype) for k, v in labels.items()} == {
        "masked_lm_ids": ([BATCH, PRED], tf.int32), "masked_lm_weights": ([BATCH, PRED], tf.float32),
        "sentence_order_label": ([BATCH], tf.int32)}
    got = _rows(ds.as_numpy_iterator())
    assert len(got) == len(records) // BATCH * BATCH  # drop_remainder
    expected = collections.Counter(map(_expected_row, records))
    assert not collections.Counter(got) - expected  # every row read is a record, unchanged


def test_training_mode_shuffles_and_repeats(shards):
    out, records = shards
    ds = pretraining_dataset(f"{out}/*.tfrecord", BATCH, SEQ, PRED, seed=3, shuffle_buffer=100)
    batches = len(records) // BATCH + 5
    rows = _rows(ds.take(batches).as_numpy_iterator())
    assert len(rows) == batches * BATCH  # past one epoch: it repeats
    in_order = _rows(pretraining_dataset(f"{out}/*.tfrecord", BATCH, SEQ, PRED, is_training=False)
                     .take(3).as_numpy_iterator())
    assert rows[:len(in_order)] != in_order
    again = pretraining_dataset(f"{out}/*.tfrecord", BATCH, SEQ, PRED, seed=3, shuffle_buffer=100)
    assert _rows(again.take(batches).as_numpy_iterator()) == rows  # a seed makes the order reproducible


def test_evaluation_pipelines_run_without_the_autotuning_thread(shards):
    # fit drops its validation iterator at every evaluation; with tf.data's autotuning
    # thread, destroying it waited out the thread's optimization period (28-41 s each).
    out, _ = shards
    evaluation = pretraining_dataset(f"{out}/*.tfrecord", BATCH, SEQ, PRED, is_training=False)
    training = pretraining_dataset(f"{out}/*.tfrecord", BATCH, SEQ, PRED, seed=3)
    assert evaluation.options().autotune.enabled is False
    assert training.options().autotune.enabled is not False


@pytest.mark.parametrize("pattern", ["*.tfrecord", "pretrain-00000.tfrecord"])
def test_input_context_splits_the_data_between_hosts(shards, pattern):
    out, _ = shards
    everything = _rows(pretraining_dataset(f"{out}/{pattern}", 1, SEQ, PRED, is_training=False)
                       .as_numpy_iterator())
    parts = []
    for host in range(2):
        context = tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=host,
                                             num_replicas_in_sync=2)
        ds = pretraining_dataset(f"{out}/{pattern}", 2, SEQ, PRED, is_training=False, input_context=context)
        assert ds.element_spec[1]["sentence_order_label"].shape == [1]  # per-replica batch: 2 / 2
        parts.append(_rows(ds.as_numpy_iterator()))
    assert not set(parts[0]) & set(parts[1])
    assert collections.Counter(parts[0] + parts[1]) == collections.Counter(everything)


def test_files_of_another_shape_are_named(shards, tmp_path):
    out, _ = shards
    with pytest.raises(ValueError, match=r"pretrain-00000.tfrecord: feature 'input_ids' has 64 values "
                                         r"but seq_length is 128"):
        pretraining_dataset(f"{out}/*.tfrecord", BATCH, 128, PRED)
    with pytest.raises(ValueError, match="no TFRecord files match"):
        pretraining_dataset(f"{tmp_path}/*.tfrecord", BATCH, SEQ, PRED)
    # a later file that differs fails when it is read, naming it
    shutil.copy(f"{out}/pretrain-00000.tfrecord", tmp_path / "a.tfrecord")
    bad = tf.train.Example.FromString(tfrecords.read_records(f"{out}/pretrain-00001.tfrecord")[0])
    bad.features.feature["input_ids"].int64_list.value.append(0)
    tfrecords.write_records(str(tmp_path / "b.tfrecord"), [bad.SerializeToString()])
    ds = pretraining_dataset(f"{tmp_path}/*.tfrecord", 1, SEQ, PRED, is_training=False)
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"b\.tfrecord.*input_ids"):
        list(ds.as_numpy_iterator())


@pytest.mark.parametrize("damage", ["flip", "truncate"])
def test_a_corrupt_file_is_named(shards, tmp_path, damage):
    out, _ = shards
    shutil.copy(f"{out}/pretrain-00000.tfrecord", tmp_path / "good.tfrecord")
    data = bytearray(open(f"{out}/pretrain-00001.tfrecord", "rb").read())
    if damage == "flip":
        data[len(data) // 2] ^= 0x40
    else:  # cut inside the last record (a cut between records leaves a valid, shorter file)
        data = data[:-7]
    (tmp_path / "damaged.tfrecord").write_bytes(bytes(data))
    ds = pretraining_dataset(f"{tmp_path}/*.tfrecord", 2, SEQ, PRED, is_training=False)
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"corrupt or truncated TFRecord file.*damaged"):
        list(ds.as_numpy_iterator())


# ---------------------------------------------------------------------------
# Dynamic masking.

@pytest.fixture(scope="module")
def dynamic(spm_model_path):
    return DynamicMasking.from_tokenizer(AlbertTokenizer(spm_model_path))


def _originals(records):
    """Unmasked ids [N, SEQ], lengths and token boundaries from static records."""
    ids, lengths, bounds = [], [], []
    for r in records:
        f = tfrecords.parse_record(r)
        x = f["input_ids"].copy()
        k = int(f["masked_lm_weights"].sum())
        x[f["masked_lm_positions"][:k]] = f["masked_lm_ids"][:k]
        ids.append(x)
        lengths.append(int(f["input_mask"].sum()))
        bounds.append(f["token_boundary"])
    return ids, lengths, bounds


def _runs(chosen: np.ndarray, bounds: np.ndarray) -> list[int]:
    """Lengths, in words, of the runs of consecutive masked words of one sequence."""
    word = np.cumsum(bounds) - 1
    masked_words = sorted(set(word[chosen]))
    runs, last = [], None
    for w in masked_words:
        if last is not None and w == last + 1:
            runs[-1] += 1
        else:
            runs.append(1)
        last = w
    return runs


def test_dynamic_masks_restore_the_text_and_change_every_epoch(shards, dynamic):
    out, records = shards
    ids, lengths, bounds = _originals(records)
    by_text = {x.tobytes(): (n, b) for x, n, b in zip(ids, lengths, bounds)}
    ds = pretraining_dataset(f"{out}/*.tfrecord", BATCH, SEQ, PRED, is_training=False, dynamic_masking=dynamic)
    # Two epochs through one iterator, as training consumes a repeated dataset. A global
    # seed (keras.utils.set_random_seed in another test) must not make them repeat.
    tf.random.set_seed(1234)
    batches = list(ds.repeat(2).as_numpy_iterator())
    epochs = [batches[:len(batches) // 2], batches[len(batches) // 2:]]
    changed = total = budget = 0
    for (f1, l1), (f2, _) in zip(*epochs):
        changed += np.sum(f1["masked_lm_positions"] != f2["masked_lm_positions"])
        for i in range(BATCH):
            x = f1["input_word_ids"][i].copy()
            k = int(l1["masked_lm_weights"][i].sum())
            pos = f1["masked_lm_positions"][i][:k]
            assert (l1["masked_lm_weights"][i][k:] == 0).all() and (np.diff(pos) > 0).all()
            x[pos] = l1["masked_lm_ids"][i][:k]
            n, b = by_text[x.astype(np.int64).tobytes()]  # unmasked, it is a record's text
            assert k <= masking.num_to_predict(n, 0.15, PRED)
            budget += masking.num_to_predict(n, 0.15, PRED)
            chosen = np.zeros(SEQ, bool)
            chosen[pos] = True
            word = np.cumsum(b) - 1
            assert all(chosen[:n][word[:n] == w].all() for w in set(word[chosen]))  # whole words
            assert not np.isin(x[pos], [dynamic.cls_id, dynamic.sep_id]).any()
            total += k
    assert total > 1000 and total / budget > 0.97  # the budget is (almost) always filled
    assert changed > total // 4  # new masks in the second epoch


def test_dynamic_masking_has_the_static_distribution(shards, dynamic):
    out, records = shards
    ids, lengths, bounds = _originals(records)
    by_text = {x.tobytes(): b for x, b in zip(ids, bounds)}
    rng = np.random.default_rng(0)
    static_runs, static_masked, static_tokens = collections.Counter(), 0, 0
    for _ in range(2):
        for x, n, b in zip(ids, lengths, bounds):
            maskable = ~np.isin(x[:n], [dynamic.cls_id, dynamic.sep_id])
            m = masking.mask_sequence(x[:n], b[:n] > 0, maskable, rng, masked_lm_prob=0.15, max_predictions=PRED,
                                      vocab_size=dynamic.vocab_size, mask_id=dynamic.mask_id)
            chosen = np.zeros(n, bool)
            chosen[m.positions] = True
            static_runs.update(_runs(chosen, b[:n]))
            static_masked += len(m.positions)
            static_tokens += n
    ds = pretraining_dataset(f"{out}/*.tfrecord", BATCH, SEQ, PRED, is_training=False, dynamic_masking=dynamic)
    runs, kinds, masked, tokens = collections.Counter(), np.zeros(3), 0, 0
    for _ in range(2):
        for features, labels in ds.as_numpy_iterator():
            for i in range(BATCH):
                k = int(labels["masked_lm_weights"][i].sum())
                pos = features["masked_lm_positions"][i][:k]
                x = features["input_word_ids"][i].copy()
                out_ids, label_ids = x[pos], labels["masked_lm_ids"][i][:k]
                x[pos] = label_ids
                chosen = np.zeros(SEQ, bool)
                chosen[pos] = True
                runs.update(_runs(chosen, by_text[x.astype(np.int64).tobytes()]))
                masked += k
                tokens += int(features["input_mask"][i].sum())
                kinds += [np.sum(out_ids == dynamic.mask_id),
                          np.sum((out_ids != dynamic.mask_id) & (out_ids != label_ids)),
                          np.sum(out_ids == label_ids)]
    assert masked / tokens == pytest.approx(static_masked / static_tokens, abs=0.01)
    for n in (1, 2, 3):
        assert runs[n] / sum(runs.values()) == pytest.approx(static_runs[n] / sum(static_runs.values()), abs=0.03)
    np.testing.assert_allclose(kinds / kinds.sum(), [0.8, 0.1, 0.1], atol=0.025)
