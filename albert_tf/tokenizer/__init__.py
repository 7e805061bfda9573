"""Tokenization: the Python tokenizer and the in-graph preprocessor, with the same ids.

  spm.py           `AlbertTokenizer`: the original rules on a SentencePiece model
                   (sentencepiece only, no TensorFlow), packing and truncation
  batch.py         `tok(texts, texts_pair, padding, truncation, max_length, return_tensors)`:
                   the batch call any tokenizer with encode / pack gets (a mixin)
  normalize.py     the Unicode tables both sides share (whitespace, marks, casing)
  wordpiece.py     `WordPieceTokenizer`: BERT's rules on a vocab.txt (the Chinese models)
  vocab_txt.py     `read_vocab`: vocab.txt read line by line as the original reads it
  tokenizer_json.py, json_unigram.py, json_wordpiece.py  Hugging Face's tokenizer.json
                   read and applied (what transformers 5 saves); json_graph.py in the graph
  preprocessor.py  `AlbertPreprocessor`: the same rules as TensorFlow ops, a Keras
                   layer for tf.data and SavedModels; it imports `spm`, never the reverse
  offsets.py, entity_graph.py  token offsets in the raw text and NER's windows, words and
                   entities in the graph: the served signatures' and the Python answers'
  text_inputs.py, text_answers.py  raw text for a task model's fit / predict and its
                   predict_entities, traced once (the models import them on text only)

`AlbertPreprocessor` is loaded on first use, so `from albert_tf.tokenizer import
AlbertTokenizer` works where only sentencepiece is installed.
"""

import importlib

from albert_tf.tokenizer.spm import AlbertTokenizer

__all__ = ["AlbertTokenizer", "AlbertPreprocessor"]


def __getattr__(name: str):
    # Deferred on purpose: the in-graph layer needs TensorFlow and tensorflow-text.
    if name == "AlbertPreprocessor":
        value = importlib.import_module("albert_tf.tokenizer.preprocessor").AlbertPreprocessor
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
