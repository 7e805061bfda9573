"""The one door to a checkpoint: which format a path holds, and the reader that opens it.

`FORMATS` is the table of readers, in the order their rules are tried (each rule
looks at file names only, but KerasHub's, which reads config.json's registered name,
and Model Garden's, which reads the checkpoint's index):

  kerashub   a directory whose config.json is registered as a KerasHub model
             ("keras_hub>..."; it also holds a model.weights.h5) (`kerashub.KerasHubCheckpoint`)
  albert_tf  a directory with model.weights.h5              (`ours.AlbertTfCheckpoint`)
  hf         a directory with config.json and model.safetensors, its sharded
             index or pytorch_model.bin                      (`foreign.HfCheckpoint`)
  tfhub      a SavedModel directory: saved_model.pb + variables/ (`tfhub.TfHubCheckpoint`)
  model_garden  a TF2 object-based checkpoint (bert_model.ckpt-*): as TF1's files, told
             apart by the _CHECKPOINTABLE_OBJECT_GRAPH entry of its index, so tried
             before TF1's rule                       (`model_garden.ModelGardenCheckpoint`)
  brightmart a brightmart/albert_zh checkpoint (albert_model.ckpt): TF1's files, told
             apart by its variable names (bert/encoder/layer_shared/...,
             bert/embeddings/word_embeddings_2), so tried before TF1's rule
                                                             (`brightmart.BrightmartCheckpoint`)
  tf1        a model.ckpt-* prefix, its .index file, or a directory holding
             one (the newest, or the one its `checkpoint` file names)
                                                             (`foreign.Tf1Checkpoint`)

`detect_format` applies the rules and raises the one "not a checkpoint" error;
`open_checkpoint` detects once and hands the path to that format's reader. A new
format (a KerasHub preset, a Model Garden TF2 checkpoint, a TF-Hub SavedModel) is
one more reader, a subclass of `OpenedCheckpoint` with its `detect` rule, and one
row here; export, convert and fine-tuning do not change.
"""

from __future__ import annotations

import os

from albert_tf.checkpoint.brightmart import BrightmartCheckpoint
from albert_tf.checkpoint.foreign import HfCheckpoint, Tf1Checkpoint
from albert_tf.checkpoint.hub import not_found_hint, resolve_checkpoint
from albert_tf.checkpoint.kerashub import KerasHubCheckpoint
from albert_tf.checkpoint.model_garden import ModelGardenCheckpoint
from albert_tf.checkpoint.opened import OpenedCheckpoint
from albert_tf.checkpoint.ours import AlbertTfCheckpoint
from albert_tf.checkpoint.readers import CheckpointError
from albert_tf.checkpoint.tfhub import TfHubCheckpoint

__all__ = ["FORMATS", "detect_format", "open_checkpoint"]

# KerasHub before ours: a preset holds a model.weights.h5 too, and says what it is in
# config.json. Ours next: one of our directories may also hold files another rule matches.
# Model Garden and brightmart before TF1: the same file names, told apart by the index.
FORMATS: dict[str, type[OpenedCheckpoint]] = {
    reader.format: reader for reader in (KerasHubCheckpoint, AlbertTfCheckpoint, HfCheckpoint,
                                         TfHubCheckpoint, ModelGardenCheckpoint,
                                         BrightmartCheckpoint, Tf1Checkpoint)}


def detect_format(path: str | os.PathLike) -> str:
    """Which format `path` holds: a key of FORMATS ("kerashub", "albert_tf", "hf", "tf1", ...).

    Raises:
      CheckpointError: naming `path`: it does not exist, or it is no format's checkpoint
        (the message lists what each format looks like).
    """
    path = os.fspath(path)
    for name, reader in FORMATS.items():
        if reader.detect(path):
            return name
    if not os.path.exists(path) and not os.path.exists(path + ".index"):
        raise CheckpointError(f"{path}: no such file or directory{not_found_hint(path)}")
    expected = [reader.expects for reader in FORMATS.values()]
    raise CheckpointError(f"{path}: not a checkpoint: expected {', '.join(expected[:-1])}, "
                          f"or {expected[-1]}")


def open_checkpoint(path: str | os.PathLike, task: str | None = None) -> OpenedCheckpoint:
    """Opens the checkpoint at `path`: its format detected once, nothing else read yet.

    Args:
      path: one of our directories, a Hugging Face ALBERT directory, an original
        TF1 checkpoint (directory with albert_config.json + model.ckpt-*, or prefix), a
        KerasHub preset, a Model Garden or TF-Hub directory; or a handle
        (hf://ORG/NAME[@REVISION], kaggle://OWNER/MODEL/FRAMEWORK/VARIATION[/VERSION]) or a
        released checkpoint's name (`albert-tf presets`), resolved by `hub.resolve_checkpoint`.
      task: for a TF1 checkpoint whose variables fit two of the original scripts
        (`output_weights` [1, H]: "regression" or "multiple_choice"); elsewhere, if
        given, it must be the checkpoint's task (or "encoder", which accepts any):
        `.task_record` checks it.

    Returns:
      An `OpenedCheckpoint`: `.path`, `.format`, `.config`, `.task_record`,
      `.tokenizer` / `.tokenizer_files(...)`, each read once when first asked for,
      and `.load()` for the task model.

    Raises:
      CheckpointError: `path` is not a checkpoint of any format in FORMATS.

    Example:
        >>> ckpt = open_checkpoint("albert_base/")  # albert_config.json + model.ckpt-best
        >>> ckpt.format, ckpt.config.hidden_size
        ('tf1', 768)
        >>> model = ckpt.load()
    """
    path = resolve_checkpoint(path)
    return FORMATS[detect_format(path)](path, task)
