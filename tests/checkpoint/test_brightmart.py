"""brightmart/albert_zh's own checkpoints through the one door, against an independent
NumPy reference of its modeling.py (tests/helpers/brightmart.py).

The checkpoints are written here with the real albert_tiny variable list
(tests/data/real/brightmart_albert_zh/albert_tiny_variables.tsv): its names, and its
shapes either shrunk (each real size replaced by a small one) or as they are.
"""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from albert_tf import AlbertEncoder
from albert_tf.checkpoint import CheckpointError, detect_format, open_checkpoint
from albert_tf.checkpoint.brightmart import BRIGHTMART_TABLE
from albert_tf.models import (
    AlbertMaskedLM,
    AlbertPretrainer,
    AlbertSequenceClassifier,
    AlbertTokenClassifier,
)
from tests.helpers import brightmart
from tests.helpers.foreign import assert_lists_problems
from tests.helpers.paths import REAL_CHINESE_VOCAB
from tests.test_bad_inputs import assert_one_line_error, hidden_temporaries, run_cli, snapshot

ATOL = 1e-5  # float32 against the float64 reference (measured: below 1e-6)
TEXTS = [("我喜欢读书。", "今天天气很好"), ("北京是中国的。", "他是学生？"), ("the cats", ""),
         ("Ｔｈｅ\u3000猫，\u2028很好", "上海")]  # full-width, ideographic space, U+2028


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    """(directory, weights) of a brightmart release, its sizes shrunk."""
    directory = tmp_path_factory.mktemp("brightmart") / "albert_tiny_zh"
    return str(directory), brightmart.write_checkpoint(directory)


def inputs(config: dict, seed: int = 0, batch: int = 2, length: int = 9, predictions: int = 3):
    """Non-uniform inputs: random ids, the second row padded, two segments, masked positions."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(5, config["vocab_size"], (batch, length)).astype("int32")
    mask = np.ones((batch, length), "int32")
    mask[1, length - 3:] = 0
    types = (np.arange(length)[None] >= length // 2).astype("int32").repeat(batch, 0) * mask
    positions = rng.integers(0, length - 3, (batch, predictions)).astype("int32")
    return {"input_word_ids": ids * mask, "input_mask": mask, "input_type_ids": types,
            "masked_lm_positions": positions}


def max_differences(model, weights, config, features) -> dict[str, float]:
    """Max |ours - reference| for the encoder's outputs and the pretraining logits."""
    ref = brightmart.reference(weights, config, features["input_word_ids"],
                               features["input_mask"], features["input_type_ids"],
                               features["masked_lm_positions"])
    encoder_inputs = {k: v for k, v in features.items() if k != "masked_lm_positions"}
    encoded = model.encoder(encoder_inputs)
    got = {**{k: encoded[k] for k in ("sequence_output", "pooled_output")}, **model(features)}
    return {name: float(np.abs(np.asarray(got[name], np.float64) - ref[name]).max())
            for name in ("sequence_output", "pooled_output", "mlm_logits", "sop_logits")}


# ------------------------------------------------------------------ the door
def test_detected_and_read_as_brightmarts(release):
    directory, _ = release
    ckpt = open_checkpoint(directory)
    assert detect_format(directory) == ckpt.format == "brightmart"
    assert detect_format(os.path.join(directory, brightmart.PREFIX_NAME)) == "brightmart"
    assert ckpt.config_path == os.path.join(directory, brightmart.CONFIG_NAME)
    config = ckpt.config
    assert config.embedding_projection_position == "before_sum"
    assert (config.hidden_size, config.embedding_size, config.num_hidden_layers) == (12, 8, 5)
    assert ckpt.task_record.task == "pretraining"
    tokenizer = ckpt.tokenizer
    assert (tokenizer.kind, tokenizer.do_lower_case) == ("wordpiece", True)
    assert tokenizer.spm_model == os.path.join(directory, "vocab.txt")
    assert tokenizer.load().tokenize("我喜欢The Cats") == ["我", "喜", "欢", "the", "cat", "##s"]


def test_name_table_covers_the_real_variable_list_once():
    names = [name for _, name, _ in BRIGHTMART_TABLE]
    assert len(names) == len(set(names))
    assert set(names) == set(brightmart.real_shapes())


def test_pretrainer_matches_the_reference(release):
    directory, weights = release
    model = open_checkpoint(directory).load()
    assert type(model) is AlbertPretrainer
    config = brightmart.config_dict()
    for seed in (0, 1):
        diffs = max_differences(model, weights, config, inputs(config, seed))
        assert max(diffs.values()) <= ATOL, diffs


def test_real_albert_tiny_shapes_load_and_match_the_reference(tmp_path):
    """The real albert_tiny's names and shapes (V 21128, E 128, H 312, 4 layers; ~17 MB)
    beside the real Chinese vocab.txt."""
    config = brightmart.config_dict(real=True)
    weights = brightmart.write_checkpoint(tmp_path, config=config, vocab=REAL_CHINESE_VOCAB)
    assert {n: w.shape for n, w in weights.items()} == brightmart.real_shapes()
    ckpt = open_checkpoint(tmp_path)
    assert ckpt.tokenizer.spm_model == str(tmp_path / "vocab.txt")  # 21128 tokens: fits
    assert ckpt.tokenizer.load().tokenize("我喜欢读书") == ["我", "喜", "欢", "读", "书"]
    model = ckpt.load()
    diffs = max_differences(model, weights, config, inputs(config, seed=2, length=16))
    assert max(diffs.values()) <= ATOL, diffs


# ------------------------------------------------------------------ from_preset
def test_from_preset_gives_task_models_fresh_heads(release, caplog):
    directory, weights = release
    table = weights["bert/embeddings/word_embeddings_2"]
    encoder = AlbertEncoder.from_preset(directory)
    np.testing.assert_array_equal(encoder.embeddings.word_projection.kernel.numpy(), table)
    classifier = AlbertSequenceClassifier.from_preset(directory, num_classes=3)
    assert classifier.config.embedding_projection_position == "before_sum"
    np.testing.assert_array_equal(classifier.encoder.pooler.kernel.numpy(),
                                  weights["bert/pooler/dense/kernel"])
    tagger = AlbertTokenClassifier.from_preset(directory, num_classes=5)
    np.testing.assert_array_equal(
        tagger.encoder.block(0).ffn.intermediate.kernel.numpy(),
        weights["bert/encoder/layer_shared/intermediate/dense/kernel"])
    masked_lm = AlbertMaskedLM.from_preset(directory)  # the checkpoint's own MLM head
    np.testing.assert_array_equal(masked_lm.mlm_head.output_bias.numpy(),
                                  weights["cls/predictions/output_bias"])


# ------------------------------------------------------------------ the commands
def test_convert_to_ours_keeps_the_layout(capsys, release, tmp_path):
    directory, weights = release
    assert run_cli(capsys, "convert", directory, tmp_path / "ours")[0] == 0
    converted = open_checkpoint(tmp_path / "ours")
    assert converted.format == "albert_tf"
    assert converted.config.embedding_projection_position == "before_sum"
    assert converted.tokenizer.kind == "wordpiece"
    config = brightmart.config_dict()
    diffs = max_differences(converted.load(), weights, config, inputs(config))
    assert max(diffs.values()) <= ATOL, diffs


@pytest.mark.parametrize("target", ["hf", "kerashub"])
def test_convert_to_other_formats_is_refused(capsys, release, tmp_path, target):
    directory, _ = release
    before = snapshot(directory)
    code, line = run_cli(capsys, "convert", directory, tmp_path / "out", "--to", target)
    assert_one_line_error(code, line, directory, f"--to {target}",
                          "embedding_projection_position='before_sum'")
    assert snapshot(directory) == before and not (tmp_path / "out").exists()
    assert not hidden_temporaries(tmp_path)


def test_pretrain_init_checkpoint_loads_every_tensor(release):
    import tensorflow as tf

    from albert_tf.training.pretrain.config import PretrainConfig
    from albert_tf.training.pretrain.run import build_model

    directory, weights = release
    cfg = PretrainConfig(init_checkpoint=directory, train_steps=2, global_batch_size=2,
                         jit_compile=False)
    model = build_model(cfg, tf.distribute.get_strategy(), None)
    assert model.config.embedding_projection_position == "before_sum"
    np.testing.assert_array_equal(model.mlm_head.dense.kernel.numpy(),
                                  weights["cls/predictions/transform/dense/kernel"])
    np.testing.assert_array_equal(model.sop_head.dense.kernel.numpy(),
                                  weights["cls/seq_relationship/output_weights"].T)


def test_finetune_then_export_reads_the_fine_tuned_layout(capsys, release, tmp_path):
    directory, _ = release
    data = tmp_path / "train.csv"
    rows = [f"{a}{b},{i % 2}" for i, (a, b) in enumerate(TEXTS * 4)]
    data.write_text("text,label\n" + "\n".join(rows) + "\n", encoding="utf-8")
    out = tmp_path / "tuned"
    code, line = run_cli(capsys, "finetune", "--task", "classification", "--checkpoint",
                         directory, "--output", out, "--data", data, data, "--columns",
                         "text:label", "--seq-length", "12", "--epochs", "1", "--batch-size",
                         "4", "--set", "jit_compile=false", "buckets=none")
    assert code == 0, line
    tuned = open_checkpoint(out)
    assert tuned.config.embedding_projection_position == "before_sum"
    assert (tuned.task_record.task, tuned.tokenizer.kind) == ("classification", "wordpiece")


# ------------------------------------------------------------------ refused
def test_a_preln_config_is_refused_in_one_line(capsys, release, tmp_path):
    directory, _ = release
    copy = tmp_path / "preln"
    brightmart.write_checkpoint(copy, config={**brightmart.config_dict(), "ln_type": "preln"})
    before = snapshot(copy)
    for argv in (["export", "--checkpoint", copy, "--output", tmp_path / "models" / "m"],
                 ["convert", copy, tmp_path / "converted"]):
        code, line = run_cli(capsys, *argv)
        assert_one_line_error(code, line, copy / brightmart.CONFIG_NAME, "ln_type='preln'")
    assert snapshot(copy) == before
    assert not (tmp_path / "models").exists() and not (tmp_path / "converted").exists()


def test_missing_and_mis_shaped_tensors_are_listed_at_once(tmp_path):
    weights = brightmart.random_weights(brightmart.shapes_for(brightmart.config_dict()))
    del weights["bert/embeddings/word_embeddings_2"]
    weights["bert/encoder/layer_shared/output/dense/bias"] = np.zeros(7, np.float32)
    weights["bert/encoder/layer_shared/attention/self/extra"] = np.zeros(3, np.float32)
    brightmart.write_checkpoint(tmp_path, weights=weights)
    ckpt = open_checkpoint(tmp_path)
    assert ckpt.format == "brightmart"  # told apart by layer_shared/ alone
    with pytest.raises(CheckpointError) as e:
        ckpt.load()
    assert_lists_problems(str(e.value), 3, [
        "missing: bert/embeddings/word_embeddings_2",
        "mis-shaped: bert/encoder/layer_shared/output/dense/bias: (7,) in the checkpoint, "
        "(12,) expected",
        "unexpected: bert/encoder/layer_shared/attention/self/extra"], "global_step")


def test_missing_projection_from_the_cli_writes_nothing(capsys, tmp_path):
    weights = brightmart.random_weights(brightmart.shapes_for(brightmart.config_dict()))
    del weights["bert/embeddings/word_embeddings_2"]
    brightmart.write_checkpoint(tmp_path / "bad", weights=weights)
    code, line = run_cli(capsys, "convert", tmp_path / "bad", tmp_path / "out")
    assert code == 2 and not (tmp_path / "out").exists()
    message = capsys.readouterr().err + line
    assert "missing: bert/embeddings/word_embeddings_2" in message, message


def test_shared_groups_other_than_one_are_refused(tmp_path):
    brightmart.write_checkpoint(tmp_path, config={**brightmart.config_dict(),
                                                  "num_hidden_groups": 5})
    with pytest.raises(CheckpointError) as e:
        _ = open_checkpoint(tmp_path).config
    assert str(e.value).startswith(f"{tmp_path / brightmart.CONFIG_NAME}: num_hidden_groups=5")
    assert "layer_shared" in str(e.value)


def test_several_configs_are_refused_naming_them(tmp_path):
    brightmart.write_checkpoint(tmp_path)
    with open(tmp_path / "albert_config_base.json", "w", encoding="utf-8") as f:
        json.dump(brightmart.config_dict(), f)
    with pytest.raises(CheckpointError, match="several model configs "
                       r"\(albert_config_base.json, albert_config_tiny.json\)"):
        _ = open_checkpoint(tmp_path).config


# ------------------------------------------------------------------ serving raw text
@pytest.mark.slow
def test_exported_checkpoint_serves_raw_chinese_text_as_the_eager_model(tmp_path):
    """A small model beside the real 21,128-line Chinese vocab.txt, exported and served."""
    from albert_tf.serving import export
    from tests.helpers.fresh_process import call_signatures

    directory = tmp_path / "albert_tiny_zh"
    brightmart.write_checkpoint(directory, config={**brightmart.config_dict(),
                                                   "vocab_size": 21128},
                                vocab=REAL_CHINESE_VOCAB)
    directory = str(directory)
    length = 16
    assert export.main(["--checkpoint", directory, "--output", str(tmp_path / "bm"),
                        "--seq-length", str(length)]) == 0
    texts_a = np.array([a.encode() for a, _ in TEXTS], dtype=object)
    texts_b = np.array([b.encode() for _, b in TEXTS], dtype=object)
    calls = {"pair": (str(tmp_path / "bm" / "1"), "text_pair",
                      {"text_a": texts_a, "text_b": texts_b})}
    got = call_signatures(calls, tmp_path)["pair"]
    ckpt = open_checkpoint(directory)
    tokenizer, encoder = ckpt.tokenizer.load(), ckpt.load().encoder
    for row, (a, b) in enumerate(TEXTS):
        packed = tokenizer.encode_pair(a, b, seq_length=length)
        features = {k: np.array([v], "int32") for k, v in packed.items()}
        want = encoder(features)
        real = int(features["input_mask"].sum())
        assert int(got["input_mask"][row].sum()) == real
        np.testing.assert_allclose(got["sequence_output"][row, :real],
                                   np.asarray(want["sequence_output"])[0, :real], atol=1e-5)
        np.testing.assert_allclose(got["pooled_output"][row],
                                   np.asarray(want["pooled_output"])[0], atol=1e-5)
