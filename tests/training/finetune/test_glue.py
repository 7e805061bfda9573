"""GLUE end to end: glue_data/ through the CLI for every task (metrics recomputed with
scikit-learn / scipy from the written predictions, one submission row per test row),
and the tensorflow-datasets route (mocked, no network)."""

import csv
import json
import os

import numpy as np
import pytest
import tensorflow_datasets as tfds
from scipy import stats
from sklearn import metrics as sklearn_metrics

from albert_tf.checkpoint import open_checkpoint
from albert_tf.tokenizer.spm import AlbertTokenizer
from albert_tf.training.finetune import glue
from albert_tf.training.finetune.examples import DataError
from albert_tf.training.finetune.run import main
from albert_tf.training.finetune.sequence import glue_task
from tests.helpers.glue_layouts import EVAL_SPLITS, SUBMISSION_STEMS, TEST_SPLITS, write_glue_data

N = 6
SEQ = 24


@pytest.fixture(scope="module")
def tokenizer(spm_model_path):
    return AlbertTokenizer(spm_model_path)


@pytest.mark.parametrize("name", sorted(glue.GLUE_TASKS))
def test_every_glue_task_loads_and_encodes_from_tfds(name, tokenizer):
    spec = glue.GLUE_TASKS[name]
    with tfds.testing.mock_data(num_examples=N):
        task = glue_task(f"glue/{name}", tokenizer, SEQ)
    assert task.regression == spec.regression
    assert len(task.train) == N
    assert list(task.evals) == list(spec.eval_splits)
    for data in [task.train, *task.evals.values()]:
        assert data.lengths().max() <= SEQ
        pair = len(spec.text_features) == 2
        # Pairs have segment B (type 1); single texts do not.
        assert any(t.any() for t in data.features["input_type_ids"]) == pair
        labels = data.labels[task.output_key]
        if spec.regression:
            assert labels.dtype == np.float32
        else:
            assert labels.min() >= 0 and labels.max() < len(spec.label_names)
    assert set(task.tests) == set(spec.test_splits)
    for ids, data in task.tests.values():
        assert len(ids) == len(data) == N and not data.labels
    assert task.main_metric in {f"{m}_{s}" if len(spec.eval_splits) > 1 else m
                                for m in spec.metrics for s in spec.eval_splits}


def test_run_glue_defaults_are_the_original_script():
    # run_glue.sh: run_task <TASK> <warmup> <lr> <train steps> <save steps> <batch>
    original = {"sst2": (1256, 1e-5, 20935, 32), "mnli": (1000, 3e-5, 10000, 128),
                "cola": (320, 1e-5, 5336, 16), "qnli": (1986, 1e-5, 33112, 32),
                "qqp": (1000, 5e-5, 14000, 128), "rte": (200, 3e-5, 800, 32),
                "stsb": (214, 2e-5, 3598, 16), "mrpc": (200, 2e-5, 800, 32)}
    for name, values in original.items():
        spec = glue.GLUE_TASKS[name]
        assert (spec.warmup_steps, spec.learning_rate, spec.train_steps, spec.batch_size) == values


def test_official_metric_choice():
    assert glue.get_task("CoLA").main_metric == "matthews_corrcoef"
    assert glue.get_task("STS-B").metrics == ("pearson", "spearman")
    assert set(glue.get_task("glue/mrpc").metrics) == {"accuracy", "f1"}
    assert set(glue.get_task("qqp").metrics) == {"accuracy", "f1"}
    assert glue.get_task("mnli").main_metric == "accuracy_matched"
    with pytest.raises(DataError, match="unknown GLUE task 'glue/sst5'"):
        glue.get_task("glue/sst5")


def test_submission_values_and_writer(tmp_path):
    assert glue.submission_values(glue.get_task("rte"), np.array([1, 0])) == ["not_entailment", "entailment"]
    assert glue.submission_values(glue.get_task("wnli"), np.array([1, 0])) == ["1", "0"]
    assert glue.submission_values(glue.get_task("mnli"), np.array([2, 1])) == ["contradiction", "neutral"]
    assert glue.submission_values(glue.get_task("stsb"), np.array([5.7, 2.25, -1])) == ["5.000", "2.250", "0.000"]
    path = str(tmp_path / "RTE.tsv")
    glue.write_submission(path, ["0", "1"], ["entailment", "not_entailment"])
    with open(path) as f:
        assert f.read() == "index\tprediction\n0\tentailment\n1\tnot_entailment\n"
    assert os.listdir(tmp_path) == ["RTE.tsv"]  # no temporary file left


def _read_tsv(path):
    with open(path, newline="") as f:
        return list(csv.reader(f, delimiter="\t"))


@pytest.mark.slow
@pytest.mark.parametrize("task, files, values", [
    ("glue/mnli", ["MNLI-m.tsv", "MNLI-mm.tsv", "AX.tsv"], {"entailment", "neutral", "contradiction"}),
    ("glue/stsb", ["STS-B.tsv"], None),
])
def test_cli_fine_tunes_from_tfds_and_writes_the_submission(task, files, values, tiny_checkpoint, tmp_path):
    out = str(tmp_path / "out")
    with tfds.testing.mock_data(num_examples=8):
        rc = main(["--task", task, "--checkpoint", tiny_checkpoint, "--output", out,
                   "--epochs", "2", "--batch-size", "4",
                   "--seq-length", "32", "--set", "jit_compile=false"])
    assert rc == 0
    for name in files:
        rows = _read_tsv(os.path.join(out, name))
        assert rows[0] == ["index", "prediction"] and len(rows) == 9
        for _, value in rows[1:]:
            if values:
                assert value in values
            else:
                assert 0.0 <= float(value) <= 5.0
    with open(os.path.join(out, "eval_results.json")) as f:
        results = json.load(f)
    assert len(results["history"]) == 2
    expected = {"accuracy_matched", "accuracy_mismatched"} if task == "glue/mnli" else {"pearson", "spearman"}
    assert expected <= set(results["best"])
    info = open_checkpoint(out).task_record.to_dict()
    if task == "glue/mnli":
        assert info["task"] == "classification"
        assert info["label_names"] == ["entailment", "neutral", "contradiction"]
    else:
        assert info["task"] == "regression"
    assert info["seq_length"] == 32


def test_cli_errors_are_one_line(tiny_checkpoint, tmp_path, capsys):
    assert main(["--task", "glue/sst5", "--checkpoint", tiny_checkpoint, "--output", str(tmp_path)]) == 2
    assert "unknown GLUE task" in capsys.readouterr().err
    assert main(["--task", "glue/rte", "--checkpoint", tiny_checkpoint]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--output" in err
    assert main(["--task", "glue/rte", "--checkpoint", tiny_checkpoint, "--output", str(tmp_path),
                 "--set", "warmup=3"]) == 2
    assert "--set 'warmup': unknown key" in capsys.readouterr().err


def test_tfds_without_network_is_one_line_naming_the_cause(monkeypatch, tmp_path):
    # The builder's code path needs importlib_resources, which tensorflow-datasets
    # imports without declaring it (setup.py installs it): this raised
    # ModuleNotFoundError in a fresh install before any download was tried.
    assert tfds.builder("glue/cola", data_dir=str(tmp_path)).code_path
    assert not os.listdir(tmp_path)  # nothing written before the download

    def offline(*args, **kwargs):
        raise ConnectionError("HTTPSConnectionPool(host='dl.fbaipublicfiles.com'): Max retries exceeded\n...")

    monkeypatch.setattr(tfds, "load", offline)
    with pytest.raises(DataError) as error:
        glue.load_split(glue.get_task("cola"), "train")
    message = str(error.value)
    assert "\n" not in message
    assert "needs the network to download the data" in message and "--data glue_data/" in message


# ---------------------------------------------------------------- glue_data/ through the CLI
@pytest.fixture(scope="module")
def glue_data(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("glue") / "glue_data")
    return root, write_glue_data(root)


def _recomputed(spec, metric, gold, predicted):
    """The official metric from the prediction file's strings, by scikit-learn / scipy."""
    if spec.regression:
        x, y = np.asarray(gold, float), np.asarray(predicted, float)
        return {"pearson": stats.pearsonr, "spearman": stats.spearmanr}[metric](x, y)[0]
    g = [spec.file_labels.index(v) for v in gold]
    p = [spec.file_labels.index(v) for v in predicted]
    return {"accuracy": sklearn_metrics.accuracy_score,
            "f1": lambda a, b: sklearn_metrics.f1_score(a, b, zero_division=0.0),
            "matthews_corrcoef": sklearn_metrics.matthews_corrcoef}[metric](g, p)


def _check_submission(spec, path, texts_a, indices):
    rows = _read_tsv(path)
    assert rows[0] == ["index", "prediction"]
    assert len(rows) - 1 == len(texts_a)  # exactly one prediction per test row
    assert [r[0] for r in rows[1:]] == indices
    for _, value in rows[1:]:
        if spec.regression:
            assert 0.0 <= float(value) <= 5.0 and len(value.split(".")[1]) == 3
        else:
            assert value in spec.file_labels


# One task runs in the quick suite; the others are the same path with other layouts.
_QUICK = "cola"


@pytest.mark.parametrize("name", [pytest.param(n, marks=[] if n == _QUICK else [pytest.mark.slow])
                                  for n in sorted(glue.GLUE_TASKS)])
def test_cli_reads_glue_data_and_writes_metrics_predictions_and_submissions(
        name, glue_data, tiny_checkpoint, tmp_path):
    root, written = glue_data
    spec = glue.GLUE_TASKS[name]
    out = str(tmp_path / "out")
    rc = main(["--task", f"glue/{name}", "--data", root, "--checkpoint", tiny_checkpoint,
               "--output", out, "--epochs", "1", "--batch-size", "4", "--seq-length", "32",
               "--set", "jit_compile=false", "buckets=none"])
    assert rc == 0
    with open(os.path.join(out, "eval_results.json")) as f:
        best = json.load(f)["best"]
    eval_keys = EVAL_SPLITS.get(name, {"validation": "dev"})
    for set_name, key in eval_keys.items():
        rows = _read_tsv(os.path.join(out, f"predictions_{set_name}.tsv"))
        classes = [] if spec.regression else list(spec.file_labels)
        assert rows[0] == ["id", "label", "prediction", *(f"prob_{c}" for c in classes)]
        ids, gold, predicted = zip(*(row[:3] for row in rows[1:]))
        if classes:  # the probabilities sum to 1 and the prediction is the most probable class
            probabilities = np.array([[float(p) for p in row[3:]] for row in rows[1:]])
            np.testing.assert_allclose(probabilities.sum(-1), 1.0, rtol=1e-9)
            assert list(predicted) == [classes[i] for i in probabilities.argmax(-1)]
        expected_gold = written[name][key][2]
        if spec.regression:  # scores as numbers ("0.000" in the file, 0.0 read back)
            np.testing.assert_allclose(np.asarray(gold, float), np.asarray(expected_gold, float))
        else:
            assert list(gold) == expected_gold
        assert list(ids) == written[name][key][3]
        for metric in spec.metrics:
            reported = best[metric + (f"_{set_name}" if len(eval_keys) > 1 else "")]
            assert reported == pytest.approx(_recomputed(spec, metric, gold, predicted), abs=1e-6)
    test_keys = TEST_SPLITS.get(name, {SUBMISSION_STEMS.get(name): "test"})
    for stem, key in test_keys.items():
        texts_a, _, indices = written[name][key]
        _check_submission(spec, os.path.join(out, f"{stem}.tsv"), texts_a, indices)
    info = open_checkpoint(out).task_record.to_dict()
    # A regression record holds no label names at all.
    assert info.get("label_names") == (None if spec.regression else list(spec.label_names))
