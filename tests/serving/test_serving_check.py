"""`albert-tf serving-check`: the comparison, the argument errors, and the replay itself with
this interpreter standing in for a release's (installing a TensorFlow is not a test's job)."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys

import numpy as np
import pytest

from albert_tf.infra import cli
from albert_tf.serving import export, serving_check
from albert_tf.serving.serving_check import ServingCheckError, compare
from tests.helpers.fresh_process import SAFETY_NET_S
from tests.helpers.paths import FIXTURES, REPO

_DOCS_MODEL = "models/albert_sst2/1"


def test_compare_allows_atol_and_names_the_first_difference():
    want = [{"probabilities": np.array([[0.25, 0.75]], np.float32),
             "label": np.array([b"yes"], object)},
            {"probabilities": np.array([[0.5, 0.5]], np.float32),
             "label": np.array([b"no"], object)},
            {"score": np.array([1.0], np.float32)}]
    close = [{"probabilities": w["probabilities"] + 4e-6, "label": w["label"]} for w in want[:2]]
    rows = compare(["serving_default", "serving_default", "score"], want,
                   close + [{"score": np.array([1.0], np.float32)}], 1e-5)
    assert [(r[0], r[1], r[3]) for r in rows] == [("serving_default", 2, None), ("score", 1, None)]
    assert rows[0][2] == pytest.approx(4e-6, rel=1e-2)  # float32 rounding
    far = [dict(close[0], probabilities=close[0]["probabilities"] + 1e-3), close[1]]
    assert compare(["s", "s"], want[:2], far, 1e-5)[0][3] == (
        "request 1: output probabilities differs by 0.001 > 1e-05")
    label = [close[0], dict(close[1], label=np.array([b"yes"], object))]
    assert compare(["s", "s"], want[:2], label, 1e-5)[0][3] == "request 2: output label differs"
    # A span answer's "no score" is -inf on both sides: equal, not NaN apart.
    edges = [{"score": np.array([-np.inf, np.nan, 2.0], np.float32)}]
    assert compare(["s"], edges, edges, 1e-5)[0][2:] == (0.0, None)
    inf = [{"score": np.array([np.inf, np.nan, 2.0], np.float32)}]
    assert "differs by inf" in compare(["s"], edges, inf, 1e-5)[0][3]
    nan = [{"score": np.array([np.nan], np.float32)}]
    assert "differs by nan" in compare(["s"], want[2:], nan, 1e-5)[0][3]
    shape = [{"score": np.array([1.0, 1.0], np.float32)}]
    assert "has shape (2,), not (1,)" in compare(["s"], want[2:], shape, 1e-5)[0][3]
    extra = [{"score": want[2]["score"], "more": np.array([1])}]
    assert compare(["s"], want[2:], extra, 1e-5)[0][3] == ("request 1: output more only in the "
                                                           "release")


@pytest.mark.parametrize("argv,words", [
    (["--release", "latest"], "--release 'latest' is not a tensorflow/serving release X.Y.Z"),
    (["--release", "2.9.0"], "the table starts at 2.10.0"),
    (["--atol", "-1"], "--atol -1.0: expected a number >= 0"),
    ([], "no saved_model.pb; give an exported version directory"),
])
def test_argument_errors_are_one_line_before_anything_installs(tmp_path, capsys, argv, words):
    cache = tmp_path / "cache"
    status = cli.command("serving-check")(serving_check.main)([str(tmp_path), "--cache", str(cache), *argv])
    err = capsys.readouterr().err.strip()
    assert status == 2 and words in err and len(err.splitlines()) == 1, err
    assert err.startswith("albert-tf serving-check: ")
    assert not cache.exists()


@pytest.mark.slow
def test_the_replay_answers_alike_and_a_broken_export_is_one_line(tmp_path, monkeypatch):
    output = str(tmp_path / "served")
    assert export.main(["--checkpoint", os.path.join(FIXTURES, "tasks", "seq_single", "hf"),
                        "--output", output, "--seq-length", "16"]) == 0
    version = os.path.join(output, "1")
    _docs_commands_run_the_signature(version)
    installs = []
    monkeypatch.setattr(serving_check, "ensure_venv",
                        lambda cache, release: installs.append(release) or sys.executable)
    lines = serving_check.check(version, "2.20.0", str(tmp_path / "cache"), 1e-5)
    assert installs == ["2.20.0"]
    assert lines[-1].startswith(f"{version}: loads and answers alike in TensorFlow ")
    assert any(line.startswith("serving_default: ") and line.endswith(": same")
               for line in lines[:-1]), lines
    # A graph that does not load: one line naming the release's side.
    with open(os.path.join(version, "saved_model.pb"), "wb") as f:
        f.write(b"not a SavedModel")
    with pytest.raises(ServingCheckError, match="cannot load or run the export: ") as e:
        serving_check.check(version, "2.20.0", str(tmp_path / "cache"), 1e-5)
    assert "\n" not in str(e.value)


def _docs_commands_run_the_signature(version: str) -> None:
    """docs/serving.md's replacements for `saved_model_cli run`, run as written on `version`."""
    with open(os.path.join(REPO, "docs", "serving.md"), encoding="utf-8") as f:
        section = f.read().split("## `saved_model_cli run` says")[1].split("\n## ")[0]
    python = section.split("```python\n")[1].split("```")[0]
    shell = section.split("```bash\n")[2].split("```")[0].replace("\\\n", " ")
    outputs = [subprocess.run([sys.executable, "-c", python.replace(_DOCS_MODEL, version)],
                              capture_output=True, text=True, timeout=SAFETY_NET_S)]
    argv = shlex.split(shell.replace(_DOCS_MODEL, version))
    assert argv[0] == "python"
    outputs.append(subprocess.run([sys.executable, *argv[1:]], capture_output=True, text=True,
                                  timeout=SAFETY_NET_S))
    for done in outputs:
        assert done.returncode == 0, done.stderr[-2000:]
        assert "probabilities" in done.stdout and "label" in done.stdout, done.stdout[-2000:]
