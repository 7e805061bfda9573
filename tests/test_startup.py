"""What a command pays for before it runs: `albert-tf COMMAND --help` imports no heavy
framework, importing the packages registers nothing, and TensorFlow's start-up notices
stay off stderr (`albert_tf.infra.tf_startup`).

The import checks run in a fresh interpreter (this one has TensorFlow loaded already) and
assert on the modules it imported, not on time.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from albert_tf.infra.cli import COMMANDS
from tests.helpers.fresh_process import SAFETY_NET_S

# What `--help` must not import: the frameworks whose start-up takes seconds.
HEAVY = ("tensorflow", "tensorflow_text", "jax", "keras", "apache_beam", "torch")

# Runs the CLI as the `albert-tf` entry point does, then reports the HEAVY packages loaded.
HELP = f"""
import json, sys
from albert_tf.infra.cli import main
try:
    code = main(sys.argv[1:])
except SystemExit as e:
    code = e.code
heavy = sorted({{m.split(".")[0] for m in sys.modules}} & {set(HEAVY)!r})
print("\\n" + json.dumps({{"code": code, "heavy": heavy}}))
"""


def _fresh(script: str, *args: str) -> tuple[dict, str, str]:
    """Runs `script` in a fresh interpreter; returns the JSON its last stdout line holds,
    all of stdout and all of stderr."""
    result = subprocess.run([sys.executable, "-c", script, *args], capture_output=True,
                            text=True, timeout=SAFETY_NET_S)
    assert result.returncode == 0, result.stderr[-2000:]
    return json.loads(result.stdout.strip().splitlines()[-1]), result.stdout, result.stderr


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_commands_help_imports_no_heavy_framework(command):
    outcome, stdout, _ = _fresh(HELP, command, "--help")
    assert outcome["code"] == 0 and f"usage: albert-tf {command}" in stdout
    assert outcome["heavy"] == [], (command, outcome["heavy"])


def test_a_usage_error_is_reported_before_tensorflow_loads():
    outcome, _, _ = _fresh(HELP, "export", "--checkpoint", "c")  # --output missing
    assert outcome == {"code": 2, "heavy": []}


# A mistyped option of each command, and the option it should suggest.
TYPOS = {
    "demo": ("--outptu", "--output"), "vocab": ("--vocab-sise", "--vocab-size"),
    "create-data": ("--spm-modle", "--spm-model"), "pretrain": ("--train-dta", "--train-data"),
    "finetune": ("--chekpoint", "--checkpoint"), "export": ("--chekpoint", "--checkpoint"),
    "predict": ("--saved-modle", "--saved-model"), "convert": ("--overwirte", "--overwrite"),
    "params": ("--biuld", "--build"), "presets": ("--jsno", "--json"),
    "ablate": ("--gird", "--grid"), "serving-check": ("--relase", "--release"),
}


def test_every_command_has_a_typo_case():
    assert set(TYPOS) == set(COMMANDS)


@pytest.mark.parametrize("command", sorted(TYPOS))
def test_a_mistyped_option_is_refused_with_a_suggestion_before_tensorflow_loads(command):
    typo, meant = TYPOS[command]
    outcome, _, stderr = _fresh(HELP, command, typo, "x")  # required options missing too
    assert outcome == {"code": 2, "heavy": []}
    assert stderr.splitlines() == [
        f"albert-tf {command}: unrecognized option {typo}; did you mean {meant}?"]


# Export's question-answering options (transformers' pipeline names): a typo, and a value
# refused, each before TensorFlow loads.
QA_OPTION_CASES = [
    (("--max-answer-lne", "3"), "unrecognized option --max-answer-lne; did you mean "
                                "--max-answer-len?"),
    (("--handle-impossible-answr",), "unrecognized option --handle-impossible-answr; did you "
                                     "mean --handle-impossible-answer?"),
    (("--max-answer-len", "0"), "argument --max-answer-len: 0 must be >= 1"),
    (("--top-kk", "3"), "unrecognized option --top-kk; did you mean --top-k?"),
    (("--top-k", "x"), "argument --top-k: 'x' is not a whole number"),
]


@pytest.mark.parametrize("args, message", QA_OPTION_CASES)
def test_exports_qa_options_are_checked_before_tensorflow_loads(args, message):
    outcome, _, stderr = _fresh(HELP, "export", "--checkpoint", "c", "--output", "o", *args)
    assert outcome == {"code": 2, "heavy": []}
    assert stderr.splitlines() == [f"albert-tf export: {message}"]



# The demo's values, each refused by its command line module before the job (and
# TensorFlow) is imported: a bad value answers as fast as a typo.
@pytest.mark.parametrize("args", [("--steps", "0"), ("--minutes", "nan"), ("--size", "albert-huge"),
                                  ("--precision", "int4"), ("--seq-length", "4"),
                                  ("--questions", "/no/such/file.json"),
                                  ("--corpus", "/no/such/corpus*.txt")])
def test_the_demos_bad_values_are_refused_before_tensorflow_loads(tmp_path, args):
    outcome, _, stderr = _fresh(HELP, "demo", "--output", str(tmp_path / "out"), *args)
    assert outcome == {"code": 2, "heavy": []}
    assert len(stderr.splitlines()) == 1 and stderr.startswith("albert-tf demo: "), stderr
    assert not (tmp_path / "out").exists()  # refused before anything is written

def test_an_unknown_command_is_answered_with_the_closest_one():
    outcome, _, stderr = _fresh(HELP, "exprot", "--checkpoint", "c")
    assert outcome == {"code": 2, "heavy": []}
    assert stderr.splitlines()[0] == "albert-tf: unknown command 'exprot'; did you mean export?"
    _, _, stderr = _fresh(HELP, "zzz")
    assert stderr.splitlines()[0] == "albert-tf: unknown command 'zzz'"


def test_importing_the_packages_registers_no_file_system_and_imports_no_tensorflow():
    script = ("import json, sys\n"
              "import albert_tf, albert_tf.training, albert_tf.serving\n"
              "from albert_tf.infra import atomic\n"
              "print(json.dumps({'registered': atomic._remote_filesystem is not None,\n"
              "                  'tensorflow': 'tensorflow' in sys.modules}))\n")
    outcome, _, _ = _fresh(script)
    assert outcome == {"registered": False, "tensorflow": False}


# ---------------------------------------------------------- TensorFlow's start-up lines
# As TensorFlow 2.21 prints them at import (each twice: two of its libraries carry them).
STARTUP_LINES = [
    b"WARNING: All log messages before absl::InitializeLog() is called are written to STDERR",
    b"I0000 00:00:1795793986.340125   19486 port.cc:153] oneDNN custom operations are on. "
    b"You may see slightly different numerical results due to floating-point round-off "
    b"errors from different computation orders.",
    b"I0000 00:00:1795793986.345663   19486 cudart_stub.cc:31] Could not find cuda drivers "
    b"on your machine, GPU will not be used.",
    b"I0000 00:00:1795794004.173644   19503 cpu_feature_guard.cc:227] This TensorFlow binary "
    b"is optimized to use available CPU instructions in performance-critical operations.",
    b"To enable the following instructions: AVX2 AVX512F FMA, in other operations, rebuild "
    b"TensorFlow with the appropriate compiler flags.",
    b"W0000 00:00:1795794004.173644   19503 gpu_device.cc:2341] Cannot dlopen some GPU libraries.",
]
KEPT_LINES = [
    b"E0000 00:00:1795794004.173644   19503 op_kernel.cc:99] an error TensorFlow reports",
    b"albert-tf export: --checkpoint c: no such directory",
    b"I am not a log line: I0000 00:00:1.0 1 port.cc:1] inside",
]


def test_the_startup_notices_are_told_from_other_lines():
    from albert_tf.infra.tf_startup import is_noise

    assert all(is_noise(line + b"\n") for line in STARTUP_LINES)
    assert not any(is_noise(line + b"\n") for line in KEPT_LINES)


def test_what_tensorflow_writes_at_import_passes_without_its_notices(capfd):
    from albert_tf.infra.tf_startup import _filtered_stderr

    with _filtered_stderr():  # the file descriptor, as C++ writes it
        os.write(2, b"".join(line + b"\n" for line in STARTUP_LINES + KEPT_LINES))
    assert capfd.readouterr().err.encode() == b"".join(line + b"\n" for line in KEPT_LINES)
    with pytest.raises(ImportError):  # a failed import still gives the descriptor back
        with _filtered_stderr():
            os.write(2, STARTUP_LINES[1] + b"\n" + KEPT_LINES[0] + b"\n")
            raise ImportError("no tensorflow")
    os.write(2, b"after\n")
    assert capfd.readouterr().err.encode() == KEPT_LINES[0] + b"\nafter\n"


def test_a_command_that_imports_tensorflow_prints_only_its_own_line(tmp_path):
    """`albert-tf predict` loads TensorFlow before it finds the SavedModel missing: stderr
    holds its one-line error and nothing of TensorFlow's start-up."""
    (tmp_path / "in.txt").write_text("a text\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TF_CPP", "ALBERT_TF"))}
    script = ("import sys; from albert_tf.infra.cli import main; sys.exit(main(sys.argv[1:]))")
    result = subprocess.run([sys.executable, "-c", script, "predict", "--saved-model",
                             str(tmp_path / "missing"), "--input", str(tmp_path / "in.txt")],
                            capture_output=True, text=True, timeout=SAFETY_NET_S, env=env)
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        f"albert-tf predict: --saved-model {tmp_path / 'missing'}: no such directory"]


# TensorFlow asked for its logger before our set-up (as every command's imports do), then
# one of its INFO lines, as tf.saved_model.save writes it.
TF_LOG_LINE = """
import tensorflow as tf
tf.get_logger()
from albert_tf.infra import cli
cli.setup_logging()
tf.get_logger().info("Assets written to: %s", "X/assets")
"""


def test_a_tensorflow_log_line_is_printed_once_in_our_format():
    result = subprocess.run([sys.executable, "-c", TF_LOG_LINE], capture_output=True, text=True,
                            timeout=SAFETY_NET_S)
    assert result.returncode == 0, result.stderr
    lines = [line for line in result.stderr.splitlines() if "Assets written to" in line]
    assert len(lines) == 1, lines
    assert lines[0].endswith(" INFO tensorflow: Assets written to: X/assets"), lines
