"""Malformed requests and bad `predict` / `export` arguments on the serving side.

Every exported signature checks its inputs in the graph before any tokenization:
inputs that disagree on the batch size (which aborted the whole process in
tensorflow-text's packing, or silently answered part of the batch) or have the
wrong rank (a [B, 2] string tensor was read as its first column) are refused with
an InvalidArgumentError that names the signature, the inputs and their sizes. The
exports of every kind are called in ONE fresh process (an abort must not take the
test runner down), through `tf.saved_model.load(dir).signatures[name]`, with the
tensors given directly and as TF Serving decodes a columnar REST body; after each
refusal the same process still answers well-formed requests.

The CLI cases check the exit status, that the one line names what and where, and
that nothing was lost (inputs and earlier outputs unchanged, no hidden temporary
left), and that the refusal comes before the model is loaded.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import numpy as np
import pytest

from albert_tf import (
    AlbertConfig,
    AlbertMultipleChoice,
    AlbertPretrainer,
    AlbertSequenceClassifier,
    AlbertSequenceRegressor,
    AlbertSpanExtractor,
    AlbertTokenClassifier,
)
from albert_tf.checkpoint import task_record_of
from albert_tf.checkpoint.opened import OpenedCheckpoint
from albert_tf.serving import export
from albert_tf.serving import requests as rq
from albert_tf.serving.client import backends
from albert_tf.tokenizer import AlbertPreprocessor
from tests.helpers import tf_serving
from tests.helpers.cli import CLI
from tests.helpers.fresh_process import SAFETY_NET_S, run_fresh
from tests.helpers.paths import TASK_FIXTURES
from tests.test_bad_inputs import assert_one_line_error, hidden_temporaries, run_cli, snapshot

SEQ = 32
LABELS = ["neg", "neu", "pos"]
HF_CLASSIFIER = os.path.join(TASK_FIXTURES, "seq_single", "hf")
SPM = os.path.join(HF_CLASSIFIER, "spiece.model")


def _strings(values) -> np.ndarray:
    return np.array(values, dtype=object)


def _texts(n: int) -> np.ndarray:
    return _strings([f"text number {i}, with words.".encode() for i in range(n)])


def _ids(*shape: int) -> np.ndarray:
    return np.ones(shape, np.int32)


def _rest(body: dict, names) -> dict[str, np.ndarray]:
    """The tensors TF Serving makes of a REST body (`tf_serving.parse_rest_body`)."""
    return tf_serving.parse_rest_body(body, {name: object for name in names})[1]


# ------------------------------------------------------ requests, by signature
# (case, signature, inputs, the refusal's message or the rows of a valid answer)
def _text_cases() -> list:
    return [
        ("text_rank2", "serving_default", {"text": _strings([[b"a", b"b"], [b"c", b"d"]])},
         "serving_default: text has rank 2 but the signature takes rank 1"),
        ("text_rank0", "serving_default", {"text": _strings(b"one text")},
         "serving_default: text has rank 0 but the signature takes rank 1"),
        ("rest_text_rank2", "serving_default",
         _rest({"inputs": {"text": [["a", "b"]]}}, ["text"]),
         "serving_default: text has rank 2 but the signature takes rank 1"),
        ("ids_shape", "token_ids", {"input_word_ids": _ids(2, 7), "input_mask": _ids(2, 5),
                                    "input_type_ids": _ids(2, 7)},
         "token_ids: input_word_ids has shape [2 7] but input_mask has shape [2 5]"),
        ("ids_rows", "token_ids", {"input_word_ids": _ids(3, 7), "input_mask": _ids(3, 7),
                                   "input_type_ids": _ids(1, 7)},
         "token_ids: input_word_ids has shape [3 7] but input_type_ids has shape [1 7]"),
        ("ok_text", "serving_default", {"text": _texts(2)}, 2),
        ("ok_ids", "token_ids", {"input_word_ids": _ids(3, 7), "input_mask": _ids(3, 7),
                                 "input_type_ids": _ids(3, 7)}, 3),
    ]


def _pair_cases() -> list:
    return _text_cases() + [
        ("pair_3_1", "text_pair", {"text_a": _texts(3), "text_b": _texts(1)},
         "text_pair: text_a has 3 rows but text_b has 1"),
        ("pair_1_3", "text_pair", {"text_a": _texts(1), "text_b": _texts(3)},
         "text_pair: text_a has 1 row but text_b has 3"),
        ("pair_rank2", "text_pair", {"text_a": _texts(2), "text_b": _strings([[b"x"], [b"y"]])},
         "text_pair: text_b has rank 2 but the signature takes rank 1"),
        ("rest_pair_3_1", "text_pair",
         _rest({"signature_name": "text_pair", "inputs": {"text_a": ["a", "b", "c"],
                                                          "text_b": ["x"]}}, ["text_a", "text_b"]),
         "text_pair: text_a has 3 rows but text_b has 1"),
        ("ok_pair", "text_pair", {"text_a": _texts(3), "text_b": _texts(3)}, 3),
    ]


def _span_cases() -> list:
    names = ["question", "context"]
    return [
        ("qc_3_1", "serving_default", {"question": _texts(3), "context": _texts(1)},
         "serving_default: question has 3 rows but context has 1"),
        ("qc_1_3", "serving_default", {"question": _texts(1), "context": _texts(3)},
         "serving_default: question has 1 row but context has 3"),
        ("context_rank2", "serving_default",
         {"question": _texts(1), "context": _strings([[b"a", b"b"]])},
         "serving_default: context has rank 2 but the signature takes rank 1"),
        ("rest_qc_3_1", "serving_default",
         _rest({"inputs": {"question": ["q1", "q2", "q3"], "context": ["c"]}}, names),
         "serving_default: question has 3 rows but context has 1"),
        ("ids_shape", "token_ids", {"input_word_ids": _ids(2, 9), "input_mask": _ids(2, 9),
                                    "input_type_ids": _ids(2, 8)},
         "token_ids: input_word_ids has shape [2 9] but input_type_ids has shape [2 8]"),
        ("ok_qc", "serving_default", {"question": _texts(2), "context": _texts(2)}, 2),
        ("ok_ids", "token_ids", {"input_word_ids": _ids(2, 9), "input_mask": _ids(2, 9),
                                 "input_type_ids": _ids(2, 9)}, 2),
    ]


def _choice_cases() -> list:
    options = _strings([[b"a cat", b"a dog"]])
    return [
        ("co_3_1", "serving_default", {"context": _texts(3), "options": options},
         "serving_default: context has 3 rows but options has 1"),
        ("co_1_3", "serving_default",
         {"context": _texts(1), "options": _strings([[b"a", b"b"]] * 3)},
         "serving_default: context has 1 row but options has 3"),
        ("options_rank1", "serving_default", {"context": _texts(3), "options": _texts(3)},
         "serving_default: options has rank 1 but the signature takes rank 2"),
        ("options_none", "serving_default",
         {"context": _texts(2), "options": np.zeros([2, 0], object)},
         "serving_default: options has 0 columns but needs at least 1"),
        ("rest_co_3_1", "serving_default",
         _rest({"inputs": {"context": ["a", "b", "c"], "options": [["x", "y"]]}},
               ["context", "options"]),
         "serving_default: context has 3 rows but options has 1"),
        ("ids_shape", "token_ids", {"input_word_ids": _ids(2, 3, 7),
                                    "input_mask": _ids(2, 2, 7), "input_type_ids": _ids(2, 3, 7)},
         "token_ids: input_word_ids has shape [2 3 7] but input_mask has shape [2 2 7]"),
        ("ok_choice", "serving_default", {"context": _texts(1), "options": options}, 1),
        ("ok_ids", "token_ids", {name: _ids(2, 3, 7) for name in
                                 ("input_word_ids", "input_mask", "input_type_ids")}, 2),
    ]


CASES = {
    "pretrained": _pair_cases() + [
        ("fill_mask_rank2", "fill_mask", {"text": _strings([[b"[MASK]"]])},
         "fill_mask: text has rank 2 but the signature takes rank 1"),
        ("ok_fill_mask", "fill_mask", {"text": _strings([b"a [MASK]", b"b"])}, 2)],
    "classification": _pair_cases(),
    "regression": _pair_cases(),
    "token_classification": _text_cases(),
    "span": _span_cases(),
    "span_beam": _span_cases(),
    "multiple_choice": _choice_cases(),
}

_FRESH = r"""
import pickle, sys
import tensorflow as tf
import tensorflow_text  # noqa: F401  (the SentencePiece ops)
calls = pickle.load(open(sys.argv[1], "rb"))
results, models = {}, {}
for key, (path, signature, inputs) in calls.items():
    print("calling", key, file=sys.stderr, flush=True)  # an abort shows its case
    if path not in models:
        models[path] = tf.saved_model.load(path)
    tensors = {k: tf.constant(v, tf.string if v.dtype == object else None)
               for k, v in inputs.items()}
    try:
        out = models[path].signatures[signature](**tensors)
        results[key] = ("ok", sorted({v.shape[0] for v in out.values()}))
    except Exception as e:  # noqa: BLE001 - which error it is, is the result
        results[key] = (type(e).__name__, str(getattr(e, "message", e)))
results["albert_tf_imported"] = any(m.startswith("albert_tf") for m in sys.modules)
pickle.dump(results, open(sys.argv[2], "wb"))
"""


@pytest.fixture(scope="module")
def exports(tmp_path_factory) -> dict[str, str]:
    """{kind: SavedModel directory}: one tiny export of every kind (span_beam: the
    original run_squad_v2 fixture through `export`)."""
    import keras

    keras.utils.set_random_seed(3)
    pre = AlbertPreprocessor(SPM, SEQ)
    config = AlbertConfig(vocab_size=pre.tokenizer.vocab_size, embedding_size=8, hidden_size=12,
                          num_hidden_layers=1, num_attention_heads=3, intermediate_size=20,
                          max_position_embeddings=SEQ)
    models = {"pretrained": AlbertPretrainer(config),
              "classification": AlbertSequenceClassifier(config, len(LABELS)),
              "regression": AlbertSequenceRegressor(config),
              "token_classification": AlbertTokenClassifier(config, len(LABELS)),
              "span": AlbertSpanExtractor(config, answerability=True),
              "multiple_choice": AlbertMultipleChoice(config)}
    root = tmp_path_factory.mktemp("bad_requests")
    paths = {}
    for kind, model in models.items():
        labels = LABELS if kind in ("classification", "token_classification") else None
        record = task_record_of(model, label_names=labels)
        paths[kind] = str(root / kind / "1")
        export.save_module(export.build_module(model, pre, record=record), paths[kind], kind)
    paths["span_beam"] = export.export(os.path.join(TASK_FIXTURES, "squad_v2_beam", "tf1"),
                                       str(root / "span_beam"))
    return paths


@pytest.fixture(scope="module")
def answers(exports, tmp_path_factory) -> dict:
    """{(kind, case): (outcome, detail)} of every case, from one fresh process."""
    calls = {(kind, case): (exports[kind], signature, inputs)
             for kind, cases in CASES.items() for case, signature, inputs, _ in cases}
    return run_fresh(_FRESH, calls, tmp_path_factory.mktemp("fresh"))


@pytest.mark.slow
@pytest.mark.parametrize("kind", list(CASES))
def test_every_signature_refuses_inputs_that_do_not_fit(answers, kind):
    for case, _signature, _, expected in CASES[kind]:
        outcome, detail = answers[kind, case]
        if isinstance(expected, int):  # well-formed: answered in full by the same process
            assert (outcome, detail) == ("ok", [expected]), (kind, case, detail)
            continue
        assert outcome == "InvalidArgumentError", (kind, case, outcome, detail)
        assert f"assertion failed: [{expected}]" in detail, (kind, case, detail)
        assert rq.refusal_line(detail) == expected  # the client's one line


@pytest.mark.slow
def test_predict_saved_model_names_a_rank_2_row_in_a_fresh_process(exports, tmp_path):
    """`albert-tf predict --saved-model` in its own process (registering the
    tensorflow-text ops itself): JSON Lines whose text is a list reach the signature as
    a [B, 2] tensor, and the refusal is one line naming the file and rows."""
    source = tmp_path / "rows.jsonl"
    source.write_text('{"text": ["a", "b"]}\n{"text": ["c", "d"]}\n', encoding="utf-8")
    out = tmp_path / "out.jsonl"
    before = snapshot(source)
    proc = subprocess.run(
        [*CLI, "predict", "--saved-model",
         exports["classification"], "--input", str(source), "--output", str(out)],
        capture_output=True, text=True, timeout=SAFETY_NET_S, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
    line = proc.stderr.strip().splitlines()[-1]
    assert_one_line_error(proc.returncode, line, f"{source}: rows 1-2",
                          "serving_default: text", "rank")
    assert snapshot(source) == before and not out.exists() and hidden_temporaries(tmp_path) == []


# ------------------------------------------------------------------ predict
@pytest.fixture
def fake_saved_model(tmp_path, monkeypatch):
    """A directory that looks like a SavedModel; loading it fails the test, so a
    refusal that passes shows it came before any model was loaded."""
    path = tmp_path / "model" / "1"
    path.mkdir(parents=True)
    (path / "saved_model.pb").write_bytes(b"")

    def never(*args, **kwargs):
        raise AssertionError("the model was loaded before the arguments were checked")

    monkeypatch.setattr(backends.LocalBackend, "__init__", never)
    return path


@pytest.mark.parametrize("spelling", ["same", "dotted", "symlink"])
def test_predict_refuses_an_output_that_is_the_input(capsys, tmp_path, fake_saved_model,
                                                     spelling):
    source = tmp_path / "texts.txt"
    source.write_text("one\ntwo\n", encoding="utf-8")
    output = {"same": source, "dotted": tmp_path / "." / ".." / tmp_path.name / "texts.txt",
              "symlink": tmp_path / "link.txt"}[spelling]
    if spelling == "symlink":
        os.symlink(source, output)
    before = snapshot(tmp_path)
    code, line = run_cli(capsys, "predict", "--saved-model", fake_saved_model, "--input",
                         source, "--output", output)
    assert_one_line_error(code, line, f"--output {output}", "is the --input file",
                          os.path.realpath(source))
    assert snapshot(tmp_path) == before and hidden_temporaries(tmp_path) == []


@pytest.mark.parametrize("encoding, place, problem", [
    ("utf-16", ":1:", "byte 0xff at byte offset 0 is not UTF-8"),
    ("latin-1", ":2:", "byte 0xe9 at byte offset 7 is not UTF-8"),
])
def test_predict_refuses_input_that_is_not_utf8(capsys, tmp_path, fake_saved_model, encoding,
                                                place, problem):
    source = tmp_path / "texts.txt"
    source.write_bytes("one\ncaf\u00e9 au lait\n".encode(encoding))
    out = tmp_path / "out.jsonl"
    before = snapshot(tmp_path)
    code, line = run_cli(capsys, "predict", "--saved-model", fake_saved_model, "--input",
                         source, "--output", out)
    assert_one_line_error(code, line, f"{source}{place}", problem, "save the file as UTF-8")
    assert snapshot(tmp_path) == before and not out.exists()


@pytest.mark.parametrize("case", ["input_directory", "input_missing", "output_directory",
                                  "output_missing_directory", "output_under_a_file",
                                  "saved_model_file", "saved_model_missing"])
def test_predict_paths_are_named_for_what_they_are(capsys, tmp_path, fake_saved_model, case):
    source = tmp_path / "texts.txt"
    source.write_text("one\n", encoding="utf-8")
    (tmp_path / "folder").mkdir()
    model, output = fake_saved_model, tmp_path / "out.jsonl"
    if case == "input_directory":
        source, names = tmp_path / "folder", ["--input", "folder", "is a directory"]
    elif case == "input_missing":
        source, names = tmp_path / "nope.txt", ["--input", "nope.txt", "no such file"]
    elif case == "output_directory":
        output, names = tmp_path / "folder", ["--output", "folder", "is a directory"]
    elif case == "output_missing_directory":
        output = tmp_path / "absent" / "out.jsonl"
        names = ["--output", str(tmp_path / "absent"), "does not exist"]
    elif case == "output_under_a_file":
        output = source / "out.jsonl"
        names = ["--output", str(source), "is not a directory"]
    elif case == "saved_model_file":
        model, names = source, ["--saved-model", "texts.txt", "is a file"]
    else:
        model, names = tmp_path / "nothing", ["--saved-model", "nothing", "no such directory"]
    before = snapshot(tmp_path)
    code, line = run_cli(capsys, "predict", "--saved-model", model, "--input", source,
                         "--output", output)
    assert_one_line_error(code, line, *names)
    assert ".tmp-" not in line  # never the hidden temporary name
    assert snapshot(tmp_path) == before and hidden_temporaries(tmp_path) == []


@pytest.mark.slow
def test_predict_reads_utf8_with_a_bom_and_names_with_commas(capsys, tmp_path, exports):
    plain = tmp_path / "plain.txt"
    plain.write_text("one text\ncaf\u00e9 \U0001F600\n", encoding="utf-8")
    marked = tmp_path / "with,comma.txt"
    marked.write_bytes(b"\xef\xbb\xbf" + plain.read_bytes())
    results = []
    for source in (plain, marked):
        out = tmp_path / f"{source.stem}.jsonl"
        code, line = run_cli(capsys, "predict", "--saved-model", exports["classification"],
                             "--input", source, "--output", out)
        assert code == 0, line
        results.append([json.loads(row) for row in out.read_text().splitlines()])
    assert len(results[0]) == 2 and results[0] == results[1]


# ------------------------------------------------------------------- export
@pytest.fixture
def never_loaded(monkeypatch):
    def never(self):
        raise AssertionError("the checkpoint was loaded before the target was checked")

    monkeypatch.setattr(OpenedCheckpoint, "load", never)


def test_export_refuses_an_existing_version_before_loading(capsys, tmp_path, never_loaded):
    version = tmp_path / "models" / "albert" / "1"
    version.mkdir(parents=True)
    (version / "saved_model.pb").write_bytes(b"served now")
    before = snapshot(tmp_path)
    code, line = run_cli(capsys, "export", "--checkpoint", HF_CLASSIFIER, "--output",
                         tmp_path / "models" / "albert", "--version", "1")
    assert_one_line_error(code, line, version, "already exists", "next free version: 2")
    assert snapshot(tmp_path) == before


def test_export_refuses_an_unwritable_output_before_loading(capsys, tmp_path, never_loaded):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a directory\n")
    code, line = run_cli(capsys, "export", "--checkpoint", HF_CLASSIFIER, "--output",
                         blocker / "albert")
    assert_one_line_error(code, line, "--output", blocker, "is not a directory")
    assert ".tmp-" not in line and blocker.read_text() == "not a directory\n"
    assert sorted(os.listdir(tmp_path)) == ["a_file"]


def test_export_write_failure_names_the_version_not_its_staging(capsys, tmp_path,
                                                                monkeypatch):
    import errno

    def full(module, directory, *args, **kwargs):
        os.makedirs(os.path.join(directory, "variables"))
        raise OSError(errno.ENOSPC, "No space left on device",
                      os.path.join(directory, "variables", "variables.data"))

    monkeypatch.setattr(export, "save_module", full)
    target = tmp_path / "models" / "albert"
    code, line = run_cli(capsys, "export", "--checkpoint", HF_CLASSIFIER, "--output", target)
    assert_one_line_error(code, line, f"cannot write {target / '1'}: No space left on device",
                          "nothing was written")
    assert ".tmp-" not in line and os.listdir(tmp_path) == []


@pytest.mark.parametrize("case", ["checkpoint_missing", "checkpoint_file", "spm_directory"])
def test_export_paths_are_named_for_what_they_are(capsys, tmp_path, never_loaded, case):
    checkpoint, extra = HF_CLASSIFIER, []
    if case == "checkpoint_missing":
        checkpoint, names = tmp_path / "nothing", ["--checkpoint", "nothing", "no such directory"]
    elif case == "checkpoint_file":
        checkpoint = tmp_path / "weights.h5"
        checkpoint.write_bytes(b"\x89HDF")
        names = ["--checkpoint", "weights.h5", "is a file"]
    else:
        (tmp_path / "spm").mkdir()
        extra, names = ["--spm-model", tmp_path / "spm"], [tmp_path / "spm", "is a directory"]
    code, line = run_cli(capsys, "export", "--checkpoint", checkpoint, "--output",
                         tmp_path / "models" / "m", *extra)
    assert_one_line_error(code, line, *names)
    assert not (tmp_path / "models").exists()


@pytest.mark.parametrize("fixture, change, names", [
    ("seq_single", +1, ["id2label names 4 labels", "negative", "has 3 classes (classifier.bias)"]),
    ("seq_single", -1, ["id2label names 2 labels", "has 3 classes"]),
    ("token", +1, ["id2label names 6 labels (O, B-PER", "has 5 classes"]),
], ids=["classifier_extra_label", "classifier_missing_label", "token_extra_label"])
def test_export_names_id2label_that_does_not_fit_the_head(capsys, tmp_path, never_loaded,
                                                          fixture, change, names):
    checkpoint = tmp_path / "hf"
    shutil.copytree(os.path.join(TASK_FIXTURES, fixture, "hf"), checkpoint)
    config_path = checkpoint / "config.json"
    config = json.loads(config_path.read_text())
    labels = config["id2label"]
    if change > 0:
        labels[str(len(labels))] = "extra"
    else:
        del labels[str(len(labels) - 1)]
    config_path.write_text(json.dumps(config))
    before = snapshot(checkpoint)
    code, line = run_cli(capsys, "export", "--checkpoint", checkpoint, "--output",
                         tmp_path / "models" / "m")
    assert_one_line_error(code, line, config_path, *names)
    assert snapshot(checkpoint) == before and not (tmp_path / "models").exists()


@pytest.mark.slow
def test_export_accepts_paths_with_commas(capsys, tmp_path):
    checkpoint = tmp_path / "run,1"
    shutil.copytree(HF_CLASSIFIER, checkpoint)
    spm = tmp_path / "vocab,v2.model"
    shutil.move(str(checkpoint / "spiece.model"), spm)
    code, line = run_cli(capsys, "export", "--checkpoint", checkpoint, "--output",
                         tmp_path / "models,a" / "m", "--spm-model", spm)
    assert code == 0, line
    assert os.path.isfile(tmp_path / "models,a" / "m" / "1" / "saved_model.pb")
