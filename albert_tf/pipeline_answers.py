"""Pipeline-level answers in Python, by the rules the exported signatures serve.

Three mixins give the models answers a user reads, not arrays to decode:

* `EntityAnswers.predict_entities(texts)` (`AlbertTokenClassifier`): the entities of
  each text with their character offsets, exactly the served `serving_default(text)`'s
  entity outputs: both run `albert_tf.tokenizer.entity_graph` (windows, words, the
  first piece's label, conlleval's grouping), here through `tokenizer/text_answers`,
  traced once per model;
* `LabelAnswers.predict_labels(x, scores=True, top_k=None)` (`AlbertSequenceClassifier`):
  label names, with the served probabilities (`class_probabilities`: softmax, or
  per-class sigmoids above `MULTI_LABEL_THRESHOLD` for multi-label);
* `TextEmbeddings.embed(texts, pooling="mean")` (`AlbertEncoder`): sentence embeddings
  as the encoder export's `mean_pooled` (`mean_pooled`), `pooled_output`, or the
  [CLS] position, from raw text when the encoder has a tokenizer (`from_preset` on a
  directory with spiece.model / vocab.txt).

`class_probabilities` and `mean_pooled` are keras.ops, the one rule the served graphs
(`serving/signatures/tasks.py`) call too. TensorFlow is imported only when text is given
(`tokenizer/text_inputs`, `tokenizer/text_answers`), so the models run on any Keras
backend with token ids.
"""

from __future__ import annotations

import keras
import numpy as np
from keras import ops

__all__ = ["EntityAnswers", "LabelAnswers", "TextEmbeddings", "class_probabilities",
           "mean_pooled", "MULTI_LABEL_THRESHOLD", "POOLINGS"]

# A multi-label classifier's class is on when its sigmoid probability is above this.
MULTI_LABEL_THRESHOLD = 0.5
# embed()'s poolings: the served mean_pooled, the served pooled_output (the tanh pooler
# on [CLS]), the [CLS] position's hidden state; None: every served output.
POOLINGS = ("mean", "pooler", "cls", None)
_DEFAULT_ROWS = 32  # model rows per call when no batch_size is given (Keras' default)
# A batch is cut to its longest row rounded up to this (at most seq_length): few shapes,
# so Keras' predict function is traced a few times, not once per length.
_LENGTH_MULTIPLE = 64


def class_probabilities(logits, multi_label: bool):
    """A classifier's probabilities from its logits [B, C]: the softmax, or for a
    multi-label classifier each class's sigmoid (on: above MULTI_LABEL_THRESHOLD)."""
    return ops.sigmoid(logits) if multi_label else ops.softmax(logits, axis=-1)


def mean_pooled(sequence, input_mask):
    """Sentence embeddings [B,H]: the mean of `sequence` [B,T,H] over the positions
    `input_mask` [B,T] marks ([CLS] and [SEP] included), as sentence-transformers'
    mean pooling (its 1e-9 floor on the count: an all-padding row gives zeros)."""
    mask = ops.expand_dims(ops.cast(input_mask, sequence.dtype), -1)  # [B,T,1]
    count = ops.maximum(ops.sum(mask, axis=1), 1e-9)  # [B,1]
    return ops.sum(sequence * mask, axis=1) / count


def _text_inputs():
    # Deferred on purpose: raw text needs the in-graph preprocessor (TensorFlow).
    from albert_tf.tokenizer import text_inputs

    return text_inputs


def _text_answers():
    # Deferred on purpose, as _text_inputs.
    from albert_tf.tokenizer import text_answers

    return text_answers


def _run_trimmed(model, features: dict, batch_size: int | None, length: int,
                 keep: tuple[str, ...] | None = None):
    """`model.predict_on_batch` on [N, length] inputs, `batch_size` rows at a time, each
    batch cut to its longest row rounded up to _LENGTH_MULTIPLE (padding changes no real
    position's output) and its
    outputs [b, T', ...] padded back to `length`; NumPy, structure as the model's (a
    dict's `keep` keys only)."""
    rows = len(features["input_mask"])
    size = batch_size or _DEFAULT_ROWS
    parts = []
    for start in range(0, rows, size):
        batch = {name: value[start:start + size] for name, value in features.items()}
        longest = int(np.max(np.sum(batch["input_mask"], axis=-1)))
        longest = min(max(-(-longest // _LENGTH_MULTIPLE), 1) * _LENGTH_MULTIPLE, length)
        out = model.predict_on_batch({name: value[:, :longest] for name, value in batch.items()})
        if keep is not None:
            out = {name: out[name] for name in keep}
        parts.append(keras.tree.map_structure(
            lambda v, longest=longest: _pad_positions(np.asarray(v), longest, length), out))
    return keras.tree.map_structure(lambda *p: np.concatenate(p), *parts)


def _pad_positions(value: np.ndarray, longest: int, length: int) -> np.ndarray:
    """[b, longest, ...] -> [b, length, ...] with zeros; other shapes as they are."""
    if value.ndim < 2 or value.shape[1] != longest or longest == length:
        return value
    return np.pad(value, [(0, 0), (0, length - longest)] + [(0, 0)] * (value.ndim - 2))


def _text_list(texts, owner: str) -> list:
    """`texts` (a string, or a list / 1-D array of them) as a list; TypeError else."""
    if isinstance(texts, (str, bytes)):
        return [texts]
    values = list(texts) if isinstance(texts, (list, tuple, np.ndarray)) else None
    if values is None or not all(isinstance(t, (str, bytes)) for t in values):
        raise TypeError(f"{owner} takes a string or a list of strings, not "
                        f"{type(texts).__name__}")
    return values


class EntityAnswers:
    """`predict_entities` for a token classifier (see the module docstring)."""

    def predict_entities(self, texts, batch_size: int | None = None) -> list[list[dict]]:
        """The entities of each text, as the exported `serving_default(text)` gives them.

        The text's words (as the tokenizer separates them; every character with
        `split_characters`, every CJK ideograph with tokenize_chinese_chars) are labelled
        by their first piece and grouped by conlleval's rule (IOB1, IOB2 and BIOES
        alike); a text longer than one window (seq_length - 2 pieces) is labelled window
        by window, each piece from the window that gives it the most context. Any length.

        Args:
          texts: a string or a list of strings.
          batch_size: windows per model call (default 32).

        Returns:
          Per text, a list of {"type": "PER", "text": the raw text's characters
          start_char:end_char, "start_char", "end_char": int, "score": the mean over its
          words of their label's probability}.

        Example:
            >>> model = AlbertTokenClassifier.from_preset("ner/")
            >>> model.predict_entities("Anna flew to Berlin.")
            [[{'type': 'PER', 'text': 'Anna', 'start_char': 0, 'end_char': 4, 'score': 0.98},
              {'type': 'LOC', 'text': 'Berlin', 'start_char': 13, 'end_char': 19, ...}]]
        """
        owner = f"{type(self).__name__}.predict_entities"
        values = _text_list(texts, owner)
        if self.preprocessor is None:
            raise ValueError(f"{owner}: the model has no preprocessor for raw text: load it "
                             "with from_preset, or set model.preprocessor")
        if not values:
            return []
        pre = self.preprocessor
        if getattr(self, "_traced_answers", None) is None:
            self._traced_answers = _text_answers().TracedAnswers()
        run = lambda features: _run_trimmed(self, features, batch_size,  # noqa: E731
                                            pre.seq_length)
        return _text_answers().entity_rows(self._traced_answers, pre,
                                           self.task_record.class_names(), values, run)


class LabelAnswers:
    """`predict_labels` for a sequence classifier (see the module docstring)."""

    def predict_labels(self, x, batch_size=None, verbose=0, scores: bool = False,
                       top_k: int | None = None) -> list:
        """The label names a classifier predicts for `x` (raw text or token ids), with
        the served probabilities when asked.

        Single-label: the argmax of the logits, its probability the softmax's;
        multi-label (the record's `problem_type`): the classes whose sigmoid probability
        is above MULTI_LABEL_THRESHOLD (0.5), a list per row. The names are the task
        record's `label_names`, else "0", "1", ...

        Args:
          scores: each label as {"label": name, "score": probability}.
          top_k: the k most probable classes of each row, best first, each with its
            score (whatever the threshold; as transformers' text-classification pipeline).

        Example:
            >>> model.predict_labels(["a gripping film", "dull"])
            ['positive', 'negative']
            >>> model.predict_labels(["dull"], scores=True)
            [{'label': 'negative', 'score': 0.93}]
        """
        if top_k is not None and (isinstance(top_k, bool) or not isinstance(top_k, int)
                                  or top_k < 1):
            raise ValueError(f"top_k={top_k!r} must be a positive integer or None")
        record = self.task_record
        names = record.class_names()
        multi_label = record.problem_type == "multi_label"
        logits = np.asarray(self.predict(x, batch_size=batch_size, verbose=verbose))  # [B,C]
        probabilities = np.asarray(ops.convert_to_numpy(
            class_probabilities(ops.convert_to_tensor(logits, "float32"), multi_label)))
        scored = lambda row, c: {"label": names[c], "score": float(row[c])}  # noqa: E731
        if top_k is not None:
            return [[scored(row, c) for c in np.argsort(-row, kind="stable")[:top_k]]
                    for row in probabilities]
        if multi_label:
            on = [np.flatnonzero(row > MULTI_LABEL_THRESHOLD) for row in probabilities]
            return [[scored(row, c) if scores else names[c] for c in classes]
                    for row, classes in zip(probabilities, on)]
        best = np.argmax(logits, axis=-1)  # the served label_id
        return [scored(row, c) if scores else names[c] for row, c in zip(probabilities, best)]


class _TextSource:
    """An encoder's preprocessor, or the tokenizer files to build it from on first text:
    a plain object, which Keras does not track (the encoder saves no preprocessor)."""

    def __init__(self, preprocessor=None, files=None, seq_length: int | None = None):
        self.preprocessor, self.files, self.seq_length = preprocessor, files, seq_length

    def get(self):
        if self.preprocessor is None and self.files is not None:
            self.preprocessor = self.files.preprocessor(self.seq_length)
        return self.preprocessor


class TextEmbeddings:
    """`embed` for the encoder (see the module docstring)."""

    # The preprocessor lives in a plain holder, set by these methods, not in an attribute:
    # Keras would track a layer attribute, and its `.keras` writer reads every public one.

    def use_preprocessor(self, preprocessor) -> None:
        """Raw text through `preprocessor` (an `AlbertPreprocessor`; None: token ids only)."""
        self._text_source = _TextSource(preprocessor)

    def use_tokenizer_files(self, files, seq_length: int) -> None:
        """Raw text through `files.preprocessor(seq_length)` (`from_preset`), built on the
        first text given, so an encoder used with token ids never imports TensorFlow."""
        self._text_source = _TextSource(files=files, seq_length=seq_length)

    def text_preprocessor(self):
        """The `AlbertPreprocessor` raw text goes through, or None (token ids only)."""
        source = getattr(self, "_text_source", None)
        return None if source is None else source.get()

    def embed(self, texts, pooling: str | None = "mean", batch_size: int | None = None):
        """Sentence embeddings of raw text, as the encoder export serves them.

        Args:
          texts: a string, a list of strings, or a pair (texts_a, texts_b) of two lists
            (packed `[CLS] a [SEP] b [SEP]`, the export's `text_pair`).
          pooling: "mean": `mean_pooled` [B,H], the mean over the real tokens ([CLS] and
            [SEP] included; the served signature's); "pooler": `pooled_output` [B,H];
            "cls": the [CLS] position's hidden state [B,H]; None: a dict of the served
            outputs, sequence_output [B,seq_length,H] (read where input_mask is 1; the
            rest is padding), pooled_output, mean_pooled [B,H] and input_mask
            [B,seq_length].
          batch_size: rows per model call (default 32).

        Example:
            >>> encoder = AlbertEncoder.from_preset("albert_base_v2/")
            >>> encoder.embed(["a sentence", "another one"]).shape
            (2, 768)
        """
        if pooling not in POOLINGS:
            raise ValueError(f"pooling={pooling!r}: expected one of "
                             f"{', '.join(repr(p) for p in POOLINGS)}")
        pre = self.text_preprocessor()
        if pre is None:
            raise ValueError(f"{type(self).__name__}.embed: the encoder has no tokenizer; load "
                             "it with from_preset from a directory with spiece.model or "
                             "vocab.txt, or call encoder.use_preprocessor(AlbertPreprocessor(...))")
        text = _text_inputs()
        if hasattr(texts, "element_spec") or text.text_form(texts) not in (1, 2):
            raise TypeError(f"{type(self).__name__}.embed takes a string, a list of strings "
                            f"or a pair of lists, not {type(texts).__name__}")
        if getattr(self, "_traced_text", None) is None:
            self._traced_text = text.TracedText()
        features = text.as_arrays(self._traced_text, pre, texts)
        out = _run_trimmed(self, features, batch_size, pre.seq_length,
                           keep=("sequence_output", "pooled_output"))
        sequence = out["sequence_output"].astype(np.float32)
        served = {"sequence_output": sequence,
                  "pooled_output": out["pooled_output"].astype(np.float32),
                  "mean_pooled": np.asarray(ops.convert_to_numpy(mean_pooled(
                      ops.convert_to_tensor(sequence), ops.convert_to_tensor(
                          features["input_mask"])))),
                  "input_mask": features["input_mask"]}
        if pooling is None:
            return served
        return {"mean": served["mean_pooled"], "pooler": served["pooled_output"],
                "cls": sequence[:, 0]}[pooling]
