"""Sentence embeddings: the encoder's `mean_pooled` output, in the SavedModel (a process
without albert_tf) and the .tflite, equals Hugging Face's AlbertModel mean-pooled last_hidden_state
(tests/fixtures/embeddings/, tools/make_embedding_fixtures.py) to
1e-4, from raw text, text pairs and token ids; `albert-tf predict --embeddings` writes them
as .npy."""

from __future__ import annotations

import os

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.serving import export
from albert_tf.serving.client import run as client
from albert_tf.serving.litert import runtime
from albert_tf.serving.signatures.base import strings
from albert_tf.serving.signatures.tasks import mean_pooled
from tests.helpers.fresh_process import call_signatures
from tests.helpers.paths import FIXTURES, TASK_FIXTURES

CHECKPOINT = os.path.join(FIXTURES, "embeddings", "hf")
CLASSIFIER = os.path.join(TASK_FIXTURES, "seq_single", "hf")
ATOL = 1e-4
SEQ = 64


@pytest.fixture(scope="module")
def reference():
    with np.load(os.path.join(FIXTURES, "embeddings", "mean_pooled.npz")) as data:
        return dict(data)


def _ids(reference, prefix=""):
    return {name: reference[prefix + name]
            for name in ("input_word_ids", "input_mask", "input_type_ids")}


def _texts(values):
    return strings([str(v).encode() for v in values])


def test_mean_pooling_counts_only_the_marked_positions():
    sequence = tf.constant(np.arange(2 * 4 * 3, dtype=np.float32).reshape(2, 4, 3))
    mask = tf.constant([[1, 1, 0, 0], [1, 1, 1, 1]])
    got = mean_pooled(sequence, mask).numpy()
    np.testing.assert_allclose(got, [sequence[0, :2].numpy().mean(0),
                                     sequence[1].numpy().mean(0)])
    assert mean_pooled(sequence, tf.zeros([2, 4], tf.int32)).numpy().tolist() == [[0.0] * 3] * 2


@pytest.mark.slow
def test_saved_model_and_tflite_serve_transformers_mean_pooling(reference, tmp_path):
    saved = str(tmp_path / "encoder")
    assert export.main(["--checkpoint", CHECKPOINT, "--output", saved, "--task", "encoder",
                        "--seq-length", str(SEQ)]) == 0
    lite = str(tmp_path / "encoder.tflite")
    assert export.main(["--checkpoint", CHECKPOINT, "--output", lite, "--task", "encoder",
                        "--seq-length", str(SEQ), "--format", "litert"]) == 0
    cases = {
        "serving_default": ({"text": _texts(reference["texts"])}, "mean_pooled"),
        "text_pair": ({"text_a": _texts(reference["texts_a"]),
                       "text_b": _texts(reference["texts_b"])}, "pair_mean_pooled"),
        "token_ids": (_ids(reference), "mean_pooled"),
    }
    served = call_signatures({name: (os.path.join(saved, "1"), name, inputs)
                              for name, (inputs, _) in cases.items()}, tmp_path)
    interpreter = runtime.open_interpreter(lite)
    for name, (inputs, key) in cases.items():
        want = reference[key]
        assert want.shape[1] == 10  # H of the fixture
        np.testing.assert_allclose(served[name]["mean_pooled"], want, atol=ATOL, rtol=0)
        got = runtime.call(interpreter, name, **inputs)
        np.testing.assert_allclose(got["mean_pooled"], want, atol=ATOL, rtol=0)
    # The pair's embeddings are not the single texts': type ids and both segments count.
    assert not np.allclose(reference["pair_mean_pooled"][0], reference["mean_pooled"][0])

    # predict --embeddings: the same rows as .npy, in input order.
    lines = tmp_path / "texts.txt"
    lines.write_text("\n".join(str(t) for t in reference["texts"]) + "\n", encoding="utf-8")
    output = str(tmp_path / "embeddings.npy")
    assert client.main(["--saved-model", saved, "--input", str(lines), "--embeddings", output,
                        "--batch-size", "3"]) == 0
    got = np.load(output)
    assert got.dtype == np.float32 and got.shape == reference["mean_pooled"].shape
    np.testing.assert_allclose(got, reference["mean_pooled"], atol=ATOL, rtol=0)

    # An empty input has no rows to size H by: one line, exit 2, nothing written.
    empty = tmp_path / "empty.txt"
    empty.write_text("", encoding="utf-8")
    none = tmp_path / "none.npy"
    assert client.main(["--saved-model", saved, "--input", str(empty),
                        "--embeddings", str(none)]) == 2
    assert not none.exists()


@pytest.mark.slow
def test_predict_embeddings_refuses_a_signature_without_them(tmp_path, capsys):
    classifier = str(tmp_path / "classifier")
    assert export.main(["--checkpoint", CLASSIFIER, "--output", classifier,
                        "--seq-length", str(SEQ)]) == 0
    lines = tmp_path / "texts.txt"
    lines.write_text("a text\n", encoding="utf-8")
    output = tmp_path / "embeddings.npy"
    assert client.main(["--saved-model", classifier, "--input", str(lines),
                        "--embeddings", str(output)]) == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert error.startswith("albert-tf predict: --embeddings: signature 'serving_default' has "
                            "no mean_pooled output (it has label, label_id, probabilities)")
    assert not output.exists()
