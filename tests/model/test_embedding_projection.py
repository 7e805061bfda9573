"""`embedding_projection_position`: google-research's projection after the embedding sum
("after_sum") and brightmart/albert_zh's before it ("before_sum"), and brightmart's
config files (tests/data/real/brightmart_albert_zh)."""

from __future__ import annotations

import glob
import json
import math
import os

import numpy as np
import pytest

from albert_tf import AlbertConfig
from albert_tf.config import ConfigError
from albert_tf.embedding import AlbertEmbedding
from albert_tf.encoder import AlbertEncoder
from albert_tf.heads import MaskedLMHead
from albert_tf.models import AlbertMaskedLM, AlbertPretrainer, AlbertSequenceClassifier
from tests.helpers import brightmart
from tests.helpers.model_harness import (
    check_serialization,
    count_params,
    encoder_inputs,
    pretrainer_inputs,
    tiny_config,
)

BEFORE = "before_sum"


def test_config_field_round_trips_and_is_validated(tmp_path):
    config = tiny_config(embedding_projection_position=BEFORE)
    path = tmp_path / "albert_config.json"
    config.to_json_file(path)
    assert json.loads(path.read_text())["embedding_projection_position"] == BEFORE
    assert AlbertConfig.from_json_file(path) == config
    assert AlbertConfig().embedding_projection_position == "after_sum"
    path.write_text(json.dumps({**config.to_dict(), "embedding_projection_position": "early"}))
    with pytest.raises(ConfigError) as e:
        AlbertConfig.from_json_file(path)
    assert str(e.value) == ("embedding_projection_position='early' is not one of after_sum, "
                            f"before_sum (in {path})")


def test_before_sum_weights_have_brightmarts_shapes():
    config = tiny_config(embedding_projection_position=BEFORE)
    encoder = AlbertEncoder(config)
    e, h = config.embedding_size, config.hidden_size
    shapes = {w.path.split("/", 1)[1]: tuple(w.shape) for w in encoder.embeddings.weights}
    assert shapes == {
        "embeddings/word_embeddings/embeddings": (config.vocab_size, e),
        "embeddings/word_projection/kernel": (e, h),  # no bias
        "embeddings/position_embeddings/embeddings": (config.max_position_embeddings, h),
        "embeddings/token_type_embeddings/embeddings": (config.type_vocab_size, h),
        "embeddings/layer_norm/gamma": (h,), "embeddings/layer_norm/beta": (h,)}
    assert encoder.embedding_projection is None
    assert count_params(encoder) == config.encoder_parameters()
    pretrainer = AlbertPretrainer(config)
    assert tuple(pretrainer.mlm_head.dense.kernel.shape) == (h, h)  # transform at width H


def test_before_sum_projects_even_when_e_equals_h():
    config = tiny_config(embedding_size=12, embedding_projection_position=BEFORE)
    encoder = AlbertEncoder(config)
    assert tuple(encoder.embeddings.word_projection.kernel.shape) == (12, 12)
    assert count_params(encoder) == config.encoder_parameters()


def test_parameter_count_is_the_real_albert_tiny_variable_list():
    """brightmart's albert_config_tiny.json in its layout allocates exactly the real
    albert_tiny checkpoint's bert/ tensors (4,175,152), and the pretrainer its cls/ ones."""
    config = AlbertConfig.from_dict(brightmart.config_dict(real=True)).replace(
        embedding_projection_position=BEFORE)
    shapes = brightmart.real_shapes()
    encoder_part = sum(math.prod(s) for n, s in shapes.items() if n.startswith("bert/"))
    assert config.encoder_parameters() == encoder_part == 4_175_152
    pretrainer = AlbertPretrainer(config)
    assert count_params(pretrainer.encoder) == encoder_part
    assert count_params(pretrainer) == sum(math.prod(s) for s in shapes.values())


def test_layouts_differ_and_the_projection_comes_before_the_sum():
    """Setting the word projection to the identity (E == H) makes before_sum the plain
    sum of the three tables: the projection is applied to the word vectors alone."""
    config = tiny_config(embedding_size=12, embedding_projection_position=BEFORE)
    layer = AlbertEmbedding(37, 12, 16, 2, 0.02, 0.0, word_projection_size=12)
    layer.build()
    inputs = encoder_inputs(config)
    ids, types = inputs["input_word_ids"], inputs["input_type_ids"]
    layer.word_projection.kernel.assign(np.eye(12, dtype="float32"))
    plain = AlbertEmbedding(37, 12, 16, 2, 0.02, 0.0)
    plain.build()
    plain.set_weights([layer.word_embeddings.embeddings.numpy(),
                       layer.position_embeddings.embeddings.numpy(),
                       layer.token_type_embeddings.embeddings.numpy(),
                       *layer.layer_norm.get_weights()])
    np.testing.assert_allclose(np.asarray(layer(ids, types)), np.asarray(plain(ids, types)),
                               atol=1e-6)
    scaled = 2.0 * np.eye(12, dtype="float32")  # doubles the words, not positions or types
    layer.word_projection.kernel.assign(scaled)
    assert not np.allclose(np.asarray(layer(ids, types)), np.asarray(plain(ids, types)))


def test_layer_configs_round_trip():
    for layer in (AlbertEmbedding(37, 8, 16, 2, 0.02, 0.1, word_projection_size=12),
                  MaskedLMHead(37, 8, "gelu", 0.02, transform_size=12)):
        config = layer.get_config()
        assert layer.__class__.from_config(config).get_config() == config


def test_keras_files_round_trip(tmp_path):
    config = tiny_config(embedding_projection_position=BEFORE)
    check_serialization(AlbertEncoder(config), encoder_inputs(config), tmp_path / "encoder")
    check_serialization(AlbertPretrainer(config), pretrainer_inputs(config), tmp_path / "pre")
    check_serialization(AlbertMaskedLM(config), pretrainer_inputs(config), tmp_path / "mlm")
    check_serialization(AlbertSequenceClassifier(config, 3), encoder_inputs(config),
                        tmp_path / "cls")


# ------------------------------------------------------------ brightmart's own configs
REAL_CONFIGS = sorted(glob.glob(os.path.join(brightmart.REAL, "*.json")))


@pytest.mark.parametrize("path", REAL_CONFIGS, ids=os.path.basename)
def test_real_brightmart_configs_load_or_are_refused_in_one_line(path):
    name = os.path.basename(path)
    if name == "albert_config_xxlarge.json":  # ln_type "preln": blocks albert-tf does not build
        with pytest.raises(ConfigError) as e:
            AlbertConfig.from_json_file(path)
        assert str(e.value) == (f"ln_type='preln' in {path} is not supported: albert-tf builds "
                                "the post-LayerNorm blocks of 'postln' only")
        return
    if name == "albert_config_tiny_google_fast.json":  # 12 groups for 4 layers
        with pytest.raises(ConfigError) as e:
            AlbertConfig.from_json_file(path)
        assert str(e.value) == (
            "num_hidden_groups=12 exceeds num_hidden_layers=4: the original code would use "
            f"only groups 0, 3, 6, 9 (one per layer), which albert-tf does not build (in {path})")
        return
    config = AlbertConfig.from_json_file(path)
    with open(path, encoding="utf-8") as f:
        values = json.load(f)
    for key in ("hidden_size", "embedding_size", "num_hidden_layers", "vocab_size"):
        assert getattr(config, key) == values[key]
    assert config.num_hidden_groups == values.get("num_hidden_groups", 1)
    assert config.embedding_projection_position == "after_sum"  # the checkpoint decides


def test_ln_type_other_than_postln_is_refused(tmp_path):
    for value, accepted in (("postln", True), (None, True), ("preln", False), ("sandwich", False)):
        path = tmp_path / "albert_config.json"
        path.write_text(json.dumps({**tiny_config().to_dict(), "ln_type": value}))
        if accepted:
            assert AlbertConfig.from_json_file(path) == tiny_config()
        else:
            with pytest.raises(ConfigError, match=f"ln_type='{value}' in {path} is not supported"):
                AlbertConfig.from_json_file(path)
