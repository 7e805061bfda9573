"""One post-LN transformer block, built from an attention and a feed-forward sublayer.

The sublayers are separate layers so that the encoder can hand the same
sublayer to several blocks: that is how attention-only and FFN-only sharing are
expressed. The block itself knows nothing of sharing.

For inference a sublayer can run as independent branches (`Branches`): its heads in
groups, its feed-forward in column blocks, each branch's matmuls apart from the others'
until their outputs are summed, so that a graph executor runs one request on several
cores while each op keeps one thread (docs/serving.md, `export --branches`).

Where the branches are decided: the count is a construction argument (`branches`, 1 by
default and then left out of `get_config`, so saved configs are unchanged), passed down
from the encoder and the task models as `remat` is. Only `export --branches` asks for
more: `albert_tf.serving.modules.served_model` builds a copy of the model with the count
and loads the weights into it; the model it was given is not touched. The branch copies
are variables of their own, cut from the weights once they are final (`cut_branches`,
after loading), because a graph that cut them per call would pay the slicing on every
request; a sublayer built with more than one branch refuses to run until it is cut.
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


class Branches:
    """One sublayer's weights cut into `count` independent branches, for inference.

    Attention: the query, key and value kernels [H,H] by columns (branch b holds heads
    b*N/count to (b+1)*N/count, whose columns are contiguous) with their biases; the
    output kernel by rows (the rows those heads' context feeds). Feed-forward: the
    intermediate kernel [H,I] by columns with its bias, the output kernel [I,H] by rows.
    Each branch computes its part of the output projection; the parts are summed and
    the output bias added once, which equals the whole matmul up to float rounding.

    The copies are variables of their own (`keras.Variable`, not trainable), kept
    outside the layer's weights: the layer saves, loads and trains as before, and a
    graph that calls the layer reads only the copies. `split(layer, count)` makes them.
    """

    # Kernels cut by columns (their outputs stay apart); the others (output_dense) by rows.
    COLUMNS = ("query", "key", "value", "intermediate")

    @staticmethod
    def check(count: int, what: str, units: int) -> int:
        """`count`, unless it cannot cut the `units` of `what` (ValueError)."""
        if isinstance(count, bool) or not isinstance(count, int) or count < 1 or units % count:
            raise ValueError(f"cannot cut {what}={units} into {count} branches (expected a "
                             f"number from 1 that divides {units})")
        return count

    def __init__(self, count: int, kernels: dict[str, list], biases: dict[str, list]):
        self.count = count
        self.kernels = kernels
        self.biases = biases

    @classmethod
    def split(cls, layer, count: int) -> Branches:
        """`layer`'s (an `AttentionSublayer` or `FeedForwardSublayer`) weights in `count`
        branches; ValueError unless `count` divides its heads and intermediate size."""
        if isinstance(layer, AttentionSublayer):
            names = ("query", "key", "value", "output_dense")
            cls.check(count, "num_attention_heads", layer.num_attention_heads)
        else:
            names = ("intermediate", "output_dense")
            cls.check(count, "intermediate_size", layer.intermediate_size)
        kernels, biases = {}, {}

        def copy(value, label):  # in the dtype the layer computes in
            return keras.Variable(ops.cast(value, layer.compute_dtype), trainable=False,
                                  name=label)

        def parts(value, axis, label):
            return [copy(part, f"{label}_{b}")
                    for b, part in enumerate(ops.split(value, count, axis=axis))]

        for name in names:
            dense = getattr(layer, name)
            if name in cls.COLUMNS:  # outputs kept apart: kernel and bias by columns
                kernels[name] = parts(dense.kernel, 1, f"{name}_kernel")
                biases[name] = parts(dense.bias, 0, f"{name}_bias")
            else:  # outputs summed: the kernel by rows, the bias added once
                kernels[name] = parts(dense.kernel, 0, f"{name}_kernel")
                biases[name] = [copy(dense.bias, f"{name}_bias")]
        return cls(count, kernels, biases)

    def project(self, name: str, branch: int, rows):
        """`rows` times branch `branch`'s columns of kernel `name`, plus its bias."""
        return ops.add(ops.matmul(rows, self.kernels[name][branch]), self.biases[name][branch])

    def summed(self, name: str, parts: list):
        """The row blocks of kernel `name` applied to `parts` (one per branch), summed,
        plus the kernel's bias."""
        total = ops.matmul(parts[0], self.kernels[name][0])
        for part, kernel in zip(parts[1:], self.kernels[name][1:]):
            total = ops.add(total, ops.matmul(part, kernel))
        return ops.add(total, self.biases[name][0])


class BranchedSublayer:
    """A sublayer's `branches` (an int given at construction) and its cut copies."""

    branches: int
    _cut: Branches | None

    def cut_branches(self) -> None:
        """Cuts the weights as they stand now into `branches` copies, which the call then
        reads (call it once they are final: after loading); nothing with one branch."""
        if self.branches > 1:
            self._cut = Branches.split(self, self.branches)

    def _branches_to_run(self) -> Branches | None:
        """The copies the call runs, or None with one branch."""
        if self.branches == 1:
            return None
        if self._cut is None:
            raise RuntimeError(f"{self.name} runs as {self.branches} branches: call "
                               "cut_branches() once its weights are loaded")
        return self._cut

    def _branches_config(self) -> dict:
        return {} if self.branches == 1 else {"branches": self.branches}


@keras.saving.register_keras_serializable(package="albert_tf")
class AttentionSublayer(BranchedSublayer, keras.layers.Layer):
    """Multi-head self-attention, output projection, dropout, residual and LayerNorm.

    Args:
      hidden_size: H, the model width.
      num_attention_heads: N; H must be divisible by N.
      initializer_range: stddev of the truncated-normal kernel initializer.
      attention_dropout_rate: dropout on the attention probabilities.
      hidden_dropout_rate: dropout on the projected output, before the residual.
      branches: for inference, the heads in this many independent groups (`Branches`;
        run once `cut_branches()` has cut the loaded weights).

    Call: `(x [B,T,H], attention_bias [B,1,1,T]) -> [B,T,H]`.
    """

    def __init__(self, hidden_size: int, num_attention_heads: int, initializer_range: float,
                 attention_dropout_rate: float, hidden_dropout_rate: float, branches: int = 1,
                 **kwargs):
        super().__init__(**kwargs)
        if hidden_size % num_attention_heads:
            raise ValueError(f"hidden_size={hidden_size} is not divisible by "
                             f"num_attention_heads={num_attention_heads}")
        self.branches = Branches.check(branches, "num_attention_heads", num_attention_heads)
        self._cut = None
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

    def _context(self, q, k, v, attention_bias, shape, training):
        """Projected `q` [B*T',n*D], `k`, `v` [B*T,n*D] of n heads -> context [B*T',n*D];
        `shape` = (B, T, T')."""
        batch, seq, q_seq = shape
        width = ops.shape(q)[-1]
        heads = width // self.head_size

        def split_heads(x, length):
            return ops.reshape(x, (batch, length, heads, self.head_size))  # [B,T,n,D]

        q, k, v = split_heads(q, q_seq), split_heads(k, seq), split_heads(v, seq)
        scale = 1.0 / math.sqrt(self.head_size)
        if training and self.attention_dropout_rate > 0:  # the fused op has no dropout
            context = einsum_attention(q, k, v, attention_bias, scale, self.attention_dropout)
        else:
            context = fused_attention(q, k, v, attention_bias, scale)
        return ops.reshape(context, (-1, width))

    def call(self, x, attention_bias, training=None, first_token_only=False):
        """`first_token_only`: attend from the first position alone (-> [B,1,H]): keys
        and values still come from every position, so the row equals the full call's
        first row; what reads only [CLS] of the last layer needs no more."""
        batch, seq = ops.shape(x)[0], ops.shape(x)[1]
        # Rows as a matrix: a Dense on [B*T,H] is one MatMul + BiasAdd that TensorFlow
        # fuses into one kernel call (on [B,T,H] it is a tensordot of ~10 ops).
        rows = ops.reshape(x, (-1, self.hidden_size))  # [B*T,H]
        q_rows, q_seq = rows, seq
        if first_token_only:
            q_rows, q_seq = ops.reshape(x[:, :1, :], (-1, self.hidden_size)), 1  # [B,H]
        shape = (batch, seq, q_seq)
        b = self._branches_to_run()
        if b is None:
            out = self.output_dense(self._context(self.query(q_rows), self.key(rows),
                                                  self.value(rows), attention_bias, shape,
                                                  training))
        else:  # each branch: its heads' projections, attention and share of the output
            out = b.summed("output_dense", [self._context(
                b.project("query", i, q_rows), b.project("key", i, rows),
                b.project("value", i, rows), attention_bias, shape, training)
                for i in range(b.count)])
        out = self.output_dropout(out, training=training)
        return ops.reshape(self.layer_norm(out + q_rows), (batch, q_seq, self.hidden_size))

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.update(hidden_size=self.hidden_size, num_attention_heads=self.num_attention_heads,
                      initializer_range=self.initializer_range,
                      attention_dropout_rate=self.attention_dropout_rate,
                      hidden_dropout_rate=self.hidden_dropout_rate, **self._branches_config())
        return config


@keras.saving.register_keras_serializable(package="albert_tf")
class FeedForwardSublayer(BranchedSublayer, keras.layers.Layer):
    """Position-wise feed-forward H -> I -> H, dropout, residual and LayerNorm.

    Args:
      hidden_size: H.
      intermediate_size: I (the paper: 4H).
      hidden_act: activation name (see `albert_tf.activations`).
      initializer_range: stddev of the truncated-normal kernel initializer.
      hidden_dropout_rate: dropout on the output, before the residual.
      branches: for inference, the intermediate in this many column blocks (`Branches`;
        run once `cut_branches()` has cut the loaded weights).

    Call: `x [B,T,H] -> [B,T,H]`.
    """

    def __init__(self, hidden_size: int, intermediate_size: int, hidden_act: str,
                 initializer_range: float, hidden_dropout_rate: float, branches: int = 1,
                 **kwargs):
        super().__init__(**kwargs)
        self.branches = Branches.check(branches, "intermediate_size", intermediate_size)
        self._cut = None
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
        b = self._branches_to_run()
        if b is None:
            out = self.output_dense(self.intermediate(x))  # through [B*T,I]
        else:  # each branch: a column block of the intermediate, its rows of the output
            out = b.summed("output_dense", [self.activation(b.project("intermediate", i, x))
                                            for i in range(b.count)])
        out = self.dropout(out, training=training)
        return ops.reshape(self.layer_norm(out + x), shape)

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.update(hidden_size=self.hidden_size, intermediate_size=self.intermediate_size,
                      hidden_act=self.hidden_act, initializer_range=self.initializer_range,
                      hidden_dropout_rate=self.hidden_dropout_rate, **self._branches_config())
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
