"""What a command pays for before it runs: `albert-tf COMMAND --help` imports no heavy
framework, and importing the packages registers nothing.

Each check runs in a fresh interpreter (this one has TensorFlow loaded already) and
asserts on the modules it imported, not on time.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from albert_tf.cli import COMMANDS

# What `--help` must not import: the frameworks whose start-up takes seconds.
HEAVY = ("tensorflow", "tensorflow_text", "jax", "keras", "apache_beam", "torch")

# Runs the CLI as the `albert-tf` entry point does, then reports the HEAVY packages loaded.
HELP = f"""
import json, sys
from albert_tf.cli import main
try:
    code = main(sys.argv[1:])
except SystemExit as e:
    code = e.code
heavy = sorted({{m.split(".")[0] for m in sys.modules}} & {set(HEAVY)!r})
print("\\n" + json.dumps({{"code": code, "heavy": heavy}}))
"""


def _fresh(script: str, *args: str) -> tuple[dict, str]:
    """Runs `script` in a fresh interpreter; returns the JSON its last stdout line holds,
    and all of stdout."""
    result = subprocess.run([sys.executable, "-c", script, *args], capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    return json.loads(result.stdout.strip().splitlines()[-1]), result.stdout


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_commands_help_imports_no_heavy_framework(command):
    outcome, stdout = _fresh(HELP, command, "--help")
    assert outcome["code"] == 0 and f"usage: albert-tf {command}" in stdout
    assert outcome["heavy"] == [], (command, outcome["heavy"])


def test_a_usage_error_is_reported_before_tensorflow_loads():
    outcome, _ = _fresh(HELP, "export", "--checkpoint", "c")  # --output missing
    assert outcome == {"code": 2, "heavy": []}


def test_importing_the_packages_registers_no_file_system_and_imports_no_tensorflow():
    script = ("import json, sys\n"
              "import albert_tf, albert_tf.training, albert_tf.serving\n"
              "from albert_tf import atomic\n"
              "print(json.dumps({'registered': atomic._remote_filesystem is not None,\n"
              "                  'tensorflow': 'tensorflow' in sys.modules}))\n")
    outcome, _ = _fresh(script)
    assert outcome == {"registered": False, "tensorflow": False}
