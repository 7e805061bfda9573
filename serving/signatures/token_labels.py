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

and the entities of each text (E = most entities in a row; `albert_tf.tokenizer.entity_graph`, which
`AlbertTokenClassifier.predict_entities` runs too): its
whitespace-separated words labelled by their first pieces, grouped by conlleval's
rule (IOB1, IOB2 and BIOES alike; the task record's `tag_scheme` names the one the
model was trained on):

| output | shape | padding |
|---|---|---|
| entity_type | string [B,E], the type (PER in B-PER) | "" |
| entity_text | string [B,E], exactly the raw text's characters start_char:end_char | "" |
| entity_start_char, entity_end_char | int32 [B,E], [start, end) in characters of the raw text | -1 |
| entity_score | float32 [B,E], the mean over its words of their label's probability | 0 |
| entity_count | int32 [B] | |

A text longer than one window (seq_length - 2 pieces) is labelled window by window,
as `finetune --task ner` evaluates it (`albert_tf.tagging.windows`, each half a window
after the last): all windows of all rows run as one batch, in groups of similar length
(`base.run_by_length`), and each piece takes its outputs from the window that gives it
the most context (`tagging.best_window`).

`token_ids` takes packed ids and returns the logits and probabilities at every position.
"""

from __future__ import annotations

import logging

import tensorflow as tf

from albert_tf.tokenizer import entity_graph, offsets
from albert_tf.tokenizer.ragged_rows import row_ids
from albert_tf.tokenizer.traced import graph_function

from . import text_graph
from .base import IDS_SPEC, PAD_MULTIPLE, TEXT_SPEC, ServingModule, checked_inputs, run_by_length

logger = logging.getLogger(__name__)


class TokenClassifierModule(ServingModule):
    """Per-token labels with the checkpoint's label names (e.g. NER tags)."""

    def __init__(self, model, preprocessor, label_names=None, pad_multiple=PAD_MULTIPLE):
        super().__init__(model, preprocessor, pad_multiple)
        names = list(label_names) if label_names else [str(i) for i in range(model.num_classes)]
        if len(names) != model.num_classes:
            raise ValueError(f"{len(names)} label names for {model.num_classes} classes")
        self.label_names = tf.constant(names)
        self.entity_tables = entity_graph.label_tables(names)
        if not entity_graph.tags_entity_ready(names):
            logger.warning("label names %s are not all O or B-/I-/E-/S-TYPE tags: the entity "
                           "outputs will be empty", names)

    @graph_function(input_signature=[TEXT_SPEC])
    def label_tokens(self, text):
        pre = self.preprocessor
        (text,) = checked_inputs("serving_default", {"text": text})
        text = text_graph.sanitize(text)
        ids, starts, ends, _ = offsets.tokenize_with_offsets(pre, text)
        probabilities = self._piece_probabilities(ids)  # [B,N,C]: the text's pieces
        label_id, is_token = entity_graph.piece_labels(probabilities, ids.row_lengths())
        rows = row_ids(ids)
        start_char = ids.with_flat_values(offsets.chars_before(text, rows, starts.flat_values))
        end_char = ids.with_flat_values(offsets.chars_before(text, rows, ends.flat_values))
        return {**entity_graph.text_entities(pre, text, ends, label_id, probabilities,
                                             self.entity_tables),
                "tokens": pre.id_to_string(ids).to_tensor(""),
                "label_id": label_id,
                "label": tf.where(is_token, tf.gather(self.label_names, tf.maximum(label_id, 0)),
                                  ""),
                "probabilities": probabilities * tf.cast(is_token, tf.float32)[..., None],
                "start_char": tf.cast(start_char.to_tensor(-1), tf.int32),  # [B,N]
                "end_char": tf.cast(end_char.to_tensor(-1), tf.int32)}

    def _piece_probabilities(self, ids: tf.RaggedTensor) -> tf.Tensor:
        """Class probabilities of every piece [B,N,C] (N = most pieces in a row; 0 past a
        row's end), each from the window that gives the piece the most context."""
        pre = self.preprocessor
        spans = entity_graph.window_spans(ids.row_lengths(), pre.seq_length - 2)
        features, _ = text_graph.pack(pre, [entity_graph.window_pieces(ids, spans)])
        classes = self.model.num_classes

        def run(group):  # [b, T'] -> probabilities [b, seq_length, C]
            out = tf.nn.softmax(self.run_model(group), -1)
            return tf.pad(out, [[0, 0], [0, pre.seq_length - tf.shape(out)[1]], [0, 0]])

        windows = run_by_length(run, features, self.pad_multiple,
                                [None, pre.seq_length, classes])  # [W, seq_length, C]
        return entity_graph.piece_outputs(ids, spans, windows)

    @graph_function(input_signature=[IDS_SPEC, IDS_SPEC, IDS_SPEC])
    def label_ids(self, input_word_ids, input_mask, input_type_ids):
        logits = self.run_model(self._trim_ids(input_word_ids, input_mask, input_type_ids))
        return {"logits": logits, "probabilities": tf.nn.softmax(logits, -1)}

    def signatures(self):
        return {"serving_default": self.label_tokens, "token_ids": self.label_ids}

    def warmup_examples(self):
        examples = self.text_warmup_examples()
        del examples["text_pair"]
        return examples
