"""AlbertTokenizer (Python, sentencepiece only) against the original ALBERT rules.

The references here are re-derivations of google-research/albert
`tokenization.py` (`preprocess_text`, `encode_pieces`, `_truncate_seq_pair`)
from their published description, applied on top of plain sentencepiece.
The in-graph preprocessor is tested against this tokenizer in
test_tokenizer_graph.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import unicodedata

import pytest
import sentencepiece as spm

from albert_tf.tokenizer.spm import (
    USER_DEFINED_SYMBOLS,
    AlbertTokenizer,
    normalize_text,
    truncate_seq_pair,
)
from tests.helpers.fresh_process import SAFETY_NET_S
from tests.helpers.tokenizer_cases import HARD_CASES, INVALID_UTF8, parity_lines

# ---- independent references ------------------------------------------------------------------

def reference_preprocess(text: str, lower: bool) -> str:
    """The original preprocess_text: whitespace, NFKD minus combining marks, lowercase."""
    words = text.split()
    text = " ".join(words)
    decomposed = unicodedata.normalize("NFKD", text)
    text = "".join(filter(lambda c: unicodedata.combining(c) == 0, decomposed))
    return text.lower() if lower else text


def reference_encode_pieces(sp: spm.SentencePieceProcessor, text: str) -> list[str]:
    """The original encode_pieces, with its Python-2 intent for the leading "▁"."""
    out = []
    for piece in sp.encode_as_pieces(text):
        if not (len(piece) >= 2 and piece.endswith(",") and piece[-2].isdigit()):
            out.append(piece)
            continue
        again = sp.encode_as_pieces(piece[:-1].replace("\u2581", ""))
        if piece[0] != "\u2581" and again and again[0][0] == "\u2581":
            again = again[1:] if len(again[0]) == 1 else [again[0][1:], *again[1:]]
        out += again + [","]
    return out


def reference_truncate(a: list, b: list, max_length: int) -> tuple[list, list]:
    """The original _truncate_seq_pair: pop from the longer list, from B on ties."""
    a, b = list(a), list(b)
    while len(a) + len(b) > max_length:
        (a if len(a) > len(b) else b).pop()
    return a, b


# ---- conventions and loading -----------------------------------------------------------------

def test_special_ids_follow_albert_conventions(spm_model_path):
    tok = AlbertTokenizer(spm_model_path)
    assert (tok.pad_id, tok.unk_id, tok.cls_id, tok.sep_id, tok.mask_id) == (0, 1, 2, 3, 4)
    assert [tok.id_to_piece(i) for i in range(5)] == ["<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]"]
    assert [tok.id_to_piece(i) for i in range(5, 13)] == list(USER_DEFINED_SYMBOLS)
    assert tok.vocab_size == 1000 and tok.sp_model.bos_id() == -1 and tok.sp_model.eos_id() == -1


def test_special_ids_are_looked_up_by_piece_name(tmp_path):
    # Another layout (BOS/EOS present, control symbols in another order): the
    # tokenizer must take the ids from the file, not assume 0..4.
    text = tmp_path / "t.txt"
    text.write_text("\n".join(f"line {i} of some text, words and more words" for i in range(200)))
    prefix = tmp_path / "other"
    spm.SentencePieceTrainer.train(input=str(text), model_prefix=str(prefix), vocab_size=40,
                                   control_symbols=["[MASK]", "[SEP]", "[CLS]", "<pad>"],
                                   minloglevel=2)
    tok = AlbertTokenizer(f"{prefix}.model")
    sp = spm.SentencePieceProcessor(model_file=f"{prefix}.model")
    assert (tok.mask_id, tok.sep_id, tok.cls_id, tok.pad_id) == (
        sp.piece_to_id("[MASK]"), sp.piece_to_id("[SEP]"), sp.piece_to_id("[CLS]"),
        sp.piece_to_id("<pad>"))
    assert tok.cls_id != 2 and tok.encode_pair("line 3", seq_length=8)["input_word_ids"][0] == tok.cls_id


def test_model_without_albert_symbols_is_rejected(tmp_path):
    text = tmp_path / "t.txt"
    text.write_text("\n".join(f"plain sentencepiece model {i}" for i in range(100)))
    spm.SentencePieceTrainer.train(input=str(text), model_prefix=str(tmp_path / "plain"),
                                   vocab_size=30, minloglevel=2)
    with pytest.raises(ValueError, match=r"plain\.model has no '<pad>' piece"):
        AlbertTokenizer(tmp_path / "plain.model")


def test_missing_and_corrupt_model_files(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.model"):
        AlbertTokenizer(tmp_path / "nope.model")
    (tmp_path / "junk.model").write_bytes(b"\x08\x01garbage that is not a model proto" * 3)
    with pytest.raises(ValueError, match=r"junk\.model is not a valid SentencePiece model"):
        AlbertTokenizer(tmp_path / "junk.model")
    (tmp_path / "empty.model").write_bytes(b"")
    with pytest.raises(ValueError, match=r"empty\.model is not a valid SentencePiece model"):
        AlbertTokenizer(tmp_path / "empty.model")


# ---- normalisation ----------------------------------------------------------------------------

@pytest.mark.parametrize("raw, lower, expected", [
    ("  Héllo\tWORLD \n", True, "hello world"),
    ("  Héllo\tWORLD \n", False, "Hello WORLD"),
    ("``quoted''", True, "``quoted''"),  # the original keeps them; Hugging Face writes '"'
    ("ﬁne Ａ１ ½", True, "fine a1 1⁄2"),
    ("ΟΔΟΣ ΣΟΦΟΣ.", True, "οδος σοφος."),  # final sigma, as str.lower
    ("x\u00a0\u3000y\x1cz", True, "x y z"),  # every str.isspace character
    ("a\u200bb", True, "a\u200bb"),  # zero-width space is not whitespace
    ("İ", True, "i"), ("Å", False, "A"),
])
def test_normalize_examples(raw, lower, expected):
    assert normalize_text(raw, do_lower_case=lower) == expected


def test_normalize_keep_accents():
    assert normalize_text("Crème  İ", keep_accents=True) == "crème i\u0307"
    assert normalize_text("Crème  İ", do_lower_case=False, keep_accents=True) == "Crème İ"


def test_normalize_matches_original_on_parity_text(corpus_documents):
    lines = parity_lines(corpus_documents)
    for lower in (True, False):
        assert [normalize_text(t, lower) for t in lines] == [
            reference_preprocess(t, lower) for t in lines]


def test_bytes_are_decoded_with_replacement(spm_model_path):
    tok = AlbertTokenizer(spm_model_path)
    assert tok.encode("Café 1,000".encode()) == tok.encode("Café 1,000")
    for raw in INVALID_UTF8:
        assert tok.normalize(raw) == reference_preprocess(raw.decode("utf-8", "replace"), True)
    # Lone surrogates are the invalid bytes they would encode to.
    assert tok.normalize("a\ud800b") == "a\ufffd\ufffd\ufffdb"
    with pytest.raises(TypeError, match="str or bytes"):
        tok.encode(123)


# ---- segmentation -----------------------------------------------------------------------------

def test_tokenize_equals_reference_and_plain_sentencepiece(spm_model_path, digit_comma_spm_model_path,
                                                            corpus_documents):
    lines = parity_lines(corpus_documents)
    plain_equal = rule_lines = 0
    for path in (spm_model_path, digit_comma_spm_model_path):
        tok = AlbertTokenizer(path)
        sp = spm.SentencePieceProcessor(model_file=path)
        for line in lines:
            normalized = reference_preprocess(line, True)
            pieces = tok.tokenize(normalized)
            assert pieces == reference_encode_pieces(sp, normalized), line
            assert tok.encode(line) == sp.piece_to_id(pieces)
            if pieces == sp.encode_as_pieces(normalized):
                plain_equal += 1
            else:
                rule_lines += 1
    # Already-normalised text gives plain sentencepiece's pieces except where
    # the digit-comma rule applies, which the second model makes frequent.
    assert plain_equal > 0.9 * 2 * len(lines) and rule_lines > 100


def test_digit_comma_rule_examples(digit_comma_spm_model_path):
    tok = AlbertTokenizer(digit_comma_spm_model_path)
    sp = tok.sp_model
    assert "▁1,000,000," in sp.encode_as_pieces("1,000,000,")
    pieces = tok.tokenize("1,000,000,")
    assert pieces[-1] == "," and pieces[:-1] == sp.encode_as_pieces("1,000,000")
    # A piece that continues a word ("item12,") keeps no leading "▁".
    assert "12," in sp.encode_as_pieces("item12,")
    continued = tok.tokenize("item12,")
    assert continued[0] == "▁item" and "".join(continued[1:]) == "12," and "▁" not in continued[1]
    assert tok.split_piece("▁item") == ["▁item"]


def test_decode_skips_special_ids(spm_model_path):
    tok = AlbertTokenizer(spm_model_path)
    packed = tok.encode_pair("The file is opened.", "It returns None.", seq_length=40)
    assert tok.decode(packed["input_word_ids"]) == "the file is opened. it returns none."
    assert tok.decode(tok.encode("The file is opened.")) == "the file is opened."


# ---- packing ----------------------------------------------------------------------------------

def test_pack_layout(spm_model_path):
    tok = AlbertTokenizer(spm_model_path)
    a, b = tok.encode("first segment"), tok.encode("the second one")
    packed = tok.encode_pair("first segment", "the second one", seq_length=len(a) + len(b) + 5)
    assert packed["input_word_ids"] == [2, *a, 3, *b, 3, 0, 0]
    assert packed["input_type_ids"] == [0] * (len(a) + 2) + [1] * (len(b) + 1) + [0, 0]
    assert packed["input_mask"] == [1] * (len(a) + len(b) + 3) + [0, 0]
    single = tok.encode_pair("first segment", seq_length=len(a) + 3)
    assert single == {"input_word_ids": [2, *a, 3, 0], "input_mask": [1] * (len(a) + 2) + [0],
                      "input_type_ids": [0] * (len(a) + 3)}
    assert tok.encode_pair("x", "", seq_length=6)["input_word_ids"][-3:] == [3, 3, 0]


def test_truncation_matches_original():
    for len_a in range(9):
        for len_b in range(9):
            for budget in range(18):
                a, b = list(range(len_a)), list(range(100, 100 + len_b))
                assert truncate_seq_pair(a, b, budget) == reference_truncate(a, b, budget)


def test_encode_pair_truncates(spm_model_path, corpus_documents):
    tok = AlbertTokenizer(spm_model_path)
    text_a, text_b = corpus_documents[0][0], corpus_documents[0][1]
    ids_a, ids_b = reference_truncate(tok.encode(text_a), tok.encode(text_b), 9 - 3)
    packed = tok.encode_pair(text_a, text_b, seq_length=9)
    assert packed["input_word_ids"] == [2, *ids_a, 3, *ids_b, 3]
    assert tok.encode_pair(text_a, seq_length=5)["input_word_ids"] == [2, *tok.encode(text_a)[:3], 3]


@pytest.mark.parametrize("bad", [2, 0, -5])
def test_seq_length_below_three_is_an_error(spm_model_path, bad):
    tok = AlbertTokenizer(spm_model_path)
    with pytest.raises(ValueError, match=rf"seq_length={bad} must be an integer from 3 "):
        tok.encode_pair("a", "b", seq_length=bad)
    with pytest.raises(ValueError, match=r"seq_length=3\.0 must be an integer"):
        tok.encode_pair("a", seq_length=3.0)


# ---- no TensorFlow needed ---------------------------------------------------------------------

_NO_TF_SCRIPT = r"""
import json, sys, types
for name in ("tensorflow", "tensorflow_text", "keras"):
    sys.modules[name] = None  # any import of them now fails
# albert_tf/__init__.py imports the Keras model; load only the tokenizer module.
package = types.ModuleType("albert_tf")
package.__path__ = [sys.argv[2]]
sys.modules["albert_tf"] = package
from albert_tf.tokenizer.spm import AlbertTokenizer
tok = AlbertTokenizer(sys.argv[1])
texts = json.loads(sys.stdin.read())
ids = [tok.encode_pair(t, t[::-1], seq_length=24)["input_word_ids"] for t in texts]
try:
    from albert_tf.tokenizer import AlbertPreprocessor
    graph = "importable"
except ImportError:
    graph = "needs tensorflow"
print(json.dumps({"ids": ids, "graph": graph}))
"""


def test_tokenizer_works_without_tensorflow(spm_model_path):
    import albert_tf.tokenizer.spm

    texts = HARD_CASES[:40]
    package_dir = os.path.dirname(os.path.dirname(albert_tf.tokenizer.spm.__file__))
    result = subprocess.run([sys.executable, "-c", _NO_TF_SCRIPT, spm_model_path, package_dir],
                            input=json.dumps(texts), capture_output=True, text=True, timeout=SAFETY_NET_S)
    assert result.returncode == 0, result.stderr[-2000:]
    out = json.loads(result.stdout)
    tok = AlbertTokenizer(spm_model_path)
    assert out["ids"] == [tok.encode_pair(t, t[::-1], seq_length=24)["input_word_ids"] for t in texts]
    assert out["graph"] == "needs tensorflow"
