"""The in-graph tokenizer's Unicode tables (albert_tf.tokenizer.normalize) are read from
the assigned code points only; the same tables read from every code point, and Python's
own string methods on the code points left out, show that nothing is lost."""

from __future__ import annotations

import unicodedata

import numpy as np

from albert_tf.tokenizer import normalize

EVERY = [chr(cp) for cp in range(0x110000) if not 0xD800 <= cp <= 0xDFFF]


def test_the_tables_equal_the_ones_read_from_every_code_point():
    fast, full = normalize.unicode_tables(), normalize.tables_of(EVERY)
    for field in ("whitespace", "combining", "cased", "case_ignorable"):
        for got, want in zip(getattr(fast, field), getattr(full, field)):
            assert np.array_equal(got, want), field
    assert np.array_equal(fast.lower_keys, full.lower_keys)
    assert np.array_equal(fast.lower_values, full.lower_values)
    assert len(full.lower_keys) > 1000 and len(full.whitespace[0]) > 5  # tables, not empty


def test_the_code_points_left_out_have_none_of_the_properties():
    kept = set(normalize.assigned_characters())
    left_out = [c for c in EVERY if c not in kept]
    assert len(left_out) > 900_000 and len(kept) > 100_000
    assert {unicodedata.category(c) for c in left_out} == {"Cn", "Co"}
    assert not [c for c in left_out if c.isspace() or unicodedata.combining(c) or c.lower() != c
                or c.islower() or c.isupper() or c.istitle()
                or any(unicodedata.normalize(form, c) != c for form in ("NFKD", "NFC", "NFKC"))]
