"""The task record: defaults in one place, validation naming field, value and file, round
trips, older albert_task.json files, and no TensorFlow."""

import json
import os
import subprocess
import sys

import pytest

from albert_tf.checkpoint.task_record import (
    MULTIPLE_CHOICE_DEFAULTS,
    SPAN_DEFAULTS,
    TASK_FILE,
    TaskRecord,
    TaskRecordError,
)


def _write(directory, content) -> str:
    path = os.path.join(directory, TASK_FILE)
    with open(path, "w", encoding="utf-8") as f:
        f.write(content if isinstance(content, str) else json.dumps(content))
    return path


def test_defaults_fill_each_task_and_shrink_to_fit_seq_length():
    span = TaskRecord.create("span", seq_length=384)
    assert {k: getattr(span, k) for k in SPAN_DEFAULTS} == SPAN_DEFAULTS
    assert span.max_qa_length is None and span.label_names is None
    short = TaskRecord.create("span", seq_length=40)
    assert short.max_query_length == 36  # 40 - [CLS] - 2 [SEP] - one context piece
    race = TaskRecord.create("multiple_choice", seq_length=64)
    assert race.max_qa_length == 61 and MULTIPLE_CHOICE_DEFAULTS["max_qa_length"] == 128
    assert TaskRecord.create("multiple_choice").max_qa_length == 128
    cls = TaskRecord.create("classification", label_names=["neg", "pos", "mixed"])
    assert cls.num_classes == 3 and cls.problem_type == "single_label"
    assert cls.label_names == ("neg", "pos", "mixed")


def test_round_trip_through_the_file(tmp_path):
    records = [TaskRecord.create("span", seq_length=64, do_lower_case=False, keep_accents=True,
                                 answerability=True, doc_stride=17, max_query_length=9,
                                 max_answer_length=7, n_best=3, no_answer_threshold=0.125),
               TaskRecord.create("classification", seq_length=32, label_names=["b", "a"],
                                 problem_type="multi_label"),
               TaskRecord.create("regression", seq_length=16),
               TaskRecord.create("multiple_choice", seq_length=48, max_qa_length=11),
               TaskRecord.create("token_classification", num_classes=5),
               TaskRecord.create("pretraining")]
    for index, record in enumerate(records):
        directory = tmp_path / str(index)
        directory.mkdir()
        path = record.write(directory)
        assert sorted(os.listdir(directory)) == [TASK_FILE]  # no temporary file left
        again = TaskRecord.read(directory)
        assert again == record and again.source == path
        assert TaskRecord.read(path) == record
        with open(path, encoding="utf-8") as f:
            assert json.load(f) == record.to_dict()
    # Only the task's own fields are written.
    assert set(records[2].to_dict()) == {"task", "seq_length", "tokenizer", "do_lower_case",
                                         "keep_accents", "tokenize_chinese_chars",
                                         "split_characters", "precision"}


def test_record_is_frozen_and_replace_validates():
    record = TaskRecord.create("span", seq_length=64)
    with pytest.raises(AttributeError):
        record.n_best = 3
    assert record.replace(n_best=3).n_best == 3
    with pytest.raises(TaskRecordError, match="n_best=0"):
        record.replace(n_best=0)


@pytest.mark.parametrize("content, expected", [
    # what albert-tf wrote before the record existed
    ({"task": "pretraining", "num_classes": None, "label_names": None, "do_lower_case": True,
      "seq_length": None}, TaskRecord("pretraining")),
    ({"task": "classification", "num_classes": 2, "label_names": ["no", "yes"],
      "do_lower_case": False, "seq_length": 128},
     TaskRecord("classification", 128, False, num_classes=2, label_names=("no", "yes"),
                problem_type="single_label")),
    ({"task": "span", "num_classes": None, "label_names": None, "do_lower_case": True,
      "seq_length": 384, "answerability": True, "no_answer_threshold": 0.3},
     TaskRecord("span", 384, answerability=True, doc_stride=128, max_query_length=64,
                max_answer_length=30, n_best=20, max_windows=32, no_answer_threshold=0.3,
                top_k=1)),
    ({"task": "multiple_choice", "num_classes": None, "label_names": None,
      "do_lower_case": True, "seq_length": 512},
     TaskRecord("multiple_choice", 512, max_qa_length=128)),
])
def test_older_files_read_with_defaults(tmp_path, content, expected):
    _write(tmp_path, content)
    assert TaskRecord.read(tmp_path) == expected


def test_missing_file_is_a_pretraining_checkpoint(tmp_path):
    assert TaskRecord.read(tmp_path) == TaskRecord("pretraining")


@pytest.mark.parametrize("content, message", [
    ({"task": "span", "seq_length": 384, "max_query_length": 500},
     r"max_query_length=500 exceeds seq_length=384 - 4 .* in {path}"),
    ({"task": "span", "max_querry_length": 32},
     r"unknown field max_querry_length=32 in {path}; a span record holds .*max_query_length"),
    ({"task": "classification", "num_classes": 2, "label_names": ["a"]},
     r"label_names has 1 names but num_classes=2 in {path}"),
    ({"task": "classification", "label_names": ["a", "b", "a"]},
     r"label_names repeats 'a' in {path}"),
    ({"task": "classification", "label_names": ["a", 1]},
     r"label_names=\('a', 1\) in {path}: expected a list of strings"),
    ({"task": "classification"}, r"num_classes is missing in {path}"),
    ({"task": "classification", "num_classes": 2, "problem_type": "ranking"},
     r"problem_type='ranking' in {path} is not one of single_label, multi_label"),
    ({"task": "span", "no_answer_threshold": 1.5},
     r"no_answer_threshold=1.5 in {path}: expected a probability in \[0, 1\]"),
    ({"task": "span", "no_answer_threshold": float("nan")}, r"no_answer_threshold=nan in {path}"),
    ({"task": "span", "doc_stride": "128"}, r"doc_stride='128' in {path}: expected an integer"),
    ({"task": "span", "n_best": True}, r"n_best=True in {path}: expected an integer"),
    ({"task": "span", "answerability": "yes"}, r"answerability='yes' in {path}: expected true"),
    ({"task": "regression", "seq_length": 2},
     r"seq_length=2 must be an integer from 3 .*\(in {path}\)"),
    ({"task": "regression", "do_lower_case": 1}, r"do_lower_case=1 in {path}: expected true"),
    ({"task": "regression", "max_qa_length": 64},
     r"max_qa_length=64 in {path} does not apply to task='regression'"),
    ({"task": "multiple_choice", "seq_length": 64, "max_qa_length": 62},
     r"max_qa_length=62 exceeds seq_length=64 - 3 .* in {path}"),
    ({"task": "translation"}, r"task='translation' in {path} is not one of pretraining"),
    ({"seq_length": 64}, r"no 'task' field in {path}"),
    ([1, 2], r"expected a JSON object in {path}, got list"),
    ('{"task": "span",\n "n_best": }', r"{path}:2:12: invalid JSON"),
])
def test_errors_name_the_field_the_value_and_the_file(tmp_path, content, message):
    path = _write(tmp_path, content)
    with pytest.raises(TaskRecordError, match=message.format(path=path.replace("\\", "\\\\"))):
        TaskRecord.read(tmp_path)


def test_module_imports_no_tensorflow():
    code = ("import sys, albert_tf.checkpoint.task_record; "
            "sys.exit(any(m.split('.')[0] in ('tensorflow', 'keras') for m in sys.modules))")
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


def test_no_serving_or_finetuning_module_repeats_the_defaults():
    """The names of the old duplicated constants are gone; the record is their one home."""
    from tests.helpers.paths import REPO as root
    for folder in ("serving", os.path.join("training", "finetune")):
        for name in os.listdir(os.path.join(root, folder)):
            if name.endswith(".py"):
                with open(os.path.join(root, folder, name), encoding="utf-8") as f:
                    text = f.read()
                for constant in ("MAX_QA_LENGTH =", "MAX_ANSWER_LENGTH =", "MAX_QUERY_LENGTH =",
                                 "NO_ANSWER_THRESHOLD =", "max_qa_length: int = 128",
                                 "max_query_length: int = 64", "max_answer_length: int = 30",
                                 "n_best: int = 20", '"max_qa_length": 128'):
                    assert constant not in text, (name, constant)
