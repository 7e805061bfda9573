"""Runs a script in a fresh Python process that must not import albert_tf, the way TF
Serving or a client sees an export: the script reads a pickled payload from argv[1]
and pickles its results (a dict with "albert_tf_imported") to argv[2]."""

from __future__ import annotations

import pickle
import subprocess
import sys


def run_fresh(script: str, payload, folder) -> dict:
    """Runs `script` on `payload` in a fresh process; returns its results, after
    checking that it exited 0 and never imported albert_tf."""
    source, target = folder / "in.pkl", folder / "out.pkl"
    with open(source, "wb") as f:
        pickle.dump(payload, f)
    result = subprocess.run([sys.executable, "-c", script, str(source), str(target)],
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    with open(target, "rb") as f:
        outputs = pickle.load(f)
    assert outputs.pop("albert_tf_imported") is False
    return outputs
