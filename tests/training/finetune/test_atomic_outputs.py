"""Fine-tuning's outputs go through albert_tf.infra.atomic: whole or not at all, no temporaries left.

eval_results.json, SQuAD's predictions.json / nbest_predictions.json / null_odds.json and
RACE's race_test.json are written with `atomic.atomic_write_json`; `--overwrite` puts
the new run in place with `atomic.replace_directory`. No TensorFlow model is built here.
"""

import errno
import json
import os
import pathlib

import pytest

from albert_tf import errors
from albert_tf.infra import atomic
from albert_tf.training.finetune import run as finetune_run

ROOT = pathlib.Path(__file__).resolve().parents[3]


def _disk_full(fd):
    raise OSError(errno.ENOSPC, "No space left on device")


def test_a_failed_write_leaves_no_temporary_and_keeps_the_old_file(tmp_path, monkeypatch):
    path = tmp_path / "eval_results.json"
    atomic.atomic_write_json(path, {"best": {"accuracy": 0.5}}, indent=1)
    before = path.read_bytes()
    monkeypatch.setattr(os, "fsync", _disk_full)  # the disk fills while the new file is written
    with pytest.raises(errors.UserError, match=f"cannot write {path}: No space left on device"):
        atomic.atomic_write_json(path, {"best": {"accuracy": 0.9}, "history": [1] * 1000})
    assert os.listdir(tmp_path) == ["eval_results.json"]  # no temporary, visible or hidden
    assert path.read_bytes() == before


def test_a_failed_first_write_leaves_nothing(tmp_path, monkeypatch):
    monkeypatch.setattr(os, "fsync", _disk_full)
    with pytest.raises(errors.UserError, match="predictions.json: No space left"):
        atomic.atomic_write_json(tmp_path / "predictions.json", {"q1": "an answer"})
    with pytest.raises(TypeError):  # not JSON: refused before any file is opened
        atomic.atomic_write_json(tmp_path / "null_odds.json", {"q1": {0.5}})
    assert os.listdir(tmp_path) == []


def test_the_final_file_appears_whole(tmp_path):
    content = {"q1": "Zürich", "q2": "", "q3": "x" * 100_000}
    path = tmp_path / "predictions.json"
    atomic.atomic_write_json(path, content, indent=1, ensure_ascii=False)
    text = path.read_text(encoding="utf-8")
    assert text.endswith("}\n") and json.loads(text) == content and "Zürich" in text
    assert os.listdir(tmp_path) == ["predictions.json"]


def _train_writing(files: dict, fail: bool = False):
    def train(directory):
        os.makedirs(directory, exist_ok=True)
        for name, text in files.items():
            with atomic.atomic_write(os.path.join(directory, name)) as f:
                f.write(text)
        if fail:
            raise RuntimeError("training diverged")
        return {"checkpoint": directory, "best": None,
                "predictions": [os.path.join(directory, n) for n in files]}
    return train


def test_overwrite_replaces_the_output_only_when_the_new_run_is_complete(tmp_path):
    output = tmp_path / "out"
    output.mkdir()
    (output / "eval_results.json").write_text('{"old": true}\n')
    with pytest.raises(RuntimeError, match="diverged"):
        finetune_run._train_into(str(output), True, _train_writing({"new.txt": "x"}, fail=True))
    assert sorted(os.listdir(tmp_path)) == ["out"]  # the staging directory is gone
    assert os.listdir(output) == ["eval_results.json"]

    summary = finetune_run._train_into(str(output), True,
                                       _train_writing({"eval_results.json": '{"new": true}\n'}))
    assert sorted(os.listdir(tmp_path)) == ["out"]  # the old tree is gone too
    assert json.loads((output / "eval_results.json").read_text()) == {"new": True}
    assert summary["checkpoint"] == str(output)
    assert summary["predictions"] == [str(output / "eval_results.json")]


def test_no_module_renames_or_dumps_outputs_itself():
    # Every writer in training/ and serving/ goes through albert_tf.infra.atomic.
    offenders = []
    for folder in ("training", "serving"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                code = line.split("#")[0]
                if any(s in code for s in ("os.replace(", "os.rename(", "json.dump(", "tmp-")):
                    offenders.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not offenders, "\n".join(offenders)
