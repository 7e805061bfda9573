"""Runs Python code in a fresh process on Keras' JAX backend (the backend is chosen at
import, so it cannot change inside the test process)."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.helpers.fresh_process import SAFETY_NET_S
from tests.helpers.paths import REPO


def run_on_jax(code: str) -> str:
    """`code`'s stdout, after checking that it exited 0 (its stderr shown otherwise)."""
    env = {**os.environ, "KERAS_BACKEND": "jax"}
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                            text=True, cwd=REPO, timeout=SAFETY_NET_S)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout
