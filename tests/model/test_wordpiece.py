"""WordPieceTokenizer (Python) against transformers' BertTokenizer, and vocab.txt reading.

The ids come from tests/fixtures/wordpiece/parity.json.gz, written by
tools/make_wordpiece_fixtures.py with transformers' two BERT tokenizers over the parity
lines (stored in the fixture) in four forms. The original's rules are the Python ones:

* Hugging Face's Python `BertTokenizerLegacy` adds NFC before splitting words; on a
  line NFC changes we must equal it on the NFC form of the line (and only there may we
  differ on the line as given).
* Its Rust `BertTokenizer` lower-cases without Unicode's Final_Sigma rule and keeps
  unassigned / private-use characters the original drops as "control"; on every other
  line we must equal it.
"""

from __future__ import annotations

import gzip
import json
import os
import unicodedata

import pytest

from albert_tf.tokenizer.wordpiece import (
    MAX_WORD_CHARS,
    SPECIAL_TOKENS,
    VocabFileError,
    WordPieceTokenizer,
    read_vocab,
)
from tests.helpers.paths import FIXTURES
from tests.helpers.tokenizer_cases import HARD_CASES, WORDPIECE_CASES

FIXTURE = os.path.join(FIXTURES, "wordpiece")
VOCAB = os.path.join(FIXTURE, "vocab.txt")


@pytest.fixture(scope="module")
def parity():
    with gzip.open(os.path.join(FIXTURE, "parity.json.gz"), "rt", encoding="utf-8") as f:
        return json.load(f)


def _rust_differs(line: str, options: dict) -> bool:
    """Where Rust's BertTokenizer departs from the original's Python rules."""
    sigma = options.get("do_lower_case", True) and "\u03a3" in line
    return sigma or any(unicodedata.category(c) in ("Cn", "Co") for c in line)


def test_fixture_covers_the_parity_cases(parity):
    lines = set(parity["lines"])
    assert set(HARD_CASES) <= lines and set(WORDPIECE_CASES) <= lines
    assert len(parity["lines"]) > 1300 and len(parity["forms"]) == 4


@pytest.mark.parametrize("form", ["uncased", "cased", "uncased_accents", "uncased_no_cjk_split"])
def test_ids_equal_transformers(parity, form):
    entry = parity["forms"][form]
    tok = WordPieceTokenizer(VOCAB, **entry["options"])
    nfc_lines = rust_lines = 0
    for line, legacy, bert in zip(parity["lines"], entry["legacy"], entry["bert"]):
        ours = tok.encode(line)
        nfc = unicodedata.normalize("NFC", line)
        if nfc == line:
            assert ours == legacy, line
        else:
            nfc_lines += 1
            assert tok.encode(nfc) == legacy, line
        if _rust_differs(line, entry["options"]):
            rust_lines += 1
        else:
            assert ours == bert, line
    # The exemptions stay exemptions: a handful of lines, not a blanket.
    assert nfc_lines < 25 and rust_lines < 25


def test_unknown_and_long_words():
    tok = WordPieceTokenizer(VOCAB)
    unk = tok.unk_id
    assert tok.encode("a" * MAX_WORD_CHARS) != [unk]
    assert tok.encode("a" * (MAX_WORD_CHARS + 1)) == [unk]
    assert tok.tokenize("北京") == ["北", "京"]  # each ideograph a word
    joined = WordPieceTokenizer(VOCAB, tokenize_chinese_chars=False)
    assert joined.tokenize("北京") == ["北", "##京"]
    assert tok.tokenize("x\u0000y\ufffdz") == tok.tokenize("xyz")


def test_pack_and_special_ids():
    tok = WordPieceTokenizer(VOCAB)
    assert [tok.id_to_piece(i) for i in (tok.pad_id, tok.unk_id, tok.cls_id, tok.sep_id,
                                         tok.mask_id)] == list(SPECIAL_TOKENS)
    packed = tok.encode_pair("我爱北京", "天安门", seq_length=8)
    ids = tok.encode("我爱北京"), tok.encode("天安门")
    assert packed["input_word_ids"] == [tok.cls_id, *ids[0][:3], tok.sep_id, *ids[1][:2],
                                        tok.sep_id]
    assert packed["input_type_ids"] == [0] * 5 + [1] * 3
    assert tok.decode(tok.encode("hello world")) == "hello world"
    assert tok.encode("Hello".encode()) == tok.encode("Hello")


def _write(tmp_path, data: bytes):
    path = tmp_path / "vocab.txt"
    path.write_bytes(data)
    return str(path)


GOOD = "\n".join(SPECIAL_TOKENS + ("a", "##b")) + "\n"


@pytest.mark.parametrize("data, message", [
    (b"\xef\xbb\xbf" + GOOD.encode(), r"vocab.txt:1: starts with a UTF-8 byte-order mark"),
    (GOOD.replace("a\n", "a\n\n").encode(), r"vocab.txt:7: empty line"),
    (GOOD.replace("a\n", "a\n##b\n").encode(), r"vocab.txt:8: token '##b' repeats line 7"),
    (GOOD.replace("[UNK]\n", "").encode(), r"vocab.txt: has no \[UNK\] line"),
    (GOOD.replace("[CLS]\n", "").replace("[MASK]\n", "").encode(),
     r"vocab.txt: has no \[CLS\], \[MASK\] line"),
    (b"", r"vocab.txt: the vocabulary is empty"),
    (GOOD.encode() + b"caf\xe9\n", r"vocab.txt:8: byte 0xe9"),
])
def test_bad_vocab_files(tmp_path, data, message):
    with pytest.raises(VocabFileError, match=message):
        read_vocab(_write(tmp_path, data))


def test_vocab_lines(tmp_path):
    assert read_vocab(_write(tmp_path, GOOD.replace("\n", "\r\n").encode()))[-1] == "##b"
    assert read_vocab(_write(tmp_path, GOOD.rstrip("\n").encode()))[-1] == "##b"
    with pytest.raises(FileNotFoundError, match="not found"):
        read_vocab(str(tmp_path / "missing.txt"))
