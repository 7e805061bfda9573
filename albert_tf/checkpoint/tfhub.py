"""TF-Hub / Kaggle ALBERT SavedModels: the `albert_en_*` family, as Model Garden's
export_tfhub writes it.

A SavedModel directory (no config file):

  saved_model.pb, variables/          the encoder; called with a dict of int32
                                      input_word_ids / input_mask / input_type_ids
                                      [B, T], it returns pooled_output [B, H],
                                      sequence_output [B, T, H] and encoder_outputs
                                      (one [B, T, H] per layer); `.mlm` (when exported
                                      with it) adds the masked-LM head
  assets/30k-clean.model              the SentencePiece model

It is recognised by `saved_model.pb` beside `variables/` (`formats.FORMATS`).

What albert-tf makes of it, from the SavedModel itself and never from constructor
defaults:

* the weights: variables/ is an object-based checkpoint, read through its object graph
  as a Model Garden checkpoint is (`model_garden.read_object_graph`,
  MODEL_GARDEN_TABLE): the exported model is Model Garden's AlbertEncoder.
* the config: the sizes from the tensors' shapes (V and E from the word table, the
  position and type tables, H and the heads from the query kernel [H, N, D], the
  intermediate size from the FFN kernel [H, I]); the depth from the SavedModel's
  structure: the length of the `encoder_outputs` list its call's output signature
  declares (the shared block's depth is recorded nowhere else); the activation and
  LayerNorm epsilon are the ALBERT encoder's (tanh GELU, 1e-12), and a graph that
  computes another activation (Erf: the exact GELU; Relu, ...) is refused.
* the task: "masked_lm" when the SavedModel has the masked-LM head (`.mlm`), else
  "pretraining" (the encoder; the heads left initialised).
* the tokenizer: the single *.model in assets/, and the text as the companion
  `albert_en_preprocess` treats it: lower-cased, accents stripped
  (do_lower_case=True, keep_accents=False in the task record).

A SavedModel is data, never code: saved_model.pb is parsed as a protocol buffer (a
regular file within textio's size rule) and its graph is never loaded or run (no
tf.saved_model.load: a crafted graph could read or write files, or allocate without
bound); the variables are read by the checkpoint reader. Reading both needs
TensorFlow, imported when the config is first read.
"""

from __future__ import annotations

import functools
import logging
import os

from albert_tf.checkpoint.model_garden import (
    MODEL_GARDEN_TABLE,
    model_garden_task,
    place_model_garden,
    read_object_graph,
)
from albert_tf.checkpoint.opened import TensorIndexCheckpoint
from albert_tf.checkpoint.readers import SAVED_MODEL_FILE, CheckpointError, TensorSource
from albert_tf.checkpoint.task_record import TaskRecord
from albert_tf.checkpoint.tokenizer_files import DEFAULT_OPTIONS, find_spm_model
from albert_tf.config import AlbertConfig, ConfigError
from albert_tf.errors import UserError
from albert_tf.infra.textio import read_bytes

__all__ = ["ASSETS", "ENCODER_FIXED", "SAVED_MODEL", "VARIABLES", "TfHubCheckpoint"]

logger = logging.getLogger(__name__)

SAVED_MODEL = SAVED_MODEL_FILE
VARIABLES = "variables"
ASSETS = "assets"
# What the ALBERT encoder fixes and the SavedModel does not record: Model Garden's
# "gelu" (the tanh approximation), all layers sharing one block. Dropout is off at
# inference; the initializer is not architecture.
ENCODER_FIXED = {"hidden_act": "gelu", "num_hidden_groups": 1, "inner_group_num": 1,
                 "sharing": "all", "hidden_dropout_prob": 0.0,
                 "attention_probs_dropout_prob": 0.0}
# The tensors the sizes are read from: (name, what each axis is).
_SIZES = (("word_embeddings/embeddings", ("vocab_size", "embedding_size")),
          ("position_embedding/embeddings", ("max_position_embeddings", None)),
          ("type_embeddings/embeddings", ("type_vocab_size", None)),
          ("transformer/self_attention/query/kernel", ("hidden_size", "num_attention_heads",
                                                       None)),
          ("transformer/intermediate/kernel", (None, "intermediate_size")))
# The ops by which a graph computes each activation (`numerics.ACTIVATIONS` names): the
# tanh GELU is 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 pow(x, 3)))); the pooler's Tanh
# alone is not evidence of it.
_ACTIVATION_OPS = {"gelu_exact": ("Erf",), "relu": ("Relu",), "silu": ("Sigmoid",),
                   "gelu": ("Pow", "Tanh")}


class TfHubCheckpoint(TensorIndexCheckpoint):
    """A TF-Hub ALBERT SavedModel directory (see the module docstring)."""

    format = "tfhub"
    expects = f"{SAVED_MODEL} + {VARIABLES}/ (TF-Hub SavedModel)"

    @classmethod
    def detect(cls, path: str) -> bool:
        return (os.path.isfile(os.path.join(path, SAVED_MODEL))
                and os.path.isdir(os.path.join(path, VARIABLES)))

    @property
    def config_path(self) -> str:
        return os.path.join(self.path, SAVED_MODEL)

    @functools.cached_property
    def _shipped_vocabulary(self) -> str | None:
        return find_spm_model(os.path.join(self.path, ASSETS))

    def _read_tensors(self) -> TensorSource:
        return read_object_graph(os.path.join(self.path, VARIABLES, VARIABLES), self.format)

    # ------------------------------------------------------------ config
    def _read_config(self) -> AlbertConfig:
        sizes = _sizes(self._tensors(), self.path)
        meta_graph = _read_meta_graph(self.config_path)
        sizes["num_hidden_layers"] = _depth(meta_graph, self.config_path)
        _check_activation(meta_graph, self.config_path)
        try:
            return AlbertConfig(**sizes, **ENCODER_FIXED)
        except ConfigError as e:
            raise CheckpointError(f"{self.path}: {e}") from None

    # ------------------------------------------------------------ task, weights
    def _read_task_record(self) -> TaskRecord:
        return TaskRecord.create(model_garden_task(self._tensors().shapes), source=self.path,
                                 **DEFAULT_OPTIONS)

    def _table(self, source: TensorSource):
        return MODEL_GARDEN_TABLE

    def _place(self, model, source: TensorSource, rows: list, **kwargs) -> list[str]:
        return place_model_garden(model, source, self.path, rows, **kwargs)


def _sizes(source: TensorSource, path: str) -> dict[str, int]:
    """The config's sizes from the tensor shapes (`_SIZES`)."""
    sizes: dict[str, int] = {}
    missing = [name for name, _ in _SIZES if name not in source.shapes]
    if missing:
        raise CheckpointError(f"{path}: a SavedModel, but not an ALBERT encoder of Model "
                              f"Garden: it has no {', '.join(missing)} "
                              f"({len(source.shapes)} variables)")
    for name, axes in _SIZES:
        shape = source.shapes[name]
        if len(shape) != len(axes):
            raise CheckpointError(f"{path}: {name} has shape {shape}, not the "
                                  f"{len(axes)} axes of an ALBERT encoder's")
        sizes.update({field: int(n) for field, n in zip(axes, shape) if field is not None})
    return sizes


# ---------------------------------------------------------------- saved_model.pb, as data
def _read_meta_graph(path: str):
    """The MetaGraphDef of saved_model.pb, parsed from its bytes (never loaded or run)."""
    try:
        # Deferred: the protocol buffer classes are TensorFlow's, and albert_tf imports
        # no TensorFlow at module level; only this format needs them.
        from google.protobuf.message import DecodeError
        from tensorflow.core.protobuf import saved_model_pb2
    except ImportError:
        raise CheckpointError(f"{path}: reading a SavedModel needs TensorFlow, which is not "
                              "installed") from None
    try:
        saved_model = saved_model_pb2.SavedModel.FromString(read_bytes(path))
    except UserError as e:  # not a regular file, or larger than the size rule allows
        raise CheckpointError(str(e)) from None
    except OSError as e:
        raise CheckpointError(f"{path}: cannot read: {e.strerror or e}") from None
    except (DecodeError, RuntimeError, RecursionError) as e:
        raise CheckpointError(f"{path}: not a SavedModel (its bytes do not parse as one: "
                              f"{e or type(e).__name__})") from None
    if len(saved_model.meta_graphs) != 1:
        raise CheckpointError(f"{path}: a SavedModel with {len(saved_model.meta_graphs)} meta "
                              "graphs; a TF2 SavedModel has one")
    return saved_model.meta_graphs[0]


def _depth(meta_graph, path: str) -> int:
    """len(encoder_outputs) in the output signature of the root object's __call__."""
    nodes = meta_graph.object_graph_def.nodes
    functions = meta_graph.object_graph_def.concrete_functions
    call = next((child.node_id for child in (nodes[0].children if nodes else ())
                 if child.local_name == "__call__"), None)
    if call is None or call >= len(nodes) or nodes[call].WhichOneof("kind") != "function":
        raise CheckpointError(f"{path}: a SavedModel, but not an ALBERT encoder: its root "
                              "object has no __call__ function")
    depths, returns = set(), set()
    for name in nodes[call].function.concrete_functions:
        signature = functions[name].output_signature if name in functions else None
        fields = signature.dict_value.fields if signature is not None and \
            signature.HasField("dict_value") else {}
        returns.update(fields)
        outputs = fields.get("encoder_outputs")
        if "sequence_output" in fields and outputs is not None and \
                outputs.WhichOneof("kind") in ("list_value", "tuple_value"):
            values = getattr(outputs, outputs.WhichOneof("kind")).values
            depths.add(len(values))
    if not depths:
        raise CheckpointError(f"{path}: a SavedModel, but not an ALBERT encoder: its call "
                              f"returns {sorted(returns) or 'no dict'}, not sequence_output "
                              "and encoder_outputs")
    if len(depths) > 1:
        raise CheckpointError(f"{path}: its call's signatures disagree on the number of "
                              f"encoder_outputs ({', '.join(map(str, sorted(depths)))})")
    return depths.pop()


def _check_activation(meta_graph, path: str) -> None:
    """Refuses a graph that computes an activation other than the encoder's
    (ENCODER_FIXED["hidden_act"]), by the ops its functions hold (`_ACTIVATION_OPS`)."""
    graph = meta_graph.graph_def
    ops = {node.op for node in graph.node}
    ops.update(node.op for function in graph.library.function for node in function.node_def)
    expected = ENCODER_FIXED["hidden_act"]
    found = [name for name, needs in _ACTIVATION_OPS.items()
             if name != "gelu" and all(op in ops for op in needs)]
    if not found and all(op in ops for op in _ACTIVATION_OPS["gelu"]):
        found = ["gelu"]
    if found != [expected]:
        shown = ", ".join(f"{name} ({'+'.join(_ACTIVATION_OPS[name])})" for name in found)
        want = f"{expected} ({'+'.join(_ACTIVATION_OPS[expected])})"
        raise CheckpointError(f"{path}: its graph computes "
                              f"{shown or 'no activation albert-tf knows'}, not the {want} of "
                              "the ALBERT encoder albert-tf reads a SavedModel as")
