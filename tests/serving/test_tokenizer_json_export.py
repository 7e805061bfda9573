"""Directories as transformers 5 saves them (tokenizer.json, no spiece.model or vocab.txt)
exported to SavedModels answer raw text with transformers' probabilities, in a fresh
process that imports only TensorFlow and tensorflow-text (tests/fixtures/tokenizer_json)."""

from __future__ import annotations

import gzip
import json
import os

import numpy as np
import pytest

from albert_tf.serving import export
from tests.helpers.fresh_process import call_signatures

pytestmark = pytest.mark.slow

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(__file__)), "fixtures", "tokenizer_json")
ATOL = 1e-4  # float64 transformers -> float32 SavedModel


def test_savedmodels_of_tokenizer_json_directories_equal_transformers(tmp_path):
    with gzip.open(os.path.join(FIXTURES, "reference.json.gz"), "rt", encoding="utf-8") as f:
        ref = json.load(f)
    texts = np.array([t.encode() for t in ref["lines"][:ref["ordinary"]]], dtype=object)
    calls = {}
    for name in ("albert", "bert"):
        output = str(tmp_path / "served" / name)
        assert export.main(["--checkpoint", os.path.join(FIXTURES, name), "--output", output,
                            "--seq-length", str(ref[name]["seq_length"])]) == 0
        calls[name] = (os.path.join(output, "1"), "serving_default", {"text": texts})
    (tmp_path / "fresh").mkdir()
    got = call_signatures(calls, tmp_path / "fresh")
    for name in ("albert", "bert"):
        want = np.array(ref[name]["probabilities"])
        np.testing.assert_allclose(got[name]["probabilities"], want, atol=ATOL, rtol=0)
        worst = float(np.abs(got[name]["probabilities"] - want).max())
        print(f"{name}: {len(texts)} lines, largest difference {worst:.2e}")
