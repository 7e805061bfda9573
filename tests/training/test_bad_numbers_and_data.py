"""Bad numbers and malformed training data (issue 22): refused before any work, in one line
naming what and where, with nothing written and every input unchanged.

Four groups, each through the real command line (`albert_tf.infra.cli.main`, in this process):
  1. numeric hyperparameters: one check (`albert_tf.infra.arguments.check_numbers`, ranges
     declared beside the dataclass fields) for finetune, pretrain and create-data, run
     before any data is read; regression labels must be finite;
  2. task data: RACE answers are exactly one of A-D, SQuAD 1.1 has no unanswerable
     questions, and `--data DIR` never downloads;
  3. encodings: every reader decodes through `albert_tf.infra.textio` (file, line, byte offset);
     a corpus skips and counts what is not UTF-8 and names it on stderr;
  4. checks in the parent: create-data validates the vocabulary before any worker starts,
     a worker failure is one line; label names and SQuAD answers are checked when read.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import json
import os
import pickle
import shutil

import pytest

from albert_tf import AlbertConfig
from albert_tf.errors import UserError
from albert_tf.infra import arguments, textio
from albert_tf.training.data import create_data, vocab, workers
from albert_tf.training.data.corpus import write_corpus_file
from albert_tf.training.finetune import glue, squad_data
from albert_tf.training.finetune.race import read_race
from albert_tf.training.finetune.train import TrainConfig
from tests.helpers.squad_files import write_squad_json
from tests.test_bad_inputs import assert_one_line_error, hidden_temporaries, run_cli, snapshot

CONTEXT = "The old station of Zurich opened in 1847 and was rebuilt after a fire in 1871."
LATIN1 = "Caf\xe9 au lait".encode("latin-1")  # byte 0xe9 is not UTF-8 here
BAD_BYTE = b"\xe9"


def _sentences(corpus_documents, n):
    return [s.replace('"', "'") for doc in corpus_documents for s in doc][:n]


def _csv(path, rows, header="text,label"):
    path.write_text(header + "\n" + "".join(f'"{t}","{v}"\n' for t, v in rows), encoding="utf-8")
    return path


def _finetune(capsys, checkpoint, output, task, *argv):
    return run_cli(capsys, "finetune", "--task", task, "--checkpoint", checkpoint,
                   "--output", output, *argv)


def _assert_nothing_written(tmp_path, output, before):
    """No output directory, no hidden temporary anywhere, every input byte for byte."""
    assert not os.path.lexists(output)
    assert hidden_temporaries(tmp_path) == []
    assert snapshot(*before) == before


# ------------------------------------------------------------- 1. numbers
@pytest.mark.parametrize("extra, names", [
    (["--learning-rate", "nan"], ["--learning-rate=nan", "a finite number > 0"]),
    (["--learning-rate", "-1"], ["--learning-rate=-1.0", "a finite number > 0"]),
    (["--batch-size", "0"], ["--batch-size=0", "a positive integer"]),
    (["--epochs", "0"], ["--epochs=0", "a positive integer"]),
    (["--set", "weight_decay=-0.5"], ["--set weight_decay=-0.5", ">= 0"]),
    (["--set", "warmup_proportion=1.5"], ["--set warmup_proportion=1.5", "in [0, 1]"]),
    (["--set", "seed=-1"], ["--set seed=-1", "an integer >= 0"]),
    (["--set", "patience=0"], ["--set patience=0", "a positive integer"]),
    (["--set", "buckets=8,16"], ["buckets=8,16", "ending at seq_length=32"]),
], ids=["lr_nan", "lr_negative", "batch_0", "epochs_0", "weight_decay", "warmup_proportion",
        "seed", "patience_0", "buckets"])
def test_finetune_refuses_a_bad_number_before_reading_any_data(capsys, tmp_path, tiny_checkpoint,
                                                               corpus_documents, extra, names):
    train = _csv(tmp_path / "train.csv", [(s, i % 2) for i, s in
                                          enumerate(_sentences(corpus_documents, 8))])
    before = snapshot(train, tiny_checkpoint)
    # The evaluation file does not exist: the number is refused before it is looked for.
    code, line = _finetune(capsys, tiny_checkpoint, tmp_path / "out", "classify", "--data", train,
                           tmp_path / "missing.csv", "--columns", "text:label",
                           "--seq-length", "32", *extra)
    assert_one_line_error(code, line, *names)
    assert "missing.csv" not in line and "train_steps" not in line  # what the user gave
    _assert_nothing_written(tmp_path, tmp_path / "out", before)


def test_train_config_checks_its_numbers_as_a_library():
    with pytest.raises(UserError, match=r"^learning_rate=nan must be a finite number > 0$"):
        TrainConfig("out", learning_rate=float("nan"))
    with pytest.raises(UserError, match=r"^batch_size=0 must be a positive integer$"):
        TrainConfig("out", batch_size=0)
    with pytest.raises(UserError, match=r"^epochs=2\.5 must be a positive integer$"):
        TrainConfig("out", epochs=2.5)
    assert TrainConfig("out", train_steps=None, warmup_steps=0, patience=None).epochs == 3


def test_one_numeric_check_reads_the_ranges_beside_the_fields():
    @dataclasses.dataclass
    class Settings:
        rate: float = arguments.number_field(0.1, exclusive_minimum=0.0, maximum=1.0)
        steps: int | None = arguments.number_field(None, minimum=1, hint="omit it for all")
        scale: float = 1.0  # no range: still finite

    for values, message in [({"rate": 0.0}, "rate=0.0 must be a finite number in (0, 1]"),
                            ({"rate": float("inf")}, "rate=inf must be a finite number in (0, 1]"),
                            ({"steps": 0}, "steps=0 must be a positive integer (omit it for all)"),
                            ({"steps": True},
                             "steps=True must be a positive integer (omit it for all)"),
                            ({"scale": float("-inf")}, "scale=-inf must be a finite number")]:
        with pytest.raises(UserError) as caught:
            arguments.check_numbers(Settings, values)
        assert str(caught.value) == message
    arguments.check_numbers(Settings(steps=None))
    arguments.check_numbers(Settings, {"rate": 1, "steps": 3})  # an int is a number
    with pytest.raises(UserError, match=r"^--rate=2 must be"):
        arguments.check_numbers(Settings, {"rate": 2}, names={"rate": "--rate"})
    with pytest.raises(TypeError, match="unknown bounds"):
        arguments.number_field(1, minimun=0)


@pytest.mark.parametrize("override, names", [
    ("learning_rate=0", ["learning_rate=0.0", "a finite number > 0"]),
    ("shuffle_buffer=0", ["shuffle_buffer=0", "a positive integer"]),
    ("seed=-1", ["seed=-1", "an integer >= 0"]),
    ("warmup_steps=-3", ["warmup_steps=-3", "an integer >= 0"]),
    ("dropout=1", ["dropout=1.0", "in [0, 1)"]),
    ("max_predictions=0", ["max_predictions=0", "omit it to read it from the data"]),
])
def test_pretrain_refuses_a_bad_number_before_reading_any_data(capsys, tmp_path, monkeypatch,
                                                               override, names):
    monkeypatch.chdir(tmp_path)
    # The training data matches nothing: the number is refused before it is looked for.
    code, line = run_cli(capsys, "pretrain", "--train-data", "none-*.tfrecord",
                         "--output-dir", "run", override)
    assert_one_line_error(code, line, *names)
    assert os.listdir(tmp_path) == []


def test_pretrain_config_file_nan_names_the_field(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    config = tmp_path / "run.json"
    config.write_text('{"learning_rate": NaN, "train_data": "none-*", "output_dir": "run"}\n')
    before = snapshot(config)
    code, line = run_cli(capsys, "pretrain", "--config", config)
    assert_one_line_error(code, line, "learning_rate=nan", "a finite number > 0")
    assert snapshot(config) == before and os.listdir(tmp_path) == ["run.json"]


@pytest.mark.parametrize("option, value, names", [
    ("--masked-lm-prob", "nan", ["masked_lm_prob=nan", "in (0, 1)"]),
    ("--seed", "-1", ["seed=-1", "an integer >= 0"]),
    ("--dupe-factor", "0", ["dupe_factor=0", "a positive integer"]),
])
def test_create_data_refuses_a_bad_number(capsys, tmp_path, corpus_file, spm_model_path, option,
                                          value, names):
    code, line = run_cli(capsys, "create-data", "--input", corpus_file, "--output-dir",
                         tmp_path / "out", "--spm-model", spm_model_path, option, value)
    assert_one_line_error(code, line, *names)
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("option, value, names", [
    ("--seed", "-1", ["--seed=-1", "an integer >= 0"]),
    ("--steps", "0", ["--steps=0", "a positive integer"]),
])
def test_ablate_refuses_a_bad_number_before_any_stage(capsys, tmp_path, option, value, names):
    code, line = run_cli(capsys, "ablate", "--output", tmp_path / "ablation", option, value)
    assert_one_line_error(code, line, *names)
    assert os.listdir(tmp_path) == []  # no corpus split, no vocabulary trained


@pytest.mark.parametrize("value", ["nan", "inf", "-Infinity"])
def test_a_regression_label_must_be_finite(capsys, tmp_path, tiny_checkpoint, corpus_documents,
                                           value):
    rows = [(s, str(i % 5)) for i, s in enumerate(_sentences(corpus_documents, 6))]
    rows[2] = (rows[2][0], value)
    train = _csv(tmp_path / "train.csv", rows, "text,score")
    before = snapshot(train, tiny_checkpoint)
    code, line = _finetune(capsys, tiny_checkpoint, tmp_path / "out", "regress", "--data", train,
                           "--columns", "text:score", "--seq-length", "32")
    assert_one_line_error(code, line, f"{train}:4", f"label {value!r} in column 'score'",
                          "not a finite number")
    _assert_nothing_written(tmp_path, tmp_path / "out", before)


# ------------------------------------------------------------- 2. task data
def _race_record(answers):
    return {"id": "r1", "article": "Tom lives near the sea and walks his dog every morning.",
            "questions": ["Where does Tom live?", "What does Tom walk?"],
            "options": [["near the sea", "in a city", "on a farm", "in a town"],
                        ["his dog", "his cat", "a horse", "a bike"]],
            "answers": answers}


def _race_layout(root, train_content):
    for split in ("train", "dev"):
        folder = root / split / "middle"
        folder.mkdir(parents=True)
        content = train_content if split == "train" else json.dumps(_race_record(["A", "A"]))
        (folder / "1.txt").write_bytes(content if isinstance(content, bytes)
                                       else content.encode("utf-8"))
    return root / "train" / "middle" / "1.txt"


@pytest.mark.parametrize("answer", ["", "AB", "b", "E", 1, None])
def test_race_answer_must_be_exactly_one_of_a_to_d(capsys, tmp_path, tiny_checkpoint, answer):
    bad = _race_layout(tmp_path / "race", json.dumps(_race_record(["A", answer])))
    before = snapshot(tmp_path / "race", tiny_checkpoint)
    code, line = _finetune(capsys, tiny_checkpoint, tmp_path / "out", "race", "--data",
                           tmp_path / "race", "--seq-length", "48", "--set", "max_qa_length=16")
    assert_one_line_error(code, line, f"{bad}:1", f"question 1 has answer {answer!r}",
                          "not one of A, B, C, D")
    _assert_nothing_written(tmp_path, tmp_path / "out", before)


def test_race_answer_whitespace_is_stripped(tmp_path):
    _race_layout(tmp_path / "race", json.dumps(_race_record([" C ", "D\n"])))
    assert [e.label for e in read_race(str(tmp_path / "race" / "train"))] == [2, 3]


def test_squad_v1_refuses_an_unanswerable_question(capsys, tmp_path, tiny_checkpoint):
    data = tmp_path / "squad"
    data.mkdir()
    rows = [("a", CONTEXT, "When did it open?", "1847"), ("b", CONTEXT, "Who built it?", None)]
    train = write_squad_json(data / "train-v1.1.json", rows, version_two=True)
    write_squad_json(data / "dev-v1.1.json", rows[:1])
    before = snapshot(data, tiny_checkpoint)
    code, line = _finetune(capsys, tiny_checkpoint, tmp_path / "out", "squad/v1.1", "--data", data,
                           "--seq-length", "40", "--set", "doc_stride=16")
    assert_one_line_error(code, line, train, "(id 'b')", "is_impossible",
                          "SQuAD 1.1 has no unanswerable questions", "--task squad/v2.0")
    _assert_nothing_written(tmp_path, tmp_path / "out", before)


def test_squad_data_directory_without_its_files_never_downloads(capsys, tmp_path, tiny_checkpoint,
                                                               monkeypatch):
    def no_download(*args, **kwargs):
        raise AssertionError("--data was given: nothing may be downloaded")

    monkeypatch.setattr(squad_data, "load_squad_tfds", no_download)
    monkeypatch.setattr(glue, "load_tfds", no_download)
    data = tmp_path / "mine"
    data.mkdir()
    (data / "notes.txt").write_text("my own notes\n")
    write_squad_json(data / "train-v2.0.json", [("a", CONTEXT, "When?", "1847")], True)
    before = snapshot(data, tiny_checkpoint)
    code, line = _finetune(capsys, tiny_checkpoint, tmp_path / "out", "squad/v1.1", "--data", data,
                           "--seq-length", "40", "--set", "doc_stride=16")
    assert_one_line_error(code, line, f"--data {data}", "train-v1.1.json", "dev-v1.1.json",
                          "notes.txt, train-v2.0.json")
    assert sorted(os.listdir(data)) == ["notes.txt", "train-v2.0.json"]  # nothing put there
    _assert_nothing_written(tmp_path, tmp_path / "out", before)


# ------------------------------------------------------------- 3. encodings
def test_decode_names_the_file_line_and_byte_offset():
    text = "\ufeffline one\nline two\n".encode("utf-8")
    assert textio.decode(text, "a.txt") == "line one\nline two\n"  # the byte-order mark dropped
    data = b"\xef\xbb\xbfok\nfine\n" + LATIN1  # the offset counts the byte-order mark
    with pytest.raises(textio.EncodingError) as caught:
        textio.decode(data, "menu.txt")
    e = caught.value
    assert (e.path, e.line, e.offset, e.byte) == ("menu.txt", 3, data.index(BAD_BYTE), 0xE9)
    assert str(e) == ("menu.txt:3: byte 0xe9 at byte offset 14 is not UTF-8 (invalid "
                      "continuation byte); save the file as UTF-8")
    assert isinstance(e, UserError) and str(pickle.loads(pickle.dumps(e))) == str(e)
    with pytest.raises(textio.EncodingError, match=r"^x:7: byte 0xe9 at byte offset 103 "):
        textio.decode(LATIN1, "x", line=7, offset=100)  # a line read on its own


def test_a_latin1_jsonl_file_is_one_line_naming_file_line_and_byte(capsys, tmp_path,
                                                                   tiny_checkpoint):
    train = tmp_path / "train.jsonl"
    data = b'{"text": "fine", "label": "a"}\n{"text": "' + LATIN1 + b'", "label": "b"}\n'
    train.write_bytes(data)
    before = snapshot(train, tiny_checkpoint)
    code, line = _finetune(capsys, tiny_checkpoint, tmp_path / "out", "classify", "--data", train,
                           "--columns", "text:label", "--seq-length", "32")
    assert_one_line_error(code, line, f"{train}:2",
                          f"byte 0xe9 at byte offset {data.index(BAD_BYTE)}", "not UTF-8")
    _assert_nothing_written(tmp_path, tmp_path / "out", before)


def test_a_latin1_race_file_is_one_line_naming_file_line_and_byte(capsys, tmp_path,
                                                                  tiny_checkpoint):
    content = json.dumps(_race_record(["A", "B"])).encode("utf-8").replace(b"Tom lives", LATIN1)
    bad = _race_layout(tmp_path / "race", content)
    before = snapshot(tmp_path / "race", tiny_checkpoint)
    code, line = _finetune(capsys, tiny_checkpoint, tmp_path / "out", "race", "--data",
                           tmp_path / "race", "--seq-length", "48", "--set", "max_qa_length=16")
    assert_one_line_error(code, line, f"{bad}:1",
                          f"byte 0xe9 at byte offset {content.index(BAD_BYTE)}")
    _assert_nothing_written(tmp_path, tmp_path / "out", before)


def test_a_latin1_albert_config_and_run_config_name_the_file(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    model = tmp_path / "albert_config.json"
    data = b'{\n  "vocab_size": 30,\n  "hidden_act": "' + LATIN1 + b'"\n}\n'
    model.write_bytes(data)
    code, line = run_cli(capsys, "params", "--config", model)
    assert_one_line_error(code, line, f"{model}:3",
                          f"byte 0xe9 at byte offset {data.index(BAD_BYTE)}", "not UTF-8")
    with pytest.raises(UserError, match=rf"{model}:3: byte 0xe9"):
        AlbertConfig.from_json_file(model)
    run = tmp_path / "run.json"
    data = b'{"output_dir": "' + LATIN1 + b'"}'
    run.write_bytes(data)
    code, line = run_cli(capsys, "pretrain", "--config", run)
    assert_one_line_error(code, line, f"{run}:1",
                          f"byte 0xe9 at byte offset {data.index(BAD_BYTE)}")
    assert sorted(os.listdir(tmp_path)) == ["albert_config.json", "run.json"]


def test_a_latin1_corpus_file_is_counted_and_named_on_stderr(capsys, caplog, tmp_path,
                                                            corpus_documents, spm_model_path):
    good = tmp_path / "good.txt"
    write_corpus_file(str(good), iter(corpus_documents[:4]))
    latin = tmp_path / "latin.txt"
    latin.write_bytes(b"A first sentence.\n" + LATIN1 + b" is served here.\n\n"
                      b"Fine one.\nAnd fine two.\n\n"
                      b"Another " + LATIN1 + b".\nSecond sentence.\n\n")
    before = snapshot(good, latin)
    code = run_cli(capsys, "create-data", "--input", f"{good},{latin}", "--output-dir",
                   tmp_path / "out", "--spm-model", spm_model_path, "--processes", "1",
                   "--max-seq-length", "32", "--max-predictions-per-seq", "5",
                   "--dupe-factor", "1")[0]
    assert code == 0
    skipped = json.load(open(tmp_path / "out" / "summary.json"))["skipped"]["invalid_utf8"]
    assert skipped["files"] == {str(latin): 2}  # two documents, each counted once
    warning = [r.getMessage() for r in caplog.records if str(latin) in r.getMessage()]
    assert warning == [f"skipped invalid utf8: {latin} (2 documents; first: line 2: byte 0xe9 "
                       "at byte offset 21 is not UTF-8 (invalid continuation byte))"]
    assert snapshot(good, latin) == before


def test_vocab_skips_and_names_lines_that_are_not_utf8(caplog, tmp_path):
    path = tmp_path / "text.txt"
    path.write_bytes(b"Hello there.\n" + LATIN1 + b"\nGood bye.\n")
    stats = {}
    assert list(vocab.read_sentences([str(path)], stats=stats)) == ["hello there.", "good bye."]
    assert stats["skipped_lines"] == 1
    assert f"skipped 1 lines of {path} that are not UTF-8 (first: line 2: byte 0xe9 at byte " \
           "offset 16" in caplog.text


# ------------------------------------------------------------- 4. checked early, one line
def test_create_data_checks_the_vocabulary_before_any_worker(capsys, tmp_path, corpus_file,
                                                             monkeypatch):
    def no_workers(*args, **kwargs):
        raise AssertionError("the vocabulary must be checked before any worker starts")

    monkeypatch.setattr(workers, "executor", no_workers)
    bad = tmp_path / "vocab.model"
    bad.write_text("not a SentencePiece model\n")
    before = snapshot(bad, corpus_file)
    code, line = run_cli(capsys, "create-data", "--input", corpus_file, "--output-dir",
                         tmp_path / "out", "--spm-model", bad, "--processes", "2")
    assert_one_line_error(code, line, bad, "not a valid SentencePiece model")
    assert "BrokenProcessPool" not in line
    assert not (tmp_path / "out").exists() and snapshot(bad, corpus_file) == before


def test_a_worker_failure_is_one_line_naming_the_cause(tmp_path, spm_model_path):
    bad = tmp_path / "changed.model"  # e.g. overwritten after the parent checked it
    bad.write_text("no longer a model\n")
    options = create_data.sop.GenerationOptions()
    # A worker's failed set-up is kept and raised by its tasks, through their futures: one
    # exception in the parent, not a traceback per worker (the one-process executor here;
    # a spawned pool runs the same set-up, workers._start).
    with workers.executor(1, create_data._init_worker, (str(bad), True)) as pool:
        future = pool.submit(create_data.make_shard, 0, [], str(tmp_path), options)
    with pytest.raises(UserError, match=f"^{bad} is not a valid SentencePiece model"):
        workers.result(future, "shard 0")
    assert os.listdir(tmp_path) == ["changed.model"]  # no shard, no statistics
    with workers.executor(1, create_data._init_worker, (spm_model_path, True)):
        workers.raise_if_failed()  # a later good set-up in this process is not haunted by it
    broken = concurrent.futures.Future()
    broken.set_exception(concurrent.futures.process.BrokenProcessPool("terminated abruptly"))
    progress = create_data._Progress(bar=None, pending={broken: (7, 3)})
    with pytest.raises(workers.WorkerError, match="while making shard 7") as caught:
        progress.done(broken)
    assert caught.value.exit_status == 1 and "rerun the same command" in str(caught.value)


@pytest.mark.parametrize("label, shown", [("a\tb", "a tab"), ("a\nb", "a line break")])
def test_a_label_with_a_tab_is_refused_when_read(capsys, tmp_path, tiny_checkpoint,
                                                 corpus_documents, label, shown):
    rows = [(s, "neg" if i % 2 else "pos") for i, s in enumerate(_sentences(corpus_documents, 6))]
    rows[3] = (rows[3][0], label)
    train = _csv(tmp_path / "train.csv", rows)
    before = snapshot(train, tiny_checkpoint)
    code, line = _finetune(capsys, tiny_checkpoint, tmp_path / "out", "classify", "--data", train,
                           "--columns", "text:label", "--seq-length", "32")
    assert_one_line_error(code, line, f"{train}:5", f"label {label!r} holds {shown}")
    _assert_nothing_written(tmp_path, tmp_path / "out", before)
    code, line = _finetune(capsys, tiny_checkpoint, tmp_path / "out", "classify", "--data", train,
                           "--columns", "text:label", "--seq-length", "32",
                           "--label-names", "neg,a\tb")
    assert_one_line_error(code, line, "--label-names", "'a\\tb' holds a tab")
    _assert_nothing_written(tmp_path, tmp_path / "out", before)


def test_no_usable_squad_answers_names_the_file(capsys, tmp_path, tiny_checkpoint):
    data = tmp_path / "squad"
    data.mkdir()
    paragraphs = [{"context": CONTEXT, "qas": [
        {"id": f"q{i}", "question": "When did it open?",
         "answers": [{"text": "1847", "answer_start": 3}]}]} for i in range(3)]  # not at 3
    train = data / "train-v1.1.json"
    train.write_text(json.dumps({"version": "1.1", "data": [{"title": "t",
                                                             "paragraphs": paragraphs}]}))
    shutil.copy(train, data / "dev-v1.1.json")
    before = snapshot(data, tiny_checkpoint)
    code, line = _finetune(capsys, tiny_checkpoint, tmp_path / "out", "squad/v1.1", "--data", data,
                           "--seq-length", "40", "--set", "doc_stride=16")
    assert_one_line_error(code, line, train, "no usable SQuAD answers", "none of the 3",
                          "question id 'q0'", "'1847' at character 3")
    assert "unexpected error" not in line
    _assert_nothing_written(tmp_path, tmp_path / "out", before)
