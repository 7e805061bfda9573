"""Checkpoint loading and saving, checked against Hugging Face reference outputs.

The fixtures (tests/fixtures/, made by tools/make_reference_fixtures.py) hold HF
AlbertForPreTraining weights as model.safetensors and as an original-name TF1
checkpoint, plus HF's outputs on padded inputs. No torch is needed here.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import sys

import keras
import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

from albert_tf import (
    AlbertPretrainer,
    AlbertSequenceClassifier,
    AlbertSpanExtractor,
    load_checkpoint,
    save_checkpoint,
)
from albert_tf.checkpoint import NAME_TABLE, CheckpointError, detect_format, open_checkpoint
from tests.helpers.paths import FIXTURES

INPUT_NAMES = ("input_word_ids", "input_mask", "input_type_ids")
OUTPUT_NAMES = ("sequence_output", "pooled_output", "mlm_logits", "sop_logits")
TOLERANCE = 1e-4  # max |delta| in float32 against HF's float64 outputs


def reference(name: str) -> dict[str, np.ndarray]:
    with np.load(os.path.join(FIXTURES, name, "reference.npz")) as data:
        return dict(data)


def pretrainer_outputs(model: AlbertPretrainer, ref: dict) -> dict[str, np.ndarray]:
    inputs = {k: ref[k] for k in (*INPUT_NAMES, "masked_lm_positions")}
    encoded = model.encoder({k: ref[k] for k in INPUT_NAMES})
    heads = model(inputs)
    out = {"sequence_output": encoded["sequence_output"],
           "pooled_output": encoded["pooled_output"], **heads}
    return {k: keras.ops.convert_to_numpy(out[k]) for k in OUTPUT_NAMES}


def assert_matches_reference(model, name: str, outputs=OUTPUT_NAMES) -> None:
    ref = reference(name)
    got = pretrainer_outputs(model, ref)
    for key in outputs:
        assert got[key].shape == ref[key].shape, key
        assert got[key].dtype == np.float32, key
        delta = float(np.max(np.abs(got[key] - ref[key])))
        assert delta <= TOLERANCE, f"{name} {key}: max |delta| = {delta:.3g}"


def copy_fixture(name: str, fmt: str, tmp_path) -> str:
    dst = os.path.join(tmp_path, f"{name}-{fmt}")
    shutil.copytree(os.path.join(FIXTURES, name, fmt), dst)
    return dst


# ------------------------------------------------------------------ parity with HF
@pytest.mark.parametrize("name", ["grouped", "shared"])
@pytest.mark.parametrize("fmt", ["hf", "tf1"])
def test_matches_hugging_face(name, fmt):
    model = load_checkpoint(os.path.join(FIXTURES, name, fmt))
    assert type(model) is AlbertPretrainer
    assert_matches_reference(model, name)


def test_loaded_configs_translate_activation_and_groups():
    grouped = load_checkpoint(os.path.join(FIXTURES, "grouped", "hf")).config
    shared = load_checkpoint(os.path.join(FIXTURES, "shared", "tf1")).config
    assert (grouped.hidden_act, shared.hidden_act) == ("gelu", "gelu_exact")
    assert (grouped.num_hidden_groups, grouped.inner_group_num) == (2, 2)
    assert (shared.num_hidden_groups, shared.inner_group_num) == (1, 1)


def test_tf1_prefix_and_index_path_are_accepted():
    prefix = os.path.join(FIXTURES, "grouped", "tf1", "model.ckpt-250")
    assert detect_format(prefix) == detect_format(prefix + ".index") == "tf1"
    assert_matches_reference(load_checkpoint(prefix + ".index"), "grouped", ("sop_logits",))


def test_name_table_is_one_to_one():
    for column in (0, 1, 3):
        names = [row[column] for row in NAME_TABLE if row[column] is not None]
        assert len(names) == len(set(names)), column


# ------------------------------------------------------------------ HF variants
def write_hf(directory, tensors: dict, like: str = "grouped") -> str:
    os.makedirs(directory, exist_ok=True)
    shutil.copyfile(os.path.join(FIXTURES, like, "hf", "config.json"),
                    os.path.join(directory, "config.json"))
    save_file(tensors, os.path.join(directory, "model.safetensors"))
    return str(directory)


def hf_tensors(name: str = "grouped") -> dict[str, np.ndarray]:
    return load_file(os.path.join(FIXTURES, name, "hf", "model.safetensors"))


@pytest.mark.parametrize("prefix", ["albert.", ""])
def test_hf_encoder_only_keeps_heads_initialised(tmp_path, caplog, prefix):
    encoder_only = {prefix + k[len("albert."):]: v for k, v in hf_tensors().items()
                    if k.startswith("albert.")}
    with caplog.at_level(logging.WARNING, logger="albert_tf.checkpoint"):
        model = load_checkpoint(write_hf(tmp_path / "enc", encoder_only))
    assert_matches_reference(model, "grouped", ("sequence_output", "pooled_output"))
    warned = " ".join(r.getMessage() for r in caplog.records)
    assert "mlm_head" in warned and "sop_head" in warned
    sop = hf_tensors()["sop_classifier.classifier.weight"]
    assert not np.allclose(keras.ops.convert_to_numpy(model.sop_head.dense.kernel), sop.T)


def test_hf_tied_copies_are_checked(tmp_path):
    tensors = hf_tensors()
    tensors["predictions.decoder.weight"] = tensors["albert.embeddings.word_embeddings.weight"]
    tensors["predictions.decoder.bias"] = tensors["predictions.bias"]
    tensors["albert.embeddings.position_ids"] = np.arange(11, dtype=np.int64)[None]
    assert_matches_reference(load_checkpoint(write_hf(tmp_path / "tied", tensors)), "grouped",
                             ("mlm_logits",))
    tensors["predictions.decoder.bias"] = tensors["predictions.bias"] + 1.0
    with pytest.raises(CheckpointError, match="tied copy differs: predictions.decoder.bias"):
        load_checkpoint(write_hf(tmp_path / "untied", tensors))


def test_pytorch_bin_without_torch_is_a_clear_error(tmp_path, monkeypatch):
    directory = tmp_path / "pt"
    directory.mkdir()
    shutil.copyfile(os.path.join(FIXTURES, "grouped", "hf", "config.json"),
                    directory / "config.json")
    (directory / "pytorch_model.bin").write_bytes(b"not read")
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch -> ImportError
    with pytest.raises(CheckpointError, match="pytorch_model.bin needs torch"):
        load_checkpoint(directory)


def test_tf1_without_tensorflow_is_a_clear_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "tensorflow", None)  # import tensorflow -> ImportError
    with pytest.raises(CheckpointError, match="TF1 checkpoint needs TensorFlow"):
        load_checkpoint(os.path.join(FIXTURES, "shared", "tf1"))


# ------------------------------------------------------------------ errors
def test_every_problem_is_listed_at_once(tmp_path):
    tensors = hf_tensors()
    del tensors["albert.encoder.albert_layer_groups.1.albert_layers.0.ffn.bias"]
    tensors["albert.pooler.weight"] = tensors["albert.pooler.weight"][:, :5]
    tensors["albert.encoder.extra.weight"] = np.zeros(3, np.float32)
    with pytest.raises(CheckpointError) as error:
        load_checkpoint(write_hf(tmp_path / "broken", tensors))
    message = str(error.value)
    assert "3 tensor(s)" in message
    assert "missing: albert.encoder.albert_layer_groups.1.albert_layers.0.ffn.bias" in message
    assert ("mis-shaped: albert.pooler.weight: (12, 5) in the checkpoint, (12, 12) expected"
            in message)
    assert "unexpected: albert.encoder.extra.weight" in message


def test_tf1_config_mismatch_lists_all(tmp_path):
    directory = copy_fixture("grouped", "tf1", tmp_path)
    path = os.path.join(directory, "albert_config.json")
    config = json.load(open(path))
    config.update(num_hidden_groups=3, vocab_size=40)
    json.dump(config, open(path, "w"))
    with pytest.raises(CheckpointError) as error:
        load_checkpoint(directory)
    message = str(error.value)
    group_2 = "bert/encoder/transformer/group_2/"
    for name in (f"missing: {group_2}inner_group_0/attention_1/self/key/bias",
                 f"missing: {group_2}inner_group_1/LayerNorm_1/gamma",
                 "mis-shaped: bert/embeddings/word_embeddings: (37, 8)",
                 "mis-shaped: cls/predictions/output_bias: (37,)"):
        assert name in message
    assert "adam_m" not in message and "global_step" not in message


def test_other_sharing_modes_cannot_load_grouped_formats(tmp_path):
    directory = copy_fixture("shared", "tf1", tmp_path)
    path = os.path.join(directory, "albert_config.json")
    config = json.load(open(path))
    json.dump({**config, "sharing": "ffn"}, open(path, "w"))
    with pytest.raises(CheckpointError, match="sharing='ffn'"):
        load_checkpoint(directory)


def test_corrupt_files_are_named(tmp_path):
    hf = shutil.copytree(os.path.join(FIXTURES, "shared", "hf"), tmp_path / "hf")
    (hf / "model.safetensors").write_bytes(b"not a safetensors file")
    with pytest.raises(CheckpointError, match="model.safetensors: not a readable safetensors"):
        load_checkpoint(hf)
    tf1 = copy_fixture("shared", "tf1", tmp_path)
    data = os.path.join(tf1, "model.ckpt-0.data-00000-of-00001")
    with open(data, "r+b") as f:
        f.truncate(100)
    with pytest.raises(CheckpointError, match="model.ckpt-0: its index declares 11,548 bytes"):
        load_checkpoint(tf1)
    ours = save_checkpoint(load_checkpoint(os.path.join(FIXTURES, "shared", "hf")),
                           tmp_path / "ours")
    with open(os.path.join(ours, "model.weights.h5"), "wb") as f:
        f.write(b"not hdf5")
    with pytest.raises(CheckpointError, match="model.weights.h5: not a readable HDF5"):
        load_checkpoint(ours)


def test_not_a_checkpoint(tmp_path):
    with pytest.raises(CheckpointError, match="not a checkpoint"):
        load_checkpoint(tmp_path)
    with pytest.raises(CheckpointError, match="no such file"):
        load_checkpoint(tmp_path / "absent")


def test_newest_of_several_tf1_checkpoints(tmp_path):
    directory = copy_fixture("grouped", "tf1", tmp_path)
    os.remove(os.path.join(directory, "checkpoint"))
    for suffix in (".index", ".data-00000-of-00001"):  # an older step holding other weights
        shutil.copyfile(os.path.join(FIXTURES, "shared", "tf1", "model.ckpt-0" + suffix),
                        os.path.join(directory, "model.ckpt-9" + suffix))
    assert_matches_reference(load_checkpoint(directory), "grouped", ("sop_logits",))


# ------------------------------------------------------------------ our format
def test_save_load_round_trip(tmp_path, spm_41_path):
    model = load_checkpoint(os.path.join(FIXTURES, "shared", "hf"))
    spm = tmp_path / "tok.model"  # a real vocabulary of the model's size (save checks both)
    shutil.copyfile(spm_41_path, spm)
    out = save_checkpoint(model, tmp_path / "ours", spm_model=str(spm), do_lower_case=False)
    assert sorted(os.listdir(out)) == ["albert_config.json", "albert_task.json",
                                       "model.weights.h5", "spiece.model"]
    assert not [n for n in os.listdir(tmp_path) if ".tmp-" in n]
    assert (tmp_path / "ours" / "spiece.model").read_bytes() == spm.read_bytes()
    opened = open_checkpoint(out)
    assert opened.format == "albert_tf"
    assert opened.task_record.to_dict() == {"task": "pretraining", "seq_length": None,
                                            "tokenizer": "sentencepiece",
                                            "do_lower_case": False, "keep_accents": False,
                                            "tokenize_chinese_chars": True, "split_characters": False,
                                            "precision": "float32"}
    loaded = load_checkpoint(out)
    assert type(loaded) is AlbertPretrainer and loaded.config == model.config
    ref = reference("shared")
    expected, got = pretrainer_outputs(model, ref), pretrainer_outputs(loaded, ref)
    for key in OUTPUT_NAMES:
        np.testing.assert_array_equal(got[key], expected[key])
    assert_matches_reference(loaded, "shared")


def test_trained_model_checkpoint_holds_no_optimizer_state(tmp_path):
    """A compiled, trained model saves and loads; optimizer slots stay out of the file."""
    import h5py

    model = load_checkpoint(os.path.join(FIXTURES, "grouped", "hf"))
    ref = reference("grouped")
    x = {k: ref[k] for k in (*INPUT_NAMES, "masked_lm_positions")}
    y = {"masked_lm_ids": np.ones_like(ref["masked_lm_positions"]),
         "masked_lm_weights": np.ones(ref["masked_lm_positions"].shape, np.float32),
         "sentence_order_label": np.zeros(len(ref["input_word_ids"]), np.int32)}
    model.compile(optimizer=keras.optimizers.Adam(1e-3))
    model.fit(x, y, epochs=1, verbose=0)
    out = save_checkpoint(model, tmp_path / "trained")
    with h5py.File(os.path.join(out, "model.weights.h5"), "r") as f:
        assert "optimizer" not in f
    got = pretrainer_outputs(load_checkpoint(out), ref)
    for key, value in pretrainer_outputs(model, ref).items():
        np.testing.assert_array_equal(got[key], value)
    # A file written by Keras' own save_weights of the compiled model (with the
    # optimizer's variables) loads too: the optimizer state is ignored, as TF1 slots are.
    model.save_weights(os.path.join(out, "model.weights.h5"))
    with h5py.File(os.path.join(out, "model.weights.h5"), "r") as f:
        assert "optimizer" in f
    got = pretrainer_outputs(load_checkpoint(out), ref)
    np.testing.assert_array_equal(got["mlm_logits"], pretrainer_outputs(model, ref)["mlm_logits"])


def test_extra_info_is_recorded_and_cannot_replace_fields(tmp_path):
    model = AlbertSpanExtractor(load_checkpoint(os.path.join(FIXTURES, "shared", "hf")).config,
                                answerability=True)
    out = save_checkpoint(model, tmp_path / "squad", extra_info={"no_answer_threshold": 0.25})
    info = open_checkpoint(out).task_record.to_dict()
    assert info["no_answer_threshold"] == 0.25 and info["answerability"] is True
    with pytest.raises(ValueError, match=r"may not replace albert_task.json fields: \['task'\]"):
        save_checkpoint(model, tmp_path / "bad", extra_info={"task": "classification"})
    assert not (tmp_path / "bad").exists()


def test_save_into_existing_directory_keeps_other_files(tmp_path):
    model = load_checkpoint(os.path.join(FIXTURES, "shared", "hf"))
    directory = tmp_path / "run"
    directory.mkdir()
    (directory / "notes.txt").write_text("mine")
    save_checkpoint(model, directory, keep_other_files=True)  # refused without it
    assert (directory / "notes.txt").read_text() == "mine"
    assert_matches_reference(load_checkpoint(directory), "shared", ("sop_logits",))


def test_fine_tuned_models_round_trip(tmp_path):
    base = load_checkpoint(os.path.join(FIXTURES, "grouped", "tf1"))
    ref = reference("grouped")
    inputs = {k: ref[k] for k in INPUT_NAMES}
    classifier = AlbertSequenceClassifier(base.config, 3, encoder=base.encoder)
    save_checkpoint(classifier, tmp_path / "cls", label_names=["a", "b", "c"], seq_length=7)
    expected = keras.ops.convert_to_numpy(classifier(inputs))
    loaded = load_checkpoint(tmp_path / "cls")
    assert type(loaded) is AlbertSequenceClassifier and loaded.num_classes == 3
    assert open_checkpoint(tmp_path / "cls").task_record.to_dict()["label_names"] == ["a", "b", "c"]
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(loaded(inputs)), expected)
    span = AlbertSpanExtractor(base.config, answerability=True, encoder=base.encoder)
    expected = keras.ops.convert_to_numpy(span(inputs)["answerable_logits"])
    save_checkpoint(span, tmp_path / "span")
    loaded = load_checkpoint(tmp_path / "span")
    assert type(loaded) is AlbertSpanExtractor and loaded.answerability
    np.testing.assert_array_equal(
        keras.ops.convert_to_numpy(loaded(inputs)["answerable_logits"]), expected)
    with pytest.raises(ValueError, match="label_names has 2 names but num_classes=3"):
        save_checkpoint(classifier, tmp_path / "bad", label_names=["a", "b"])


def test_our_format_lists_every_problem(tmp_path):
    model = load_checkpoint(os.path.join(FIXTURES, "grouped", "hf"))
    directory = save_checkpoint(model, tmp_path / "ours")
    path = os.path.join(directory, "albert_config.json")
    config = json.load(open(path))
    json.dump({**config, "num_hidden_groups": 1}, open(path, "w"))  # 2 groups were saved
    with pytest.raises(CheckpointError, match=r"unexpected: encoder/blocks/transformer_block_2/"):
        load_checkpoint(directory)
    json.dump({**config, "vocab_size": 40, "intermediate_size": 21}, open(path, "w"))
    with pytest.raises(CheckpointError) as error:
        load_checkpoint(directory)
    message = str(error.value)
    assert "mis-shaped: encoder/embeddings/word_embeddings/vars/0: (37, 8)" in message
    assert message.count("ffn/intermediate/vars/0") == 4  # one per distinct block
