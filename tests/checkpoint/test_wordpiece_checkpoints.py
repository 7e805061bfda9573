"""The Chinese ALBERT layouts open with their WordPiece vocabulary and give transformers'
numbers (tests/fixtures/wordpiece, tools/make_wordpiece_fixtures.py).

Each layout is assembled here from the fixture's files under the names the real
releases use: a Hugging Face directory with BertTokenizer's tokenizer_config.json, the
same with vocab.txt alone, and google-research's albert_*_zh layout (albert_config.json,
model.ckpt-best.*, vocab_chinese.txt; or vocab.txt).
"""

from __future__ import annotations

import json
import os
import re
import shutil

import numpy as np
import pytest

from albert_tf.checkpoint import CheckpointError, convert, open_checkpoint
from albert_tf.errors import UserError
from albert_tf.tokenizer.wordpiece import VocabFileError
from tests.helpers.paths import TASK_FIXTURES
from tests.helpers.wordpiece import WORDPIECE_FIXTURE

HF = os.path.join(WORDPIECE_FIXTURE, "hf")
TF1 = os.path.join(WORDPIECE_FIXTURE, "tf1")
SEQ_LENGTH = 32
ATOL = 1e-5


def reference() -> dict:
    with np.load(os.path.join(WORDPIECE_FIXTURE, "reference.npz")) as data:
        return dict(data)


def _copy(src: str, dst, names: list[str] | None = None, extra: dict | None = None) -> str:
    os.makedirs(dst, exist_ok=True)
    for name in names if names is not None else os.listdir(src):
        shutil.copyfile(os.path.join(src, name), os.path.join(dst, name))
    for name, source in (extra or {}).items():
        shutil.copyfile(source, os.path.join(dst, name))
    return str(dst)


def layouts(root) -> dict[str, str]:
    vocab = os.path.join(HF, "vocab.txt")
    weights = ["albert_config.json", "model.ckpt-best.index",
               "model.ckpt-best.data-00000-of-00001"]
    return {
        "hf": HF,
        "hf_vocab_only": _copy(HF, root / "hf_vocab_only",
                               ["config.json", "model.safetensors", "vocab.txt"]),
        "tf1_zh": _copy(TF1, root / "albert_base_zh", weights, {"vocab_chinese.txt": vocab}),
        "tf1_vocab": _copy(TF1, root / "tf1_vocab", weights, {"vocab.txt": vocab}),
    }


def _probabilities(model, features) -> np.ndarray:
    out = model(features)
    logits = np.asarray(out["logits"] if isinstance(out, dict) else out, np.float64)
    e = np.exp(logits - logits.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


@pytest.mark.parametrize("layout", ["hf", "hf_vocab_only", "tf1_zh", "tf1_vocab"])
def test_layout_opens_with_wordpiece_and_equals_transformers(tmp_path, layout):
    opened = open_checkpoint(layouts(tmp_path)[layout])
    assert opened.format == ("hf" if layout.startswith("hf") else "tf1")
    record, files = opened.task_record, opened.tokenizer
    assert (record.tokenizer, files.kind) == ("wordpiece", "wordpiece")
    assert (files.do_lower_case, files.keep_accents, files.tokenize_chinese_chars) == (
        True, False, True)
    assert os.path.basename(files.spm_model) == (
        "vocab_chinese.txt" if layout == "tf1_zh" else "vocab.txt")
    ref = reference()
    pre = files.preprocessor(SEQ_LENGTH)
    single = pre(list(ref["texts"]))
    pair = pre((list(ref["texts"]), list(ref["texts_b"])))
    np.testing.assert_array_equal(single["input_word_ids"], ref["single_input_word_ids"])
    np.testing.assert_array_equal(pair["input_word_ids"], ref["pair_input_word_ids"])
    np.testing.assert_array_equal(pair["input_type_ids"], ref["pair_input_type_ids"])
    model = opened.load()
    np.testing.assert_allclose(_probabilities(model, single), ref["single_probabilities"],
                               atol=ATOL, rtol=0)
    np.testing.assert_allclose(_probabilities(model, pair), ref["pair_probabilities"],
                               atol=ATOL, rtol=0)


def test_tokenizer_config_options(tmp_path):
    directory = _copy(HF, tmp_path / "cased")
    config = os.path.join(directory, "tokenizer_config.json")
    values = json.load(open(config, encoding="utf-8"))
    values.update(tokenizer_class="BertTokenizerFast", do_lower_case=False, strip_accents=True,
                  tokenize_chinese_chars=False)
    json.dump(values, open(config, "w", encoding="utf-8"))
    files = open_checkpoint(directory).tokenizer
    assert (files.kind, files.do_lower_case, files.keep_accents,
            files.tokenize_chinese_chars) == ("wordpiece", False, False, False)
    values.update(strip_accents=None)  # BertTokenizer's default: strip when lower-casing
    json.dump(values, open(config, "w", encoding="utf-8"))
    assert open_checkpoint(directory).tokenizer.keep_accents is True
    values.update(tokenizer_class="XLNetTokenizer")
    json.dump(values, open(config, "w", encoding="utf-8"))
    with pytest.raises(CheckpointError, match=r"tokenizer_config.json: tokenizer_class="
                                              r"'XLNetTokenizer' is not one albert-tf reads"):
        _ = open_checkpoint(directory).tokenizer


@pytest.mark.parametrize("role, value", [
    ("unk_token", "<unk>"),                              # absent from the vocabulary
    ("cls_token", {"content": "[PAD]", "lstrip": False}),  # another token of the vocabulary
])
def test_tokenizer_config_special_tokens_other_than_ours_are_refused(tmp_path, role, value):
    """transformers would use the token tokenizer_config.json names; albert-tf's tokenizer
    uses the original's: refused naming the file, the key and the value, not ignored."""
    directory = _copy(HF, tmp_path / "specials")
    config = os.path.join(directory, "tokenizer_config.json")
    values = json.load(open(config, encoding="utf-8"))
    json.dump({**values, "mask_token": {"content": "[MASK]", "lstrip": True}},
              open(config, "w", encoding="utf-8"))  # the AddedToken form of ours reads
    assert open_checkpoint(directory).tokenizer.kind == "wordpiece"
    json.dump({**values, role: value}, open(config, "w", encoding="utf-8"))
    content = value["content"] if isinstance(value, dict) else value
    with pytest.raises(CheckpointError, match=re.escape(
            f"tokenizer_config.json: {role}={content!r}, but albert-tf's vocab.txt tokenizer "
            "uses")):
        _ = open_checkpoint(directory).tokenizer


def test_vocab_size_that_disagrees_with_the_weights(tmp_path):
    directory = _copy(HF, tmp_path / "bigger")
    with open(os.path.join(directory, "vocab.txt"), "a", encoding="utf-8") as f:
        f.write("extra\n")
    with pytest.raises(CheckpointError, match=r"WordPiece vocabulary .*bigger/vocab.txt has "
                                              r"2121 tokens but .*config.json has "
                                              r"vocab_size=2120"):
        _ = open_checkpoint(directory).tokenizer


def test_bad_vocab_in_a_checkpoint_names_file_and_line(tmp_path):
    directory = _copy(HF, tmp_path / "no_unk")
    path = os.path.join(directory, "vocab.txt")
    lines = open(path, encoding="utf-8").read().split("\n")
    lines[lines.index("[UNK]")] = "[UNK2]"
    open(path, "w", encoding="utf-8").write("\n".join(lines))
    with pytest.raises(VocabFileError, match=r"no_unk/vocab.txt: has no \[UNK\] line"):
        _ = open_checkpoint(directory).tokenizer


def test_convert_keeps_the_wordpiece_vocabulary(tmp_path):
    ours = str(tmp_path / "ours")
    assert convert.main([layouts(tmp_path)["tf1_zh"], ours]) == 0
    assert "vocab.txt" in os.listdir(ours) and "spiece.model" not in os.listdir(ours)
    record = json.load(open(os.path.join(ours, "albert_task.json"), encoding="utf-8"))
    assert (record["tokenizer"], record["tokenize_chinese_chars"]) == ("wordpiece", True)
    hf = str(tmp_path / "hf_out")
    assert convert.main([ours, hf, "--to", "hf"]) == 0
    assert sorted(os.listdir(hf)) == ["config.json", "model.safetensors",
                                      "tokenizer_config.json", "vocab.txt"]
    tokenizer_config = json.load(open(os.path.join(hf, "tokenizer_config.json"),
                                      encoding="utf-8"))
    assert (tokenizer_config["tokenizer_class"], tokenizer_config["do_lower_case"],
            tokenizer_config["strip_accents"]) == ("BertTokenizer", True, True)
    ref = reference()
    for directory in (ours, hf):  # the same numbers after both conversions
        opened = open_checkpoint(directory)
        features = opened.tokenizer.preprocessor(SEQ_LENGTH)(list(ref["texts"]))
        np.testing.assert_allclose(_probabilities(opened.load(), features),
                                   ref["single_probabilities"], atol=ATOL, rtol=0)


def _vocab_replaced(tmp_path, make) -> str:
    """HF's WordPiece directory with its vocab.txt replaced by what `make(path)` puts there."""
    directory = _copy(HF, tmp_path / "odd_vocab", ["config.json", "model.safetensors",
                                                  "tokenizer_config.json"])
    make(os.path.join(directory, "vocab.txt"))
    return directory


@pytest.mark.parametrize("make, words", [
    (os.mkfifo, r"vocab.txt is a FIFO, not a regular file"),
    (os.mkdir, r"vocab.txt is a directory, not a regular file"),
    (lambda path: os.symlink("gone.txt", path),
     r"vocab.txt is a symbolic link to gone.txt, which does not exist"),
], ids=["fifo", "directory", "dangling_link"])
def test_a_vocab_txt_that_is_not_a_file_is_refused_not_taken_as_absent(tmp_path, capsys, make,
                                                                       words):
    """Such a vocab.txt was treated as absent: convert exited 0 with no vocabulary."""
    directory = _vocab_replaced(tmp_path, make)
    with pytest.raises(UserError, match=words):
        _ = open_checkpoint(directory).tokenizer
    out = tmp_path / "out"
    assert convert.main([directory, str(out)]) == 2
    assert re.search(words, capsys.readouterr().err) and not out.exists()


def _with_tokenizer_class(source: str, directory, names: list[str], tokenizer_class: str) -> str:
    directory = _copy(source, directory, names)
    path = os.path.join(directory, "tokenizer_config.json")
    values = json.load(open(path, encoding="utf-8")) if os.path.exists(path) else {}
    values["tokenizer_class"] = tokenizer_class
    json.dump(values, open(path, "w", encoding="utf-8"))
    return directory


def test_a_tokenizer_class_that_names_the_other_vocabulary_is_refused(tmp_path):
    """tokenizer_class AlbertTokenizer beside a vocab.txt alone (or BertTokenizer beside a
    spiece.model alone) was read as a checkpoint without vocabulary."""
    albert = _with_tokenizer_class(HF, tmp_path / "albert", ["config.json", "model.safetensors",
                                                             "vocab.txt"], "AlbertTokenizer")
    with pytest.raises(CheckpointError, match=r"tokenizer_config.json: tokenizer_class="
                                              r"'AlbertTokenizer' needs a spiece.model, but the "
                                              r"directory ships vocab.txt \(the vocabulary of "
                                              r"BertTokenizer, BertTokenizerFast\)"):
        _ = open_checkpoint(albert).tokenizer
    hf_spm = os.path.join(TASK_FIXTURES, "seq_single", "hf")
    bert = _with_tokenizer_class(hf_spm, tmp_path / "bert", os.listdir(hf_spm), "BertTokenizer")
    with pytest.raises(CheckpointError, match=r"'BertTokenizer' needs a vocab.txt, but the "
                                              r"directory ships spiece.model"):
        _ = open_checkpoint(bert).tokenizer
