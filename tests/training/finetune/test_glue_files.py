"""GLUE read from its distribution directory: every task's layout, quirks and errors."""

import logging
import os
import shutil

import numpy as np
import pytest

from albert_tf.training.finetune import glue, glue_files
from albert_tf.training.finetune.examples import DataError
from tests.helpers.glue_layouts import (
    EVAL_SPLITS,
    N_DEV,
    N_TRAIN,
    QQP_SHORT_ROWS,
    TEST_SPLITS,
    write_glue_data,
    write_msr_sources,
)


@pytest.fixture(scope="module")
def glue_data(tmp_path_factory):
    root = tmp_path_factory.mktemp("glue") / "glue_data"
    return str(root), write_glue_data(str(root))


def _expected_labels(task, written):
    if task.regression:
        return np.asarray([float(v) for v in written], np.float32)
    return np.asarray([task.file_labels.index(v) for v in written])


def test_file_tables_match_the_task_specs():
    assert set(glue_files.GLUE_FILES) == set(glue.GLUE_TASKS)
    for name, files in glue_files.GLUE_FILES.items():
        spec = glue.GLUE_TASKS[name]
        assert list(files.evals) == list(spec.eval_splits)
        assert list(files.tests) == list(spec.test_splits)
        for _, layout in [files.train, *files.evals.values(), *files.tests.values()]:
            assert len(layout.texts) == len(spec.text_features)


@pytest.mark.parametrize("name", sorted(glue.GLUE_TASKS))
def test_every_task_reads_exactly_what_the_files_hold(name, glue_data, caplog):
    root, written = glue_data
    spec = glue.GLUE_TASKS[name]
    with caplog.at_level(logging.WARNING):
        train, evals, tests = glue_files.read_task(spec, root)
    expected = written[name]
    eval_keys = EVAL_SPLITS.get(name, {"validation": "dev"})
    test_keys = TEST_SPLITS.get(name, {glue_files.GLUE_FILES[name].directory: "test"})
    assert list(evals) == list(eval_keys) and list(tests) == list(test_keys)
    for examples, key in [(train, "train"), *((evals[k], v) for k, v in eval_keys.items())]:
        texts_a, texts_b, labels, ids = expected[key]
        assert examples.texts_a == texts_a and examples.texts_b == texts_b  # quotes kept as text
        np.testing.assert_array_equal(examples.labels, _expected_labels(spec, labels))
        assert examples.ids == ids
    for stem, key in test_keys.items():
        texts_a, texts_b, indices = expected[key]
        assert tests[stem].texts_a == texts_a and tests[stem].texts_b == texts_b
        assert tests[stem].ids == indices and tests[stem].labels is None
    if name == "qqp":  # the rows cut by a newline are skipped and reported, per file
        warnings = [r.getMessage() for r in caplog.records if "missing fields" in r.getMessage()]
        assert len(warnings) == 2
        assert all(f"skipped {QQP_SHORT_ROWS} rows with missing fields (lines 5, 6)" in w
                   for w in warnings)
    else:
        assert not caplog.records


def test_mrpc_header_has_a_byte_order_mark_that_is_dropped(glue_data):
    root, written = glue_data
    with open(os.path.join(root, "MRPC", "train.tsv"), "rb") as f:
        assert f.read(3) == b"\xef\xbb\xbf"
    train, _, _ = glue_files.read_task(glue.get_task("mrpc"), os.path.join(root, "MRPC"))
    assert train.texts_a == written["mrpc"]["train"][0]


def test_a_task_folder_works_as_data_and_ax_is_found_beside_it(glue_data):
    root, written = glue_data
    _, evals, tests = glue_files.read_task(glue.get_task("mnli"), os.path.join(root, "MNLI"))
    assert set(evals) == {"matched", "mismatched"}
    assert tests["AX"].texts_a == written["mnli"]["diagnostic"][0]


def test_missing_test_files_are_left_out_with_a_warning(glue_data, tmp_path, caplog):
    root, _ = glue_data
    shutil.copytree(os.path.join(root, "MNLI"), tmp_path / "MNLI")
    os.remove(tmp_path / "MNLI" / "test_mismatched.tsv")
    with caplog.at_level(logging.WARNING):
        _, _, tests = glue_files.read_task(glue.get_task("mnli"), str(tmp_path))
    assert list(tests) == ["MNLI-m"]  # no test_mismatched, no diagnostic folder
    assert "MNLI-mm.tsv will not be written" in caplog.text and "AX.tsv will not be written" in caplog.text


def test_mrpc_from_the_msr_paraphrase_files_splits_by_dev_ids(tmp_path):
    train_rows, test_rows, dev_ids = write_msr_sources(str(tmp_path / "MRPC"))
    train, evals, tests = glue_files.read_task(glue.get_task("mrpc"), str(tmp_path))
    dev_rows = [r for r in train_rows if (r[1], r[2]) in dev_ids]
    kept = [r for r in train_rows if (r[1], r[2]) not in dev_ids]
    assert train.texts_a == [r[3] for r in kept] and len(kept) + len(dev_rows) == N_TRAIN + N_DEV
    assert evals["validation"].texts_b == [r[4] for r in dev_rows]
    np.testing.assert_array_equal(evals["validation"].labels, [int(r[0]) for r in dev_rows])
    assert tests["MRPC"].ids == [str(i) for i in range(len(test_rows))]
    assert tests["MRPC"].texts_a == [r[3] for r in test_rows] and tests["MRPC"].labels is None


def _corrupt(root, tmp_path, task_dir, file, line, new_text):
    shutil.copytree(os.path.join(root, task_dir), tmp_path / task_dir)
    path = tmp_path / task_dir / file
    lines = path.read_text(encoding="utf-8").split("\n")
    lines[line - 1] = new_text(lines[line - 1])
    path.write_text("\n".join(lines), encoding="utf-8")
    return str(path)


@pytest.mark.parametrize("task, file, line, edit, message", [
    ("rte", "dev.tsv", 3, lambda s: s.replace(" ", "\t", 1), r"dev\.tsv:3: 5 cells, expected 4"),
    ("cola", "train.tsv", 2, lambda s: s + "\textra", r"train\.tsv:2: 5 cells, expected 4"),
    ("qqp", "dev.tsv", 3, lambda s: s + "\t1", r"dev\.tsv:3: 7 cells, expected 6"),
    ("qqp", "test.tsv", 4, lambda s: s.split("\t")[0], r"test\.tsv:4: 1 cells, expected 3"),
    ("sst2", "train.tsv", 4, lambda s: s[:-1] + "positive", r"train\.tsv:4: unknown label 'positive'"),
    ("stsb", "dev.tsv", 2, lambda s: s.rsplit("\t", 1)[0] + "\thigh", r"dev\.tsv:2: score 'high' is not a number"),
    ("mnli", "dev_matched.tsv", 1, lambda s: s.rsplit("\t", 1)[0], r"dev_matched\.tsv:1: the header has 15 cells"),
])
def test_bad_rows_are_errors_naming_file_and_line(glue_data, tmp_path, task, file, line, edit, message):
    root, _ = glue_data
    spec = glue.get_task(task)
    _corrupt(root, tmp_path, glue_files.GLUE_FILES[task].directory, file, line, edit)
    with pytest.raises(DataError, match=message):
        glue_files.read_task(spec, str(tmp_path))


def test_missing_task_is_one_clear_error(tmp_path):
    with pytest.raises(DataError, match=r"no GLUE CoLA data \(expected .*CoLA/train\.tsv"):
        glue_files.read_task(glue.get_task("cola"), str(tmp_path))
    with pytest.raises(DataError, match="no such directory"):
        glue_files.read_task(glue.get_task("cola"), str(tmp_path / "nope"))
