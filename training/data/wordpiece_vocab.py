"""`albert-tf vocab --model-type wordpiece`: learn a BERT-style vocab.txt (Chinese ALBERT's kind).

The words are counted with the project's own BERT basic tokenizer
(`albert_tf.tokenizer.wordpiece.BasicTokenizer`: cleaning, CJK characters split,
lower-casing and accent stripping, punctuation split), so the vocabulary holds the
words `WordPieceTokenizer` will look up; tensorflow-text's WordPiece learner
(`tensorflow_text.tools.wordpiece_vocab`, the one behind `bert_vocab_from_dataset`)
chooses the pieces: every character seen (alone and as a "##" continuation), then
the frequent pieces, searching the count threshold whose vocabulary comes closest
to `vocab_size` (within 5% below it; the characters can take it above).
[PAD] [UNK] [CLS] [SEP] [MASK] are ids 0-4.

Example:
  albert-tf vocab --model-type wordpiece --input 'corpus/*.txt' --output vocab/vocab --vocab-size 21128
  # writes vocab/vocab.txt
"""

from __future__ import annotations

import collections
import logging
import os
import time
from collections.abc import Sequence

from albert_tf.infra import atomic
from albert_tf.tokenizer.wordpiece import SPECIAL_TOKENS, SUFFIX, BasicTokenizer, WordPieceTokenizer

from .vocab_inputs import VocabError, expand_inputs, read_sentences

logger = logging.getLogger(__name__)

OUTPUT_SUFFIX = ".txt"  # PREFIX.txt: a .txt file is read as WordPiece (`kinds.kind_of_file`)
# Counts below this never make a piece: the threshold search starts here (the
# learner's default, 10, leaves a small corpus with characters alone).
LOWER_THRESHOLD = 2
MAX_PIECE_CHARS = 50  # the learner's default: longer words are not counted


def count_words(files: Sequence[str], basic: BasicTokenizer, stats: dict) -> collections.Counter:
    """How often each basic-tokenizer word occurs in the non-blank lines of `files`."""
    counts: collections.Counter = collections.Counter()
    for line in read_sentences(files, stats=stats, normalize=lambda text: text.strip()):
        counts.update(basic.basic_tokenize(line))
    return counts


def learn_pieces(counts: collections.Counter, vocab_size: int) -> list[str]:
    """The vocabulary tensorflow-text's learner makes of `counts`, special tokens first."""
    # Deferred: tensorflow_text imports TensorFlow, which only this path needs.
    from tensorflow_text.tools.wordpiece_vocab import wordpiece_tokenizer_learner_lib as learner

    characters = {c for word in counts for c in word}
    pieces = learner.learn(
        counts, vocab_size, list(SPECIAL_TOKENS), lower_thresh=LOWER_THRESHOLD,
        max_token_length=MAX_PIECE_CHARS, max_input_tokens=-1,
        # Every character is kept (the default keeps 1000: too few for Chinese).
        max_unique_chars=len(characters), include_joiner_token=True, joiner=SUFFIX)
    # The learner adds the bare joiner "##" as a token; BERT's vocabularies have none
    # (the basic tokenizer splits "#" off as punctuation, so it is never looked up).
    return [p for p in pieces if p != SUFFIX]


def train_wordpiece_vocab(inputs: Sequence[str], output_prefix: str, vocab_size: int, *,
                          do_lower_case: bool = True, overwrite: bool = False) -> str:
    """Learns a WordPiece vocabulary; writes `{output_prefix}.txt` atomically.

    Args:
      inputs: text files or globs (plain or .gz), one sentence per line.
      output_prefix: the output is this plus ".txt" (its folder is created).
      vocab_size: the size aimed at, the 5 special tokens included.
      do_lower_case: lower-case and strip accents, as the tokenizer will (the
        Chinese ALBERT models do).
      overwrite: replace an existing output (`--overwrite`).

    Returns:
      The path of the vocab.txt written.
    """
    if vocab_size <= len(SPECIAL_TOKENS):
        raise VocabError(f"vocab_size={vocab_size} must exceed the {len(SPECIAL_TOKENS)} "
                         f"special tokens {' '.join(SPECIAL_TOKENS)}")
    output = output_prefix + OUTPUT_SUFFIX
    atomic.check_replaceable(output, replace=overwrite, option="--output", flag="--overwrite",
                             error=VocabError)
    files = expand_inputs(inputs)
    start, stats = time.monotonic(), {}
    counts = count_words(files, BasicTokenizer(do_lower_case), stats)
    if not counts:
        raise VocabError(f"the corpus is empty: no word in {', '.join(files)}")
    pieces = learn_pieces(counts, vocab_size)
    os.makedirs(os.path.dirname(os.path.abspath(output)) or ".", exist_ok=True)
    with atomic.atomic_path(output, replace=overwrite) as tmp:
        with open(tmp, "w", encoding="utf-8", newline="\n") as f:
            f.write("".join(p + "\n" for p in pieces))
        WordPieceTokenizer(tmp)  # read_vocab's rules hold before the name is taken
    logger.info("learned a %d-piece WordPiece vocabulary (%d aimed at) from %d lines, %d "
                "distinct words, %d file(s) in %.1f s: %s", len(pieces), vocab_size,
                stats["lines"], len(counts), len(files), time.monotonic() - start, output)
    return output
