"""A tokenizer.json in the graph (`json_graph`): the Python tokenizer's ids, transformers'
packed rows, and the file carried as a `.keras` asset."""

from __future__ import annotations

import os

import numpy as np
import pytest

from albert_tf.tokenizer.kinds import python_tokenizer
from albert_tf.tokenizer.preprocessor import AlbertPreprocessor
from tests.model.test_tokenizer_json import FIXTURES, reference  # noqa: F401 (a fixture)

# The one line the graph tokenizes otherwise: a word that is a lone "▁" typed in the text
# (two "▁" pieces in the graph, one in Python and transformers; json_graph's docstring).
LONE_MARK = "[CLS] [SEP] [MASK] <pad> <unk> ▁ ▁▁ ▁x"


@pytest.mark.parametrize("name", ["albert", "bert"])
def test_graph_ids_equal_the_python_tokenizer(reference, name):  # noqa: F811
    path = os.path.join(FIXTURES, name, "tokenizer.json")
    tok, pre = python_tokenizer(path), AlbertPreprocessor(path, 512)
    lines = reference["lines"]
    got = pre.tokenize(lines).to_list()
    differ = [line for line, ids in zip(lines, got) if ids != tok.encode(line)]
    assert differ == ([LONE_MARK] if name == "albert" else [])


@pytest.mark.parametrize("name", ["albert", "bert"])
def test_graph_packs_as_transformers(reference, name):  # noqa: F811
    expected = reference[name]
    pre = AlbertPreprocessor(os.path.join(FIXTURES, name, "tokenizer.json"),
                             expected["seq_length"])
    rows = pre(reference["lines"][:reference["ordinary"]])["input_word_ids"].numpy()
    np.testing.assert_array_equal(rows, np.array(expected["packed"]))


def test_the_file_travels_as_the_keras_asset(tmp_path):
    path = os.path.join(FIXTURES, "albert", "tokenizer.json")
    pre = AlbertPreprocessor(path, 16)
    assert pre.vocabulary_name == "tokenizer.json" and pre.kind == "sentencepiece"
    pre.save_assets(str(tmp_path))
    assert os.listdir(tmp_path) == ["tokenizer.json"]
    again = AlbertPreprocessor.from_config(pre.get_config())
    again.spm_model_path = str(tmp_path / "gone.json")
    again.load_assets(str(tmp_path))
    text = ["It's a lower-cased word (in brackets)."]
    np.testing.assert_array_equal(again(text)["input_word_ids"], pre(text)["input_word_ids"])


def test_a_cased_file_in_the_graph_equals_python(reference):  # noqa: F811
    path = os.path.join(FIXTURES, "variants", "cased_accents.json")
    tok, pre = python_tokenizer(path), AlbertPreprocessor(path, 512)
    lines = reference["lines"]
    got = pre.tokenize(lines).to_list()
    assert [line for line, ids in zip(lines, got) if ids != tok.encode(line)] == [LONE_MARK]


@pytest.mark.parametrize("name", ["v4", "first"])
def test_pre_tokenizers_the_graph_does_not_apply_are_one_line(name):
    from albert_tf.tokenizer.tokenizer_json import TokenizerJsonError

    path = os.path.join(FIXTURES, "variants", name + ".json")
    with pytest.raises(TokenizerJsonError) as caught:
        AlbertPreprocessor(path, 16)
    assert "\n" not in str(caught.value) and path in str(caught.value)
    assert "Metaspace" in str(caught.value)


def test_a_task_model_keras_file_carries_the_tokenizer_json(tmp_path):
    import shutil

    import keras

    from albert_tf import AlbertSequenceClassifier

    source = tmp_path / "source"
    shutil.copytree(os.path.join(FIXTURES, "albert"), source)
    model = AlbertSequenceClassifier.from_preset(str(source), seq_length=32)
    texts = ["It's a lower-cased word (in brackets).", "我爱北京天安门。"]
    before = model.predict(texts, verbose=0)
    model.save(str(tmp_path / "model.keras"))
    shutil.rmtree(source)  # the file alone: the tokenizer.json travels as its asset
    again = keras.saving.load_model(str(tmp_path / "model.keras"))
    assert again.preprocessor.vocabulary_name == "tokenizer.json"
    np.testing.assert_array_equal(again.predict(texts, verbose=0), before)
