"""A WordPiece (Chinese-style vocab.txt) span QA and NER model answers with offsets into the
raw text: the served graph equals the Python decoding (`AlbertSpanExtractor.predict`,
fine-tuning's SQuAD predictions, the entities of a Python word-by-word decoding) on Chinese
and on English with accents and upper case, over several doc-stride windows; and both
export as SavedModels that answer the same in a process without albert_tf (slow).

The offsets themselves are checked against BertTokenizerFast in
tests/model/test_wordpiece.py and test_wordpiece_graph.py.
"""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
import tensorflow as tf

from albert_tf import AlbertConfig, AlbertTokenClassifier, save_checkpoint
from albert_tf.checkpoint import task_record_of
from albert_tf.checkpoint.task_record import TaskRecord
from albert_tf.serving import export
from albert_tf.serving.signatures.base import strings
from albert_tf.serving.signatures.span import SpanModule
from albert_tf.tokenizer import AlbertPreprocessor
from albert_tf.tokenizer.wordpiece import is_cjk, read_vocab
from albert_tf.training.finetune.squad import SquadTask
from albert_tf.training.finetune.squad_data import SquadExample, build_windows
from albert_tf.training.finetune.train import predict_rows
from tests.helpers.fresh_process import call_signatures
from tests.helpers.wordpiece import WORDPIECE_VOCAB
from tests.serving import test_entities, test_span_windows
from tests.serving.test_span_windows import QUERY, SEQ, SETTINGS, STRIDE

NER_LABELS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC", "E-LOC", "S-LOC"]


def _chinese(count: int, seed: int) -> str:
    """`count` ideographs of the vocabulary with its punctuation, a sentence every 9."""
    cjk = [t for t in read_vocab(WORDPIECE_VOCAB) if len(t) == 1 and is_cjk(t)]
    rng = np.random.default_rng(seed)
    chars = [cjk[i] for i in rng.integers(0, len(cjk), count)]
    return "".join(c + ("。" if i % 9 == 8 else "") for i, c in enumerate(chars))


ENGLISH = ("Der Flughafen MÜNCHEN liegt nördlich; Café Zürich öffnet um 8 Uhr. "
           "Naïve ÉTUDIANTS visit İstanbul and Ångström's lab, then São Paulo! ")
CONTEXTS = [
    "",
    _chinese(30, 1),
    _chinese(200, 2),  # several windows
    ENGLISH * 3,
    ENGLISH + _chinese(80, 3) + " Tokyo 东京 " + ENGLISH,
    "  \t混合 Text\u00a0with 北京 and ﬁne ligatures\u200b ok  ",
]
QUESTIONS = ["谁？", "北京在哪里？", "What is Café Zürich?", "ÜBER wen?", "多少 Uhr?",
             "Where?"]


@pytest.fixture(scope="module")
def pre():
    return AlbertPreprocessor(WORDPIECE_VOCAB, SEQ)


@pytest.fixture(scope="module")
def examples():
    return [SquadExample(f"q{i}", q, c, [], None)
            for i, (q, c) in enumerate(zip(QUESTIONS, CONTEXTS))]


def test_contexts_span_several_windows(pre, examples):
    windows = build_windows(pre.tokenizer, examples, SEQ, STRIDE, QUERY, False)[1]
    counts = [sum(w.example == i for w in windows) for i in range(len(examples))]
    assert max(counts) >= 4 and counts[4] >= 3, counts


def test_predict_and_finetune_answer_as_served(pre, examples, tmp_path):
    model = test_span_windows._model(pre, False, seed=11)
    record = TaskRecord.create("span", seq_length=SEQ, **SETTINGS)
    model.task_record = record
    served = test_span_windows._served(SpanModule(model, pre, record), examples)
    got = model.predict(([e.question for e in examples], [e.context for e in examples]),
                        verbose=0)
    answers = [a.decode() for a in served["answer"]]
    assert list(got["answer"]) == answers
    for name in ("start_char", "end_char", "has_answer"):
        np.testing.assert_array_equal(got[name], served[name], err_msg=name)
    task = SquadTask("v1.1", None, examples, pre.tokenizer, SEQ, **SETTINGS)
    task.write_predictions(lambda data: predict_rows(model, data, 8, SEQ, None), str(tmp_path))
    expected = json.loads((tmp_path / "predictions.json").read_text(encoding="utf-8"))
    assert answers == [expected[e.qid] for e in examples]
    for example, answer, start, end in zip(examples, answers, served["start_char"],
                                           served["end_char"]):
        assert (example.context[start:end] if answer else "") == answer
    assert answers[0] == "" and all(answers[1:])
    # Answers are cut from the raw text: its upper case, accents and ideographs.
    assert any(is_cjk(c) for c in "".join(answers))
    assert any(c.isupper() or ord(c) > 0x7F and not is_cjk(c) for c in answers[3])


def _words_and_ideographs(text: str) -> list[tuple[int, int]]:
    """Whitespace-separated words, each CJK ideograph a word of its own."""
    spans = []
    for start, end in test_entities._words(text):
        cut = start
        for i in range(start, end):
            if is_cjk(text[i]):
                spans += [(cut, i)] if cut < i else []
                spans.append((i, i + 1))
                cut = i + 1
        spans += [(cut, end)] if cut < end else []
    return spans


@pytest.fixture(scope="module")
def ner_model():
    import keras

    keras.utils.set_random_seed(3)
    pre = AlbertPreprocessor(WORDPIECE_VOCAB, test_entities.SEQ)
    config = AlbertConfig(vocab_size=pre.tokenizer.vocab_size, embedding_size=8,
                          hidden_size=12, num_hidden_layers=1, num_attention_heads=3,
                          intermediate_size=20, max_position_embeddings=test_entities.SEQ)
    return AlbertTokenClassifier(config, len(NER_LABELS)), pre


def _check_entities(outputs, model, pre, texts):
    seen = 0
    for row, text in enumerate(texts):
        got = test_entities.check_served_row(outputs, row, model, pre.tokenizer, text,
                                             _words_and_ideographs, NER_LABELS)
        # every piece's characters: those WordPieceTokenizer.encode_with_offsets gives
        _, offsets = pre.tokenizer.encode_with_offsets(text)
        n = len(offsets)
        assert list(zip(outputs["start_char"][row][:n], outputs["end_char"][row][:n])) == \
            [tuple(o) for o in offsets]
        seen += len(got)
    assert seen >= 5


NER_TEXTS = CONTEXTS[1:] + ["王小明住在北京。", "ANNA Müller flew to Zürich with 李雷"]


def test_module_entities_equal_python_decoding(ner_model):
    model, pre = ner_model
    module = export.build_module(model, pre, record=task_record_of(model,
                                                                   label_names=NER_LABELS))
    outputs = {k: v.numpy() for k, v in module.label_tokens(strings(
        [t.encode() for t in NER_TEXTS])).items()}
    _check_entities(outputs, model, pre, NER_TEXTS)


@pytest.mark.slow
def test_wordpiece_span_and_ner_models_export_and_answer(ner_model, pre, examples, tmp_path):
    span = test_span_windows._model(pre, False, seed=11)
    span.task_record = TaskRecord.create("span", seq_length=SEQ, **SETTINGS)
    want = test_span_windows._served(SpanModule(span, pre, span.task_record), examples)
    ner, ner_pre = ner_model
    calls = {}
    for name, model, labels in (("span", span, None), ("ner", ner, NER_LABELS)):
        checkpoint = save_checkpoint(model, str(tmp_path / name), spm_model=WORDPIECE_VOCAB,
                                     label_names=labels)
        output = str(tmp_path / "served" / name)
        assert export.main(["--checkpoint", checkpoint, "--output", output]) == 0
        calls[name] = os.path.join(output, "1")
    calls["span"] = (calls["span"], "serving_default",
                     {"question": strings([e.question.encode() for e in examples]),
                      "context": strings([e.context.encode() for e in examples])})
    calls["ner"] = (calls["ner"], "serving_default",
                    {"text": strings([t.encode() for t in NER_TEXTS])})
    (tmp_path / "fresh").mkdir()
    got = call_signatures(calls, tmp_path / "fresh")
    assert [a.decode() for a in got["span"]["answer"]] == [a.decode() for a in want["answer"]]
    for name in ("start_char", "end_char"):
        np.testing.assert_array_equal(got["span"][name], want[name])
    _check_entities(got["ner"], ner, ner_pre, NER_TEXTS)


def test_offsets_of_a_batch_with_empty_and_space_only_rows(pre):
    ids, starts, ends = pre.wordpiece.tokenize_with_offsets(
        tf.constant(["", "   ", "北京 ok", "\u0000\u200b"]))
    assert ids.row_lengths().numpy().tolist() == [0, 0, 4, 0]  # 北 京 o ##k
    assert starts.to_list()[2] == [0, 3, 7, 8] and ends.to_list()[2] == [3, 6, 8, 9]
