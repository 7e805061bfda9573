"""KerasHub ALBERT presets: the reader, and the one name table its writer shares.

A preset is a directory `save_to_preset` writes (keras-hub itself is never imported):

  config.json        {"registered_name": "keras_hub>AlbertBackbone", "config": {...}}
  model.weights.h5   the backbone's variables, in Keras 3's HDF5 layout
  tokenizer.json, assets/tokenizer/vocabulary.spm      the SentencePiece tokenizer
  metadata.json      versions, parameter count
  task.json, task.weights.h5, preprocessor.json        task presets only:
                     AlbertTextClassifier (num_classes, activation) or AlbertMaskedLM

It is told from albert-tf's own format (which also holds a model.weights.h5) by
config.json's registered name, before any other rule (`formats.FORMATS`).

What albert-tf makes of it:

* the config: KerasHub's backbone arguments under AlbertConfig's names (CONFIG_KEYS);
  KerasHub fixes what they leave out: tanh GELU, LayerNorm epsilon 1e-12 in the
  encoder, all weights of a group shared across depth. Unknown arguments, a quantized
  dtype policy, are refused, naming them.
* the task: a backbone preset is "pretraining" (its heads left initialised, as a Hugging
  Face AlbertModel); AlbertTextClassifier is "classification" (activation softmax or
  none: single_label; sigmoid: multi_label); AlbertMaskedLM is "masked_lm" with the
  head's LayerNorm epsilon 1e-5 (KerasHub's MaskedLMHead), which the task record keeps.
* the tokenizer: assets/tokenizer/vocabulary.spm, and the text as KerasHub feeds it to
  SentencePiece: not lower-cased, accents kept (do_lower_case=False,
  keep_accents=True), whatever the preset's name says; the sequence length of
  preprocessor.json, when there is one.
* the weights: read as float32 whatever dtype policy the preset declares (a bfloat16
  preset loads as KerasHub's own `from_preset` loads it); placed through
  KERAS_HUB_TABLE, every tensor that does not fit reported in one error.
"""

from __future__ import annotations

import functools
import json
import logging
import os
from typing import Any

from albert_tf import tasks
from albert_tf.checkpoint.names import table_rows
from albert_tf.checkpoint.opened import TensorIndexCheckpoint
from albert_tf.checkpoint.ours import WEIGHTS_FILE
from albert_tf.checkpoint.readers import HF_CONFIG_FILE, CheckpointError, TensorSource, read_keras_h5
from albert_tf.checkpoint.task_record import TaskRecord
from albert_tf.config import AlbertConfig, ConfigError, check_sequence_length
from albert_tf.infra.textio import json_type, read_json_object, read_text
from albert_tf.precisions import POLICIES
from albert_tf.tokenizer.kinds import TOKENIZER_JSON

__all__ = ["KerasHubCheckpoint", "KERAS_HUB_TABLE", "CONFIG_KEYS", "keras_layer_name",
           "block_fields", "BACKBONE", "CLASSIFIER", "MASKED_LM", "TOKENIZER",
           "PREPROCESSORS", "MLM_LAYER_NORM_EPSILON", "CONFIG_FILE", "TASK_FILE",
           "MODEL_WEIGHTS", "TASK_WEIGHTS", "PREPROCESSOR_FILE", "TOKENIZER_FILE",
           "METADATA_FILE", "VOCABULARY", "KERAS_HUB_OPTIONS"]

logger = logging.getLogger(__name__)

CONFIG_FILE = HF_CONFIG_FILE  # a KerasHub preset names its backbone config as Hugging Face does
TASK_FILE = "task.json"
MODEL_WEIGHTS = WEIGHTS_FILE  # Keras' name for a model's weights, as ours
TASK_WEIGHTS = "task.weights.h5"
PREPROCESSOR_FILE = "preprocessor.json"
TOKENIZER_FILE = TOKENIZER_JSON  # a KerasHub preset names its tokenizer as Hugging Face does
METADATA_FILE = "metadata.json"
VOCABULARY = "assets/tokenizer/vocabulary.spm"

# Registered names (keras.saving's "package>class").
BACKBONE = "keras_hub>AlbertBackbone"
# The KerasHub tasks albert-tf reads and writes: their entries in albert_tf.tasks name them.
KERAS_HUB_TASKS = {spec.keras_hub: spec for spec in tasks.TASKS.values() if spec.keras_hub}
CLASSIFIER = tasks.get("classification").keras_hub
MASKED_LM = tasks.get("masked_lm").keras_hub
TOKENIZER = "keras_hub>AlbertTokenizer"
PREPROCESSORS = {CLASSIFIER: "keras_hub>AlbertTextClassifierPreprocessor",
                 MASKED_LM: "keras_hub>AlbertMaskedLMPreprocessor"}
# KerasHub's MaskedLMHead LayerNorm epsilon, which AlbertMaskedLM does not change.
MLM_LAYER_NORM_EPSILON = 1e-5
# KerasHub's tokenizer feeds text to SentencePiece unchanged.
KERAS_HUB_OPTIONS = {"do_lower_case": False, "keep_accents": True}

# AlbertBackbone's arguments -> AlbertConfig's fields. "dropout" is both of ours;
# "name", "trainable" and "dtype" are not architecture.
CONFIG_KEYS = {
    "vocabulary_size": "vocab_size",
    "num_layers": "num_hidden_layers",
    "num_heads": "num_attention_heads",
    "num_groups": "num_hidden_groups",
    "num_inner_repetitions": "inner_group_num",
    "embedding_dim": "embedding_size",
    "hidden_dim": "hidden_size",
    "intermediate_dim": "intermediate_size",
    "max_sequence_length": "max_position_embeddings",
    "num_segments": "type_vocab_size",
}
_NOT_ARCHITECTURE = ("name", "trainable", "dtype")
# What AlbertBackbone fixes: tanh GELU, weights shared per group, its initializer.
FIXED = {"hidden_act": "gelu", "sharing": "all", "initializer_range": 0.02}
_FLOAT_POLICIES = POLICIES  # the dtype policies a task record may name (albert_tf.precisions)
_ACTIVATIONS = {None: "single_label", "linear": "single_label", "softmax": "single_label",
                "sigmoid": "multi_label"}

# ----------------------------------------------------------------------------------
# The name table: ours <-> KerasHub's HDF5 dataset paths.
#
# "backbone/" names a dataset of model.weights.h5, "task/" one of task.weights.h5.
# Keras names each layer's group after its class (snake case), numbering repeats
# in the order the model tracks them: dense = embedding_projection, dense_1 =
# pooled_dense; transformer_encoder_k is group g's inner layer i with
# k = g * num_inner_repetitions + i (`block_fields`). Inside a layer, vars/0 is the
# kernel (or embedding table, or LayerNorm gamma), vars/1 the bias (beta).
# Layouts as in names.py: EinsumDense attention kernels split the heads
# ("heads_out": query/key/value [H, N, D] and [N, D]; "heads_in": output [N, D, H]).
# ----------------------------------------------------------------------------------
_ENC = "backbone/layers/{encoder}/"
_ATT = _ENC + "_self_attention_layer/"
KERAS_HUB_TABLE: tuple[tuple[str, str, str], ...] = (
    ("encoder.embeddings.word_embeddings.embeddings",
     "backbone/layers/reversible_embedding/vars/0", "="),
    ("encoder.embeddings.position_embeddings.embeddings",
     "backbone/layers/position_embedding/vars/0", "="),
    ("encoder.embeddings.token_type_embeddings.embeddings",
     "backbone/layers/embedding/vars/0", "="),
    ("encoder.embeddings.layer_norm.gamma", "backbone/layers/layer_normalization/vars/0", "="),
    ("encoder.embeddings.layer_norm.beta", "backbone/layers/layer_normalization/vars/1", "="),
    ("encoder.embedding_projection.kernel", "backbone/layers/dense/vars/0", "="),
    ("encoder.embedding_projection.bias", "backbone/layers/dense/vars/1", "="),
    ("block.attention.query.kernel", _ATT + "query_dense/vars/0", "heads_out"),
    ("block.attention.query.bias", _ATT + "query_dense/vars/1", "heads_out"),
    ("block.attention.key.kernel", _ATT + "key_dense/vars/0", "heads_out"),
    ("block.attention.key.bias", _ATT + "key_dense/vars/1", "heads_out"),
    ("block.attention.value.kernel", _ATT + "value_dense/vars/0", "heads_out"),
    ("block.attention.value.bias", _ATT + "value_dense/vars/1", "heads_out"),
    ("block.attention.output_dense.kernel", _ATT + "output_dense/vars/0", "heads_in"),
    ("block.attention.output_dense.bias", _ATT + "output_dense/vars/1", "="),
    ("block.attention.layer_norm.gamma", _ENC + "_self_attention_layer_norm/vars/0", "="),
    ("block.attention.layer_norm.beta", _ENC + "_self_attention_layer_norm/vars/1", "="),
    ("block.ffn.intermediate.kernel", _ENC + "_feedforward_intermediate_dense/vars/0", "="),
    ("block.ffn.intermediate.bias", _ENC + "_feedforward_intermediate_dense/vars/1", "="),
    ("block.ffn.output_dense.kernel", _ENC + "_feedforward_output_dense/vars/0", "="),
    ("block.ffn.output_dense.bias", _ENC + "_feedforward_output_dense/vars/1", "="),
    ("block.ffn.layer_norm.gamma", _ENC + "_feedforward_layer_norm/vars/0", "="),
    ("block.ffn.layer_norm.beta", _ENC + "_feedforward_layer_norm/vars/1", "="),
    ("encoder.pooler.kernel", "backbone/layers/dense_1/vars/0", "="),
    ("encoder.pooler.bias", "backbone/layers/dense_1/vars/1", "="),
    # AlbertTextClassifier: its Dense "logits" on the pooled output (after dropout).
    ("head.dense.kernel", "task/layers/dense/vars/0", "="),
    ("head.dense.bias", "task/layers/dense/vars/1", "="),
    # AlbertMaskedLM: MaskedLMHead (dense H->E, LayerNorm, decoder tied to the tokens).
    ("mlm_head.dense.kernel", "task/layers/masked_lm_head/_intermediate_dense/vars/0", "="),
    ("mlm_head.dense.bias", "task/layers/masked_lm_head/_intermediate_dense/vars/1", "="),
    ("mlm_head.layer_norm.gamma",
     "task/layers/masked_lm_head/_intermediate_layer_norm/vars/0", "="),
    ("mlm_head.layer_norm.beta",
     "task/layers/masked_lm_head/_intermediate_layer_norm/vars/1", "="),
    ("mlm_head.output_bias", "task/layers/masked_lm_head/vars/0", "="),
)


def keras_layer_name(base: str, index: int) -> str:
    """Keras' name for the `index`-th layer of a class: base, base_1, base_2, ..."""
    return base if index == 0 else f"{base}_{index}"


def block_fields(config: AlbertConfig):
    """The `table_rows` block fields: group g, inner group i -> its transformer_encoder."""
    return lambda g, i: {"encoder": keras_layer_name(
        "transformer_encoder", g * config.inner_group_num + i)}


# ---------------------------------------------------------------------------- reading
def _read_json(path: str) -> dict:
    return read_json_object(path, CheckpointError)


def _registered_name(path: str) -> str:
    """config.json's registered name, or "" when it has none (or is no JSON object)."""
    try:
        value = json.loads(read_text(path))  # a regular file of bounded size
    except (OSError, ValueError, RecursionError):  # UserError is a ValueError
        return ""
    name = value.get("registered_name") if isinstance(value, dict) else None
    return name if isinstance(name, str) else ""


def _object(values: dict, key: str, where: str) -> dict:
    """`values[key]`, which must be a JSON object when present ({} when absent or null)."""
    value = values.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise CheckpointError(f"{where}: {key} must be an object, got {json_type(value)}")
    return value


def _policy_name(dtype: Any, where: str) -> str:
    """The dtype policy's name: a string, or Keras' serialized DTypePolicy."""
    if dtype is None:
        return "float32"
    name = dtype
    if isinstance(dtype, dict):
        name = _object(dtype, "config", f"{where}: dtype").get("name") \
            if dtype.get("class_name") == "DTypePolicy" else None
    if name not in _FLOAT_POLICIES:
        shown = dtype.get("class_name", dtype) if isinstance(dtype, dict) else dtype
        raise CheckpointError(f"{where}: dtype={shown!r} is not a float dtype policy "
                              f"({', '.join(_FLOAT_POLICIES)}); albert-tf does not read "
                              "quantized presets")
    return name


def config_from_keras_hub(values: Any, where: str) -> AlbertConfig:
    """AlbertConfig from AlbertBackbone's serialized arguments (`where`: for messages)."""
    if not isinstance(values, dict):
        raise CheckpointError(f"{where}: expected an object of AlbertBackbone arguments")
    unknown = sorted(set(values) - set(CONFIG_KEYS) - {"dropout", *_NOT_ARCHITECTURE})
    if unknown:
        raise CheckpointError(f"{where}: unknown AlbertBackbone argument(s) {', '.join(unknown)}"
                              " (albert-tf cannot hold them)")
    missing = sorted(k for k in CONFIG_KEYS if k not in values)
    if missing:
        raise CheckpointError(f"{where}: missing AlbertBackbone argument(s) {', '.join(missing)}")
    policy = _policy_name(values.get("dtype"), where)
    if policy != "float32":
        logger.info("%s declares dtype %s; its weights are read as float32 (as KerasHub's "
                    "from_preset does); export --precision serves in another", where, policy)
    fields = {ours: values[theirs] for theirs, ours in CONFIG_KEYS.items()}
    dropout = values.get("dropout", 0.0)
    fields.update(FIXED, hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout)
    try:
        config = AlbertConfig.from_dict(fields)
    except ConfigError as e:
        raise CheckpointError(f"{where}: {e}") from None
    if config.num_hidden_layers % config.num_hidden_groups:
        raise CheckpointError(f"{where}: num_layers={config.num_hidden_layers} is not divisible "
                              f"by num_groups={config.num_hidden_groups}")
    return config


class KerasHubCheckpoint(TensorIndexCheckpoint):
    """A KerasHub ALBERT preset directory (see the module docstring)."""

    format = "kerashub"
    expects = f'{CONFIG_FILE} registered as "{BACKBONE}" (KerasHub)'

    @classmethod
    def detect(cls, path: str) -> bool:
        # Reads config.json's registered name: a preset also holds a model.weights.h5,
        # which alone would pass for albert-tf's own format.
        return os.path.isdir(path) and _registered_name(
            os.path.join(path, CONFIG_FILE)).startswith("keras_hub>")

    @property
    def config_path(self) -> str:
        return os.path.join(self.path, CONFIG_FILE)

    def _file(self, name: str) -> str:
        return os.path.join(self.path, name)

    def _task_json(self) -> dict | None:
        path = self._file(TASK_FILE)
        return _read_json(path) if os.path.lexists(path) else None

    def _read_config(self) -> AlbertConfig:
        path = self.config_path
        values = _read_json(path)
        if values.get("registered_name") != BACKBONE:
            raise CheckpointError(f"{path}: registered_name={values.get('registered_name')!r}: "
                                  f"a KerasHub preset, but not of ALBERT ({BACKBONE})")
        config = config_from_keras_hub(values.get("config"), f"{path}: config")
        task = self._task_json()
        if task is not None:  # the task's copy of the backbone must be the same model
            where = self._file(TASK_FILE)
            backbone = _object(_object(task, "config", where), "backbone", f"{where}: config")
            if backbone.get("registered_name") != BACKBONE or config_from_keras_hub(
                    backbone.get("config"), f"{self._file(TASK_FILE)}: backbone") != config:
                raise CheckpointError(f"{self._file(TASK_FILE)}: its backbone is not the one "
                                      f"{CONFIG_FILE} describes")
        return config

    def _read_task_record(self) -> TaskRecord:
        fields: dict[str, Any] = dict(KERAS_HUB_OPTIONS, seq_length=self._sequence_length())
        task = self._task_json()
        where = self._file(TASK_FILE)
        name = None if task is None else task.get("registered_name")
        settings = _object(task or {}, "config", where)
        spec = tasks.get("pretraining") if task is None else KERAS_HUB_TASKS.get(name)
        if spec is None:
            raise CheckpointError(f"{where}: registered_name={name!r} is not a task albert-tf "
                                  f"holds ({', '.join(KERAS_HUB_TASKS)})")
        if spec.classes:  # AlbertTextClassifier
            activation = settings.get("activation")
            if not (activation is None or isinstance(activation, str)) or \
                    activation not in _ACTIVATIONS:
                raise CheckpointError(f"{where}: activation={activation!r}: albert-tf's "
                                      f"classifier ends in logits, read as probabilities by "
                                      f"softmax or sigmoid; not {activation!r}")
            fields.update(num_classes=settings.get("num_classes"),
                          problem_type=_ACTIVATIONS[activation])
        if "mlm_layer_norm_epsilon" in spec.fields:  # AlbertMaskedLM
            fields["mlm_layer_norm_epsilon"] = MLM_LAYER_NORM_EPSILON
        return TaskRecord.create(spec.name, source=where if task is not None else self.path,
                                 **fields)

    def _sequence_length(self) -> int | None:
        """preprocessor.json's sequence_length, checked against the position table."""
        path = self._file(PREPROCESSOR_FILE)
        if not os.path.lexists(path):
            return None
        length = _object(_read_json(path), "config", path).get("sequence_length")
        if length is None:
            return None
        try:
            return check_sequence_length(length, self.config.max_position_embeddings,
                                         f"sequence_length in {path}")
        except ConfigError as e:
            raise CheckpointError(str(e)) from None

    @functools.cached_property
    def _shipped_vocabulary(self) -> str | None:
        path = self._file(VOCABULARY)
        return path if os.path.lexists(path) else None

    def _read_tensors(self) -> TensorSource:
        files = {"backbone": self._file(MODEL_WEIGHTS)}
        if not os.path.isfile(files["backbone"]):
            raise CheckpointError(f"{files['backbone']}: not found (the preset's weights)")
        if os.path.isfile(self._file(TASK_WEIGHTS)):
            files["task"] = self._file(TASK_WEIGHTS)
        return read_keras_h5(files, self.format, self.path)

    def _table(self, source: TensorSource):
        return KERAS_HUB_TABLE

    def _rows(self, model, source: TensorSource) -> list:
        return list(table_rows(model, KERAS_HUB_TABLE, block_fields(model.config)))
