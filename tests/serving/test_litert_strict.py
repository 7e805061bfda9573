"""A .tflite file refuses what the SavedModel refuses: rows and shapes that do not fit
together, text of another rank, and token ids outside the vocabulary (negative ones too,
in both formats).

Each LiteRT case is run twice: through LiteRT's own interpreter (the in-graph guard
fails the invoke; a runtime without our helper) and through `runtime.call` (one line
naming the signature and the cause). The SavedModel's token_ids is checked on the
serving module in this process.
"""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

from albert_tf import AlbertConfig, AlbertMultipleChoice, AlbertSequenceClassifier
from albert_tf.checkpoint import task_record_of
from albert_tf.serving.export import build_module
from albert_tf.serving.litert import convert, runtime
from albert_tf.tokenizer.preprocessor import AlbertPreprocessor
from albert_tf.tokenizer.spm import AlbertTokenizer

pytestmark = pytest.mark.slow  # two LiteRT conversions with their parity gates

SEQ = 24


def _config(vocab_size):
    return AlbertConfig(vocab_size=vocab_size, embedding_size=8, hidden_size=12,
                        num_hidden_layers=1, num_attention_heads=3, intermediate_size=20,
                        max_position_embeddings=64)


@pytest.fixture(scope="module")
def files(tmp_path_factory, spm_model_path):
    keras.utils.set_random_seed(1)
    tok = AlbertTokenizer(spm_model_path)
    root = tmp_path_factory.mktemp("strict")
    classifier = AlbertSequenceClassifier(_config(tok.vocab_size), 2)
    choice = AlbertMultipleChoice(_config(tok.vocab_size))
    paths = {}
    for name, model in (("classifier", classifier), ("choice", choice)):
        paths[name] = str(root / f"{name}.tflite")
        convert.write_litert(model, tok, task_record_of(model), paths[name], model.task, SEQ)
    return paths, classifier, tok


def _ids(shape_ids, shape_mask=None, value=3):
    ids = np.full(shape_ids, value, np.int32)
    mask = np.ones(shape_mask or shape_ids, np.int32)
    return {"input_word_ids": ids, "input_mask": mask, "input_type_ids": np.zeros_like(mask)}


S = runtime.strings
CASES = [  # (file, signature, inputs, what runtime.call says)
    ("classifier", "text_pair", {"text_a": S(["a", "b", "c"]), "text_b": S(["d"])},
     "text_pair: the inputs disagree on the batch size (text_a has 3, text_b has 1 rows)"),
    ("classifier", "serving_default", {"text": S([["a", "b"], ["c", "d"]])},
     "serving_default: text has rank 2 but the signature takes rank 1"),
    ("classifier", "token_ids", _ids([2, 7], [2, 5]),
     "token_ids: input_word_ids has shape [2, 7] but input_mask has shape [2, 5]"),
    ("classifier", "token_ids", _ids([2, 5], value=-2),
     "token_ids: input_word_ids holds -2; ids are never negative"),
    ("classifier", "token_ids", _ids([2, 5], value=10_000),
     "token_ids: the request does not fit the signature (a token id outside the vocabulary"),
    ("choice", "serving_default", {"context": S(["a", "b"]), "options": S([["x", "y"]] * 3)},
     "serving_default: the inputs disagree on the batch size (context has 2, options has 3"),
]


@pytest.mark.parametrize("file, signature, inputs, message", CASES,
                         ids=[f"{c[1]}-{i}" for i, c in enumerate(CASES)])
def test_litert_refuses_what_the_saved_model_refuses(files, file, signature, inputs, message):
    paths, _, _ = files
    raw = runtime.open_interpreter(paths[file]).get_signature_runner(signature)
    if not (file == "classifier" and signature == "serving_default"):
        with pytest.raises((RuntimeError, ValueError)):  # the graph alone refuses it
            raw(**inputs)
    with pytest.raises(runtime.LiteRequestError) as caught:
        runtime.call(runtime.open_interpreter(paths[file]), signature, **inputs)
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_litert_still_answers_what_fits(files):
    paths, classifier, tok = files
    interpreter = runtime.open_interpreter(paths["classifier"])
    rows = [tok.encode_pair(t, None, SEQ) for t in ["a cat", "the dog sat"]]
    features = {k: np.array([r[k] for r in rows], np.int32) for k in rows[0]}
    logits = classifier(features)
    logits = logits["logits"] if isinstance(logits, dict) else logits  # either convention
    want = tf.nn.softmax(logits).numpy()
    got = runtime.call(interpreter, "token_ids", **features)["probabilities"]
    np.testing.assert_allclose(got, want, atol=1e-5)
    got = runtime.call(interpreter, "text_pair", text_a=S(["a cat", "x"]),
                       text_b=S(["y", "z"]))["probabilities"]
    assert got.shape == (2, 2)


@pytest.mark.parametrize("value, shown", [(-2, "from -2 to 3"), (10_000, "from 3 to 10000")])
def test_saved_model_token_ids_refuse_ids_outside_the_vocabulary(files, spm_model_path, value,
                                                                 shown):
    _, classifier, tok = files
    module = build_module(classifier, AlbertPreprocessor(spm_model_path, SEQ))
    token_ids = module.signatures()["token_ids"]
    inputs = _ids([2, 5], value=3)
    inputs["input_word_ids"][1, 2] = value
    with pytest.raises(tf.errors.InvalidArgumentError) as caught:
        token_ids(**{k: tf.constant(v) for k, v in inputs.items()})
    assert f"token_ids: input_word_ids holds ids {shown}" in str(caught.value)
    assert f"outside [0, {tok.vocab_size})" in str(caught.value)
    good = _ids([2, 5], value=3)
    assert token_ids(**{k: tf.constant(v) for k, v in good.items()})
