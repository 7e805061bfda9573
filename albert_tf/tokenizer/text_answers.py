"""Raw text in, a model's answers out, by the served graph's own functions, traced once.

`AlbertTokenClassifier.predict_entities` (`albert_tf.pipeline_answers`) answers as the
exported `serving_default(text)` answers: the text sanitized, tokenized with offsets
(`offsets.tokenize_with_offsets`), cut into windows (`entity_graph.window_spans`), and
the pieces' labels read into entities (`entity_graph.text_entities`). The model runs
between the two halves on whatever Keras backend it has:

    windows(texts) -> model inputs [W, seq_length] and each piece's end
    model(inputs)  -> logits [W, seq_length, C]       (the Keras model, any backend)
    answers(texts, ends, logits) -> ENTITY_OUTPUTS

Each half is a `tf.function` with a fixed input signature, traced once per
(preprocessor, seq_length, label names) and reused, as `text_inputs.TracedText` does
for fit and predict. Part of the in-graph tokenizer (TensorFlow at module level); the
models import it only when they are given text.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from albert_tf.tokenizer import entity_graph, offsets
from albert_tf.tokenizer.text_inputs import PreprocessorFunctions
from albert_tf.tokenizer.traced import graph_function

__all__ = ["TracedAnswers", "entity_rows", "ANSWER_CHUNK_ROWS"]

# Texts answered per call of the traced halves: bounds the graph's intermediate tensors
# on a large list (a text of any length is still one row: its windows are many).
ANSWER_CHUNK_ROWS = 256
_TEXTS = tf.TensorSpec([None], tf.string)


class TracedAnswers(PreprocessorFunctions):
    """The two halves of a token classifier's entities, traced once per (preprocessor,
    seq_length, label names): later calls with any number of texts run the graphs."""

    def windows(self, preprocessor):
        """texts [B] -> (model inputs {name: int32 [W, seq_length]}, piece ends [B, (n)])."""

        def build():
            def windows(texts):
                texts = offsets.sanitize(texts)
                ids, _, ends, _ = offsets.tokenize_with_offsets(preprocessor, texts)
                spans = entity_graph.window_spans(ids.row_lengths(),
                                                  preprocessor.seq_length - 2)
                features, _ = preprocessor.pack([entity_graph.window_pieces(ids, spans)])
                return features, ends

            return graph_function(windows, input_signature=[_TEXTS])

        return self.cached(preprocessor, ("windows",), build)

    def answers(self, preprocessor, label_names: tuple[str, ...]):
        """(texts [B], piece ends [B, (n)], window logits [W, T, C]) -> ENTITY_OUTPUTS."""
        tables = entity_graph.label_tables(label_names)

        def build():
            def answers(texts, ends, logits):
                texts = offsets.sanitize(texts)
                spans = entity_graph.window_spans(ends.row_lengths(),
                                                  preprocessor.seq_length - 2)
                windows = tf.nn.softmax(logits, -1)  # as the served model's read-out
                probabilities = entity_graph.piece_outputs(ends, spans, windows)
                label_id, _ = entity_graph.piece_labels(probabilities, ends.row_lengths())
                return entity_graph.text_entities(preprocessor, texts, ends, label_id,
                                                  probabilities, tables)

            return graph_function(answers, input_signature=[
                _TEXTS, tf.RaggedTensorSpec([None, None], tf.int64, row_splits_dtype=tf.int64),
                tf.TensorSpec([None, None, len(label_names)], tf.float32)])

        return self.cached(preprocessor, ("answers", tuple(label_names)), build)


def entity_rows(traced: TracedAnswers, preprocessor, label_names, texts: list, run) -> list:
    """The entities of each text: a list per text of {"type", "text", "start_char",
    "end_char", "score"} (characters of the text as given; malformed UTF-8 bytes count
    as the U+FFFD each becomes).

    Args:
      traced: the model's `TracedAnswers`.
      preprocessor: its `AlbertPreprocessor`.
      label_names: the classes' names (the task record's).
      texts: str or bytes, any length.
      run: model inputs {name: int32 [W, seq_length]} -> logits float32 [W, seq_length, C].
    """
    windows, answers = traced.windows(preprocessor), traced.answers(preprocessor,
                                                                     tuple(label_names))
    rows = []
    for start in range(0, len(texts), ANSWER_CHUNK_ROWS):
        chunk = tf.constant([t.encode() if isinstance(t, str) else t
                             for t in texts[start:start + ANSWER_CHUNK_ROWS]], tf.string)
        features, ends = windows(chunk)
        logits = np.asarray(run({name: value.numpy() for name, value in features.items()}),
                            np.float32)
        out = {name: value.numpy() for name, value in answers(chunk, ends, logits).items()}
        for row, count in enumerate(out["entity_count"]):
            rows.append([{"type": out["entity_type"][row, k].decode(),
                          "text": out["entity_text"][row, k].decode(),
                          "start_char": int(out["entity_start_char"][row, k]),
                          "end_char": int(out["entity_end_char"][row, k]),
                          "score": float(out["entity_score"][row, k])}
                         for k in range(int(count))])
    return rows
