"""`albert-tf convert --to hf|kerashub`: the files, tensor names, shapes and config fields
the peers themselves write (recorded in tests/fixtures/kerashub/peer_layouts.json by
tools/make_kerashub_fixtures.py), round trips through our own readers, and refusals.

No transformers or keras-hub here: the record holds what they wrote.
"""

from __future__ import annotations

import json
import os
import shutil

import h5py
import numpy as np
import pytest
from safetensors.numpy import load_file

from albert_tf.checkpoint import convert, open_checkpoint, save_checkpoint
from albert_tf.checkpoint.kerashub import MLM_LAYER_NORM_EPSILON
from albert_tf.config import AlbertConfig
from albert_tf.models import TASK_MODELS
from tests.helpers.paths import FIXTURES, TASK_FIXTURES
from tests.test_bad_inputs import assert_one_line_error, hidden_temporaries, run_cli, snapshot

KERAS_HUB = os.path.join(FIXTURES, "kerashub")
SPM = os.path.join(TASK_FIXTURES, "mlm", "hf", "spiece.model")  # 94 pieces
with open(os.path.join(KERAS_HUB, "peer_layouts.json"), encoding="utf-8") as _f:
    PEER = json.load(_f)

# The sizes the record was written with (the `grouped` fixture's).
CONFIG = AlbertConfig(vocab_size=94, embedding_size=6, hidden_size=12, num_hidden_layers=4,
                      num_hidden_groups=2, inner_group_num=2, num_attention_heads=3,
                      intermediate_size=20, max_position_embeddings=40, type_vocab_size=3,
                      hidden_act="gelu")
LABELS = ["negative", "neutral", "positive"]
TOKEN_LABELS = ["O", "B-PER", "I-PER", "B-LOC"]
INPUTS = {"input_word_ids": np.array([[2, 17, 40, 9, 3, 61, 3, 0], [2, 5, 3, 0, 0, 0, 0, 0]]),
          "input_mask": np.array([[1] * 7 + [0], [1] * 3 + [0] * 5]),
          "input_type_ids": np.array([[0] * 5 + [1, 1, 0], [0] * 8])}

# HF record name -> (task, model arguments, save_checkpoint arguments, convert flags)
HF_CASES = {
    "AlbertModel": ("pretraining", {}, {}, ["--encoder-only"]),
    "AlbertForPreTraining": ("pretraining", {}, {}, []),
    "AlbertForMaskedLM": ("masked_lm", {}, {}, []),
    "AlbertForSequenceClassification": ("classification", {"num_classes": 3},
                                        {"label_names": LABELS}, []),
    "AlbertForSequenceClassification/multi_label": (
        "classification", {"num_classes": 3},
        {"label_names": LABELS, "extra_info": {"problem_type": "multi_label"}}, []),
    "AlbertForSequenceClassification/regression": ("regression", {}, {}, []),
    "AlbertForTokenClassification": ("token_classification", {"num_classes": 4},
                                     {"label_names": TOKEN_LABELS}, []),
    "AlbertForQuestionAnswering": ("span", {}, {}, []),
    "AlbertForMultipleChoice": ("multiple_choice", {}, {}, []),
}


def ours(root, task, model_args=None, save_args=None, config=CONFIG, spm=SPM):
    """A random model of `task` saved in our format; returns (directory, model)."""
    model = TASK_MODELS[task](config, **(model_args or {}))
    directory = str(root / f"ours_{task}_{len(os.listdir(root))}")
    save_checkpoint(model, directory, spm_model=spm, **(save_args or {}))
    return directory, model


def without_names(value):
    """A JSON value without its "name" fields (keras-hub numbers them per process)."""
    if isinstance(value, dict):
        return {k: without_names(v) for k, v in value.items() if k != "name"}
    if isinstance(value, list):
        return [without_names(v) for v in value]
    return value


def h5_datasets(path) -> dict[str, list]:
    found = {}

    def visit(name, obj):
        if isinstance(obj, h5py.Dataset) and not name.startswith("optimizer/"):
            found[name] = [list(obj.shape), str(obj.dtype)]

    with h5py.File(path, "r") as f:
        f.visititems(visit)
    return found


def outputs(model, inputs=INPUTS):
    out = model.encoder(inputs)
    mask = inputs["input_mask"][..., None] > 0
    return np.asarray(out["sequence_output"]) * mask, np.asarray(out["pooled_output"])


# ------------------------------------------------------------------ Hugging Face
@pytest.fixture(scope="module")
def written_hf(tmp_path_factory):
    root = tmp_path_factory.mktemp("to_hf")
    written = {}
    for name, (task, model_args, save_args, flags) in HF_CASES.items():
        src, _ = ours(root, task, model_args, save_args)
        dst = str(root / name.replace("/", "_"))
        assert convert.main([src, dst, "--to", "hf", *flags]) == 0
        written[name] = dst
    return written


@pytest.mark.slow
@pytest.mark.parametrize("name", HF_CASES)
def test_hf_tensors_and_config_are_what_transformers_writes(written_hf, name):
    peer, dst = PEER["hf"][name], written_hf[name]
    assert set(peer["files"]) <= set(os.listdir(dst))
    tensors = load_file(os.path.join(dst, "model.safetensors"))
    assert {k: list(v.shape) for k, v in tensors.items()} == peer["tensors"]
    assert {v.dtype for v in tensors.values()} == {np.dtype("float32")}
    with open(os.path.join(dst, "config.json"), encoding="utf-8") as f:
        assert json.load(f) == peer["config"]
    with open(os.path.join(dst, "tokenizer_config.json"), encoding="utf-8") as f:
        tokenizer = json.load(f)
    peer_tokenizer = PEER["hf"]["tokenizer"]["tokenizer_config.json"]
    assert set(tokenizer) <= set(peer_tokenizer)
    assert {k: tokenizer[k] for k in tokenizer if k != "model_max_length"} == \
        {k: peer_tokenizer[k] for k in tokenizer if k != "model_max_length"}
    with open(os.path.join(dst, "spiece.model"), "rb") as f, open(SPM, "rb") as g:
        assert f.read() == g.read()


@pytest.mark.slow
def test_hf_round_trip_through_our_reader(written_hf, tmp_path):
    src, model = ours(tmp_path, "classification", {"num_classes": 3}, {"label_names": LABELS})
    dst = tmp_path / "hf"
    assert convert.main([src, str(dst), "--to", "hf"]) == 0
    back = open_checkpoint(dst)
    assert back.format == "hf" and back.task_record.label_names == tuple(LABELS)
    np.testing.assert_allclose(back.load()(INPUTS), model(INPUTS),
                               atol=1e-6, rtol=0)


def test_keras_hub_preset_to_hf_and_back_equals_keras_hub(tmp_path):
    src = os.path.join(KERAS_HUB, "classifier", "preset")
    dst = tmp_path / "hf"
    assert convert.main([src, str(dst), "--to", "hf"]) == 0
    with open(dst / "tokenizer_config.json", encoding="utf-8") as f:
        tokenizer = json.load(f)
    assert (tokenizer["do_lower_case"], tokenizer["keep_accents"]) == (False, True)
    with np.load(os.path.join(KERAS_HUB, "classifier", "reference.npz")) as ref:
        inputs = {k: ref[k] for k in INPUTS}
        logits = np.asarray(open_checkpoint(dst).load()(inputs), np.float64)
        probabilities = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
        np.testing.assert_allclose(probabilities, ref["probabilities"], atol=1e-4, rtol=0)


# ------------------------------------------------------------------ KerasHub
@pytest.fixture(scope="module")
def written_keras_hub(tmp_path_factory):
    root = tmp_path_factory.mktemp("to_kerashub")
    cases = {"backbone": ("pretraining", {}, {}, ["--encoder-only"]),
             "classifier": ("classification", {"num_classes": 3}, {"seq_length": 16}, []),
             "masked_lm": ("masked_lm", {"mlm_layer_norm_epsilon": MLM_LAYER_NORM_EPSILON},
                           {"seq_length": 16}, [])}
    written = {}
    for name, (task, model_args, save_args, flags) in cases.items():
        src, model = ours(root, task, model_args, save_args)
        dst = str(root / name)
        assert convert.main([src, dst, "--to", "kerashub", *flags]) == 0
        written[name] = (dst, model)
    return written


@pytest.mark.slow
@pytest.mark.parametrize("name", ["backbone", "classifier", "masked_lm"])
def test_keras_hub_files_are_what_save_to_preset_writes(written_keras_hub, name):
    peer, (dst, _) = PEER["keras_hub"][name], written_keras_hub[name]
    files = sorted(os.path.relpath(os.path.join(d, f), dst)
                   for d, _, fs in os.walk(dst) for f in fs)
    assert files == peer["files"]
    for file in files:
        path = os.path.join(dst, file)
        if file.endswith(".weights.h5"):
            assert h5_datasets(path) == {k: v[:2] for k, v in peer[file].items()}, file
        elif file == "metadata.json":
            with open(path, encoding="utf-8") as f:
                assert sorted(json.load(f)) == peer[file]
        elif file.endswith(".json"):
            with open(path, encoding="utf-8") as f:
                assert without_names(json.load(f)) == without_names(peer[file]), file


@pytest.mark.slow
@pytest.mark.parametrize("name", ["backbone", "classifier", "masked_lm"])
def test_keras_hub_round_trip_through_our_reader(written_keras_hub, name):
    dst, model = written_keras_hub[name]
    back = open_checkpoint(dst)
    assert back.format == "kerashub"
    loaded = back.load()
    for got, want in zip(outputs(loaded), outputs(model)):
        np.testing.assert_allclose(got, want, atol=1e-6, rtol=0)
    if name == "classifier":
        np.testing.assert_allclose(loaded(INPUTS), model(INPUTS),
                                   atol=1e-6, rtol=0)
    if name == "masked_lm":
        inputs = {**INPUTS, "masked_lm_positions": np.array([[1, 3], [1, 0]])}
        np.testing.assert_allclose(loaded(inputs)["mlm_logits"], model(inputs)["mlm_logits"],
                                   atol=1e-6, rtol=0)


# ------------------------------------------------------------------ refusals
@pytest.mark.parametrize("src, target, flags, names", [
    (os.path.join(TASK_FIXTURES, "squad_v2_beam", "tf1"), "hf", [],
     ["--to hf", "span_beam", "beam_span_head", "--encoder-only"]),
    (os.path.join(TASK_FIXTURES, "token", "hf"), "kerashub", [],
     ["--to kerashub", "token_classification"]),
    (os.path.join(TASK_FIXTURES, "mlm", "hf"), "kerashub", [],
     ["--to kerashub", "1e-12", "mlm_layer_norm_epsilon", "1e-05"]),
    (os.path.join(KERAS_HUB, "masked_lm", "preset"), "hf", [],
     ["--to hf", "1e-05", "layer_norm_eps"]),
    (os.path.join(KERAS_HUB, "grouped", "preset"), "kerashub", [],
     ["--to kerashub", "sop_head", "--encoder-only"]),
    (os.path.join(FIXTURES, "grouped", "hf"), "albert-tf", ["--encoder-only"],
     ["--encoder-only", "--to hf"]),
])
def test_what_the_target_cannot_hold_is_refused_before_any_work(tmp_path, capsys, src, target,
                                                                flags, names):
    before = snapshot(src)
    dst = tmp_path / "out"
    code, line = run_cli(capsys, "convert", src, dst, "--to", target, *flags)
    assert_one_line_error(code, line, src, *names)
    assert not dst.exists() and snapshot(src) == before and not hidden_temporaries(tmp_path)


@pytest.mark.parametrize("change, target, names", [
    ({"sharing": "attention"}, "hf", ["sharing='attention'"]),
    ({"hidden_act": "gelu_exact"}, "kerashub", ["hidden_act='gelu_exact'", "tanh"]),
    ({"num_hidden_layers": 5}, "kerashub", ["num_hidden_layers=5", "num_hidden_groups=2"]),
    ({"attention_probs_dropout_prob": 0.1}, "kerashub", ["attention_probs_dropout_prob=0.1"]),
])
def test_configs_the_target_cannot_hold_are_refused(tmp_path, capsys, change, target, names):
    src, _ = ours(tmp_path, "pretraining", config=CONFIG.replace(**change))
    dst = tmp_path / "out"
    code, line = run_cli(capsys, "convert", src, dst, "--to", target, "--encoder-only")
    assert_one_line_error(code, line, *names)
    assert not dst.exists() and not hidden_temporaries(tmp_path)


def test_a_non_empty_destination_needs_force_and_only_its_own_files(tmp_path, capsys):
    src = os.path.join(KERAS_HUB, "classifier", "preset")
    dst = tmp_path / "out"
    dst.mkdir()
    (dst / "config.json").write_text("{}")
    before = snapshot(dst)
    code, line = run_cli(capsys, "convert", src, dst, "--to", "hf")
    assert_one_line_error(code, line, dst, "--overwrite")
    (dst / "notes.txt").write_text("mine")
    code, line = run_cli(capsys, "convert", src, dst, "--to", "hf", "--force")
    assert_one_line_error(code, line, dst, "notes.txt")
    assert snapshot(dst) == {**before, **snapshot(dst / "notes.txt")}
    (dst / "notes.txt").unlink()
    assert run_cli(capsys, "convert", src, dst, "--to", "hf", "--force")[0] == 0
    assert sorted(os.listdir(dst)) == ["config.json", "model.safetensors", "spiece.model",
                                       "tokenizer.json", "tokenizer_config.json"]
    assert not hidden_temporaries(tmp_path)


def test_equal_embedding_and_hidden_sizes_write_an_identity_projection(tmp_path):
    config = CONFIG.replace(embedding_size=12)
    src, model = ours(tmp_path, "pretraining", config=config)
    dst = tmp_path / "hf"
    assert convert.main([src, str(dst), "--to", "hf"]) == 0
    tensors = load_file(os.path.join(dst, "model.safetensors"))
    np.testing.assert_array_equal(
        tensors["albert.encoder.embedding_hidden_mapping_in.weight"], np.eye(12))
    back = open_checkpoint(dst).load()
    assert back.encoder.embedding_projection is None
    for got, want in zip(outputs(back), outputs(model)):
        np.testing.assert_allclose(got, want, atol=1e-6, rtol=0)
    shutil.rmtree(dst)
