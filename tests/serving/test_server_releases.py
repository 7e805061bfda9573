"""The table of tensorflow/serving releases and the tensorflow-text ops they link."""

from __future__ import annotations

import json
import os

import pytest

from albert_tf import (
    AlbertConfig,
    AlbertPretrainer,
    AlbertSequenceClassifier,
    AlbertSpanExtractor,
    AlbertTokenClassifier,
    save_checkpoint,
)
from albert_tf.serving import export
from albert_tf.serving import server_releases as sr
from albert_tf.serving.provenance import PROVENANCE_FILE
from albert_tf.tokenizer.spm import AlbertTokenizer
from albert_tf.tokenizer.wordpiece import read_vocab
from tests.helpers.wordpiece import WORDPIECE_VOCAB


def test_the_oldest_release_that_links_every_op():
    assert sr.oldest_release([]) == "2.10.0"
    assert sr.oldest_release(["SentencepieceOp", "NormalizeUTF8"]) == "2.10.0"
    assert sr.oldest_release(["SentencepieceOp", "TFText>FastSentencepieceTokenize"]) == "2.12.0"
    # serving#2267: 2.12-2.19 link tensorflow-text 2.12.1's ops_lib, without the trimmers.
    assert sr.oldest_release(["TFText>FastSentencepieceTokenize", "TFText>RoundRobinTrim"]) \
        == "2.20.0"
    assert sr.oldest_release(["TFText>SomethingNew"]) is None
    # A bfloat16 export needs the releases whose TensorFlow rounds its matmuls as ours
    # (serving-check: 2.16 differs by 2e-3, 2.17 on alike), whatever its ops allow.
    assert sr.oldest_release(["SentencepieceOp"], "bfloat16") == "2.17.0"
    assert sr.oldest_release(["TFText>RoundRobinTrim"], "bfloat16") == "2.20.0"
    assert sr.oldest_release(["SentencepieceOp"], "float32") == "2.10.0"
    assert sr.oldest_release(["TFText>SomethingNew"], "bfloat16") is None
    assert sr.image("2.20.0") == "tensorflow/serving:2.20.0"
    # Every release's pin has a row of ops, and the rows only grow.
    rows = [sr.OPS_LIB[text] for _, text in sr.SERVING_RELEASES]
    assert all(a <= b for a, b in zip(rows, rows[1:]))


def test_no_release_links_an_op_the_table_lacks_and_the_export_says_which():
    assert sr.unlinked_ops(["NormalizeUTF8", "TFText>SomethingNew"]) == ["TFText>SomethingNew"]
    assert sr.unlinked_ops(["FastWordpieceTokenizeWithOffsets", "RegexSplitWithOffsets"]) == []
    # fast_wordpiece_tokenizer_cc and regex_split_ops_cc are in ops_lib since 2.7.3.
    assert sr.oldest_release(["FastWordpieceTokenizeWithOffsets", "NormalizeUTF8"]) == "2.10.0"


def test_python_packages_follow_the_release_and_refuse_what_is_not_one():
    assert sr.python_packages("2.20.0") == ("tensorflow==2.20.*", "tensorflow-text==2.20.*")
    assert sr.python_packages("2.12.1") == ("tensorflow==2.12.*", "tensorflow-text==2.12.*")
    for bad, words in (("2.20", "is not a tensorflow/serving release"), ("latest", "X.Y.Z"),
                       ("2.9.0", "starts at 2.10.0")):
        with pytest.raises(ValueError, match=words):
            sr.python_packages(bad)


def _tiny_model(task: str, vocab_size: int):
    """(model, label names) of `task` at a tiny size: the graph's ops, not its answers,
    are under test."""
    config = AlbertConfig(vocab_size=vocab_size, embedding_size=8, hidden_size=12,
                          num_hidden_layers=1, num_attention_heads=3, intermediate_size=20,
                          max_position_embeddings=32)
    if task == "span":
        return AlbertSpanExtractor(config), None
    if task == "token_classification":
        return AlbertTokenClassifier(config, 3), ["O", "B-PER", "I-PER"]
    if task == "classification":
        return AlbertSequenceClassifier(config, 2), ["no", "yes"]
    return AlbertPretrainer(config), None


@pytest.mark.slow
@pytest.mark.parametrize("kind,task", [
    ("wordpiece", "encoder"), ("wordpiece", "classification"), ("wordpiece", "span"),
    ("wordpiece", "token_classification"), ("sentencepiece", "pretraining"),
    ("sentencepiece", "classification"), ("sentencepiece", "span"),
    ("sentencepiece", "token_classification")])
def test_every_export_kind_names_its_oldest_release(tmp_path, spm_model_path, kind, task):
    vocab = WORDPIECE_VOCAB if kind == "wordpiece" else spm_model_path
    size = (len(read_vocab(WORDPIECE_VOCAB)) if kind == "wordpiece"
            else AlbertTokenizer(spm_model_path).vocab_size)
    model, labels = _tiny_model(task, size)
    start = save_checkpoint(model, str(tmp_path / "start"), spm_model=vocab, seq_length=16,
                            label_names=labels)
    output = str(tmp_path / "served")
    assert export.main(["--checkpoint", start, "--output", output, "--task", task]) == 0
    with open(os.path.join(output, "1", PROVENANCE_FILE), encoding="utf-8") as f:
        record = json.load(f)
    ops = set(record["custom_ops"])
    assert record["tokenizer"]["kind"] == kind
    assert ("FastWordpieceTokenizeWithOffsets" in ops) == (kind == "wordpiece"), ops
    assert ops <= sr.OPS_LIB[sr.SERVING_RELEASES[-1][1]], ops
    assert record["ops_no_release_links"] == []
    assert record["oldest_tensorflow_serving"] == sr.oldest_release(ops) is not None
