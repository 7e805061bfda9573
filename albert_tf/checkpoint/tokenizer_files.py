"""Which tokenizer goes with a checkpoint: its SentencePiece model, lower-casing and accents.

`OpenedCheckpoint.tokenizer` answers it for every command that starts from a
checkpoint (fine-tuning, export, convert), and `.tokenizer_files(...)` applies an
explicit choice over it. Lower-casing and accents are the task record's (one
decision, read everywhere); the SentencePiece model is the file shipped beside the
weights:

  albert-tf checkpoint  spiece.model; do_lower_case, keep_accents from albert_task.json
  Hugging Face          spiece.model; do_lower_case, keep_accents from tokenizer_config.json
                        (`hf_tokenizer_options`, the one reader of that file)
  TF1 (google-research) the single *.model beside model.ckpt-* (e.g. 30k-clean.model);
                        lower-cased, accents stripped (the released models are uncased)

Needs neither TensorFlow nor Keras.
"""

from __future__ import annotations

import dataclasses
import glob
import logging
import os

from albert_tf.checkpoint.readers import CheckpointError
from albert_tf.textio import json_type, read_json_object

__all__ = ["TokenizerFiles", "SPM_FILE", "HF_TOKENIZER_CONFIG", "find_spm_model",
           "hf_tokenizer_options"]

logger = logging.getLogger(__name__)

SPM_FILE = "spiece.model"
HF_TOKENIZER_CONFIG = "tokenizer_config.json"
# AlbertTokenizer's defaults, and the original (uncased) releases': what a checkpoint
# that says nothing about its tokenizer gets.
DEFAULT_OPTIONS = {"do_lower_case": True, "keep_accents": False}


@dataclasses.dataclass(frozen=True)
class TokenizerFiles:
    """spm_model: path of the SentencePiece model, or None when none was found."""

    spm_model: str | None
    do_lower_case: bool
    keep_accents: bool = False


def find_spm_model(directory: str) -> str | None:
    """The SentencePiece model shipped in a checkpoint's `directory`: spiece.model
    (albert-tf, Hugging Face) or the single *.model file (e.g. TF1's 30k-clean.model)."""
    named = os.path.join(directory, SPM_FILE)
    if os.path.isfile(named):
        return named
    candidates = sorted(glob.glob(os.path.join(directory, "*.model")))
    if len(candidates) > 1:
        logger.warning("several SentencePiece models in %s (%s); pass the one to use",
                       directory, ", ".join(candidates))
    return candidates[0] if len(candidates) == 1 else None


def hf_tokenizer_options(directory: str) -> dict[str, bool]:
    """do_lower_case and keep_accents of a Hugging Face directory's tokenizer_config.json
    (`DEFAULT_OPTIONS` for a file or key that is absent or null).

    Raises:
      CheckpointError: the file is not valid JSON or not a JSON object, or one of
        those keys is not a boolean (naming it).
    """
    options = dict(DEFAULT_OPTIONS)
    path = os.path.join(directory, HF_TOKENIZER_CONFIG)
    if not os.path.lexists(path):
        return options
    values = read_json_object(path, CheckpointError)
    for key in options:
        value = values.get(key)
        if value is not None and not isinstance(value, bool):  # "false" would read as True
            raise CheckpointError(f"{path}: {key} must be true or false, got "
                                  f"{json_type(value)} {value!r}")
        if value is not None:
            options[key] = value
    return options
