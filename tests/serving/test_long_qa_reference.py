"""A Hugging Face AlbertForQuestionAnswering (tests/fixtures/tasks/qa/hf, random weights)
exported with `--seq-length 64 --doc-stride 24` answers contexts of 3 to 10 windows as
an independent multi-window decoding of transformers' model does
(tests/fixtures/tasks/qa/long_contexts.json, tools/make_long_qa_reference.py: windows,
max context and n-best decoding written out there, pieces and offsets from the
sentencepiece package), and exactly as albert-tf's own Python decoding
(`AlbertSpanExtractor.predict`) does; the export records the settings it serves with.
"""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from albert_tf import AlbertSpanExtractor
from albert_tf.checkpoint.task_record import TaskRecord
from albert_tf.serving import export
from tests.helpers.fresh_process import call_signatures
from tests.helpers.paths import TASK_FIXTURES

pytestmark = pytest.mark.slow

HF_QA = os.path.join(TASK_FIXTURES, "qa", "hf")
AGREEMENT = 0.9  # the share of cases the independent reference must agree on


@pytest.fixture(scope="module")
def reference():
    with open(os.path.join(TASK_FIXTURES, "qa", "long_contexts.json"), encoding="utf-8") as f:
        return json.load(f)


@pytest.fixture(scope="module")
def served(tmp_path_factory, reference):
    root = tmp_path_factory.mktemp("long_qa")
    output = str(root / "qa")
    assert export.main(["--checkpoint", HF_QA, "--output", output, "--seq-length", "64",
                        "--doc-stride", "24"]) == 0
    cases = reference["cases"]
    inputs = {"question": np.array([c["question"].encode() for c in cases], object),
              "context": np.array([c["context"].encode() for c in cases], object)}
    out = call_signatures({"qa": (os.path.join(output, "1"), "serving_default", inputs)},
                          tmp_path_factory.mktemp("fresh"))["qa"]
    return out, os.path.join(output, "1")


def test_export_records_its_windows(served):
    record = TaskRecord.read(os.path.join(served[1], "assets.extra"))
    assert (record.seq_length, record.doc_stride, record.max_windows) == (64, 24, 32)
    assert record.null_score_diff_threshold == 0.0


def test_agrees_with_an_independent_multi_window_reference(served, reference):
    out, _ = served
    cases = reference["cases"]
    assert {c["windows"] for c in cases} >= {3, 10}
    agree = 0
    for row, case in enumerate(cases):
        same_text = out["answer"][row].decode() == case["answer"]
        same_diff = abs(float(out["null_score_diff"][row]) - case["null_score_diff"]) <= 1e-4
        agree += same_text and same_diff
    print(f"\nlong-context QA vs transformers + sentencepiece: {agree}/{len(cases)} agree")
    assert agree >= AGREEMENT * len(cases)


def test_equals_the_python_decoding_in_every_case(served, reference):
    out, _ = served
    model = AlbertSpanExtractor.from_preset(HF_QA, seq_length=64)
    model.task_record = model.task_record.replace(doc_stride=24)
    cases = reference["cases"]
    got = model.predict(([c["question"] for c in cases], [c["context"] for c in cases]),
                        verbose=0)
    assert list(got["answer"]) == [a.decode() for a in out["answer"]]
    np.testing.assert_array_equal(got["start_char"], out["start_char"])
    np.testing.assert_array_equal(got["end_char"], out["end_char"])
    np.testing.assert_allclose(got["null_score_diff"], out["null_score_diff"], atol=1e-5)
