"""Every input path goes through textio's one file rule before it is opened.

A FIFO, a directory or a device given where a file is read is named as what it is,
in one line, exit 2, before anything is opened: a FIFO opened for reading would wait
for a writer for ever, /dev/zero never ends, and "no such file" for a path that exists
sends the user looking for the wrong thing. A glob that matches a FIFO skips it with
a count. Every test runs under an alarm, so a regression that blocks fails the test
instead of hanging the suite.
"""

from __future__ import annotations

import json
import os
import signal

import pytest

from albert_tf.infra import textio
from tests.test_bad_inputs import assert_one_line_error, run_cli, snapshot

DEADLINE_S = 120  # a safety net: each case takes seconds; blocking on a FIFO never ends


class Blocked(Exception):
    pass


@pytest.fixture(autouse=True)
def deadline():
    """Fails the test (rather than hanging the suite) if it blocks past DEADLINE_S."""
    def expire(signum, frame):
        raise Blocked(f"blocked for {DEADLINE_S} s: a FIFO was opened")
    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(DEADLINE_S)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


@pytest.fixture
def fifo(tmp_path):
    path = tmp_path / "pipe.txt"
    os.mkfifo(path)
    return path


def _irregular(kind, tmp_path, fifo):
    """(path, the words naming it) for a FIFO, a directory or a character device."""
    if kind == "fifo":
        return fifo, "is a FIFO"
    if kind == "directory":
        (tmp_path / "data.csv").mkdir()
        return tmp_path / "data.csv", "is a directory"
    return "/dev/null", "is a character device"


# ------------------------------------------------------------------ the rule
def test_check_regular_names_what_a_path_is(tmp_path, fifo):
    regular = tmp_path / "a.txt"
    regular.write_text("text\n", encoding="utf-8")
    textio.check_regular(regular)  # a regular file passes
    for path, words in [(fifo, "is a FIFO"), (tmp_path, "is a directory"),
                        ("/dev/null", "is a character device"),
                        (tmp_path / "missing.txt", ": no such file")]:
        with pytest.raises(textio.NotRegularFileError) as e:
            textio.check_regular(path)
        assert str(e.value).startswith(f"{path}") and words in str(e.value)


def test_open_regular_refuses_a_fifo_without_waiting_for_a_writer(fifo, monkeypatch):
    # The swap after the check: the stat-time check sees a regular file, the open a FIFO.
    monkeypatch.setattr(textio, "check_regular", lambda path: None)
    with pytest.raises(textio.NotRegularFileError, match="is a FIFO"):
        textio.open_regular(fifo)


def test_read_bytes_names_a_fifo(fifo):
    with pytest.raises(textio.FileSizeError, match=f"{fifo} is a FIFO"):
        textio.read_bytes(fifo)


# ------------------------------------------------------------ create-data
def test_create_data_names_a_fifo_input_and_does_not_block(capsys, tmp_path, fifo,
                                                           spm_model_path):
    code, line = run_cli(capsys, "create-data", "--input", fifo, "--output-dir",
                         tmp_path / "out", "--spm-model", spm_model_path, "--processes", "1")
    assert_one_line_error(code, line, f"--input {fifo} is a FIFO")
    assert not (tmp_path / "out").exists()


def test_create_data_names_a_device_input(capsys, tmp_path, spm_model_path):
    code, line = run_cli(capsys, "create-data", "--input", "/dev/zero", "--output-dir",
                         tmp_path / "out", "--spm-model", spm_model_path, "--processes", "1")
    assert_one_line_error(code, line, "--input /dev/zero is a character device")


def test_create_data_skips_and_counts_a_fifo_a_glob_matches(capsys, tmp_path, corpus_documents,
                                                            spm_model_path):
    data = tmp_path / "data"
    data.mkdir()
    from albert_tf.training.data.corpus import write_corpus_file
    write_corpus_file(str(data / "a.txt"), iter(corpus_documents[:12]))
    os.mkfifo(data / "b.txt")
    code, line = run_cli(capsys, "create-data", "--input", f"{data}/*.txt", "--output-dir",
                         tmp_path / "out", "--spm-model", spm_model_path, "--processes", "1",
                         "--max-seq-length", "32", "--max-predictions-per-seq", "5",
                         "--dupe-factor", "1")
    assert code == 0, line
    with open(tmp_path / "out" / "summary.json", encoding="utf-8") as f:
        skipped = json.load(f)["skipped"]
    assert skipped["unreadable_file"]["files"] == {str(data / "b.txt"): 1}
    assert "is a FIFO" in skipped["unreadable_file"]["examples"][0]


# --------------------------------------------------------------- finetune
@pytest.mark.parametrize("kind", ["fifo", "directory", "device"])
@pytest.mark.parametrize("where", ["train", "dev"])
def test_finetune_names_a_data_path_that_is_not_a_file(capsys, tmp_path, fifo, tiny_checkpoint,
                                                       corpus_documents, kind, where):
    train = tmp_path / "train.csv"
    rows = [s.replace('"', "'") for doc in corpus_documents for s in doc][:8]
    train.write_text("text,label\n" + "".join(f'"{t}",{i % 2}\n' for i, t in enumerate(rows)),
                     encoding="utf-8")
    path, words = _irregular(kind, tmp_path, fifo)
    data = [path] if where == "train" else [train, path]
    before = snapshot(train, tiny_checkpoint)
    code, line = run_cli(capsys, "finetune", "--task", "classify", "--checkpoint",
                         tiny_checkpoint, "--output", tmp_path / "out", "--data", *data,
                         "--columns", "text:label", "--seq-length", "32")
    assert_one_line_error(code, line, f"{path} {words}")
    assert "no such file" not in line
    assert snapshot(train, tiny_checkpoint) == before and not (tmp_path / "out").exists()


def test_finetune_still_names_a_missing_file(capsys, tmp_path, tiny_checkpoint):
    code, line = run_cli(capsys, "finetune", "--task", "classify", "--checkpoint",
                         tiny_checkpoint, "--output", tmp_path / "out", "--data",
                         tmp_path / "typo.csv", "--columns", "text:label", "--seq-length", "32")
    assert_one_line_error(code, line, f"{tmp_path / 'typo.csv'}: no such file")


# ------------------------------------------------------------------ vocab
def test_vocab_names_a_fifo_input(capsys, tmp_path, fifo):
    code, line = run_cli(capsys, "vocab", "--input", fifo, "--output", tmp_path / "sp",
                         "--vocab-size", "50")
    assert_one_line_error(code, line, f"{fifo} is a FIFO")
    assert not list(tmp_path.glob("sp*"))


# ------------------------------------------------ data files' own messages
def test_a_null_jsonl_field_is_named_null_not_missing(tmp_path):
    from albert_tf.training.finetune.files import DataError, read_text_file

    path = tmp_path / "train.jsonl"
    path.write_text('{"text": "fine", "label": "a"}\n{"text": null, "label": "b"}\n',
                    encoding="utf-8")
    with pytest.raises(DataError, match=rf"^{path}:2: field 'text' is null; give a string"):
        read_text_file(str(path), ["text"], "label")
    path.write_text('{"text": "fine", "label": "a"}\n{"label": "b"}\n', encoding="utf-8")
    with pytest.raises(DataError, match=rf"^{path}:2: no field 'text'; the object has 'label'"):
        read_text_file(str(path), ["text"], "label")


def test_a_duplicate_csv_header_is_refused(tmp_path):
    from albert_tf.training.finetune.files import DataError, read_text_file

    path = tmp_path / "train.csv"
    path.write_text("text,label,text\nfine,a,other\n", encoding="utf-8")
    with pytest.raises(DataError, match=rf"^{path}:1: the header names column 'text' more "
                                        "than once"):
        read_text_file(str(path), ["text"], "label")
    path.write_text("text,label,note\nfine,a,x\n", encoding="utf-8")
    examples, labels = read_text_file(str(path), ["text"], "label")  # the acceptance
    assert labels == ["a"]
