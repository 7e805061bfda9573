"""The fused attention path against the written-out einsum path and a NumPy reference.

`fused_attention` (keras.ops.dot_product_attention) serves inference and training
without attention dropout; `einsum_attention` serves training with it. Both must be
the same function: checked in float32 (<= 1e-5, outputs and gradients) and bfloat16,
with padding masks that include a fully padded example, on the TensorFlow backend
here and on the JAX backend in a subprocess with TensorFlow blocked.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from tests.helpers.fresh_process import SAFETY_NET_S
from tests.helpers.paths import REPO

# batch 3, seq 7, heads 3, head size 5: every axis a different size.
_SHAPE = (3, 7, 3, 5)
_MASK = np.array([[1, 1, 1, 1, 1, 1, 1],
                  [1, 1, 1, 1, 0, 0, 0],   # padded tail
                  [0, 0, 0, 0, 0, 0, 0]],  # fully padded: every query row sees only padding
                 "int32")


def _inputs():
    rng = np.random.default_rng(7)
    q, k, v = (rng.normal(size=_SHAPE).astype("float32") * s for s in (2.0, 1.5, 1.0))
    return q, k, v, _MASK


def numpy_attention(q, k, v, mask, scale):
    """Independent reference: the original ALBERT attention in NumPy (float64, except that
    the -10000 bias is added in float32 as the original does: near 10000, float32 rounds to
    1e-3, which shows in the fully padded rows)."""
    q, k, v = (a.astype("float64") for a in (q, k, v))
    scores = (np.einsum("btnd,bsnd->bnts", q, k) * scale).astype("float32")
    scores = (scores + ((1.0 - mask) * -10000.0).astype("float32")[:, None, None, :])
    scores = scores.astype("float64")
    scores -= scores.max(-1, keepdims=True)
    probs = np.exp(scores) / np.exp(scores).sum(-1, keepdims=True)
    return np.einsum("bnts,bsnd->btnd", probs, v)


# The same checks run on each backend: this source is executed here (TensorFlow) and in
# a JAX subprocess. `grad(fn, q, k, v)` returns d sum(fn(q,k,v) * w) / d(q, k, v).
_CHECKS = """
from keras import ops
from albert_tf.transformer import attention_bias_from_mask, einsum_attention, fused_attention

def check_parity(q, k, v, mask, reference, grad):
    scale = 1.0 / np.sqrt(q.shape[-1])
    bias = attention_bias_from_mask(mask, "float32")
    fused = ops.convert_to_numpy(fused_attention(q, k, v, bias, scale))
    einsum = ops.convert_to_numpy(einsum_attention(q, k, v, bias, scale))
    assert np.abs(fused - einsum).max() <= 1e-5, np.abs(fused - einsum).max()
    assert np.abs(fused - reference).max() <= 1e-5, np.abs(fused - reference).max()
    # A fully padded example: the same -10000 on every key cancels in the softmax, so it
    # attends as if unmasked (as the original does), up to float32 rounding near -10000.
    unmasked = ops.convert_to_numpy(fused_attention(q[2:], k[2:], v[2:], bias[:1] * 0, scale))
    assert np.abs(fused[2:] - unmasked).max() <= 5e-3, np.abs(fused[2:] - unmasked).max()
    g_fused = grad(lambda a, b, c: fused_attention(a, b, c, bias, scale), q, k, v)
    g_einsum = grad(lambda a, b, c: einsum_attention(a, b, c, bias, scale), q, k, v)
    for name, a, b in zip("qkv", g_fused, g_einsum):
        assert np.abs(a - b).max() <= 1e-5, (name, np.abs(a - b).max())
    # bfloat16 (the mixed_bfloat16 compute dtype): both paths agree to bf16 rounding.
    qb, kb, vb = (ops.cast(a, "bfloat16") for a in (q, k, v))
    bias16 = attention_bias_from_mask(mask, "bfloat16")
    fused16 = ops.convert_to_numpy(ops.cast(fused_attention(qb, kb, vb, bias16, scale), "float32"))
    einsum16 = ops.convert_to_numpy(ops.cast(einsum_attention(qb, kb, vb, bias16, scale), "float32"))
    assert np.abs(fused16 - einsum16).max() <= 2e-2, np.abs(fused16 - einsum16).max()
    assert np.abs(fused16 - reference).max() <= 5e-2, np.abs(fused16 - reference).max()
"""


def _tf_grad(fn, *args):
    import tensorflow as tf

    args = [tf.constant(a) for a in args]
    weights = tf.constant(np.linspace(-1.0, 1.0, int(np.prod(_SHAPE))).reshape(_SHAPE),
                          tf.float32)
    with tf.GradientTape() as tape:
        tape.watch(args)
        loss = tf.reduce_sum(fn(*args) * weights)
    return [g.numpy() for g in tape.gradient(loss, args)]


def test_fused_and_einsum_attention_agree_on_tensorflow():
    import keras

    assert keras.backend.backend() == "tensorflow"
    q, k, v, mask = _inputs()
    scope = {"np": np}
    exec(_CHECKS, scope)
    scope["check_parity"](q, k, v, mask, numpy_attention(q, k, v, mask, 1 / np.sqrt(5)),
                          _tf_grad)


def test_fused_and_einsum_attention_agree_on_jax():
    pytest.importorskip("jax")
    q, k, v, mask = _inputs()
    reference = numpy_attention(q, k, v, mask, 1 / np.sqrt(5))
    code = textwrap.dedent("""
        import sys
        sys.modules["tensorflow"] = None  # any import of TensorFlow now fails
        import numpy as np, jax, jax.numpy as jnp, keras
        assert keras.backend.backend() == "jax"
        data = np.load(sys.argv[1])
        def grad(fn, *args):
            w = jnp.linspace(-1.0, 1.0, data["q"].size).reshape(data["q"].shape)
            return [np.asarray(g) for g in
                    jax.grad(lambda *a: jnp.sum(fn(*a) * w), argnums=(0, 1, 2))(*args)]
    """) + _CHECKS + textwrap.dedent("""
        check_parity(data["q"], data["k"], data["v"], data["mask"], data["reference"], grad)
        print("ok")
    """)
    path = os.path.join(REPO, ".pytest_cache", "attention_inputs.npz")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    np.savez(path, q=q, k=k, v=v, mask=mask, reference=reference)
    env = {**os.environ, "KERAS_BACKEND": "jax"}
    result = subprocess.run([sys.executable, "-c", code, path], env=env, capture_output=True,
                            text=True, cwd=REPO, timeout=SAFETY_NET_S)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().endswith("ok")


def test_attention_sublayer_uses_the_einsum_path_only_for_attention_dropout():
    """With attention dropout the layer's training output differs from inference; with
    dropout 0 training and inference are the same fused computation."""
    import keras

    from albert_tf.transformer import AttentionSublayer, attention_bias_from_mask

    rng = np.random.default_rng(3)
    x = rng.normal(size=(3, 7, 12)).astype("float32")
    bias = attention_bias_from_mask(_MASK, "float32")
    for rate, same in ((0.0, True), (0.5, False)):
        keras.utils.set_random_seed(0)
        layer = AttentionSublayer(12, 3, 0.02, attention_dropout_rate=rate,
                                  hidden_dropout_rate=0.0)
        infer = np.asarray(layer(x, bias, training=False))
        train = np.asarray(layer(x, bias, training=True))
        assert np.allclose(infer, train, atol=1e-6) == same, rate
