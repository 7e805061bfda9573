"""Sentence-pair instances from one tokenized document: SOP (ALBERT), NSP (BERT) or none.

A document is cut into chunks of consecutive sentences that fill a target
length (`max_seq_length - 3`, or with probability `short_seq_prob` a uniform
draw from [2, max_seq_length - 3], once per document and dupe, as the original).
Segment A is a random number of the chunk's first sentences and B the rest;
with probability 0.5 they are swapped and labelled 1. A chunk of a single
sentence is split at a random word boundary inside it, or skipped when the
sentence is a single word: the original's fallback of pairing it with a random
other document (next-sentence prediction) is exactly what SOP replaced, so it
never happens here.

The other objectives, for the paper's ablation (its Table 5):
  * `nsp`: next-sentence prediction as BERT made it: with probability 0.5 (and
    always for a one-sentence chunk) segment B is a run of sentences from a
    random start in ANOTHER document, filled to the target length, labelled 1;
    the chunk's sentences that did not go to A are put back for the next chunk.
    The other documents are those of the same shard (`others`), as BERT drew
    from the documents of the one input shard it was given.
  * `none`: the SOP chunks never swapped, label always 0; the pretrainer skips
    the sentence-pair loss (`trains_sentence_pair`).
The label is stored in the same feature for every objective (1 = the negative:
swapped for SOP, another document for NSP), so any model can be scored on
held-out sets of both tasks.

Randomness comes from a NumPy Generator seeded by (seed, source, document,
dupe), so an instance depends only on its own document (and, for NSP, the
documents of its shard), not on the order or the process in which documents
are handled.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence

import numpy as np

from albert_tf.config import DEFAULT_SEQ_LENGTH, MIN_SEQ_LENGTH, check_sequence_length
from albert_tf.errors import UserError
from albert_tf.infra import arguments
from albert_tf.infra.arguments import number_field

from . import masking

# Stream tags in the Generator seeds, so that differently used streams never coincide.
DOCUMENT_STREAM, SHARD_STREAM = 0, 1

# Sentence-pair objective -> whether the pretrainer trains on its label.
OBJECTIVES = {"sop": True, "nsp": True, "none": False}
DEFAULT_OBJECTIVE = "sop"


# A pretraining instance is a pair with at least one token in each segment (short
# targets are drawn from [2, max_seq_length - 3], as the original): two more than the
# model's minimum of [CLS] [SEP] [SEP].
MIN_PAIR_SEQ_LENGTH = MIN_SEQ_LENGTH + 2


def check_pair_seq_length(seq_length: int, max_position_embeddings: int | None = None,
                          where: str = "") -> int:
    """The one length rule (`albert_tf.config.check_sequence_length`), then room for a
    pair: returns `seq_length` if it is at least MIN_PAIR_SEQ_LENGTH, else UserError."""
    check_sequence_length(seq_length, max_position_embeddings, where)
    if seq_length < MIN_PAIR_SEQ_LENGTH:
        where = f" ({where})" if where else ""
        raise UserError(f"seq_length={seq_length} leaves no room for a sentence pair: "
                        f"pretraining data needs at least {MIN_PAIR_SEQ_LENGTH} "
                        f"([CLS] A [SEP] B [SEP], a token in each segment){where}")
    return seq_length


def trains_sentence_pair(objective: str) -> bool:
    """Whether data of this objective carries a sentence-pair label to train on."""
    if objective not in OBJECTIVES:
        raise ValueError(f"objective={objective!r} is not one of {', '.join(OBJECTIVES)}")
    return OBJECTIVES[objective]


@dataclasses.dataclass(frozen=True)
class GenerationOptions:
    """Options of pretraining-data generation; the defaults are the original's.

    Attributes:
      max_seq_length: tokens per instance, [CLS] and both [SEP]s included.
      max_predictions_per_seq: masked positions per instance (padded to this).
      masked_lm_prob: fraction of tokens to mask.
      short_seq_prob: probability of a shorter target length for a document.
      dupe_factor: instances are created this many times per document, each
        time with different chunk boundaries, swaps and masks.
      max_ngram: the longest n-gram masked as a unit.
      seed: seed of every random choice.
      objective: the sentence-pair task: "sop", "nsp" or "none" (see above).
    """

    max_seq_length: int = DEFAULT_SEQ_LENGTH  # the pair length rule (check_pair_seq_length)
    # Ranges: checked by `arguments.check_numbers`, the one numeric check of every command.
    max_predictions_per_seq: int = number_field(20, minimum=1)
    masked_lm_prob: float = number_field(0.15, exclusive_minimum=0.0, exclusive_maximum=1.0)
    short_seq_prob: float = number_field(0.1, minimum=0.0, maximum=1.0)
    dupe_factor: int = number_field(40, minimum=1)
    max_ngram: int = number_field(masking.MAX_NGRAM, minimum=1)
    seed: int = number_field(12345, minimum=0)
    objective: str = DEFAULT_OBJECTIVE

    def __post_init__(self):
        check_pair_seq_length(self.max_seq_length, where="max_seq_length")
        arguments.check_numbers(self)
        if self.objective not in OBJECTIVES:
            raise UserError(f"objective={self.objective!r} must be one of {', '.join(OBJECTIVES)}")


@dataclasses.dataclass(frozen=True)
class Vocabulary:
    """What generation needs to know about the tokenizer's vocabulary."""

    word_starts: np.ndarray  # bool [vocab_size]
    cls_id: int
    sep_id: int
    mask_id: int

    @property
    def size(self) -> int:
        return len(self.word_starts)

    @classmethod
    def from_tokenizer(cls, tokenizer) -> Vocabulary:
        """Builds it from an `AlbertTokenizer` or a `WordPieceTokenizer` (its `kind`
        says which word-start rule its pieces follow)."""
        pieces = [tokenizer.id_to_piece(i) for i in range(tokenizer.vocab_size)]
        return cls(masking.word_start_table(pieces, tokenizer.kind), tokenizer.cls_id,
                   tokenizer.sep_id, tokenizer.mask_id)


@dataclasses.dataclass
class Instance:
    """One training instance, unpadded.

    Attributes:
      input_ids: int32 `[T]`: [CLS] A [SEP] B [SEP], masked.
      segment_ids: int32 `[T]`: 0 for [CLS] A [SEP], 1 for B [SEP].
      token_boundary: int32 `[T]`: 1 where a word (or [CLS]/[SEP]) starts.
      masked: the masking result (positions, labels, n-grams, replacement kinds).
      sentence_order_label: the sentence-pair label: 1 when A and B were swapped
        (SOP) or B comes from another document (NSP); always 0 for "none".
    """

    input_ids: np.ndarray
    segment_ids: np.ndarray
    token_boundary: np.ndarray
    masked: masking.MaskedLm
    sentence_order_label: int


def target_length(max_num_tokens: int, short_seq_prob: float, rng: np.random.Generator) -> int:
    """The chunk length aimed at: usually full, sometimes uniform in [2, max]."""
    if rng.random() < short_seq_prob:
        return int(rng.integers(2, max_num_tokens + 1))
    return max_num_tokens


def truncate_pair(a: np.ndarray, b: np.ndarray, max_num_tokens: int,
                  rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Trims the longer segment, from its front or back at random, until both fit."""
    a_lo, a_hi, b_lo, b_hi = 0, len(a), 0, len(b)
    while (a_hi - a_lo) + (b_hi - b_lo) > max_num_tokens:
        front = rng.random() < 0.5
        if a_hi - a_lo > b_hi - b_lo:
            a_lo, a_hi = (a_lo + 1, a_hi) if front else (a_lo, a_hi - 1)
        else:
            b_lo, b_hi = (b_lo + 1, b_hi) if front else (b_lo, b_hi - 1)
    return a[a_lo:a_hi], b[b_lo:b_hi]


def _split_chunk(chunk: list[np.ndarray], word_starts: np.ndarray,
                 rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray] | None:
    """Splits a chunk into A (its first sentences) and B (the rest); None if impossible."""
    if len(chunk) >= 2:
        a_end = int(rng.integers(1, len(chunk)))  # 1 .. len - 1 sentences go to A
        return np.concatenate(chunk[:a_end]), np.concatenate(chunk[a_end:])
    sentence = chunk[0]
    cuts = np.flatnonzero(word_starts[sentence[1:]]) + 1  # word starts after the first piece
    if len(cuts) == 0:
        return None
    cut = int(cuts[rng.integers(len(cuts))])
    return sentence[:cut], sentence[cut:]


def sentence_pairs(sentences: Sequence[np.ndarray], word_starts: np.ndarray, max_num_tokens: int,
                   short_seq_prob: float, rng: np.random.Generator, swap: bool = True,
                   ) -> Iterator[tuple[np.ndarray, np.ndarray, int] | None]:
    """Yields `(tokens_a, tokens_b, label)` per chunk of a document, or None for a skipped chunk.

    Args:
      sentences: the document's sentences as int arrays of token ids (none empty).
      word_starts: bool `[vocab_size]`.
      max_num_tokens: max_seq_length - 3.
      swap: swap A and B with probability 0.5 (SOP); False keeps every pair in
        order with label 0 (objective "none").
    """
    target = target_length(max_num_tokens, short_seq_prob, rng)
    chunk: list[np.ndarray] = []
    length = 0
    for i, sentence in enumerate(sentences):
        chunk.append(sentence)
        length += len(sentence)
        if i < len(sentences) - 1 and length < target:
            continue
        pair = _split_chunk(chunk, word_starts, rng)
        chunk, length = [], 0
        if pair is None:
            yield None
            continue
        a, b = pair
        label = int(rng.random() < 0.5) if swap else 0
        if label:
            a, b = b, a
        a, b = truncate_pair(a, b, max_num_tokens, rng)
        yield a, b, label


def _other_document(others: Sequence[Sequence[np.ndarray]], own: int,
                    rng: np.random.Generator) -> Sequence[np.ndarray] | None:
    """A uniformly drawn non-empty document of `others` other than `others[own]`, or None."""
    candidates = [k for k, sentences in enumerate(others) if k != own and len(sentences)]
    if not candidates:
        return None
    return others[candidates[int(rng.integers(len(candidates)))]]


def next_sentence_pairs(sentences: Sequence[np.ndarray], others: Sequence[Sequence[np.ndarray]],
                        own: int, max_num_tokens: int, short_seq_prob: float,
                        rng: np.random.Generator,
                        ) -> Iterator[tuple[np.ndarray, np.ndarray, int] | None]:
    """Yields BERT's next-sentence `(tokens_a, tokens_b, label)` per chunk (label 1: random next).

    As BERT's create_pretraining_data.py: A is the chunk's first 1..n-1 sentences;
    with probability 0.5, or when the chunk is one sentence, B is read from a
    random sentence of another document until it reaches the target length less
    A, and the chunk's unused sentences start the next chunk; otherwise B is the
    rest of the chunk. Yields None for a chunk that needs another document when
    there is none (`others` holds only this one).

    Args:
      sentences: this document's sentences (int arrays, none empty).
      others: the documents of the shard (lists of sentences), this one at index `own`.
      own: this document's index in `others`.
      max_num_tokens: max_seq_length - 3.
    """
    target = target_length(max_num_tokens, short_seq_prob, rng)
    chunk: list[np.ndarray] = []
    length, i = 0, 0
    while i < len(sentences):
        chunk.append(sentences[i])
        length += len(sentences[i])
        if i == len(sentences) - 1 or length >= target:
            a_end = int(rng.integers(1, len(chunk))) if len(chunk) >= 2 else 1
            a = np.concatenate(chunk[:a_end])
            if len(chunk) == 1 or rng.random() < 0.5:
                other = _other_document(others, own, rng)
                if other is None:
                    yield None
                else:
                    start = int(rng.integers(len(other)))
                    pieces, filled = [], 0
                    for sentence in other[start:]:
                        pieces.append(sentence)
                        filled += len(sentence)
                        if filled >= target - len(a):
                            break
                    yield (*truncate_pair(a, np.concatenate(pieces), max_num_tokens, rng), 1)
                i -= len(chunk) - a_end  # put the unused sentences back
            else:
                yield (*truncate_pair(a, np.concatenate(chunk[a_end:]), max_num_tokens, rng), 0)
            chunk, length = [], 0
        i += 1


def assemble(a: np.ndarray, b: np.ndarray, label: int, vocab: Vocabulary,
             options: GenerationOptions, rng: np.random.Generator) -> Instance:
    """Builds [CLS] A [SEP] B [SEP] and masks it."""
    ids = np.concatenate([[vocab.cls_id], a, [vocab.sep_id], b, [vocab.sep_id]]).astype(np.int32)
    segment_ids = np.zeros(len(ids), np.int32)
    segment_ids[len(a) + 2:] = 1
    maskable = np.ones(len(ids), bool)
    maskable[[0, len(a) + 1, len(ids) - 1]] = False
    starts = vocab.word_starts[ids]
    masked = masking.mask_sequence(
        ids, starts, maskable, rng, masked_lm_prob=options.masked_lm_prob,
        max_predictions=options.max_predictions_per_seq, vocab_size=vocab.size,
        mask_id=vocab.mask_id, max_ngram=options.max_ngram)
    # A segment's first piece starts a word even without "▁" (it may follow a truncation).
    boundary = starts | ~maskable | np.concatenate([[True], ~maskable[:-1]])
    return Instance(masked.input_ids, segment_ids, boundary.astype(np.int32), masked, label)


def document_rng(seed: int, source: int, document: int, dupe: int) -> np.random.Generator:
    """The Generator for one (document, dupe): independent of processing order."""
    return np.random.default_rng([seed, DOCUMENT_STREAM, source, document, dupe])


@dataclasses.dataclass
class DocumentResult:
    """Instances made from one document over all dupes, and the chunks skipped."""

    instances: list[Instance]
    skipped_chunks: int


def document_instances(sentences: Sequence[np.ndarray], source: int, document: int,
                       vocab: Vocabulary, options: GenerationOptions,
                       others: Sequence[Sequence[np.ndarray]] = (), own: int = 0,
                       ) -> DocumentResult:
    """Creates all instances (dupe_factor passes) of one tokenized document.

    Args:
      sentences: int arrays of token ids, one per non-empty sentence.
      source, document: the document's key (input index, position within it).
      others, own: for objective "nsp": the shard's documents (this one at index
        `own`), where negatives come from.
    """
    instances: list[Instance] = []
    skipped = 0
    max_num_tokens = options.max_seq_length - 3  # room for [CLS], [SEP], [SEP]
    for dupe in range(options.dupe_factor):
        rng = document_rng(options.seed, source, document, dupe)
        if options.objective == "nsp":
            pairs = next_sentence_pairs(sentences, others, own, max_num_tokens,
                                        options.short_seq_prob, rng)
        else:
            pairs = sentence_pairs(sentences, vocab.word_starts, max_num_tokens,
                                   options.short_seq_prob, rng, swap=options.objective == "sop")
        for pair in pairs:
            if pair is None:
                skipped += 1
                continue
            instances.append(assemble(*pair, vocab, options, rng))
    return DocumentResult(instances, skipped)
