"""transformers' question-answering pipeline options on a span model
(`AlbertSpanExtractor.answer`, `albert_tf.span_answers`) and as export options.

* Against transformers' own decoding (tests/fixtures/tasks/qa/pipeline_options.json,
  tools/make_qa_pipeline_reference.py: `select_starts_ends` on Hugging Face's model, the
  4.x pipeline's read-out) on one-window contexts: the same answers in the same order
  (after the pipeline's repeats of one text are dropped: we list a text once) and the
  same scores as probabilities (exp(score - log_z)), the empty answer where it falls.
* Against the served graph (`SpanModule` / `NullScoreSpanModule` on the record the
  options map to, and a SavedModel exported with the flags, in a process without albert_tf).
"""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
import tensorflow as tf

from albert_tf import AlbertSpanExtractor
from albert_tf.checkpoint.task_record import TaskRecord
from albert_tf.serving.signatures.span import SpanModule
from albert_tf.serving.signatures.span_beam import NullScoreSpanModule
from albert_tf.span_answers import QaOptions, whole_words
from albert_tf.span_decoding import align_context, answer_pieces
from tests.helpers.paths import TASK_FIXTURES

HF_QA = os.path.join(TASK_FIXTURES, "qa", "hf")
AGREEMENT = 0.95  # the share of (case, options) lists that must agree in full (150/150 here)


@pytest.fixture(scope="module")
def reference():
    with open(os.path.join(TASK_FIXTURES, "qa", "pipeline_options.json"), encoding="utf-8") as f:
        return json.load(f)


@pytest.fixture(scope="module")
def hf_model():
    return AlbertSpanExtractor.from_preset(HF_QA, seq_length=64)


def _theirs(answers):
    """The pipeline's list without its repeats of one text, its zero-probability fillers
    (asked for more spans than a window has), nor the spans that begin or end on a lone
    "▁" piece (answering with the character after it)."""
    out, seen = [], set()
    for a in answers:
        if a["score"] == 0.0 or a["answer"] in seen or a.get("lone_underline"):
            continue
        seen.add(a["answer"])
        out.append(a)
    return out


def test_answers_as_transformers_pipeline_decodes_them(hf_model, reference):
    """With n_best covering the window (the pipeline ranks every span; the original
    run_squad's n_best starts and ends are a pool of them)."""
    record = hf_model.task_record
    hf_model.task_record = record.replace(n_best=64)
    try:
        agree, compared, empty = _compare(hf_model, reference)
    finally:
        hf_model.task_record = record
    print(f"\npipeline options vs transformers' decoding: {agree}/{compared} lists agree "
          f"({empty} with the empty answer among them)")
    assert agree >= AGREEMENT * compared and empty >= 20
    # What _theirs drops happens: the pipeline lists a text twice, and answers with a lone
    # "▁" piece; we list a text once.
    raw = [a for c in reference["cases"] for row in c["answers"] for a in row if a["score"]]
    repeats = sum(len(row) - len({a["answer"] for a in row})
                  for c in reference["cases"] for row in c["answers"])
    lone = {(a["start"], a["end"], a["answer"]) for a in raw if a.get("lone_underline")}
    assert repeats >= 10 and len(lone) >= 10
    listed = hf_model.answer([c["question"] for c in reference["cases"]],  # every span
                             [c["context"] for c in reference["cases"]], top_k=60,
                             max_answer_len=2, align_to_words=False)
    for row in listed:
        assert len({a["answer"] for a in row}) == len(row)  # a text once


def test_the_candidate_pool_is_n_best_starts_and_ends(hf_model, reference):
    """With the record's n_best (20) some spans the pipeline ranks are not candidates: the
    lists that differ are where answers may differ (docs/transformers-users.md)."""
    agree, compared, _ = _compare(hf_model, reference)
    print(f"\nwith n_best {hf_model.task_record.n_best}: {agree}/{compared} lists agree")
    assert hf_model.task_record.n_best == 20 and agree < compared


def _compare(hf_model, reference):
    agree, compared, empty = 0, 0, 0
    for number, options in enumerate(reference["settings"]["options"]):
        got = hf_model.answer([c["question"] for c in reference["cases"]],
                              [c["context"] for c in reference["cases"]], **options)
        for case, mine in zip(reference["cases"], got):
            mine = mine if isinstance(mine, list) else [mine]
            theirs = _theirs(case["answers"][number])
            assert options["top_k"] >= len(mine) and (len(mine) >= len(theirs) or mine != theirs)
            compared += 1
            same = [(a["answer"], a["start"], a["end"]) for a in mine[:len(theirs)]] == \
                [(a["answer"], a["start"], a["end"]) for a in theirs]
            if same:
                probabilities = [np.exp(a["score"] - case["log_z"]) for a in mine[:len(theirs)]]
                np.testing.assert_allclose(probabilities, [a["score"] for a in theirs],
                                           rtol=1e-3)
                empty += sum(a["answer"] == "" for a in theirs)
            agree += same
    return agree, compared, empty


def test_options_are_the_records_settings(hf_model):
    record = hf_model.task_record
    assert record.null_score_diff_threshold == 0.0  # a Hugging Face head: "" competes
    assert QaOptions().applied(record) is record
    off = QaOptions(handle_impossible_answer=False, max_answer_len=3).applied(record)
    assert (off.null_score_diff_threshold, off.max_answer_length) == (None, 3)
    assert QaOptions(top_k=50).applied(record).n_best == 50  # the pool holds top_k
    ours = TaskRecord.create("span", seq_length=64, answerability=True)
    assert QaOptions(handle_impossible_answer=False).applied(ours).no_answer_threshold == 1.0
    assert QaOptions(handle_impossible_answer=True).applied(ours) == ours
    for bad, message in (({"top_k": 0}, "top_k=0: expected an integer >= 1"),
                         ({"max_answer_len": 1.5}, "max_answer_len=1.5: expected"),
                         ({"align_to_words": None}, "align_to_words=None: expected")):
        with pytest.raises(ValueError, match=message):
            QaOptions(**bad)


def test_whole_words():
    text = "the  capital of\tfrance."
    assert whole_words(text, 6, 8) == (5, 12)  # "ap" -> "capital"
    assert whole_words(text, 1, 14) == (0, 15)  # "he capital o" -> "the capital of"
    assert whole_words(text, 16, 18) == (16, 23)  # "fr" -> "france." (tab before)


def _strings(values):
    return tf.constant([v.encode() for v in values], tf.string)


@pytest.mark.parametrize("options", [
    QaOptions(max_answer_len=2), QaOptions(handle_impossible_answer=False),
    QaOptions(handle_impossible_answer=True, max_answer_len=4)])
def test_answer_equals_the_graph_on_the_record_it_maps_to(hf_model, reference, options):
    cases = reference["cases"]
    record = options.applied(hf_model.task_record)
    module = (NullScoreSpanModule if record.null_score_diff_threshold is not None
              else SpanModule)(hf_model, hf_model.preprocessor, record)
    served = module.answer(_strings([c["question"] for c in cases]),
                           _strings([c["context"] for c in cases]))
    got = hf_model.answer([c["question"] for c in cases], [c["context"] for c in cases],
                          max_answer_len=options.max_answer_len,
                          handle_impossible_answer=options.handle_impossible_answer,
                          align_to_words=False)
    assert [a["answer"] for a in got] == [a.decode() for a in served["answer"].numpy()]
    starts = [a["start"] if a["answer"] else -1 for a in got]
    assert starts == served["start_char"].numpy().tolist()
    for a, score in zip(got, served["score"].numpy()):
        if a["answer"]:
            assert abs(a["score"] - score) <= 1e-4
    tokenizer, longest = hf_model.preprocessor.tokenizer, 0
    for case, a in zip(cases, got):
        if a["answer"]:
            first, last = answer_pieces(align_context(tokenizer, case["context"]), a["start"],
                                        a["end"])
            longest = max(longest, last - first + 1)
    assert longest == (options.max_answer_len or record.max_answer_length) or \
        options.max_answer_len is None


@pytest.mark.slow
def test_exported_flags_serve_what_answer_gives(tmp_path, hf_model, reference):
    from albert_tf.serving import export
    from tests.helpers.fresh_process import call_signatures

    output = str(tmp_path / "qa")
    assert export.main(["--checkpoint", HF_QA, "--output", output, "--seq-length", "64",
                        "--max-answer-len", "3", "--no-handle-impossible-answer",
                        "--top-k", "3"]) == 0
    record = TaskRecord.read(os.path.join(output, "1", "assets.extra"))
    assert (record.max_answer_length, record.null_score_diff_threshold, record.top_k) == \
        (3, None, 3)
    cases = reference["cases"]
    inputs = {"question": np.array([c["question"].encode() for c in cases], object),
              "context": np.array([c["context"].encode() for c in cases], object)}
    served = call_signatures({"qa": (os.path.join(output, "1"), "serving_default", inputs)},
                             tmp_path)["qa"]
    got = hf_model.answer([c["question"] for c in cases], [c["context"] for c in cases],
                          max_answer_len=3, handle_impossible_answer=False,
                          align_to_words=False)
    assert [a["answer"] for a in got] == [a.decode() for a in served["answer"]]
    assert all(a["answer"] for a in got)  # never "": the pipeline's default
    np.testing.assert_array_equal([a["start"] for a in got], served["start_char"])
    np.testing.assert_array_equal([a["end"] for a in got], served["end_char"])
    np.testing.assert_allclose([a["score"] for a in got], served["score"], atol=1e-4)
    rows = hf_model.answer([c["question"] for c in cases], [c["context"] for c in cases],
                           top_k=3, max_answer_len=3, handle_impossible_answer=False,
                           align_to_words=False)
    answers, starts, scores, counts = _as_served(rows, 3)
    assert [[a.decode() for a in row] for row in served["answers"]] == answers
    assert served["answers_start_char"].tolist() == starts
    np.testing.assert_allclose(served["answers_score"], scores, atol=1e-4)
    assert served["answers_count"].tolist() == counts == [3] * len(cases)


def test_export_answer_flags_are_checked(tmp_path, capsys):
    from albert_tf.serving import export

    argv = ["--checkpoint", f"{TASK_FIXTURES}/seq_single/hf", "--output", str(tmp_path / "m"),
            "--max-answer-len", "5"]
    assert export.main(argv) == 2
    error = capsys.readouterr().err.strip().splitlines()
    assert error == ["albert-tf export: --max-answer-len is for span (question answering) "
                     "models; the checkpoint holds a classification model"]


def _served_top(module, questions, contexts):
    out = module.answer(_strings(questions), _strings(contexts))
    return {k: v.numpy() for k, v in out.items()}


def _as_served(rows, k):
    """`answer(..., top_k=k)`'s lists in the served layout ("" at -1, padded)."""
    answers = [[a["answer"] for a in row] + [""] * (k - len(row)) for row in rows]
    starts = [[a["start"] if a["answer"] else -1 for a in row] + [-1] * (k - len(row))
              for row in rows]
    scores = [[a["score"] for a in row] + [0.0] * (k - len(row)) for row in rows]
    return answers, starts, scores, [len(row) for row in rows]


@pytest.mark.parametrize("head, k, max_len", [("null_score", 3, None), ("null_score", 60, 2),
                                              ("answerability", 4, 3), ("none", 5, None)])
def test_served_top_k_equals_answers_lists(hf_model, reference, head, k, max_len):
    """The graph's top_k answers (`span_top`) == `answer(top_k=k, align_to_words=False)`,
    on one-window contexts and on contexts of several windows."""
    model, cases = hf_model, reference["cases"]
    questions = [c["question"] for c in cases] + [w["question"] for w in reference["windows"]]
    contexts = [c["context"] for c in cases] + [w["context"][:600] for w in reference["windows"]]
    if head != "null_score":
        model = AlbertSpanExtractor(hf_model.config, answerability=head == "answerability")
        rng = np.random.default_rng(4)
        model.set_weights([rng.normal(0.0, 0.4, w.shape) if w.ndim > 1 else np.asarray(w)
                           for w in model.get_weights()])
        model.preprocessor = hf_model.preprocessor
        model.task_record = TaskRecord.create("span", seq_length=64,
                                              answerability=head == "answerability",
                                              no_answer_threshold=0.5, doc_stride=24)
    options = QaOptions(top_k=k, max_answer_len=max_len, align_to_words=False)
    record = options.applied(model.task_record)
    module = (NullScoreSpanModule if record.null_score_diff_threshold is not None
              else SpanModule)(model, model.preprocessor, record)
    served = _served_top(module, questions, contexts)
    got = model.answer(questions, contexts, top_k=k, max_answer_len=max_len,
                       align_to_words=False)
    answers, starts, scores, counts = _as_served(got, k)
    assert served["answers"].shape == (len(questions), k)
    assert [[a.decode() for a in row] for row in served["answers"]] == answers
    assert served["answers_start_char"].tolist() == starts
    np.testing.assert_allclose(served["answers_score"], scores, atol=1e-4)
    assert served["answers_count"].tolist() == counts
    assert [row[0] for row in answers] == [a.decode() for a in served["answer"]]
    listed_empty = sum(a == "" for row, n in zip(answers, counts) for a in row[:n])
    print(f"\n{head}, top_k {k}: {sum(counts)} answers listed, {listed_empty} of them \"\"")
    assert sum(counts) >= len(questions) * min(k, 2)
    assert listed_empty or head == "none" or k < 10  # "" placed among the spans was compared
