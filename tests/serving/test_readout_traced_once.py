"""A served task's model is traced once per export: `serving_default`, `text_pair` and
`token_ids` call one graph function of the module (`TextTaskModule._readout`), so the
SavedModel holds the model's graph once, and the three answer alike."""

from __future__ import annotations

import os

import numpy as np
import tensorflow as tf
from tensorflow.core.protobuf import saved_model_pb2

from albert_tf.serving import export
from albert_tf.serving.signatures.tasks import ClassifierModule
from tests.helpers.paths import TASK_FIXTURES

CLASSIFIER = os.path.join(TASK_FIXTURES, "seq_single", "hf")
TEXTS = ["A gripping, funny film.", "Dull and far too long.", "", "Numbers like 1,234: café."]
MODEL_OPS = {"MatMul", "BatchMatMulV2", "Einsum", "_MklMatMul", "_FusedMatMul"}


def test_the_three_signatures_call_one_traced_model(tmp_path, monkeypatch):
    bodies: list = []
    original = ClassifierModule.readout

    def counted(self, features):
        bodies.append(sorted(features))
        return original(self, features)

    monkeypatch.setattr(ClassifierModule, "readout", counted)
    out = str(tmp_path / "model")
    assert export.main(["--checkpoint", CLASSIFIER, "--output", out]) == 0
    assert bodies == [["input_mask", "input_type_ids", "input_word_ids"]]  # one trace

    proto = saved_model_pb2.SavedModel()
    with open(os.path.join(out, "1", "saved_model.pb"), "rb") as f:
        proto.ParseFromString(f.read())
    library = proto.meta_graphs[0].graph_def.library.function
    with_model = [f.signature.name for f in library
                  if any(node.op in MODEL_OPS for node in f.node_def)]
    assert len(with_model) == 1, with_model  # the model's matrix products, written once

    served = tf.saved_model.load(os.path.join(out, "1")).signatures
    text = served["serving_default"](text=tf.constant(TEXTS))["probabilities"].numpy()
    pair = served["text_pair"](text_a=tf.constant(TEXTS), text_b=tf.constant(TEXTS))
    from albert_tf.tokenizer.preprocessor import AlbertPreprocessor

    features = AlbertPreprocessor(os.path.join(CLASSIFIER, "spiece.model"), 128)(TEXTS)
    ids = served["token_ids"](**features)["probabilities"].numpy()
    np.testing.assert_allclose(ids, text, atol=1e-6, rtol=0)
    assert pair["probabilities"].shape == text.shape and np.all(np.isfinite(pair["probabilities"]))
