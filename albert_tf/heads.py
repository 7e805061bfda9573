"""Output heads: masked-LM (tied decoder), sentence order, and the fine-tuning heads.

Every head returns float32 logits whatever the compute dtype, so losses and
softmaxes downstream are computed in full precision under mixed precision.
"""

from __future__ import annotations

import keras
from keras import ops

from albert_tf.activations import get_activation
from albert_tf.embedding import truncated_normal
from albert_tf.numerics import LAYER_NORM_EPSILON


def gather_positions(sequence, positions):
    """`sequence` [B,T,H], `positions` [B,P] int -> [B,P,H]."""
    index = ops.expand_dims(ops.cast(positions, "int32"), -1)  # [B,P,1]
    return ops.take_along_axis(sequence, index, axis=1)


@keras.saving.register_keras_serializable(package="albert_tf")
class MaskedLMHead(keras.layers.Layer):
    """Transform (dense H->E, activation, LayerNorm) and a decoder tied to the word table.

    brightmart/albert_zh's head transforms at width H (`transform_size`) and goes back
    to E through the transpose of the embedding's [E,H] word projection, passed to the
    call: `logits = (x @ projection^T) @ word_table^T + output_bias`.

    Args:
      vocab_size: V, size of the output bias.
      embedding_size: E, width of the tied table (and of the transform by default).
      hidden_act: activation name for the transform.
      initializer_range: stddev of the truncated-normal initializer.
      layer_norm_epsilon: the transform's LayerNorm epsilon (the original's 1e-12;
        KerasHub's AlbertMaskedLM uses 1e-5).
      transform_size: S, the transform's width, or None: E (None also in heads saved
        before it existed). When S is not E the call needs `projection` [E,S].

    Call: `(sequence_output [B,T,H], masked_lm_positions [B,P], word_table [V,E],
    projection [E,S] or None) -> logits [B,P,V] float32`.
    """

    def __init__(self, vocab_size: int, embedding_size: int, hidden_act: str,
                 initializer_range: float, layer_norm_epsilon: float = LAYER_NORM_EPSILON,
                 transform_size: int | None = None, **kwargs):
        super().__init__(**kwargs)
        self.vocab_size = vocab_size
        self.embedding_size = embedding_size
        self.hidden_act = hidden_act
        self.initializer_range = initializer_range
        self.layer_norm_epsilon = layer_norm_epsilon
        self.transform_size = transform_size
        self.activation = get_activation(hidden_act)
        self.dense = keras.layers.Dense(transform_size or embedding_size,
                                        kernel_initializer=truncated_normal(initializer_range),
                                        name="dense", dtype=self.dtype_policy)
        self.layer_norm = keras.layers.LayerNormalization(
            epsilon=layer_norm_epsilon, name="layer_norm", dtype=self.dtype_policy)

    def build(self, input_shape=None):
        hidden = input_shape[-1] if input_shape else None
        if hidden is None:
            raise ValueError("MaskedLMHead.build needs the hidden width, e.g. build((None, None, H))")
        self.dense.build((None, None, hidden))
        self.layer_norm.build((None, None, self.transform_size or self.embedding_size))
        self.output_bias = self.add_weight(shape=(self.vocab_size,), initializer="zeros",
                                           name="output_bias")
        self.built = True

    def call(self, sequence_output, masked_lm_positions, word_table, projection=None):
        x = gather_positions(sequence_output, masked_lm_positions)  # [B,P,H]
        x = self.layer_norm(self.activation(self.dense(x)))  # [B,P,S]
        if projection is not None:  # back to E through the embedding's projection
            x = ops.einsum("bps,es->bpe", x, ops.cast(projection, self.compute_dtype))  # [B,P,E]
        table = ops.cast(word_table, self.compute_dtype)  # [V,E]
        logits = ops.einsum("bpe,ve->bpv", x, table)  # [B,P,V]
        return ops.cast(logits, "float32") + ops.cast(self.output_bias, "float32")

    def get_config(self):
        config = super().get_config()
        config.update(vocab_size=self.vocab_size, embedding_size=self.embedding_size,
                      hidden_act=self.hidden_act, initializer_range=self.initializer_range,
                      layer_norm_epsilon=self.layer_norm_epsilon,
                      transform_size=self.transform_size)
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


def answer_candidates_mask(input_mask, input_type_ids):
    """The positions a SQuAD 2.0 beam head may point at: [CLS] and the context.

    The original run_squad_v2 marks everything else (question, [SEP]s, padding) in
    its `p_mask`; with the packing `[CLS] question [SEP] context [SEP]` the context
    is the second segment less its closing [SEP].

    Args:
      input_mask, input_type_ids: int [B,T].

    Returns:
      float32 [B,T]: 1 where a position is masked out (the original's p_mask), else 0.
    """
    mask = ops.cast(input_mask, "int32")
    length = ops.sum(mask, axis=-1, keepdims=True)  # [B,1]
    position = ops.arange(ops.shape(mask)[-1], dtype="int32")[None, :]  # [1,T]
    context = (ops.cast(input_type_ids, "int32") == 1) & (mask == 1) & (position < length - 1)
    return 1.0 - ops.cast(context | (position == 0), "float32")


@keras.saving.register_keras_serializable(package="albert_tf")
class BeamSpanHead(keras.layers.Layer):
    """The original run_squad_v2 head: start logits, end logits conditioned on the
    start, start/end beam search, and an answer-class logit.

    As the original computes it (XLNet's SQuAD head): start log-probabilities over
    the unmasked positions; for each of the `start_n_top` best starts, the end
    logits come from `dense(H, tanh)([h_t; h_start])`, LayerNorm and `dense(1)`,
    and the `end_n_top` best ends are kept; the answer class reads
    `dense(H, tanh)([sum_t p_start(t) h_t; h_CLS])` then `dense(1, no bias)`.

    Args:
      hidden_size: H.
      start_n_top, end_n_top: beam sizes (the original's flags, 5 and 5).
      dropout_rate: dropout on the answer-class feature (the original's 0.1).
      initializer_range: stddev of the truncated-normal initializer.

    Call: `(sequence_output [B,T,H], p_mask [B,T] float) -> {"start_top_log_probs"
    [B,k1], "start_top_index" [B,k1] int32, "end_top_log_probs" [B,k1*k2],
    "end_top_index" [B,k1*k2] int32 (row i*k2+j: j-th end for start i),
    "cls_logits" [B]}` (float32). T must be at least max(k1, k2).
    """

    def __init__(self, hidden_size: int, start_n_top: int, end_n_top: int,
                 dropout_rate: float, initializer_range: float, **kwargs):
        super().__init__(**kwargs)
        self.hidden_size = hidden_size
        self.start_n_top = start_n_top
        self.end_n_top = end_n_top
        self.dropout_rate = dropout_rate
        self.initializer_range = initializer_range

        def dense(units, name, activation=None, use_bias=True):
            return keras.layers.Dense(units, activation=activation, use_bias=use_bias,
                                      kernel_initializer=truncated_normal(initializer_range),
                                      name=name, dtype=self.dtype_policy)

        self.start_dense = dense(1, "start_dense")
        self.end_dense = dense(hidden_size, "end_dense", "tanh")
        self.end_layer_norm = keras.layers.LayerNormalization(
            epsilon=LAYER_NORM_EPSILON, name="end_layer_norm", dtype=self.dtype_policy)
        self.end_output = dense(1, "end_output")
        self.answer_dense = dense(hidden_size, "answer_dense", "tanh")
        self.answer_dropout = keras.layers.Dropout(dropout_rate, dtype=self.dtype_policy)
        self.answer_output = dense(1, "answer_output", use_bias=False)

    def build(self, input_shape=None):
        h = self.hidden_size
        self.start_dense.build((None, None, h))
        self.end_dense.build((None, None, 2 * h))
        self.end_layer_norm.build((None, None, h))
        self.end_output.build((None, None, h))
        self.answer_dense.build((None, 2 * h))
        self.answer_output.build((None, h))
        self.built = True

    def call(self, sequence_output, p_mask, training=None):
        x = ops.cast(sequence_output, "float32")  # the beam runs in float32 (-1e30 masks)
        p_mask = ops.cast(p_mask, "float32")  # [B,T]
        keep = 1.0 - p_mask
        start_logits = ops.cast(ops.squeeze(self.start_dense(sequence_output), -1), "float32")
        start_masked = start_logits * keep - 1e30 * p_mask  # [B,T]
        start_log_probs = ops.log_softmax(start_masked, axis=-1)
        start_top_log_probs, start_top_index = ops.top_k(start_log_probs, self.start_n_top)
        start_top_index = ops.cast(start_top_index, "int32")  # [B,k1]
        start_features = gather_positions(x, start_top_index)  # [B,k1,H]
        shape = ops.shape(x)
        seq = ops.broadcast_to(x[:, None, :, :], (shape[0], self.start_n_top, shape[1],
                                                  shape[2]))  # [B,k1,T,H]
        starts = ops.broadcast_to(start_features[:, :, None, :], ops.shape(seq))  # [B,k1,T,H]
        end_input = ops.cast(ops.concatenate([seq, starts], axis=-1), self.compute_dtype)
        end_logits = self.end_output(self.end_layer_norm(self.end_dense(end_input)))
        end_logits = ops.cast(ops.squeeze(end_logits, -1), "float32")  # [B,k1,T]
        end_masked = end_logits * keep[:, None, :] - 1e30 * p_mask[:, None, :]
        end_log_probs = ops.log_softmax(end_masked, axis=-1)
        end_top_log_probs, end_top_index = ops.top_k(end_log_probs, self.end_n_top)  # [B,k1,k2]
        flat = (shape[0], self.start_n_top * self.end_n_top)
        start_p = ops.softmax(start_masked, axis=-1)  # [B,T]
        start_feature = ops.einsum("bt,bth->bh", start_p, x)  # [B,H]
        answer = ops.concatenate([start_feature, x[:, 0, :]], axis=-1)  # [B,2H]
        answer = self.answer_dense(ops.cast(answer, self.compute_dtype))
        answer = self.answer_dropout(answer, training=training)
        cls_logits = ops.squeeze(ops.cast(self.answer_output(answer), "float32"), -1)  # [B]
        return {"start_top_log_probs": start_top_log_probs,
                "start_top_index": start_top_index,
                "end_top_log_probs": ops.reshape(end_top_log_probs, flat),
                "end_top_index": ops.reshape(ops.cast(end_top_index, "int32"), flat),
                "cls_logits": cls_logits}

    def get_config(self):
        config = super().get_config()
        config.update(hidden_size=self.hidden_size, start_n_top=self.start_n_top,
                      end_n_top=self.end_n_top, dropout_rate=self.dropout_rate,
                      initializer_range=self.initializer_range)
        return config
