"""Served span QA over doc-stride windows (`signatures/span_windows.py`, `span.py`) equals
fine-tuning's SQuAD prediction (`albert_tf.span_decoding`, through `SquadTask`'s
predictions.json) on contexts of 3+ windows: the in-graph window split and packing equal
squad_data's windows, the answers equal finetune's predictions, `AlbertSpanExtractor.predict`
answers the same, and a context past max_windows is refused by the graph (Python
answers it).

The graph runs in-process here (the same tf.functions a SavedModel serves); the export
round trip is in test_parity.py and test_long_qa_reference.py (slow).
"""

from __future__ import annotations

import json
import os
import re

import numpy as np
import pytest
import tensorflow as tf

from albert_tf import AlbertConfig, AlbertSpanExtractor
from albert_tf.checkpoint.task_record import TaskRecord
from albert_tf.serving.signatures.span import SpanModule
from albert_tf.serving.signatures.span_beam import NullScoreSpanModule
from albert_tf.tokenizer import AlbertPreprocessor
from albert_tf.training.finetune.squad import SquadTask
from albert_tf.training.finetune.squad_data import SquadExample, build_windows
from albert_tf.training.finetune.train import predict_rows

SEQ, STRIDE, QUERY = 64, 24, 12
SETTINGS = dict(doc_stride=STRIDE, max_query_length=QUERY, max_answer_length=6, n_best=5)


@pytest.fixture(scope="module")
def pre(spm_model_path):
    return AlbertPreprocessor(spm_model_path, SEQ)


@pytest.fixture(scope="module")
def examples(corpus_documents, pre):
    """Questions on contexts of 0 to about 10 windows (most 3+), a few questions longer
    than max_query_length; contexts joined from real sentences."""
    sentences = [s for document in corpus_documents[:40] for s in document]
    rng = np.random.default_rng(3)
    out = []
    for i in range(14):
        start = int(rng.integers(0, len(sentences) - 40))
        count = [0, 1, 4, 6, 8, 10, 12, 16, 5, 7, 9, 11, 14, 3][i]
        context = " ".join(sentences[start:start + count])
        question = sentences[start + 30] if i % 3 else " ".join(sentences[start + 30:start + 33])
        out.append(SquadExample(f"q{i}", question, context, [], None))
    windows = [len(build_windows(pre.tokenizer, [e], SEQ, STRIDE, QUERY, False)[1])
               for e in out]
    assert sum(n >= 3 for n in windows) >= 9 and max(windows) <= 30, windows  # what is tested
    return out


def _model(pre, answerability, seed=0):
    config = AlbertConfig(vocab_size=pre.tokenizer.vocab_size, embedding_size=16,
                          hidden_size=24, num_hidden_layers=2, num_attention_heads=2,
                          intermediate_size=32, max_position_embeddings=SEQ)
    model = AlbertSpanExtractor(config, answerability=answerability)
    # Seeded weights without tf.random.set_seed (which drops the SentencePiece resource
    # with TensorFlow's kernel cache); wide weights spread the logits: no near-ties.
    rng = np.random.default_rng(seed)
    model.set_weights([rng.normal(0.0, 0.4, w.shape) if w.ndim > 1 else np.asarray(w)
                       for w in model.get_weights()])
    model.preprocessor = pre
    return model


def _strings(values):
    return tf.constant([v.encode() for v in values], tf.string)


def _served(module, examples):
    out = module.answer(_strings([e.question for e in examples]),
                        _strings([e.context for e in examples]))
    return {k: v.numpy() for k, v in out.items()}


def test_graph_windows_equal_squad_datas(pre, examples):
    """Every window's packed ids, first piece, count, offset and max-context flags."""
    record = TaskRecord.create("span", seq_length=SEQ, **SETTINGS)
    module = SpanModule(_model(pre, False), pre, record)

    @tf.function  # the SentencePiece resource lives in graphs
    def windowed(question, context):
        batch = module._windowed(question, context)
        w = batch.windows
        return dict(row=w.row, first=w.first, count=w.count, offset=w.offset,
                    flags=w.max_context, ids=batch.features["input_word_ids"],
                    types=batch.features["input_type_ids"])

    graph = windowed(_strings([e.question for e in examples]),
                     _strings([e.context for e in examples]))
    data, windows, _ = build_windows(pre.tokenizer, examples, SEQ, STRIDE, QUERY, False)
    assert graph["row"].numpy().tolist() == [w.example for w in windows]
    assert graph["first"].numpy().tolist() == [w.first for w in windows]
    assert graph["count"].numpy().tolist() == [w.count for w in windows]
    assert graph["offset"].numpy().tolist() == [w.offset for w in windows]
    flags = graph["flags"].to_list()
    assert flags == [w.max_context.tolist() for w in windows]
    assert any(not all(f) for f in flags)  # the rule decided something
    ids, types = graph["ids"].numpy(), graph["types"].numpy()
    for row, (word_ids, type_ids) in enumerate(zip(data.features["input_word_ids"],
                                                   data.features["input_type_ids"])):
        assert ids[row, :len(word_ids)].tolist() == word_ids.tolist()
        assert types[row, :len(type_ids)].tolist() == type_ids.tolist()
        assert not ids[row, len(word_ids):].any()


@pytest.mark.parametrize("version", ["v1.1", "v2.0"])
def test_served_answers_equal_finetunes_predictions(pre, examples, tmp_path, version):
    """predictions.json of SquadTask (fine-tuning's own writer) == the graph's answers."""
    model = _model(pre, version == "v2.0", seed=len(version))
    predict = lambda data: predict_rows(model, data, 8, SEQ, None)  # noqa: E731
    threshold = None
    if version == "v2.0":  # a threshold between the middle no-answer probabilities
        probe = SquadTask(version, None, examples, pre.tokenizer, SEQ, **SETTINGS,
                          no_answer_threshold=0.5)
        odds = sorted(probe._decode(predict)[2].values())
        threshold = (odds[len(odds) // 2 - 1] + odds[len(odds) // 2]) / 2
    task = SquadTask(version, None, examples, pre.tokenizer, SEQ, **SETTINGS,
                     no_answer_threshold=threshold)
    task.write_predictions(predict, str(tmp_path))
    expected = json.loads((tmp_path / "predictions.json").read_text(encoding="utf-8"))
    served = _served(SpanModule(model, pre, task.record), examples)
    answers = [a.decode() for a in served["answer"]]
    assert answers == [expected[e.qid] for e in examples]
    assert sum(bool(a) for a in answers) >= 5  # real answers were compared
    if version == "v2.0":
        odds = json.loads((tmp_path / "null_odds.json").read_text(encoding="utf-8"))
        np.testing.assert_allclose(served["no_answer_probability"],
                                   [odds[e.qid] for e in examples], atol=1e-5)
        assert 0 < sum(not a for a in answers[1:]) < len(answers) - 1  # the threshold decided
    for example, answer, start, end in zip(examples, answers, served["start_char"],
                                           served["end_char"]):
        assert (example.context[start:end] if answer else "") == answer


@pytest.mark.parametrize("head", ["ours", "null_score"])
def test_predict_answers_as_served(pre, examples, head):
    """`AlbertSpanExtractor.predict((questions, contexts))` == the served signature."""
    model = _model(pre, head == "ours", seed=5)
    # Thresholds that let the answers through (deciding them is tested above and in
    # test_foreign.py); the decision quantities are compared below.
    threshold = 1e6 if head == "null_score" else None
    record = TaskRecord.create("span", seq_length=SEQ, **SETTINGS, answerability=head == "ours",
                               null_score_diff_threshold=threshold, no_answer_threshold=1.0)
    model.task_record = record
    module = (NullScoreSpanModule if threshold is not None else SpanModule)(model, pre, record)
    served = _served(module, examples)
    got = model.predict(([e.question for e in examples], [e.context for e in examples]),
                        verbose=0)
    assert set(got) == set(served)
    assert list(got["answer"]) == [a.decode() for a in served["answer"]]
    for name in ("start_char", "end_char", "has_answer"):
        np.testing.assert_array_equal(got[name], served[name], err_msg=name)
    for name in set(served) - {"answer", "start_char", "end_char", "has_answer"}:
        np.testing.assert_allclose(got[name], served[name], atol=1e-4, err_msg=name)
    assert not got["has_answer"][0] and got["answer"][0] == ""  # the empty context
    assert got["has_answer"][1:].sum() >= 3


def test_windows_past_the_cap_are_refused(pre, examples):
    record = TaskRecord.create("span", seq_length=SEQ, **SETTINGS, max_windows=4)
    model = _model(pre, False)
    model.task_record = record
    module = SpanModule(model, pre, record)
    # A context of more than 4 windows in pieces, not in words (the check before tokenizing).
    room = SEQ - 3 - QUERY
    long = next(e for e in examples if
                len(build_windows(pre.tokenizer, [e], SEQ, STRIDE, QUERY, False)[1]) > 4 and
                sum(bool(re.search("[A-Za-z0-9]", w)) for w in e.context.split(" ")) <=
                room + 3 * STRIDE)  # the least capacity: a question of QUERY pieces
    pattern = (r"serving_default: the context of row 1 needs \d+ windows, more than "
               r"max_windows=4 \(seq_length 64, doc_stride 24\); shorten it or export with a "
               r"larger --max-windows")
    with pytest.raises(tf.errors.InvalidArgumentError, match=pattern):
        _served(module, [examples[1], long])
    # Python is not bounded by the serving cap: it answers as a graph with a larger one.
    got = model.predict(([examples[1].question, long.question],
                         [examples[1].context, long.context]), verbose=0)
    wide = _served(SpanModule(model, pre, record.replace(max_windows=32)), [examples[1], long])
    assert list(got["answer"]) == [a.decode() for a in wide["answer"]]
    np.testing.assert_array_equal(got["start_char"], wide["start_char"])
    # A context of 10^6 characters is refused by its words, before it is tokenized: the
    # word count's message ("has at least N pieces"), not the windows' ("needs N windows").
    huge = "the quick brown fox jumps over the lazy dog. " * 22_223  # 1,000,035 characters
    answer = module.answer.get_concrete_function()
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match=r"serving_default: the context of row 0 has at least 200007 pieces, "
                             r"more than max_windows=4 windows hold"):
        answer(_strings(["what?"]), _strings([huge]))


def test_beam_head_decodes_across_windows_as_the_original(pre, examples):
    """run_squad_v2's beam head over 3+ windows: the graph's answer is the best of
    `span_decoding.beam_candidates` over the windows, its null_score_diff the lowest
    cls_logits (the original's score_null)."""
    from albert_tf import AlbertSpanBeamExtractor
    from albert_tf.serving.signatures.span_beam import BeamSpanModule
    from albert_tf.span_decoding import beam_candidates

    config = _model(pre, False).config
    model = AlbertSpanBeamExtractor(config, start_n_top=4, end_n_top=3)
    rng = np.random.default_rng(9)
    model.set_weights([rng.normal(0.0, 0.4, w.shape) if w.ndim > 1 else np.asarray(w)
                       for w in model.get_weights()])
    record = TaskRecord.create("span_beam", seq_length=SEQ, **SETTINGS, start_n_top=4,
                               end_n_top=3, null_score_diff_threshold=1e6)
    served = _served(BeamSpanModule(model, pre, record), examples)
    data, windows, contexts = build_windows(pre.tokenizer, examples, SEQ, STRIDE, QUERY, False)
    out = predict_rows(model, data, 8, SEQ, None)
    found = 0
    for row, example in enumerate(examples):
        mine = [w for w, window in enumerate(windows) if window.example == row]
        spans = [c for w in mine for c in beam_candidates(
            windows[w], out["start_top_index"][w], out["start_top_log_probs"][w],
            out["end_top_index"][w], out["end_top_log_probs"][w], record.max_answer_length)]
        np.testing.assert_allclose(served["null_score_diff"][row],
                                   min(out["cls_logits"][w] for w in mine), atol=1e-5)
        assert bool(served["has_answer"][row]) == bool(spans)
        if spans:
            found += 1
            score, first, last = max(spans, key=lambda c: c[0])
            np.testing.assert_allclose(served["score"][row], score, atol=1e-5)
            pieces = contexts[row]
            want = example.context[pieces.starts[first]:pieces.ends[last]].strip()
            assert served["answer"][row].decode() == want
    assert found >= 5


@pytest.mark.parametrize("checkpoint, flags, message", [
    ("seq_single/hf", ["--doc-stride", "8"], "albert-tf export: --doc-stride is for span "
     "(question answering) models; the checkpoint holds a classification model"),
    # a flag's bad value is the flag's, not the checkpoint's
    ("qa/hf", ["--max-windows", "0"], "albert-tf export: argument --max-windows: 0 must be >= 1"),
    ("qa/hf", ["--doc-stride", "0"], "albert-tf export: argument --doc-stride: 0 must be >= 1"),
])
def test_export_window_flags_are_checked(tmp_path, capsys, checkpoint, flags, message):
    from albert_tf.serving import export
    from tests.helpers.paths import TASK_FIXTURES

    argv = ["--checkpoint", f"{TASK_FIXTURES}/{checkpoint}", "--output", str(tmp_path / "m"),
            *flags]
    assert export.main(argv) == 2
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and error[0].startswith(message), error
    assert not (tmp_path / "m").exists() or not os.listdir(tmp_path / "m")


def test_python_answers_more_windows_than_the_serving_cap(pre, corpus_documents):
    """A context of more than 32 windows (the default max_windows): the graph refuses it,
    Python answers it, as the graph does when exported with room for it."""
    sentences = [s for document in corpus_documents[:60] for s in document]
    context = " ".join(sentences[:120])
    question = sentences[130]
    windows = len(build_windows(pre.tokenizer, [SquadExample("q", question, context, [], None)],
                                SEQ, STRIDE, QUERY, False)[1])
    assert windows > 32, windows
    record = TaskRecord.create("span", seq_length=SEQ, **SETTINGS)
    assert record.max_windows == 32
    model = _model(pre, False, seed=7)
    model.task_record = record
    with pytest.raises(tf.errors.InvalidArgumentError, match="more than max_windows=32"):
        _served(SpanModule(model, pre, record), [SquadExample("q", question, context, [], None)])
    got = model.predict(([question], [context]), verbose=0)
    wide = SpanModule(model, pre, record.replace(max_windows=windows))
    served = _served(wide, [SquadExample("q", question, context, [], None)])
    assert got["answer"][0] == served["answer"][0].decode() != ""
    assert (got["start_char"][0], got["end_char"][0]) == (served["start_char"][0],
                                                          served["end_char"][0])
    np.testing.assert_allclose(got["score"], served["score"], atol=1e-4)
