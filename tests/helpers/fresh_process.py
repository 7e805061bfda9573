"""Runs a script in a fresh Python process that must not import albert_tf, the way TF
Serving or a client sees an export: the script reads a pickled payload from argv[1]
and pickles its results (a dict with "albert_tf_imported") to argv[2]. Signature calls
go to one such process per test worker (`call_signatures`), as requests go to a server."""

from __future__ import annotations

import atexit
import pickle
import select
import subprocess
import sys
import tempfile

# How long a test waits for a child process: a safety net for a hang, far above what any
# machine needs (a loaded 2-core one took over 120 s to import JAX, Keras and TensorFlow);
# the verdict is what the process did, never how long it took.
SAFETY_NET_S = 1800


def _handed_over(payload, folder):
    """Pickles `payload` to FOLDER/in.pkl; returns it and FOLDER/out.pkl, for the results."""
    source, target = folder / "in.pkl", folder / "out.pkl"
    with open(source, "wb") as f:
        pickle.dump(payload, f)
    return source, target


def _without_albert_tf(outputs: dict) -> dict:
    """A process's results, once checked to come from a process that never imported albert_tf."""
    assert outputs.pop("albert_tf_imported") is False
    return outputs


def run_fresh(script: str, payload, folder) -> dict:
    """Runs `script` on `payload` in a fresh process; returns its results, after
    checking that it exited 0 and never imported albert_tf."""
    source, target = _handed_over(payload, folder)
    result = subprocess.run([sys.executable, "-c", script, str(source), str(target)],
                            capture_output=True, text=True, timeout=SAFETY_NET_S)
    assert result.returncode == 0, result.stderr[-3000:]
    with open(target, "rb") as f:
        return _without_albert_tf(pickle.load(f))


# A stand-in for TF Serving: one process per test worker, started on the first call, that
# loads SavedModels and calls their signatures as a server does, with TensorFlow and
# tensorflow-text alone. Each line on its stdin names a payload file and a results file;
# it answers "done RESULTS" on stdout once they are written. It ends when its stdin closes,
# so it ends with the worker that started it.
SIGNATURE_SERVER = r"""
import pickle, sys, traceback
import tensorflow as tf
import tensorflow_text  # noqa: F401  (the SentencePiece ops)
for line in sys.stdin:
    source, target = line.rstrip("\n").split("\t")
    results, error = {}, None
    try:
        calls = pickle.load(open(source, "rb"))
        for key, (path, signature, inputs) in calls.items():
            model = tf.saved_model.load(path)
            out = model.signatures[signature](**{k: tf.constant(v) for k, v in inputs.items()})
            results[key] = {k: v.numpy() for k, v in out.items()}
            del model
    except Exception:
        error = traceback.format_exc()
    results["albert_tf_imported"] = any(m.startswith("albert_tf") for m in sys.modules)
    pickle.dump((results, error), open(target, "wb"))
    print("done", target, flush=True)
"""


class _SignatureServer:
    """The worker's signature-calling process (`SIGNATURE_SERVER`), restarted if it died."""

    def __init__(self):
        self.process: subprocess.Popen | None = None
        self.log = None

    def call(self, calls: dict, folder) -> dict:
        if self.process is None or self.process.poll() is not None:
            self.log = tempfile.TemporaryFile("w+")
            self.process = subprocess.Popen([sys.executable, "-c", SIGNATURE_SERVER],
                                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                            stderr=self.log, text=True)
            atexit.register(self.process.stdin.close)
        source, target = _handed_over(calls, folder)
        self.process.stdin.write(f"{source}\t{target}\n")
        self.process.stdin.flush()
        ready, _, _ = select.select([self.process.stdout], [], [], SAFETY_NET_S)
        answer = self.process.stdout.readline() if ready else ""
        if answer != f"done {target}\n":  # not an answer left from an interrupted call
            self.process.kill()
            self.process.wait()
            self.log.seek(0)
            raise AssertionError(f"the signature server gave {answer!r}; its stderr ends:\n"
                                 f"{self.log.read()[-3000:]}")
        with open(target, "rb") as f:
            outputs, error = pickle.load(f)
        assert error is None, error
        return _without_albert_tf(outputs)


_SERVER = _SignatureServer()


def call_signatures(calls: dict, folder) -> dict:
    """{key: (saved_model_dir, signature, inputs)} -> {key: {output: array}}: each
    SavedModel loaded and its signature called in the worker's signature server, a process
    that never imports albert_tf (as TF Serving, it serves many exports in turn)."""
    return _SERVER.call(calls, folder)
