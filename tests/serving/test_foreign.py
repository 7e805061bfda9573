"""Foreign fine-tuned checkpoints served from raw text: `albert-tf export` on a Hugging
Face or original TF1 directory -> SavedModel -> a process without albert_tf -> the same answers as
the source model fed by its own tokenizer.

References come from tests/fixtures/tasks/ (tools/make_reference_fixtures.py): HF's
outputs on ids from HF's AlbertTokenizer, and for run_squad_v2's beam head a NumPy
transcription of the original's equations and decoding. No torch here.
"""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from albert_tf.checkpoint import convert
from albert_tf.serving import export
from tests.helpers.fresh_process import call_signatures
from tests.helpers.paths import TASK_FIXTURES as TASKS

pytestmark = pytest.mark.slow

ATOL = 1e-5  # probabilities; HF float64 -> ours float32

# name: (checkpoint, extra export arguments)
EXPORTS = {
    "seq_single": ("seq_single/hf", []),
    "seq_multi": ("seq_multi/hf", []),
    "token": ("token/hf", []),
    "qa": ("qa/hf", []),
    "choice_tf1": ("choice/tf1", ["--task", "multiple_choice", "--spm-model",
                                  "choice/hf/spiece.model"]),
    "mlm": ("mlm/hf", []),
    "squad_v2_beam": ("squad_v2_beam/tf1", []),
}
# A beam checkpoint converted to ours with a tuned threshold: every row answers.
TUNED_THRESHOLD = 1.0



def reference(name: str) -> dict[str, np.ndarray]:
    with np.load(os.path.join(TASKS, name, "reference.npz")) as data:
        return dict(data)


def _strings(values) -> np.ndarray:
    return np.array([str(v).encode() for v in np.asarray(values).ravel()],
                    dtype=object).reshape(np.shape(values))


def _softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    root = tmp_path_factory.mktemp("foreign")
    paths = {}
    for name, (checkpoint, extra) in EXPORTS.items():
        extra = [os.path.join(TASKS, a) if a.endswith(".model") else a for a in extra]
        output = str(root / name)
        assert export.main(["--checkpoint", os.path.join(TASKS, checkpoint),
                            "--output", output, *extra]) == 0
        paths[name] = os.path.join(output, "1")
    ours = str(root / "beam_ours")
    assert convert.main([os.path.join(TASKS, "squad_v2_beam", "tf1"), ours]) == 0
    record_path = os.path.join(ours, "albert_task.json")
    record = json.load(open(record_path, encoding="utf-8"))
    assert record["null_score_diff_threshold"] == 0.0  # carried over by convert
    record["null_score_diff_threshold"] = TUNED_THRESHOLD
    json.dump(record, open(record_path, "w", encoding="utf-8"))
    assert export.main(["--checkpoint", ours, "--output", str(root / "beam_tuned")]) == 0
    paths["beam_tuned"] = str(root / "beam_tuned" / "1")

    calls = {}
    for name in ("seq_single", "seq_multi", "token", "mlm"):
        ref = reference(EXPORTS[name][0].split("/")[0])
        signature = "fill_mask" if name == "mlm" else "serving_default"
        calls[name] = (paths[name], signature, {"text": _strings(ref["texts"])})
    for name, fixture in (("qa", "qa"), ("squad_v2_beam", "squad_v2_beam"),
                          ("beam_tuned", "squad_v2_beam")):
        ref = reference(fixture)
        calls[name] = (paths[name], "serving_default", {"question": _strings(ref["questions"]),
                                                        "context": _strings(ref["contexts"])})
    ref = reference("choice")
    calls["choice_tf1"] = (paths["choice_tf1"], "serving_default",
                           {"context": _strings(ref["contexts"]),
                            "options": _strings(ref["options"])})
    return call_signatures(calls, tmp_path_factory.mktemp("fresh"))


def _labels(values) -> list[str]:
    return [v.decode() for v in values]


def test_single_label_classification(served):
    ref = reference("seq_single")
    want = _softmax(ref["logits"].astype(np.float64))
    np.testing.assert_allclose(served["seq_single"]["probabilities"], want, atol=ATOL, rtol=0)
    names = ["negative", "neutral", "positive"]
    assert _labels(served["seq_single"]["label"]) == [names[i] for i in want.argmax(-1)]


def test_multi_label_classification(served):
    ref = reference("seq_multi")
    want = 1 / (1 + np.exp(-ref["logits"].astype(np.float64)))
    got = served["seq_multi"]
    np.testing.assert_allclose(got["probabilities"], want, atol=ATOL, rtol=0)
    np.testing.assert_array_equal(got["active"], want > 0.5)
    names = ["sports", "politics", "science", "art"]
    assert _labels(got["label"]) == [names[i] for i in want.argmax(-1)]


def test_token_classification_labels_each_piece(served):
    ref = reference("token")
    got = served["token"]
    names = np.array(["O", "B-PER", "I-PER", "B-LOC", "I-LOC"])
    for row, length in enumerate(ref["input_mask"].sum(-1)):
        n = int(length) - 2  # the text's pieces, between [CLS] and [SEP]
        want = _softmax(ref["logits"][row, 1:1 + n].astype(np.float64))
        np.testing.assert_allclose(got["probabilities"][row, :n], want, atol=ATOL, rtol=0)
        assert _labels(got["label"][row, :n]) == list(names[want.argmax(-1)])
        assert _labels(got["label"][row, n:]) == [""] * (got["label"].shape[1] - n)
        text = str(ref["texts"][row])
        words = [text[s:e].strip() for s, e in zip(got["start_char"][row, :n],
                                                   got["end_char"][row, :n])]
        assert "".join(words) == text.replace(" ", "")  # the pieces cover the text


def _expected_span(ref, row, allowed_pieces, max_answer_length=30):
    """HF-style decoding of the reference logits: best start + end in the context."""
    types, mask = ref["input_type_ids"][row], ref["input_mask"][row]
    length = int(mask.sum())
    start, end = ref["start_logits"][row].astype(np.float64), ref["end_logits"][row]
    best, span = -np.inf, (-1, -1)
    for s in range(length - 1):
        for e in range(s, min(s + max_answer_length, length - 1)):
            if types[s] == 1 and types[e] == 1 and allowed_pieces[s] and allowed_pieces[e] \
                    and start[s] + end[e] > best:
                best, span = start[s] + end[e], (s, e)
    return span, best, start[0] + end[0]


def test_question_answering_spans_and_null_score(served):
    from albert_tf.tokenizer.spm import AlbertTokenizer

    ref = reference("qa")
    tok = AlbertTokenizer(os.path.join(TASKS, "qa", "hf", "spiece.model"))
    got = served["qa"]
    for row, context in enumerate(ref["contexts"]):
        visible = [tok.id_to_piece(int(i)) != "\u2581" for i in ref["input_word_ids"][row]]
        (s, e), best, null = _expected_span(ref, row, visible)
        offsets = ref["offsets"][row]
        text = str(context)[offsets[s][0]:offsets[e][1]].strip()
        np.testing.assert_allclose(got["null_score_diff"][row], null - best, atol=1e-4)
        assert bool(got["has_answer"][row]) == (null - best <= 0.0)  # threshold 0, as HF
        if got["has_answer"][row]:
            assert got["answer"][row].decode() == text
            assert str(context)[got["start_char"][row]:got["end_char"][row]] == text


def test_squad_v2_beam_answers_as_the_original(served):
    ref = reference("squad_v2_beam")
    for name, threshold in (("squad_v2_beam", 0.0), ("beam_tuned", TUNED_THRESHOLD)):
        got = served[name]
        np.testing.assert_allclose(got["null_score_diff"], ref["cls_logits"], atol=1e-4)
        answers = ref["cls_logits"] < threshold
        np.testing.assert_array_equal(got["has_answer"], answers)
        assert _labels(got["answer"]) == [str(a) if ok else ""
                                          for a, ok in zip(ref["answers"], answers)]
    assert served["beam_tuned"]["has_answer"].all()


def test_multiple_choice_from_tf1_race(served):
    ref = reference("choice")
    want = _softmax(ref["logits"].astype(np.float64))
    np.testing.assert_allclose(served["choice_tf1"]["probabilities"], want, atol=ATOL, rtol=0)
    np.testing.assert_array_equal(served["choice_tf1"]["choice"], want.argmax(-1))


def test_masked_lm_fill_mask(served):
    ref = reference("mlm")
    got = served["mlm"]
    probabilities = _softmax(ref["mlm_logits"].astype(np.float64))  # [B,1,V]
    top = np.argsort(-probabilities, axis=-1)[..., :got["top_k_ids"].shape[-1]]
    np.testing.assert_array_equal(got["top_k_ids"], top)
    np.testing.assert_allclose(got["top_k_scores"], np.take_along_axis(probabilities, top, -1),
                               atol=ATOL, rtol=0)
    np.testing.assert_array_equal(got["mask_positions"], ref["masked_lm_positions"])
