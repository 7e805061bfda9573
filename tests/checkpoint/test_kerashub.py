"""KerasHub presets through the one door: tests/fixtures/kerashub/ (written by keras-hub
itself, tools/make_kerashub_fixtures.py) against keras-hub's own recorded outputs.

No keras-hub here: the presets are read from their bytes and compared with the npz.
"""

from __future__ import annotations

import json
import os
import shutil

import h5py
import numpy as np
import pytest

from albert_tf.checkpoint import FORMATS, CheckpointError, convert, detect_format, open_checkpoint
from albert_tf.checkpoint.kerashub import MLM_LAYER_NORM_EPSILON
from albert_tf.config import AlbertConfig
from albert_tf.tokenizer.spm import AlbertTokenizer
from tests.helpers.foreign import assert_lists_problems, assert_tokenizer_matches
from tests.helpers.fresh_process import call_signatures
from tests.helpers.paths import FIXTURES
from tests.test_bad_inputs import assert_one_line_error, hidden_temporaries, run_cli, snapshot

KERAS_HUB = os.path.join(FIXTURES, "kerashub")
PRESETS = ("grouped", "shared", "classifier", "masked_lm")
ATOL = 1e-4  # float32 against keras-hub's float32


def preset(name: str) -> str:
    return os.path.join(KERAS_HUB, name, "preset")


def reference(name: str) -> dict[str, np.ndarray]:
    with np.load(os.path.join(KERAS_HUB, name, "reference.npz")) as data:
        return dict(data)


def model_inputs(ref, *names):
    return {k: ref[k] for k in ("input_word_ids", "input_mask", "input_type_ids", *names)}


def softmax(x):
    x = np.asarray(x, np.float64)
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def on_real_tokens(x, mask):
    return np.asarray(x) * (np.asarray(mask)[..., None] > 0)


@pytest.fixture(scope="module")
def loaded():
    return {name: open_checkpoint(preset(name)).load() for name in PRESETS}


# ------------------------------------------------------------------ detection and config
@pytest.mark.parametrize("name", PRESETS)
def test_a_preset_is_kerashub_not_our_format(name):
    assert os.path.isfile(os.path.join(preset(name), "model.weights.h5"))  # as ours would
    assert detect_format(preset(name)) == "kerashub"
    order = list(FORMATS)
    assert order.index("kerashub") < order.index("albert_tf") < order.index("hf")


def test_config_and_task_records_say_what_keras_hub_does():
    grouped = open_checkpoint(preset("grouped"))
    assert grouped.config == AlbertConfig(
        vocab_size=94, embedding_size=6, hidden_size=12, num_hidden_layers=4,
        num_hidden_groups=2, inner_group_num=2, num_attention_heads=3, intermediate_size=20,
        max_position_embeddings=40, type_vocab_size=3, hidden_act="gelu", sharing="all",
        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    record = grouped.task_record
    assert (record.task, record.seq_length) == ("pretraining", None)
    # KerasHub feeds text to SentencePiece unchanged.
    assert grouped.tokenizer.spm_model.endswith("assets/tokenizer/vocabulary.spm")
    assert (grouped.tokenizer.do_lower_case, grouped.tokenizer.keep_accents) == (False, True)
    classifier = open_checkpoint(preset("classifier")).task_record
    assert (classifier.task, classifier.num_classes, classifier.problem_type,
            classifier.seq_length, classifier.label_names) == \
        ("classification", 3, "single_label", 32, None)
    masked = open_checkpoint(preset("masked_lm")).task_record
    assert (masked.task, masked.seq_length, masked.mlm_layer_norm_epsilon) == \
        ("masked_lm", 16, MLM_LAYER_NORM_EPSILON)


def test_bfloat16_preset_loads_as_float32(loaded):
    with open(os.path.join(preset("shared"), "config.json"), encoding="utf-8") as f:
        assert json.load(f)["config"]["dtype"]["config"]["name"] == "bfloat16"
    assert {w.dtype for w in loaded["shared"].weights} == {"float32"}


# ------------------------------------------------------------------ parity with keras-hub
@pytest.mark.parametrize("name", ["grouped", "shared"])
def test_backbone_matches_keras_hub(loaded, name):
    ref = reference(name)
    out = loaded[name].encoder(model_inputs(ref))
    mask = ref["input_mask"]
    assert mask.min() == 0 and len(set(ref["input_type_ids"].max(-1))) == 1  # padded, 2 segments
    np.testing.assert_allclose(on_real_tokens(out["sequence_output"], mask),
                               on_real_tokens(ref["sequence_output"], mask), atol=ATOL, rtol=0)
    np.testing.assert_allclose(out["pooled_output"], ref["pooled_output"], atol=ATOL, rtol=0)


def test_classifier_matches_keras_hub(loaded):
    ref = reference("classifier")
    logits = loaded["classifier"](model_inputs(ref))
    np.testing.assert_allclose(softmax(logits), ref["probabilities"], atol=ATOL, rtol=0)


def test_masked_lm_matches_keras_hub_with_its_epsilon(loaded):
    ref = reference("masked_lm")
    model = loaded["masked_lm"]
    assert model.mlm_head.layer_norm.epsilon == MLM_LAYER_NORM_EPSILON
    out = model(model_inputs(ref, "masked_lm_positions"))["mlm_logits"]
    np.testing.assert_allclose(out, ref["mlm_logits"], atol=ATOL, rtol=0)


@pytest.mark.parametrize("name", ["grouped", "classifier"])
def test_tokenizer_ids_equal_keras_hub(name):
    ckpt = open_checkpoint(preset(name))
    files = ckpt.tokenizer
    tokenizer = AlbertTokenizer(files.spm_model, files.do_lower_case,
                                keep_accents=files.keep_accents)
    ref = reference(name)
    assert_tokenizer_matches(tokenizer, ref)
    # "Paris" is not lower-cased: SentencePiece sees the capital, as in keras-hub.
    assert tokenizer.encode("Paris") != tokenizer.encode("paris")


def test_converted_to_ours_keeps_the_head_epsilon(tmp_path):
    dst = tmp_path / "ours"
    assert convert.main([preset("masked_lm"), str(dst)]) == 0
    with open(dst / "albert_task.json", encoding="utf-8") as f:
        record = json.load(f)
    assert record["mlm_layer_norm_epsilon"] == MLM_LAYER_NORM_EPSILON
    assert (record["do_lower_case"], record["keep_accents"]) == (False, True)
    ref = reference("masked_lm")
    out = open_checkpoint(dst).load()(model_inputs(ref, "masked_lm_positions"))["mlm_logits"]
    np.testing.assert_allclose(out, ref["mlm_logits"], atol=ATOL, rtol=0)


# ------------------------------------------------------------------ what does not fit
def copy_preset(tmp_path, name="grouped"):
    return str(shutil.copytree(preset(name), tmp_path / name))


def edit_json(path, change):
    with open(path, encoding="utf-8") as f:
        value = json.load(f)
    change(value)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(value, f)


def test_wrong_tensors_are_one_error_listing_them_all(tmp_path):
    path = copy_preset(tmp_path)
    with h5py.File(os.path.join(path, "model.weights.h5"), "r+") as f:
        del f["layers/dense_1/vars/1"]  # the pooler's bias
        del f["layers/dense/vars/0"]  # the projection's kernel, now mis-shaped
        f.create_dataset("layers/dense/vars/0", data=np.zeros((6, 11), np.float32))
        f.create_dataset("layers/stray/vars/0", data=np.zeros(3, np.float32))
        f.create_dataset("optimizer/vars/0", data=np.int64(3))  # not a weight: skipped
    with pytest.raises(CheckpointError) as error:
        open_checkpoint(path).load()
    assert_lists_problems(str(error.value), 3, ("missing: backbone/layers/dense_1/vars/1",
                 "mis-shaped: backbone/layers/dense/vars/0: (6, 11) in the checkpoint, (6, 12)",
                 "unexpected: backbone/layers/stray/vars/0"),
                          "optimizer")


@pytest.mark.parametrize("change, names", [
    (lambda c: c.update(registered_name="keras_hub>BertBackbone"),
     ["config.json", "keras_hub>BertBackbone", "not of ALBERT"]),
    (lambda c: c["config"].update(rope_max_wavelength=10000),
     ["config.json", "rope_max_wavelength"]),
    (lambda c: c["config"].update(dtype={"class_name": "DTypePolicyMap", "config": {}}),
     ["config.json", "DTypePolicyMap", "quantized"]),
    (lambda c: c["config"].update(num_heads=5), ["config.json", "hidden_size=12", "5"]),
])
def test_what_albert_tf_cannot_hold_is_refused_in_one_line(tmp_path, capsys, change, names):
    path = copy_preset(tmp_path)
    edit_json(os.path.join(path, "config.json"), change)
    before = snapshot(path)
    out = tmp_path / "out"
    code, line = run_cli(capsys, "convert", path, out)
    assert_one_line_error(code, line, *names)
    assert snapshot(path) == before and not out.exists() and not hidden_temporaries(tmp_path)


def test_unknown_task_and_activation_are_refused(tmp_path):
    path = copy_preset(tmp_path, "classifier")
    task = os.path.join(path, "task.json")
    edit_json(task, lambda c: c["config"].update(activation="relu"))
    with pytest.raises(CheckpointError, match="activation='relu'"):
        open_checkpoint(path).task_record  # noqa: B018
    edit_json(task, lambda c: c.update(registered_name="keras_hub>AlbertQuestionAnswerer"))
    with pytest.raises(CheckpointError, match="AlbertQuestionAnswerer"):
        open_checkpoint(path).task_record  # noqa: B018


def test_multi_label_from_sigmoid(tmp_path):
    path = copy_preset(tmp_path, "classifier")
    edit_json(os.path.join(path, "task.json"), lambda c: c["config"].update(activation="sigmoid"))
    assert open_checkpoint(path).task_record.problem_type == "multi_label"


def test_embedding_size_equal_to_hidden_size_needs_an_identity_projection(tmp_path):
    """KerasHub always projects E -> H; albert-tf has no projection when E == H."""
    from albert_tf.checkpoint import save_checkpoint
    from albert_tf.models import AlbertPretrainer

    config = AlbertConfig(vocab_size=94, embedding_size=8, hidden_size=8, num_hidden_layers=2,
                          num_attention_heads=2, intermediate_size=12,
                          max_position_embeddings=16)
    model = AlbertPretrainer(config)
    ours = save_checkpoint(model, tmp_path / "ours")
    written = tmp_path / "kerashub"
    assert convert.main([ours, str(written), "--to", "kerashub", "--encoder-only"]) == 0
    with h5py.File(written / "model.weights.h5", "r") as f:
        np.testing.assert_array_equal(f["layers/dense/vars/0"][()], np.eye(8))
    back = open_checkpoint(written).load()
    assert back.encoder.embedding_projection is None
    inputs = {"input_word_ids": np.array([[2, 9, 40, 3, 0]]), "input_mask": np.array([[1] * 4 + [0]]),
              "input_type_ids": np.zeros((1, 5), np.int32)}
    np.testing.assert_allclose(back.encoder(inputs)["pooled_output"],
                               model.encoder(inputs)["pooled_output"], atol=1e-6, rtol=0)
    with h5py.File(written / "model.weights.h5", "r+") as f:
        f["layers/dense/vars/0"][0, 1] = 0.5
    with pytest.raises(CheckpointError, match="not the identity: backbone/layers/dense/vars/0"):
        open_checkpoint(written).load()


# ------------------------------------------------------------------ serving raw text



def _strings(values):
    return np.array([str(v).encode() for v in values], dtype=object)


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    from albert_tf.serving import export

    root = tmp_path_factory.mktemp("kerashub_export")
    paths = {}
    for name, extra in (("grouped", ["--seq-length", "32"]), ("classifier", []),
                        ("masked_lm", [])):
        assert export.main(["--checkpoint", preset(name), "--output", str(root / name),
                            *extra]) == 0
        paths[name] = str(root / name / "1")
    grouped, classifier, masked = (reference(n) for n in ("grouped", "classifier", "masked_lm"))
    calls = {
        "grouped": (paths["grouped"], "text_pair", {"text_a": _strings(grouped["texts_a"]),
                                                    "text_b": _strings(grouped["texts_b"])}),
        "classifier": (paths["classifier"], "text_pair",
                       {"text_a": _strings(classifier["texts_a"]),
                        "text_b": _strings(classifier["texts_b"])}),
        "masked_lm": (paths["masked_lm"], "fill_mask", {"text": _strings(masked["texts"])}),
    }
    return call_signatures(calls, tmp_path_factory.mktemp("fresh"))


@pytest.mark.slow
def test_exported_backbone_serves_keras_hub_features(served):
    ref, got = reference("grouped"), served["grouped"]
    np.testing.assert_array_equal(got["input_mask"].sum(-1), ref["input_mask"].sum(-1))
    for row, length in enumerate(ref["input_mask"].sum(-1)):
        np.testing.assert_allclose(got["sequence_output"][row, :length],
                                   ref["sequence_output"][row, :length], atol=ATOL, rtol=0)
    np.testing.assert_allclose(got["pooled_output"], ref["pooled_output"], atol=ATOL, rtol=0)


@pytest.mark.slow
def test_exported_classifier_serves_keras_hub_probabilities(served):
    ref = reference("classifier")
    np.testing.assert_allclose(served["classifier"]["probabilities"], ref["probabilities"],
                               atol=ATOL, rtol=0)
    np.testing.assert_array_equal(served["classifier"]["label_id"],
                                  ref["probabilities"].argmax(-1))


@pytest.mark.slow
def test_exported_masked_lm_fills_the_mask_as_keras_hub(served):
    ref, got = reference("masked_lm"), served["masked_lm"]
    np.testing.assert_array_equal(got["mask_positions"], ref["masked_lm_positions"])
    probabilities = softmax(ref["mlm_logits"])  # [B,1,V]
    top = np.argsort(-probabilities, axis=-1)[..., :got["top_k_ids"].shape[-1]]
    np.testing.assert_array_equal(got["top_k_ids"], top)
    np.testing.assert_allclose(got["top_k_scores"], np.take_along_axis(probabilities, top, -1),
                               atol=ATOL, rtol=0)
