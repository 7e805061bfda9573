"""One post-LN transformer block, built from an attention and a feed-forward sublayer.

The sublayers are separate layers so that the encoder can hand the same
sublayer to several blocks: that is how attention-only and FFN-only sharing are
expressed. The block itself knows nothing of sharing.
"""

from __future__ import annotations

import math

import keras
from keras import ops

from albert_tf.activations import get_activation
from albert_tf.embedding import truncated_normal
from albert_tf.numerics import LAYER_NORM_EPSILON, MASKED_LOGIT


def attention_bias_from_mask(input_mask, dtype):
    """`input_mask` [B,T] (1 = token) -> additive bias [B,1,1,T]: 0 or -10000 (as the original)."""
    mask = ops.cast(input_mask, dtype)
    return ops.expand_dims(ops.expand_dims((1.0 - mask) * MASKED_LOGIT, 1), 1)


def fused_attention(q, k, v, attention_bias, scale: float):
    """Scaled dot-product attention through the backend's fused op, where it has one.

    `q, k, v` [B,T,N,D], `attention_bias` [B,1,1,T] (see `attention_bias_from_mask`)
    -> context [B,T,N,D]. `keras.ops.dot_product_attention` runs the softmax in
    float32 and dispatches to cuDNN / TPU flash kernels under JAX; on CPU it is the
    same einsum-softmax-einsum as `einsum_attention` (measured equal in
    benchmarks/bench_model.py).
    """
    return ops.dot_product_attention(q, k, v, bias=attention_bias, scale=scale)


def einsum_attention(q, k, v, attention_bias, scale: float, dropout=None):
    """The same attention written out, with optional dropout on the probabilities.

    Used in training when attention dropout is on (the fused op has none). Shapes as
    `fused_attention`; `dropout` is a `keras.layers.Dropout` applied in training mode.
    """
    scores = ops.einsum("btnd,bsnd->bnts", q, k)  # [B,N,T,T]
    # Softmax in float32: under float16 the -10000 bias and large scores overflow.
    scores = ops.cast(scores, "float32") * scale + ops.cast(attention_bias, "float32")
    probs = ops.cast(ops.softmax(scores, axis=-1), q.dtype)
    if dropout is not None:
        probs = dropout(probs, training=True)
    return ops.einsum("bnts,bsnd->btnd", probs, v)


@keras.saving.register_keras_serializable(package="albert_tf")
class AttentionSublayer(keras.layers.Layer):
    """Multi-head self-attention, output projection, dropout, residual and LayerNorm.

    Args:
      hidden_size: H, the model width.
      num_attention_heads: N; H must be divisible by N.
      initializer_range: stddev of the truncated-normal kernel initializer.
      attention_dropout_rate: dropout on the attention probabilities.
      hidden_dropout_rate: dropout on the projected output, before the residual.

    Call: `(x [B,T,H], attention_bias [B,1,1,T]) -> [B,T,H]`.
    """

    def __init__(self, hidden_size: int, num_attention_heads: int, initializer_range: float,
                 attention_dropout_rate: float, hidden_dropout_rate: float, **kwargs):
        super().__init__(**kwargs)
        if hidden_size % num_attention_heads:
            raise ValueError(f"hidden_size={hidden_size} is not divisible by "
                             f"num_attention_heads={num_attention_heads}")
        self.hidden_size = hidden_size
        self.num_attention_heads = num_attention_heads
        self.initializer_range = initializer_range
        self.attention_dropout_rate = attention_dropout_rate
        self.hidden_dropout_rate = hidden_dropout_rate
        self.head_size = hidden_size // num_attention_heads

        def dense(name):
            return keras.layers.Dense(hidden_size, kernel_initializer=truncated_normal(
                initializer_range), name=name, dtype=self.dtype_policy)

        self.query, self.key, self.value = dense("query"), dense("key"), dense("value")
        self.output_dense = dense("output_dense")
        # axis 1 of the [B*T,H] rows it normalizes (with -1, Keras reshapes gamma and beta
        # for broadcasting on every call).
        self.layer_norm = keras.layers.LayerNormalization(
            axis=1, epsilon=LAYER_NORM_EPSILON, name="layer_norm", dtype=self.dtype_policy)
        self.attention_dropout = keras.layers.Dropout(attention_dropout_rate,
                                                      dtype=self.dtype_policy)
        self.output_dropout = keras.layers.Dropout(hidden_dropout_rate, dtype=self.dtype_policy)

    def build(self, input_shape=None):
        for layer in (self.query, self.key, self.value, self.output_dense):
            layer.build((None, None, self.hidden_size))
        self.layer_norm.build((None, self.hidden_size))
        self.built = True

    def _split_heads(self, x, batch, seq):
        return ops.reshape(x, (batch, seq, self.num_attention_heads, self.head_size))  # [B,T,N,D]

    def call(self, x, attention_bias, training=None, first_token_only=False):
        """`first_token_only`: attend from the first position alone (-> [B,1,H]): keys
        and values still come from every position, so the row equals the full call's
        first row; what reads only [CLS] of the last layer needs no more."""
        batch, seq = ops.shape(x)[0], ops.shape(x)[1]
        # Rows as a matrix: a Dense on [B*T,H] is one MatMul + BiasAdd that TensorFlow
        # fuses into one kernel call (on [B,T,H] it is a tensordot of ~10 ops).
        rows = ops.reshape(x, (-1, self.hidden_size))  # [B*T,H]
        k = self._split_heads(self.key(rows), batch, seq)
        v = self._split_heads(self.value(rows), batch, seq)
        if first_token_only:
            seq = 1
            rows = ops.reshape(x[:, :1, :], (-1, self.hidden_size))  # [B,H]
        q = self._split_heads(self.query(rows), batch, seq)  # [B,T',N,D]
        scale = 1.0 / math.sqrt(self.head_size)
        if training and self.attention_dropout_rate > 0:  # the fused op has no dropout
            context = einsum_attention(q, k, v, attention_bias, scale, self.attention_dropout)
        else:
            context = fused_attention(q, k, v, attention_bias, scale)
        context = ops.reshape(context, (-1, self.hidden_size))  # [B*T',H]
        out = self.output_dropout(self.output_dense(context), training=training)
        return ops.reshape(self.layer_norm(out + rows), (batch, seq, self.hidden_size))

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.update(hidden_size=self.hidden_size, num_attention_heads=self.num_attention_heads,
                      initializer_range=self.initializer_range,
                      attention_dropout_rate=self.attention_dropout_rate,
                      hidden_dropout_rate=self.hidden_dropout_rate)
        return config


@keras.saving.register_keras_serializable(package="albert_tf")
class FeedForwardSublayer(keras.layers.Layer):
    """Position-wise feed-forward H -> I -> H, dropout, residual and LayerNorm.

    Args:
      hidden_size: H.
      intermediate_size: I (the paper: 4H).
      hidden_act: activation name (see `albert_tf.activations`).
      initializer_range: stddev of the truncated-normal kernel initializer.
      hidden_dropout_rate: dropout on the output, before the residual.

    Call: `x [B,T,H] -> [B,T,H]`.
    """

    def __init__(self, hidden_size: int, intermediate_size: int, hidden_act: str,
                 initializer_range: float, hidden_dropout_rate: float, **kwargs):
        super().__init__(**kwargs)
        self.hidden_size = hidden_size
        self.intermediate_size = intermediate_size
        self.hidden_act = hidden_act
        self.initializer_range = initializer_range
        self.hidden_dropout_rate = hidden_dropout_rate
        self.activation = get_activation(hidden_act)
        init = truncated_normal(initializer_range)
        # The activation inside the Dense: its ops then sit in the Dense's name scope,
        # where TensorFlow's graph optimizer finds MatMul + BiasAdd + GELU and runs them
        # as one fused kernel (applied after the Dense, GELU stays 8 separate ops).
        self.intermediate = keras.layers.Dense(intermediate_size, activation=self.activation,
                                               kernel_initializer=init,
                                               name="intermediate", dtype=self.dtype_policy)
        self.output_dense = keras.layers.Dense(hidden_size, kernel_initializer=init,
                                               name="output_dense", dtype=self.dtype_policy)
        # axis 1 of the [B*T,H] rows it normalizes (with -1, Keras reshapes gamma and beta
        # for broadcasting on every call).
        self.layer_norm = keras.layers.LayerNormalization(
            axis=1, epsilon=LAYER_NORM_EPSILON, name="layer_norm", dtype=self.dtype_policy)
        self.dropout = keras.layers.Dropout(hidden_dropout_rate, dtype=self.dtype_policy)

    def build(self, input_shape=None):
        self.intermediate.build((None, None, self.hidden_size))
        self.output_dense.build((None, None, self.intermediate_size))
        self.layer_norm.build((None, self.hidden_size))
        self.built = True

    def call(self, x, training=None):
        shape = ops.shape(x)
        x = ops.reshape(x, (-1, self.hidden_size))  # [B*T,H], as in AttentionSublayer
        h = self.intermediate(x)  # [B*T,I]
        out = self.dropout(self.output_dense(h), training=training)
        return ops.reshape(self.layer_norm(out + x), shape)

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.update(hidden_size=self.hidden_size, intermediate_size=self.intermediate_size,
                      hidden_act=self.hidden_act, initializer_range=self.initializer_range,
                      hidden_dropout_rate=self.hidden_dropout_rate)
        return config


@keras.saving.register_keras_serializable(package="albert_tf")
class TransformerBlock(keras.layers.Layer):
    """Post-LN transformer block: `ffn(attention(x))`, each sublayer with its own residual + LN.

    Args:
      attention: an `AttentionSublayer` (may be shared with other blocks).
      ffn: a `FeedForwardSublayer` (may be shared with other blocks).

    Call: `(x [B,T,H], attention_bias [B,1,1,T]) -> [B,T,H]`.
    """

    def __init__(self, attention: AttentionSublayer, ffn: FeedForwardSublayer, **kwargs):
        super().__init__(**kwargs)
        self.attention = attention
        self.ffn = ffn

    def build(self, input_shape=None):
        for sublayer in (self.attention, self.ffn):
            if not sublayer.built:
                sublayer.build(input_shape)
        self.built = True

    def call(self, x, attention_bias, training=None, first_token_only=False):
        """`first_token_only`: only the first position's output, [B,1,H]
        (`AttentionSublayer.call`)."""
        attended = self.attention(x, attention_bias, training=training,
                                  first_token_only=first_token_only)
        return self.ffn(attended, training=training)

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.update(attention=keras.saving.serialize_keras_object(self.attention),
                      ffn=keras.saving.serialize_keras_object(self.ffn))
        return config

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["attention"] = keras.saving.deserialize_keras_object(config["attention"])
        config["ffn"] = keras.saving.deserialize_keras_object(config["ffn"])
        return cls(**config)
