"""LAMB, AdamW and the warmup + polynomial decay schedule against NumPy re-derivations.

The reference update is written from the published algorithm as the original ALBERT
code applies it (google-research/albert lamb_optimizer.py + optimization.py), not
from our implementation.
"""

import math

import keras
import numpy as np
import pytest

from albert_tf.training.runtime import optimization
from albert_tf.training.runtime.optimization import (
    AdamW,
    Lamb,
    WarmupPolynomialDecay,
    create_optimizer,
    is_excluded,
)


def _tiny_model():
    """Variables with paths like the encoder's: dense/{kernel,bias}, layer_norm/{gamma,beta}."""
    inputs = keras.Input((4,))
    hidden = keras.layers.Dense(3, name="dense")(inputs)
    hidden = keras.layers.LayerNormalization(name="layer_norm")(hidden)
    outputs = keras.layers.Dense(2, use_bias=False, name="zero_init",
                                 kernel_initializer="zeros")(hidden)
    return keras.Model(inputs, outputs, name="tiny")


def _numpy_lamb(weights, grad_steps, excluded, lr_fn, wd=0.01, b1=0.9, b2=0.999,
                eps=1e-6, clip=1.0):
    """The original LAMB step (no bias correction) after global-norm clipping."""
    w = [x.astype(np.float64).copy() for x in weights]
    m = [np.zeros_like(x) for x in w]
    v = [np.zeros_like(x) for x in w]
    for step, grads in enumerate(grad_steps):
        grads = [g.astype(np.float64) for g in grads]
        norm = math.sqrt(sum(float(np.sum(g * g)) for g in grads))
        if clip is not None:
            grads = [g * clip / max(norm, clip) for g in grads]
        lr = lr_fn(step)
        for i, g in enumerate(grads):
            m[i] = b1 * m[i] + (1 - b1) * g
            v[i] = b2 * v[i] + (1 - b2) * g * g
            update = m[i] / (np.sqrt(v[i]) + eps)
            ratio = 1.0
            if not excluded[i]:
                update = update + wd * w[i]
                w_norm, u_norm = np.linalg.norm(w[i]), np.linalg.norm(update)
                ratio = w_norm / u_norm if (w_norm > 0 and u_norm > 0) else 1.0
            w[i] = w[i] - ratio * lr * update
    return w


def _random_grads(model, steps, scale, seed=0):
    rng = np.random.default_rng(seed)
    return [[(rng.standard_normal(v.shape) * scale).astype("float32")
             for v in model.trainable_variables] for _ in range(steps)]


def test_exclusions_follow_variable_paths():
    model = _tiny_model()
    decided = {v.path: is_excluded(v) for v in model.trainable_variables}
    assert decided == {"dense/kernel": False, "dense/bias": True,
                       "layer_norm/gamma": True, "layer_norm/beta": True,
                       "zero_init/kernel": False}
    assert is_excluded(keras.Variable(np.zeros(3), name="output_bias"))
    assert not is_excluded(keras.Variable(np.zeros(3), name="embeddings"))
    # Names from the TF1 checkpoints match the original's patterns too.
    assert is_excluded(keras.Variable(np.zeros(3), name="LayerNorm_beta"))


@pytest.mark.parametrize("scale,clip", [(0.05, 1.0), (3.0, 1.0), (3.0, None)])
def test_lamb_matches_numpy_reference(scale, clip):
    keras.utils.set_random_seed(1)
    model = _tiny_model()
    variables = model.trainable_variables
    # Non-trivial LayerNorm parameters so the excluded update differs visibly.
    for v in variables:
        if v.path.startswith("layer_norm"):
            v.assign(np.linspace(0.5, 1.5, v.shape[0]).astype("float32"))
    start = [keras.ops.convert_to_numpy(v) for v in variables]
    schedule = WarmupPolynomialDecay(0.05, train_steps=10, warmup_steps=2)
    optimizer = Lamb(schedule, global_clipnorm=clip)
    grad_steps = _random_grads(model, 4, scale)
    for grads in grad_steps:
        optimizer.apply_gradients(zip(grads, variables))
    expected = _numpy_lamb(start, grad_steps, [is_excluded(v) for v in variables],
                           lambda s: float(schedule(s)), clip=clip)
    for v, want in zip(variables, expected):
        np.testing.assert_allclose(keras.ops.convert_to_numpy(v), want, rtol=2e-5,
                                   atol=2e-6, err_msg=v.path)
    # The zero-initialized kernel has ||w|| = 0 at the first step: ratio 1, and it moved.
    assert np.abs(keras.ops.convert_to_numpy(variables[-1])).max() > 0


def test_lamb_decay_and_trust_ratio_change_only_included_variables():
    """With zero gradients, only decay moves weights, and only non-excluded ones."""
    model = _tiny_model()
    variables = model.trainable_variables
    for v in variables:
        v.assign(np.full(v.shape, 0.7, "float32"))
    optimizer = Lamb(0.1)
    optimizer.apply_gradients(zip([np.zeros(v.shape, "float32") for v in variables],
                                  variables))
    for v in variables:
        value = keras.ops.convert_to_numpy(v)
        if is_excluded(v):
            np.testing.assert_array_equal(value, np.float32(0.7))
        else:
            # u = wd * w, ratio = ||w|| / ||u|| = 1 / wd, so w <- w - lr * w.
            np.testing.assert_allclose(value, 0.7 * (1 - 0.1), rtol=1e-6)


def test_adamw_excludes_layer_norm_and_bias_from_decay():
    model = _tiny_model()
    variables = model.trainable_variables
    for v in variables:
        v.assign(np.full(v.shape, 2.0, "float32"))
    optimizer = AdamW(0.5, weight_decay=0.1)
    optimizer.apply_gradients(zip([np.zeros(v.shape, "float32") for v in variables],
                                  variables))
    for v in variables:
        want = 2.0 if is_excluded(v) else 2.0 * (1 - 0.5 * 0.1)
        np.testing.assert_allclose(keras.ops.convert_to_numpy(v), want, rtol=1e-6,
                                   err_msg=v.path)


def test_schedule_values():
    schedule = WarmupPolynomialDecay(1e-3, train_steps=100, warmup_steps=10)
    got = [float(schedule(s)) for s in (0, 5, 9, 10, 55, 100, 150)]
    want = [0.0, 5e-4, 9e-4, 1e-3 * 0.9, 1e-3 * 0.45, 0.0, 0.0]
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-12)
    squared = WarmupPolynomialDecay(2e-3, train_steps=50, warmup_steps=0, power=2.0,
                                    end_learning_rate=1e-4)
    np.testing.assert_allclose(float(squared(20)), (2e-3 - 1e-4) * 0.6 ** 2 + 1e-4,
                               rtol=1e-6)


def test_original_defaults():
    schedule = WarmupPolynomialDecay()
    assert (schedule.learning_rate, schedule.warmup_steps, schedule.train_steps,
            schedule.power) == (0.00176, 3125, 125_000, 1.0)
    np.testing.assert_allclose(float(schedule(3125)), 0.00176 * (1 - 3125 / 125_000),
                               rtol=1e-6)
    lamb = create_optimizer("lamb")
    assert (lamb.weight_decay_rate, lamb.beta_1, lamb.beta_2, lamb.epsilon,
            lamb.global_clipnorm) == (0.01, 0.9, 0.999, 1e-6, 1.0)
    adamw = create_optimizer("adamw")
    assert (adamw.weight_decay, adamw.epsilon, adamw.global_clipnorm) == (0.01, 1e-6, 1.0)
    with pytest.raises(ValueError, match="optimizer='sgd'"):
        create_optimizer("sgd")


@pytest.mark.parametrize("name", optimization.OPTIMIZERS)
def test_optimizer_and_schedule_serialize(name):
    optimizer = create_optimizer(name, learning_rate=3e-4, train_steps=77, warmup_steps=7)
    restored = keras.optimizers.deserialize(keras.optimizers.serialize(optimizer))
    assert type(restored) is type(optimizer)
    assert restored.get_config() == optimizer.get_config()
    schedule = restored._learning_rate
    assert isinstance(schedule, WarmupPolynomialDecay)
    assert schedule.get_config() == dict(learning_rate=3e-4, train_steps=77, warmup_steps=7,
                                         power=1.0, end_learning_rate=0.0)


def test_pretrainer_exclusions():
    """On the real model: LayerNorm and biases excluded, kernels and tables decayed."""
    from albert_tf import AlbertConfig, AlbertPretrainer

    config = AlbertConfig(vocab_size=37, embedding_size=8, hidden_size=12,
                          num_hidden_layers=2, num_attention_heads=3, intermediate_size=20)
    model = AlbertPretrainer(config)
    excluded = {v.path for v in model.trainable_variables if is_excluded(v)}
    included = {v.path for v in model.trainable_variables} - excluded
    assert excluded and included
    assert all(p.endswith(("/gamma", "/beta", "bias")) for p in excluded), excluded
    assert all(p.endswith(("/kernel", "/embeddings")) for p in included), included
    assert "mlm_head/output_bias" in excluded
    assert "encoder/embeddings/word_embeddings/embeddings" in included
    # gamma + beta of 4 LayerNorms: embeddings, attention, FFN (one shared block), MLM head.
    assert sum("layer_norm" in p for p in excluded) == 2 * 4


def test_the_pretrain_command_offers_exactly_the_optimizers_built():
    # The command line restates the names (it must not import TensorFlow); this holds them equal.
    from albert_tf.training.pretrain import command

    option = next(a for a in command.parser()._actions if "--optimizer" in a.option_strings)
    assert tuple(option.choices) == optimization.OPTIMIZERS
