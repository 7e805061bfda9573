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
  tokenizer.json        Hugging Face's, all transformers 5 saves (no spiece.model, no
                        vocab.txt): used when the original file is absent, or when passed
                        as the vocabulary (`--spm-model DIR/tokenizer.json`); its own rules
                        apply (`albert_tf.tokenizer.tokenizer_json`), lower-casing and
                        accents included. Beside spiece.model or vocab.txt the original
                        file wins (ALBERT's own rules), said in one INFO line.

Needs neither TensorFlow nor Keras.
"""

from __future__ import annotations

import dataclasses
import glob
import logging
import os

from albert_tf.checkpoint.readers import CheckpointError
from albert_tf.errors import shown
from albert_tf.infra.textio import check_file, json_type, read_json_object
from albert_tf.tokenizer.kinds import (
    SENTENCEPIECE,
    SPM_FILE,
    TOKENIZER_JSON,
    VOCAB_FILE,
    VOCABULARY_FILES,
    WORDPIECE,
    is_tokenizer_json,
    kind_of_file,
    python_tokenizer,
)
from albert_tf.tokenizer.spm import (
    CLS_PIECE,
    MASK_PIECE,
    PAD_PIECE,
    SEP_PIECE,
    UNK_PIECE,
    load_spm_model,
)
from albert_tf.tokenizer.tokenizer_json import read_tokenizer_json
from albert_tf.tokenizer.wordpiece import SPECIAL_TOKENS, read_vocab

__all__ = ["TokenizerFiles", "SPM_FILE", "VOCAB_FILE", "HF_TOKENIZER_CONFIG", "find_spm_model",
           "find_vocabulary", "shipped_kind", "hf_tokenizer_options", "VOCABULARY_FILES",
           "HF_TOKENIZER_CLASSES", "tf1_tokenizer_options", "TOKENIZER_JSON", "MISSING_TOKENIZER",
           "tokenizer_json_files", "vocabulary_name", "vocabulary_size",
           "VOCABULARY_NAMES"]

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
# How a message names a vocabulary of each kind.
VOCABULARY_NAMES = {SENTENCEPIECE: "SentencePiece model", WORDPIECE: "WordPiece vocabulary"}
# What a checkpoint without any tokenizer file is told, after its name.
MISSING_TOKENIZER = (f"has no tokenizer file ({SPM_FILE}, *.model, {VOCAB_FILE} or "
                     f"{TOKENIZER_JSON})")


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
            raise CheckpointError(f"the checkpoint {MISSING_TOKENIZER}; pass one")
        return python_tokenizer(self.spm_model, self.do_lower_case, self.keep_accents,
                                self.tokenize_chinese_chars, kind=self.kind,
                                split_characters=self.split_characters)

    def preprocessor(self, seq_length: int):
        """The in-graph `AlbertPreprocessor` of this vocabulary and these options."""
        if self.spm_model is None:
            raise CheckpointError(f"the checkpoint {MISSING_TOKENIZER}; pass one")
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


def _original_vocabulary(directory: str, kind: str) -> str | None:
    if kind == WORDPIECE:
        found = [os.path.join(directory, n) for n in WORDPIECE_FILES]
        return next((path for path in found if _shipped(path)), None)
    return find_spm_model(directory)


def find_vocabulary(directory: str, kind: str, quiet: bool = False) -> str | None:
    """The tokenizer file of `kind` shipped in `directory`: the original one
    (`find_spm_model`, or the first of `WORDPIECE_FILES` present), else a
    tokenizer.json; None when there is none. When both are there the original wins
    (ALBERT's own rules), said in one INFO line (unless `quiet`) with how to choose the
    other."""
    original = _original_vocabulary(directory, kind)
    json_path = os.path.join(directory, TOKENIZER_JSON)
    if not _shipped(json_path):
        return original
    if original is None or quiet:
        return original or json_path
    logger.info("%s: using %s, not %s beside it: the original file's rules are ALBERT's own; "
                "pass --spm-model %s for transformers' tokenization (what a model fine-tuned "
                "with transformers 5 learned)", directory, os.path.basename(original),
                TOKENIZER_JSON, json_path)
    return original


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
    (or vocab_chinese.txt) and no SentencePiece model, or only a WordPiece
    tokenizer.json; else SentencePiece."""
    if find_spm_model(directory) is None:
        if _original_vocabulary(directory, WORDPIECE):
            return WORDPIECE
        json_path = os.path.join(directory, TOKENIZER_JSON)
        if os.path.isfile(json_path):
            return kind_of_file(json_path)
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
    if named not in HF_TOKENIZER_CLASSES and _only_tokenizer_json(directory):
        named = None  # e.g. PreTrainedTokenizerFast: the file says what it is
    if named is not None and named not in HF_TOKENIZER_CLASSES:
        raise CheckpointError(f"{path}: tokenizer_class={named!r} is not one albert-tf reads "
                              f"({', '.join(HF_TOKENIZER_CLASSES)})")
    kind = HF_TOKENIZER_CLASSES[named] if named else shipped_kind(directory)
    other = SENTENCEPIECE if kind == WORDPIECE else WORDPIECE
    found_other = named and not find_vocabulary(directory, kind, quiet=True) and \
        find_vocabulary(directory, other, quiet=True)
    if found_other:
        raise CheckpointError(
            f"{path}: tokenizer_class={named!r} needs a {VOCABULARY_FILES[kind]}, but the "
            f"directory ships {os.path.basename(found_other)} (the "
            f"vocabulary of {', '.join(c for c, k in HF_TOKENIZER_CLASSES.items() if k == other)}"
            "): fix tokenizer_class or ship the vocabulary it names")
    if not _only_tokenizer_json(directory):  # a tokenizer.json names its own
        _check_special_tokens(path, values, kind)
    options = {**DEFAULT_OPTIONS, "tokenizer": kind, "tokenize_chinese_chars": True}
    for key in ("do_lower_case", "keep_accents", "tokenize_chinese_chars"):
        if values.get(key) is not None:
            options[key] = values[key]
    if kind == WORDPIECE:
        strip = values.get("strip_accents")
        options["keep_accents"] = (not options["do_lower_case"]) if strip is None else not strip
    return options


# The special tokens albert-tf's tokenizers use, per tokenizer_config.json role: what
# `convert --to hf` writes (AlbertTokenizer's, with its bos/eos; BertTokenizer's) and what
# a directory's tokenizer_config.json is checked against.
_ROLES = ("pad_token", "unk_token", "cls_token", "sep_token", "mask_token")
HF_SPECIAL_TOKENS = {
    SENTENCEPIECE: {"bos_token": CLS_PIECE, "eos_token": SEP_PIECE,
                    **dict(zip(_ROLES, (PAD_PIECE, UNK_PIECE, CLS_PIECE, SEP_PIECE,
                                        MASK_PIECE)))},
    WORDPIECE: dict(zip(_ROLES, SPECIAL_TOKENS)),
}


def _check_special_tokens(path: str, values: dict, kind: str) -> None:
    """CheckpointError when tokenizer_config.json names, for a role, another special token
    than the one albert-tf's tokenizer of `kind` uses (its ids would differ from
    transformers'); a string or an AddedToken object {"content": ...}."""
    for role in _ROLES:
        ours, value = HF_SPECIAL_TOKENS[kind][role], values.get(role)
        content = value.get("content") if isinstance(value, dict) else value
        if value is not None and content != ours:
            raise CheckpointError(
                f"{path}: {role}={shown(str(content))!r}, but albert-tf's "
                f"{VOCABULARY_FILES[kind]} tokenizer uses {ours!r} (the original ALBERT's "
                "special tokens); rename it in the vocabulary and tokenizer_config.json")


def vocabulary_name(path: str | os.PathLike) -> str:
    """How a message names the vocabulary file `path`."""
    return TOKENIZER_JSON if is_tokenizer_json(path) else VOCABULARY_NAMES[kind_of_file(path)]


def vocabulary_size(path: str | os.PathLike) -> tuple[str, int, str]:
    """(its name, its number of pieces or tokens, "pieces" | "tokens") of a vocabulary file."""
    if is_tokenizer_json(path):
        return vocabulary_name(path), len(read_tokenizer_json(path).vocab), "tokens"
    if kind_of_file(path) == WORDPIECE:
        return vocabulary_name(path), len(read_vocab(path)), "tokens"
    return vocabulary_name(path), load_spm_model(path)[1].get_piece_size(), "pieces"


def tokenizer_json_files(path: str) -> TokenizerFiles:
    """The tokenizer of a tokenizer.json: its kind, lower-casing and accents are the
    file's own (`tokenizer_json.read_tokenizer_json`), whatever a record says."""
    spec = read_tokenizer_json(path)
    return TokenizerFiles(path, spec.do_lower_case, spec.keep_accents, kind=spec.kind,
                          tokenize_chinese_chars=spec.bert.get("handle_chinese_chars", True))


def _only_tokenizer_json(directory: str) -> bool:
    """Whether `directory` ships a tokenizer.json and no original vocabulary."""
    return os.path.isfile(os.path.join(directory, TOKENIZER_JSON)) and not any(
        _original_vocabulary(directory, kind) for kind in (SENTENCEPIECE, WORDPIECE))


def tf1_tokenizer_options(directory: str) -> dict:
    """The tokenizer fields of an original TF1 checkpoint's record: the kind shipped
    (`shipped_kind`), lower-cased with accents stripped (the released models')."""
    return {**DEFAULT_OPTIONS, "tokenizer": shipped_kind(directory)}
