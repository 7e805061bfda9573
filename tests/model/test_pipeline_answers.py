"""Python answers of the task models on raw text (`albert_tf.pipeline_answers`), each
against an independent decoding: `predict_entities` against a word-by-word Python
decoding of the eager model (SentencePiece, WordPiece, character-level Chinese; texts of
several windows) and against transformers' own token-classifier logits decoded by
seqeval; `predict_labels` scores against a NumPy softmax / sigmoid of transformers'
logits; `embed` against transformers' mean-pooled last_hidden_state. The exported
signatures answer the same: tests/serving/test_python_answers.py."""

from __future__ import annotations

import json
import os
import textwrap

import keras
import numpy as np
import pytest
from seqeval.metrics.sequence_labeling import get_entities

from albert_tf import AlbertConfig, AlbertEncoder, AlbertSequenceClassifier, AlbertTokenClassifier
from albert_tf.tokenizer.preprocessor import AlbertPreprocessor
from albert_tf.tokenizer.spm import AlbertTokenizer
from tests.helpers.jax_backend import run_on_jax
from tests.helpers.model_harness import tiny_config
from tests.helpers.paths import FIXTURES, REAL_CHINESE_VOCAB, TASK_FIXTURES
from tests.helpers.wordpiece import WORDPIECE_VOCAB
from tests.serving import test_entities
from tests.serving.test_entities import LABELS, SEQ
from tests.serving.test_wordpiece_answers import NER_TEXTS, _words_and_ideographs

CHARACTER_TEXTS = ["张伟今天在北京发布了新产品", "2024年3月5日 李娜访问Apple会议",
                   "王芳 和 IBM 合作" * 6, ""]


def _characters(text):
    """Every character not a space is a word (a model trained on one character a line)."""
    return [(i, i + 1) for i, char in enumerate(text) if not char.isspace()]


def token_model(vocab: str, seed: int, **options) -> AlbertTokenClassifier:
    """A random token classifier with LABELS and a preprocessor of `vocab` at SEQ."""
    keras.utils.set_random_seed(seed)
    pre = AlbertPreprocessor(vocab, SEQ, **options)
    config = AlbertConfig(vocab_size=pre.tokenizer.vocab_size, embedding_size=8, hidden_size=12,
                          num_hidden_layers=1, num_attention_heads=3, intermediate_size=20,
                          max_position_embeddings=SEQ)
    model = AlbertTokenClassifier(config, len(LABELS), preprocessor=pre)
    model.task_record = model.task_record.replace(label_names=tuple(LABELS))
    return model


CASES = {  # vocabulary, preprocessor options, texts, the words of a text
    "sentencepiece": (None, {}, test_entities.TEXTS, test_entities._words),
    "wordpiece": (WORDPIECE_VOCAB, {}, NER_TEXTS, _words_and_ideographs),
    "characters": (REAL_CHINESE_VOCAB, {"split_characters": True}, CHARACTER_TEXTS, _characters),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_predict_entities_equal_a_word_by_word_python_decoding(case, spm_model_path):
    vocab, options, texts, words = CASES[case]
    model = token_model(vocab or spm_model_path, 5, **options)
    got = model.predict_entities(texts, batch_size=3)
    assert len(got) == len(texts)
    seen = 0
    for text, entities in zip(texts, got):
        want, pieces, _ = test_entities.reference_entities(model, model.preprocessor.tokenizer,
                                                           text, words, LABELS)
        assert [(e["type"], e["text"], e["start_char"], e["end_char"]) for e in entities] == \
            [w[:4] for w in want], text
        np.testing.assert_allclose([e["score"] for e in entities], [w[4] for w in want],
                                   atol=1e-5)
        for entity in entities:  # offsets index the raw text
            assert entity["text"] == text[entity["start_char"]:entity["end_char"]]
            assert set(entity) == {"type", "text", "start_char", "end_char", "score"}
        seen += len(entities)
    assert seen >= 5  # random weights: plenty of entities to compare
    longest = max(len(model.preprocessor.tokenizer.encode(t)) for t in texts)
    assert longest > 2 * (SEQ - 2)  # several windows


def test_predict_entities_of_a_transformers_token_classifier():
    """transformers' logits (tests/fixtures/tasks/token), decoded by seqeval: each word's
    label is its first piece's, a word starting at each "▁" piece."""
    path = os.path.join(TASK_FIXTURES, "token", "hf")
    with np.load(os.path.join(TASK_FIXTURES, "token", "reference.npz")) as data:
        reference = dict(data)
    model = AlbertTokenClassifier.from_preset(path)
    names = model.task_record.class_names()
    tokenizer = AlbertTokenizer(os.path.join(path, "spiece.model"))
    texts = [str(t) for t in reference["texts"]]
    got = model.predict_entities(texts)
    entities_seen = 0
    for row, text in enumerate(texts):
        length = int(reference["input_mask"][row].sum())
        pieces = [tokenizer.id_to_piece(int(i)) for i in reference["input_word_ids"][row][1:
                                                                                         length - 1]]
        logits = reference["logits"][row][1:length - 1].astype(np.float64)
        probabilities = np.exp(logits - logits.max(-1, keepdims=True))
        probabilities /= probabilities.sum(-1, keepdims=True)
        firsts = [i for i, piece in enumerate(pieces) if piece.startswith("\u2581")]
        spans, start = [], None  # the words of str.split(), in characters
        for i, char in enumerate(text + " "):
            if char.isspace() and start is not None:
                spans.append((start, i))
                start = None
            elif not char.isspace() and start is None:
                start = i
        assert len(firsts) == len(spans)
        tags = [names[int(probabilities[i].argmax())] for i in firsts]
        scores = [float(probabilities[i].max()) for i in firsts]
        want = [(kind, spans[first][0], spans[last][1], float(np.mean(scores[first:last + 1])))
                for kind, first, last in get_entities(tags)]
        assert [(e["type"], e["start_char"], e["end_char"]) for e in got[row]] == \
            [w[:3] for w in want]
        np.testing.assert_allclose([e["score"] for e in got[row]], [w[3] for w in want],
                                   atol=1e-5)
        entities_seen += len(want)
    assert entities_seen >= 2


def test_predict_entities_is_traced_once(spm_model_path):
    model = token_model(spm_model_path, 2)
    first = model.predict_entities(["Anna went to Paris.", "one two"])
    again = model.predict_entities(["word " * 60, "Anna went to Paris.", "", "x"], batch_size=2)
    assert again[1] == first[0]
    functions = [entry[1] for entry in model._traced_answers._functions.values()]
    assert len(functions) == 2
    assert [f.experimental_get_tracing_count() for f in functions] == [1, 1]
    assert model.predict_entities([]) == [] and len(model.predict_entities("one")) == 1
    with pytest.raises(TypeError, match="a string or a list of strings"):
        model.predict_entities([1, 2])


def _softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


@pytest.mark.parametrize("head", ["seq_single", "seq_multi"])
def test_predict_labels_scores_are_transformers_probabilities(head):
    with np.load(os.path.join(TASK_FIXTURES, head, "reference.npz")) as data:
        reference = dict(data)
    model = AlbertSequenceClassifier.from_preset(os.path.join(TASK_FIXTURES, head, "hf"))
    names = model.task_record.class_names()
    texts = [str(t) for t in reference["texts"]]
    logits = reference["logits"].astype(np.float64)
    got = model.predict_labels(texts, scores=True)
    ranked = model.predict_labels(texts, top_k=2)
    if head == "seq_single":
        probabilities = _softmax(logits)
        assert [g["label"] for g in got] == [names[i] for i in probabilities.argmax(-1)]
        assert model.predict_labels(texts) == [g["label"] for g in got]
        np.testing.assert_allclose([g["score"] for g in got], probabilities.max(-1), atol=1e-5)
    else:
        probabilities = 1 / (1 + np.exp(-logits))
        want = [[(names[c], p[c]) for c in range(len(names)) if p[c] > 0.5]
                for p in probabilities]
        assert [[g["label"] for g in row] for row in got] == [[n for n, _ in w] for w in want]
        assert model.predict_labels(texts) == [[n for n, _ in w] for w in want]
        np.testing.assert_allclose([g["score"] for row in got for g in row],
                                   [p for w in want for _, p in w], atol=1e-5)
        assert sum(len(w) for w in want) >= 2
    for row, p in zip(ranked, probabilities):
        order = np.argsort(-p)[:2]
        assert [r["label"] for r in row] == [names[c] for c in order]
        np.testing.assert_allclose([r["score"] for r in row], p[order], atol=1e-5)
    with pytest.raises(ValueError, match="top_k=0 must be a positive integer"):
        model.predict_labels(texts, top_k=0)


def test_embed_is_transformers_mean_pooling():
    with np.load(os.path.join(FIXTURES, "embeddings", "mean_pooled.npz")) as data:
        reference = dict(data)
    encoder = AlbertEncoder.from_preset(os.path.join(FIXTURES, "embeddings", "hf"),
                                        seq_length=64)
    texts = [str(t) for t in reference["texts"]]
    np.testing.assert_allclose(encoder.embed(texts), reference["mean_pooled"], atol=1e-5)
    pairs = ([str(t) for t in reference["texts_a"]], [str(t) for t in reference["texts_b"]])
    np.testing.assert_allclose(encoder.embed(pairs, batch_size=2),
                               reference["pair_mean_pooled"], atol=1e-5)
    served = encoder.embed(texts, pooling=None)
    assert set(served) == {"sequence_output", "pooled_output", "mean_pooled", "input_mask"}
    assert served["sequence_output"].shape[:2] == served["input_mask"].shape == (len(texts), 64)
    np.testing.assert_array_equal(encoder.embed(texts, pooling="cls"),
                                  served["sequence_output"][:, 0])
    np.testing.assert_array_equal(encoder.embed(texts, pooling="pooler"), served["pooled_output"])
    with pytest.raises(ValueError, match="pooling='max': expected one of"):
        encoder.embed(texts, pooling="max")


def test_embed_without_a_tokenizer_says_so_in_one_line():
    encoder = AlbertEncoder(tiny_config())
    with pytest.raises(ValueError) as caught:
        encoder.embed(["a text"])
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith("AlbertEncoder.embed: the encoder has no tokenizer; load it with "
                              "from_preset from a directory with spiece.model or vocab.txt")


def test_the_answers_need_no_tensorflow_for_token_ids_on_jax():
    code = textwrap.dedent("""
        import sys
        sys.modules["tensorflow"] = None  # any import of TensorFlow now fails
        import numpy as np
        import keras
        assert keras.backend.backend() == "jax"
        from albert_tf import AlbertConfig, AlbertEncoder, AlbertSequenceClassifier
        cfg = AlbertConfig(vocab_size=37, embedding_size=8, hidden_size=12, num_hidden_layers=2,
                           num_attention_heads=3, intermediate_size=20)
        ids = np.arange(14, dtype="int32").reshape(2, 7) % 37
        x = {"input_word_ids": ids, "input_mask": np.ones_like(ids),
             "input_type_ids": np.zeros_like(ids)}
        model = AlbertSequenceClassifier(cfg, 3)
        labels = model.predict_labels(x, scores=True)
        probabilities = np.exp(model.predict(x, verbose=0))
        probabilities /= probabilities.sum(-1, keepdims=True)
        assert [l["label"] for l in labels] == [str(i) for i in probabilities.argmax(-1)]
        assert np.allclose([l["score"] for l in labels], probabilities.max(-1), atol=1e-5)
        try:
            AlbertEncoder(cfg).embed(["text"])
            raise AssertionError("embed answered without a tokenizer")
        except ValueError as e:
            assert "has no tokenizer" in str(e)
        print("ok")
    """)
    assert run_on_jax(code).strip().endswith("ok")


def test_predict_entities_and_embed_on_the_jax_backend():
    """Text through TensorFlow's graph, the model on JAX: the TensorFlow backend's answers."""
    token = os.path.join(TASK_FIXTURES, "token", "hf")
    embeddings = os.path.join(FIXTURES, "embeddings", "hf")
    texts = ["Paris is the capital of France!", "Rain fell on the quiet town. " * 9]
    code = textwrap.dedent(f"""
        import json
        import keras
        assert keras.backend.backend() == "jax"
        from albert_tf import AlbertEncoder, AlbertTokenClassifier
        model = AlbertTokenClassifier.from_preset({token!r}, seq_length=16)
        encoder = AlbertEncoder.from_preset({embeddings!r}, seq_length=64)
        print(json.dumps({{"entities": model.predict_entities({texts!r}),
                          "embed": encoder.embed({texts!r}).tolist()}}))
    """)
    on_jax = json.loads(run_on_jax(code).strip().splitlines()[-1])
    want = AlbertTokenClassifier.from_preset(token, seq_length=16).predict_entities(texts)
    assert sum(len(row) for row in want) >= 2
    assert [[{**e, "score": 0} for e in row] for row in on_jax["entities"]] == \
        [[{**e, "score": 0} for e in row] for row in want]
    np.testing.assert_allclose([e["score"] for row in on_jax["entities"] for e in row],
                               [e["score"] for row in want for e in row], atol=1e-5)
    encoder = AlbertEncoder.from_preset(embeddings, seq_length=64)
    np.testing.assert_allclose(on_jax["embed"], encoder.embed(texts), atol=1e-5)
