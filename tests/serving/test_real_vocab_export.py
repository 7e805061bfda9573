"""A Chinese ALBERT on the real 21,128-line vocab.txt (tests/data/real/chinese_vocab, whose
line 344 is U+2028) loads in every command and serves transformers' probabilities
(tests/fixtures/chinese_vocab, tools/make_real_vocab_fixtures.py): from_preset in Python,
the SavedModel in a process without albert_tf, the LiteRT file; convert to ours and to Hugging Face;
fine-tuning a classifier from it."""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pytest

import albert_tf
from albert_tf.checkpoint import convert, open_checkpoint
from albert_tf.serving import export
from albert_tf.serving.litert import runtime
from albert_tf.training.finetune import run as finetune_run
from tests.helpers.fresh_process import call_signatures
from tests.helpers.paths import FIXTURES, REAL_CHINESE_VOCAB

pytestmark = pytest.mark.slow

ATOL = 1e-4  # the bound; float64 HF -> float32
FIXTURE = os.path.join(FIXTURES, "chinese_vocab")
LABELS = ["negative", "neutral", "positive"]


def _reference() -> dict:
    with np.load(os.path.join(FIXTURE, "reference.npz")) as data:
        return dict(data)


def _hf_dir(root) -> str:
    """The fixture's Hugging Face classifier with the real vocab.txt beside it."""
    path = os.path.join(root, "albert_chinese_hf")
    shutil.copytree(os.path.join(FIXTURE, "hf"), path)
    shutil.copyfile(REAL_CHINESE_VOCAB, os.path.join(path, "vocab.txt"))
    return path


def _strings(values) -> np.ndarray:
    return np.array([str(v).encode() for v in values], dtype=object)


def test_the_real_vocab_serves_transformers_probabilities_everywhere(tmp_path):
    ref, checkpoint = _reference(), _hf_dir(tmp_path)
    texts, texts_b = list(ref["texts"]), list(ref["texts_b"])

    model = albert_tf.AlbertSequenceClassifier.from_preset(checkpoint, seq_length=32)
    assert model.preprocessor.tokenizer.vocab_size == 21128
    features = model.preprocessor(texts)
    np.testing.assert_array_equal(features["input_word_ids"], ref["single_input_word_ids"])
    logits = np.asarray(model.predict(texts), np.float64)
    probabilities = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    np.testing.assert_allclose(probabilities, ref["single_probabilities"], atol=ATOL, rtol=0)

    served = str(tmp_path / "served")
    assert export.main(["--checkpoint", checkpoint, "--output", served,
                        "--seq-length", "32"]) == 0
    path = os.path.join(served, "1")
    (tmp_path / "fresh").mkdir()
    got = call_signatures({"single": (path, "serving_default", {"text": _strings(texts)}),
                           "pair": (path, "text_pair", {"text_a": _strings(texts),
                                                        "text_b": _strings(texts_b)})},
                          tmp_path / "fresh")
    # Pair rows cut to fit: on a tie the original (and we) cut B, transformers cuts A
    # (docs/tokenization.md); row 5 is such a tie (16 + 48 pieces in 29 places).
    pairs = model.preprocessor((texts, texts_b))["input_word_ids"]
    same = [np.array_equal(a, b) for a, b in zip(pairs, ref["pair_input_word_ids"])]
    assert [i for i, s in enumerate(same) if not s] == [5]
    for form, rows in (("single", slice(None)), ("pair", np.array(same))):
        want = ref[f"{form}_probabilities"][rows]
        np.testing.assert_allclose(got[form]["probabilities"][rows], want, atol=ATOL, rtol=0)
        assert [v.decode() for v in got[form]["label"][rows]] == [LABELS[i] for i in
                                                                  want.argmax(-1)]

    lite = str(tmp_path / "model.tflite")
    assert export.main(["--checkpoint", checkpoint, "--output", lite, "--format", "litert",
                        "--seq-length", "32"]) == 0
    interpreter = runtime.open_interpreter(lite)
    single = runtime.call(interpreter, "serving_default", text=runtime.strings(texts))
    np.testing.assert_allclose(single["probabilities"], ref["single_probabilities"],
                               atol=ATOL, rtol=0)


def test_the_real_vocab_converts_and_fine_tunes(tmp_path):
    checkpoint = _hf_dir(tmp_path)
    ours, hf = str(tmp_path / "ours"), str(tmp_path / "back_to_hf")
    assert convert.main([checkpoint, ours]) == 0
    assert convert.main([ours, hf, "--to", "hf"]) == 0
    for path in (ours, hf):
        with open(os.path.join(path, "vocab.txt"), "rb") as got, \
                open(REAL_CHINESE_VOCAB, "rb") as want:
            assert got.read() == want.read()  # line 344 and every other, byte for byte
        assert open_checkpoint(path).tokenizer.load().vocab["\u2028"] == 343

    train = tmp_path / "train.csv"
    rows = ["text,label"] + [f"今天天气很好{i},positive" if i % 2 else f"今天天气很差{i},negative"
                             for i in range(32)]
    train.write_text("\n".join(rows) + "\n", encoding="utf-8")
    out = str(tmp_path / "tuned")
    assert finetune_run.main(["--task", "classify", "--checkpoint", checkpoint, "--output", out,
                              "--data", str(train), str(train), "--columns", "text:label",
                              "--epochs", "1", "--batch-size", "16", "--seq-length", "24",
                              "--set", "jit_compile=false"]) == 0
    record = json.load(open(os.path.join(out, "albert_task.json"), encoding="utf-8"))
    assert record["tokenizer"] == "wordpiece"
    with open(os.path.join(out, "vocab.txt"), "rb") as f:
        assert f.read().split(b"\n")[343] == "\u2028".encode()
