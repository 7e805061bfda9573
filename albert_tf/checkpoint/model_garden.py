"""TF Model Garden TF2 checkpoints: object-based checkpoints of its ALBERT models.

What Model Garden (tf-models-official) writes, and albert-tf reads without it:

  bert_model.ckpt-1.{index,data-*}   `tf.train.Checkpoint(encoder=AlbertEncoder).save`,
                                     as tf2_albert_encoder_checkpoint_converter.py writes
                                     the released ones; root `model/` in older releases;
                                     a pretrainer's adds its masked_lm (and heads)
  albert_config.json                 the original config (its depth is nowhere else)
  30k-clean.model                    the SentencePiece model

It is told from an original TF1 checkpoint by the `_CHECKPOINTABLE_OBJECT_GRAPH` entry
of its index, which TF1 checkpoints do not have (`formats.FORMATS` tries this rule
before TF1's).

The checkpoint keys are object paths that number the layers
(`encoder/layer_with_weights-5/_attention_layer/...`), and the numbers shift: when
E == H there is no embedding projection and every later layer moves down by one. So
the tensors are read through the object graph instead: it records each variable's own
name (`transformer/self_attention/query/kernel`), the name Model Garden's converter
itself matches, and those names are placed through MODEL_GARDEN_TABLE
(`read_object_graph`; TF-Hub SavedModels' variables/ are read the same way, `tfhub.py`).

What albert-tf makes of it:

* the config: albert_config.json. Model Garden's AlbertEncoder shares one transformer
  block across all layers: num_hidden_groups and inner_group_num must be 1.
  Its GELU is the tanh approximation ("gelu"), its LayerNorm epsilon 1e-12, as ours.
* the task: an encoder alone is "pretraining" (its heads left initialised, as a TF1
  encoder); with a masked_lm (BertPretrainerV2, or the legacy BertPretrainer's) it is
  "masked_lm", and with the legacy BertPretrainer's 2-class `classification` on the
  pooled output too (the sentence-order head) "pretraining" with both heads.
  A BertPretrainerV2 classification head (`next_sentence`, with a pooler of its own)
  has no place in albert-tf, whose sentence-order head reads the encoder's pooler:
  refused, naming it.
* the tokenizer: the single *.model beside the checkpoint, lower-cased and accents
  stripped, as the released (uncased) ALBERT models.
"""

from __future__ import annotations

import logging
import os
import re

from albert_tf.checkpoint.foreign import PrefixCheckpoint
from albert_tf.checkpoint.names import place, table_rows
from albert_tf.checkpoint.opened import TensorIndexCheckpoint
from albert_tf.checkpoint.readers import (
    CONFIG_FILE,
    CheckpointError,
    TensorSource,
    check_bundle_size,
    tf1_prefix,
)
from albert_tf.checkpoint.task_record import TaskRecord
from albert_tf.checkpoint.tokenizer_files import DEFAULT_OPTIONS
from albert_tf.config import AlbertConfig

__all__ = [
    "MODEL_GARDEN_TABLE",
    "OBJECT_GRAPH",
    "ModelGardenCheckpoint",
    "has_object_graph",
    "model_garden_task",
    "place_model_garden",
    "read_object_graph",
]

logger = logging.getLogger(__name__)

# The index entry that holds a TF2 checkpoint's object graph (TF1 checkpoints have none).
OBJECT_GRAPH = "_CHECKPOINTABLE_OBJECT_GRAPH"
# Root objects of a training checkpoint that are not the model.
_NOT_MODEL = ("save_counter", "optimizer", "global_step")
# BertPretrainerV2 builds its masked_lm inside its own name scope (its name, "bert" by
# default): `bert/cls/predictions/...`; the legacy BertPretrainer's has none. The scope
# is dropped, so both read as `cls/predictions/...`.
_PRETRAINER_SCOPE = re.compile(r"^[^/]+/(?=cls/predictions/)")

# ----------------------------------------------------------------------------------
# The name table: ours <-> the variable names Model Garden's object graph records.
#
# Rows (our variable, Model Garden's name, layout), layouts as in names.py. Model
# Garden's attention is Keras' EinsumDense: query/key/value kernels [H, N, D] and
# biases [N, D] ("heads_out"), the output kernel [N, D, H] ("heads_in"). One
# transformer block ("transformer") serves every layer. No embedding_projection when
# E == H (ours has none then either). The masked-LM head (layers.MaskedLM,
# "cls/predictions") transforms H -> E, LayerNorm, decodes with the word table; the
# legacy BertPretrainer's sentence classification (networks.Classification) is one
# Dense [H, 2] on the pooled output, as our sentence-order head.
# ----------------------------------------------------------------------------------
_BLOCK = "transformer/"
MODEL_GARDEN_TABLE: tuple[tuple[str, str, str], ...] = (
    ("encoder.embeddings.word_embeddings.embeddings", "word_embeddings/embeddings", "="),
    ("encoder.embeddings.position_embeddings.embeddings", "position_embedding/embeddings", "="),
    ("encoder.embeddings.token_type_embeddings.embeddings", "type_embeddings/embeddings", "="),
    ("encoder.embeddings.layer_norm.gamma", "embeddings/layer_norm/gamma", "="),
    ("encoder.embeddings.layer_norm.beta", "embeddings/layer_norm/beta", "="),
    ("encoder.embedding_projection.kernel", "embedding_projection/kernel", "="),
    ("encoder.embedding_projection.bias", "embedding_projection/bias", "="),
    ("block.attention.query.kernel", _BLOCK + "self_attention/query/kernel", "heads_out"),
    ("block.attention.query.bias", _BLOCK + "self_attention/query/bias", "heads_out"),
    ("block.attention.key.kernel", _BLOCK + "self_attention/key/kernel", "heads_out"),
    ("block.attention.key.bias", _BLOCK + "self_attention/key/bias", "heads_out"),
    ("block.attention.value.kernel", _BLOCK + "self_attention/value/kernel", "heads_out"),
    ("block.attention.value.bias", _BLOCK + "self_attention/value/bias", "heads_out"),
    ("block.attention.output_dense.kernel", _BLOCK + "self_attention/attention_output/kernel",
     "heads_in"),
    ("block.attention.output_dense.bias", _BLOCK + "self_attention/attention_output/bias", "="),
    ("block.attention.layer_norm.gamma", _BLOCK + "self_attention_layer_norm/gamma", "="),
    ("block.attention.layer_norm.beta", _BLOCK + "self_attention_layer_norm/beta", "="),
    ("block.ffn.intermediate.kernel", _BLOCK + "intermediate/kernel", "="),
    ("block.ffn.intermediate.bias", _BLOCK + "intermediate/bias", "="),
    ("block.ffn.output_dense.kernel", _BLOCK + "output/kernel", "="),
    ("block.ffn.output_dense.bias", _BLOCK + "output/bias", "="),
    ("block.ffn.layer_norm.gamma", _BLOCK + "output_layer_norm/gamma", "="),
    ("block.ffn.layer_norm.beta", _BLOCK + "output_layer_norm/beta", "="),
    ("encoder.pooler.kernel", "pooler_transform/kernel", "="),
    ("encoder.pooler.bias", "pooler_transform/bias", "="),
    ("mlm_head.dense.kernel", "cls/predictions/transform/dense/kernel", "="),
    ("mlm_head.dense.bias", "cls/predictions/transform/dense/bias", "="),
    ("mlm_head.layer_norm.gamma", "cls/predictions/transform/LayerNorm/gamma", "="),
    ("mlm_head.layer_norm.beta", "cls/predictions/transform/LayerNorm/beta", "="),
    ("mlm_head.output_bias", "cls/predictions/output_bias/bias", "="),
    ("sop_head.dense.kernel", "predictions/transform/logits/kernel", "="),
    ("sop_head.dense.bias", "predictions/transform/logits/bias", "="),
)
MLM_PREFIX = "cls/predictions/"
SOP_PREFIX = "predictions/transform/logits/"
# A BertPretrainerV2 ClassificationHead: its own pooler, which albert-tf cannot hold.
_OWN_POOLER = re.compile(r"/pooler_dense/(kernel|bias)$")


# ---------------------------------------------------------------------------- reading
def _tensorflow(path: str, what: str):
    try:
        # Deferred: the tensor bundle and the object graph are TensorFlow's formats,
        # and albert_tf imports no TensorFlow at module level.
        import tensorflow as tf
    except ImportError:
        raise CheckpointError(f"{path}: reading {what} needs TensorFlow, which is not "
                              "installed; convert it where TensorFlow is (albert-tf convert) "
                              "and load the result") from None
    return tf


def has_object_graph(prefix: str) -> bool:
    """Whether the checkpoint at `prefix` is object-based (TF2): its index holds
    `_CHECKPOINTABLE_OBJECT_GRAPH`. False when TensorFlow is missing or the index is
    unreadable (the TF1 reader then says why)."""
    try:
        import tensorflow as tf  # deferred: see _tensorflow
    except ImportError:
        return False
    try:
        return any(name == OBJECT_GRAPH for name, _ in tf.train.list_variables(prefix))
    except (tf.errors.OpError, ValueError):
        return False


def read_object_graph(prefix: str, kind: str) -> TensorSource:
    """The model variables of an object-based (TF2) checkpoint, named as the object
    graph records them (each variable's own name, e.g.
    `transformer/self_attention/query/kernel`), not by their positional keys.

    Every object reachable from the root is read but the root's bookkeeping
    (`save_counter`, `global_step`, the `optimizer` and its slots); a variable
    reachable by several paths (the tied word table) is read once; a pretrainer's
    name scope before `cls/predictions/` is dropped.

    Raises:
      CheckpointError: unreadable, no object graph, or two variables of one name.
    """
    tf = _tensorflow(prefix, "a TF2 checkpoint")
    # Deferred with TensorFlow: the object graph's protocol buffer is TensorFlow's.
    from google.protobuf.message import DecodeError
    from tensorflow.core.protobuf import trackable_object_graph_pb2

    try:
        reader = tf.train.load_checkpoint(prefix)
    except (tf.errors.OpError, ValueError) as e:
        raise CheckpointError(f"{prefix}: not a readable TF2 checkpoint: {e}") from None
    check_bundle_size(prefix, reader)
    try:
        graph = trackable_object_graph_pb2.TrackableObjectGraph()
        graph.ParseFromString(reader.get_tensor(OBJECT_GRAPH))
        shapes = reader.get_variable_to_shape_map()
    except (tf.errors.OpError, ValueError, IndexError, RuntimeError) as e:
        # IndexError: "Read less bytes than requested", a truncated data file
        raise CheckpointError(f"{prefix}: not a readable TF2 checkpoint: {e}") from None
    except DecodeError as e:
        raise CheckpointError(f"{prefix}: its object graph is unreadable: {e}") from None
    keys, seen = {}, set()
    todo = [c.node_id for c in graph.nodes[0].children if c.local_name not in _NOT_MODEL]
    while todo:
        node_id = todo.pop(0)
        if node_id in seen:
            continue
        seen.add(node_id)
        node = graph.nodes[node_id]
        todo += [c.node_id for c in node.children]
        for attribute in node.attributes:
            if attribute.name != "VARIABLE_VALUE" or attribute.checkpoint_key not in shapes:
                continue
            name = _PRETRAINER_SCOPE.sub("", attribute.full_name or attribute.checkpoint_key)
            if keys.get(name, attribute.checkpoint_key) != attribute.checkpoint_key:
                raise CheckpointError(f"{prefix}: two variables are named {name} "
                                      f"({keys[name]}, {attribute.checkpoint_key})")
            keys[name] = attribute.checkpoint_key

    def read(name: str):
        try:
            return reader.get_tensor(keys[name])
        except (tf.errors.OpError, IndexError, RuntimeError) as e:  # e.g. a truncated file
            raise CheckpointError(f"{prefix}: cannot read {keys[name]}: {e}") from None

    return TensorSource(prefix, kind, {n: tuple(shapes[k]) for n, k in keys.items()}, read)


# ---------------------------------------------------------------- task and placing
def model_garden_task(names) -> str:
    """The task of a Model Garden model from its variable names (see the docstring)."""
    mlm = any(n.startswith(MLM_PREFIX) for n in names)
    sop = any(n.startswith(SOP_PREFIX) for n in names)
    return "masked_lm" if mlm and not sop else "pretraining"


def place_model_garden(model, source: TensorSource, where: str, rows=None, **kwargs) -> list[str]:
    """`names.place` through MODEL_GARDEN_TABLE (`rows`: its rows for `model`, by
    default all; `kwargs`: place's); a classification head with a pooler of its own is
    named in the error (albert-tf has one pooler, the encoder's)."""
    rows = table_rows(model, MODEL_GARDEN_TABLE) if rows is None else rows
    try:
        return place(model, source, where, rows, **kwargs)
    except CheckpointError as e:
        heads = sorted({n.rsplit("/pooler_dense/", 1)[0] for n in source.shapes
                        if _OWN_POOLER.search(n)})
        if not heads:
            raise
        raise CheckpointError(
            f"{e}\n  ({', '.join(heads)}: a classification head with a pooler of its own; "
            "albert-tf's sentence-order head reads the encoder's pooled output, so it "
            "cannot hold this head)") from None


class ModelGardenCheckpoint(PrefixCheckpoint, TensorIndexCheckpoint):
    """A Model Garden TF2 checkpoint (see the module docstring): a directory with
    albert_config.json and bert_model.ckpt-*, a prefix, or its .index file."""

    format = "model_garden"
    expects = "bert_model.ckpt-*.index with an object graph (Model Garden TF2)"

    kind_name = "TF2"

    @classmethod
    def detect(cls, path: str) -> bool:
        # Reads the index (TensorFlow): TF1 checkpoints have the same files, and only
        # the object graph entry tells them apart.
        prefix = tf1_prefix(path)
        return prefix is not None and has_object_graph(prefix)

    @property
    def config_path(self) -> str:
        return os.path.join(self.directory, CONFIG_FILE)

    def _read_config(self) -> AlbertConfig:
        path = self.config_path
        if not os.path.lexists(path):
            raise CheckpointError(f"{path}: not found (a Model Garden checkpoint does not record "
                                  "its depth: put the albert_config.json it was made with "
                                  "beside it)")
        config = AlbertConfig.from_json_file(path)
        if (config.num_hidden_groups, config.inner_group_num, config.sharing) != (1, 1, "all"):
            raise CheckpointError(
                f"{path}: num_hidden_groups={config.num_hidden_groups}, inner_group_num="
                f"{config.inner_group_num}, sharing={config.sharing!r}, but Model Garden's "
                "AlbertEncoder shares one transformer block across all layers (1, 1, 'all')")
        return config

    def _read_tensors(self) -> TensorSource:
        return read_object_graph(self._prefix, self.format)

    def _read_task_record(self) -> TaskRecord:
        return TaskRecord.create(model_garden_task(self._tensors().shapes), source=self.path,
                                 **DEFAULT_OPTIONS)

    def _table(self, source: TensorSource):
        return MODEL_GARDEN_TABLE

    def _place(self, model, source: TensorSource, rows: list, **kwargs) -> list[str]:
        return place_model_garden(model, source, self.config_path, rows, **kwargs)
