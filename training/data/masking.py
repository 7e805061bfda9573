"""Whole-word n-gram masking for the masked-LM objective, as in the ALBERT paper.

The rules (shared with the read-time dynamic masking in `pretrain/pipeline.py`):

* **Words.** A SentencePiece piece starts a new word when it begins with the
  word-start marker "▁", when it is a special piece (`<unk>`, `[CLS]`, ...), a
  single punctuation character, or contains a character other than ASCII
  letters and punctuation (digits, non-Latin scripts: each such piece is a word
  of its own, as in the original `_is_start_piece_sp`). The first piece of a
  segment always starts a word, so a word never spans a [SEP].
  A WordPiece piece (`kind="wordpiece"`, a vocab.txt) starts a word unless it is a
  "##" continuation: a "##" piece belongs to the word before it, as the original's
  masking over WordPiece (`_is_start_piece_bert`) has it; every CJK character is a
  word of its own (the basic tokenizer splits them).
* **How many.** `num_to_predict = min(max_predictions, max(1, round(len * p)))`
  where `len` counts every token of the sequence including [CLS]/[SEP].
* **Which.** Word start positions are visited in a random order. At each one an
  n-gram length is drawn with p(n) proportional to 1/n for n <= max_ngram
  (truncated to the words left in the segment); if the n-gram's pieces would
  exceed the budget, shorter n-grams are tried; an n-gram that overlaps one
  already chosen is skipped.
* **What.** Each chosen token independently becomes [MASK] with probability
  0.8, a token drawn uniformly from the whole vocabulary with probability 0.1,
  or stays unchanged with probability 0.1.
"""

from __future__ import annotations

import bisect
import dataclasses
import functools
import string
from collections.abc import Sequence

import numpy as np

from albert_tf.tokenizer.kinds import SENTENCEPIECE, WORDPIECE
from albert_tf.tokenizer.wordpiece import SUFFIX

MAX_NGRAM = 3
MASK_RATE = 0.8
RANDOM_RATE = 0.1
WORD_START = "\u2581"  # "▁", SentencePiece's word-start marker

# Kinds of masked-token replacement, the indices of `MaskedLm.kind_counts`.
KIND_MASK, KIND_RANDOM, KIND_KEPT = 0, 1, 2

_PUNCTUATION = frozenset(string.punctuation)
_LETTERS_OR_PUNCTUATION = frozenset(string.ascii_letters) | _PUNCTUATION


def is_word_start(piece: str) -> bool:
    """True when a SentencePiece piece begins a new word (see the module docstring)."""
    if piece.startswith((WORD_START, "<", "[")) or piece in _PUNCTUATION:
        return True
    return not all(ch in _LETTERS_OR_PUNCTUATION for ch in piece)


def is_wordpiece_word_start(piece: str) -> bool:
    """True when a WordPiece piece begins a word: any piece but a "##" continuation."""
    return not piece.startswith(SUFFIX)


def word_start_table(pieces: Sequence[str], kind: str = SENTENCEPIECE) -> np.ndarray:
    """Returns bool `[vocab_size]`: whether the piece with that id begins a word.

    `kind`: the tokenizer kind (`albert_tf.tokenizer.kinds`) whose pieces these are.
    """
    rule = is_wordpiece_word_start if kind == WORDPIECE else is_word_start
    return np.fromiter((rule(p) for p in pieces), dtype=bool, count=len(pieces))


def ngram_probabilities(max_ngram: int = MAX_NGRAM) -> np.ndarray:
    """p(n) for n = 1..max_ngram, proportional to 1/n (the paper's n-gram masking)."""
    weights = 1.0 / np.arange(1, max_ngram + 1)
    return weights / weights.sum()


def num_to_predict(length: int, masked_lm_prob: float, max_predictions: int) -> int:
    """How many tokens of a `length`-token sequence (with [CLS]/[SEP]) to predict."""
    # Python's round() is half-to-even, the same as the original and as tf.round.
    return min(max_predictions, max(1, int(round(length * masked_lm_prob))))


def max_predictions_for(seq_length: int, masked_lm_prob: float) -> int:
    """The most positions `num_to_predict` asks for in an instance of `seq_length` tokens:
    the `max_predictions_per_seq` (masked_lm_positions' width) that cuts none short."""
    return num_to_predict(seq_length, masked_lm_prob, seq_length)


def word_groups(starts: np.ndarray, maskable: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Groups maskable positions into words.

    Args:
      starts: bool `[T]`, the piece at this position begins a word.
      maskable: bool `[T]`, False for [CLS], [SEP] and padding.

    Returns:
      `(first, length, reach)`, each int `[W]` over the W words in order: first
      position, number of pieces, and how many consecutive words (this one
      included) follow in the same maskable run (segment).
    """
    previous_maskable = np.concatenate([[False], maskable[:-1]])
    begins = maskable & (starts | ~previous_maskable)
    first = np.flatnonzero(begins)
    run_end = np.flatnonzero(maskable & ~np.concatenate([maskable[1:], [False]]))
    # end of the maskable run that contains each word's first position
    word_run_end = run_end[np.searchsorted(run_end, first)]
    ends = np.append(first[1:], len(maskable))
    ends = np.minimum(ends, word_run_end + 1)
    run_id = np.searchsorted(run_end, first)
    # words left in the run: the index of the run's last word minus this index, plus one
    last_word_of_run = np.searchsorted(run_id, run_id, side="right") - 1
    reach = last_word_of_run - np.arange(len(first)) + 1
    return first, ends - first, reach


@functools.cache
def _truncated_cdfs(max_ngram: int) -> tuple[list[float], ...]:
    """cdfs[k - 1]: the cdf of p(n) truncated to n <= k."""
    return tuple(np.cumsum(ngram_probabilities(k)).tolist() for k in range(1, max_ngram + 1))


def select_ngrams(lengths: np.ndarray, reach: np.ndarray, budget: int,
                  rng: np.random.Generator, max_ngram: int = MAX_NGRAM) -> list[tuple[int, int]]:
    """Chooses non-overlapping whole-word n-grams with at most `budget` pieces in total.

    Args:
      lengths: int `[W]`, pieces per word.
      reach: int `[W]`, words left in the word's segment (see `word_groups`).
      budget: the number of pieces to select (num_to_predict).
      rng: the random source.

    Returns:
      `[(first_word, n), ...]` in selection order.
    """
    cdfs = _truncated_cdfs(max_ngram)
    # Plain Python lists: this loop runs per word visited, where NumPy's per-call
    # overhead on tiny slices would dominate.
    prefix = [0] + np.cumsum(lengths).tolist()
    reach = reach.tolist()
    draws = rng.random(len(lengths)).tolist()
    covered = bytearray(len(lengths) + max_ngram)
    chosen: list[tuple[int, int]] = []
    count = 0
    for w in rng.permutation(len(lengths)).tolist():
        if count >= budget:
            break
        longest = min(max_ngram, reach[w])
        n = min(bisect.bisect_right(cdfs[longest - 1], draws[w]) + 1, longest)
        # Shorter n-grams are tried when the drawn one would overrun the budget.
        while n > 0 and count + prefix[w + n] - prefix[w] > budget:
            n -= 1
        if n == 0 or any(covered[w:w + n]):
            continue
        covered[w:w + n] = b"\x01" * n
        count += prefix[w + n] - prefix[w]
        chosen.append((w, n))
    return chosen


@dataclasses.dataclass
class MaskedLm:
    """The result of masking one sequence.

    Attributes:
      input_ids: int32 `[T]`, the sequence with chosen tokens replaced.
      positions: int32 `[K]`, ascending positions of the chosen tokens (K <= budget).
      labels: int32 `[K]`, the original ids at `positions`.
      ngrams: the n of every chosen n-gram.
      kind_counts: int `[3]`, tokens replaced by [MASK], by a random id, kept.
      budget: num_to_predict, the number of tokens that was aimed at.
    """

    input_ids: np.ndarray
    positions: np.ndarray
    labels: np.ndarray
    ngrams: list[int]
    kind_counts: np.ndarray
    budget: int


def mask_sequence(ids: np.ndarray, starts: np.ndarray, maskable: np.ndarray,
                  rng: np.random.Generator, *, masked_lm_prob: float, max_predictions: int,
                  vocab_size: int, mask_id: int, max_ngram: int = MAX_NGRAM) -> MaskedLm:
    """Applies whole-word n-gram masking with 80/10/10 replacement to one sequence.

    Args:
      ids: int `[T]`, the token ids including [CLS] and [SEP]s (no padding).
      starts: bool `[T]`, word starts (`word_start_table(...)[ids]`).
      maskable: bool `[T]`, False at [CLS]/[SEP].
      rng: the random source.
      masked_lm_prob, max_predictions: the budget, see `num_to_predict`.
      vocab_size, mask_id: for the replacement tokens.

    Returns:
      A `MaskedLm`.
    """
    ids = np.asarray(ids, dtype=np.int32)
    first, lengths, reach = word_groups(starts, maskable)
    budget = num_to_predict(len(ids), masked_lm_prob, max_predictions)
    chosen = select_ngrams(lengths, reach, budget, rng, max_ngram)
    positions = np.sort(np.concatenate(
        [np.arange(first[w], first[w + n - 1] + lengths[w + n - 1]) for w, n in chosen]
        or [np.zeros(0, np.int64)])).astype(np.int32)
    labels = ids[positions]
    output = ids.copy()
    draws = rng.random(len(positions))
    kinds = np.where(draws < MASK_RATE, KIND_MASK,
                     np.where(draws < MASK_RATE + RANDOM_RATE, KIND_RANDOM, KIND_KEPT))
    output[positions[kinds == KIND_MASK]] = mask_id
    random_positions = positions[kinds == KIND_RANDOM]
    output[random_positions] = rng.integers(0, vocab_size, size=len(random_positions))
    return MaskedLm(output, positions, labels, [n for _, n in chosen],
                    np.bincount(kinds, minlength=3), budget)
