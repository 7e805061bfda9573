"""De-duplication of a stream of documents: near-duplicate documents, then exact sentences.

Documents arrive in a fixed order and each is judged against the documents kept
before it, so the result depends only on the input and its order (no RNG, no
`hash()` of strings, whose value changes between runs):

  1. near-duplicate documents: a document's normalized text (lower-case words,
     punctuation and markup dropped) is cut into overlapping shingles of
     `SHINGLE_WORDS` words, each fingerprinted with CRC-32; the fingerprints
     divisible by `SAMPLE_EVERY` are kept (a fixed sample, the same for every
     document). A document with at least `MIN_SAMPLED_SHINGLES` of them, of which
     a share of at least `NEAR_DUPLICATE_SHARE` already occurs in kept documents,
     is dropped whole: it repeats text already in the corpus with small changes
     (TensorFlow's generated op wrappers and the functions that re-document them,
     copies of one library inside another). Containment in everything kept so far,
     rather than similarity to one other document, also catches a document pieced
     together from several earlier ones;
  2. exact duplicate sentences: a sentence already in a kept document (or earlier
     in the same one) is left out;
  3. a document left with fewer than `min_sentences` sentences is dropped.

`Deduplicator.stats` counts, per source, what came in and what was kept.
"""

from __future__ import annotations

import dataclasses
import re
import zlib
from collections.abc import Sequence

SHINGLE_WORDS = 5
SAMPLE_EVERY = 4             # keep the shingles whose fingerprint is divisible by this
MIN_SAMPLED_SHINGLES = 8     # fewer: too short to judge; only its sentences are de-duplicated
NEAR_DUPLICATE_SHARE = 0.6   # this share of a document's shingles seen before: a near-duplicate
_WORD = re.compile(r"[a-z0-9]+")


@dataclasses.dataclass
class SourceStats:
    """What one source gave before and after de-duplication."""

    documents_in: int = 0
    sentences_in: int = 0
    characters_in: int = 0
    documents: int = 0
    sentences: int = 0
    characters: int = 0
    near_duplicate_documents: int = 0
    short_documents: int = 0

    def to_dict(self) -> dict[str, int]:
        return dataclasses.asdict(self)


def shingle_sample(sentences: Sequence[str]) -> set[int]:
    """The sampled shingle fingerprints of a document's normalized text."""
    words = _WORD.findall(" ".join(sentences).lower())
    sample = set()
    for i in range(len(words) - SHINGLE_WORDS + 1):
        fingerprint = zlib.crc32(" ".join(words[i:i + SHINGLE_WORDS]).encode("utf-8"))
        if fingerprint % SAMPLE_EVERY == 0:
            sample.add(fingerprint)
    return sample


class Deduplicator:
    """Judges documents one at a time, in order, against those kept before.

    Attributes:
      stats: {source: SourceStats}, in the order sources were first seen.
    """

    def __init__(self, min_sentences: int, near_duplicate_share: float = NEAR_DUPLICATE_SHARE):
        self.min_sentences = min_sentences
        self.near_duplicate_share = near_duplicate_share
        self.stats: dict[str, SourceStats] = {}
        self._shingles: set[int] = set()
        self._sentences: set[str] = set()

    def add(self, source: str, sentences: Sequence[str]) -> list[str] | None:
        """The sentences of a document that are kept, or None if it is dropped."""
        stats = self.stats.setdefault(source, SourceStats())
        stats.documents_in += 1
        stats.sentences_in += len(sentences)
        stats.characters_in += sum(map(len, sentences))
        sample = shingle_sample(sentences)
        if len(sample) >= MIN_SAMPLED_SHINGLES:
            seen = len(sample & self._shingles)
            if seen >= self.near_duplicate_share * len(sample):
                stats.near_duplicate_documents += 1
                return None
        kept, local = [], set()
        for sentence in sentences:
            if sentence not in self._sentences and sentence not in local:
                local.add(sentence)
                kept.append(sentence)
        if len(kept) < self.min_sentences:
            stats.short_documents += 1
            return None
        self._shingles |= sample
        self._sentences |= local
        stats.documents += 1
        stats.sentences += len(kept)
        stats.characters += sum(map(len, kept))
        return kept
