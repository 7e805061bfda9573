"""Factorized embedding: a V x E lookup plus positions and token types, at width E (or,
in brightmart/albert_zh's layout, the lookup projected to H first and the rest at H)."""

from __future__ import annotations

import keras
from keras import ops

from albert_tf.numerics import LAYER_NORM_EPSILON  # 1e-12, as the original checkpoints


def truncated_normal(stddev: float) -> keras.initializers.Initializer:
    return keras.initializers.TruncatedNormal(stddev=stddev)


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertEmbedding(keras.layers.Layer):
    """Word + position + token-type embeddings, LayerNorm and dropout, all at width E.

    The projection to the hidden width H is then the encoder's (the original keeps it
    under `bert/encoder/embedding_hidden_mapping_in`). With `word_projection_size` the
    projection is this layer's and comes first (brightmart/albert_zh's
    `bert/embeddings/word_embeddings_2`): the word vectors [B,T,E] times a [E,S] kernel,
    no bias, then position and token-type embeddings of width S added and the sum
    LayerNorm'ed at width S.

    Args:
      vocab_size: V, rows of the word table.
      embedding_size: E, the embedding width.
      max_position_embeddings: rows of the position table (longest sequence).
      type_vocab_size: rows of the token-type table.
      initializer_range: stddev of the truncated-normal initializer.
      dropout_rate: dropout after the LayerNorm (0 switches it off).
      word_projection_size: S, the width the word vectors are projected to before the
        sum, or None: no projection here (None also in layers saved before it existed).

    Call: `(input_word_ids [B,T] int, input_type_ids [B,T] int) -> [B,T,W]`, W = S
    when projected, else E.
    """

    def __init__(self, vocab_size: int, embedding_size: int, max_position_embeddings: int,
                 type_vocab_size: int, initializer_range: float, dropout_rate: float,
                 word_projection_size: int | None = None, **kwargs):
        super().__init__(**kwargs)
        self.vocab_size = vocab_size
        self.embedding_size = embedding_size
        self.max_position_embeddings = max_position_embeddings
        self.type_vocab_size = type_vocab_size
        self.initializer_range = initializer_range
        self.dropout_rate = dropout_rate
        self.word_projection_size = word_projection_size
        self.output_size = word_projection_size or embedding_size  # the sum's width
        init = truncated_normal(initializer_range)
        common = dict(embeddings_initializer=init, dtype=self.dtype_policy)
        self.word_embeddings = keras.layers.Embedding(
            vocab_size, embedding_size, name="word_embeddings", **common)
        self.word_projection = None
        if word_projection_size is not None:
            self.word_projection = keras.layers.Dense(
                word_projection_size, use_bias=False, kernel_initializer=init,
                name="word_projection", dtype=self.dtype_policy)
        self.position_embeddings = keras.layers.Embedding(
            max_position_embeddings, self.output_size, name="position_embeddings", **common)
        self.token_type_embeddings = keras.layers.Embedding(
            type_vocab_size, self.output_size, name="token_type_embeddings", **common)
        self.layer_norm = keras.layers.LayerNormalization(
            epsilon=LAYER_NORM_EPSILON, name="layer_norm", dtype=self.dtype_policy)
        self.dropout = keras.layers.Dropout(dropout_rate, dtype=self.dtype_policy)

    def build(self, input_shape=None):
        for table in (self.word_embeddings, self.position_embeddings, self.token_type_embeddings):
            table.build((None, None))
        if self.word_projection is not None:
            self.word_projection.build((None, None, self.embedding_size))
        self.layer_norm.build((None, None, self.output_size))
        self.built = True

    def call(self, input_word_ids, input_type_ids, training=None):
        seq_length = ops.shape(input_word_ids)[1]
        positions = ops.expand_dims(ops.arange(seq_length, dtype="int32"), 0)  # [1,T]
        words = self.word_embeddings(input_word_ids)  # [B,T,E]
        if self.word_projection is not None:
            words = self.word_projection(words)  # [B,T,S]
        x = (words                                          # [B,T,W]
             + self.position_embeddings(positions)         # [1,T,W]
             + self.token_type_embeddings(input_type_ids))  # [B,T,W]
        x = self.layer_norm(x)
        return self.dropout(x, training=training)

    def compute_output_shape(self, input_shape):
        return (*input_shape[:2], self.output_size)

    def get_config(self):
        config = super().get_config()
        config.update(vocab_size=self.vocab_size, embedding_size=self.embedding_size,
                      max_position_embeddings=self.max_position_embeddings,
                      type_vocab_size=self.type_vocab_size,
                      initializer_range=self.initializer_range,
                      dropout_rate=self.dropout_rate,
                      word_projection_size=self.word_projection_size)
        return config
