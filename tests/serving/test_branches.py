"""`export --branches`: each encoder sublayer as independent branches, answering as the model.

The branched model is checked against the unbranched one in every sharing mode and with
groups (the schedule hands the same sublayer to several blocks), for the sequence output
and for the classifier's [CLS]-only last block; the export against the plain export of the
same fine-tuned checkpoint, with its provenance; wrong counts are refused in one line.
"""

from __future__ import annotations

import json
import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from albert_tf import AlbertConfig, AlbertEncoder, AlbertSequenceClassifier
from albert_tf.infra import cli
from albert_tf.serving import export
from albert_tf.serving.modules import ExportError, served_model
from albert_tf.serving.provenance import PROVENANCE_FILE
from albert_tf.transformer import AttentionSublayer, Branches, FeedForwardSublayer
from tests.helpers.paths import TASK_FIXTURES

TEXTS = ["a short one", "the second text is a little longer than the first", "",
         "\u00fcber caf\u00e9 \u4e2d\u6587", "yes"]


def _config(**overrides) -> AlbertConfig:
    return AlbertConfig(**{"vocab_size": 97, "embedding_size": 16, "hidden_size": 32,
                           "num_hidden_layers": 4, "num_attention_heads": 4,
                           "intermediate_size": 48, **overrides})


def _inputs(batch=3, length=11):
    rng = np.random.default_rng(0)
    mask = (np.arange(length)[None] < rng.integers(3, length + 1, (batch, 1))).astype("int32")
    return {"input_word_ids": rng.integers(0, 97, (batch, length)).astype("int32") * mask,
            "input_mask": mask, "input_type_ids": np.zeros((batch, length), "int32")}


@pytest.mark.parametrize("overrides", [
    {}, {"sharing": "attention"}, {"sharing": "ffn"}, {"sharing": "none"},
    {"num_hidden_groups": 2, "inner_group_num": 2},
], ids=["all", "attention", "ffn", "none", "groups"])
@pytest.mark.parametrize("count", [2, 4])
def test_branched_encoder_equals_the_model(overrides, count):
    keras.utils.set_random_seed(1)
    encoder = AlbertEncoder(_config(**overrides))
    inputs = _inputs()
    expected = encoder(inputs)["sequence_output"]
    before = [w.copy() for w in encoder.get_weights()]
    branched = served_model(encoder, branches=count)
    got = branched(inputs)["sequence_output"]
    np.testing.assert_allclose(got, expected, atol=1e-5)
    # The copy runs in branches; the model it came from does not, and its weights stand.
    sublayers = [s for block in branched.distinct_blocks() for s in (block.attention, block.ffn)]
    assert all(s.branches == count and s._cut.count == count for s in sublayers)
    assert all(block.attention.branches == 1 and block.ffn.branches == 1
               for block in encoder.distinct_blocks())
    assert len(branched.get_weights()) == len(before)
    for a, b in zip(encoder.get_weights(), before):
        np.testing.assert_array_equal(a, b)


def test_branches_hold_contiguous_heads_and_column_blocks():
    keras.utils.set_random_seed(2)
    encoder = AlbertEncoder(_config())
    attention, ffn = encoder.blocks[0].attention, encoder.blocks[0].ffn
    cut = Branches.split(attention, 2)
    query = keras.ops.convert_to_numpy(attention.query.kernel)
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(cut.kernels["query"][1]),
                                  query[:, 16:])  # heads 2 and 3: columns 16 to 31
    out = keras.ops.convert_to_numpy(attention.output_dense.kernel)
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(cut.kernels["output_dense"][1]),
                                  out[16:])
    assert len(cut.biases["output_dense"]) == 1  # the output bias is added once
    cut = Branches.split(ffn, 3)
    assert [tuple(k.shape) for k in cut.kernels["intermediate"]] == [(32, 16)] * 3
    assert [tuple(k.shape) for k in cut.kernels["output_dense"]] == [(16, 32)] * 3


def test_branched_classifier_equals_the_model_in_float32_and_bfloat16():
    keras.utils.set_random_seed(3)
    model = AlbertSequenceClassifier(_config(), 3)
    inputs = _inputs()
    np.testing.assert_allclose(served_model(model, branches=2)(inputs), model(inputs), atol=1e-5)
    bf16 = served_model(model, "bfloat16")
    np.testing.assert_allclose(np.asarray(served_model(model, "bfloat16", 2)(inputs), "float32"),
                               np.asarray(bf16(inputs), "float32"), atol=2e-2)


@pytest.mark.parametrize("count, message", [
    (3, "cannot cut num_attention_heads=4 into 3 branches"),
    (0, "cannot cut num_attention_heads=4 into 0 branches"),
    (-2, "cannot cut num_attention_heads=4 into -2 branches"),
])
def test_a_count_that_does_not_divide_is_refused(count, message):
    with pytest.raises(ExportError, match=f"--branches {count}: {message}"):
        served_model(AlbertEncoder(_config()), branches=count)
    with pytest.raises(ExportError, match="cannot cut intermediate_size=48 into 5 branches"):
        served_model(AlbertEncoder(_config(num_attention_heads=5, hidden_size=40)), branches=5)


def test_one_branch_in_float32_is_the_model_itself():
    # Nothing to change: nothing is copied, no variable is added.
    encoder = AlbertEncoder(_config())
    assert served_model(encoder, "float32", 1) is encoder
    assert isinstance(encoder.blocks[0].attention, AttentionSublayer)
    assert isinstance(encoder.blocks[0].ffn, FeedForwardSublayer)
    assert encoder.blocks[0].attention.branches == 1


def test_branches_are_a_construction_option_saved_only_when_set():
    # One branch leaves every saved config as it was; more round-trip through the config.
    keras.utils.set_random_seed(5)
    plain = AlbertSequenceClassifier(_config(), 3)
    assert "branches" not in json.dumps(plain.get_config())
    assert "branches" not in json.dumps(plain.encoder.blocks[0].attention.get_config())
    branched = AlbertSequenceClassifier.from_config({**plain.get_config(), "branches": 2})
    assert branched.get_config()["branches"] == 2
    assert AlbertSequenceClassifier.from_config(branched.get_config()).encoder.branches == 2
    assert branched.encoder.blocks[0].ffn.get_config()["branches"] == 2
    # Built with branches, it runs only once its loaded weights are cut.
    with pytest.raises(RuntimeError, match="cut_branches"):
        branched(_inputs())
    branched.set_weights(plain.get_weights())
    branched.encoder.cut_branches()
    np.testing.assert_allclose(branched(_inputs()), plain(_inputs()), atol=1e-5)


@pytest.mark.slow
def test_branched_export_serves_what_the_plain_export_serves(tmp_path):
    source = os.path.join(TASK_FIXTURES, "seq_single", "hf")
    plain = export.export(source, str(tmp_path / "plain"), seq_length=48)
    branched = export.export(source, str(tmp_path / "branched"), seq_length=48, branches=2)
    answers = {}
    for name, path in (("plain", plain), ("branched", branched)):
        loaded = tf.saved_model.load(path)
        answers[name] = {
            "text": loaded.signatures["serving_default"](
                text=tf.constant(TEXTS))["probabilities"].numpy(),
            "pair": loaded.signatures["text_pair"](
                text_a=tf.constant(TEXTS), text_b=tf.constant(TEXTS[::-1]))["probabilities"].numpy(),
        }
        with open(os.path.join(path, PROVENANCE_FILE), encoding="utf-8") as f:
            answers[name]["provenance"] = json.load(f)
    for key in ("text", "pair"):
        np.testing.assert_allclose(answers["branched"][key], answers["plain"][key], atol=1e-5)
    assert answers["plain"]["provenance"]["branches"] == 1
    assert answers["branched"]["provenance"]["branches"] == 2
    # The same weights: the record's hash is of the model's weights, not of the copies.
    assert answers["branched"]["provenance"]["weights_sha256"] == \
        answers["plain"]["provenance"]["weights_sha256"]


@pytest.mark.parametrize("args, message", [
    (["--branches", "7"], "--branches 7: cannot cut num_attention_heads="),
    (["--branches", "two"], "--branches: invalid int value: 'two'"),
    (["--branches", "2", "--format", "litert", "--output-file"], None),
])
def test_branch_options_are_refused_in_one_line(tmp_path, capsys, args, message):
    output = str(tmp_path / "m")
    if args[-1] == "--output-file":  # the LiteRT case: --output is the .tflite file
        args, output = args[:-1], str(tmp_path / "m.tflite")
        message = "--branches is for SavedModels"
    code = cli.main(["export", "--checkpoint", os.path.join(TASK_FIXTURES, "seq_single", "hf"),
                     "--output", output, *args])
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert code == 2 and last.startswith("albert-tf export: ") and message in last, last
    assert not os.path.exists(tmp_path / "m" / "1") and not os.path.exists(tmp_path / "m.tflite")


def test_a_branch_count_the_model_cannot_take_is_refused_before_its_weights_load(
        tmp_path, monkeypatch):
    from albert_tf.checkpoint.opened import OpenedCheckpoint

    def load(self):
        raise AssertionError("the weights were read before the count was refused")

    monkeypatch.setattr(OpenedCheckpoint, "load", load)
    with pytest.raises(ExportError, match="--branches 7: cannot cut num_attention_heads=2"):
        export.export(os.path.join(TASK_FIXTURES, "seq_single", "hf"), str(tmp_path / "m"),
                      branches=7)
    assert not os.path.exists(tmp_path / "m" / "1")


def test_branches_combine_with_in_graph_batching(tmp_path, spm_model_path):
    # The batched call runs the branched model inside TensorFlow's BatchFunction op.
    from albert_tf.serving.signatures.base import Batching
    from albert_tf.tokenizer import AlbertPreprocessor

    keras.utils.set_random_seed(4)
    preprocessor = AlbertPreprocessor(spm_model_path, 24)
    model = AlbertSequenceClassifier(_config(vocab_size=preprocessor.tokenizer.vocab_size), 2)
    answers = {}
    for name, served, batching in (("plain", model, None),
                                   ("branched", served_model(model, branches=2), Batching())):
        path = str(tmp_path / name)
        export.save_module(export.build_module(served, preprocessor, batching=batching), path,
                           name)
        answers[name] = tf.saved_model.load(path).signatures["serving_default"](
            text=tf.constant(TEXTS))["probabilities"].numpy()
    np.testing.assert_allclose(answers["branched"], answers["plain"], atol=1e-5)
