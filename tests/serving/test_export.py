"""End to end: `albert-tf export` -> SavedModel -> a fresh process with only TensorFlow and
tensorflow-text -> raw strings in, answers out, equal to the eager Keras model fed by the
Python tokenizer; the TF1 session loader (the C++ server's path), saved_model_cli, warmup.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import unicodedata

import numpy as np
import pytest
import tensorflow as tf

from albert_tf import (
    AlbertConfig,
    AlbertMultipleChoice,
    AlbertPretrainer,
    AlbertSequenceClassifier,
    AlbertSequenceRegressor,
    AlbertSpanExtractor,
    load_checkpoint,
    save_checkpoint,
)
from albert_tf.checkpoint.task_record import TaskRecord
from albert_tf.serving import export, layout, provenance, server_releases, warmup
from albert_tf.serving.signatures.base import GROUP_ROWS, PAD_MULTIPLE
from tests.helpers import tf_serving
from tests.helpers.fresh_process import SAFETY_NET_S, run_fresh

pytestmark = pytest.mark.slow

SEQ = 40
ATOL = 1e-5
LABELS = ["negative", "neutral", "positive"]
ONE_MB = ("w\u00f6rd " * 200_000).encode()[:1 << 20]  # ends inside a character
HARD = [b"", b"Hello, World!", "Caf\u00e9  M\u00fcller \u2014 na\u00efve".encode(),
        "emoji \U0001F600\U0001F44D\U0001F3FD inside".encode(), b"bad \xff\xfe bytes \xc3",
        b"tab\tand\nnewline  ", "\u03a3\u0391\u03a3 \u039f\u0394\u039f\u03a3 \u0130stanbul".encode(),
        b"long " * 12]
MASKED = [b"The [MASK] sat on the [MASK].", b"[MASK]", b"no mask here", b"",
          "caf\u00e9 [MASK] \U0001F600 [MASK] [MASK]".encode(), b"\xff[MASK]\xfe"]
QUESTIONS = [b"Where is the tower?", b"Which city is the largest?", b"What does ALBERT share?"]
CONTEXTS = [b"The Eiffel Tower is in Paris, France. It was built in 1889 for the fair.",
            "Z\u00fcrich  is the largest city in Switzerland; S\u00e3o Paulo is in Brazil.".encode(),
            b"ALBERT uses factorized embeddings and cross-layer parameter sharing (2019)."]
SPAN_QUESTIONS = QUESTIONS + HARD[::-1] + [ONE_MB]  # the clean contexts get real questions
# A span context of several windows at SEQ, ending inside a character (ONE_MB as a context is
# refused past max_windows: test_span_windows.py).
LONG_CONTEXT = ("w\u00f6rd " * 12).encode()[:-2]  # beside a 36-piece question: 1-piece windows
OPTIONS = [[b"a cat", b"a dog", b""], ["\u00fcber \U0001F600".encode(), b"\xff", ONE_MB]]


def _config(vocab_size: int) -> AlbertConfig:
    # A large initializer range spreads the outputs, so a miswired input shows.
    return AlbertConfig(vocab_size=vocab_size, embedding_size=8, hidden_size=12,
                        num_hidden_layers=2, num_attention_heads=3, intermediate_size=20,
                        max_position_embeddings=64, initializer_range=0.2)


def _spread_heads(tok, classifier, span_model) -> None:
    """Re-centres two heads' biases on the test inputs, so that random weights still
    predict every label somewhere and answer some questions but not others."""
    logits = classifier(_ids(tok, HARD)).numpy()  # [B, C]
    bias = classifier.head.dense.bias
    bias.assign(bias.numpy() - logits.mean(axis=0))
    rows = [_squad_features(tok, q, c)[0] for q, c in zip(SPAN_QUESTIONS, CONTEXTS + HARD)]
    features = {k: np.array([r[k][0] for r in rows], np.int32) for k in rows[0]}
    answerable = np.sort(span_model(features)["answerable_logits"].numpy())
    middle = len(answerable) // 2
    bias = span_model.answerable_head.dense.bias
    bias.assign(bias.numpy() - (answerable[middle - 1] + answerable[middle]) / 2)


@pytest.fixture(scope="module")
def exported(tmp_path_factory, spm_model_path):
    """{task: (checkpoint dir, BASE/NAME/1)} for one tiny model of each task."""
    import keras

    from albert_tf.tokenizer.spm import AlbertTokenizer

    keras.utils.set_random_seed(7)
    tok = AlbertTokenizer(spm_model_path)
    config = _config(tok.vocab_size)
    span_model = AlbertSpanExtractor(config, answerability=True)
    models = {"pretraining": AlbertPretrainer(config),
              "classification": AlbertSequenceClassifier(config, len(LABELS)),
              "regression": AlbertSequenceRegressor(config), "span": span_model,
              "multiple_choice": AlbertMultipleChoice(config)}
    _spread_heads(tok, models["classification"], span_model)
    root = tmp_path_factory.mktemp("serving")
    paths = {}
    for task, model in models.items():
        checkpoint = str(root / "checkpoints" / task)
        save_checkpoint(model, checkpoint, spm_model=spm_model_path, seq_length=SEQ,
                        label_names=LABELS if task == "classification" else None)
        output = str(root / "models" / task)
        assert export.main(["--checkpoint", checkpoint, "--output", output]) == 0
        paths[task] = (checkpoint, os.path.join(output, "1"))
    return paths


# ----------------------------------------------------------- fresh process
_FRESH = r"""
import pickle, sys
import tensorflow as tf
import tensorflow_text  # noqa: F401  (the SentencePiece ops)
requests = pickle.load(open(sys.argv[1], "rb"))
results = {}
for path, (calls, replays) in requests.items():
    model = tf.saved_model.load(path)
    for key, inputs in calls.items():  # key: "signature" or "signature#case"
        signature = key.split("#")[0]
        tensors = {k: tf.constant(v, tf.string if v.dtype == object else None)
                   for k, v in inputs.items()}
        out = model.signatures[signature](**tensors)
        results[path, key] = {k: v.numpy() for k, v in out.items()}
        # The same traced function is the root's attribute, as Keras' export made it.
        same = getattr(model, signature)(**tensors)
        results[path, key, "attribute"] = all((same[k].numpy() == v.numpy()).all()
                                              for k, v in out.items())
    for index, (signature, inputs) in enumerate(replays):  # the warmup file's requests
        out = model.signatures[signature](**{k: tf.constant(v) for k, v in inputs.items()})
        results[path, "warmup", index] = {k: v.shape for k, v in out.items()}
results["albert_tf_imported"] = any(m.startswith("albert_tf") for m in sys.modules)
pickle.dump(results, open(sys.argv[2], "wb"))
"""


def _ids(tok, texts_a, texts_b=None):
    rows = [tok.encode_pair(a, None if texts_b is None else texts_b[i], SEQ)
            for i, a in enumerate(texts_a)]
    return {name: np.array([r[name] for r in rows], np.int32) for name in rows[0]}


def _strings(values):
    return np.array(values, dtype=object)


@pytest.fixture(scope="module")
def served(exported, tmp_path_factory, spm_model_path):
    """Outputs of every signature, computed by a fresh process from the exports."""
    from albert_tf.tokenizer.spm import AlbertTokenizer

    tok = AlbertTokenizer(spm_model_path)
    texts = _strings(HARD + [ONE_MB])
    pair = {"text_a": _strings(HARD), "text_b": _strings(HARD[::-1])}
    calls = {
        "pretraining": {"serving_default": {"text": texts}, "text_pair": pair,
                        "serving_default#short": {"text": _strings(HARD[:-1])},
                        "token_ids": _ids(tok, HARD), "fill_mask": {"text": _strings(MASKED)},
                        "fill_mask#none": {"text": _strings([])}},
        "classification": {"serving_default": {"text": texts}, "text_pair": pair,
                           "token_ids": _ids(tok, HARD)},
        "regression": {"serving_default": {"text": _strings(HARD)}, "text_pair": pair},
        "span": {"serving_default": {"question": _strings(SPAN_QUESTIONS),
                                     "context": _strings(CONTEXTS + HARD + [LONG_CONTEXT])},
                 "serving_default#none": {"question": _strings([]), "context": _strings([])}},
        "multiple_choice": {"serving_default": {"context": _strings([CONTEXTS[0], b""]),
                                                "options": _strings(OPTIONS)}},
    }
    folder = tmp_path_factory.mktemp("fresh")
    replays = {task: [(r.model_spec.signature_name, tf_serving.inputs_from_predict_request(r))
                      for r in warmup.read_warmup(exported[task][1])] for task in calls}
    outputs = run_fresh(_FRESH, {exported[task][1]: (c, replays[task])
                                 for task, c in calls.items()}, folder)
    served = {task: ({sig: outputs[exported[task][1], sig] for sig in c}, c, tok)
              for task, c in calls.items()}
    served["warmup"] = {task: [(r, outputs[exported[task][1], "warmup", i])
                               for i, r in enumerate(replays[task])] for task in calls}
    served["attribute"] = {(task, sig): outputs[exported[task][1], sig, "attribute"]
                           for task, c in calls.items() for sig in c}
    return served


def test_each_signature_is_also_the_roots_function_and_answers_alike(served):
    """`loaded.<signature>(...)`, as Keras' export offers it, answers as the signature does."""
    assert len(served["attribute"]) >= 13 and all(served["attribute"].values()), served["attribute"]


def _close(got, want):
    np.testing.assert_allclose(got, want, atol=ATOL, rtol=0)


def test_encoder_features_equal_the_eager_model(exported, served):
    outputs, calls, tok = served["pretraining"]
    encoder = load_checkpoint(exported["pretraining"][0]).encoder
    inputs = {"serving_default": _ids(tok, HARD + [ONE_MB]),
              "text_pair": _ids(tok, HARD, HARD[::-1]), "token_ids": calls["token_ids"],
              "serving_default#short": _ids(tok, HARD[:-1])}
    assert outputs["serving_default#short"]["input_mask"].shape[1] < SEQ  # short ones are cut
    for signature, features in inputs.items():
        got, want = outputs[signature], encoder(features)
        length = got["input_mask"].shape[1]
        longest = features["input_mask"].sum(1).max()
        # dynamic padding, rounded up
        assert length == min(SEQ, -(-longest // PAD_MULTIPLE) * PAD_MULTIPLE)
        np.testing.assert_array_equal(got["input_mask"], features["input_mask"][:, :length])
        assert features["input_mask"][:, length:].sum() == 0
        _close(got["pooled_output"], want["pooled_output"])
        _close(got["sequence_output"], want["sequence_output"][:, :length])
        assert got["sequence_output"].dtype == np.float32


def test_fill_mask_equals_the_eager_masked_lm(exported, served):
    outputs, _, tok = served["pretraining"]
    got = outputs["fill_mask"]
    model = load_checkpoint(exported["pretraining"][0])
    for row, text in enumerate(MASKED):
        parts = text.decode("utf-8", "replace").split("[MASK]")
        ids = [i for part in parts[:-1] for i in tok.encode(part) + [tok.mask_id]]
        features = tok.pack(ids + tok.encode(parts[-1]), None, SEQ)
        positions = [p for p, i in enumerate(features["input_word_ids"]) if i == tok.mask_id]
        count = len(positions)
        assert got["mask_positions"][row, :count].tolist() == positions
        assert np.all(got["mask_positions"][row, count:] == -1)
        assert np.all(got["top_k_ids"][row, count:] == -1)
        if not count:
            continue
        inputs = {k: np.array([v], np.int32) for k, v in features.items()}
        logits = model({**inputs, "masked_lm_positions": np.array([positions], np.int32)})
        probs = tf.nn.softmax(logits["mlm_logits"][0]).numpy()  # [P, V]
        top = np.argsort(-probs, axis=-1)[:, :5]
        np.testing.assert_array_equal(got["top_k_ids"][row, :count], top)
        _close(got["top_k_scores"][row, :count], np.take_along_axis(probs, top, -1))
        assert [[t.decode() for t in r] for r in got["top_k_tokens"][row, :count]] == \
            [[tok.id_to_piece(int(i)) for i in r] for r in top]
    assert got["mask_positions"].shape[1] == 3  # the most masks in one text
    empty = outputs["fill_mask#none"]  # a batch of no text at all
    assert empty["top_k_ids"].shape == (0, 1, 5) and empty["mask_positions"].shape == (0, 1)


def test_classifier_returns_its_trained_label_names(exported, served):
    outputs, calls, tok = served["classification"]
    # More texts than one length group holds: the groups' answers come back in order.
    assert len(calls["serving_default"]["text"]) > GROUP_ROWS
    model = load_checkpoint(exported["classification"][0])
    inputs = {"serving_default": _ids(tok, HARD + [ONE_MB]),
              "text_pair": _ids(tok, HARD, HARD[::-1]), "token_ids": calls["token_ids"]}
    for signature, features in inputs.items():
        got = outputs[signature]
        probs = tf.nn.softmax(model(features)).numpy()
        _close(got["probabilities"], probs)
        np.testing.assert_array_equal(got["label_id"], probs.argmax(-1))
        assert [label.decode() for label in got["label"]] == [LABELS[i] for i in probs.argmax(-1)]
    assert len(set(outputs["serving_default"]["label_id"].tolist())) > 1  # not constant
    # The export says what it is: its provenance record names the labels it answers with.
    checkpoint, path = exported["classification"]
    with open(os.path.join(path, provenance.PROVENANCE_FILE), encoding="utf-8") as f:
        record = json.load(f)
    assert record["label_names"] == list(LABELS) == record["task_record"]["label_names"]
    assert record["task"] == "classification" and record["tokenizer"]["kind"] == "sentencepiece"


def test_regressor_scores_equal_the_eager_model(exported, served):
    outputs, _, tok = served["regression"]
    model = load_checkpoint(exported["regression"][0])
    _close(outputs["serving_default"]["score"], model(_ids(tok, HARD)))
    _close(outputs["text_pair"]["score"], model(_ids(tok, HARD, HARD[::-1])))


def test_multiple_choice_equals_the_race_packing(exported, served):
    from albert_tf.training.finetune.race import RaceExample, encode_race

    outputs, calls, tok = served["multiple_choice"]
    model = load_checkpoint(exported["multiple_choice"][0])
    got = outputs["serving_default"]
    for row, (context, options) in enumerate(zip(calls["serving_default"]["context"],
                                                 OPTIONS)):
        # RACE packs "question option"; an empty question leaves the option alone.
        example = RaceExample("q", "high", context.decode("utf-8", "replace"), "",
                              [o.decode("utf-8", "replace") for o in options], 0)
        # Serving keeps at most seq_length - 3 option tokens (fine-tuning's default of
        # 128 assumes seq_length 512).
        features = encode_race(tok, [example], SEQ, max_qa_length=SEQ - 3).features
        features = {k: np.asarray(v[0])[None] for k, v in features.items()}
        probs = tf.nn.softmax(model(features)).numpy()[0]
        _close(got["probabilities"][row], probs)
        assert got["choice"][row] == probs.argmax()


def _ignorable(char: str, trailing: bool = False) -> bool:
    category = unicodedata.category(char)
    if trailing and category.startswith("M"):
        return False
    return char.isspace() or char == "\ufffd" or category[0] in "ZC" or category[0] == "M"


def _squad_features(tok, question: bytes, context: bytes | str):
    """`[CLS] question [SEP] context [SEP]` as SQuAD fine-tuning packs its first window."""
    from albert_tf.training.finetune.squad_data import align_context

    if isinstance(context, bytes):
        context = context.decode("utf-8", "replace")
    pieces = align_context(tok, context)
    query = tok.encode(question)[:min(64, SEQ - 4)]
    ids = pieces.ids[:SEQ - 3 - len(query)]
    first = len(query) + 2
    words = [tok.cls_id, *query, tok.sep_id, *ids, tok.sep_id]
    features = {"input_word_ids": [words + [tok.pad_id] * (SEQ - len(words))],
                "input_mask": [[1] * len(words) + [0] * (SEQ - len(words))],
                "input_type_ids": [[0] * first + [1] * (len(ids) + 1) + [0] * (SEQ - len(words))]}
    return features, pieces, ids, first


def _windows(tok, question: bytes, context: str) -> int:
    from albert_tf.span_decoding import align_context, question_windows

    record = TaskRecord.create("span", seq_length=SEQ)
    return len(question_windows(tok, question, align_context(tok, context), SEQ,
                                record.doc_stride, record.max_query_length)[1])


def _expected_answer(tok, model, question: bytes, context: str):
    """NumPy re-derivation: SQuAD packing, best visible span, fine-tuning's alignment."""
    features, pieces, ids, first = _squad_features(tok, question, context)
    out = {k: np.asarray(v)[0] for k, v in model({k: np.array(v, np.int32)
                                                  for k, v in features.items()}).items()}
    spans = [(int(s), int(e)) for s, e in zip(pieces.starts, pieces.ends)]
    visible = [any(not _ignorable(c) for c in context[s:e]) for s, e in spans]
    no_answer = 1 / (1 + np.exp(out["answerable_logits"]))
    best = max(((out["start_logits"][first + i] + out["end_logits"][first + j], i, j)
                for i in range(len(ids)) for j in range(i, min(len(ids), i + 30))
                if visible[i] and visible[j]), default=None)
    if best is None:
        return None, no_answer, -1, -1
    start, end = spans[best[1]][0], spans[best[2]][1]
    while start < end and _ignorable(context[start]):
        start += 1
    while end > start and _ignorable(context[end - 1], trailing=True):
        end -= 1
    return best[0], no_answer, start, end


def test_span_answers_and_offsets_equal_the_python_reference(exported, served):
    outputs, calls, tok = served["span"]
    model = load_checkpoint(exported["span"][0])
    got = outputs["serving_default"]
    inputs = calls["serving_default"]
    answered = 0
    for row, (question, raw) in enumerate(zip(inputs["question"], inputs["context"])):
        context = raw.decode("utf-8", "replace")
        start, end = int(got["start_char"][row]), int(got["end_char"][row])
        answer = got["answer"][row].decode()
        if bool(got["has_answer"][row]):
            answered += 1
            assert answer and context[start:end] == answer
        else:
            assert (answer, start, end) == ("", -1, -1)
        if _windows(tok, question, context) > 1:  # windowed: test_span_windows.py
            continue
        score, no_answer, want_start, want_end = _expected_answer(tok, model, question, context)
        _close(got["no_answer_probability"][row], no_answer)
        if score is None:  # nothing to answer from
            assert not got["has_answer"][row] and got["score"][row] == 0
        elif raw in CONTEXTS:
            # align_context maps pieces of words it cannot spell (final sigma, dropped
            # characters) to the whole word; the clean contexts have none.
            _close(got["score"][row], score)
            assert bool(got["has_answer"][row]) == (no_answer <= 0.5)
            if no_answer <= 0.5:
                assert (start, end, answer) == (want_start, want_end,
                                                context[want_start:want_end])
    assert 0 < answered < len(inputs["context"])  # both SQuAD 2.0 outcomes are exercised
    assert all(v.shape == (0,) for v in outputs["serving_default#none"].values())


# ------------------------------------------------- TF1 loader, CLI, warmup
_SESSION = r"""
import sys, numpy as np, tensorflow as tf
import tensorflow_text  # noqa: F401
tf.compat.v1.disable_eager_execution()
with tf.compat.v1.Session(graph=tf.Graph()) as sess:
    meta = tf.compat.v1.saved_model.loader.load(sess, ["serve"], sys.argv[1])
    sig = meta.signature_def["serving_default"]
    feed = {sig.inputs["text"].name: np.array([b"Hello, World!", b"\xff", b""], object)}
    fetch = {k: v.name for k, v in sig.outputs.items()}
    print(repr({k: v.tolist() for k, v in sess.run(fetch, feed).items()}))
"""


_CLI = (r"import sys, tensorflow_text; from tensorflow.python.tools import saved_model_cli;"
        r"sys.argv = ['saved_model_cli'] + sys.argv[1:]; saved_model_cli.main()")
TF1_TEXTS = [b"Hello, World!", b"\xff", b""]


@pytest.fixture(scope="module")
def tool_runs(exported, tmp_path_factory):
    """The TF1 session loader and saved_model_cli (show, run), each in its own process,
    run side by side. saved_model_cli loads no op libraries itself, so it runs with
    tensorflow_text imported first."""
    outdir = tmp_path_factory.mktemp("cli")
    commands = {
        "session": [_SESSION, exported["classification"][1]],
        "show": [_CLI, "show", "--dir", exported["span"][1], "--all"],
        "run": [_CLI, "run", "--dir", exported["regression"][1], "--tag_set", "serve",
                "--signature_def", "serving_default", "--input_exprs",
                "text=['Hello, World!', '']", "--outdir", str(outdir)],
    }
    running = {name: subprocess.Popen([sys.executable, "-c", *argv], stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True)
               for name, argv in commands.items()}
    results = {}
    for name, process in running.items():
        stdout, stderr = process.communicate(timeout=SAFETY_NET_S)
        assert process.returncode == 0, (name, stderr[-3000:])
        results[name] = stdout
    return results, outdir


def test_tf1_session_loader_runs_the_text_signature(exported, tool_runs, spm_model_path):
    from albert_tf.tokenizer.spm import AlbertTokenizer

    got = eval(tool_runs[0]["session"].strip().splitlines()[-1])  # noqa: S307 (our repr)
    model = load_checkpoint(exported["classification"][0])
    probs = tf.nn.softmax(model(_ids(AlbertTokenizer(spm_model_path), TF1_TEXTS)))
    _close(np.array(got["probabilities"]), probs.numpy())
    assert got["label"] == [LABELS[i].encode() for i in probs.numpy().argmax(-1)]


def test_saved_model_cli_shows_and_runs_the_signatures(exported, tool_runs, spm_model_path):
    from albert_tf.tokenizer.spm import AlbertTokenizer

    text = tool_runs[0]["show"]
    for expected in ("signature_def['serving_default']", "signature_def['token_ids']",
                     "inputs['question'] tensor_info:", "inputs['context'] tensor_info:",
                     "outputs['answer'] tensor_info:", "outputs['start_char'] tensor_info:",
                     "outputs['start_logits'] tensor_info:", "dtype: DT_STRING", "dtype: DT_INT32",
                     "dtype: DT_BOOL", "shape: (-1)", "shape: (-1, -1)"):
        assert expected in text, expected
    model = load_checkpoint(exported["regression"][0])
    want = model(_ids(AlbertTokenizer(spm_model_path), ["Hello, World!", ""]))
    _close(np.load(tool_runs[1] / "score.npy"), want)


def _signature_names(path: str) -> set[str]:
    from tensorflow.core.protobuf import saved_model_pb2

    with open(os.path.join(path, "saved_model.pb"), "rb") as f:
        graph = saved_model_pb2.SavedModel.FromString(f.read()).meta_graphs[0]
    return {name for name in graph.signature_def if not name.startswith("__")}


def test_warmup_requests_parse_and_run(exported, served):
    for task, replays in served["warmup"].items():
        records = warmup.read_warmup(exported[task][1])
        assert all(r.model_spec.name == task for r in records)
        signatures = {r.model_spec.signature_name for r in records}
        assert signatures == _signature_names(exported[task][1])  # every signature warms up
        assert len(replays) == len(records) >= len(signatures) >= 2
        for (signature, inputs), shapes in replays:
            batch = next(iter(inputs.values())).shape[0]
            assert shapes and all(shape[0] == batch for shape in shapes.values()), signature


def test_export_lays_out_versions_and_refuses_bad_arguments(exported, tmp_path, capsys,
                                                            spm_model_path):
    from albert_tf.tokenizer.spm import AlbertTokenizer

    checkpoint, first = exported["regression"]
    base = os.path.dirname(first)
    # The first export left TF Serving's batching parameters beside the versions; a file
    # the user edited is kept by later exports.
    batching = os.path.join(base, layout.BATCHING_FILE)
    with open(batching, encoding="utf-8") as f:
        fields = {line.split()[0].rstrip(":") for line in f if line.strip()
                  and not line.startswith("#")}
    # BatchingParameters' fields (tensorflow_serving/servables/tensorflow/
    # session_bundle_config.proto); no allowed_batch_sizes: no batch is padded with rows.
    assert fields == {"max_batch_size", "batch_timeout_micros", "max_enqueued_batches",
                      "num_batch_threads", "pad_variable_length_inputs"}
    assert "pad_variable_length_inputs: false" in layout.BATCHING_PARAMETERS
    with open(batching, "w", encoding="utf-8") as f:
        f.write("max_batch_size { value: 8 }\n")
    # --task encoder serves any checkpoint's encoder features; --token-ids-only leaves
    # out every tensorflow-text op; a later export of the same name is the next version.
    assert export.main(["--checkpoint", checkpoint, "--output", base, "--task", "encoder",
                        "--token-ids-only"]) == 0
    # next free version, nothing else left
    assert sorted(os.listdir(base)) == ["1", "2", layout.BATCHING_FILE]
    with open(batching, encoding="utf-8") as f:
        assert f.read() == "max_batch_size { value: 8 }\n"
    second = os.path.join(base, "2")
    assert os.path.isfile(os.path.join(second, "assets.extra", "tf_serving_warmup_requests"))
    assert _signature_names(second) == {"serving_default", "token_ids"}
    assert export.custom_ops(second) == []
    assert {"SentencepieceOp", "NormalizeUTF8"} <= set(export.custom_ops(first))
    # Its provenance: the source, a hash of the weights as loaded, the versions, the custom
    # ops; no round-robin trim op (trimmed with core ops), so TF Serving 2.12 links them all.
    with open(os.path.join(first, provenance.PROVENANCE_FILE), encoding="utf-8") as f:
        record = json.load(f)
    assert record["source_checkpoint"] == os.path.abspath(checkpoint)
    assert record["weights_sha256"] == provenance.weights_sha256(load_checkpoint(checkpoint))
    assert record["custom_ops"] == export.custom_ops(first)
    assert not any("RoundRobin" in op for op in record["custom_ops"])
    assert record["oldest_tensorflow_serving"] == "2.12.0"
    assert record["versions"]["tensorflow"] == tf.__version__
    assert record["label_names"] is None and record["task"] == "regression"
    with open(os.path.join(second, provenance.PROVENANCE_FILE), encoding="utf-8") as f:
        assert json.load(f)["oldest_tensorflow_serving"] == server_releases.SERVING_RELEASES[0][0]
    features = _ids(AlbertTokenizer(spm_model_path), HARD)
    got = tf.saved_model.load(second).signatures["serving_default"](
        **{k: tf.constant(v) for k, v in features.items()})
    _close(got["pooled_output"], load_checkpoint(checkpoint).encoder(features)["pooled_output"])
    cases = [(["--version", "1"], "already exists"),
             (["--seq-length", "65"], "to max_position_embeddings=64 (--seq-length"),
             (["--task", "span"], "holds a regression model"),
             (["--spm-model", str(tmp_path / "none.model")], "does not exist")]
    for extra, message in cases:
        assert export.main(["--checkpoint", checkpoint, "--output", base, *extra]) == 2
        err = capsys.readouterr().err.strip()
        assert message in err and len(err.splitlines()) == 1, err
    assert sorted(os.listdir(base)) == ["1", "2", layout.BATCHING_FILE]
    assert export.main(["--checkpoint", str(tmp_path), "--output", base]) == 2


def test_bfloat16_export_serves_the_bfloat16_model(exported, tmp_path, spm_model_path):
    """`--precision bfloat16`: the variables and matmuls in bfloat16, inputs and outputs as
    the float32 export's; it serves what the same model cast to bfloat16 computes eagerly,
    and stays within bfloat16's rounding of the float32 export."""
    from albert_tf.tokenizer.spm import AlbertTokenizer

    checkpoint, float_path = exported["classification"]
    base = str(tmp_path / "bf16")
    path = export.export(checkpoint, base, precision="bfloat16")
    served = tf.saved_model.load(path)
    features = _ids(AlbertTokenizer(spm_model_path), HARD)
    got = served.signatures["token_ids"](**{k: tf.constant(v) for k, v in features.items()})
    assert got["probabilities"].dtype == tf.float32 and got["label"].dtype == tf.string
    model = load_checkpoint(checkpoint)
    cast = export.served_model(model, "bfloat16")
    assert {w.dtype for w in cast.weights} == {"bfloat16"}
    want = tf.nn.softmax(cast(features)).numpy()
    np.testing.assert_allclose(got["probabilities"], want, atol=2e-3, rtol=0)
    full = tf.nn.softmax(model(features)).numpy()
    np.testing.assert_allclose(got["probabilities"], full, atol=0.05, rtol=0)
    # The text signature's probabilities are the token_ids signature's on the same texts.
    text = served.signatures["serving_default"](text=tf.constant(HARD))
    np.testing.assert_allclose(text["probabilities"], got["probabilities"], atol=1e-6, rtol=0)
