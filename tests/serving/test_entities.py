"""Served entities: the token classifier's `serving_default(text)` returns word-level
entities with exact character offsets in the raw text, equal to a Python decoding of
the eager model's outputs (words split as `str.split()` does, each word tokenized on its
own as `finetune --task ner` does, its label its first piece's, conlleval's rule)."""

from __future__ import annotations

import numpy as np
import pytest

from albert_tf import AlbertConfig, AlbertTokenClassifier, tagging
from albert_tf.checkpoint import task_record_of
from albert_tf.serving import export
from albert_tf.serving.signatures.base import strings
from albert_tf.tokenizer.preprocessor import AlbertPreprocessor
from tests.helpers.fresh_process import call_signatures

SEQ = 24
LABELS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC", "E-LOC", "S-LOC"]
TEXTS = [
    "Anna Schmidt flew from Berlin to New York on Monday.",
    "  leading   and trailing\tspaces\u00a0and a no-break space  ",
    "Caf\u00e9 M\u00fcller \u2014 na\u00efve \u00fcber \U0001F600 emoji and \u200b alone",
    "",
    "one",
    # Longer than one window (seq_length - 2 pieces): labelled window by window.
    "word " * 30 + "tail",
    " ".join(f"Name{i} went to Place{i}," for i in range(12)),
]


def _words(text):
    """[start, end) of each whitespace-separated word (str.isspace, as str.split())."""
    spans, start = [], None
    for i, char in enumerate(text + " "):
        if char.isspace():
            if start is not None:
                spans.append((start, i))
            start = None
        elif start is None:
            start = i
    return spans


def _softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def reference_entities(model, tokenizer, text, words=_words, labels=LABELS):
    """(type, text, start_char, end_char, score) of each entity, decoded in Python;
    `words(text)` gives the words' [start, end) character spans."""
    spans = words(text)
    pieces, firsts = [], []
    for start, end in spans:
        ids = tokenizer.encode(text[start:end])
        firsts.append(len(pieces) if ids else None)
        pieces.extend(ids)
    windows = tagging.windows(len(pieces), SEQ - 2)
    window_probabilities = []
    for start, end in windows:
        packed = tokenizer.pack(pieces[start:end], seq_length=SEQ)
        logits = model({k: np.asarray([v], np.int32) for k, v in packed.items()})
        logits = np.asarray(logits["logits"] if isinstance(logits, dict) else logits)[0]
        window_probabilities.append(_softmax(logits.astype(np.float64)))
    # Each piece from the window that gives it the most context.
    per_piece = [window_probabilities[w][p - windows[w][0] + 1]
                 for p in range(len(pieces)) for w in [tagging.best_window(p, windows)]]
    tags, scores = [], []
    for first in firsts:
        if first is None:  # a word of nothing the tokenizer keeps
            tags.append("O"), scores.append(0.0)
            continue
        row = per_piece[first]
        tags.append(labels[int(row.argmax())]), scores.append(float(row.max()))
    out = []
    for kind, first, last in tagging.entities(tags):
        start, end = spans[first][0], spans[last - 1][1]
        out.append((kind, text[start:end], start, end, float(np.mean(scores[first:last]))))
    return out, pieces, np.array(per_piece).reshape(len(pieces), len(labels))


def _served_entities(outputs, row):
    count = int(outputs["entity_count"][row])
    return [(outputs["entity_type"][row][k].decode(), outputs["entity_text"][row][k].decode(),
             int(outputs["entity_start_char"][row][k]), int(outputs["entity_end_char"][row][k]),
             float(outputs["entity_score"][row][k])) for k in range(count)]


@pytest.fixture(scope="module")
def model_and_pre(spm_model_path):
    import keras

    keras.utils.set_random_seed(7)
    pre = AlbertPreprocessor(spm_model_path, SEQ)
    config = AlbertConfig(vocab_size=pre.tokenizer.vocab_size, embedding_size=8, hidden_size=12,
                          num_hidden_layers=1, num_attention_heads=3, intermediate_size=20,
                          max_position_embeddings=SEQ)
    return AlbertTokenClassifier(config, len(LABELS)), pre


def check_served_row(outputs, row, model, tokenizer, text, words=_words, labels=LABELS):
    """Asserts that row `row` of a served answer has the reference's pieces, per-piece
    probabilities and entities; returns the served entities."""
    want, pieces, per_piece = reference_entities(model, tokenizer, text, words, labels)
    got = _served_entities(outputs, row)
    # The graph tokenizes the whole text; the words' own pieces are the same.
    tokens = [t.decode() for t in outputs["tokens"][row] if t]
    assert tokens == [tokenizer.id_to_piece(i) for i in pieces]
    np.testing.assert_allclose(outputs["probabilities"][row][:len(pieces)], per_piece, atol=1e-5)
    assert [g[:4] for g in got] == [w[:4] for w in want], text
    np.testing.assert_allclose([g[4] for g in got], [w[4] for w in want], atol=1e-5)
    return got


def _check(outputs, model, pre):
    seen = 0
    for row, text in enumerate(TEXTS):
        got = check_served_row(outputs, row, model, pre.tokenizer, text)
        for _kind, entity, start, end, _ in got:  # exactly the raw text's slice
            assert entity == text[start:end] and entity == entity.strip() and entity
        seen += len(got)
    assert seen >= 5  # random weights: plenty of entities to compare
    assert len(tagging.windows(len(outputs["tokens"][-1]), SEQ - 2)) >= 3
    width = outputs["entity_type"].shape[1]
    assert width == max(outputs["entity_count"])
    for row in range(len(TEXTS)):
        n = int(outputs["entity_count"][row])
        assert list(outputs["entity_start_char"][row][n:]) == [-1] * (width - n)
        assert list(outputs["entity_text"][row][n:]) == [b""] * (width - n)


def test_module_entities_equal_python_decoding(model_and_pre):
    model, pre = model_and_pre
    record = task_record_of(model, label_names=LABELS)
    module = export.build_module(model, pre, record=record)
    outputs = {k: v.numpy() for k, v in module.label_tokens(strings(
        [t.encode() for t in TEXTS])).items()}
    _check(outputs, model, pre)


def test_labels_that_are_not_tags_give_no_entities(model_and_pre):
    model, pre = model_and_pre
    names = [f"LABEL_{i}" for i in range(len(LABELS))]
    module = export.build_module(model, pre, record=task_record_of(model, label_names=names))
    outputs = module.label_tokens(strings([t.encode() for t in TEXTS]))
    assert outputs["entity_count"].numpy().tolist() == [0] * len(TEXTS)
    assert outputs["entity_type"].shape == (len(TEXTS), 0)


@pytest.mark.slow
def test_saved_model_serves_the_entities_from_raw_text(model_and_pre, tmp_path):
    model, pre = model_and_pre
    record = task_record_of(model, label_names=LABELS, extra_info={"tag_scheme": "bioes"})
    path = str(tmp_path / "ner" / "1")
    export.save_module(export.build_module(model, pre, record=record), path,
                       "token_classification")
    outputs = call_signatures({"ner": (path, "serving_default",
                                       {"text": strings([t.encode() for t in TEXTS])})},
                              tmp_path)["ner"]
    _check(outputs, model, pre)
