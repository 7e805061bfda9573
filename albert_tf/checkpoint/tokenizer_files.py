"""Which tokenizer goes with a checkpoint: its SentencePiece model, lower-casing and accents.

One function, `checkpoint_tokenizer`, answers it for every command that starts
from a checkpoint (fine-tuning, export, convert): an explicit choice wins, else
what ships with the checkpoint.

  albert-tf checkpoint  spiece.model; do_lower_case, keep_accents from albert_task.json
  Hugging Face          spiece.model; do_lower_case from tokenizer_config.json
  TF1 (google-research) the single *.model beside model.ckpt-* (e.g. 30k-clean.model);
                        lower-cased (the released models are uncased)

Needs neither TensorFlow nor Keras.
"""

from __future__ import annotations

import dataclasses
import glob
import json
import logging
import os

from albert_tf.errors import UserError

logger = logging.getLogger(__name__)

SPM_FILE = "spiece.model"
HF_TOKENIZER_CONFIG = "tokenizer_config.json"


@dataclasses.dataclass(frozen=True)
class TokenizerFiles:
    """spm_model: path of the SentencePiece model, or None when none was found."""

    spm_model: str | None
    do_lower_case: bool
    keep_accents: bool = False


def find_spm_model(src: str) -> str | None:
    """The SentencePiece model shipped with a checkpoint: spiece.model (albert-tf, Hugging
    Face) or the single *.model file beside a TF1 checkpoint (e.g. 30k-clean.model)."""
    from albert_tf.checkpoint.readers import tf1_prefix

    directory = src if os.path.isdir(src) else os.path.dirname(tf1_prefix(src) or src)
    named = os.path.join(directory, SPM_FILE)
    if os.path.isfile(named):
        return named
    candidates = sorted(glob.glob(os.path.join(directory, "*.model")))
    if len(candidates) > 1:
        logger.warning("several SentencePiece models beside %s (%s); pass the one to use",
                       src, ", ".join(candidates))
    return candidates[0] if len(candidates) == 1 else None


def hf_do_lower_case(src: str) -> bool | None:
    """do_lower_case from a Hugging Face tokenizer_config.json, if there is one."""
    path = os.path.join(src, HF_TOKENIZER_CONFIG)
    if not os.path.isfile(path):
        return None
    try:
        with open(path, encoding="utf-8") as f:
            values = json.load(f)
    except json.JSONDecodeError as e:
        raise UserError(f"{path}:{e.lineno}: invalid JSON: {e.msg}") from None
    value = values.get("do_lower_case") if isinstance(values, dict) else None
    return None if value is None else bool(value)


def checkpoint_tokenizer(checkpoint: str, spm_model: str | None = None,
                         do_lower_case: bool | None = None,
                         keep_accents: bool | None = None) -> TokenizerFiles:
    """The tokenizer settings for `checkpoint`; explicit `spm_model` / `do_lower_case` /
    `keep_accents` win (accents: the task record of ours, else stripped as the original).

    Raises:
      UserError: an explicit `spm_model` that is not a file (checked first, by name).
      CheckpointError: `checkpoint` is not a checkpoint of any known format.
    """
    from albert_tf.checkpoint import detect_format
    from albert_tf.checkpoint.task_record import TaskRecord

    if spm_model is not None and not os.path.isfile(spm_model):
        raise UserError(f"SentencePiece model {spm_model} does not exist")
    kind = detect_format(checkpoint)
    if kind == "albert_tf":  # the checkpoint's task record says how its tokenizer normalises
        record = TaskRecord.read(checkpoint)
        do_lower_case = record.do_lower_case if do_lower_case is None else do_lower_case
        keep_accents = record.keep_accents if keep_accents is None else keep_accents
    elif do_lower_case is None:
        do_lower_case = (hf_do_lower_case(checkpoint) if kind == "hf" else None) is not False
    return TokenizerFiles(spm_model or find_spm_model(checkpoint), bool(do_lower_case),
                          bool(keep_accents))
