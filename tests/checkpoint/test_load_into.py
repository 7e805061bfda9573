"""`from_preset` builds the requested model once and places a tensor index into it.

The fixtures (tests/fixtures/, made by tools/make_reference_fixtures.py) are Hugging
Face and TF1 checkpoints with Hugging Face's outputs: a model of the checkpoint's own
task must give them; a model of another task takes the encoder (and a head the
checkpoint's model has under the same name) and keeps the rest initialised, saying so.
"""

from __future__ import annotations

import logging
import os
import shutil

import keras
import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

from albert_tf.checkpoint import CheckpointError
from albert_tf.models import (
    AlbertMaskedLM,
    AlbertPretrainer,
    AlbertSequenceClassifier,
    AlbertSequenceRegressor,
    AlbertSpanExtractor,
)
from albert_tf.task_model import AlbertTaskModel
from tests.checkpoint.test_checkpoint_tasks import TOLERANCE, max_delta
from tests.helpers.paths import FIXTURES, TASK_FIXTURES

PRETRAINED_HF = os.path.join(FIXTURES, "shared", "hf")  # AlbertForPreTraining


@pytest.fixture
def builds(monkeypatch) -> list[str]:
    """The class of every task model constructed while the test runs."""
    built, construct = [], AlbertTaskModel.__init__

    def counted(self, *args, **kwargs):
        built.append(type(self).__name__)
        construct(self, *args, **kwargs)

    monkeypatch.setattr(AlbertTaskModel, "__init__", counted)
    return built


@pytest.mark.parametrize("name,fmt,cls", [
    ("seq_single", "hf", AlbertSequenceClassifier), ("seq_single", "tf1", AlbertSequenceClassifier),
    ("qa", "hf", AlbertSpanExtractor), ("mlm", "hf", AlbertMaskedLM)])
def test_the_checkpoints_own_task_is_built_once_and_gives_the_reference(name, fmt, cls, builds,
                                                                        caplog):
    with caplog.at_level(logging.WARNING):
        model = cls.from_preset(os.path.join(TASK_FIXTURES, name, fmt))
    assert builds == [cls.__name__]  # the checkpoint's own model is not built beside it
    assert "that head keeps" not in caplog.text  # (QA's pooler: unused, and absent, as HF's)
    for key, delta in max_delta(model, name).items():
        assert delta <= TOLERANCE, f"{name}/{fmt} {key}: max |delta| = {delta:.3g}"


def test_the_pretrainers_masked_lm_head_goes_to_a_masked_lm(builds, caplog):
    with caplog.at_level(logging.WARNING):
        model = AlbertMaskedLM.from_preset(PRETRAINED_HF)
    assert builds == ["AlbertMaskedLM"] and "random initialisation" not in caplog.text
    with np.load(os.path.join(FIXTURES, "shared", "reference.npz")) as ref:
        inputs = {k: ref[k] for k in ("input_word_ids", "input_mask", "input_type_ids",
                                      "masked_lm_positions")}
        out = model(inputs)["mlm_logits"]
        assert np.abs(np.asarray(out) - ref["mlm_logits"]).max() <= TOLERANCE


def test_a_head_of_another_task_keeps_its_initialisation_and_the_encoder_loads(builds, caplog):
    path = os.path.join(TASK_FIXTURES, "seq_single", "hf")
    with caplog.at_level(logging.WARNING):
        model = AlbertSequenceRegressor.from_preset(path)
    assert builds == ["AlbertSequenceRegressor"]
    assert f"{path} has no regressor weights; that head keeps its random initialisation" \
        in caplog.text
    classifier = AlbertSequenceClassifier.from_preset(path)  # checked against HF above
    for ours, theirs in zip(model.encoder.weights, classifier.encoder.weights, strict=True):
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy(), err_msg=ours.path)


def test_a_head_of_other_shapes_and_a_missing_pooler_are_named(caplog):
    seq = os.path.join(TASK_FIXTURES, "seq_single", "hf")
    with caplog.at_level(logging.WARNING):
        wider = AlbertSequenceClassifier.from_preset(seq, num_classes=5)
    assert wider.num_classes == 5
    assert f"{seq} has classifier weights of other shapes (classifier.weight (3, 10), " \
           "classifier.bias (3,)); that head keeps its random initialisation" in caplog.text
    qa = os.path.join(TASK_FIXTURES, "qa", "hf")  # Hugging Face's QA model has no pooler
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        AlbertSequenceClassifier.from_preset(qa, num_classes=2)
    assert f"{qa} has no encoder.pooler weights; the pooler keeps its random initialisation" \
        in caplog.text
    assert f"{qa} has no classifier weights" in caplog.text


def test_the_pretrainer_from_a_masked_lm_lacks_only_its_sentence_order_head(caplog):
    path = os.path.join(TASK_FIXTURES, "mlm", "hf")
    with caplog.at_level(logging.WARNING):
        AlbertPretrainer.from_preset(path)
    assert f"{path} has no sop_head weights" in caplog.text
    assert "mlm_head weights" not in caplog.text


def test_the_checkpoints_own_head_missing_a_tensor_is_refused(tmp_path):
    broken = tmp_path / "broken"
    shutil.copytree(os.path.join(TASK_FIXTURES, "seq_single", "hf"), broken)
    tensors = load_file(broken / "model.safetensors")
    del tensors["classifier.bias"]
    save_file(tensors, broken / "model.safetensors")
    with pytest.raises(CheckpointError, match="missing: classifier.bias"):
        AlbertSequenceClassifier.from_preset(broken)
    # A model of another task does not take that head: the encoder loads.
    AlbertSequenceRegressor.from_preset(broken)


def test_the_encoder_alone_is_built_and_gives_the_reference(builds, caplog):
    from albert_tf import AlbertEncoder

    with caplog.at_level(logging.WARNING):
        encoder = AlbertEncoder.from_preset(PRETRAINED_HF)
    assert builds == []  # no task model: the pretrainer the checkpoint holds is not built
    assert "random initialisation" not in caplog.text
    with np.load(os.path.join(FIXTURES, "shared", "reference.npz")) as ref:
        out = encoder({k: ref[k] for k in ("input_word_ids", "input_mask", "input_type_ids")})
        for key in ("sequence_output", "pooled_output"):
            assert np.abs(np.asarray(out[key]) - ref[key]).max() <= TOLERANCE, key
    qa = os.path.join(TASK_FIXTURES, "qa", "hf")  # no pooler: the encoder's keeps its own
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        AlbertEncoder.from_preset(qa)
    assert f"{qa} has no encoder.pooler weights; the pooler keeps its random initialisation" \
        in caplog.text


def test_every_head_layer_is_declared_in_head_layers():
    # load_into places or warns of the heads head_layers names; an undeclared head would
    # be taken only from a checkpoint of the same class.
    from albert_tf import AlbertConfig
    from albert_tf.models import TASK_MODELS

    config = AlbertConfig(vocab_size=37, embedding_size=8, hidden_size=12, num_hidden_layers=2,
                          num_attention_heads=3, intermediate_size=20,
                          max_position_embeddings=16)
    head_args = {"classification": {"num_classes": 3}, "token_classification": {"num_classes": 5},
                 "span": {"answerability": True}, "span_beam": {"start_n_top": 2, "end_n_top": 3}}
    for task, cls in TASK_MODELS.items():
        model = cls(config, compile=False, **head_args.get(task, {}))
        layers = {attribute: layer.name for attribute, layer in vars(model).items()
                  if isinstance(layer, keras.layers.Layer) and layer is not model.encoder
                  and not isinstance(layer, keras.metrics.Metric)}
        assert layers == dict(cls.head_layers), task


def test_a_keras_hub_preset_is_placed_into_the_requested_model(builds, caplog):
    from tests.checkpoint.test_kerashub import ATOL, model_inputs, preset, reference, softmax

    with caplog.at_level(logging.WARNING):
        classifier = AlbertSequenceClassifier.from_preset(preset("classifier"))
        masked = AlbertMaskedLM.from_preset(preset("masked_lm"))
    assert builds == ["AlbertSequenceClassifier", "AlbertMaskedLM"]
    assert "random initialisation" not in caplog.text
    ref = reference("classifier")
    np.testing.assert_allclose(softmax(classifier(model_inputs(ref))), ref["probabilities"],
                               atol=ATOL, rtol=0)
    ref = reference("masked_lm")
    out = masked(model_inputs(ref, "masked_lm_positions"))["mlm_logits"]
    np.testing.assert_allclose(out, ref["mlm_logits"], atol=ATOL, rtol=0)
