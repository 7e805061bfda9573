"""The tokenizer kinds and the files they read: the one table every stage asks.

A checkpoint's task record names its kind (`TaskRecord.tokenizer`); which file goes with
a checkpoint is `albert_tf.checkpoint.tokenizer_files`'s decision; `python_tokenizer`
builds the Python tokenizer of a kind. Pure Python: the tokenizer modules are imported
when one is built (sentencepiece is not needed for WordPiece).
"""

from __future__ import annotations

import os

__all__ = ["TOKENIZER_KINDS", "SENTENCEPIECE", "WORDPIECE", "SPM_FILE", "VOCAB_FILE",
           "VOCABULARY_FILES", "TOKENIZER_JSON", "kind_of_file", "python_tokenizer",
           "is_tokenizer_json", "vocabulary_file_name"]

SENTENCEPIECE, WORDPIECE = "sentencepiece", "wordpiece"
TOKENIZER_KINDS = (SENTENCEPIECE, WORDPIECE)  # the first is what a record without one means
SPM_FILE = "spiece.model"
VOCAB_FILE = "vocab.txt"  # a WordPiece vocabulary: Hugging Face's name, and ours
# The file each kind is written under: in a checkpoint (ours, `convert --to hf`) and
# among a `.keras` file's assets.
VOCABULARY_FILES = {SENTENCEPIECE: SPM_FILE, WORDPIECE: VOCAB_FILE}
# Hugging Face's tokenizer.json (`tokenizer_json`): either kind, its model says which.
TOKENIZER_JSON = "tokenizer.json"


def is_tokenizer_json(path: str | os.PathLike) -> bool:
    """Whether `path` is read as a tokenizer.json (a `.json` file)."""
    return os.fspath(path).lower().endswith(".json")


def vocabulary_file_name(path: str | os.PathLike, kind: str) -> str:
    """The name a vocabulary file read from `path` is written under (a checkpoint, a
    `.keras` file's assets): tokenizer.json for one, else `VOCABULARY_FILES[kind]`."""
    return TOKENIZER_JSON if is_tokenizer_json(path) else VOCABULARY_FILES[kind]


def kind_of_file(path: str | os.PathLike) -> str:
    """The kind a vocabulary file is read as: a `.txt` file is a WordPiece vocab.txt, a
    tokenizer.json the kind of its model (Unigram: sentencepiece), anything else a
    SentencePiece model."""
    if is_tokenizer_json(path):
        from albert_tf.tokenizer.tokenizer_json import json_kind
        return json_kind(path)
    return WORDPIECE if os.fspath(path).lower().endswith(".txt") else SENTENCEPIECE


def python_tokenizer(path: str | os.PathLike, do_lower_case: bool = True,
                     keep_accents: bool = False, tokenize_chinese_chars: bool = True,
                     kind: str | None = None, split_characters: bool = False):
    """The Python tokenizer of `path`: `AlbertTokenizer` or `WordPieceTokenizer`.

    Args:
      path: spiece.model / *.model, vocab.txt, or a tokenizer.json (whose own rules
        apply: the options below are the file's, not these arguments).
      kind: one of TOKENIZER_KINDS; None: `kind_of_file(path)`.
      keep_accents: SentencePiece's option; for WordPiece, False strips accents.
      tokenize_chinese_chars, split_characters: WordPiece's options (SentencePiece
        has none).
    """
    if is_tokenizer_json(path):
        from albert_tf.tokenizer.json_wordpiece import JsonWordPieceTokenizer
        from albert_tf.tokenizer.tokenizer_json import read_tokenizer_json
        spec = read_tokenizer_json(path)
        if spec.kind == WORDPIECE:
            return JsonWordPieceTokenizer(spec)
        from albert_tf.tokenizer.json_unigram import JsonUnigramTokenizer
        return JsonUnigramTokenizer(spec)
    kind = kind or kind_of_file(path)
    if kind == WORDPIECE:
        from albert_tf.tokenizer.wordpiece import WordPieceTokenizer
        return WordPieceTokenizer(path, do_lower_case, strip_accents=not keep_accents,
                                  tokenize_chinese_chars=tokenize_chinese_chars,
                                  split_characters=split_characters)
    from albert_tf.tokenizer.spm import AlbertTokenizer
    return AlbertTokenizer(path, do_lower_case, keep_accents=keep_accents)
