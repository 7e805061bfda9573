"""Shared checks for every albert_tf layer and model, and tiny inputs with a distinct size per axis."""

from __future__ import annotations

import os

import keras
import numpy as np

from albert_tf import AlbertConfig

# Every axis a different size, so a swapped axis fails loudly.
BATCH, SEQ, PREDICTIONS, CHOICES = 2, 7, 3, 4
TINY = dict(vocab_size=37, embedding_size=8, hidden_size=12, num_hidden_layers=5,
            num_attention_heads=3, intermediate_size=20, max_position_embeddings=16,
            type_vocab_size=2)


def tiny_config(**overrides) -> AlbertConfig:
    return AlbertConfig(**{**TINY, **overrides})


def encoder_inputs(config: AlbertConfig, batch: int = BATCH, seq: int = SEQ, seed: int = 0,
                   leading: tuple = ()) -> dict[str, np.ndarray]:
    """Non-uniform inputs: random ids, a padded second row, two segments."""
    rng = np.random.default_rng(seed)
    shape = (*leading, batch, seq) if leading else (batch, seq)
    ids = rng.integers(5, config.vocab_size, shape).astype("int32")
    lengths = np.linspace(seq, max(2, seq // 2), batch).astype(int)  # first row full, last padded
    mask = (np.arange(seq)[None, :] < lengths[:, None]).astype("int32")
    mask = np.broadcast_to(mask, shape).copy()
    types = np.broadcast_to((np.arange(seq) >= seq // 2).astype("int32"), shape).copy()
    ids = ids * mask
    return {"input_word_ids": ids, "input_mask": mask, "input_type_ids": types * mask}


def pretrainer_inputs(config: AlbertConfig, seed: int = 0) -> dict[str, np.ndarray]:
    inputs = encoder_inputs(config, seed=seed)
    positions = np.array([[1, 3, 5], [0, 2, 3]], dtype="int32")[:BATCH, :PREDICTIONS]
    return {**inputs, "masked_lm_positions": positions}


def pretrainer_labels(config: AlbertConfig, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed + 1)
    return {"masked_lm_ids": rng.integers(5, config.vocab_size, (BATCH, PREDICTIONS)).astype("int32"),
            "masked_lm_weights": np.array([[1, 1, 1], [1, 1, 0]], "float32"),
            "sentence_order_label": np.array([0, 1], "int32")}


def as_numpy(outputs):
    return keras.tree.map_structure(lambda t: keras.ops.convert_to_numpy(t), outputs)


def assert_outputs_close(a, b, atol=1e-6):
    flat_a, flat_b = keras.tree.flatten(as_numpy(a)), keras.tree.flatten(as_numpy(b))
    assert len(flat_a) == len(flat_b)
    for x, y in zip(flat_a, flat_b):
        np.testing.assert_allclose(x, y, atol=atol, rtol=0)


def check_serialization(model: keras.Layer, inputs, tmp_path) -> None:
    """get_config round trip and `.keras` save/load (safe_mode=True) give equal outputs."""
    expected = model(inputs, training=False)
    config = model.get_config()
    clone = model.__class__.from_config(config)
    assert clone.get_config() == config
    clone.set_weights(model.get_weights())
    assert_outputs_close(clone(inputs, training=False), expected)
    os.makedirs(tmp_path, exist_ok=True)
    path = os.path.join(tmp_path, "model.keras")
    model.save(path)
    loaded = keras.models.load_model(path, safe_mode=True)
    assert type(loaded) is type(model)
    assert_outputs_close(loaded(inputs, training=False), expected)


def count_params(model: keras.Layer) -> int:
    return int(sum(np.prod(w.shape) for w in model.weights))
