"""The training loop: a small real task learned far above chance through `albert-tf finetune`
on CSV files, the best checkpoint kept, early stopping, the schedule and TensorBoard."""

import csv
import glob
import json
import logging
import math
import os
import warnings

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.core.util import event_pb2

from albert_tf import (
    AlbertConfig,
    AlbertPretrainer,
    AlbertTokenClassifier,
    load_checkpoint,
    save_checkpoint,
)
from albert_tf.checkpoint import open_checkpoint
from albert_tf.tokenizer.spm import AlbertTokenizer
from albert_tf.training.finetune.bucketing import Encoded
from albert_tf.training.finetune.examples import TextExamples, encode_texts
from albert_tf.training.finetune.run import main
from albert_tf.training.finetune.sequence import SequenceTask
from albert_tf.training.finetune.train import PlateauHint, TrainConfig, finetune, predict_rows
from tests.helpers.fresh_process import SAFETY_NET_S

WORD = "if"


def _has_word(sentence):
    return WORD in sentence.lower().replace(",", " ").split()


@pytest.fixture(scope="module")
def word_task(corpus_documents):
    """Sentences of the embedded corpus, labelled by whether they contain the word "if"
    (the label is recoverable from the text); balanced, 800 train / 200 dev."""
    sentences = [s for d in corpus_documents for s in d if 4 <= len(s.split()) <= 30]
    positive = [s for s in sentences if _has_word(s)][:500]
    negative = [s for s in sentences if not _has_word(s)][:500]
    rows = [(s, "yes") for s in positive] + [(s, "no") for s in negative]
    np.random.default_rng(0).shuffle(rows)
    return rows[:800], rows[800:]


def _write_csv(path, rows):
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["sentence", "has_if"])
        writer.writerows(rows)
    return str(path)


def _checkpoint(path, tokenizer, spm_model_path, hidden=32):
    config = AlbertConfig(vocab_size=tokenizer.vocab_size, embedding_size=16, hidden_size=hidden,
                          num_hidden_layers=2, num_attention_heads=2, intermediate_size=2 * hidden,
                          max_position_embeddings=64)
    save_checkpoint(AlbertPretrainer(config), str(path), spm_model=spm_model_path)
    return str(path)


def _scalars(directory):
    tags = {}
    for path in glob.glob(os.path.join(directory, "events.out.tfevents.*")):
        for record in tf.data.TFRecordDataset(path):
            event = event_pb2.Event.FromString(record.numpy())
            for value in event.summary.value:
                tags.setdefault(value.tag, []).append(event.step)
    return tags


@pytest.mark.slow
def test_csv_task_learns_far_above_chance(word_task, spm_model_path, tmp_path):
    tokenizer = AlbertTokenizer(spm_model_path)
    checkpoint = _checkpoint(tmp_path / "pretrained", tokenizer, spm_model_path)
    train, dev = (_write_csv(tmp_path / n, rows) for n, rows in zip(("train.csv", "dev.csv"), word_task))
    out = str(tmp_path / "out")
    assert main(["--task", "classify", "--checkpoint", checkpoint, "--output", out,
                 "--data", train, dev, "--columns", "sentence:has_if", "--epochs", "6",
                 "--batch-size", "16", "--learning-rate", "2e-3", "--seq-length", "64",
                 "--set", "jit_compile=false"]) == 0
    with open(os.path.join(out, "eval_results.json")) as f:
        results = json.load(f)
    accuracies = [h["accuracy"] for h in results["history"]]
    assert len(accuracies) == 6
    assert results["best"]["accuracy"] == max(accuracies) >= 0.8  # chance is 0.5
    assert max(accuracies) > accuracies[0]
    # The saved model is the best one, with its labels, and ready to export.
    info = open_checkpoint(out).task_record.to_dict()
    assert info["task"] == "classification" and info["label_names"] == ["no", "yes"]
    assert os.path.isfile(os.path.join(out, "spiece.model"))
    model = load_checkpoint(out)
    texts = [s for s, _ in word_task[1]]
    labels = np.array([int(y == "yes") for _, y in word_task[1]])
    data = encode_texts(tokenizer, TextExamples(texts, None, labels, [""] * len(texts)), 64)
    logits = np.stack(predict_rows(model, data, 32, 64, [16, 32, 64]))
    assert np.mean(np.argmax(logits, -1) == labels) == pytest.approx(results["best"]["accuracy"])
    tags = _scalars(os.path.join(out, "tensorboard", "eval"))
    assert tags["accuracy"] == [50, 100, 150, 200, 250, 300]  # 800 / 16 steps an epoch
    assert {"loss", "learning_rate", "accuracy"} <= set(_scalars(os.path.join(out, "tensorboard", "train")))


def _tiny_task(tokenizer, n=24):
    texts = [f"sentence number {i} is {'long ' * (i % 5)}here" for i in range(n)]
    labels = np.arange(n) % 2
    data = encode_texts(tokenizer, TextExamples(texts, None, labels, [str(i) for i in range(n)]), 16, "logits")
    return SequenceTask("tiny", ["a", "b"], ("accuracy",), "accuracy", data, {"dev": data})


def test_early_stopping_and_best_weights(spm_model_path, tmp_path):
    tokenizer = AlbertTokenizer(spm_model_path)
    config = AlbertConfig(vocab_size=tokenizer.vocab_size, embedding_size=8, hidden_size=12,
                          num_hidden_layers=1, num_attention_heads=3, intermediate_size=16,
                          max_position_embeddings=16)
    # A learning rate far below float32's resolution of the weights (zero is refused):
    # nothing improves after the first evaluation.
    out = str(tmp_path / "out")
    summary = finetune(_tiny_task(tokenizer), config, TrainConfig(
        out, epochs=6, batch_size=8, learning_rate=1e-20, seq_length=16, patience=2,
        jit_compile=False, verbose=0))
    assert [h["epoch"] for h in summary["history"]] == [1, 2, 3]
    assert summary["best"]["epoch"] == 1
    assert open_checkpoint(out).task_record.to_dict()["label_names"] == ["a", "b"]


def _tiny_config(tokenizer):
    return AlbertConfig(vocab_size=tokenizer.vocab_size, embedding_size=8, hidden_size=12,
                        num_hidden_layers=1, num_attention_heads=3, intermediate_size=16,
                        max_position_embeddings=16)


def test_results_as_run_glue_writes_them_and_eval_curves_on_the_step_axis(spm_model_path,
                                                                          tmp_path):
    tokenizer = AlbertTokenizer(spm_model_path)
    task = _tiny_task(tokenizer)
    out = str(tmp_path / "out")
    # lr 1e-20: the weights do not move, so every epoch's eval loss is the final model's.
    # Three buckets: the eval loss is averaged over groups of lengths.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        finetune(task, _tiny_config(tokenizer), TrainConfig(
            out, epochs=3, batch_size=8, learning_rate=1e-20, seq_length=16, buckets=[8, 12, 16],
            jit_compile=False, verbose=0))
    assert not [w for w in caught if "ran out of data" in str(w.message)]
    assert len({len(ids) for ids in task.evals["dev"].features["input_word_ids"]}) > 2
    with open(os.path.join(out, "eval_results.json")) as f:
        results = json.load(f)
    best = results["best"]
    assert results["epoch"] == best["epoch"] == 1
    assert results["eval_accuracy"] == best["accuracy"]
    assert [h["epoch"] for h in results["history"]] == [1, 2, 3]
    # The eval loss is the cross entropy of the dev set, recomputed here in float64.
    model = load_checkpoint(out)
    logits = np.stack(predict_rows(model, task.evals["dev"], 8, 16, None)).astype(np.float64)
    log_probs = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    labels = task.evals["dev"].labels["logits"]
    expected = -np.mean(log_probs[np.arange(len(labels)), labels])
    assert results["eval_loss"] == pytest.approx(expected, rel=1e-4)
    # 24 examples in batches of 8: 3 steps an epoch; evaluations at steps 3, 6 and 9.
    evaluation = _scalars(os.path.join(out, "tensorboard", "eval"))
    assert evaluation["accuracy"] == evaluation["loss"] == [3, 6, 9]
    assert _scalars(os.path.join(out, "tensorboard", "train"))["loss"] == list(range(1, 10))


def test_a_model_that_cannot_learn_gets_one_plateau_warning(spm_model_path, tmp_path, caplog):
    tokenizer = AlbertTokenizer(spm_model_path)
    # lr 1e-20: the weights do not move, the loss stays at ln(2) (a near-uniform guess).
    with caplog.at_level(logging.WARNING, logger="albert_tf.training.finetune.train"):
        finetune(_tiny_task(tokenizer), _tiny_config(tokenizer), TrainConfig(
            str(tmp_path / "out"), epochs=4, batch_size=8, learning_rate=1e-20, seq_length=16,
            jit_compile=False, verbose=0))
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING
                and "not learning" in r.getMessage()]
    assert len(warnings) == 1, warnings
    # Epoch 2 of 4 ends at step 6 of 12: half the steps.
    assert "ln(2) = 0.6931" in warnings[0] and "after 6 of 12 steps" in warnings[0]
    assert "learning rate 1e-20 (adamw), warmup 1 steps then linear decay to 0 at step 12" \
        in warnings[0]


@pytest.mark.parametrize("loss, warned", [(0.6931, True), (0.699, True), (0.68, False),
                                          (0.30, False)])
def test_the_plateau_hint_is_ln_c_within_one_percent_once(loss, warned, caplog):
    hint = PlateauHint(math.log(2), 2, steps_per_epoch=10, total=40, schedule="lr x")
    with caplog.at_level(logging.WARNING, logger="albert_tf.training.finetune.train"):
        hint.on_epoch_end(0, {"loss": 0.6931})  # step 10 of 40: too early to tell
        for epoch in (1, 2, 3):  # checked at step 20 only
            hint.on_epoch_end(epoch, {"loss": loss if epoch == 1 else 0.6931})
    assert len(caplog.records) == int(warned)


def test_schedule():
    config = TrainConfig("x", epochs=3, batch_size=10)
    assert config.schedule(105) == (3, 10, 30, 3)  # warmup 10% of 30
    config = TrainConfig("x", train_steps=25, batch_size=10, warmup_steps=7)
    assert config.schedule(105) == (3, 9, 27, 7)  # 3 evaluations, steps rounded up
    assert TrainConfig("x", train_steps=4, batch_size=10).schedule(105)[:3] == (1, 4, 4)
    assert TrainConfig("x", seq_length=128).bucket_lengths() == [16, 32, 64, 128]
    assert TrainConfig("x", buckets=[]).bucket_lengths() is None


_MIRRORED_SCRIPT = """
import sys
import numpy as np
import tensorflow as tf
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
from albert_tf import AlbertConfig
from albert_tf.checkpoint import open_checkpoint
from albert_tf.tokenizer.spm import AlbertTokenizer
from albert_tf.training.runtime.distribute import create_strategy
from albert_tf.training.finetune.bucketing import Encoded
from albert_tf.training.finetune.examples import TextExamples, encode_texts
from albert_tf.training.finetune.sequence import SequenceTask
from albert_tf.training.finetune.train import TrainConfig, finetune
spm_model, out = sys.argv[1:]
tokenizer = AlbertTokenizer(spm_model)
texts = [f"sentence number {i} is {'long ' * (i % 7)}here" for i in range(40)]
data = encode_texts(tokenizer, TextExamples(texts, None, np.arange(40) % 2, [""] * 40), 16, "logits")
task = SequenceTask("tiny", ["a", "b"], ("accuracy",), "accuracy", data, {"dev": data})
config = AlbertConfig(vocab_size=tokenizer.vocab_size, embedding_size=8, hidden_size=12,
                      num_hidden_layers=1, num_attention_heads=3, intermediate_size=16,
                      max_position_embeddings=16)
strategy = create_strategy("mirrored")
assert strategy.num_replicas_in_sync == 2, strategy.num_replicas_in_sync
summary = finetune(task, config, TrainConfig(out, epochs=2, batch_size=8, seq_length=16,
                                             jit_compile=False, verbose=0), strategy)
assert [h["epoch"] for h in summary["history"]] == [1, 2], summary
assert open_checkpoint(out).task_record.to_dict()["label_names"] == ["a", "b"]
print("OK")
"""


@pytest.mark.slow
def test_finetune_under_mirrored_strategy(spm_model_path, tmp_path):
    import subprocess
    import sys

    # Two logical CPUs must be configured before TensorFlow starts: a fresh process.
    result = subprocess.run([sys.executable, "-c", _MIRRORED_SCRIPT, spm_model_path, str(tmp_path / "out")],
                            capture_output=True, text=True, timeout=SAFETY_NET_S)
    assert result.returncode == 0 and "OK" in result.stdout, result.stderr[-3000:]


def test_gradient_accumulation_trains_the_same_model(spm_model_path, tmp_path, monkeypatch,
                                                     caplog):
    """`gradient_accumulation_steps=4`: each step runs the batch of 8 as 4 parts of 2
    and updates once; the run takes the same steps to the same weights (no dropout:
    the parts would draw other masks than the whole batch)."""
    monkeypatch.setattr("albert_tf.models.HEAD_DROPOUT", 0.0)
    tokenizer = AlbertTokenizer(spm_model_path)
    config = AlbertConfig(vocab_size=tokenizer.vocab_size, embedding_size=8, hidden_size=12,
                          num_hidden_layers=1, num_attention_heads=3, intermediate_size=16,
                          max_position_embeddings=16, hidden_dropout_prob=0.0,
                          attention_probs_dropout_prob=0.0)
    weights = []
    caplog.set_level("INFO")
    for steps in (1, 4):
        out = str(tmp_path / f"out{steps}")
        summary = finetune(_tiny_task(tokenizer), config, TrainConfig(
            out, train_steps=6, batch_size=8, learning_rate=1e-3, seq_length=16,
            gradient_accumulation_steps=steps, jit_compile=False, verbose=0))
        assert [h["epoch"] for h in summary["history"]] == [1, 2]  # 24 examples: 3 steps each
        weights.append(load_checkpoint(out).get_weights())
    assert "steps (batch 8 in 4 parts of 2)" in caplog.text
    assert len(weights[0]) == len(weights[1]) > 10
    for a, b in zip(*weights):
        np.testing.assert_allclose(b, a, atol=1e-5, rtol=0)


class _TokenTask:
    """A token-tagging job over random pieces: a head that never reads the pooler."""

    name, main_metric, label_names, evals = "tokens", "f1", ["O", "B-X"], {}

    def __init__(self, vocab_size, n=16, length=8):
        rng = np.random.default_rng(0)
        ids = [rng.integers(5, vocab_size, length).astype(np.int32) for _ in range(n)]
        labels = np.empty(n, object)
        labels[:] = [(row % 2).astype(np.int32) for row in ids]
        self.train = Encoded({"input_word_ids": ids,
                              "input_mask": [np.ones(length, np.int32)] * n,
                              "input_type_ids": [np.zeros(length, np.int32)] * n},
                             {"logits": labels})

    def build_model(self, config, encoder=None):
        return AlbertTokenClassifier(config, len(self.label_names), encoder=encoder)

    def write_predictions(self, predict, output_dir):
        return []


def test_a_head_without_the_pooler_trains_without_keras_gradient_warnings(spm_model_path,
                                                                         tmp_path):
    tokenizer = AlbertTokenizer(spm_model_path)
    source = _checkpoint(tmp_path / "pretrained", tokenizer, spm_model_path)
    task = _TokenTask(tokenizer.vocab_size)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        finetune(task, source, TrainConfig(
            str(tmp_path / "out"), epochs=1, batch_size=8, learning_rate=1e-3, seq_length=16,
            buckets=[], jit_compile=False, verbose=0))
    assert not [w for w in caught if "Gradients do not exist" in str(w.message)]
    before, after = load_checkpoint(source).encoder, load_checkpoint(str(tmp_path / "out")).encoder
    # The pooler is kept as loaded (the checkpoint still holds it); the rest was trained.
    np.testing.assert_array_equal(after.pooler.kernel.numpy(), before.pooler.kernel.numpy())
    assert not np.array_equal(after.embeddings.word_embeddings.embeddings.numpy(),
                              before.embeddings.word_embeddings.embeddings.numpy())
