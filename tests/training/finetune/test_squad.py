"""SQuAD: character alignment, doc-stride windows, n-best decoding across windows, 2.0 no-answer,
readers (official JSON and mocked tensorflow-datasets) and an end-to-end run."""

import json
import os

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_datasets as tfds

from albert_tf import AlbertConfig, AlbertPretrainer, save_checkpoint
from albert_tf.checkpoint import open_checkpoint
from albert_tf.tokenizer.spm import SPIECE_UNDERLINE, AlbertTokenizer
from albert_tf.training.finetune.examples import DataError
from albert_tf.training.finetune.run import main
from albert_tf.training.finetune.squad import SquadTask, decode_answers
from albert_tf.training.finetune.squad_data import (
    SquadExample,
    align_context,
    answer_pieces,
    build_windows,
    load_squad_tfds,
    read_squad_json,
)
from tests.helpers.squad_files import write_squad_json

CONTEXT = ("The Café  Ünïcode (1990) costs 1,000, dollars. Many other words follow here, so "
           "that a short sequence needs several windows; ΣΑΣ and naïve—ok are hard cases. "
           "The answer sits near the end: Zürich Station opened in 1847, it is said.")


@pytest.fixture(scope="module")
def tokenizer(spm_model_path):
    return AlbertTokenizer(spm_model_path)


def _span(text, answer):
    start = text.index(answer)
    return start, start + len(answer)


def _surface(tokenizer, piece_id):
    return tokenizer.id_to_piece(piece_id).replace(SPIECE_UNDERLINE, "")


def test_alignment_maps_pieces_to_original_characters(tokenizer):
    pieces = align_context(tokenizer, CONTEXT)
    # The same ids as tokenizing the whole context.
    assert pieces.ids == tokenizer.encode(CONTEXT)
    assert np.all(np.diff(pieces.starts) >= 0) and np.all(pieces.starts <= pieces.ends)
    for word in ("Ünïcode", "(1990)", "1,000,", "Zürich", "naïve—ok"):
        start, end = _span(CONTEXT, word)
        inside = [i for i in range(len(pieces.ids)) if start <= pieces.starts[i] < end]
        assert pieces.starts[inside[0]] == start and pieces.ends[inside[-1]] == end
        for i in inside:  # each piece spells its own original characters, normalised
            if _surface(tokenizer, pieces.ids[i]) and pieces.ids[i] != tokenizer.unk_id:
                assert tokenizer.normalize(CONTEXT[pieces.starts[i]:pieces.ends[i]]) == \
                    _surface(tokenizer, pieces.ids[i])
    # A final sigma lower-cases differently in a word than alone: the word maps as a whole.
    start, end = _span(CONTEXT, "ΣΑΣ")
    inside = [i for i in range(len(pieces.ids)) if start <= pieces.starts[i] < end]
    assert all((pieces.starts[i], pieces.ends[i]) == (start, end) for i in inside)
    first, last = answer_pieces(pieces, *_span(CONTEXT, "Zürich Station"))
    assert CONTEXT[pieces.starts[first]:pieces.ends[last]] == "Zürich Station"
    assert answer_pieces(pieces, len(CONTEXT), len(CONTEXT) + 3) is None


def _example(qid="q1", answer="Zürich Station", context=CONTEXT, question="Which station?"):
    if answer is None:
        return SquadExample(qid, question, context, [], None)
    return SquadExample(qid, question, context, [answer], context.index(answer))


def test_windows_stride_cover_and_label_the_answer(tokenizer):
    example = _example()
    data, windows, contexts = build_windows(tokenizer, [example], seq_length=24, doc_stride=5,
                                            max_query_length=6, training=True, answerability=True)
    pieces = contexts[0]
    query = tokenizer.encode(example.question)[:6]
    assert len(windows) > 3
    assert [w.first for w in windows] == [5 * i for i in range(len(windows))]
    assert windows[-1].first + windows[-1].count == len(pieces.ids)
    # Every context piece is "max context" in exactly one window.
    owners = np.zeros(len(pieces.ids), int)
    for w, window in enumerate(windows):
        ids = data.features["input_word_ids"][w]
        assert list(ids[:len(query) + 2]) == [tokenizer.cls_id, *query, tokenizer.sep_id]
        assert list(ids[window.offset:window.offset + window.count]) == \
            pieces.ids[window.first:window.first + window.count]
        assert ids[-1] == tokenizer.sep_id and len(ids) <= 24
        types = data.features["input_type_ids"][w]
        assert not types[:window.offset].any() and types[window.offset:].all()
        owners[window.first:window.first + window.count] += window.max_context
    assert np.all(owners == 1)
    first, last = answer_pieces(pieces, *_span(CONTEXT, "Zürich Station"))
    holders = 0
    for w, window in enumerate(windows):
        start, end = data.labels["start_logits"][w], data.labels["end_logits"][w]
        if window.first <= first and last < window.first + window.count:
            holders += 1
            assert (start, end) == (window.offset + first - window.first, window.offset + last - window.first)
            assert data.labels["answerable_logits"][w] == 1.0
        else:
            assert (start, end) == (0, 0) and data.labels["answerable_logits"][w] == 0.0
    assert holders >= 1


def test_misplaced_answers_are_skipped_in_training(tokenizer):
    bad = SquadExample("q2", "Where?", CONTEXT, ["Zürich"], 3)  # wrong answer_start
    data, windows, _ = build_windows(tokenizer, [bad, _example()], 24, 5, 6, training=True)
    assert {w.example for w in windows} == {1}
    assert len(data) == len(windows)


def _logits(windows, data, value=-5.0):
    return {"start_logits": [np.full(len(ids), value, np.float32) for ids in data.features["input_word_ids"]],
            "end_logits": [np.full(len(ids), value, np.float32) for ids in data.features["input_word_ids"]]}


def test_decoding_across_windows_uses_max_context_and_original_text(tokenizer):
    example = _example(answer=None)
    data, windows, contexts = build_windows(tokenizer, [example], 32, 6, 6, training=False)
    pieces = contexts[0]
    outputs = _logits(windows, data)
    first, last = answer_pieces(pieces, *_span(CONTEXT, "Ünïcode (1990)"))
    # A window that holds `first` but is not its max-context window scores a wrong span
    # starting there higher; the rule must ignore it.
    owner = next(w for w, win in enumerate(windows)
                 if win.first <= first < win.first + win.count and win.max_context[first - win.first])
    other = next((w for w, win in enumerate(windows) if w != owner
                  and win.first <= first < win.first + win.count
                  and first + 1 < win.first + win.count), None)
    win = windows[owner]
    assert win.first <= last < win.first + win.count and other is not None
    outputs["start_logits"][owner][win.offset + first - win.first] = 4.0
    outputs["end_logits"][owner][win.offset + last - win.first] = 4.0
    # A runner-up in another part of the context: "1847".
    second_first, second_last = answer_pieces(pieces, *_span(CONTEXT, "1847"))
    holder = next(w for w, x in enumerate(windows)
                  if x.first <= second_first and second_last < x.first + x.count
                  and x.max_context[second_first - x.first])
    x = windows[holder]
    outputs["start_logits"][holder][x.offset + second_first - x.first] = 3.0
    outputs["end_logits"][holder][x.offset + second_last - x.first] = 3.0
    o = windows[other]
    outputs["start_logits"][other][o.offset + first - o.first] = 9.0
    outputs["end_logits"][other][o.offset + first + 1 - o.first] = 9.0
    best, nbest, no_answer = decode_answers([example], windows, contexts, outputs, n_best=5,
                                             max_answer_length=30)
    assert best["q1"] == "Ünïcode (1990)"
    entries = nbest["q1"]
    assert entries[0]["text"] == "Ünïcode (1990)"
    assert (entries[0]["start"], entries[0]["end"]) == _span(CONTEXT, "Ünïcode (1990)")
    assert entries[0]["score"] == pytest.approx(8.0)
    assert "1847" in [e["text"] for e in entries]
    assert len({e["text"] for e in entries}) == len(entries) <= 5
    probs = [e["probability"] for e in entries]
    assert sum(probs) == pytest.approx(1.0) and probs == sorted(probs, reverse=True)
    assert no_answer == {}
    # Spans longer than max_answer_length are never proposed.
    best, _, _ = decode_answers([example], windows, contexts, outputs, n_best=5,
                                max_answer_length=last - first)
    assert best["q1"] != "Ünïcode (1990)"


def _oracle(task, eval_examples, tokenizer, answerability):
    """Logits that point exactly at each window's labelled answer."""
    data, windows, _ = build_windows(tokenizer, eval_examples, 32, 8, 6, training=True,
                                     answerability=answerability)
    assert [w.example for w in windows] == [w.example for w in task.windows]
    outputs = _logits(windows, data)
    for w in range(len(windows)):
        outputs["start_logits"][w][data.labels["start_logits"][w]] = 5.0
        outputs["end_logits"][w][data.labels["end_logits"][w]] = 5.0
    if answerability:
        outputs["answerable_logits"] = list(np.where(data.labels["answerable_logits"] > 0, 6.0, -6.0))
    return lambda _data: outputs


def test_oracle_logits_score_100_on_v1_and_v2(tokenizer):
    examples = [_example("a", "Zürich Station"), _example("b", "Café  Ünïcode"),
                _example("c", "1,000, dollars")]
    # Windows of ~24 context pieces every 8: each answer lies inside the window
    # that gives its first piece the most context (the original's decoding rule).
    v1 = SquadTask("v1.1", None, examples, tokenizer, 32, 8, 6)
    result = v1.evaluate(_oracle(v1, examples, tokenizer, False))
    assert result["exact"] == 100.0 and result["f1"] == 100.0
    examples.append(_example("d", None, question="Who painted the station?"))
    v2 = SquadTask("v2.0", None, examples, tokenizer, 32, 8, 6)
    result = v2.evaluate(_oracle(v2, examples, tokenizer, True))
    assert result["best_f1"] == 100.0 and result["best_exact"] == 100.0
    assert result["exact"] == 100.0  # also at the default 0.5
    assert result["HasAns_f1"] == 100.0 and result["NoAns_f1"] == 100.0


def test_read_official_json_and_its_errors(tmp_path):
    path = write_squad_json(tmp_path / "dev.json", [("a", CONTEXT, "Which?", "1847"),
                                               ("b", CONTEXT, "Who?", None)], True)
    examples = read_squad_json(path)
    assert [(e.qid, e.answers, e.answer_start) for e in examples] == [
        ("a", ["1847"], CONTEXT.index("1847")), ("b", [], None)]
    (tmp_path / "bad.json").write_text('{"data": [\n{"paragraphs": [}]}')
    with pytest.raises(DataError, match=r"bad\.json:2: not valid JSON"):
        read_squad_json(str(tmp_path / "bad.json"))
    (tmp_path / "q.json").write_text(json.dumps(
        {"data": [{"paragraphs": [{"context": "c", "qas": [{"id": "x", "answers": []}]}]}]}))
    with pytest.raises(DataError, match=r"data\[0\]\.paragraphs\[0\]\.qas\[0\] has no 'question' field"):
        read_squad_json(str(tmp_path / "q.json"))


ROWS = [{"id": "q1", "title": "t", "context": CONTEXT, "question": "Which station?",
         "answers": {"text": ["Zürich Station"], "answer_start": [CONTEXT.index("Zürich Station")]},
         "plausible_answers": {"text": [], "answer_start": []}, "is_impossible": False},
        {"id": "q2", "title": "t", "context": CONTEXT, "question": "Who painted it?",
         "answers": {"text": [], "answer_start": []},
         "plausible_answers": {"text": ["Café"], "answer_start": [4]}, "is_impossible": True}]


def _as_dataset(self, *args, **kwargs):
    keys = set(self.info.features.keys())
    rows = [{k: v for k, v in r.items() if k in keys} for r in ROWS]
    if "is_impossible" not in keys:
        rows = rows[:1]
    return tf.data.Dataset.from_generator(lambda: iter(rows),
                                          output_signature=self.info.features.get_tensor_spec())


@pytest.mark.parametrize("version", ["v1.1", "v2.0"])
def test_tfds_squad_mocked(version, tokenizer, tmp_path):
    with tfds.testing.mock_data(as_dataset_fn=_as_dataset, data_dir=str(tmp_path)):
        examples = load_squad_tfds(version, "validation", str(tmp_path))
    assert examples[0].answers == ["Zürich Station"]
    assert examples[0].answer_start == CONTEXT.index("Zürich Station")
    if version == "v2.0":
        assert examples[1].is_impossible and examples[1].answer_start is None
    task = SquadTask(version, examples, examples, tokenizer, 24, 5, 6)
    assert len(task.train) > len(examples)  # several windows each
    assert set(task.train.labels) == ({"start_logits", "end_logits", "answerable_logits"}
                                      if version == "v2.0" else {"start_logits", "end_logits"})
    # The default mock (random strings, answers not in the context) loads; such
    # training examples are skipped, not crashed on.
    with tfds.testing.mock_data(num_examples=3, data_dir=str(tmp_path)):
        random = load_squad_tfds(version, "train", str(tmp_path))
    assert len(random) == 3


@pytest.mark.slow
def test_cli_squad_v2_from_official_json(tokenizer, spm_model_path, tmp_path):
    config = AlbertConfig(vocab_size=tokenizer.vocab_size, embedding_size=8, hidden_size=12,
                          num_hidden_layers=2, num_attention_heads=3, intermediate_size=20,
                          max_position_embeddings=64)
    checkpoint = str(tmp_path / "pretrained")
    save_checkpoint(AlbertPretrainer(config), checkpoint, spm_model=spm_model_path)
    rows = [("a", CONTEXT, "Which station?", "Zürich Station"), ("b", CONTEXT, "When?", "1847"),
            ("c", CONTEXT, "Who painted it?", None)]
    data = tmp_path / "squad"
    data.mkdir()
    write_squad_json(data / "train-v2.0.json", rows * 3, True)
    write_squad_json(data / "dev-v2.0.json", rows, True)
    out = str(tmp_path / "out")
    assert main(["--task", "squad/v2.0", "--checkpoint", checkpoint, "--output", out,
                 "--data", str(data), "--epochs", "1", "--batch-size", "4", "--seq-length", "40",
                 "--set", "doc_stride=16", "jit_compile=false"]) == 0
    with open(os.path.join(out, "predictions.json")) as f:
        predictions = json.load(f)
    assert set(predictions) == {"a", "b", "c"}
    assert all(p == "" or p in CONTEXT for p in predictions.values())
    with open(os.path.join(out, "null_odds.json")) as f:
        assert all(0.0 <= p <= 1.0 for p in json.load(f).values())
    with open(os.path.join(out, "eval_results.json")) as f:
        assert {"exact", "f1", "best_f1", "best_f1_threshold"} <= set(json.load(f)["best"])
    info = open_checkpoint(out).task_record.to_dict()
    assert info["task"] == "span" and info["answerability"] is True
    with open(os.path.join(out, "eval_results.json")) as f:
        best = json.load(f)["best"]
    # The tuned threshold travels with the model, for `albert-tf export`.
    assert info["no_answer_threshold"] == best["best_f1_threshold"]


def test_task_record_holds_the_settings_and_a_threshold_that_is_a_probability():
    from types import SimpleNamespace

    tok = SimpleNamespace(do_lower_case=False, keep_accents=True)
    task = SquadTask("v2.0", None, None, tok, 64, max_query_length=9, n_best=3)
    record = task.record
    assert (record.seq_length, record.doc_stride, record.max_query_length, record.n_best,
            record.max_answer_length, record.no_answer_threshold) == (64, 128, 9, 3, 30, 0.5)
    assert (record.do_lower_case, record.keep_accents, record.answerability) == (False, True, True)
    assert task.tune_threshold and task.main_metric == "best_f1"
    # Answering nothing is best here: the sweep's "below every probability" is saved as 0.
    task.gold = {"a": [], "b": []}
    score, threshold = task._best_threshold({"a": "x", "b": "y"}, {"a": 0.3, "b": 0.6})
    assert (score, threshold) == (100.0, 0.0)
    fixed = SquadTask("v2.0", None, None, tok, 64, no_answer_threshold=0.7)
    assert not fixed.tune_threshold and fixed.main_metric == "f1"
    assert fixed.checkpoint_info()["no_answer_threshold"] == 0.7
    with pytest.raises(ValueError, match="max_query_length=61 exceeds seq_length=64 - 4"):
        SquadTask("v1.1", None, None, tok, 64, max_query_length=61)
