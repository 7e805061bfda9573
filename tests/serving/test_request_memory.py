"""One request's memory: served NER and WordPiece span QA on long CJK texts, from SavedModels
loaded in a fresh process, grow its peak (ru_maxrss) by a bound, not with the square of the
text (a prefix or a copy of the whole text per piece took 2.2 GB at 20,000 ideographs)."""

from __future__ import annotations

import pytest

from albert_tf import AlbertConfig, AlbertTokenClassifier
from albert_tf.checkpoint import task_record_of
from albert_tf.checkpoint.task_record import TaskRecord
from albert_tf.serving import export
from albert_tf.serving.signatures.base import strings
from albert_tf.tokenizer.preprocessor import AlbertPreprocessor
from tests.helpers.fresh_process import run_fresh
from tests.helpers.wordpiece import WORDPIECE_VOCAB
from tests.serving import test_span_windows

SEQ = test_span_windows.SEQ
LONG = 20_000  # ideographs: one piece each
BOUND_MB = 300
QUESTION = "who?"

# Loads each SavedModel, warms it with a short request, then sends the requests in order
# and records how far each raised the process's peak memory.
MEASURE = r"""
import pickle, resource, sys
import tensorflow as tf
import tensorflow_text  # noqa: F401
calls = pickle.load(open(sys.argv[1], "rb"))
peak = lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # MB (Linux: KB)
results, models = {}, {}
for key, (path, warm, inputs) in calls.items():
    if path not in models:
        models[path] = tf.saved_model.load(path).signatures["serving_default"]
        models[path](**{k: tf.constant(v) for k, v in warm.items()})
for key, (path, warm, inputs) in calls.items():
    before = peak()
    try:
        out = models[path](**{k: tf.constant(v) for k, v in inputs.items()})
        result = {k: v.numpy() for k, v in out.items()}
    except tf.errors.InvalidArgumentError as error:
        result = {"error": error.message}
    results[key] = (result, peak() - before)
results["albert_tf_imported"] = any(m.startswith("albert_tf") for m in sys.modules)
pickle.dump(results, open(sys.argv[2], "wb"))
"""


def _config(pre) -> AlbertConfig:
    return AlbertConfig(vocab_size=pre.tokenizer.vocab_size, embedding_size=8, hidden_size=12,
                        num_hidden_layers=1, num_attention_heads=3, intermediate_size=20,
                        max_position_embeddings=SEQ)


@pytest.mark.slow
def test_long_cjk_requests_cost_a_bounded_peak_memory(tmp_path):
    import keras

    keras.utils.set_random_seed(5)
    pre = AlbertPreprocessor(WORDPIECE_VOCAB, SEQ)
    ner = AlbertTokenClassifier(_config(pre), 3)
    ner_path = str(tmp_path / "ner" / "1")
    export.save_module(export.build_module(ner, pre, record=task_record_of(
        ner, label_names=["O", "B-PER", "I-PER"])), ner_path, "token_classification")
    record = TaskRecord.create("span", seq_length=SEQ, **test_span_windows.SETTINGS)
    span = test_span_windows._model(pre, False)
    span_path = str(tmp_path / "span" / "1")
    export.save_module(export.build_module(span, pre, record=record), span_path, "span")
    # The most pieces max_windows windows hold (span_windows.check_words' capacity).
    room = SEQ - 3 - len(pre.tokenizer.encode(QUESTION))
    capacity = room + (record.max_windows - 1) * min(room, record.doc_stride)
    ask = lambda n: {"question": strings([QUESTION.encode()]),  # noqa: E731
                     "context": strings([("王" * n).encode()])}
    warm_span = ask(10)
    # A process per model: a peak already reached would hide a later request's.
    got = {}
    for name, calls in (("ner", {"ner": (ner_path, {"text": strings([b"warm"])},
                                         {"text": strings([("王" * LONG).encode()])})}),
                        ("span", {"largest": (span_path, warm_span, ask(capacity)),
                                  "beyond": (span_path, warm_span, ask(capacity + 1)),
                                  "long": (span_path, warm_span, ask(LONG))})):
        (tmp_path / name / "fresh").mkdir()
        got.update(run_fresh(MEASURE, calls, tmp_path / name / "fresh"))
    ner_out = got["ner"][0]
    assert (ner_out["label_id"] >= 0).sum() == LONG  # every ideograph labelled
    largest = got["largest"][0]
    assert "error" not in largest, largest  # answered: capacity pieces fit the windows
    windows = f"more than max_windows={record.max_windows}"
    assert windows in got["beyond"][0]["error"] and windows in got["long"][0]["error"]
    rises = {key: round(got[key][1]) for key in ("ner", "largest", "beyond", "long")}
    assert max(rises.values()) < BOUND_MB, rises
