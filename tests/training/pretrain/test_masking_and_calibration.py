"""PretrainConfig.dynamic_masking in the training pipeline, the calibrated learning-rate
schedule of a time-budget run, and the fill-mask figures of the held-out evaluation."""

from __future__ import annotations

import collections
import json

import numpy as np
import pytest
import tensorflow as tf

from tests.helpers.pretraining_records import write_pretraining_records

SEQ, PRED = 64, 10


@pytest.fixture(scope="module")
def records(tmp_path_factory, corpus_documents, spm_model_path):
    """Pretraining TFRecords of 12 documents (seq 64, 10 predictions) and their vocabulary."""
    pattern = write_pretraining_records(tmp_path_factory.mktemp("masking_records"),
                                        corpus_documents[:12], spm_model_path, SEQ, PRED)
    return pattern, spm_model_path


def _masks_by_text(cfg, batches: int) -> dict[bytes, list[tuple]]:
    """Masked positions seen for each record (keyed by its unmasked ids) over `batches`
    training batches of `make_datasets`, the run's own pipeline."""
    from albert_tf.training.pretrain.run import make_datasets

    train, _ = make_datasets(cfg, tf.distribute.get_strategy(), SEQ, PRED, step=0)
    seen = collections.defaultdict(list)
    for features, labels in train.take(batches):
        ids = features["input_word_ids"].numpy()
        positions = features["masked_lm_positions"].numpy()
        weights = labels["masked_lm_weights"].numpy()
        for i in range(len(ids)):
            k = int(weights[i].sum())
            text = ids[i].copy()
            text[positions[i][:k]] = labels["masked_lm_ids"].numpy()[i][:k]
            seen[text.tobytes()].append(tuple(positions[i][:k]))
    return seen


@pytest.mark.parametrize("dynamic", [False, True])
def test_dynamic_masking_field_remasks_every_pass(records, tmp_path, dynamic):
    from albert_tf.training.pretrain.config import PretrainConfig

    data, spm = records
    cfg = PretrainConfig(train_data=data, output_dir=str(tmp_path), spm_model=spm,
                         global_batch_size=16, shuffle_buffer=50, dynamic_masking=dynamic)
    cfg.validate()
    tf.random.set_seed(3)
    total = sum(1 for _ in tf.data.TFRecordDataset(tf.io.gfile.glob(data)))
    seen = _masks_by_text(cfg, batches=3 * total // 16 + 2)  # about three passes
    repeated = {text: masks for text, masks in seen.items() if len(masks) >= 2}
    assert len(repeated) > total // 2  # the same records came back in later passes
    varied = sum(len(set(masks)) > 1 for masks in repeated.values())
    if dynamic:
        assert varied > 0.8 * len(repeated)  # new masks for (almost) every record
    else:
        assert varied == 0  # the masks create-data wrote, every pass


def test_dynamic_masking_needs_the_vocabulary(tmp_path):
    from albert_tf.errors import UserError
    from albert_tf.training.pretrain.config import load_config

    with pytest.raises(UserError, match="dynamic_masking=true needs spm_model"):
        load_config(None, ["dynamic_masking=true"], train_data="x", output_dir=str(tmp_path))
    assert load_config(None, [], train_data="x", output_dir=str(tmp_path)).dynamic_masking is False


def _reference_rate(step: int, peak: float, train_steps: int, warmup: int) -> float:
    """Linear warmup to `peak`, then linear decay to 0 at `train_steps` (written out here)."""
    if step < warmup:
        return peak * step / warmup
    return peak * (1.0 - min(step, train_steps) / train_steps)


def test_calibrated_schedule_switches_once_to_the_chosen_counts():
    import keras

    from albert_tf.training.pretrain.config import PretrainConfig
    from albert_tf.training.pretrain.run import Calibration, _CalibratedSchedule

    cfg = PretrainConfig(train_data="x", output_dir="y", learning_rate=0.5, train_steps=1000,
                         warmup_steps=10)
    rate = tf.Variable(0.0)
    asked, chosen, applied = [], [], []

    def choose(seconds, step):
        asked.append((seconds, step))
        return 40, 6

    scheduled = _CalibratedSchedule(rate, cfg, Calibration(3, choose),
                                    lambda *args: chosen.append(args))

    class Record(keras.callbacks.Callback):
        def on_train_batch_begin(self, batch, logs=None):
            applied.append((int(self.model.optimizer.iterations), float(rate.numpy())))

    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    optimizer = keras.optimizers.SGD()
    optimizer.learning_rate = lambda: rate
    model.compile(optimizer=optimizer, loss="mse")
    x = np.random.default_rng(0).normal(size=(48, 2)).astype("float32")
    model.fit(x, x[:, :1], batch_size=2, epochs=1, verbose=0, callbacks=[scheduled, Record()])
    assert len(asked) == 1 and asked[0][1] == 4 and asked[0][0] > 0  # after 1 + 3 steps
    assert chosen == [(40, 6, asked[0][0])]
    assert scheduled.chosen["train_steps"] == 40 and scheduled.chosen["at_step"] == 4
    assert [s for s, _ in applied] == list(range(24))
    for step, value in applied:
        counts = (1000, 10) if step < 4 else (40, 6)  # the config's until the choice
        assert value == pytest.approx(_reference_rate(step, 0.5, *counts), rel=1e-6), step
    # The optimizer reads the variable the callback sets.
    assert float(keras.ops.convert_to_numpy(optimizer.learning_rate)) == float(rate.numpy())


def test_a_calibrated_run_behind_its_deadline_is_shortened_never_lengthened(monkeypatch):
    import keras

    from albert_tf.training.pretrain import run as pretrain_run
    from albert_tf.training.pretrain.config import PretrainConfig
    from albert_tf.training.pretrain.run import Calibration, _CalibratedSchedule

    monkeypatch.setattr(pretrain_run, "RECHECK_EVERY", 5)
    monkeypatch.setattr(pretrain_run, "PACE_WINDOW_S", 1.5)
    clock = {"now": 0.0}  # each step takes 1 s on this clock
    monkeypatch.setattr(pretrain_run.time, "monotonic", lambda: clock["now"])
    cfg = PretrainConfig(train_data="x", output_dir="y", learning_rate=0.5, train_steps=1000,
                         warmup_steps=2)
    rate, chosen = tf.Variable(0.0), []
    deadlines = {"at": 30.0}  # steps 1-30 fit, not the 40 chosen

    scheduled = _CalibratedSchedule(rate, cfg, Calibration(2, lambda s, step: (40, 4),
                                                           deadline=lambda: deadlines["at"]),
                                    lambda *args: chosen.append(args))

    class Tick(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            clock["now"] += 1.0

    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    optimizer = keras.optimizers.SGD()
    optimizer.learning_rate = lambda: rate
    model.compile(optimizer=optimizer, loss="mse")
    x = np.random.default_rng(0).normal(size=(40, 2)).astype("float32")
    model.fit(x, x[:, :1], batch_size=2, epochs=1, verbose=0, callbacks=[Tick(), scheduled])
    assert chosen[0][:2] == (40, 4)
    # At the first check past the choice (step 5, 1 s/step since step 3, the clock at 5 of
    # 30 s) the run is cut to the 30 steps that fit, and the decay laid over them.
    assert chosen[1][:2] == (30, 4), chosen
    assert scheduled.chosen["train_steps"] == 30 and scheduled.chosen["shortened_at"] == 5
    assert float(scheduled.schedule(29)) == pytest.approx(_reference_rate(29, 0.5, 30, 4))
    # A later deadline never lengthens it.
    deadlines["at"] = 1e9
    scheduled._keep_pace(20)
    assert scheduled.chosen["train_steps"] == 30 and len(chosen) == 2


def test_a_calibrated_run_records_its_counts_and_stops_there(records, tmp_path):
    from albert_tf.training.pretrain.config import PretrainConfig
    from albert_tf.training.pretrain.run import Calibration, run

    data, spm = records
    cfg = PretrainConfig(
        train_data=data, output_dir=str(tmp_path / "run"), spm_model=spm,
        albert={"embedding_size": 16, "hidden_size": 32, "num_hidden_layers": 1,
                "num_attention_heads": 2, "intermediate_size": 64},
        global_batch_size=8, train_steps=500, warmup_steps=5, checkpoint_every=6,
        eval_steps=1, log_every=2, shuffle_buffer=20, precision="float32", jit_compile=False)
    seen = []

    def choose(seconds, step):
        seen.append(seconds)
        return 11, 3

    summary = run(cfg, calibration=Calibration(2, choose))
    assert summary["step"] == 11 and len(seen) == 1 and seen[0] > 0
    calibration = summary["calibration"]
    assert (calibration["train_steps"], calibration["warmup_steps"]) == (11, 3)
    assert calibration["seconds_per_step"] == seen[0] and calibration["at_step"] == 3
    recorded = json.loads((tmp_path / "run" / "run_config.json").read_text())
    assert (recorded["train_steps"], recorded["warmup_steps"]) == (11, 3)
    assert recorded["calibration"]["seconds_per_step"] == seen[0]
    assert tf.train.latest_checkpoint(str(tmp_path / "run" / "checkpoints")).endswith("ckpt-11")
    # A calibrated run is not resumed by calibrating again: its recorded counts resume it.
    import dataclasses

    from albert_tf.errors import UserError

    with pytest.raises(UserError, match="warmup_steps 3 -> 5"):
        run(cfg, calibration=Calibration(2, choose))
    with pytest.raises(UserError, match="resume it with the train_steps and warmup_steps"):
        run(dataclasses.replace(cfg, warmup_steps=3), calibration=Calibration(2, choose))
    resumed = run(dataclasses.replace(cfg, train_steps=11, warmup_steps=3))
    assert resumed["start_step"] == resumed["step"] == 11 and resumed["calibration"] is None


def test_fill_mask_top5_and_the_unigram_baseline(records):
    import keras

    from albert_tf import AlbertConfig, AlbertPretrainer
    from albert_tf.tokenizer.spm import AlbertTokenizer
    from albert_tf.training.data import records as tfrecords
    from albert_tf.training.pretrain.evaluation import evaluate_pretraining, masked_label_counts

    data, spm = records
    vocab = AlbertTokenizer(spm).vocab_size
    counts = masked_label_counts(data, vocab)
    # Independently: every masked label of every record, read with the record parser.
    labels = []
    for path in sorted(tf.io.gfile.glob(data)):
        for record in tfrecords.read_records(path):
            f = tfrecords.parse_record(record)
            labels += list(f["masked_lm_ids"][f["masked_lm_weights"] > 0])
    assert counts.sum() == len(labels)
    assert (counts == np.bincount(labels, minlength=vocab)).all()

    keras.utils.set_random_seed(5)
    model = AlbertPretrainer(AlbertConfig(vocab_size=vocab, embedding_size=8, hidden_size=12,
                                          num_hidden_layers=1, num_attention_heads=3,
                                          intermediate_size=16, max_position_embeddings=SEQ))
    result = evaluate_pretraining(model, data, batch_size=4, unigram_counts=counts)
    # Recomputed from the model's logits with a full sort, and the baseline by hand.
    from albert_tf.training.pretrain.pipeline import pretraining_dataset

    top1 = top5 = total = 0
    held = collections.Counter()
    for inputs, batch_labels in pretraining_dataset(data, 4, SEQ, PRED, is_training=False):
        logits = model(inputs, training=False)["mlm_logits"].numpy()
        ids = batch_labels["masked_lm_ids"].numpy()
        weights = batch_labels["masked_lm_weights"].numpy()
        order = np.argsort(-logits, axis=-1)
        for b, p in zip(*np.nonzero(weights)):
            top1 += order[b, p, 0] == ids[b, p]
            top5 += ids[b, p] in order[b, p, :5]
            held[ids[b, p]] += 1
            total += 1
    assert result["masked_tokens"] == total
    assert result["mlm_accuracy"] == pytest.approx(top1 / total)
    assert result["mlm_top5_accuracy"] == pytest.approx(top5 / total)
    assert result["mlm_top5_accuracy"] >= result["mlm_accuracy"]
    frequent = sorted(range(vocab), key=lambda i: (-counts[i], i))
    assert result["unigram_top1_accuracy"] == pytest.approx(held[frequent[0]] / total)
    assert result["unigram_top5_accuracy"] == pytest.approx(
        sum(held[i] for i in frequent[:5]) / total)
    assert 0 < result["unigram_top1_accuracy"] < result["unigram_top5_accuracy"] < 1
