"""The WordPiece reference fixture (tools/make_wordpiece_fixtures.py) and how to check ids
against it: one place for the Python, graph and serving tests."""

from __future__ import annotations

import functools
import gzip
import json
import os
import unicodedata

from tests.helpers.paths import FIXTURES

WORDPIECE_FIXTURE = os.path.join(FIXTURES, "wordpiece")
WORDPIECE_VOCAB = os.path.join(WORDPIECE_FIXTURE, "vocab.txt")
FORMS = ("uncased", "cased", "uncased_accents", "uncased_no_cjk_split")


@functools.lru_cache(maxsize=1)
def parity() -> dict:
    """{"lines": [...], "forms": {form: {"options", "bert", "legacy"}}} (see the tool)."""
    with gzip.open(os.path.join(WORDPIECE_FIXTURE, "parity.json.gz"), "rt",
                   encoding="utf-8") as f:
        return json.load(f)


def rust_differs(line: str, options: dict) -> bool:
    """Where Rust's BertTokenizer departs from the original's Python rules: it lower-cases
    without Final_Sigma, and keeps unassigned / private-use characters as letters."""
    sigma = options.get("do_lower_case", True) and "\u03a3" in line
    return sigma or any(unicodedata.category(c) in ("Cn", "Co") for c in line)


def check_ids(encode, form: str) -> tuple[int, int, int]:
    """Asserts `encode(list of lines) -> list of id lists` equals transformers on every
    line of `form`: BertTokenizerLegacy on the line (on its NFC form where NFC changes it:
    that tokenizer's only addition to the original), Rust BertTokenizer where it keeps
    the original's rules. Returns (lines, lines NFC changes, lines Rust departs on)."""
    data = parity()
    entry = data["forms"][form]
    lines = data["lines"]
    nfc = [unicodedata.normalize("NFC", line) for line in lines]
    changed = [i for i, (a, b) in enumerate(zip(lines, nfc)) if a != b]
    ours, ours_nfc = encode(lines), encode([nfc[i] for i in changed])
    for i, line in enumerate(lines):
        if i not in changed:
            assert ours[i] == entry["legacy"][i], (form, line)
        if not rust_differs(line, entry["options"]):
            assert ours[i] == entry["bert"][i], (form, line)
    for i, ids in zip(changed, ours_nfc):
        assert ids == entry["legacy"][i], (form, lines[i])
    rust = sum(rust_differs(line, entry["options"]) for line in lines)
    assert len(changed) < 25 and rust < 25  # exemptions stay a handful of lines
    return len(lines), len(changed), rust


@functools.lru_cache(maxsize=1)
def offset_reference() -> dict:
    """{"forms": {form: {"options", "ids", "offsets"}}}: BertTokenizerFast's ids and
    character offsets of the parity lines (tools/make_wordpiece_offset_fixtures.py)."""
    with gzip.open(os.path.join(WORDPIECE_FIXTURE, "offsets.json.gz"), "rt",
                   encoding="utf-8") as f:
        return json.load(f)


def check_offsets(encode_with_offsets, form: str) -> tuple[int, int]:
    """Asserts `encode_with_offsets(list of lines) -> [(ids, [(start, end)] characters)]`
    gives BertTokenizerFast's offsets on every line where the ids are BertTokenizerFast's,
    and that the ids differ only where Rust departs from the original's rules
    (`rust_differs`: there the tokens differ, so their offsets cannot be compared).
    Returns (lines with equal offsets, lines)."""
    lines, entry = parity()["lines"], offset_reference()["forms"][form]
    equal = 0
    for line, (ids, offsets), want_ids, want in zip(lines, encode_with_offsets(lines),
                                                    entry["ids"], entry["offsets"]):
        if ids != want_ids:
            assert rust_differs(line, entry["options"]), (form, line)
            continue
        assert [list(pair) for pair in offsets] == want, (form, line)
        equal += 1
    assert equal > len(lines) - 25
    return equal, len(lines)
