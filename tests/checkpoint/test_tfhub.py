"""TF-Hub ALBERT SavedModels through the one door: tests/fixtures/tfhub/ (written by Model
Garden's own export_tfhub, tools/make_tf2_fixtures.py) against the SavedModel's own outputs.

No tf-models-official here: the SavedModel is read from its bytes with TensorFlow.
"""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.core.protobuf import saved_model_pb2

from albert_tf.checkpoint import (
    CheckpointError,
    convert,
    detect_format,
    open_checkpoint,
    tfhub,
)
from albert_tf.config import AlbertConfig
from albert_tf.tokenizer.spm import AlbertTokenizer
from tests.checkpoint.test_model_garden import (
    ATOL,
    INPUTS,
    assert_encoder_matches,
    assert_served_features,
    strings,
)
from tests.helpers.foreign import assert_tokenizer_matches
from tests.helpers.fresh_process import call_signatures
from tests.helpers.paths import FIXTURES
from tests.test_bad_inputs import hidden_temporaries, snapshot

HUB = os.path.join(FIXTURES, "tfhub", "albert_en_tiny")
SAVED_MODEL = os.path.join(HUB, "savedmodel")


def reference() -> dict[str, np.ndarray]:
    with np.load(os.path.join(HUB, "reference.npz")) as data:
        return dict(data)


@pytest.fixture(scope="module")
def model():
    return open_checkpoint(SAVED_MODEL).load()


def test_a_saved_model_is_recognised():
    assert detect_format(SAVED_MODEL) == "tfhub"
    assert sorted(os.listdir(SAVED_MODEL)) == ["assets", "fingerprint.pb", "keras_metadata.pb",
                                               "saved_model.pb", "variables"]  # no config file


def test_config_comes_from_the_saved_model_itself():
    opened = open_checkpoint(SAVED_MODEL)
    # None of these is a constructor default: sizes from shapes, depth from one call.
    assert opened.config == AlbertConfig(
        vocab_size=94, embedding_size=4, hidden_size=10, num_hidden_layers=2,
        num_attention_heads=2, intermediate_size=16, max_position_embeddings=40,
        type_vocab_size=2, hidden_act="gelu")
    assert opened.config.num_hidden_layers == int(reference()["num_layers"])
    assert opened.task_record.task == "masked_lm"  # exported with its mlm head


def test_tokenizer_is_the_asset_lower_cased_without_accents():
    files = open_checkpoint(SAVED_MODEL).tokenizer
    assert files.spm_model == os.path.join(SAVED_MODEL, "assets", "30k-clean.model")
    assert (files.do_lower_case, files.keep_accents) == (True, False)
    tokenizer = AlbertTokenizer(files.spm_model, files.do_lower_case,
                                keep_accents=files.keep_accents)
    ref = reference()
    assert_tokenizer_matches(tokenizer, ref)


def test_encoder_and_mlm_match_the_saved_model(model):
    ref = reference()
    assert_encoder_matches(model, ref)
    out = model({**{k: ref[k] for k in INPUTS}, "masked_lm_positions": ref["masked_lm_positions"]})
    np.testing.assert_allclose(out["mlm_logits"], ref["mlm_logits"], atol=ATOL, rtol=0)


def test_a_saved_model_computing_another_activation_is_refused(monkeypatch, tmp_path):
    """The graph is read, never run: the ops it computes its activation with must be the
    tanh GELU's (Pow, Tanh) and no other's (Erf: the exact GELU; Relu, ...)."""
    monkeypatch.setitem(tfhub.ENCODER_FIXED, "hidden_act", "relu")
    with pytest.raises(CheckpointError, match=r"saved_model.pb: its graph computes gelu "
                       r"\(Pow\+Tanh\), not the relu \(Relu\)"):
        open_checkpoint(SAVED_MODEL).config  # noqa: B018
    monkeypatch.undo()
    exact = shutil.copytree(SAVED_MODEL, tmp_path / "exact")
    with open(exact / "saved_model.pb", "rb") as f:
        saved_model = saved_model_pb2.SavedModel.FromString(f.read())
    for function in saved_model.meta_graphs[0].graph_def.library.function:
        for node in function.node_def:
            if node.op == "Tanh":
                node.op = "Erf"  # as an encoder built with the exact GELU has
    (exact / "saved_model.pb").write_bytes(saved_model.SerializeToString())
    with pytest.raises(CheckpointError) as error:
        open_checkpoint(exact).config  # noqa: B018
    assert str(error.value) == (f"{exact / 'saved_model.pb'}: its graph computes gelu_exact "
                                "(Erf), not the gelu (Pow+Tanh) of the ALBERT encoder albert-tf "
                                "reads a SavedModel as")


def test_a_saved_model_that_is_not_albert_is_named(tmp_path):
    module = tf.Module()
    module.weight = tf.Variable(tf.zeros([3, 4]), name="weight")
    module.__call__ = tf.function(lambda x: x * module.weight[0, 0],
                                  input_signature=[tf.TensorSpec([None], tf.float32)])
    tf.saved_model.save(module, str(tmp_path / "other"))
    before = snapshot(tmp_path / "other")
    assert detect_format(tmp_path / "other") == "tfhub"
    with pytest.raises(CheckpointError) as error:
        open_checkpoint(tmp_path / "other").config  # noqa: B018
    message = str(error.value)
    assert message.startswith(f"{tmp_path / 'other'}: a SavedModel, but not an ALBERT encoder")
    assert "word_embeddings/embeddings" in message and len(message.splitlines()) == 1
    assert snapshot(tmp_path / "other") == before


def test_converted_to_ours_loads_to_equal_outputs(tmp_path):
    dst = tmp_path / "ours"
    before = snapshot(SAVED_MODEL)
    assert convert.main([SAVED_MODEL, str(dst)]) == 0
    assert snapshot(SAVED_MODEL) == before and not hidden_temporaries(tmp_path)
    with open(dst / "albert_task.json", encoding="utf-8") as f:
        record = json.load(f)
    assert (record["task"], record["do_lower_case"], record["keep_accents"]) == \
        ("masked_lm", True, False)
    ref = reference()
    ours = open_checkpoint(dst).load()
    assert_encoder_matches(ours, ref)
    out = ours({**{k: ref[k] for k in INPUTS}, "masked_lm_positions": ref["masked_lm_positions"]})
    np.testing.assert_allclose(out["mlm_logits"], ref["mlm_logits"], atol=ATOL, rtol=0)


@pytest.mark.slow
def test_exported_saved_model_serves_its_features(tmp_path):
    from albert_tf.serving import export

    ref = reference()
    assert export.main(["--checkpoint", SAVED_MODEL, "--output", str(tmp_path / "hub"),
                        "--seq-length", str(ref["input_word_ids"].shape[1])]) == 0
    calls = {"hub": (str(tmp_path / "hub" / "1"), "text_pair",
                     {"text_a": strings(ref["texts_a"]), "text_b": strings(ref["texts_b"])})}
    assert_served_features(call_signatures(calls, tmp_path)["hub"], ref)
