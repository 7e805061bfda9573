"""A `.keras` file whose assets disagree with its model is refused naming the asset.

A garbage spiece.model, a task record naming 5 classes over a 2-class head, and a
record whose seq_length is past the position table: each refused on load with a message
naming the asset and field (never Keras' temporary directory), where they loaded
silently or failed with "expected str, bytes or os.PathLike object, not NoneType".
The untouched file still loads (the correct acceptance).
"""

from __future__ import annotations

import json
import os
import zipfile

import keras
import pytest

from albert_tf import AlbertConfig, AlbertSequenceClassifier
from albert_tf.tokenizer.preprocessor import AlbertPreprocessor
from tests.helpers.paths import FIXTURES, TASK_FIXTURES

OTHER_SPM = os.path.join(TASK_FIXTURES, "seq_single", "hf", "spiece.model")  # 94 pieces
WORDPIECE_VOCAB = os.path.join(FIXTURES, "wordpiece", "vocab.txt")          # 2120 tokens


@pytest.fixture(scope="module")
def saved(tmp_path_factory, spm_model_path):
    pre = AlbertPreprocessor(spm_model_path, 16)
    config = AlbertConfig(vocab_size=pre.tokenizer.vocab_size, embedding_size=8, hidden_size=12,
                          num_hidden_layers=1, num_attention_heads=3, intermediate_size=20,
                          max_position_embeddings=64)
    path = tmp_path_factory.mktemp("keras_assets") / "good.keras"
    AlbertSequenceClassifier(config, num_classes=2, preprocessor=pre).save(path)
    return path


def _edited(saved, tmp_path, suffix, change):
    out = tmp_path / f"bad{suffix}.keras"
    with zipfile.ZipFile(saved) as src, zipfile.ZipFile(out, "w") as dst:
        names = src.namelist()
        assert any(n.endswith(suffix) for n in names), names  # the edit must hit something
        for name in names:
            data = src.read(name)
            dst.writestr(name, change(data) if name.endswith(suffix) else data)
    return out


def _record(**fields):
    return lambda data: json.dumps({**json.loads(data), **fields}).encode()


@pytest.mark.parametrize("suffix, change, words", [
    ("spiece.model", lambda data: b"not a model" * 8,
     "the .keras file's spiece.model asset cannot be read as the model's vocabulary: "
     "spiece.model is "
     "not a valid SentencePiece model"),
    ("albert_task.json", _record(num_classes=5, label_names=list("abcde")),
     "the .keras file's albert_task.json says num_classes=5, the model's head has "
     "num_classes=2"),
    ("albert_task.json", _record(seq_length=100),
     "seq_length=100 must be an integer from 3 ([CLS] [SEP] [SEP]) to "
     "max_position_embeddings=64 (the .keras file's albert_task.json)"),
    ("albert_task.json", lambda data: b"{",
     "the .keras file's albert_task.json:1:2: invalid JSON"),
    ("spiece.model", lambda data: open(OTHER_SPM, "rb").read(),
     "the .keras file's spiece.model asset cannot be read as the model's vocabulary: "
     "SentencePiece model "
     "spiece.model has 94 pieces but the .keras file's model config has vocab_size=1000"),
], ids=["garbage_spm", "five_classes_over_two", "seq_length_past_positions", "truncated_record",
        "spm_of_another_size"])
def test_an_asset_that_disagrees_with_its_model_is_refused(saved, tmp_path, suffix, change,
                                                           words):
    bad = _edited(saved, tmp_path, suffix, change)
    with pytest.raises(ValueError) as e:
        keras.saving.load_model(bad)
    message = str(e.value)
    assert words in message, message
    assert "/tmp" not in message.split("List of objects")[0].replace(str(tmp_path), "")
    assert "NoneType" not in message


def test_the_untouched_file_loads(saved):
    model = keras.saving.load_model(saved)
    assert model.num_classes == 2 and model.task_record.num_classes == 2


def test_a_wordpiece_asset_of_another_size_is_refused(tmp_path):
    """A vocab.txt asset shorter than the embedding table loaded, and predict failed later
    inside TensorFlow."""
    pre = AlbertPreprocessor(WORDPIECE_VOCAB, 16)
    config = AlbertConfig(vocab_size=pre.tokenizer.vocab_size, embedding_size=8, hidden_size=12,
                          num_hidden_layers=1, num_attention_heads=3, intermediate_size=20,
                          max_position_embeddings=64)
    good = tmp_path / "good.keras"
    AlbertSequenceClassifier(config, num_classes=2, preprocessor=pre).save(good)
    keras.saving.load_model(good)  # the untouched file loads
    bad = _edited(good, tmp_path, "vocab.txt", lambda data: b"\n".join(data.split(b"\n")[:-11]))
    with pytest.raises(ValueError) as e:
        keras.saving.load_model(bad)
    assert ("the .keras file's vocab.txt asset cannot be read as the model's vocabulary: "
            "WordPiece vocabulary "
            "vocab.txt has 2110 tokens but the .keras file's model config has "
            "vocab_size=2120") in str(e.value), str(e.value)
