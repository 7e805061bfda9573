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

import pytest

from albert_tf.tokenizer.wordpiece import (
    MAX_WORD_CHARS,
    SPECIAL_TOKENS,
    VocabFileError,
    WordPieceTokenizer,
    read_vocab,
)
from tests.helpers.tokenizer_cases import HARD_CASES, WORDPIECE_CASES
from tests.helpers.wordpiece import FORMS, WORDPIECE_VOCAB, check_ids, check_offsets, parity

VOCAB = WORDPIECE_VOCAB


def test_fixture_covers_the_parity_cases():
    lines = set(parity()["lines"])
    assert set(HARD_CASES) <= lines and set(WORDPIECE_CASES) <= lines
    assert len(parity()["lines"]) > 1300 and tuple(parity()["forms"]) == FORMS


@pytest.mark.parametrize("form", FORMS)
def test_ids_equal_transformers(form):
    tok = WordPieceTokenizer(VOCAB, **parity()["forms"][form]["options"])
    check_ids(lambda lines: [tok.encode(line) for line in lines], form)


@pytest.mark.parametrize("form", FORMS)
def test_offsets_equal_bert_tokenizer_fast(form):
    tok = WordPieceTokenizer(VOCAB, **parity()["forms"][form]["options"])
    check_offsets(lambda lines: [tok.encode_with_offsets(line) for line in lines], form)


def test_offsets_point_into_the_original_text():
    tok = WordPieceTokenizer(VOCAB)
    text = "  Café\tÜBER İstanbul 北京, naïve \u0000x" + "a" * 101
    ids, offsets = tok.encode_with_offsets(text)
    assert ids == tok.encode(text)
    spelled = [text[start:end] for start, end in offsets]
    # Each piece covers the original letters it came from: upper case, accents, U+0130
    # (lower-cased to "i" U+0307), a control character dropped, and a word over 100
    # characters (or one the vocabulary cannot cover: "Café" here) one [UNK], whole.
    assert spelled == ["Café", "Ü", "BER", "İs", "ta", "n", "b", "u", "l", "北", "京", ",",
                       "n", "a", "ï", "ve", "x" + "a" * 101]
    assert [tok.id_to_piece(i) for i in ids][:3] == ["[UNK]", "u", "##ber"]
    batch = tok([text, "北京"], return_offsets_mapping=True, padding="max_length",
                max_length=8)
    assert batch["offset_mapping"][1][:4] == [(0, 0), (0, 1), (1, 2), (0, 0)]
    assert batch["offset_mapping"][0][1:7] == offsets[:6]


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
    assert tok.encode(b"Hello") == tok.encode("Hello")


def _write(tmp_path, data: bytes):
    path = tmp_path / "vocab.txt"
    path.write_bytes(data)
    return str(path)


GOOD = "\n".join(SPECIAL_TOKENS + ("a", "##b")) + "\n"


@pytest.mark.parametrize("data, message", [
    (b"\xef\xbb\xbf" + GOOD.encode(), r"vocab.txt:1: starts with a UTF-8 byte-order mark"),
    (GOOD.replace("[UNK]\n", "").encode(), r"vocab.txt: has no \[UNK\] line"),
    (GOOD.replace("[CLS]\n", "").replace("[MASK]\n", "").encode(),
     r"vocab.txt: has no \[CLS\], \[MASK\] line"),
    (b"", r"vocab.txt: the vocabulary is empty"),
    (GOOD.encode() + b"caf\xe9\n", r"vocab.txt:8: byte 0xe9"),
])
def test_bad_vocab_files(tmp_path, data, message):
    with pytest.raises(VocabFileError, match=message):
        read_vocab(_write(tmp_path, data))


def test_vocab_lines_are_read_as_the_original_reads_them(tmp_path, caplog):
    # "\n" alone ends a line; whatever else a line holds is its token.
    odd = ["\u2028", "\u2029", "\x85", "\x0c", "\x0b", " ", "a b", "\x1c"]
    tokens = read_vocab(_write(tmp_path, (GOOD + "\n".join(odd) + "\n").encode()))
    assert tokens == list(SPECIAL_TOKENS) + ["a", "##b"] + odd
    assert not caplog.records
    # An empty line takes its id; a repeated token: the later line wins it (warned once).
    data = GOOD.replace("a\n", "a\n\n##b\n")
    tokens = read_vocab(_write(tmp_path, data.encode()))
    assert tokens == list(SPECIAL_TOKENS) + ["a", "", "##b", "##b"]
    (warning,) = caplog.records
    assert "vocab.txt: 1 empty line(s) (7)" in warning.getMessage()
    assert "1 repeated token(s) ('##b' on lines 8 and 9)" in warning.getMessage()
    tok = WordPieceTokenizer(_write(tmp_path, data.encode()))
    assert tok.vocab["##b"] == 8 and tok.encode("ab") == [5, 8]
    assert len(set(tok.reachable_tokens)) == tok.vocab_size == 9
    assert tok.reachable_tokens[:6] == tok.tokens[:6] and tok.reachable_tokens[8] == "##b"


def test_vocab_lines(tmp_path):
    assert read_vocab(_write(tmp_path, GOOD.replace("\n", "\r\n").encode()))[-1] == "##b"
    assert read_vocab(_write(tmp_path, GOOD.rstrip("\n").encode()))[-1] == "##b"
    with pytest.raises(FileNotFoundError, match="not found"):
        read_vocab(str(tmp_path / "missing.txt"))
