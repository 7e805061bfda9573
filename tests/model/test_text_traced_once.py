"""Raw text's preprocessing is traced once per model and input form, then reused: the
second `predict` on text runs the traced graph (the preprocessor's Python `call` does
not run again) and gives the same outputs as the first and as token ids."""

from __future__ import annotations

import os

import numpy as np
import pytest

from albert_tf import AlbertSequenceClassifier
from albert_tf.tokenizer.preprocessor import AlbertPreprocessor
from tests.helpers.paths import TASK_FIXTURES

CLASSIFIER = os.path.join(TASK_FIXTURES, "seq_single", "hf")
TEXTS = ["A gripping, funny film.", "Dull and far too long.", "The cast is wonderful!",
         "I left before the end.", "Numbers like 1,234 and accents: café.", ""]


@pytest.fixture
def traces(monkeypatch) -> list:
    """One entry per run of `AlbertPreprocessor.call`'s Python body (a trace, or an eager call)."""
    runs: list = []
    original = AlbertPreprocessor.call

    def counted(self, inputs):
        runs.append(self.seq_length)
        return original(self, inputs)

    monkeypatch.setattr(AlbertPreprocessor, "call", counted)
    return runs


def test_a_second_predict_on_text_reuses_the_trace(traces):
    model = AlbertSequenceClassifier.from_preset(CLASSIFIER)
    first = model.predict(TEXTS, verbose=0)
    assert len(traces) == 1
    predict_function = model.predict_function  # Keras' own, traced on the first call
    again = model.predict(TEXTS, verbose=0)
    fewer = model.predict(TEXTS[:2], verbose=0)  # another row count: the same trace
    assert len(traces) == 1 and model.predict_function is predict_function
    np.testing.assert_array_equal(again, first)
    np.testing.assert_allclose(fewer, first[:2], atol=1e-6, rtol=0)  # another batch shape
    ids = {name: value.numpy() for name, value in model.preprocessor(TEXTS).items()}
    np.testing.assert_allclose(model.predict(ids, verbose=0), first, atol=1e-6, rtol=0)
    assert len(traces) == 2  # the eager call above, not predict
    np.testing.assert_allclose(model.predict(TEXTS * 7, batch_size=4, verbose=0),
                               np.concatenate([first] * 7), atol=1e-6, rtol=0)  # 11 batches
    np.testing.assert_allclose(model.predict(TEXTS, verbose=1), first, atol=1e-6, rtol=0)


def test_pairs_have_their_own_trace_and_fit_on_text_still_trains(traces):
    model = AlbertSequenceClassifier.from_preset(CLASSIFIER)
    pairs = (TEXTS[:3], TEXTS[3:])
    first = model.predict(pairs, verbose=0)
    model.predict(TEXTS[:3], verbose=0)
    np.testing.assert_array_equal(model.predict(pairs, verbose=0), first)
    assert len(traces) == 2  # one per form
    before = [w.numpy().copy() for w in model.trainable_weights]
    history = model.fit(TEXTS, [0, 1, 2, 0, 1, 2], batch_size=4, epochs=2, verbose=0)
    assert len(traces) == 2 and np.all(np.isfinite(history.history["loss"]))
    assert any(not np.array_equal(b, w.numpy()) for b, w in zip(before, model.trainable_weights))


def test_the_tokenizer_is_one_function_every_text_graph_calls(monkeypatch):
    """In traced graphs the tokenizer's ops are one function of the layer: two text graphs
    (one segment and a pair) trace it once and call it, and answer as the eager layer."""
    import tensorflow as tf

    from albert_tf.tokenizer.traced import graph_function

    bodies: list = []
    original = AlbertPreprocessor._tokenize

    def counted(self, texts):
        bodies.append(texts.shape.as_list())
        return original(self, texts)

    monkeypatch.setattr(AlbertPreprocessor, "_tokenize", counted)
    pre = AlbertPreprocessor(os.path.join(CLASSIFIER, "spiece.model"), 16)
    spec = tf.TensorSpec([None], tf.string)
    one = graph_function(lambda a: pre(a), input_signature=[spec])
    pair = graph_function(lambda a, b: pre((a, b)), input_signature=[spec, spec])
    texts = tf.constant(TEXTS)
    got = {"one": one(texts), "pair": pair(texts, texts[::-1])}
    assert bodies == [[None]]  # traced once, at the first graph
    for graph in (one, pair):
        ops = {op.type for op in graph.get_concrete_function().graph.get_operations()}
        assert "StatefulPartitionedCall" in ops or "PartitionedCall" in ops
        assert not any("Sentencepiece" in op for op in ops)  # the tokenizer's ops are inside
    eager = {"one": pre(TEXTS), "pair": pre((TEXTS, TEXTS[::-1]))}
    assert len(bodies) == 3  # eager calls run the body itself
    for form in got:
        for name, value in eager[form].items():
            np.testing.assert_array_equal(got[form][name].numpy(), value.numpy())
