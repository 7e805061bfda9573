"""The base of the serving modules: a Keras model, its preprocessor, dynamic padding.

Each task's module (`signatures.py`, `span.py`) subclasses `ServingModule` and
lists its tf.functions in `signatures()`; `warmup_examples()` gives a few real
requests per signature for TF Serving's warmup file.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from albert_tf.inputs import INPUT_NAMES

from . import text_graph

PAD_MULTIPLE = 16  # dynamic padding granularity (tokens)

TEXT_SPEC = tf.TensorSpec([None], tf.string)
IDS_SPEC = tf.TensorSpec([None, None], tf.int32)

# A few real requests per signature for the warmup file: the empty string, mixed
# scripts and invalid UTF-8 included, so every code path is loaded before traffic.
WARMUP_TEXTS = [b"", b"The quick brown fox jumps over the lazy dog.",
                "Caf\u00e9 M\u00fcller \u2014 na\u00efve \u00fcber \U0001F600".encode(),
                b"bad \xff\xfe bytes", b"A longer request. " * 40]


def strings(values) -> np.ndarray:
    """A NumPy object array of bytes: how string inputs travel."""
    return np.array(values, dtype=object)


class ServingModule:
    """Base: a Keras model, its preprocessor, and the text -> features steps.

    A plain object, not a tf.Module: the SavedModel must not track the Keras
    model as a child, or TensorFlow 1's loader (TF Serving's C++ path) finds its
    variables twice and restores the wrong copy ("Could not find variable").
    `export.save_module` saves the signatures with Keras' ExportArchive, which
    tracks exactly the variables and resources the signatures use.

    Args:
      model: the Keras model (`albert_tf.models`).
      preprocessor: an `AlbertPreprocessor` (fixes the maximum sequence length).
      pad_multiple: dynamic padding granularity; None pads every request to
        `preprocessor.seq_length`.
    """

    def __init__(self, model, preprocessor, pad_multiple: int | None = PAD_MULTIPLE):
        self.model = model
        self.preprocessor = preprocessor
        self.pad_multiple = pad_multiple

    def _features(self, segments) -> dict[str, tf.Tensor]:
        return text_graph.trim_padding(self.preprocessor(segments), self.pad_multiple)

    def _trim_ids(self, input_word_ids, input_mask, input_type_ids) -> dict[str, tf.Tensor]:
        features = dict(zip(INPUT_NAMES, (input_word_ids, input_mask, input_type_ids)))
        return text_graph.trim_padding(features, self.pad_multiple)

    def signatures(self) -> dict:
        """{signature name: tf.function with an input signature}, for tf.saved_model.save."""
        raise NotImplementedError

    def warmup_examples(self) -> dict[str, list[dict[str, np.ndarray]]]:
        """{signature name: [inputs, ...]}: a few real requests for the warmup file."""
        tok = self.preprocessor.tokenizer
        ids = {"input_word_ids": np.array([[tok.cls_id, tok.sep_id, tok.pad_id]], np.int32),
               "input_mask": np.array([[1, 1, 0]], np.int32),
               "input_type_ids": np.zeros([1, 3], np.int32)}
        return {"token_ids": [ids]}

    def text_warmup_examples(self) -> dict[str, list[dict[str, np.ndarray]]]:
        """Warmup requests for modules with `serving_default(text)` and `text_pair`."""
        texts = strings(WARMUP_TEXTS)
        return {**ServingModule.warmup_examples(self),
                "serving_default": [{"text": texts}, {"text": texts[1:2]}],
                "text_pair": [{"text_a": texts, "text_b": texts[::-1]}]}
