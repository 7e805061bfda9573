"""Models built from AlbertEncoder and heads: the pretrainer and the fine-tuning models.

All take a dict of int32 `input_word_ids`, `input_mask`, `input_type_ids` ([B,T];
[B,K,T] for multiple choice). A single-output task (classifier, regressor, token
classifier, multiple choice) returns its float32 array, as KerasHub's tasks do; the
others a dict of float32 outputs. What they share
(from_preset, compile defaults, raw text in fit / predict, .keras assets, export)
is `albert_tf.task_model.AlbertTaskModel`.
"""

from __future__ import annotations

import numbers
import types

import keras
from keras import ops

from albert_tf import ranges, span_answers
from albert_tf.config import MAX_CLASSES, MAX_SEQ_LENGTH, AlbertConfig, ConfigError
from albert_tf.encoder import AlbertEncoder
from albert_tf.errors import UserError
from albert_tf.heads import BeamSpanHead, ClassificationHead, MaskedLMHead, answer_candidates_mask
from albert_tf.inputs import INPUT_NAMES
from albert_tf.keras_compat import scale_loss_for_distribution
from albert_tf.numerics import LAYER_NORM_EPSILON, MASKED_LOGIT
from albert_tf.pipeline_answers import EntityAnswers, LabelAnswers
from albert_tf.task_model import AlbertTaskModel

# Dropout of the fine-tuning heads, as the original classifier (0.1).
HEAD_DROPOUT = 0.1


def _head(model: AlbertTaskModel, role: str, units: int, dropout: float | None = None,
          per_token: bool = False) -> ClassificationHead:
    """`model`'s built dense head of `units` outputs, named by its `head_layers[role]`:
    over the pooled output [B, H], or over every token [B, T, H] when `per_token`.
    `dropout` None: HEAD_DROPOUT, read when the head is made."""
    dropout = HEAD_DROPOUT if dropout is None else dropout
    head = ClassificationHead(units, dropout, model.config.initializer_range,
                              name=model.head_layers[role], dtype=model.dtype_policy)
    head.build((None, None, model.config.hidden_size) if per_token
               else (None, model.config.hidden_size))
    return head


def masked_lm_head(config: AlbertConfig, epsilon: float, name: str, dtype) -> MaskedLMHead:
    """The masked-LM head of `config`: its transform at width E, or H when "before_sum"."""
    before_sum = config.embedding_projection_position == "before_sum"
    return MaskedLMHead(config.vocab_size, config.embedding_size, config.hidden_act,
                        config.initializer_range, epsilon,
                        transform_size=config.hidden_size if before_sum else None,
                        name=name, dtype=dtype)


def _count(name: str, value, model: str, maximum: int = MAX_CLASSES) -> int:
    """A head's size (num_classes, beam sizes): an integer in [1, maximum] (the one bound,
    `config.MAX_CLASSES`), else ConfigError naming it (before a layer is built: Keras
    would answer with a message about `units`, or allocate what was asked)."""
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        value = int(value)  # NumPy integers too
    try:
        ranges.check_number(name, value, int, {ranges.MINIMUM: 1, ranges.MAXIMUM: maximum},
                            f" ({model})")
    except UserError as e:
        raise ConfigError(str(e)) from None
    return value


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertPretrainer(AlbertTaskModel):
    """Encoder + masked-LM head (tied decoder) + sentence-order head, with ALBERT's loss.

    Call: the encoder's inputs plus `masked_lm_positions` int32 [B,P] ->
    `{"mlm_logits": [B,P,V], "sop_logits": [B,2]}` (float32).

    `fit` takes labels `{"masked_lm_ids": [B,P], "masked_lm_weights": [B,P],
    "sentence_order_label": [B]}`; the loss is the weighted MLM cross-entropy
    (sum(w * ce) / (sum(w) + 1e-5), as the original) plus the SOP cross-entropy,
    and `mlm_loss`, `mlm_accuracy`, `sop_loss`, `sop_accuracy` are reported.
    With `sentence_pair_loss=False` (data without a sentence-pair objective) the
    loss is the MLM loss alone; the SOP metrics are still reported.
    """

    task = "pretraining"
    head_layers = types.MappingProxyType({"mlm_head": "mlm_head", "sop_head": "sop_head"})

    def __init__(self, config: AlbertConfig | dict, encoder: AlbertEncoder | None = None,
                 sentence_pair_loss: bool = True, **kwargs):
        super().__init__(config, encoder, **kwargs)
        self.sentence_pair_loss = bool(sentence_pair_loss)
        cfg = self.config
        self.mlm_head = masked_lm_head(cfg, LAYER_NORM_EPSILON, self.head_layers["mlm_head"],
                                       self.dtype_policy)
        self.mlm_head.build((None, None, cfg.hidden_size))
        self.sop_head = _head(self, "sop_head", 2, dropout=0.0)
        self.mlm_loss_tracker = keras.metrics.Mean(name="mlm_loss")
        self.mlm_accuracy = keras.metrics.SparseCategoricalAccuracy(name="mlm_accuracy")
        self.sop_loss_tracker = keras.metrics.Mean(name="sop_loss")
        self.sop_accuracy = keras.metrics.SparseCategoricalAccuracy(name="sop_accuracy")
        self._built()

    def call(self, inputs, training=None):
        encoded = self._encode(inputs, training)
        mlm_logits = self.mlm_head(encoded["sequence_output"], inputs["masked_lm_positions"],
                                   *self.encoder.tied_decoder())
        sop_logits = self.sop_head(encoded["pooled_output"], training=training)
        return {"mlm_logits": mlm_logits, "sop_logits": sop_logits}

    def _head_args(self):
        return {**super()._head_args(), "sentence_pair_loss": self.sentence_pair_loss}

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        ids = ops.cast(y["masked_lm_ids"], "int32")
        weights = ops.cast(y["masked_lm_weights"], "float32")
        sop_label = ops.cast(y["sentence_order_label"], "int32")
        per_token = keras.losses.sparse_categorical_crossentropy(
            ids, y_pred["mlm_logits"], from_logits=True)  # [B,P]
        mlm_loss = ops.sum(per_token * weights) / (ops.sum(weights) + 1e-5)
        sop_loss = ops.mean(keras.losses.sparse_categorical_crossentropy(
            sop_label, y_pred["sop_logits"], from_logits=True))
        self.mlm_loss_tracker.update_state(mlm_loss)
        self.mlm_accuracy.update_state(ids, y_pred["mlm_logits"], sample_weight=weights)
        self.sop_loss_tracker.update_state(sop_loss)
        self.sop_accuracy.update_state(sop_label, y_pred["sop_logits"])
        total = mlm_loss + sop_loss if self.sentence_pair_loss else mlm_loss
        if self.losses:
            total = total + ops.sum(self.losses)
        # Keras' trainer expects the per-replica loss divided by the replica count.
        return scale_loss_for_distribution(total)


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertSequenceClassifier(LabelAnswers, AlbertTaskModel):
    """Classification of one text or a text pair from the pooled output.

    Call: encoder inputs -> logits [B, num_classes] (float32); `predict_labels(texts)`
    gives the label names (`scores=True`, `top_k`: with the served probabilities).
    """

    task = "classification"
    head_layers = types.MappingProxyType({"head": "classifier"})

    def __init__(self, config, num_classes: int, encoder=None, **kwargs):
        num_classes = _count("num_classes", num_classes, type(self).__name__)
        super().__init__(config, encoder, **kwargs)
        self.num_classes = num_classes
        self.head = _head(self, "head", num_classes)
        self._built()

    def call(self, inputs, training=None):
        pooled = self._encode(inputs, training, pooled_only=True)["pooled_output"]
        return self.head(pooled, training=training)


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertSequenceRegressor(AlbertTaskModel):
    """Regression (e.g. STS-B) from the pooled output.

    Call: encoder inputs -> scores [B] (float32; Hugging Face's one-label head gives
    [B, 1]).
    """

    task = "regression"
    head_layers = types.MappingProxyType({"head": "regressor"})

    def __init__(self, config, encoder=None, **kwargs):
        super().__init__(config, encoder, **kwargs)
        self.head = _head(self, "head", 1)
        self._built()

    def call(self, inputs, training=None):
        pooled = self._encode(inputs, training, pooled_only=True)["pooled_output"]
        return ops.squeeze(self.head(pooled, training=training), -1)  # [B]


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertTokenClassifier(EntityAnswers, AlbertTaskModel):
    """Per-token classification (e.g. tagging) from the sequence output.

    Call: encoder inputs -> logits [B, T, num_classes] (float32); `predict_entities(texts)`
    gives the entities with their character offsets, as the export serves them.
    """

    task = "token_classification"
    head_layers = types.MappingProxyType({"head": "token_classifier"})
    uses_pooled_output = False

    def __init__(self, config, num_classes: int, encoder=None, **kwargs):
        num_classes = _count("num_classes", num_classes, type(self).__name__)
        super().__init__(config, encoder, **kwargs)
        self.num_classes = num_classes
        self.head = _head(self, "head", num_classes, per_token=True)
        self._built()

    def call(self, inputs, training=None):
        sequence = self._encode(inputs, training)["sequence_output"]
        return self.head(sequence, training=training)


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertSpanExtractor(span_answers.SpanAnswers, AlbertTaskModel):
    """Span extraction (SQuAD): start/end logits per token, optionally answerability.

    Padding positions get -10000 so they are never chosen.

    Call: encoder inputs -> `{"start_logits": [B,T], "end_logits": [B,T]}`, plus
    `"answerable_logits": [B]` when `answerability=True` (SQuAD 2.0). Raw text:
    `predict((questions, contexts))` and `answer(...)` (`span_answers.SpanAnswers`).
    """

    task = "span"
    head_layers = types.MappingProxyType({"span_head": "span_classifier",
                                          "answerable_head": "answerable_classifier"})

    def __init__(self, config, answerability: bool = False, encoder=None, **kwargs):
        super().__init__(config, encoder, **kwargs)
        self.answerability = bool(answerability)
        self.uses_pooled_output = self.answerability
        self.span_head = _head(self, "span_head", 2, dropout=0.0, per_token=True)
        self.answerable_head = _head(self, "answerable_head", 1) if answerability else None
        self._built()

    def call(self, inputs, training=None):
        encoded = self._encode(inputs, training)
        logits = self.span_head(encoded["sequence_output"], training=training)  # [B,T,2]
        padding = (1.0 - ops.cast(inputs["input_mask"], "float32")) * MASKED_LOGIT  # [B,T]
        outputs = {"start_logits": logits[..., 0] + padding,
                   "end_logits": logits[..., 1] + padding}
        if self.answerable_head is not None:
            outputs["answerable_logits"] = ops.squeeze(
                self.answerable_head(encoded["pooled_output"], training=training), -1)
        return outputs


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertMultipleChoice(AlbertTaskModel):
    """Multiple choice (RACE): each option is encoded with the context, one score each.

    Call: encoder inputs of shape [B,K,T] -> logits [B,K] (float32).
    """

    task = "multiple_choice"
    head_layers = types.MappingProxyType({"head": "choice_classifier"})

    def __init__(self, config, encoder=None, **kwargs):
        super().__init__(config, encoder, **kwargs)
        self.head = _head(self, "head", 1)
        self._built()

    def call(self, inputs, training=None):
        shape = ops.shape(inputs["input_word_ids"])
        batch, choices, seq = shape[0], shape[1], shape[2]
        flat = {name: ops.reshape(inputs[name], (batch * choices, seq))  # [B*K,T]
                for name in INPUT_NAMES}
        pooled = self.encoder(flat, training=training, pooled_only=True)["pooled_output"]
        scores = self.head(pooled, training=training)  # [B*K,1]
        return ops.reshape(scores, (batch, choices))  # [B,K]


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertMaskedLM(AlbertTaskModel):
    """Encoder + masked-LM head (tied decoder), without pooler use or sentence order:
    Hugging Face's AlbertForMaskedLM, KerasHub's AlbertMaskedLM.

    `mlm_layer_norm_epsilon` is the head's LayerNorm epsilon: the original's 1e-12
    (Hugging Face's), or KerasHub's 1e-5; the task record carries it
    (`TaskRecord.mlm_layer_norm_epsilon`).

    Call: the encoder's inputs plus `masked_lm_positions` int32 [B,P] ->
    `{"mlm_logits": [B,P,V]}` (float32).
    """

    task = "masked_lm"
    head_layers = types.MappingProxyType({"mlm_head": "mlm_head"})
    uses_pooled_output = False

    def __init__(self, config: AlbertConfig | dict, encoder: AlbertEncoder | None = None,
                 mlm_layer_norm_epsilon: float = LAYER_NORM_EPSILON, **kwargs):
        super().__init__(config, encoder, **kwargs)
        cfg = self.config
        self.mlm_layer_norm_epsilon = float(mlm_layer_norm_epsilon)
        self.mlm_head = masked_lm_head(cfg, self.mlm_layer_norm_epsilon,
                                       self.head_layers["mlm_head"], self.dtype_policy)
        self.mlm_head.build((None, None, cfg.hidden_size))
        self._built()

    def call(self, inputs, training=None):
        sequence = self._encode(inputs, training)["sequence_output"]
        return {"mlm_logits": self.mlm_head(sequence, inputs["masked_lm_positions"],
                                            *self.encoder.tied_decoder())}


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertSpanBeamExtractor(AlbertTaskModel):
    """SQuAD 2.0 with the original run_squad_v2 head (`heads.BeamSpanHead`).

    Inputs are packed `[CLS] question [SEP] context [SEP]`; the positions the head
    may point at ([CLS] and the context: the original's p_mask) are derived from
    `input_type_ids` and `input_mask` by `heads.answer_candidates_mask`.

    The beam sizes are plain arguments with no default here: their default, the
    original run_squad_v2's (5, 5), is the task table's (`tasks.BEAM_DEFAULTS`),
    which `open_checkpoint(path).load()` passes.

    Call: encoder inputs [B,T] (T >= max(start_n_top, end_n_top)) ->
    `{"start_top_log_probs": [B,k1], "start_top_index": [B,k1], "end_top_log_probs":
    [B,k1*k2], "end_top_index": [B,k1*k2], "cls_logits": [B]}`; cls_logits is the
    log-odds that the question has no answer.
    """

    task = "span_beam"
    head_layers = types.MappingProxyType({"beam_head": "beam_span_head"})
    uses_pooled_output = False

    def __init__(self, config, start_n_top: int, end_n_top: int, encoder=None, **kwargs):
        start_n_top = _count("start_n_top", start_n_top, type(self).__name__, MAX_SEQ_LENGTH)
        end_n_top = _count("end_n_top", end_n_top, type(self).__name__, MAX_SEQ_LENGTH)
        super().__init__(config, encoder, **kwargs)
        self.start_n_top = start_n_top
        self.end_n_top = end_n_top
        cfg = self.config
        self.beam_head = BeamSpanHead(cfg.hidden_size, start_n_top, end_n_top, HEAD_DROPOUT,
                                      cfg.initializer_range, name=self.head_layers["beam_head"],
                                      dtype=self.dtype_policy)
        self.beam_head.build()
        self._built()

    def call(self, inputs, training=None):
        sequence = self._encode(inputs, training)["sequence_output"]
        p_mask = answer_candidates_mask(inputs["input_mask"], inputs["input_type_ids"])
        return self.beam_head(sequence, p_mask, training=training)


# The one table of the task models: each recorded task's class, by its entry's name
# (`AlbertTaskModel.task_spec`). A model is found here, never by its name as a string;
# each class is its entry's `model_class` (tests/model/test_tasks.py).
TASK_MODELS = {cls.task_spec.name: cls for cls in (
    AlbertPretrainer, AlbertMaskedLM, AlbertSequenceClassifier, AlbertSequenceRegressor,
    AlbertTokenClassifier, AlbertSpanExtractor, AlbertSpanBeamExtractor, AlbertMultipleChoice)}
