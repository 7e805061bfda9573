"""The Python answers equal the exported SavedModel's, read in a process that never
imports albert_tf: `predict_entities` == the token classifier's served entities (types,
texts and offsets exact, scores to 1e-5) for a SentencePiece, a WordPiece, a
character-level Chinese model and transformers' token classifier, texts of many windows
included; `predict_labels` scores == the served classifier's probabilities; `embed` ==
the encoder export's mean_pooled. Each model is loaded with from_preset from the
checkpoint the export reads, so both read the same task record."""

from __future__ import annotations

import os

import numpy as np
import pytest

from albert_tf import AlbertEncoder, AlbertSequenceClassifier, AlbertTokenClassifier, save_checkpoint
from albert_tf.serving import export
from albert_tf.serving.signatures.base import strings
from tests.helpers.fresh_process import call_signatures
from tests.helpers.paths import FIXTURES, REAL_CHINESE_VOCAB, TASK_FIXTURES
from tests.helpers.wordpiece import WORDPIECE_VOCAB
from tests.model.test_pipeline_answers import CHARACTER_TEXTS, token_model
from tests.serving.test_entities import LABELS, TEXTS
from tests.serving.test_wordpiece_answers import NER_TEXTS

# Far longer than one window (SEQ - 2 pieces): about a hundred windows.
LONG = " ".join(f"Name{i} met Anna Schmidt in Berlin on day {i}." for i in range(60))
CLASSIFIER_TEXTS = ["The cat sat on the mat.", "Paris is the capital of France!", "", "x y"]


def _served_entities(outputs, row):
    count = int(outputs["entity_count"][row])
    return [{"type": outputs["entity_type"][row][k].decode(),
             "text": outputs["entity_text"][row][k].decode(),
             "start_char": int(outputs["entity_start_char"][row][k]),
             "end_char": int(outputs["entity_end_char"][row][k]),
             "score": float(outputs["entity_score"][row][k])} for k in range(count)]


def _export(checkpoint, output, *options) -> str:
    assert export.main(["--checkpoint", checkpoint, "--output", output, *options]) == 0
    return os.path.join(output, "1")


@pytest.mark.slow
def test_python_answers_equal_the_exported_signatures(spm_model_path, tmp_path):
    ner = {  # name: (checkpoint, texts)
        "sentencepiece": (token_model(spm_model_path, 5), spm_model_path, [*TEXTS, LONG]),
        "wordpiece": (token_model(WORDPIECE_VOCAB, 5), WORDPIECE_VOCAB, NER_TEXTS),
        "characters": (token_model(REAL_CHINESE_VOCAB, 5, split_characters=True),
                       REAL_CHINESE_VOCAB, CHARACTER_TEXTS),
    }
    checkpoints = {name: save_checkpoint(model, str(tmp_path / name), spm_model=vocab,
                                         label_names=LABELS)
                   for name, (model, vocab, _) in ner.items()}
    checkpoints["transformers"] = os.path.join(TASK_FIXTURES, "token", "hf")
    texts = {name: texts for name, (_, _, texts) in ner.items()}
    texts["transformers"] = [*TEXTS, LONG]
    calls = {name: (_export(path, str(tmp_path / "served" / name)), "serving_default",
                    {"text": strings([t.encode() for t in texts[name]])})
             for name, path in checkpoints.items()}
    for head in ("seq_single", "seq_multi"):
        calls[head] = (_export(os.path.join(TASK_FIXTURES, head, "hf"),
                               str(tmp_path / "served" / head)), "serving_default",
                       {"text": strings([t.encode() for t in CLASSIFIER_TEXTS])})
    embeddings = os.path.join(FIXTURES, "embeddings", "hf")
    encoder_export = _export(embeddings, str(tmp_path / "served" / "encoder"), "--task",
                             "encoder", "--seq-length", "64")
    pair = (CLASSIFIER_TEXTS, CLASSIFIER_TEXTS[::-1])
    calls["encoder"] = (encoder_export, "serving_default",
                        {"text": strings([t.encode() for t in CLASSIFIER_TEXTS])})
    calls["encoder_pair"] = (encoder_export, "text_pair",
                             {"text_a": strings([t.encode() for t in pair[0]]),
                              "text_b": strings([t.encode() for t in pair[1]])})
    (tmp_path / "fresh").mkdir()
    served = call_signatures(calls, tmp_path / "fresh")

    seen = 0
    for name, path in checkpoints.items():
        model = AlbertTokenClassifier.from_preset(path)
        got = model.predict_entities(texts[name], batch_size=7)
        for row, text in enumerate(texts[name]):
            want = _served_entities(served[name], row)
            assert [{**e, "score": 0} for e in got[row]] == [{**w, "score": 0} for w in want]
            np.testing.assert_allclose([e["score"] for e in got[row]],
                                       [w["score"] for w in want], atol=1e-5)
            assert all(e["text"] == text[e["start_char"]:e["end_char"]] for e in got[row])
            seen += len(want)
        if name == "characters":
            assert model.preprocessor.split_characters
    assert seen >= 40

    for head in ("seq_single", "seq_multi"):
        model = AlbertSequenceClassifier.from_preset(os.path.join(TASK_FIXTURES, head, "hf"))
        names = model.task_record.class_names()
        ranked = model.predict_labels(CLASSIFIER_TEXTS, top_k=len(names))
        probabilities = [[dict((r["label"], r["score"]) for r in row)[n] for n in names]
                         for row in ranked]
        np.testing.assert_allclose(probabilities, served[head]["probabilities"], atol=1e-5)
        labels = model.predict_labels(CLASSIFIER_TEXTS)
        if head == "seq_single":
            assert labels == [s.decode() for s in served[head]["label"]]
        else:
            assert labels == [[n for n, on in zip(names, row) if on]
                              for row in served[head]["active"]]

    encoder = AlbertEncoder.from_preset(embeddings, seq_length=64)
    np.testing.assert_allclose(encoder.embed(CLASSIFIER_TEXTS), served["encoder"]["mean_pooled"],
                               atol=1e-5)
    np.testing.assert_allclose(encoder.embed(pair), served["encoder_pair"]["mean_pooled"],
                               atol=1e-5)
    np.testing.assert_allclose(encoder.embed(CLASSIFIER_TEXTS, pooling="pooler"),
                               served["encoder"]["pooled_output"], atol=1e-5)
