"""Runs a script in a fresh Python process that must not import albert_tf, the way TF
Serving or a client sees an export: the script reads a pickled payload from argv[1]
and pickles its results (a dict with "albert_tf_imported") to argv[2]."""

from __future__ import annotations

import pickle
import subprocess
import sys

# How long a test waits for a child process: a safety net for a hang, far above what any
# machine needs (a loaded 2-core one took over 120 s to import JAX, Keras and TensorFlow);
# the verdict is what the process did, never how long it took.
SAFETY_NET_S = 1800


def run_fresh(script: str, payload, folder) -> dict:
    """Runs `script` on `payload` in a fresh process; returns its results, after
    checking that it exited 0 and never imported albert_tf."""
    source, target = folder / "in.pkl", folder / "out.pkl"
    with open(source, "wb") as f:
        pickle.dump(payload, f)
    result = subprocess.run([sys.executable, "-c", script, str(source), str(target)],
                            capture_output=True, text=True, timeout=SAFETY_NET_S)
    assert result.returncode == 0, result.stderr[-3000:]
    with open(target, "rb") as f:
        outputs = pickle.load(f)
    assert outputs.pop("albert_tf_imported") is False
    return outputs


# Loads each SavedModel and calls one signature: what TF Serving does with a request.
SIGNATURE_CALLS = r"""
import pickle, sys
import tensorflow as tf
import tensorflow_text  # noqa: F401  (the SentencePiece ops)
calls = pickle.load(open(sys.argv[1], "rb"))
results = {}
for key, (path, signature, inputs) in calls.items():
    model = tf.saved_model.load(path)
    out = model.signatures[signature](**{k: tf.constant(v) for k, v in inputs.items()})
    results[key] = {k: v.numpy() for k, v in out.items()}
results["albert_tf_imported"] = any(m.startswith("albert_tf") for m in sys.modules)
pickle.dump(results, open(sys.argv[2], "wb"))
"""


def call_signatures(calls: dict, folder) -> dict:
    """{key: (saved_model_dir, signature, inputs)} -> {key: {output: array}}, each call
    made in one fresh process that never imports albert_tf."""
    return run_fresh(SIGNATURE_CALLS, calls, folder)
