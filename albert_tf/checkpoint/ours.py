"""albert-tf's own checkpoint format: its reader and its one writer, `save_checkpoint`.

A directory of albert_config.json + model.weights.h5 (Keras' layout) + albert_task.json
(the `TaskRecord`; absent: pretraining) + spiece.model when one was given. Written
as a whole (`albert_tf.infra.atomic.claimed_directory`: a hidden sibling directory, renamed
into place when complete; an existing checkpoint directory is swapped for the new
one, so no file of the old checkpoint, e.g. another model's spiece.model, survives
beside the new weights). A directory that also holds files a checkpoint does not
write is refused, naming them, unless the caller asks to keep them
(`keep_other_files`: fine-tuning's run directory, with its TensorBoard logs).
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile

import numpy as np

from albert_tf.checkpoint.opened import (
    OpenedCheckpoint,
    build_task_model,
    check_vocab_size,
    check_weights_fit,
)
from albert_tf.checkpoint.readers import (
    CONFIG_FILE,
    CheckpointError,
    h5_not_float,
    h5_shapes,
    refuse_weight_problems,
    weight_problem,
)
from albert_tf.checkpoint.task_record import TASK_FILE, TaskRecord, TaskRecordError
from albert_tf.checkpoint.tokenizer_files import SPM_FILE, VOCAB_FILE, VOCABULARY_FILES
from albert_tf.config import AlbertConfig
from albert_tf.infra import atomic
from albert_tf.inputs import INPUT_MASK, INPUT_TYPE_IDS, INPUT_WORD_IDS
from albert_tf.tokenizer.kinds import TOKENIZER_JSON, kind_of_file, vocabulary_file_name

__all__ = ["AlbertTfCheckpoint", "save_checkpoint", "task_record_of", "WEIGHTS_FILE",
           "CHECKPOINT_FILES", "check_replaceable"]

logger = logging.getLogger(__name__)

WEIGHTS_FILE = "model.weights.h5"
# Every file save_checkpoint writes: what replacing a checkpoint directory may drop.
CHECKPOINT_FILES = (CONFIG_FILE, WEIGHTS_FILE, TASK_FILE, SPM_FILE, VOCAB_FILE, TOKENIZER_JSON)


class AlbertTfCheckpoint(OpenedCheckpoint):
    """The reader of our format (see the module docstring)."""

    format = "albert_tf"
    expects = f"{WEIGHTS_FILE} (albert-tf)"

    @classmethod
    def detect(cls, path: str) -> bool:
        return os.path.isdir(path) and os.path.isfile(os.path.join(path, WEIGHTS_FILE))

    @property
    def config_path(self) -> str:
        return os.path.join(self.path, CONFIG_FILE)

    def _read_config(self) -> AlbertConfig:
        return AlbertConfig.from_json_file(self.config_path)

    def _read_task_record(self) -> TaskRecord:
        return TaskRecord.read(self.path)

    def _load(self):
        record = self.task_record
        weights = os.path.join(self.path, WEIGHTS_FILE)
        # Before the model is built: a config larger than the weights, integer tensors.
        check_weights_fit(self.config, record, h5_shapes(weights), self.config_path, weights)
        refuse_weight_problems(h5_not_float(weights), weights)
        model = build_task_model(self.config, record)
        _ensure_built(model)
        keras_error = None
        try:
            model.load_weights(weights)
        except (ValueError, OSError) as e:
            keras_error = e
        # Keras ignores tensors the model has no place for; the count catches them.
        if keras_error is not None or len(h5_shapes(weights)) != len(model.weights):
            problems = _weights_file_problems(model, weights) or [f"keras: {keras_error}"]
            raise CheckpointError(
                f"{weights}: {len(problems)} tensor(s) do not fit the {record.task} model of "
                f"{CONFIG_FILE} and {TASK_FILE}:\n  " + "\n  ".join(problems))
        refuse_weight_problems([f"{w.path} ({problem})" for w in model.weights
                                if (problem := weight_problem(w.numpy())) is not None], weights)
        return model

    # load_into: OpenedCheckpoint's build and copy. Our weights file is keyed by Keras'
    # own walk of the model (attribute paths and generated names, e.g.
    # layers/classification_head/dense/vars/0), not by the layer names a name table places
    # by: loading part of it into a model of another class would restate Keras' loader.


def _ensure_built(model) -> None:
    """Calls `model` once on a dummy batch if Keras does not consider it built yet.

    The models create all their weights in __init__; Keras' save/load_weights still
    insist on the `built` flag, which a first call sets.
    """
    if model.built:
        return
    spec = model.task_spec
    shape = (1, 1, 2) if spec.choices else (1, 2)
    inputs = {name: np.zeros(shape, np.int32) for name in (INPUT_WORD_IDS, INPUT_TYPE_IDS)}
    inputs[INPUT_MASK] = np.ones(shape, np.int32)
    if spec.masked_positions:
        inputs["masked_lm_positions"] = np.zeros((1, 1), np.int32)
    model(inputs)


def _weights_file_problems(model, weights: str) -> list[str]:
    """Missing, mis-shaped and unexpected datasets of `weights`, against what Keras
    writes for `model` (the layout is Keras'; it is the reference)."""
    with tempfile.TemporaryDirectory() as tmp:
        model.save_weights(os.path.join(tmp, WEIGHTS_FILE))
        expected = h5_shapes(os.path.join(tmp, WEIGHTS_FILE))
    found = h5_shapes(weights)
    problems = [f"missing: {n}" for n in expected if n not in found]
    problems += [f"mis-shaped: {n}: {found[n]} in the file, model needs {shape}"
                 for n, shape in expected.items() if n in found and found[n] != shape]
    problems += [f"unexpected: {n}" for n in found if n not in expected]
    return problems


def _save_model_weights(model, path: str) -> None:
    """`model.save_weights` without the optimizer's state: a checkpoint holds the model
    (resumable training state lives in the training run's own checkpoints)."""
    # Deferred on purpose: keras_compat imports Keras, which reading checkpoints (and
    # so importing this package) must not need.
    from albert_tf import keras_compat

    optimizer = getattr(model, "optimizer", None)
    data = keras_compat.weights_h5_bytes(
        model, objects_to_skip=[optimizer] if optimizer is not None else None)
    with open(path, "wb") as f:  # a full disk fails here, the HDF5 file long closed
        f.write(data)


def save_checkpoint(model, directory: str | os.PathLike, spm_model: str | None = None,
                    label_names: list[str] | None = None, do_lower_case: bool | None = None,
                    seq_length: int | None = None, extra_info: dict | None = None,
                    overwrite: bool = True, keep_other_files: bool = False) -> str:
    """Writes `model` as albert_config.json + model.weights.h5 + albert_task.json (+ spiece.model
    or vocab.txt).

    The directory is written whole: staged in a hidden sibling and renamed into place
    when complete (`atomic.claimed_directory`), so a crash never leaves a partial
    checkpoint, and an existing checkpoint in `directory` is replaced as a whole (no
    file of it survives beside the new one). albert_task.json is the model's
    `TaskRecord` (`task_record_of`); it and the vocabulary's size are validated before
    anything is written.

    Args:
      model: an `AlbertPretrainer` or a fine-tuning model from `albert_tf.models`.
      directory: where to write (created if needed; an existing checkpoint there is replaced).
      spm_model: the vocabulary to copy in: a SentencePiece model (as spiece.model) or
        a WordPiece vocab.txt (as vocab.txt; the record's `tokenizer` says which); its
        size must be the model's vocab_size (default: the vocabulary of the model's
        `preprocessor`, when it has one).
      label_names: class names, one per class, for classification tasks.
      do_lower_case: whether the tokenizer lower-cases (recorded for serving).
      seq_length: the sequence length the model was fine-tuned with, if any.
        These three default to the model's own `task_record` (a task model from
        `from_preset` or a `.keras` file has one), else to none, True and none.
      extra_info: more `TaskRecord` fields (e.g. a span model's "max_query_length"
        or SQuAD 2.0's tuned "no_answer_threshold"); they may not replace the
        fields above, and fields they leave out take `TaskRecord`'s defaults.
      overwrite: replace an existing (non-empty) `directory`; False: refuse it, also
        when it appears while this call writes (another process's).
      keep_other_files: an existing `directory` may hold files a checkpoint does not
        write (a run's logs, predictions); they are carried over into the new
        directory (hard links). False: such a directory is refused.

    Returns:
      `directory`.

    Raises:
      TaskRecordError: a field that is unknown, invalid or does not apply to the task.
      CheckpointError: `spm_model`'s size is not the model's vocab_size; `directory`
        holds other files and `keep_other_files` is False.
      UserError: another process is writing `directory`; it exists and `overwrite`
        is False.
    """
    directory = os.path.abspath(os.fspath(directory))
    record = task_record_of(model, label_names=label_names, do_lower_case=do_lower_case,
                            seq_length=seq_length, extra_info=extra_info,
                            source=os.path.join(directory, TASK_FILE))
    vocabulary = None  # the preprocessor's vocabulary file, as read
    name = None  # its file name
    if spm_model is not None:
        if not os.path.isfile(spm_model):
            raise FileNotFoundError(f"vocabulary not found: {spm_model}")
        check_vocab_size(spm_model, model.config.vocab_size, f"the model saved to {directory}")
        record = record.replace(tokenizer=kind_of_file(spm_model))
        name = vocabulary_file_name(spm_model, record.tokenizer)
    elif getattr(model, "preprocessor", None) is not None:
        vocabulary = model.preprocessor.vocabulary_bytes  # its size: checked at build
        record = record.replace(tokenizer=model.preprocessor.kind)
        name = model.preprocessor.vocabulary_name
    check_replaceable(directory, keep_other_files, replace=overwrite)
    with atomic.claimed_directory(directory, replace=overwrite, writes=CHECKPOINT_FILES,
                                  keep_others=keep_other_files,
                                  error=CheckpointError) as staging:
        others = check_replaceable(directory, keep_other_files)  # again, under the claim
        model.config.to_json_file(os.path.join(staging, CONFIG_FILE))
        _ensure_built(model)
        _save_model_weights(model, os.path.join(staging, WEIGHTS_FILE))
        vocabulary_file = os.path.join(staging, name or VOCABULARY_FILES[record.tokenizer])
        if spm_model is not None:
            shutil.copyfile(spm_model, vocabulary_file)
        elif vocabulary is not None:
            with open(vocabulary_file, "wb") as f:
                f.write(vocabulary)
        record.write(staging)
        atomic.link_entries(directory, staging, others)  # last: files written until now
    return directory


def check_replaceable(directory: str, keep_other_files: bool = False, replace: bool = True,
                      option: str = "", flag: str | None = None) -> list[str]:
    """`atomic.check_replaceable` for a checkpoint directory: the entries of an existing
    `directory` that a checkpoint does not write (`CHECKPOINT_FILES`), which replacing
    it would drop.

    Raises:
      CheckpointError: there are some and `keep_other_files` is False (naming them),
        `directory` is a file, or it holds a checkpoint and `replace` is False.
    """
    return atomic.check_replaceable(directory, CHECKPOINT_FILES, replace=replace, option=option,
                                    flag=flag, product="a checkpoint", writer="a checkpoint",
                                    keep_others=keep_other_files, error=CheckpointError)


def task_record_of(model, label_names: list[str] | None = None,
                   do_lower_case: bool | None = None, seq_length: int | None = None,
                   extra_info: dict | None = None, source: str | None = None) -> TaskRecord:
    """The `TaskRecord` `model` will be saved with under these settings (what
    `save_checkpoint` writes; what export serves a model without a checkpoint by).

    The model decides its task, head arguments and precision; the arguments given
    (not None) decide the rest, and what they leave open is the model's own record
    (`model.task_record`, a task model's), else the task's defaults.

    Raises:
      TaskRecordError: as `TaskRecord.create`; ValueError if `extra_info` repeats a
        field the model or the other arguments decide.
    """
    if seq_length is not None:  # the length rule against this model's position table
        model.config.check_sequence_length(seq_length, where=f"seq_length of the model saved "
                                                             f"to {source}" if source else "")
    spec = model.task_spec
    held = getattr(model, "task_record", None)
    fields = {k: v for k, v in held.to_dict().items() if k != "task"} if held else {}
    if seq_length is not None:  # the task's own defaults are fitted to the new length again
        fields = {k: v for k, v in fields.items() if spec.defaults.get(k, object()) != v}
    decided = {"do_lower_case": do_lower_case, "seq_length": seq_length,
               "precision": model.dtype_policy.name, **spec.record_fields_of(model)}
    if spec.classes:
        decided["label_names"] = list(label_names) if label_names is not None else None
        if any(fields.get(name) != value for name, value in spec.record_fields_of(model).items()):
            fields.pop("label_names", None)  # another head's classes
    elif label_names is not None:
        raise TaskRecordError(f"label_names given for a {spec.name} model")
    clashes = sorted(set(extra_info or {}) & (set(decided) | {"task", "num_classes",
                                                              "label_names"}))
    if clashes:
        raise ValueError(f"extra_info may not replace albert_task.json fields: {clashes}")
    fields.update({k: v for k, v in decided.items()
                   if v is not None or k in spec.head_args or k == "precision"})
    if not held:
        fields.setdefault("do_lower_case", True)
    fields.update(extra_info or {})
    return TaskRecord.create(spec.name, source=source, **fields)
