"""AlbertPreprocessor on a WordPiece vocab.txt: transformers' ids in the graph.

The same reference and rules as test_wordpiece.py (tests/helpers/wordpiece.py), through
the in-graph ops (FastWordpieceTokenizer after BERT's normalisation on code points),
plus packing, pairs, invalid UTF-8, tf.function and the `.keras` asset.
"""

from __future__ import annotations

import os
import zipfile

import keras
import numpy as np
import pytest
import tensorflow as tf

from albert_tf.tokenizer.preprocessor import AlbertPreprocessor
from albert_tf.tokenizer.wordpiece import WordPieceTokenizer
from tests.helpers.tokenizer_cases import INVALID_UTF8, WORDPIECE_CASES
from tests.helpers.wordpiece import FORMS, WORDPIECE_VOCAB, check_ids, check_offsets, parity


def _layer(seq_length: int = 32, **options) -> AlbertPreprocessor:
    # WordPieceTokenizer's strip_accents=None is keep_accents=not do_lower_case.
    lower = options.get("do_lower_case", True)
    strip = options.get("strip_accents")
    keep = (not lower) if strip is None else not strip
    return AlbertPreprocessor(WORDPIECE_VOCAB, seq_length, lower, keep,
                              options.get("tokenize_chinese_chars", True))


@pytest.mark.parametrize("form", FORMS)
def test_graph_ids_equal_transformers(form):
    layer = _layer(**parity()["forms"][form]["options"])
    assert layer.kind == "wordpiece"
    check_ids(lambda lines: layer.tokenize(tf.constant(lines)).to_list(), form)


def _graph_offsets(layer):
    """`encode_with_offsets` through the graph: byte ranges turned into characters."""
    run = tf.function(layer.wordpiece.tokenize_with_offsets)

    def encode(lines):
        ids, starts, ends = run(tf.constant(lines))
        out = []
        for line, row, begin, end in zip(lines, ids.to_list(), starts.to_list(), ends.to_list()):
            data = line.encode("utf-8")
            def chars(b, data=data):
                return len(data[:b].decode("utf-8"))

            out.append((row, [(chars(s), chars(e)) for s, e in zip(begin, end)]))
        return out
    return encode


@pytest.mark.parametrize("form", FORMS)
def test_graph_offsets_equal_bert_tokenizer_fast(form):
    options = parity()["forms"][form]["options"]
    encode = _graph_offsets(_layer(**options))
    tok = WordPieceTokenizer(WORDPIECE_VOCAB, **options)
    check_offsets(encode, form)
    # and the Python tokenizer's, where BertTokenizerFast's ids differ too
    lines = parity()["lines"]
    assert encode(lines) == [tok.encode_with_offsets(line) for line in lines]


def test_pairs_and_packing_equal_the_python_tokenizer():
    layer = _layer(seq_length=24)
    tok = WordPieceTokenizer(WORDPIECE_VOCAB)
    a, b = WORDPIECE_CASES[:29], WORDPIECE_CASES[29:58]
    got = layer((tf.constant(a), tf.constant(b)))
    single = layer(tf.constant(a))
    for i, (text_a, text_b) in enumerate(zip(a, b)):
        want = tok.encode_pair(text_a, text_b, seq_length=24)
        for name, values in want.items():
            assert got[name][i].numpy().tolist() == values, (name, text_a, text_b)
        assert single["input_word_ids"][i].numpy().tolist() == \
            tok.encode_pair(text_a, seq_length=24)["input_word_ids"]


def test_pairs_of_different_batch_sizes_are_refused():
    layer = _layer()
    with pytest.raises(tf.errors.InvalidArgumentError, match="different batch sizes"):
        layer((tf.constant(["a", "b", "c"]), tf.constant(["d"])))


def test_invalid_utf8_and_tf_function():
    layer = _layer()
    tok = layer.tokenizer
    got = layer.tokenize(tf.constant(INVALID_UTF8)).to_list()
    assert got == [tok.encode(raw) for raw in INVALID_UTF8]
    traced = tf.function(lambda t: layer(t)["input_word_ids"],
                         input_signature=[tf.TensorSpec([None], tf.string)])
    texts = WORDPIECE_CASES[:8]
    np.testing.assert_array_equal(traced(tf.constant(texts)), layer(tf.constant(texts))[
        "input_word_ids"])


def test_keras_file_carries_vocab_txt(tmp_path):
    copy = tmp_path / "vocab.txt"
    copy.write_bytes(open(WORDPIECE_VOCAB, "rb").read())
    layer = AlbertPreprocessor(str(copy), 16, do_lower_case=False, keep_accents=True)
    inputs = keras.Input(shape=(), dtype="string")
    model = keras.Model(inputs, layer(inputs))
    path = str(tmp_path / "pre.keras")
    model.save(path)
    assert any(n.endswith("/vocab.txt") for n in zipfile.ZipFile(path).namelist())
    os.remove(copy)  # the asset gives the vocabulary, not the path
    loaded = keras.saving.load_model(path)
    texts = tf.constant(WORDPIECE_CASES[:6])
    np.testing.assert_array_equal(loaded(texts)["input_word_ids"],
                                  model(texts)["input_word_ids"])


def _vocab_with(tmp_path, row: int, token: str) -> str:
    tokens = open(WORDPIECE_VOCAB, encoding="utf-8").read().split("\n")
    tokens[row] = token
    path = tmp_path / "vocab.txt"
    path.write_text("\n".join(tokens), encoding="utf-8")
    return str(path)


def test_token_longer_than_a_word_is_unreachable_in_the_graph(tmp_path):
    """A 300-character token: BERT reads any word over 100 characters as [UNK], so no
    text reaches it; the graph's op (which takes at most 256 bytes a token) is built
    without it and gives the Python tokenizer's ids."""
    vocab = _vocab_with(tmp_path, 200, "x" * 300)
    layer = AlbertPreprocessor(vocab, 32, True, False, True)
    python = WordPieceTokenizer(vocab)
    lines = ["x" * 300, "x" * 100 + " the", "the " + "x" * 101]
    assert layer.tokenize(tf.constant(lines)).to_list() == [python.encode(t) for t in lines]
    assert python.encode("x" * 300) == [python.unk_id]


def test_reachable_token_over_the_graph_ops_bytes_is_refused_naming_the_line(tmp_path):
    """70 emoji (280 bytes) make a word BERT can reach, which the graph's op cannot hold:
    one line naming the file and line, the token echoed capped."""
    from albert_tf.tokenizer.vocab_txt import VocabFileError

    vocab = _vocab_with(tmp_path, 200, "\U0001F600" * 70)
    with pytest.raises(VocabFileError, match=r"vocab\.txt:201: token .* is 280 bytes"):
        AlbertPreprocessor(vocab, 32, True, False, True)
