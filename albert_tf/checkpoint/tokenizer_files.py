"""Which tokenizer goes with a checkpoint: its kind and vocabulary, lower-casing and accents.

`OpenedCheckpoint.tokenizer` answers it for every command that starts from a
checkpoint (fine-tuning, export, convert), and `.tokenizer_files(...)` applies an
explicit choice over it. The kind (`albert_tf.tokenizer.kinds`: sentencepiece or
wordpiece), lower-casing and accents are the task record's (one decision, read
everywhere); the vocabulary is the file of that kind shipped beside the weights:

  albert-tf checkpoint  spiece.model or vocab.txt; the rest from albert_task.json
  Hugging Face          spiece.model (AlbertTokenizer) or vocab.txt (BertTokenizer, what
                        the Chinese models ship); do_lower_case, keep_accents
                        (BertTokenizer: strip_accents), tokenize_chinese_chars from
                        tokenizer_config.json (`hf_tokenizer_options`, its one reader);
                        without that file the vocabulary present decides
  TF1 (google-research) the single *.model beside model.ckpt-* (e.g. 30k-clean.model), or
                        vocab_chinese.txt / vocab.txt (the Chinese models); lower-cased,
                        accents stripped (the released models are uncased)

Needs neither TensorFlow nor Keras.
"""

from __future__ import annotations

import dataclasses
import glob
import logging
import os

from albert_tf.checkpoint.readers import CheckpointError
from albert_tf.infra.textio import check_file, json_type, read_json_object
from albert_tf.tokenizer.kinds import (
    SENTENCEPIECE,
    SPM_FILE,
    VOCAB_FILE,
    VOCABULARY_FILES,
    WORDPIECE,
    python_tokenizer,
)

__all__ = ["TokenizerFiles", "SPM_FILE", "VOCAB_FILE", "HF_TOKENIZER_CONFIG", "find_spm_model",
           "find_vocabulary", "shipped_kind", "hf_tokenizer_options", "VOCABULARY_FILES",
           "HF_TOKENIZER_CLASSES", "tf1_tokenizer_options"]

logger = logging.getLogger(__name__)

# The WordPiece vocabularies a checkpoint may ship, in the order looked for: Hugging
# Face's and the TF1 Chinese releases' (albert_*_zh ship vocab_chinese.txt).
WORDPIECE_FILES = (VOCAB_FILE, "vocab_chinese.txt")
HF_TOKENIZER_CONFIG = "tokenizer_config.json"
# tokenizer_config.json's tokenizer_class -> our kind; what `convert --to hf` writes.
HF_TOKENIZER_CLASSES = {"AlbertTokenizer": SENTENCEPIECE, "AlbertTokenizerFast": SENTENCEPIECE,
                        "BertTokenizer": WORDPIECE, "BertTokenizerFast": WORDPIECE}
# AlbertTokenizer's defaults, and the original (uncased) releases': what a checkpoint
# that says nothing about its tokenizer gets.
DEFAULT_OPTIONS = {"do_lower_case": True, "keep_accents": False}


@dataclasses.dataclass(frozen=True)
class TokenizerFiles:
    """The tokenizer of a checkpoint.

    spm_model: the vocabulary file: a SentencePiece model (kind "sentencepiece") or a
    WordPiece vocab.txt (kind "wordpiece"); None when none was found.
    keep_accents: for WordPiece, False strips accents (BertTokenizer's strip_accents).
    """

    spm_model: str | None
    do_lower_case: bool
    keep_accents: bool = False
    kind: str = SENTENCEPIECE
    tokenize_chinese_chars: bool = True
    split_characters: bool = False

    def load(self):
        """The Python tokenizer (`AlbertTokenizer` or `WordPieceTokenizer`)."""
        if self.spm_model is None:
            raise CheckpointError("no vocabulary: the checkpoint ships none; pass one")
        return python_tokenizer(self.spm_model, self.do_lower_case, self.keep_accents,
                                self.tokenize_chinese_chars, kind=self.kind,
                                split_characters=self.split_characters)

    def preprocessor(self, seq_length: int):
        """The in-graph `AlbertPreprocessor` of this vocabulary and these options."""
        if self.spm_model is None:
            raise CheckpointError("no vocabulary: the checkpoint ships none; pass one")
        # Deferred on purpose: the in-graph preprocessor needs TensorFlow.
        from albert_tf.tokenizer.preprocessor import AlbertPreprocessor

        return AlbertPreprocessor(self.spm_model, seq_length, self.do_lower_case,
                                  self.keep_accents, self.tokenize_chinese_chars,
                                  split_characters=self.split_characters)


def find_spm_model(directory: str) -> str | None:
    """The SentencePiece model shipped in a checkpoint's `directory`: spiece.model
    (albert-tf, Hugging Face) or the single *.model file (e.g. TF1's 30k-clean.model)."""
    named = os.path.join(directory, SPM_FILE)
    if _shipped(named):
        return named
    candidates = sorted(glob.glob(os.path.join(directory, "*.model")))
    if len(candidates) > 1:
        logger.warning("several SentencePiece models in %s (%s); pass the one to use",
                       directory, ", ".join(candidates))
    return candidates[0] if len(candidates) == 1 else None


def find_vocabulary(directory: str, kind: str) -> str | None:
    """The vocabulary of `kind` shipped in `directory` (`find_spm_model`, or the first of
    `WORDPIECE_FILES` present), None when there is none."""
    if kind == WORDPIECE:
        found = [os.path.join(directory, n) for n in WORDPIECE_FILES]
        return next((path for path in found if _shipped(path)), None)
    return find_spm_model(directory)


def _shipped(path: str) -> bool:
    """Whether a vocabulary file `path` is there: False when nothing has that name; a
    FIFO, a directory, a device, a dangling link or an unreadable file of that name is
    refused naming it, never taken for an absent vocabulary."""
    if not os.path.lexists(path):
        return False
    if not os.path.exists(path):
        raise CheckpointError(f"{path} is a symbolic link to {os.readlink(path)}, which does "
                              "not exist; the checkpoint's vocabulary cannot be read")
    check_file(path)  # the one rule for a file read whole: a regular file, its size
    if not os.access(path, os.R_OK):
        raise CheckpointError(f"{path} cannot be read (permission denied)")
    return True


def shipped_kind(directory: str) -> str:
    """The kind of vocabulary `directory` ships: WordPiece when it holds a vocab.txt
    (or vocab_chinese.txt) and no SentencePiece model, else SentencePiece."""
    if find_spm_model(directory) is None and find_vocabulary(directory, WORDPIECE):
        return WORDPIECE
    return SENTENCEPIECE


def hf_tokenizer_options(directory: str) -> dict:
    """The tokenizer fields of a Hugging Face directory's task record: tokenizer (the
    kind: tokenizer_config.json's tokenizer_class, else the vocabulary shipped),
    do_lower_case, keep_accents and tokenize_chinese_chars.

    Absent or null keys take the tokenizer class's defaults: `DEFAULT_OPTIONS` for
    AlbertTokenizer; for BertTokenizer do_lower_case true, strip_accents following
    do_lower_case (keep_accents = not strip_accents), tokenize_chinese_chars true.

    Raises:
      CheckpointError: the file is not valid JSON or not a JSON object, one of those
        keys is not a boolean, or tokenizer_class is none of `HF_TOKENIZER_CLASSES`
        (naming it).
    """
    path = os.path.join(directory, HF_TOKENIZER_CONFIG)
    values = read_json_object(path, CheckpointError) if os.path.lexists(path) else {}
    for key in ("do_lower_case", "keep_accents", "strip_accents", "tokenize_chinese_chars"):
        value = values.get(key)
        if value is not None and not isinstance(value, bool):  # "false" would read as True
            raise CheckpointError(f"{path}: {key} must be true or false, got "
                                  f"{json_type(value)} {value!r}")
    named = values.get("tokenizer_class")
    if named is not None and named not in HF_TOKENIZER_CLASSES:
        raise CheckpointError(f"{path}: tokenizer_class={named!r} is not one albert-tf reads "
                              f"({', '.join(HF_TOKENIZER_CLASSES)})")
    kind = HF_TOKENIZER_CLASSES[named] if named else shipped_kind(directory)
    other = SENTENCEPIECE if kind == WORDPIECE else WORDPIECE
    if named and not find_vocabulary(directory, kind) and find_vocabulary(directory, other):
        raise CheckpointError(
            f"{path}: tokenizer_class={named!r} needs a {VOCABULARY_FILES[kind]}, but the "
            f"directory ships {os.path.basename(find_vocabulary(directory, other))} (the "
            f"vocabulary of {', '.join(c for c, k in HF_TOKENIZER_CLASSES.items() if k == other)}"
            "): fix tokenizer_class or ship the vocabulary it names")
    options = {**DEFAULT_OPTIONS, "tokenizer": kind, "tokenize_chinese_chars": True}
    for key in ("do_lower_case", "keep_accents", "tokenize_chinese_chars"):
        if values.get(key) is not None:
            options[key] = values[key]
    if kind == WORDPIECE:
        strip = values.get("strip_accents")
        options["keep_accents"] = (not options["do_lower_case"]) if strip is None else not strip
    return options


def tf1_tokenizer_options(directory: str) -> dict:
    """The tokenizer fields of an original TF1 checkpoint's record: the kind shipped
    (`shipped_kind`), lower-cased with accents stripped (the released models')."""
    return {**DEFAULT_OPTIONS, "tokenizer": shipped_kind(directory)}
