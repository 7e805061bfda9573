"""The tokenizer kinds and the files they read: the one table every stage asks.

A checkpoint's task record names its kind (`TaskRecord.tokenizer`); which file goes with
a checkpoint is `albert_tf.checkpoint.tokenizer_files`'s decision; `python_tokenizer`
builds the Python tokenizer of a kind. Pure Python: the tokenizer modules are imported
when one is built (sentencepiece is not needed for WordPiece).
"""

from __future__ import annotations

import os

__all__ = ["TOKENIZER_KINDS", "SENTENCEPIECE", "WORDPIECE", "SPM_FILE", "VOCAB_FILE",
           "VOCABULARY_FILES", "kind_of_file", "python_tokenizer"]

SENTENCEPIECE, WORDPIECE = "sentencepiece", "wordpiece"
TOKENIZER_KINDS = (SENTENCEPIECE, WORDPIECE)  # the first is what a record without one means
SPM_FILE = "spiece.model"
VOCAB_FILE = "vocab.txt"  # a WordPiece vocabulary: Hugging Face's name, and ours
# The file each kind is written under: in a checkpoint (ours, `convert --to hf`) and
# among a `.keras` file's assets.
VOCABULARY_FILES = {SENTENCEPIECE: SPM_FILE, WORDPIECE: VOCAB_FILE}


def kind_of_file(path: str | os.PathLike) -> str:
    """The kind a vocabulary file is read as: a `.txt` file is a WordPiece vocab.txt,
    anything else a SentencePiece model."""
    return WORDPIECE if os.fspath(path).lower().endswith(".txt") else SENTENCEPIECE


def python_tokenizer(path: str | os.PathLike, do_lower_case: bool = True,
                     keep_accents: bool = False, tokenize_chinese_chars: bool = True,
                     kind: str | None = None, split_characters: bool = False):
    """The Python tokenizer of `path`: `AlbertTokenizer` or `WordPieceTokenizer`.

    Args:
      path: spiece.model / *.model, or vocab.txt.
      kind: one of TOKENIZER_KINDS; None: `kind_of_file(path)`.
      keep_accents: SentencePiece's option; for WordPiece, False strips accents.
      tokenize_chinese_chars, split_characters: WordPiece's options (SentencePiece
        has none).
    """
    kind = kind or kind_of_file(path)
    if kind == WORDPIECE:
        from albert_tf.tokenizer.wordpiece import WordPieceTokenizer
        return WordPieceTokenizer(path, do_lower_case, strip_accents=not keep_accents,
                                  tokenize_chinese_chars=tokenize_chinese_chars,
                                  split_characters=split_characters)
    from albert_tf.tokenizer.spm import AlbertTokenizer
    return AlbertTokenizer(path, do_lower_case, keep_accents=keep_accents)
