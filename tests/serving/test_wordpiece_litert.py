"""WordPiece in a LiteRT file: the in-file tokenizer against transformers' BertTokenizer on
the parity lines, and a classifier exported from the Chinese ALBERT layouts whose
probabilities on mixed-script text and pairs equal transformers' (tests/fixtures/wordpiece)."""

from __future__ import annotations

import os
import unicodedata

import numpy as np
import pytest
import tensorflow as tf

from albert_tf import AlbertConfig, AlbertPretrainer, save_checkpoint
from albert_tf.serving import export
from albert_tf.serving.litert import runtime
from albert_tf.serving.litert.text_graph import LiteText
from albert_tf.serving.litert.wordpiece_model import LiteWordPieceError, normalizer_model
from albert_tf.tokenizer.wordpiece import MAX_WORD_CHARS, WordPieceTokenizer, read_vocab
from tests.checkpoint.test_wordpiece_checkpoints import layouts, reference
from tests.helpers.wordpiece import WORDPIECE_VOCAB, parity

ATOL = 1e-4  # the bound; float64 HF -> float32 LiteRT
SIGMA = "\u03a3"


def _lite_ids(tok: WordPieceTokenizer, lines: list[str]) -> list[list[int]]:
    values, splits = LiteText(tok, 32).tokenize(tf.constant(lines))
    values, splits = values.numpy().tolist(), splits.numpy().tolist()
    return [values[a:b] for a, b in zip(splits[:-1], splits[1:])]


@pytest.mark.parametrize("form", ["uncased", "cased", "uncased_accents"])
def test_litert_tokenizer_equals_bert_tokenizer_but_two_known_departures(form):
    data = parity()
    entry = data["forms"][form]
    tok = WordPieceTokenizer(WORDPIECE_VOCAB, **entry["options"])
    lines = data["lines"]
    nfc = [unicodedata.normalize("NFC", line) for line in lines]
    got, got_nfc = _lite_ids(tok, lines), _lite_ids(tok, nfc)
    differ = []
    for i, line in enumerate(lines):
        # BertTokenizer (the legacy one) composes its input first: compare on NFC there.
        if (got[i] if nfc[i] == line else got_nfc[i]) != entry["legacy"][i]:
            differ.append(line)
    # The two departures (wordpiece_model's docstring): str.lower's final sigma, and a
    # word of at most 100 characters but over 100 UTF-8 bytes.
    lower = entry["options"].get("do_lower_case", True)

    def known(line: str) -> bool:
        return (lower and SIGMA in line) or any(
            len(word) <= MAX_WORD_CHARS < len(word.encode()) for word in tok.basic_tokenize(line))

    assert all(known(line) for line in differ), differ[:3]
    assert len(differ) <= sum(known(line) for line in lines) < 40
    print(f"{form}: {len(lines) - len(differ)} / {len(lines)} lines equal")


def test_a_model_that_keeps_cjk_ideographs_whole_is_refused():
    tok = WordPieceTokenizer(WORDPIECE_VOCAB, tokenize_chinese_chars=False)
    with pytest.raises(LiteWordPieceError, match="tokenize_chinese_chars"):
        normalizer_model(tok)


@pytest.mark.slow
def test_litert_classifier_equals_transformers_on_mixed_script_text_and_pairs(tmp_path):
    ref = reference()
    found = layouts(tmp_path)
    for name in ("hf", "hf_vocab_only", "tf1_zh"):
        output = str(tmp_path / f"{name}.tflite")
        assert export.main(["--checkpoint", found[name], "--output", output,
                            "--format", "litert", "--seq-length", "32"]) == 0
        interpreter = runtime.open_interpreter(output)
        single = runtime.call(interpreter, "serving_default",
                              text=runtime.strings(list(ref["texts"])))
        pair = runtime.call(interpreter, "text_pair", text_a=runtime.strings(list(ref["texts"])),
                            text_b=runtime.strings(list(ref["texts_b"])))
        np.testing.assert_allclose(single["probabilities"], ref["single_probabilities"],
                                   atol=ATOL, rtol=0)
        np.testing.assert_allclose(pair["probabilities"], ref["pair_probabilities"],
                                   atol=ATOL, rtol=0)
        assert os.path.getsize(output) > 0


def test_fill_mask_of_a_wordpiece_model_is_refused_in_one_line(tmp_path, capsys):
    config = AlbertConfig(vocab_size=len(read_vocab(WORDPIECE_VOCAB)), embedding_size=8,
                          hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                          intermediate_size=16, max_position_embeddings=32)
    checkpoint = save_checkpoint(AlbertPretrainer(config), str(tmp_path / "pretrained"),
                                 spm_model=WORDPIECE_VOCAB)
    output = tmp_path / "model.tflite"
    assert export.main(["--checkpoint", checkpoint, "--output", str(output), "--format", "litert"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "[MASK]" in err, err
    assert not output.exists()
