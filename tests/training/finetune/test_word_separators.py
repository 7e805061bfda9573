"""One notion of where a WordPiece word ends, on every Unicode whitespace and control
character: the Python tokenizer, the graph's, the served entities' words and what
`finetune --task ner` reads from a CoNLL or JSONL file all split "Paris{c}Lima" as
BERT's own code does (the oracle below, restated from google-research/bert's
tokenization.py: control characters dropped, whitespace -> " ", then `str.split`).

Before, "\\x0b", "\\x0c", "\\x1c"-"\\x1f" and "\\x85" joined the words for the tokenizers
(BERT drops them) but split them for fine-tuning (`str.isspace`), and `str.splitlines`
cut a CoNLL line at them (and at U+2028 / U+2029).
"""

from __future__ import annotations

import json
import sys
import unicodedata

import pytest
import tensorflow as tf

from albert_tf.tokenizer import entity_graph
from albert_tf.tokenizer.spm import AlbertTokenizer
from albert_tf.tokenizer.wordpiece import WordPieceTokenizer, is_word_separator
from albert_tf.tokenizer.wordpiece_graph import WordPieceGraph
from albert_tf.training.finetune import conll
from albert_tf.training.finetune.examples import DataError
from tests.helpers.wordpiece import WORDPIECE_VOCAB

# Every whitespace (str.isspace, Z*) and control (Cc, Cf) character.
CHARS = [chr(cp) for cp in range(sys.maxunicode + 1) if not 0xD800 <= cp <= 0xDFFF
         and (chr(cp).isspace() or unicodedata.category(chr(cp)) in ("Cc", "Cf", "Zs", "Zl",
                                                                    "Zp"))]


def _bert_is_whitespace(char):  # tokenization.py's _is_whitespace
    if char in (" ", "\t", "\n", "\r"):
        return True
    return unicodedata.category(char) == "Zs"


def _bert_is_control(char):  # tokenization.py's _is_control
    if char in ("\t", "\n", "\r"):
        return False
    return unicodedata.category(char) in ("Cc", "Cf")


def bert_words(text: str) -> list[str]:
    """BasicTokenizer._clean_text, then whitespace_tokenize (google-research/bert)."""
    out = []
    for char in text:
        if ord(char) in (0, 0xFFFD) or _bert_is_control(char):
            continue
        out.append(" " if _bert_is_whitespace(char) else char)
    return "".join(out).strip().split()


def _texts():
    return [f"Paris{c}Lima" for c in CHARS]


def test_the_character_set_covers_the_cases_of_the_report():
    assert len(CHARS) > 200
    for char in "\x0b\x0c\x1c\x1d\x1e\x1f\x85\u2028\u2029\u3000\xa0\u200b\ufeff":
        assert char in CHARS


def test_python_graph_and_served_entity_words_split_as_bert_does():
    tok = WordPieceTokenizer(WORDPIECE_VOCAB)
    texts = _texts()
    graph = WordPieceGraph(tok).tokenize(tf.constant(texts)).to_list()
    served = entity_graph.words(tf.constant(texts), wordpiece=True)["start_char"].row_lengths()
    for char, text, ids, count in zip(CHARS, texts, graph, served.numpy()):
        words = bert_words(text)
        assert len(words) == (2 if is_word_separator(char) else 1), repr(char)
        assert tok.clean(text).split() == words, repr(char)
        assert ids == tok.encode(text), repr(char)
        assert count == len(words), repr(char)  # the served entities' words
    assert tok.tokenize("Paris\x0bLima\x0cOslo") == tok.tokenize("ParisLimaOslo")


@pytest.mark.parametrize("layout", ["spaces", "tabs", "jsonl"])
def test_ner_files_are_read_word_for_word_as_the_served_model_reads_text(tmp_path, layout):
    tok = WordPieceTokenizer(WORDPIECE_VOCAB)
    for i, char in enumerate(c for c in CHARS if c not in "\n\t"):
        text = f"Paris{char}Lima"
        joined = len(bert_words(text)) == 1
        if layout == "jsonl":
            path = tmp_path / f"{i}.jsonl"
            path.write_text(json.dumps({"tokens": [text, "x"], "tags": ["B-LOC", "O"]},
                                       ensure_ascii=False) + "\n", encoding="utf-8")
        else:
            sep = "\t" if layout == "tabs" else " "
            path = tmp_path / f"{i}.txt"
            path.write_text(f"{text}{sep}B-LOC\nx{sep}O\n", encoding="utf-8", newline="")
        if not joined and layout != "spaces":
            with pytest.raises(DataError, match="whitespace"):
                conll.read_tagged(str(path), tok.is_word_separator)
            continue
        if not joined:  # "Paris Lima B-LOC": three columns against the next line's two
            with pytest.raises(DataError, match="columns"):
                conll.read_tagged(str(path), tok.is_word_separator)
            continue
        data = conll.read_tagged(str(path), tok.is_word_separator)
        assert [s.words for s in data.sentences] == [[text, "x"]], repr(char)
        assert data.sentences[0].tags == ["B-LOC", "O"]


def test_a_sentencepiece_models_words_end_at_every_isspace_character(tmp_path):
    """SentencePiece's normalizer makes every str.isspace character a space: its rule."""
    path = tmp_path / "eng.txt"
    path.write_text("Paris\x0bLima B-LOC O\nx y O O\n", encoding="utf-8")
    data = conll.read_tagged(str(path), AlbertTokenizer.is_word_separator)
    assert data.sentences[0].words == ["Paris", "x"]


def test_a_crlf_file_and_a_line_separator_inside_a_line(tmp_path):
    path = tmp_path / "eng.txt"
    path.write_bytes("a\u2028b B-LOC\r\nc d O\r\n\r\ne f O\r\n".encode())
    data = conll.read_tagged(str(path), WordPieceTokenizer.is_word_separator)
    assert [s.words for s in data.sentences] == [["a", "c"], ["e"]]  # U+2028 splits words
    assert [s.tags for s in data.sentences] == [["B-LOC", "O"], ["O"]]
