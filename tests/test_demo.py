"""The main job: `albert-tf demo` end to end, its rerun, and its bad-input messages."""

import json
import os
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_cli(*args, timeout=1200, input_text=None):
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    return subprocess.run([sys.executable, "-m", "albert_tf.training.cli", *args], env=env,
                          capture_output=True, text=True, timeout=timeout, cwd=REPO,
                          input=input_text)


@pytest.mark.parametrize("args, message", [
    (["--corpus", "/no/such/corpus*.txt"], "matches no files"),
    (["--preset", "albert-huge"], "unknown preset 'albert-huge'"),
    (["--steps", "0"], "--steps must be at least 1"),
])
def test_bad_input_is_one_clear_line(tmp_path, args, message):
    result = run_cli("demo", "--output", str(tmp_path / "out"), *args)
    assert result.returncode == 2
    lines = [l for l in result.stderr.splitlines() if l.startswith("albert-tf demo:")]
    assert len(lines) == 1 and message in lines[0], result.stderr[-2000:]
    assert "Traceback" not in result.stderr


def test_unwritable_output_is_one_clear_line(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    result = run_cli("demo", "--output", str(blocker / "out"))
    assert result.returncode == 2
    assert "is not writable" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.slow
def test_demo_end_to_end_and_rerun_skips_finished_stages(tmp_path):
    out = tmp_path / "demo"
    first = run_cli("demo", "--output", str(out), "--steps", "8", "--batch-size", "16")
    assert first.returncode == 0, first.stderr[-4000:]
    log = first.stderr + first.stdout
    for stage in range(1, 7):
        assert f"[{stage}/6]" in log
    # Every artifact is where the report says.
    assert (out / "corpus" / "corpus.txt").stat().st_size > 1_000_000
    assert (out / "vocab" / "spiece.model").exists() and (out / "vocab" / "spiece.vocab").exists()
    summary = json.loads((out / "data" / "summary.json").read_text())
    assert summary["instances"] > 1000 and 0.12 < summary["masked_fraction"] < 0.16
    assert list((out / "data").glob("pretrain-*.tfrecord"))
    assert list((out / "pretrain" / "checkpoints").glob("*.index"))
    assert list((out / "pretrain" / "tensorboard").rglob("events.out.tfevents.*"))
    model_dir = out / "pretrain" / "model"
    assert {"albert_config.json", "model.weights.h5", "spiece.model"} <= set(os.listdir(model_dir))
    saved = out / "export" / "albert_demo" / "1"
    assert (saved / "saved_model.pb").exists()
    assert (saved / "assets.extra" / "tf_serving_warmup_requests").exists()
    # The answers came from the fresh process: four fill-mask rows and four similarities.
    assert first.stdout.count("\n    -> ") == 4
    assert "Sentence similarity" in first.stdout and "docker run" in first.stdout
    # The printed local predict command works as printed.
    command = next(l for l in first.stdout.splitlines() if "--saved-model" in l).strip()
    text, predict = command.split(" | ")
    assert predict.startswith("albert-tf predict ")
    result = run_cli(*predict.split()[1:], input_text=text.split("'")[1] + "\n")
    assert result.returncode == 0, result.stderr[-2000:]
    assert json.loads(result.stdout.splitlines()[0])["top_k_tokens"]
    assert str(saved) in first.stdout
    pretrain = json.loads((out / "pretrain" / "demo_summary.json").read_text())
    assert pretrain["steps"] == 8

    second = run_cli("demo", "--output", str(out), "--steps", "8", "--batch-size", "16")
    assert second.returncode == 0, second.stderr[-4000:]
    log = second.stderr + second.stdout
    for stage in range(1, 6):
        assert f"[{stage}/6]" in log
    assert log.count("done already, skipped") == 5
    assert second.stdout.count("\n    -> ") == 4
