"""The real 21,128-line Chinese vocab.txt (tests/data/real/chinese_vocab; line 344 is U+2028):
read as the original reads it, and tokenized in Python, in the graph and in the LiteRT
tokenizer as transformers' BertTokenizer tokenizes it (tools/make_real_vocab_fixtures.py),
on ordinary Chinese lines and on every line of the file read as text."""

from __future__ import annotations

import gzip
import json
import os

import pytest
import tensorflow as tf

from albert_tf.tokenizer.wordpiece import SPECIAL_TOKENS, WordPieceTokenizer, read_vocab
from albert_tf.tokenizer.wordpiece_graph import WordPieceGraph
from tests.helpers.paths import FIXTURES, REAL_CHINESE_VOCAB


def _reference() -> tuple[list[str], list[list[int]]]:
    with gzip.open(os.path.join(FIXTURES, "chinese_vocab", "ids.json.gz"), "rt",
                   encoding="utf-8") as f:
        data = json.load(f)
    return data["lines"], data["ids"]





def test_the_real_vocab_is_read_line_by_line(caplog):
    tokens = read_vocab(REAL_CHINESE_VOCAB)
    assert len(tokens) == 21128 and tokens[343] == "\u2028"
    assert [tokens.index(t) for t in SPECIAL_TOKENS] == [0, 100, 101, 102, 103]
    assert len(set(tokens)) == len(tokens) and not caplog.records  # nothing to warn about
    tok = WordPieceTokenizer(REAL_CHINESE_VOCAB)
    assert tok.reachable_tokens == tokens and tok.vocab["\u2028"] == 343


def test_python_ids_equal_bert_tokenizer_on_every_line():
    lines, ids = _reference()
    tok = WordPieceTokenizer(REAL_CHINESE_VOCAB)
    assert len(lines) == 30 + 21128
    differ = [line for line, want in zip(lines, ids) if tok.encode(line) != want]
    assert not differ, differ[:5]


def test_graph_ids_equal_bert_tokenizer_on_every_line():
    lines, ids = _reference()
    graph = WordPieceGraph(WordPieceTokenizer(REAL_CHINESE_VOCAB))
    got = graph.tokenize(tf.constant(lines)).to_list()
    differ = [line for line, a, b in zip(lines, got, ids) if a != b]
    assert not differ, differ[:5]


@pytest.mark.parametrize("lines", [["\u2028"], ["[PAD]", "##的", "\u2028", "a", "a"]])
def test_rows_no_text_can_produce_are_kept_for_their_ids(tmp_path, lines):
    # An empty line and a repeated token keep their ids; the graph's op gets distinct
    # tokens, and the ids it gives equal Python's.
    body = list(SPECIAL_TOKENS) + ["的", "##的", ""] + lines + ["的"]
    path = tmp_path / "vocab.txt"
    path.write_text("".join(t + "\n" for t in body), encoding="utf-8")
    tok = WordPieceTokenizer(str(path))
    assert tok.vocab_size == len(body) and tok.vocab["的"] == len(body) - 1
    texts = ["的的", "的\u2028的", "a的 [PAD]"]
    got = WordPieceGraph(tok).tokenize(tf.constant(texts)).to_list()
    assert got == [tok.encode(t) for t in texts]
    assert got[0] == [len(body) - 1] * 2  # each ideograph a word: the later 的 line
