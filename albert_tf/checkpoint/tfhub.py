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
  intermediate size from the FFN kernel [H, I]); the depth from len(encoder_outputs)
  of one call on a tiny input (the shared block's depth is recorded nowhere else);
  the activation and LayerNorm epsilon are the ALBERT encoder's (tanh GELU, 1e-12).
  After loading, the model albert-tf built is run on that input and must give the
  SavedModel's own sequence_output, or the SavedModel is refused (a model that is not
  the ALBERT encoder those sizes describe).
* the task: "masked_lm" when the SavedModel has the masked-LM head (`.mlm`), else
  "pretraining" (the encoder; the heads left initialised).
* the tokenizer: the single *.model in assets/, and the text as the companion
  `albert_en_preprocess` treats it: lower-cased, accents stripped
  (do_lower_case=True, keep_accents=False in the task record).

Loading the SavedModel for that one call needs TensorFlow, imported when the config is
first read.
"""

from __future__ import annotations

import functools
import logging
import os

import numpy as np

from albert_tf.checkpoint.model_garden import (
    model_garden_task,
    place_model_garden,
    read_object_graph,
)
from albert_tf.checkpoint.opened import TensorIndexCheckpoint
from albert_tf.checkpoint.readers import SAVED_MODEL_FILE, CheckpointError, TensorSource
from albert_tf.checkpoint.task_record import TaskRecord
from albert_tf.checkpoint.tokenizer_files import DEFAULT_OPTIONS, find_spm_model
from albert_tf.config import AlbertConfig, ConfigError
from albert_tf.inputs import INPUT_NAMES

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
# The probe: a tiny input, one padded position; its outputs are kept to check the load.
_PROBE_LENGTH = 6
# How far albert-tf's outputs on the probe may be from the SavedModel's, relative to
# their scale (float32 through different kernels: ~1e-6 in practice).
_PROBE_TOLERANCE = 1e-3


class TfHubCheckpoint(TensorIndexCheckpoint):
    """A TF-Hub ALBERT SavedModel directory (see the module docstring)."""

    format = "tfhub"
    expects = f"{SAVED_MODEL} + {VARIABLES}/ (TF-Hub SavedModel)"

    @classmethod
    def detect(cls, path: str) -> bool:
        return (os.path.isfile(os.path.join(path, SAVED_MODEL))
                and os.path.isdir(os.path.join(path, VARIABLES)))

    @functools.cached_property
    def _shipped_spm_model(self) -> str | None:
        return find_spm_model(os.path.join(self.path, ASSETS))

    def _read_tensors(self) -> TensorSource:
        return read_object_graph(os.path.join(self.path, VARIABLES, VARIABLES), self.format)

    # ------------------------------------------------------------ config
    def _read_config(self) -> AlbertConfig:
        sizes = _sizes(self._tensors(), self.path)
        sizes["num_hidden_layers"] = len(self._probe["encoder_outputs"])
        try:
            return AlbertConfig(**sizes, **ENCODER_FIXED)
        except ConfigError as e:
            raise CheckpointError(f"{self.path}: {e}") from None

    @functools.cached_property
    def _probe(self) -> dict:
        """The probe input and the SavedModel's outputs on it (one call)."""
        # Deferred: loading a SavedModel needs TensorFlow, and albert_tf imports none at
        # module level; only this format's config needs it.
        try:
            import tensorflow as tf
        except ImportError:
            raise CheckpointError(f"{self.path}: reading a SavedModel needs TensorFlow, which "
                                  "is not installed") from None
        shapes = self._tensors().shapes
        vocab = shapes.get("word_embeddings/embeddings", (2,))[0]
        types = shapes.get("type_embeddings/embeddings", (1,))[0]
        inputs = _probe_inputs(vocab, types)
        try:
            loaded = tf.saved_model.load(self.path)
            tensors = {k: tf.constant(v) for k, v in inputs.items()}
            try:
                out = loaded(tensors, training=False)  # a Keras-exported model's call
            except (TypeError, ValueError):
                out = loaded(tensors)
        except (tf.errors.OpError, ValueError, TypeError, AttributeError) as e:
            reason = (str(e).strip().splitlines() or [type(e).__name__])[0]
            raise CheckpointError(f"{self.path}: a SavedModel, but not an ALBERT encoder: "
                                  f"calling it with {', '.join(INPUT_NAMES)} fails ({reason})"
                                  ) from None
        if not isinstance(out, dict) or not isinstance(out.get("encoder_outputs"), (list, tuple)) \
                or "sequence_output" not in out:
            keys = sorted(out) if isinstance(out, dict) else type(out).__name__
            raise CheckpointError(f"{self.path}: a SavedModel, but not an ALBERT encoder: its "
                                  f"call returns {keys}, not sequence_output and encoder_outputs")
        return {"inputs": inputs, "encoder_outputs": list(out["encoder_outputs"]),
                "sequence_output": np.asarray(out["sequence_output"])}

    # ------------------------------------------------------------ task, weights
    def _read_task_record(self) -> TaskRecord:
        return TaskRecord.create(model_garden_task(self._tensors().shapes), source=self.path,
                                 **DEFAULT_OPTIONS)

    def _place(self, model, source: TensorSource) -> list[str]:
        return place_model_garden(model, source, self.path)

    def _check_loaded(self, model) -> None:
        """Refuses a SavedModel whose own outputs the model built from its weights does
        not reproduce (an activation, normalisation or wiring albert-tf does not hold)."""
        want = self._probe["sequence_output"]
        got = np.asarray(model.encoder(self._probe["inputs"])["sequence_output"])
        mask = self._probe["inputs"]["input_mask"][..., None] > 0
        diff = float(np.max(np.abs(np.where(mask, got - want, 0.0))))
        if diff > _PROBE_TOLERANCE * max(1.0, float(np.max(np.abs(want)))):
            raise CheckpointError(
                f"{self.path}: its weights fit albert-tf's ALBERT encoder, but its own outputs "
                f"differ from that model's by {diff:.3g}: it is not the ALBERT encoder "
                f"(tanh GELU, LayerNorm epsilon 1e-12, post-LN) albert-tf holds")


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


def _probe_inputs(vocab_size: int, type_vocab_size: int) -> dict[str, np.ndarray]:
    """[1, _PROBE_LENGTH] ids that vary (word and type ids within their tables), the
    last position padded."""
    positions = np.arange(_PROBE_LENGTH, dtype=np.int32)[None]
    return {"input_word_ids": (positions * 7 + 2) % max(vocab_size, 1),
            "input_mask": (positions < _PROBE_LENGTH - 1).astype(np.int32),
            "input_type_ids": (positions >= _PROBE_LENGTH // 2).astype(np.int32)
            % max(type_vocab_size, 1)}
