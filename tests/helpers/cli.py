"""How the tests run `albert-tf` as a user does, in a process of its own (one home)."""

import sys

# `python -m albert_tf.infra.cli`: the console script's entry point, in this interpreter.
CLI = [sys.executable, "-m", "albert_tf.infra.cli"]
