"""Unicode property tables for the in-graph tokenizer, read from Python's `unicodedata`.

The Python tokenizer's normalisation is defined by Python's own string methods
(`str.split`, `unicodedata.combining`, `str.lower`). TensorFlow has no op with
exactly those semantics: `\\p{Mn}` is not "combining class != 0" (about 1,000
Mn marks have class 0, and some Mc marks do not), and `tf.strings.lower`
truncates a string at U+0000, knows an older Unicode than Python 3.11 and has
no Final_Sigma rule. So the graph uses tables computed here from the
same definitions; both sides then agree by construction (the parity tests check
every code point).

Pure Python: no TensorFlow import. Tables are built once per process (~0.25 s).
"""

from __future__ import annotations

import functools
import unicodedata
from dataclasses import dataclass

import numpy as np

_MAX_CODE_POINT = 0x10FFFF
_SIGMA, _FINAL_SIGMA = "\u03a3", "\u03c2"
_NO_PROPERTIES = frozenset({"Cn", "Co", "Cs"})


@dataclass(frozen=True)
class UnicodeTables:
    """Code-point sets and maps, as sorted int32 arrays.

    Range tables are `(starts, ends)` with inclusive ends, sorted and disjoint.
    """

    whitespace: tuple[np.ndarray, np.ndarray]  # str.isspace(): what str.split() splits on
    combining: tuple[np.ndarray, np.ndarray]  # unicodedata.combining(c) != 0
    cased: tuple[np.ndarray, np.ndarray]  # Unicode "Cased" (Lowercase | Uppercase | Lt)
    case_ignorable: tuple[np.ndarray, np.ndarray]  # Unicode "Case_Ignorable"
    lower_keys: np.ndarray  # code points that str.lower() maps to one other code point
    lower_values: np.ndarray


def _ranges(code_points: list[int]) -> list[tuple[int, int]]:
    """Collapses sorted code points into inclusive (start, end) ranges."""
    ranges: list[tuple[int, int]] = []
    for cp in code_points:
        if ranges and ranges[-1][1] == cp - 1:
            ranges[-1] = (ranges[-1][0], cp)
        else:
            ranges.append((cp, cp))
    return ranges


def range_arrays(code_points: list[int]) -> tuple[np.ndarray, np.ndarray]:
    ranges = _ranges(code_points)
    return (np.array([r[0] for r in ranges], np.int32), np.array([r[1] for r in ranges], np.int32))


def _is_case_ignorable(char: str) -> bool:
    # CPython decides Final_Sigma with its internal Case_Ignorable property and
    # exposes it only through str.lower(): "A" x "Σ" ends in final sigma iff x is
    # case-ignorable or cased; "AΣ" x does iff x is case-ignorable or uncased.
    # Both hold exactly when x is case-ignorable.
    return ("A" + char + _SIGMA).lower()[-1] == _FINAL_SIGMA and (
        ("A" + _SIGMA + char).lower()[1] == _FINAL_SIGMA)


def assigned_characters() -> list[str]:
    """Every code point of Python's Unicode database but the unassigned (Cn), private-use
    (Co) and surrogate (Cs) ones: those are not whitespace, cased, case-ignorable or
    combining, and lower-case and normalize (NFKD, NFC, NFKC) to themselves
    (tests/model/test_normalize.py checks it over every code point), so the tables (and the
    LiteRT character maps) read these 145,000 instead of all 1.1 million."""
    category = unicodedata.category
    return [c for c in map(chr, range(_MAX_CODE_POINT + 1)) if category(c) not in _NO_PROPERTIES]


@functools.lru_cache(maxsize=1)
def unicode_tables() -> UnicodeTables:
    """Returns the tables for this Python's Unicode database (cached)."""
    return tables_of(assigned_characters())


def tables_of(chars: list[str]) -> UnicodeTables:
    """The tables read from the code points `chars`."""
    lower_pairs = []
    for char in chars:
        lowered = char.lower()
        # U+0130 is the only one-to-many lowercase mapping; the graph rewrites it
        # before the table lookup (see tokenizer_graph).
        if lowered != char and len(lowered) == 1:
            lower_pairs.append((ord(char), ord(lowered)))
    return UnicodeTables(
        whitespace=range_arrays([ord(c) for c in chars if c.isspace()]),
        combining=range_arrays([ord(c) for c in chars if unicodedata.combining(c)]),
        cased=range_arrays([ord(c) for c in chars
                             if c.islower() or c.isupper() or c.istitle()]),
        case_ignorable=range_arrays([ord(c) for c in chars if _is_case_ignorable(c)]),
        lower_keys=np.array([k for k, _ in lower_pairs], np.int32),
        lower_values=np.array([v for _, v in lower_pairs], np.int32),
    )

