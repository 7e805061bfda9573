"""Output heads: masked-LM (tied decoder), sentence order, and the fine-tuning heads.

Every head returns float32 logits whatever the compute dtype, so losses and
softmaxes downstream are computed in full precision under mixed precision.
"""

from __future__ import annotations

import keras
from keras import ops

from albert_tf.activations import get_activation
from albert_tf.embedding import LAYER_NORM_EPSILON, truncated_normal


def gather_positions(sequence, positions):
    """`sequence` [B,T,H], `positions` [B,P] int -> [B,P,H]."""
    index = ops.expand_dims(ops.cast(positions, "int32"), -1)  # [B,P,1]
    return ops.take_along_axis(sequence, index, axis=1)


@keras.saving.register_keras_serializable(package="albert_tf")
class MaskedLMHead(keras.layers.Layer):
    """Transform (dense H->E, activation, LayerNorm) and a decoder tied to the word table.

    Args:
      vocab_size: V, size of the output bias.
      embedding_size: E, width of the transform (and of the tied table).
      hidden_act: activation name for the transform.
      initializer_range: stddev of the truncated-normal initializer.

    Call: `(sequence_output [B,T,H], masked_lm_positions [B,P], word_table [V,E])
    -> logits [B,P,V] float32`.
    """

    def __init__(self, vocab_size: int, embedding_size: int, hidden_act: str,
                 initializer_range: float, **kwargs):
        super().__init__(**kwargs)
        self.vocab_size = vocab_size
        self.embedding_size = embedding_size
        self.hidden_act = hidden_act
        self.initializer_range = initializer_range
        self.activation = get_activation(hidden_act)
        self.dense = keras.layers.Dense(embedding_size,
                                        kernel_initializer=truncated_normal(initializer_range),
                                        name="dense", dtype=self.dtype_policy)
        self.layer_norm = keras.layers.LayerNormalization(
            epsilon=LAYER_NORM_EPSILON, name="layer_norm", dtype=self.dtype_policy)

    def build(self, input_shape=None):
        hidden = input_shape[-1] if input_shape else None
        if hidden is None:
            raise ValueError("MaskedLMHead.build needs the hidden width, e.g. build((None, None, H))")
        self.dense.build((None, None, hidden))
        self.layer_norm.build((None, None, self.embedding_size))
        self.output_bias = self.add_weight(shape=(self.vocab_size,), initializer="zeros",
                                           name="output_bias")
        self.built = True

    def call(self, sequence_output, masked_lm_positions, word_table):
        x = gather_positions(sequence_output, masked_lm_positions)  # [B,P,H]
        x = self.layer_norm(self.activation(self.dense(x)))  # [B,P,E]
        table = ops.cast(word_table, self.compute_dtype)  # [V,E]
        logits = ops.einsum("bpe,ve->bpv", x, table)  # [B,P,V]
        return ops.cast(logits, "float32") + ops.cast(self.output_bias, "float32")

    def get_config(self):
        config = super().get_config()
        config.update(vocab_size=self.vocab_size, embedding_size=self.embedding_size,
                      hidden_act=self.hidden_act, initializer_range=self.initializer_range)
        return config


@keras.saving.register_keras_serializable(package="albert_tf")
class ClassificationHead(keras.layers.Layer):
    """Dropout then a dense layer to `num_classes` logits, on any [..., H] input.

    Used for sentence order (2 classes on the pooled output), sequence and token
    classification, regression (1 output), spans (2 outputs per token) and choices.

    Args:
      num_classes: output width.
      dropout_rate: dropout before the dense layer (0 switches it off).
      initializer_range: stddev of the truncated-normal initializer.

    Call: `x [..., H] -> logits [..., num_classes] float32`.
    """

    def __init__(self, num_classes: int, dropout_rate: float, initializer_range: float,
                 **kwargs):
        super().__init__(**kwargs)
        self.num_classes = num_classes
        self.dropout_rate = dropout_rate
        self.initializer_range = initializer_range
        self.dropout = keras.layers.Dropout(dropout_rate, dtype=self.dtype_policy)
        self.dense = keras.layers.Dense(num_classes,
                                        kernel_initializer=truncated_normal(initializer_range),
                                        name="dense", dtype=self.dtype_policy)

    def build(self, input_shape):
        self.dense.build(input_shape)
        self.built = True

    def call(self, x, training=None):
        return ops.cast(self.dense(self.dropout(x, training=training)), "float32")

    def compute_output_shape(self, input_shape):
        return (*input_shape[:-1], self.num_classes)

    def get_config(self):
        config = super().get_config()
        config.update(num_classes=self.num_classes, dropout_rate=self.dropout_rate,
                      initializer_range=self.initializer_range)
        return config
