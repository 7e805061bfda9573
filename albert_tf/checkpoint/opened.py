"""`OpenedCheckpoint`: one checkpoint, opened once, whatever its format.

`open_checkpoint(path)` (`albert_tf.checkpoint.formats`) detects the format once and
returns an instance of that format's reader, a subclass of `OpenedCheckpoint`.
Everything it gives is read when first asked for and kept:

  .path, .format   what was opened and which reader opened it ("albert_tf", "hf", "tf1")
  .config          the `AlbertConfig`
  .task_record     the validated `TaskRecord`: ours from albert_task.json, a foreign
                   one derived from its config and tensor names (their index is read
                   once and reused by `.load()`)
  .tokenizer       `TokenizerFiles`: the SentencePiece model shipped beside the
                   weights, lower-casing and accents as the task record says;
                   `.tokenizer_files(...)` applies explicit choices over it; either
                   refuses a SentencePiece model whose size is not the config's
                   vocab_size (`check_vocab_size`, the one rule where a model and a
                   vocabulary meet)
  .load()          the task model, its weights read now
  .load_into(m)    `from_preset`'s load: the weights into a model of any task, built once

A reader implements `detect` (file names only), `_read_config`, `_read_task_record` and
`_load` (a tensor index: `_read_tensors` and `_table`); `formats.FORMATS` lists them.
"""

from __future__ import annotations

import abc
import functools
import logging
import math
import os
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import albert_tf.checkpoint.tokenizer_files as shipped
from albert_tf import tasks
from albert_tf.checkpoint.names import POOLER, held_shapes, place, row_attribute, table_rows
from albert_tf.checkpoint.readers import CheckpointError, TensorSource
from albert_tf.checkpoint.task_record import TaskRecord
from albert_tf.checkpoint.tokenizer_files import TokenizerFiles, find_vocabulary
from albert_tf.config import AlbertConfig
from albert_tf.errors import UserError
from albert_tf.tokenizer.kinds import is_tokenizer_json, kind_of_file

logger = logging.getLogger(__name__)

__all__ = ["OpenedCheckpoint", "build_task_model", "check_vocab_size", "check_weights_fit",
           "task_model_kwargs"]

# The config fields that size a tensor: one a checkpoint holds no axis of is named when
# the config describes more weights than the checkpoint holds.
_SIZE_FIELDS = ("vocab_size", "embedding_size", "hidden_size", "intermediate_size",
                "max_position_embeddings", "type_vocab_size")
# How many times the weights a checkpoint holds the model its config describes may
# need and still be built: within it, the tensor-by-tensor comparison lists every
# difference (a group too many, a vocabulary a few rows off); beyond it the config is
# refused unbuilt, so a lying config costs at most this multiple of the files' size.
BUILD_MARGIN = 2


def check_vocab_size(spm_model: str | os.PathLike, vocab_size: int, config_source: str) -> None:
    """Refuses a vocabulary whose size is not the model's `vocab_size`.

    The one check wherever a model and a vocabulary are paired (fine-tuning, convert,
    save_checkpoint, export, pretraining), made before any work: a vocabulary of
    another size would feed ids the embedding table does not have (or never use its
    last rows), and the model written would be refused later by `export`.

    Args:
      spm_model: the vocabulary: a SentencePiece .model file, or a WordPiece vocab.txt
        (`kinds.kind_of_file`).
      vocab_size: the model config's vocab_size.
      config_source: where that config comes from, for the message (its file, or
        e.g. "the model saved to DIR").

    Raises:
      CheckpointError: "SentencePiece model SPM has N pieces but CONFIG has
        vocab_size=V; ..." (or "WordPiece vocabulary VOCAB has N tokens ..."), naming both.
      VocabFileError: a vocab.txt that cannot be read (naming its line).
    """
    name, pieces, unit = shipped.vocabulary_size(spm_model)
    if pieces != vocab_size:
        raise CheckpointError(
            f"{name} {os.fspath(spm_model)} has {pieces} {unit} but "
            f"{config_source} has vocab_size={vocab_size}: a model needs its own "
            "vocabulary (pass the one it was trained with)")


def check_weights_fit(config: AlbertConfig, record: TaskRecord,
                      shapes: Mapping[str, tuple[int, ...]], config_path: str,
                      weights_path: str) -> None:
    """Refuses, before any model is built, a config that describes more weights than
    the checkpoint holds: a vocab_size of 1e9 over a table of 30,000 rows would
    allocate tens of GB only to be told the shapes differ.

    The model the config and task record describe needs at least its encoder (the
    pooler aside: some task checkpoints have none) and its classifier head (H x
    num_classes). A config that needs at most BUILD_MARGIN times the weights the
    checkpoint holds is built and its tensors compared one by one (`names.place`,
    which lists every difference); a larger one is refused here.

    Raises:
      CheckpointError: naming both files, both counts, and the config's sizes that
        no tensor of the checkpoint has (e.g. "vocab_size=1000000000").
    """
    h = config.hidden_size
    needed = config.encoder_parameters() - (h * h + h)
    if record.num_classes:
        needed += (h + 1) * record.num_classes
    held = sum(math.prod(shape) for shape in shapes.values())
    if needed <= BUILD_MARGIN * held:
        return
    axes = {n for shape in shapes.values() for n in shape}
    fields = [f"{name}={getattr(config, name)}" for name in _SIZE_FIELDS
              if getattr(config, name) not in axes]
    if record.num_classes and record.num_classes not in axes:
        fields.append(f"num_classes={record.num_classes} ({record.source})")
    why = "no tensor of the checkpoint has that size"
    if not fields:  # the sizes are there; the count of blocks is not
        fields = [f"{name}={getattr(config, name)}" for name in (
            "num_hidden_layers", "num_hidden_groups", "inner_group_num", "sharing")]
        why = "more blocks than the checkpoint holds"
    raise CheckpointError(
        f"{config_path} describes a model of at least {needed:,} weights but {weights_path} "
        f"holds {held:,}: {', '.join(fields)} ({why}); not building it")


class OpenedCheckpoint(abc.ABC):
    """A checkpoint whose format is known; its parts are read once, on first use.

    Build one with `open_checkpoint(path, task=None)`, not directly. Treat it as
    read-only: the properties are computed once and cached.

    Example:
        >>> ckpt = open_checkpoint("runs/sst2")  # a fine-tuned albert-tf checkpoint
        >>> ckpt.format, ckpt.task_record.task, ckpt.tokenizer.do_lower_case
        ('albert_tf', 'classification', True)
        >>> model = ckpt.load()
    """

    format: ClassVar[str]   # `.format`, and the reader's key in formats.FORMATS
    expects: ClassVar[str]  # what the format's files are, for the "not a checkpoint" error

    def __init__(self, path: str | os.PathLike, task: str | None = None):
        self._path = os.fspath(path)
        self._task = task
        # The optional parts (names.POOLER, a pretrainer's heads) `load()` left initialised.
        self.left_initialised: tuple[str, ...] = ()

    @classmethod
    @abc.abstractmethod
    def detect(cls, path: str) -> bool:
        """Whether `path` holds a checkpoint of this format (file names only, no reading)."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}(path={self._path!r}, format={self.format!r})"

    # ------------------------------------------------------------ what was opened
    @property
    def path(self) -> str:
        """The path it was opened with."""
        return self._path

    @property
    def task(self) -> str | None:
        """The task named when it was opened (None: whatever the checkpoint holds)."""
        return self._task

    @property
    def directory(self) -> str:
        """The directory that holds the checkpoint's files (its tokenizer among them)."""
        return self._path

    @property
    def config_path(self) -> str:
        """The file the model config is read from (each format names its own)."""
        return self._path

    # ------------------------------------------------------------ its parts, read once
    @functools.cached_property
    def config(self) -> AlbertConfig:
        """The model config, without the weights."""
        return self._read_config()

    @functools.cached_property
    def task_record(self) -> TaskRecord:
        """The validated task record: the task, its head's settings and the tokenizer's.

        Raises:
          CheckpointError: the task named at open is not the one the checkpoint holds
            ("encoder" accepts any); a foreign head that cannot be told apart.
          TaskRecordError: an invalid albert_task.json.
        """
        record = self._read_task_record()
        asked = tasks.ALL_TASKS.get(self._task) if self._task is not None else None
        if self._task is not None and (asked is None or asked.recorded and asked is not record.spec):
            raise CheckpointError(f"{self._path}: holds a {record.task} model, not {self._task}")
        return record

    @functools.cached_property
    def tokenizer(self) -> TokenizerFiles:
        """The tokenizer that ships with the checkpoint (`tokenizer_files()`)."""
        return self.tokenizer_files()

    def tokenizer_files(self, spm_model: str | None = None, do_lower_case: bool | None = None,
                        keep_accents: bool | None = None) -> TokenizerFiles:
        """The tokenizer settings, an explicit (not None) argument winning over the checkpoint's.

        The SentencePiece model chosen (explicit or shipped) is checked against the
        config's vocab_size here, so every command that pairs them refuses a
        vocabulary of another size before any work (`check_vocab_size`).

        Raises:
          UserError: an explicit `spm_model` that is not a file.
          CheckpointError: the SentencePiece model's size is not the config's vocab_size.
        """
        if spm_model is not None and (os.path.isdir(spm_model) or not os.path.lexists(spm_model)):
            what = ("is a directory, not a .model file or vocab.txt" if os.path.isdir(spm_model)
                    else "does not exist")
            raise UserError(f"{shipped.vocabulary_name(spm_model)} {spm_model} {what}")  # a device: the size rule
        record = self.task_record
        path = spm_model or self._shipped_vocabulary
        if path is not None and is_tokenizer_json(path):  # its own rules, not the record's
            return self._checked(shipped.tokenizer_json_files(path))
        files = TokenizerFiles(
            path,
            record.do_lower_case if do_lower_case is None else bool(do_lower_case),
            record.keep_accents if keep_accents is None else bool(keep_accents),
            # the record decides the kind; an explicit file is read as what it is
            kind=kind_of_file(spm_model) if spm_model else record.tokenizer,
            tokenize_chinese_chars=record.tokenize_chinese_chars, split_characters=record.split_characters)
        return self._checked(files)

    def _checked(self, files: TokenizerFiles) -> TokenizerFiles:
        if files.spm_model is not None:
            check_vocab_size(files.spm_model, self.config.vocab_size, self.config_path)
        return files

    @functools.cached_property
    def _shipped_vocabulary(self) -> str | None:
        """The vocabulary of the record's kind beside the weights (None: none)."""
        return find_vocabulary(self.directory, self.task_record.tokenizer)

    def load(self):
        """The task model of `albert_tf.models.TASK_MODELS` the checkpoint holds, its
        weights read now (each call builds a new model).

        Raises:
          CheckpointError: unreadable files, or tensors that do not fit the config
            (every missing, unexpected and mis-shaped tensor listed at once).
        """
        model = self._load()
        if model.task_spec.recorded:  # a task model, not the encoder
            model.compile()  # ready to fit, as a constructed task model is
        return model

    # ------------------------------------------------------------ what a reader implements
    @abc.abstractmethod
    def _read_config(self) -> AlbertConfig:
        ...

    @abc.abstractmethod
    def _read_task_record(self) -> TaskRecord:
        ...

    @abc.abstractmethod
    def _load(self):
        ...

    def load_into(self, model, same_head: bool = False) -> list[str]:
        """`from_preset`'s load into `model` (any task, this config): the encoder always;
        each head layer the checkpoint's own model has under the same name, in the shapes
        needed; the others keep their initialisation. `same_head`: `model`'s head is the
        checkpoint's (task and arguments), so one that does not fit is refused. Returns
        what was left initialised, one phrase each. Here: the checkpoint's model is built
        (`load`) and copied from; a tensor index places into `model` itself."""
        source = self.load()
        model.encoder.set_weights(source.encoder.get_weights())
        notes = []
        if model.uses_pooled_output and POOLER in self.left_initialised:
            notes.append(f"has no {POOLER} weights; the pooler keeps its random initialisation")
        held = {layer.name: layer for layer in source.layers if layer is not source.encoder}
        for layer in model.layers:
            if layer is model.encoder or layer is model.preprocessor:
                continue
            found, keeps = held.get(layer.name), "that head keeps its random initialisation"
            if found is None or layer.name in self.left_initialised:
                notes.append(f"has no {layer.name} weights; {keeps}")
            elif type(found) is not type(layer) or [w.shape for w in found.weights] != [
                    w.shape for w in layer.weights]:
                shapes = ", ".join(str(tuple(w.shape)) for w in found.weights)
                notes.append(f"has {layer.name} weights of other shapes ({shapes}); {keeps}")
            else:
                layer.set_weights(found.get_weights())
        return notes


def task_model_kwargs(record: TaskRecord) -> dict[str, Any]:
    """The constructor arguments a task record gives its `TASK_MODELS` class (the
    task's `head_args`, read from the record's fields of the same names)."""
    return record.spec.model_kwargs(record)


def build_task_model(config: AlbertConfig, record: TaskRecord):
    """The (randomly initialised) model of `albert_tf.models.TASK_MODELS` for `record`,
    uncompiled: its weights are loaded first (an optimizer would be read from the file
    too), then `OpenedCheckpoint.load` compiles it."""
    from albert_tf import models  # deferred: Keras only once a model is built

    return models.TASK_MODELS[record.spec.name](config, compile=False,
                                                **task_model_kwargs(record))


class TensorIndexCheckpoint(OpenedCheckpoint):
    """A checkpoint whose weights are a tensor index placed through a name table: every
    format but albert-tf's own Keras file. The index is read once, on first use (a
    foreign task record is derived from it), reused by `load` and released after it."""

    def __init__(self, path: str | os.PathLike, task: str | None = None):
        super().__init__(path, task)
        self._source: TensorSource | None = None

    @abc.abstractmethod
    def _read_tensors(self) -> TensorSource:
        """The checkpoint's tensor index (names, shapes, a lazy reader)."""

    @abc.abstractmethod
    def _table(self, source: TensorSource) -> Sequence[tuple[str, str | None, str | None]]:
        """The format's column of a name table: (our path, stored name, layout) rows."""

    def _rows(self, model, source: TensorSource) -> list:
        """(our path, variable, stored name, layout) of every tensor `model` takes."""
        return list(table_rows(model, self._table(source)))

    def _place(self, model, source: TensorSource, rows: list, **kwargs) -> list[str]:
        """`names.place` by `rows`: the optional parts left initialised."""
        return place(model, source, self.config_path, rows, **kwargs)

    def _check_loaded(self, model) -> None:
        """Refuses a loaded model the checkpoint's own evidence contradicts (default: none)."""

    def _tensors(self) -> TensorSource:
        if self._source is None:
            self._source = self._read_tensors()
        return self._source

    def _load(self):
        config = self.config  # first: a bad config fails before any tensor is read
        record = self.task_record
        source = self._tensors()
        check_weights_fit(config, record, source.shapes, self.config_path, source.path)
        model = build_task_model(config, record)
        self.left_initialised = tuple(self._place(model, source, self._rows(model, source)))
        for part in self.left_initialised:
            # The pooler is optional only for a model that never reads it (names.py):
            # nothing is lost, so it is no warning (HF saves those models without one).
            logger.log(logging.INFO if part == POOLER else logging.WARNING,
                       "%s has no %s weights; %s keeps its random initialisation", source.path,
                       part, "the pooler (unused by this model)" if part == POOLER else "that head")
        self._check_loaded(model)
        logger.info("loaded %d tensors from %s (%s, %s)", len(source.shapes), source.path,
                    self.format, record.task)
        self._source = None  # placed: let the arrays go
        return model

    def load_into(self, model, same_head: bool = False) -> list[str]:
        """`OpenedCheckpoint.load_into`, placed into `model` itself by its own rows."""
        from albert_tf import models  # deferred: Keras only once a model is built

        record, source = self.task_record, self._tensors()
        check_weights_fit(self.config, record, source.shapes, self.config_path, source.path)
        own = models.TASK_MODELS[record.task].head_layers  # the checkpoint's model's heads
        rows, notes, skipped = self._rows(model, source), [], set()
        keeps = "that head keeps its random initialisation"
        for attribute, name in model.head_layers.items():
            if getattr(model, attribute, None) is None:
                continue  # built without it (a span model without answerability)
            head = [row for row in rows if row_attribute(row[0]) == attribute]
            held = held_shapes(head, source, model.config.num_attention_heads)
            if own.get(attribute) != name or (held is None and not same_head):
                notes.append(f"has no {name} weights; {keeps}")
            elif held and not same_head:
                notes.append(f"has {name} weights of other shapes ({held}); {keeps}")
            else:  # placed: the checkpoint's own head refused as `load` refuses it
                continue
            skipped.add(attribute)
        ignored = {name for ours, name, _ in self._table(source) if row_attribute(ours) in own}
        left = self._place(model, source, [r for r in rows if row_attribute(r[0]) not in skipped],
                           optional=(POOLER,), ignored=ignored)
        for part in left:
            if part == POOLER:
                notes.append(f"has no {POOLER} weights; the pooler " + (
                    "" if model.uses_pooled_output else "(unused by this model) ") +
                    "keeps its random initialisation")
            elif part not in skipped:
                notes.append(f"has no {part} weights; {keeps}")
        self._source = None  # placed: let the arrays go
        return notes

