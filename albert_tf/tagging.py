"""Entity tags: schemes, conlleval's chunk rule, and the windows of a long tagged text.

One home for what fine-tuning's NER metrics, its data reader and the served
entities decide about tags (plain Python: no TensorFlow, no Keras).

Tags are `O` or `PREFIX-TYPE` with PREFIX one of B, I, E, S. A scheme says which
prefixes a tag may have and which of them may start an entity:

| scheme | prefixes | an entity starts at |
|---|---|---|
| iob1 | B, I | I-X after O or another type; B-X only between two X entities (CoNLL-2003 as distributed) |
| iob2 | B, I | B-X (BIO) |
| bioes | B, I, E, S | B-X, or S-X for a one-word entity |

Entities are read by conlleval's rule in every scheme (`entities`): an I- (or E-)
that follows O or a tag of another type starts an entity, as a B- would. So IOB1
decodes as it should, and a model's imperfect IOB2 or BIOES output still gives
entities; seqeval's default mode is the same rule.

Example:
    >>> entities(["B-PER", "I-PER", "O", "I-LOC"])
    [('PER', 0, 2), ('LOC', 3, 4)]
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence

__all__ = ["OUTSIDE", "SCHEMES", "PREFIXES", "split_tag", "entities", "starts_entity",
           "detect_scheme", "left_open", "check_tag", "scheme_label_names", "window_step", "windows",
           "best_window", "CHUNK_PREFIXES", "chunk_table"]

OUTSIDE = "O"
SCHEMES = ("iob1", "iob2", "bioes")
# The prefixes each scheme's tags may carry.
PREFIXES = {"iob1": ("B", "I"), "iob2": ("B", "I"), "bioes": ("B", "I", "E", "S")}
# Prefixes that continue an entity: in iob2 and bioes they never start one.
_CONTINUING = ("I", "E")
# O and every prefix, in the order of `chunk_table`'s rows.
CHUNK_PREFIXES = (OUTSIDE, *PREFIXES["bioes"])


def split_tag(tag: str) -> tuple[str, str]:
    """"B-PER" -> ("B", "PER"); "O" -> ("O", ""). ValueError for anything else."""
    if tag == OUTSIDE:
        return OUTSIDE, ""
    prefix, dash, kind = tag.partition("-")
    if not dash or prefix not in PREFIXES["bioes"] or not kind:
        raise ValueError(f"tag {tag!r} is not O or B-/I-/E-/S-TYPE")
    return prefix, kind


def _ends(prev: str, prev_kind: str, prefix: str, kind: str) -> bool:
    """Whether the entity holding the previous word ends before this one (conlleval)."""
    if prev in ("E", "S"):
        return True
    if prev in ("B", "I") and prefix in ("B", "S", OUTSIDE):
        return True
    return prev != OUTSIDE and prev_kind != kind


def starts_entity(prev: str, prev_kind: str, prefix: str, kind: str) -> bool:
    """Whether this word starts an entity, given the previous word's tag (conlleval)."""
    if prefix in ("B", "S"):
        return True
    if prefix in _CONTINUING and prev in ("E", "S", OUTSIDE):
        return True
    return prefix != OUTSIDE and prev_kind != kind


def chunk_table() -> list[tuple[bool, bool]]:
    """conlleval's rule (`_ends`, `starts_entity`) as a table, for a reader that applies
    it to every word at once (the served entities' graph): row `(previous * P + this) * 2
    + same` is (the open entity ends, an entity starts) for the previous word's and this
    word's prefixes (their indices in CHUNK_PREFIXES, P of them) and whether their types
    are equal (O's type equals only O's)."""
    rows = []
    for prev in CHUNK_PREFIXES:
        for prefix in CHUNK_PREFIXES:
            for same in (False, True):
                prev_kind = "" if prev == OUTSIDE else "X"
                kind = "" if prefix == OUTSIDE else ("X" if same else "Y")
                rows.append((_ends(prev, prev_kind, prefix, kind),
                             starts_entity(prev, prev_kind, prefix, kind)))
    return rows


def entities(tags: Sequence[str]) -> list[tuple[str, int, int]]:
    """The entities of one sentence's tags: (type, first word, end word exclusive)."""
    found, start, kind_open = [], None, ""
    prev, prev_kind = OUTSIDE, ""
    for i, tag in enumerate([*tags, OUTSIDE]):
        prefix, kind = split_tag(tag)
        if start is not None and _ends(prev, prev_kind, prefix, kind):
            found.append((kind_open, start, i))
            start = None
        if starts_entity(prev, prev_kind, prefix, kind):
            start, kind_open = i, kind
        prev, prev_kind = prefix, kind
    return found


def detect_scheme(sentences: Iterable[Sequence[str]]) -> str:
    """The scheme a labelled file uses: bioes when any E- or S- tag appears; iob1
    when an I- tag starts an entity (CoNLL-2003 as distributed); else iob2."""
    iob1 = False
    for tags in sentences:
        prev, prev_kind = OUTSIDE, ""
        for tag in tags:
            prefix, kind = split_tag(tag)
            if prefix in ("E", "S"):
                return "bioes"
            iob1 = iob1 or (prefix == "I" and starts_entity(prev, prev_kind, prefix, kind))
            prev, prev_kind = prefix, kind
    return "iob1" if iob1 else "iob2"


def left_open(previous: str | None, tag: str | None) -> bool:
    """Whether, in BIOES, the entity `previous` opened (B-X, I-X) is left unended by `tag`
    (None: the sentence ends): BIOES ends every multi-word entity with E-X, so only
    I-X or E-X may follow. IOB2 data, which has no E-, leaves every one open."""
    if previous is None:
        return False
    prefix, kind = split_tag(previous)
    if prefix not in ("B", "I"):
        return False
    return tag is None or split_tag(tag) not in (("I", kind), ("E", kind))


def scheme_label_names(kinds: Iterable[str], scheme: str) -> list[str]:
    """Every tag of `scheme` for the entity types `kinds`: O first, then each type
    (sorted) with each prefix, so the model can answer a tag the training file lacks."""
    return [OUTSIDE] + [f"{prefix}-{kind}" for kind in sorted(set(kinds))
                        for prefix in PREFIXES[scheme]]


def check_tag(previous: str | None, tag: str, scheme: str) -> str | None:
    """Why `tag` (after the tag `previous`; None at a sentence's start) does not
    belong to `scheme`, or None. ValueError when either is no tag at all."""
    prefix, kind = split_tag(tag)
    if prefix != OUTSIDE and prefix not in PREFIXES[scheme]:
        return (f"tag {tag!r} is not of the {scheme} scheme (its prefixes: "
                f"{', '.join(PREFIXES[scheme])})")
    prev, prev_kind = split_tag(previous) if previous is not None else (OUTSIDE, "")
    if scheme != "iob1" and prefix in _CONTINUING and starts_entity(prev, prev_kind, prefix, kind):
        after = "at the sentence start" if previous is None else f"after {previous}"
        return (f"tag {tag!r} {after} starts an entity, which {scheme} data marks with "
                f"{'B' if prefix == 'I' else 'S'}-{kind} (conlleval would read it as a new "
                f"entity); fix the tag, or give --set tag_scheme=iob1 to read the files as IOB1")
    return None


def window_step(width: int) -> int:
    """Positions between the starts of two windows of `width`: half a window."""
    return max(1, width // 2)


def windows(length: int, width: int) -> list[tuple[int, int]]:
    """Overlapping [start, end) windows of at most `width` positions covering `length`,
    each starting `window_step(width)` after the previous one (one window when it fits)."""
    if width < 1:
        raise ValueError(f"width={width} must be >= 1")
    step = window_step(width)
    spans, start = [], 0
    while True:
        end = min(start + width, length)
        spans.append((start, end))
        if end >= length:
            return spans
        start += step


def best_window(position: int, spans: Sequence[tuple[int, int]]) -> int:
    """The window that gives `position` the most context on its shorter side (the
    first on ties), as SQuAD's doc-stride windows pick a token's best window.

    `spans` are sorted as `windows` gives them (starts and ends increasing): only the few
    that may hold `position` are read, so labelling every position costs linear time.
    """
    best, score = -1, -1
    # The windows holding `position` are those before the first one starting after it,
    # back to the last one that ends at or before it.
    i = bisect.bisect_right(spans, position, key=lambda span: span[0])
    while i > 0 and spans[i - 1][1] > position:
        i -= 1
        start, end = spans[i]
        context = min(position - start, end - 1 - position)
        if context >= score:  # walking back: an earlier window wins a tie
            best, score = i, context
    if best < 0:
        raise ValueError(f"position {position} lies in no window")
    return best
