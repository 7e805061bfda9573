"""One serving module per task: signatures on raw text (and on token ids) for TF Serving.

Every text signature runs the same steps in the graph: the project's
`AlbertPreprocessor` (normalise, SentencePiece, pack to `seq_length`), dynamic
padding (`text_graph.trim_padding`: each request is cut to its longest row,
rounded up to `pad_multiple`), the Keras model, and a task-specific read-out.
Classification, regression and multiple choice run the model in length groups
(`base.run_by_length`): a batch of mixed lengths pays for each group's longest row.
Every task also has a `token_ids` signature for clients that tokenize themselves.

| task | signatures | outputs (B = batch, T = padded length) |
|---|---|---|
| pretraining | serving_default(text), text_pair(text_a, text_b) | pooled_output [B,H], sequence_output [B,T,H], mean_pooled [B,H] (sentence embeddings), input_mask [B,T] |
|  | fill_mask(text with "[MASK]") | top_k_tokens, top_k_ids, top_k_scores [B,M,k]; mask_positions [B,M] |
| classification | serving_default, text_pair | probabilities [B,C], label_id [B], label [B] (+ active [B,C], multi-label) |
| token_classification (token_labels.py) | serving_default(text) | tokens, label, label_id [B,N], probabilities [B,N,C], start_char, end_char [B,N]; entity_type, entity_text, entity_start_char, entity_end_char, entity_score [B,E], entity_count [B] |
| span_beam (span_beam.py) | serving_default(question, context) | as span, + null_score_diff [B] |
| regression | serving_default, text_pair | score [B] |
| span (span.py) | serving_default(question, context) | answer, start_char, end_char, score, has_answer [B] (+ no_answer_probability, SQuAD 2.0) |
| multiple_choice | serving_default(context [B], options [B,K]) | probabilities [B,K], choice [B] |

Strings in outputs are valid UTF-8; malformed input bytes are read as U+FFFD.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from albert_tf.inputs import INPUT_NAMES
from albert_tf.pipeline_answers import MULTI_LABEL_THRESHOLD, class_probabilities, mean_pooled
from albert_tf.tokenizer.traced import graph_function

from . import text_graph
from .base import (
    IDS_SPEC,
    PAD_MULTIPLE,
    TEXT_SPEC,
    ServingModule,
    checked_inputs,
    strings,
)

TOP_K = 5  # fill_mask candidates per [MASK]


def class_outputs(logits, label_names: tf.Tensor, multi_label: bool) -> dict[str, tf.Tensor]:
    """A classifier's served outputs from its logits [B,C]: probabilities (softmax, or
    per-class sigmoids and `active` for multi_label: `pipeline_answers.class_probabilities`,
    the rule `predict_labels` answers by), label_id and the label's name."""
    logits = tf.ensure_shape(logits, [None, None])  # in-graph batching's output has no rank
    label_id = tf.argmax(logits, axis=-1, output_type=tf.int32)
    outputs = {"label_id": label_id, "label": tf.gather(label_names, label_id),
               "probabilities": class_probabilities(logits, multi_label)}
    if multi_label:
        return {**outputs, "active": outputs["probabilities"] > MULTI_LABEL_THRESHOLD}
    return outputs


def encoder_features(model, features) -> dict[str, tf.Tensor]:
    """The encoder outputs a signature serves (float32), for any model or its encoder;
    `mean_pooled` is `pipeline_answers.mean_pooled`, the rule `AlbertEncoder.embed` answers by."""
    encoder = getattr(model, "encoder", model)
    out = encoder(features, training=False)
    sequence = tf.cast(out["sequence_output"], tf.float32)
    return {"pooled_output": tf.cast(out["pooled_output"], tf.float32),
            "sequence_output": sequence,
            "mean_pooled": mean_pooled(sequence, features["input_mask"]),
            "input_mask": features["input_mask"]}


class TextTaskModule(ServingModule):
    """The signatures of a task read from one text or a pair, defined once:
    serving_default(text), text_pair(text_a, text_b) and token_ids(ids, mask, types),
    each the task's `readout` of the packed, trimmed features (with their warmup)."""

    _traced_readout = None  # `readout` as one graph function, made on first use

    def readout(self, features: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        """The task's served outputs from model inputs [B, T] (a subclass's one part)."""
        raise NotImplementedError

    def _readout(self, features: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        """`readout` as one graph function that the three signatures call: an export traces
        and writes the model's graph once instead of once per signature."""
        if self._traced_readout is None:
            self._traced_readout = graph_function(self.readout, input_signature=[
                {name: IDS_SPEC for name in features}])
        return self._traced_readout(features)

    @graph_function(input_signature=[TEXT_SPEC])
    def serve_text(self, text):
        return self._readout(self._text_features(text))

    @graph_function(input_signature=[TEXT_SPEC, TEXT_SPEC])
    def serve_pair(self, text_a, text_b):
        return self._readout(self._pair_features(text_a, text_b))

    @graph_function(input_signature=[IDS_SPEC, IDS_SPEC, IDS_SPEC])
    def serve_ids(self, input_word_ids, input_mask, input_type_ids):
        return self._readout(self._trim_ids(input_word_ids, input_mask, input_type_ids))

    def signatures(self):
        return {"serving_default": self.serve_text, "text_pair": self.serve_pair,
                "token_ids": self.serve_ids}

    warmup_examples = ServingModule.text_warmup_examples


class PretrainedModule(TextTaskModule):
    """Encoder features for text and pairs; fill_mask when the model has its MLM head."""

    def readout(self, features):
        return encoder_features(self.model, features)

    @graph_function(input_signature=[TEXT_SPEC])
    def fill_mask(self, text):
        """Top-k pieces for each "[MASK]" of each text (M = most masks in a row, >= 1).

        Rows with fewer masks are padded with mask_positions -1, top_k_ids -1,
        top_k_tokens "" and top_k_scores 0.
        """
        pre = self.preprocessor
        (text,) = checked_inputs("fill_mask", {"text": text})
        ids = text_graph.tokenize_with_masks(pre, text)
        features, _ = text_graph.pack(pre, [ids])
        features = text_graph.trim_padding(features, self.pad_multiple)
        is_mask = ((features["input_word_ids"] == pre.tokenizer.mask_id)
                   & (features["input_mask"] == 1))
        where = tf.where(is_mask)  # [N, 2] (row, position), row-major
        positions = tf.RaggedTensor.from_value_rowids(
            tf.cast(where[:, 1], tf.int32), where[:, 0], nrows=tf.shape(text, tf.int64)[0])
        has = tf.RaggedTensor.from_value_rowids(
            tf.ones_like(where[:, 0], tf.bool), where[:, 0], nrows=tf.shape(text, tf.int64)[0])
        positions, has = positions.to_tensor(-1), has.to_tensor(False)  # [B, M]
        # At least one column, so that a batch without any [MASK] (or without any
        # text) still has a well-formed gather; the column reads as "no mask".
        missing = 1 - tf.minimum(tf.shape(positions)[1], 1)
        positions = tf.pad(positions, [[0, 0], [0, missing]], constant_values=-1)
        has = tf.pad(has, [[0, 0], [0, missing]], constant_values=False)
        logits = self.model({**features, "masked_lm_positions": tf.maximum(positions, 0)},
                            training=False)["mlm_logits"]  # [B, M, V]
        scores, top_ids = tf.math.top_k(tf.nn.softmax(logits, axis=-1), k=TOP_K)
        tokens = pre.id_to_string(top_ids)
        keep = has[:, :, None]
        return {"top_k_ids": tf.where(keep, top_ids, -1),
                "top_k_tokens": tf.where(keep, tokens, ""),
                "top_k_scores": tf.where(keep, scores, 0.0),
                "mask_positions": positions}

    def signatures(self):
        sigs = super().signatures()
        if hasattr(self.model, "mlm_head"):
            sigs["fill_mask"] = self.fill_mask
        return sigs

    def warmup_examples(self):
        examples = self.text_warmup_examples()
        if "fill_mask" in self.signatures():
            examples["fill_mask"] = [{"text": strings(
                [b"The [MASK] sat on the [MASK].", b"no mask here", b"[MASK]", b""])}]
        return examples


class ClassifierModule(TextTaskModule):
    """Probabilities, predicted label id and label name for texts and pairs.

    The record's `problem_type` picks softmax (single_label) or per-class sigmoid
    (multi_label, Hugging Face's multi_label_classification) probabilities; with
    multi_label, `active` [B,C] says which classes exceed 0.5 and label is the most
    probable class. `label_names` name the classes (default "0", "1", ...).
    """

    batchable = True

    def __init__(self, model, preprocessor, record, pad_multiple=PAD_MULTIPLE):
        super().__init__(model, preprocessor, pad_multiple)
        if record.spec is not model.task_spec or record.num_classes != model.num_classes:
            raise ValueError(f"a classifier of {model.num_classes} classes needs a "
                             f"classification record of as many, not {record}")
        names = record.class_names()
        self.label_names = tf.constant(names)
        self.multi_label = record.problem_type == "multi_label"

    def readout(self, features):
        logits = self.run_rows(self.run_model,
                               features, [None, self.model.num_classes])
        return class_outputs(logits, self.label_names, self.multi_label)


class RegressorModule(TextTaskModule):
    """A score per text or pair (e.g. STS-B similarity)."""

    batchable = True

    def readout(self, features):
        return {"score": self.run_rows(self.run_model,
                                       features, [None])}


class MultipleChoiceModule(ServingModule):
    """Probabilities over K options, each packed as `[CLS] context [SEP] option [SEP]`.

    RACE-style models put the article in `context` and the question with the
    option (its blank filled, or appended after a space) in each option. As RACE
    fine-tuning packs it, each option keeps its last `max_qa_length` tokens (from
    the model's task record) and the context is cut to fill the rest.
    """

    batchable = True

    def __init__(self, model, preprocessor, record, pad_multiple=PAD_MULTIPLE):
        super().__init__(model, preprocessor, pad_multiple)
        if record.spec is not model.task_spec:
            raise ValueError(f"a {model.task} model needs a {model.task} record, "
                             f"not {record.task!r}")
        self.max_qa_length = record.max_qa_length  # pack_choices caps it at seq_length - 3

    def _choose(self, features):
        logits = self.run_rows(self.run_model,
                               features, [None, None])  # [B, K]
        return {"probabilities": tf.nn.softmax(logits, axis=-1),
                "choice": tf.argmax(logits, axis=-1, output_type=tf.int32)}

    @graph_function(input_signature=[TEXT_SPEC, tf.TensorSpec([None, None], tf.string)])
    def choose(self, context, options):
        pre = self.preprocessor
        context, options = checked_inputs("serving_default",
                                          {"context": context, "options": options},
                                          min_columns={"options": 1})
        features = pre.pack_choices(context, options, self.max_qa_length)  # [B, K, T]
        return self._choose(text_graph.trim_padding(features, self.pad_multiple))

    @graph_function(input_signature=[tf.TensorSpec([None, None, None], tf.int32)] * 3)
    def choose_ids(self, input_word_ids, input_mask, input_type_ids):
        return self._choose(self._trim_ids(input_word_ids, input_mask, input_type_ids))

    def signatures(self):
        return {"serving_default": self.choose, "token_ids": self.choose_ids}

    def warmup_examples(self):
        options = strings([[b"a cat", b"a dog", b""], ["\u00fcber \U0001F600".encode(),
                                                          b"\xff", b"yes"]])
        ids = {name: np.ones([1, 2, 3], np.int32) for name in INPUT_NAMES}
        return {"serving_default": [{"context": strings([b"Pets.", b""]), "options": options}],
                "token_ids": [ids]}
