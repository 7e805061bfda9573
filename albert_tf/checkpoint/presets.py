"""`from_preset`: a model of a chosen class from any checkpoint `open_checkpoint` reads.

`AlbertEncoder.from_preset(path)` takes the checkpoint's encoder.
`AlbertSequenceClassifier.from_preset(path, num_classes=3)` (and every task model)
builds the class's model on the checkpoint's config, once, and loads into it
(`OpenedCheckpoint.load_into`: a tensor index is placed into it directly) the encoder,
and the head when the checkpoint holds it (a layer of the same name and shapes: the same
task's head, or the pretrainer's masked-LM head for `AlbertMaskedLM`); a head the
checkpoint lacks keeps its random initialisation, with the warning loading gives
it. The head's arguments default to the checkpoint's when it holds the same task.
A preprocessor is built from the checkpoint's SentencePiece model and task record.
"""

from __future__ import annotations

import inspect
import logging
import os

from albert_tf.api_inputs import label_name_list, strict_bool
from albert_tf.checkpoint.formats import open_checkpoint
from albert_tf.checkpoint.ours import task_record_of
from albert_tf.checkpoint.task_record import TaskRecord
from albert_tf.checkpoint.tokenizer_files import MISSING_TOKENIZER

__all__ = ["encoder_from_preset", "task_model_from_preset"]

logger = logging.getLogger(__name__)

# Arguments from_preset takes beyond the model class's own.
_PRESET_ARGUMENTS = ("load_weights", "seq_length", "spm_model", "label_names")


class _EncoderAlone:
    """An encoder seen as a model without heads: what `load_into` places into (the
    name tables' rows start at the model's `encoder`)."""

    head_layers: dict[str, str] = {}
    layers = ()
    preprocessor = None
    uses_pooled_output = True

    def __init__(self, encoder):
        self.encoder, self.config, self.task_spec = encoder, encoder.config, encoder.task_spec


def encoder_from_preset(cls, path: str | os.PathLike, load_weights: bool = True,
                        seq_length: int | None = None, spm_model: str | None = None, **kwargs):
    """`cls` (AlbertEncoder) on the checkpoint's config, with its encoder's weights
    (the only model built, unless the format is albert-tf's own: `load_into`) and, when
    the checkpoint ships a vocabulary (or `spm_model` names one), its tokenizer for
    raw text at `seq_length` (default as export's: the record's, else the config's),
    built on the first text (`TextEmbeddings.use_tokenizer_files`)."""
    path = os.fspath(path)
    load_weights = strict_bool("load_weights", load_weights)
    opened = open_checkpoint(path)
    encoder = cls(opened.config, **kwargs)
    if load_weights:
        _load_weights(_EncoderAlone(encoder), opened, path, same_head=False)
    length = seq_length if seq_length is not None else \
        opened.task_record.seq_length or opened.config.default_seq_length()
    opened.config.check_sequence_length(length, where=f"from_preset({path!r})")
    tokenizer = opened.tokenizer_files(spm_model)
    if tokenizer.spm_model is not None:
        encoder.use_tokenizer_files(tokenizer, length)
    return encoder


def task_model_from_preset(cls, path: str | os.PathLike, load_weights: bool = True,
                           seq_length: int | None = None, spm_model: str | None = None,
                           label_names: list[str] | None = None, **kwargs):
    """The task model `cls` from the checkpoint at `path` (see the module docstring).

    Raises:
      TypeError: an argument neither `cls` nor from_preset takes, or a head argument
        the checkpoint cannot give (e.g. num_classes from a pretraining checkpoint).
      CheckpointError, TaskRecordError: as `open_checkpoint`, `task_record_of`.
    """
    path = os.fspath(path)
    load_weights = strict_bool("load_weights", load_weights)
    label_names = label_name_list(label_names, f"{cls.__name__}.from_preset")
    spec = cls.task_spec
    parameters = inspect.signature(cls.__init__).parameters
    known = set(parameters) - {"self", "config", "encoder", "kwargs"}
    unknown = sorted(set(kwargs) - known - {"dtype", "name", "remat", "compile"})
    if unknown:
        raise TypeError(f"{cls.__name__}.from_preset got unknown argument(s) {unknown}; it "
                        f"takes {', '.join(sorted(known | set(_PRESET_ARGUMENTS)))}, remat, compile, "
                        "dtype, name")
    opened = open_checkpoint(path)
    record = opened.task_record
    checkpoint_head = spec.model_kwargs(record) if record.spec is spec else {}
    arguments = {**checkpoint_head, **kwargs}
    missing = [name for name, p in parameters.items() if p.default is p.empty
               and p.kind is p.POSITIONAL_OR_KEYWORD and name not in ("self", "config")
               and name not in arguments]
    if missing:
        raise TypeError(f"{cls.__name__}.from_preset({path!r}): the checkpoint holds a "
                        f"{record.task} model; give {', '.join(missing)}")
    model = cls(opened.config, **arguments)
    same_head = bool(record.spec is spec and all(
        arguments[name] == value for name, value in checkpoint_head.items()))
    if load_weights:
        _load_weights(model, opened, path, same_head)
    tokenizer = opened.tokenizer_files(spm_model)
    # seq_length=0 is a length to check, not "the default" (only None is)
    length = seq_length if seq_length is not None else \
        (record.seq_length if record.spec is spec else None) or opened.config.default_seq_length()
    opened.config.check_sequence_length(length, where=f"from_preset({path!r})")
    model.preprocessor = _preprocessor(tokenizer, length, path)
    model.task_record = _record(model, record if same_head else None, tokenizer, length,
                                label_names)
    return model


def _load_weights(model, opened, path: str, same_head: bool) -> None:
    """The checkpoint's weights into `model` (`OpenedCheckpoint.load_into`): the
    encoder's, and each head layer the checkpoint holds (same name and shapes); the
    others keep their initialisation, with a warning."""
    for note in opened.load_into(model, same_head):
        logger.warning("%s %s", path, note)


def _preprocessor(tokenizer, seq_length: int, path: str):
    """An AlbertPreprocessor of the checkpoint's vocabulary (None when it ships none:
    then one WARNING, as the model takes token ids only)."""
    if tokenizer.spm_model is None:
        logger.warning("%s %s: the model takes token ids only (no text in fit, predict or "
                       "export); pass spm_model=PATH to from_preset", path, MISSING_TOKENIZER)
        return None
    return tokenizer.preprocessor(seq_length)


def _record(model, held: TaskRecord | None, tokenizer, seq_length: int,
            label_names) -> TaskRecord:
    """The checkpoint's record when its head is the model's, else the task's defaults;
    with the preprocessor's tokenizer settings and length."""
    settings = {"do_lower_case": tokenizer.do_lower_case, "keep_accents": tokenizer.keep_accents,
                "tokenizer": tokenizer.kind,
                "tokenize_chinese_chars": tokenizer.tokenize_chinese_chars,
                "split_characters": tokenizer.split_characters}
    if held is not None:
        if label_names is not None:
            settings["label_names"] = tuple(label_names)
        return held.at_seq_length(seq_length).replace(**settings)
    return task_record_of(model, label_names=label_names, do_lower_case=tokenizer.do_lower_case,
                          seq_length=seq_length,
                          extra_info={"keep_accents": tokenizer.keep_accents,
                                      "tokenizer": tokenizer.kind,
                                      "tokenize_chinese_chars": tokenizer.tokenize_chinese_chars,
                                      "split_characters": tokenizer.split_characters})
