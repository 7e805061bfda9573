"""The readers of other implementations' checkpoints: Hugging Face ALBERT and original TF1.

Both are read the same way: the config first (a bad config fails before any tensor
is read; the weights are per group shared across depth, so `sharing` must be
"all"), then the tensor index once (`readers.read_hf` / `readers.read_tf1`), from
which the task record is derived (`heads`) and into which the model's weights are
placed through NAME_TABLE (`names.place`). The index is kept until `load()` has
placed it, then let go (a pytorch_model.bin's arrays need not outlive the load).
"""

from __future__ import annotations

import abc
import os

from albert_tf.checkpoint.heads import hf_task_record, tf1_task_record
from albert_tf.checkpoint.names import format_rows
from albert_tf.checkpoint.opened import OpenedCheckpoint, TensorIndexCheckpoint
from albert_tf.checkpoint.readers import (
    CONFIG_FILE,
    HF_CONFIG_FILE,
    HF_WEIGHT_FILES,
    CheckpointError,
    TensorSource,
    find_model_config,
    read_hf,
    read_tf1,
    tf1_prefix,
)
from albert_tf.checkpoint.task_record import TaskRecord
from albert_tf.checkpoint.tokenizer_files import tf1_tokenizer_options
from albert_tf.config import AlbertConfig

__all__ = ["HfCheckpoint", "PrefixCheckpoint", "Tf1Checkpoint"]



class _ForeignCheckpoint(TensorIndexCheckpoint):
    """What the Hugging Face and TF1 readers share (see the module docstring)."""

    config_file: str  # the model config's file name, in `directory`

    @property
    def config_path(self) -> str:
        """The model config's file."""
        return os.path.join(self.directory, self.config_file)

    @abc.abstractmethod
    def _derive_record(self, source: TensorSource) -> dict:
        ...

    def _read_config(self) -> AlbertConfig:
        path = self.config_path
        if not os.path.lexists(path):
            raise CheckpointError(f"{path}: not found (the checkpoint's model config)")
        config = AlbertConfig.from_json_file(path)
        if config.sharing != "all":
            raise CheckpointError(
                f"{path}: sharing={config.sharing!r}, but TF1 and Hugging Face checkpoints hold "
                f"weights per group shared across depth, i.e. sharing='all'")
        return config

    def _read_task_record(self) -> TaskRecord:
        return TaskRecord.from_dict(self._derive_record(self._tensors()), source=self.path)

    def _table(self, source: TensorSource):
        return format_rows(source.kind)  # NAME_TABLE's TF1 or Hugging Face column


class HfCheckpoint(_ForeignCheckpoint):
    """A Hugging Face ALBERT directory: config.json + model.safetensors (or its sharded
    index, read with safetensors' numpy API, no torch) or pytorch_model.bin (torch)."""

    format = "hf"
    expects = f"{HF_CONFIG_FILE} + {' or '.join(HF_WEIGHT_FILES)} (Hugging Face)"
    config_file = HF_CONFIG_FILE

    @classmethod
    def detect(cls, path: str) -> bool:
        return (os.path.isdir(path) and os.path.isfile(os.path.join(path, HF_CONFIG_FILE))
                and any(os.path.isfile(os.path.join(path, f)) for f in HF_WEIGHT_FILES))

    def _read_tensors(self) -> TensorSource:
        return read_hf(self.path)

    def _derive_record(self, source: TensorSource) -> dict:
        return hf_task_record(self.path, source.shapes)


class PrefixCheckpoint(OpenedCheckpoint):
    """A checkpoint that a tf.train prefix names (model.ckpt-N, bert_model.ckpt-N): the
    original TF1 files and Model Garden's TF2 ones. `path` is a directory (its newest
    prefix, or the one its `checkpoint` file names), a prefix, or a prefix's .index."""

    kind_name: str  # for the message when `path` names no prefix

    def __init__(self, path: str | os.PathLike, task: str | None = None):
        super().__init__(path, task)
        self._prefix = tf1_prefix(self.path)
        if self._prefix is None:
            raise CheckpointError(f"{self.path}: not a {self.kind_name} checkpoint (no *.index)")

    @property
    def prefix(self) -> str:
        """The checkpoint prefix `path` names."""
        return self._prefix

    @property
    def directory(self) -> str:
        return os.path.dirname(self._prefix)


class Tf1Checkpoint(PrefixCheckpoint, _ForeignCheckpoint):
    """An original google-research checkpoint: a directory with albert_config.json (or
    one albert_config*.json: brightmart's `*_google` releases) and model.ckpt-* (the
    newest, or the one its `checkpoint` file names), a prefix, or a prefix's .index
    file. Reading it needs TensorFlow (imported only then)."""

    format = "tf1"
    expects = "model.ckpt-*.index (TF1)"
    config_file = CONFIG_FILE
    kind_name = "TF1"

    @classmethod
    def detect(cls, path: str) -> bool:
        return tf1_prefix(path) is not None

    @property
    def config_path(self) -> str:
        """albert_config.json, else the one albert_config*.json (`find_model_config`)."""
        return find_model_config(self.directory)

    def _read_tensors(self) -> TensorSource:
        return read_tf1(self._prefix)

    def _derive_record(self, source: TensorSource) -> dict:
        # The task named at open tells run_classifier's regression from run_race apart.
        record = tf1_task_record(source.path, source.shapes, self.task)
        record.update(tf1_tokenizer_options(self.directory))
        return record
