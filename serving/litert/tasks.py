"""What a .tflite file serves per task: the module kind each task's entry names
(`albert_tf.tasks`: `litert`, or `litert_refusal`), built here.

Each kind is a `LiteModule` subclass: its signatures take raw text (`serving_default`,
`text_pair` where the SavedModel has it, `fill_mask`) and token ids (`token_ids`, LiteRT
builtins only), and return the SavedModel's output names (`serving/signatures/`), each
through the module's one `readout` of the Keras model's outputs. `REFUSED` names the
tasks whose outputs a LiteRT graph cannot give, with the reason (the task table's).

| task | signatures | outputs |
|---|---|---|
| encoder (any checkpoint), pretraining, masked_lm | serving_default, text_pair, token_ids | pooled_output [B,H], sequence_output [B,T,H], mean_pooled [B,H], input_mask [B,T] |
| pretraining, masked_lm | fill_mask | top_k_tokens, top_k_ids, top_k_scores [B,M,5], mask_positions [B,M] |
| classification | serving_default, text_pair, token_ids | probabilities [B,C], label_id [B], label [B] (+ active [B,C], multi-label) |
| regression | serving_default, text_pair, token_ids | score [B] |
| multiple_choice | serving_default(context [B], options [B,K]), token_ids [B,K,T] | probabilities [B,K], choice [B] |
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from albert_tf.inputs import INPUT_NAMES
from albert_tf.tasks import ALL_TASKS
from albert_tf.tokenizer.spm import MASK_PIECE, choice_qa_length, cut_choice
from albert_tf.tokenizer.traced import graph_function

from ..signatures.base import IDS_SPEC, TEXT_SPEC
from ..signatures.tasks import TOP_K, class_outputs, encoder_features
from .text_graph import LiteText, guarded, ids_fit, request_rank, trim_ids


class LiteModule:
    """A Keras model, its `LiteText`, and the signatures of one task's .tflite file.

    Args:
      model: the Keras model (`albert_tf.models`).
      text: `LiteText` with the checkpoint's tokenizer and the export's seq_length.
      record: the checkpoint's `TaskRecord` (label names, problem type).
    """

    pair = True  # whether the SavedModel has text_pair

    def __init__(self, model, text: LiteText, record):
        self.model = model
        self.text = text
        self.record = record

    def readout(self, features: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        """The signature's outputs from the model's inputs [B, T]."""
        raise NotImplementedError

    # Each signature refuses what the SavedModel's refuses (`signatures.base.checked_inputs`):
    # text of rank 1, pairs of equal batch sizes, token ids of one shape within the
    # vocabulary; the invoke fails (`text_graph.guard`) and `runtime.call` names why.
    @graph_function(input_signature=[TEXT_SPEC])
    def serve_text(self, text):
        return self.readout(guarded(self.text.features(text), request_rank(text) == 1))

    @graph_function(input_signature=[TEXT_SPEC, TEXT_SPEC])
    def serve_pair(self, text_a, text_b):
        ok = (request_rank(text_a) == 1) & (request_rank(text_b) == 1) & tf.equal(
            tf.size(text_a), tf.size(text_b))
        return self.readout(guarded(self.text.features(text_a, text_b), ok))

    @graph_function(input_signature=[IDS_SPEC] * 3)
    def serve_ids(self, input_word_ids, input_mask, input_type_ids):
        return self.readout(self.checked_ids(input_word_ids, input_mask, input_type_ids))

    def checked_ids(self, *inputs) -> dict[str, tf.Tensor]:
        """The token_ids inputs, guarded (`text_graph.ids_fit`) and cut to the longest row."""
        features = dict(zip(INPUT_NAMES, inputs))
        config = self.model.config
        return trim_ids(guarded(features, ids_fit(features, config.vocab_size,
                                                  config.type_vocab_size)))

    def signatures(self) -> dict:
        """{signature name: tf.function with an input signature}."""
        sigs = {"serving_default": self.serve_text, "token_ids": self.serve_ids}
        if self.pair:
            sigs["text_pair"] = self.serve_pair
        return sigs

    def parity_cases(self, texts: list[str], mask_texts: list[str]) -> list:
        """What the parity gate asks each text signature: [(signature, {input: texts},
        the model's inputs from the Python tokenizer, the read-out that gives the outputs)]."""
        tok, length = self.text.tokenizer, self.text.seq_length
        cases = [("serving_default", {"text": texts},
                  reference_features([tok.encode_pair(t, None, length) for t in texts]),
                  self.readout)]
        if self.pair:
            cases.append(("text_pair", {"text_a": texts, "text_b": texts[::-1]}, reference_features(
                [tok.encode_pair(a, b, length) for a, b in zip(texts, texts[::-1])]), self.readout))
        return cases


def reference_features(rows: list[dict[str, list[int]]]) -> dict[str, tf.Tensor]:
    """`AlbertTokenizer.pack` rows ([..., seq_length] lists) -> int32 tensors cut to the longest."""
    mask = np.array([row["input_mask"] for row in rows])
    longest = max(1, int(mask.sum(-1).max(initial=0)))
    return {name: tf.constant(np.array([row[name] for row in rows])[..., :longest], tf.int32)
            for name in INPUT_NAMES}


class EncoderLite(LiteModule):
    """Encoder features, as the SavedModel's PretrainedModule."""

    def readout(self, features):
        return encoder_features(self.model, features)


class FillMaskLite(EncoderLite):
    """Encoder features and `fill_mask`: the top-5 pieces for each "[MASK]" of a text.

    As the SavedModel: M = most masks in a row (at least 1); rows with fewer are
    padded with mask_positions -1, top_k_ids -1, top_k_tokens "" and top_k_scores 0.
    """

    def __init__(self, model, text, record):
        super().__init__(model, text, record)
        tok = text.tokenizer
        # Piece strings by id, and "" at index V for the padding (LiteRT selects no strings).
        self.pieces = tf.constant([tok.id_to_piece(i) for i in range(tok.vocab_size)] + [""])

    @graph_function(input_signature=[TEXT_SPEC])
    def serve_fill_mask(self, text):
        return self.fill_mask(guarded(self.text.pack([self.text.mask_tokenize(text)]),
                                      request_rank(text) == 1))

    def fill_mask(self, features):
        tok = self.text.tokenizer
        is_mask = tf.cast((features["input_word_ids"] == tok.mask_id)
                          & (features["input_mask"] == 1), tf.int32)  # [B, T]
        rank = tf.cumsum(is_mask, axis=1) * is_mask - 1  # [B, T]: the mask's index, else -1
        width = tf.maximum(tf.reduce_max(tf.concat([tf.reshape(rank, [-1]), [0]], 0)) + 1, 1)
        slot = tf.expand_dims(rank, 2) == tf.reshape(tf.range(width), [1, 1, -1])  # [B, T, M]
        position = tf.reshape(tf.range(tf.shape(rank)[1]), [1, -1, 1])  # [1, T, 1]
        positions = tf.reduce_max(tf.where(slot, position, -1), axis=1)  # [B, M]
        logits = self.model({**features, "masked_lm_positions": tf.maximum(positions, 0)},
                            training=False)["mlm_logits"]  # [B, M, V]
        scores, ids = tf.math.top_k(tf.nn.softmax(logits, axis=-1), k=TOP_K)
        keep = tf.expand_dims(positions, 2) >= 0  # [B, M, 1]
        ids = tf.where(keep, ids, -1)
        return {"top_k_ids": ids,
                "top_k_tokens": tf.gather(self.pieces, tf.where(keep, ids, tok.vocab_size)),
                "top_k_scores": tf.where(keep, scores, 0.0),
                "mask_positions": positions}

    def signatures(self):
        return {**super().signatures(), "fill_mask": self.serve_fill_mask}

    def parity_cases(self, texts, mask_texts):
        tok = self.text.tokenizer
        rows = []
        for text in mask_texts:  # split at "[MASK]", as the SavedModel's fill_mask
            parts = [tok.encode(part) for part in text.split(MASK_PIECE)]
            ids = [i for part in parts for i in part + [tok.mask_id]][:-1]
            rows.append(tok.pack(ids, None, self.text.seq_length))
        return [*super().parity_cases(texts, mask_texts),
                ("fill_mask", {"text": mask_texts}, reference_features(rows), self.fill_mask)]


class ClassifierLite(LiteModule):
    """Probabilities, label id and label name, as the SavedModel's ClassifierModule."""

    def __init__(self, model, text, record):
        super().__init__(model, text, record)
        names = record.class_names()
        self.label_names = tf.constant(names)
        self.multi_label = record.problem_type == "multi_label"

    def readout(self, features):
        logits = self.model(features, training=False)
        return class_outputs(logits, self.label_names, self.multi_label)


class RegressorLite(LiteModule):
    """A score per text or pair."""

    def readout(self, features):
        return {"score": self.model(features, training=False)}


class MultipleChoiceLite(LiteModule):
    """Probabilities over K options, packed as the SavedModel's MultipleChoiceModule:
    `[CLS] context [SEP] option [SEP]`, each option keeping its last `max_qa_length`
    tokens (the task record's) and the context cut to fill the rest."""

    pair = False

    def __init__(self, model, text, record):
        super().__init__(model, text, record)
        self.max_qa_length = choice_qa_length(record.max_qa_length, text.seq_length)

    def readout(self, features):
        logits = self.model(features, training=False)  # [B, K]
        return {"probabilities": tf.nn.softmax(logits, axis=-1),
                "choice": tf.argmax(logits, axis=-1, output_type=tf.int32)}

    @graph_function(input_signature=[TEXT_SPEC, tf.TensorSpec([None, None], tf.string)])
    def serve_choices(self, context, options):
        shape = tf.shape(options)  # [B, K]
        ok = (request_rank(context) == 1) & (request_rank(options) == 2) & tf.equal(
            tf.size(context), shape[0]) & (tf.size(options) > 0)
        qa, qa_splits = self.text.tokenize(tf.reshape(options, [-1]))  # [B*K] rows
        qa_lengths = qa_splits[1:] - qa_splits[:-1]
        qa_kept = tf.minimum(qa_lengths, self.max_qa_length)  # the option's last tokens
        ids, splits = self.text.tokenize(context)
        row = tf.range(shape[0] * shape[1]) // shape[1]  # the context of each option
        context_kept = tf.minimum(tf.gather(splits[1:] - splits[:-1], row),
                                  self.text.seq_length - 3 - qa_kept)
        flat = self.text.place([(ids, tf.gather(splits[:-1], row), context_kept),
                                (qa, qa_splits[1:] - qa_kept, qa_kept)])  # [B*K, T]
        return self.readout(guarded({name: tf.reshape(value, tf.stack([shape[0], shape[1], -1]))
                                     for name, value in flat.items()}, ok))

    @graph_function(input_signature=[tf.TensorSpec([None, None, None], tf.int32)] * 3)
    def serve_ids(self, input_word_ids, input_mask, input_type_ids):
        return self.readout(self.checked_ids(input_word_ids, input_mask, input_type_ids))

    def signatures(self):
        return {"serving_default": self.serve_choices, "token_ids": self.serve_ids}

    def parity_cases(self, texts, mask_texts):
        tok, length = self.text.tokenizer, self.text.seq_length
        options = [[texts[(i + k) % len(texts)] for k in (1, 2, 3)] for i in range(len(texts))]
        rows = []
        for context, choices in zip(texts, options):
            ids = tok.encode(context)
            for option in choices:  # the option's last tokens, the context cut to fit
                rows.append(tok.pack(*cut_choice(ids, tok.encode(option), length,
                                                 self.max_qa_length), length))
        rows = [{name: [r[name] for r in rows[i:i + 3]] for name in INPUT_NAMES}
                for i in range(0, len(rows), 3)]
        return [("serving_default", {"context": texts, "options": options},
                 reference_features(rows), self.readout)]


# Each LiteRT module kind a task's entry names (`albert_tf.tasks.Task.litert`).
LITE_MODULES = {
    "encoder": EncoderLite,
    "fill_mask": FillMaskLite,
    "classifier": ClassifierLite,
    "regressor": RegressorLite,
    "multiple_choice": MultipleChoiceLite,
}
# The tasks a .tflite file serves, and those it refuses with why: the task table's facts.
LITE_TASKS = {name: LITE_MODULES[spec.litert] for name, spec in ALL_TASKS.items()
              if spec.litert}
REFUSED = {name: spec.litert_refusal for name, spec in ALL_TASKS.items() if spec.litert_refusal}


def lite_module(model, tokenizer, seq_length: int, record, task: str) -> LiteModule:
    """The LiteModule of `task` ("encoder" or the model's own task) for `model`."""
    if task in REFUSED:
        raise ValueError(f"{task}: {REFUSED[task]}")
    module = LITE_TASKS[task]
    text = LiteText(tokenizer, seq_length, fill_mask=module is FillMaskLite)
    return module(model, text, record)
