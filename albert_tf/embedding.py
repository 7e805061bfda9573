"""Factorized embedding: a V x E lookup plus positions and token types, at width E."""

from __future__ import annotations

import keras
from keras import ops

from albert_tf.numerics import LAYER_NORM_EPSILON  # 1e-12, as the original checkpoints


def truncated_normal(stddev: float) -> keras.initializers.Initializer:
    return keras.initializers.TruncatedNormal(stddev=stddev)


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertEmbedding(keras.layers.Layer):
    """Word + position + token-type embeddings, LayerNorm and dropout, all at width E.

    The projection to the hidden width H is the encoder's (the original keeps it
    under `bert/encoder/embedding_hidden_mapping_in`).

    Args:
      vocab_size: V, rows of the word table.
      embedding_size: E, the embedding width.
      max_position_embeddings: rows of the position table (longest sequence).
      type_vocab_size: rows of the token-type table.
      initializer_range: stddev of the truncated-normal initializer.
      dropout_rate: dropout after the LayerNorm (0 switches it off).

    Call: `(input_word_ids [B,T] int, input_type_ids [B,T] int) -> [B,T,E]`.
    """

    def __init__(self, vocab_size: int, embedding_size: int, max_position_embeddings: int,
                 type_vocab_size: int, initializer_range: float, dropout_rate: float,
                 **kwargs):
        super().__init__(**kwargs)
        self.vocab_size = vocab_size
        self.embedding_size = embedding_size
        self.max_position_embeddings = max_position_embeddings
        self.type_vocab_size = type_vocab_size
        self.initializer_range = initializer_range
        self.dropout_rate = dropout_rate
        init = truncated_normal(initializer_range)
        common = dict(embeddings_initializer=init, dtype=self.dtype_policy)
        self.word_embeddings = keras.layers.Embedding(
            vocab_size, embedding_size, name="word_embeddings", **common)
        self.position_embeddings = keras.layers.Embedding(
            max_position_embeddings, embedding_size, name="position_embeddings", **common)
        self.token_type_embeddings = keras.layers.Embedding(
            type_vocab_size, embedding_size, name="token_type_embeddings", **common)
        self.layer_norm = keras.layers.LayerNormalization(
            epsilon=LAYER_NORM_EPSILON, name="layer_norm", dtype=self.dtype_policy)
        self.dropout = keras.layers.Dropout(dropout_rate, dtype=self.dtype_policy)

    def build(self, input_shape=None):
        for table in (self.word_embeddings, self.position_embeddings, self.token_type_embeddings):
            table.build((None, None))
        self.layer_norm.build((None, None, self.embedding_size))
        self.built = True

    def call(self, input_word_ids, input_type_ids, training=None):
        seq_length = ops.shape(input_word_ids)[1]
        positions = ops.expand_dims(ops.arange(seq_length, dtype="int32"), 0)  # [1,T]
        x = (self.word_embeddings(input_word_ids)          # [B,T,E]
             + self.position_embeddings(positions)         # [1,T,E]
             + self.token_type_embeddings(input_type_ids))  # [B,T,E]
        x = self.layer_norm(x)
        return self.dropout(x, training=training)

    def compute_output_shape(self, input_shape):
        return (*input_shape[:2], self.embedding_size)

    def get_config(self):
        config = super().get_config()
        config.update(vocab_size=self.vocab_size, embedding_size=self.embedding_size,
                      max_position_embeddings=self.max_position_embeddings,
                      type_vocab_size=self.type_vocab_size,
                      initializer_range=self.initializer_range,
                      dropout_rate=self.dropout_rate)
        return config
