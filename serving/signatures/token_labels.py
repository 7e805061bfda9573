"""Token classification served per token: each piece of the text with its label.

`serving_default(text)` packs `[CLS] text [SEP]` (the text cut to seq_length - 2
pieces), runs the token classifier and reads out, for each piece of the text
(N = most pieces in a row; shorter rows are padded):

| output | shape | padding |
|---|---|---|
| tokens | string [B,N], the SentencePiece pieces | "" |
| label | string [B,N], the label name of the best class | "" |
| label_id | int32 [B,N] | -1 |
| probabilities | float32 [B,N,C], softmax over the classes | 0 |
| start_char, end_char | int32 [B,N], the piece's characters in the raw text (a "▁word" piece includes the space before the word) | -1 |

`token_ids` takes packed ids and returns the logits and probabilities at every position.
"""

from __future__ import annotations

import tensorflow as tf

from . import offsets, text_graph
from .base import IDS_SPEC, PAD_MULTIPLE, TEXT_SPEC, ServingModule, checked_inputs


def _chars_before(texts: tf.Tensor, rows: tf.Tensor, byte_offsets: tf.Tensor) -> tf.Tensor:
    """Characters of texts[rows] before each byte offset (offsets on character boundaries)."""
    prefix = tf.strings.substr(tf.gather(texts, rows), tf.zeros_like(byte_offsets), byte_offsets)
    return tf.strings.length(prefix, unit="UTF8_CHAR")


class TokenClassifierModule(ServingModule):
    """Per-token labels with the checkpoint's label names (e.g. NER tags)."""

    def __init__(self, model, preprocessor, label_names=None, pad_multiple=PAD_MULTIPLE):
        super().__init__(model, preprocessor, pad_multiple)
        names = list(label_names) if label_names else [str(i) for i in range(model.num_classes)]
        if len(names) != model.num_classes:
            raise ValueError(f"{len(names)} label names for {model.num_classes} classes")
        self.label_names = tf.constant(names)

    @tf.function(input_signature=[TEXT_SPEC])
    def label_tokens(self, text):
        pre = self.preprocessor
        (text,) = checked_inputs("serving_default", {"text": text})
        text = text_graph.sanitize(text)
        pieces = offsets.tokenize_with_offsets(pre, text)
        room = tf.fill(tf.shape(text), pre.seq_length - 2)
        ids, starts, ends, _ = (text_graph.keep_first(x, room) for x in pieces)
        features, _ = text_graph.pack(pre, [ids])
        features = text_graph.trim_padding(features, self.pad_multiple)
        probabilities = tf.nn.softmax(self.model(features, training=False), -1)
        width = tf.cast(tf.reduce_max(tf.concat([ids.row_lengths(), [0]], 0)), tf.int32)
        probabilities = probabilities[:, 1:1 + width]  # [B,N,C]: the text's pieces
        is_token = tf.sequence_mask(ids.row_lengths(), width)  # [B,N]
        label_id = tf.where(is_token, tf.argmax(probabilities, -1, output_type=tf.int32), -1)
        rows = ids.value_rowids()
        start_char = ids.with_flat_values(_chars_before(text, rows, starts.flat_values))
        end_char = ids.with_flat_values(_chars_before(text, rows, ends.flat_values))
        return {"tokens": pre.sentencepiece.id_to_string(ids).to_tensor(""),
                "label_id": label_id,
                "label": tf.where(is_token, tf.gather(self.label_names, tf.maximum(label_id, 0)),
                                  ""),
                "probabilities": probabilities * tf.cast(is_token, tf.float32)[..., None],
                "start_char": tf.cast(start_char.to_tensor(-1), tf.int32),  # [B,N]
                "end_char": tf.cast(end_char.to_tensor(-1), tf.int32)}

    @tf.function(input_signature=[IDS_SPEC, IDS_SPEC, IDS_SPEC])
    def label_ids(self, input_word_ids, input_mask, input_type_ids):
        logits = self.model(self._trim_ids(input_word_ids, input_mask, input_type_ids),
                            training=False)
        return {"logits": logits, "probabilities": tf.nn.softmax(logits, -1)}

    def signatures(self):
        return {"serving_default": self.label_tokens, "token_ids": self.label_ids}

    def warmup_examples(self):
        examples = self.text_warmup_examples()
        del examples["text_pair"]
        return examples
