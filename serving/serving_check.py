"""`albert-tf serving-check EXPORT --release X.Y.Z`: the export loaded by a release's TensorFlow.

`server_releases` compares the tensorflow-text ops an export needs with those a release
links; the core ops and attributes of a graph made by a newer TensorFlow are only known
by loading it. The check installs, once per release, a virtualenv under `--cache` with the
TensorFlow the release is built on and the tensorflow-text built against it
(`server_releases.python_packages`), then, each in a separate process, loads the export
in that TensorFlow and in this one, replays its warmup requests (`warmup.read_warmup`)
through the signatures, and compares the answers: numbers to `--atol`, everything else
exactly. One line per signature and a verdict on stdout; a load failure or a different
answer is one line and exit status 2. It installs TensorFlow, so it is not part of the test
suite (the comparison and the tables are).
"""

from __future__ import annotations

import argparse
import base64
import json
import logging
import os
import subprocess
import sys
import tempfile
from collections.abc import Sequence

import numpy as np

from albert_tf.errors import UserError
from albert_tf.infra import atomic, cli

from . import check_command, layout, server_releases, warmup

logger = logging.getLogger(__name__)

VENV_DIR = "venv"

# Run by both interpreters: loads the export, answers each request, writes TensorProtos
# (bytes every TensorFlow version reads) or the first line of the error. It must run on
# every TensorFlow the table names, so it uses only long-standing public APIs.
_MARK = "albert-tf serving-check answer: "  # starts the child's one line of JSON
_ANSWER = r"""
import base64, json, sys
try:
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (the custom ops)
    from tensorflow.core.framework import tensor_pb2
    model = tf.saved_model.load(sys.argv[1])
    answers = []
    for request in json.load(open(sys.argv[2])):
        inputs = {k: tf.constant(tf.make_ndarray(tensor_pb2.TensorProto.FromString(
            base64.b64decode(v)))) for k, v in request["inputs"].items()}
        got = model.signatures[request["signature"]](**inputs)
        answers.append({k: base64.b64encode(tf.make_tensor_proto(v.numpy())
                        .SerializeToString()).decode() for k, v in got.items()})
    result = {"answers": answers, "tensorflow": tf.__version__,
              "tensorflow_text": tensorflow_text.__version__}
except Exception as e:
    lines = str(e).strip().splitlines() or [""]
    result = {"error": type(e).__name__ + ": " + lines[0]}
print(MARK + json.dumps(result))  # the last stdout line: nothing is written to a file
"""


class ServingCheckError(UserError):
    """The export does not load, or answers differently, in the release's TensorFlow."""


def requests_of(export_dir: str) -> list[dict]:
    """The warmup requests as [{"signature", "inputs": {name: base64 TensorProto}}]."""
    if not os.path.isfile(os.path.join(export_dir, layout.SAVED_MODEL_FILE)):
        raise ServingCheckError(f"{export_dir}: no {layout.SAVED_MODEL_FILE}; give an exported "
                                "version directory (BASE/NAME/VERSION)")
    if not os.path.isfile(warmup.warmup_path(export_dir)):
        raise ServingCheckError(f"{export_dir}: no {warmup.WARMUP_DIR}/{warmup.WARMUP_FILE} to "
                                "replay (albert-tf export writes one)")
    warmup.require_serving_api()
    return [{"signature": r.model_spec.signature_name or "serving_default",
             "inputs": {k: base64.b64encode(v.SerializeToString()).decode()
                        for k, v in r.inputs.items()}} for r in warmup.read_warmup(export_dir)]


def compare(signatures: Sequence[str], want: list[dict], got: list[dict],
            atol: float) -> list[tuple[str, int, float, str | None]]:
    """Per signature, in first-seen order: (name, requests, largest numeric |difference|,
    the first difference past `atol` or None). `want`/`got`: per request, {output: array}."""
    rows: dict[str, list] = {}
    for signature, a, b in zip(signatures, want, got):
        row = rows.setdefault(signature, [signature, 0, 0.0, None])
        row[1] += 1
        for key in sorted(set(a) | set(b)):
            problem = None
            if key not in a or key not in b:
                problem = f"output {key} only in {'the release' if key in b else 'this TensorFlow'}"
            elif a[key].shape != b[key].shape:
                problem = f"output {key} has shape {b[key].shape}, not {a[key].shape}"
            elif a[key].dtype.kind in "fc":
                delta = _largest_difference(a[key], b[key])
                row[2] = max(row[2], delta)
                if not delta <= atol:  # NaN included
                    problem = f"output {key} differs by {delta:.3g} > {atol:g}"
            elif not np.array_equal(a[key], b[key]):
                problem = f"output {key} differs"
            if problem and row[3] is None:
                row[3] = f"request {row[1]}: {problem}"
    return [tuple(row) for row in rows.values()]


def _largest_difference(a: np.ndarray, b: np.ndarray) -> float:
    """max |a - b|, where equal values (the same infinity, NaN beside NaN) differ by 0; NaN
    where one side is NaN or infinite and the other is not."""
    x, y = a.astype(np.float64), b.astype(np.float64)
    same = (x == y) | (np.isnan(x) & np.isnan(y))
    with np.errstate(invalid="ignore"):
        return float(np.max(np.where(same, 0.0, np.abs(x - y)), initial=0.0))


def ensure_venv(cache: str, release: str) -> str:
    """The python of the release's virtualenv under `cache`, made (minutes) when missing:
    built beside its final name and renamed when the install succeeded."""
    packages = server_releases.python_packages(release)
    folder = os.path.join(os.path.expanduser(cache), release)
    python = os.path.join(folder, VENV_DIR, "bin", "python")
    if os.path.isfile(python):
        logger.info("using %s (%s)", os.path.join(folder, VENV_DIR), " ".join(packages))
        return python
    logger.info("installing %s into %s (minutes; once per release)", " ".join(packages),
                os.path.join(folder, VENV_DIR))
    # Built under a hidden name and renamed when pip succeeded; removed on failure, so a
    # half-made virtualenv is never reused.
    with atomic.staged_directory(os.path.join(folder, VENV_DIR)) as partial:
        _run([sys.executable, "-m", "venv", partial], "python -m venv")
        _run([os.path.join(partial, "bin", "python"), "-m", "pip", "install", "--progress-bar",
              "off", *packages], "pip install " + " ".join(packages), progress=True)
    return python


def _run(command: list[str], what: str, progress: bool = False) -> None:
    """Runs `command`, logging pip's Collecting/Installing lines; one line if it fails."""
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True)
    tail = []
    for line in process.stdout:
        line = line.rstrip()
        tail = (tail + [line])[-20:]
        if progress and line.startswith(("Collecting tensorflow", "Installing",
                                         "Successfully")):
            logger.info("%s", line[:200])
    if process.wait() != 0:
        last = next((t for t in reversed(tail) if t.startswith("ERROR")), tail[-1] if tail else "")
        raise ServingCheckError(f"{what} failed (status {process.returncode}): {last}")


def answers(python: str, export_dir: str, requests_file: str, folder: str, name: str):
    """Starts `python` answering the requests; a handle for `collect`."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="")
    env.pop("PYTHONPATH", None)  # the release's interpreter sees its own packages only
    process = subprocess.Popen([python, "-c", f"MARK = {_MARK!r}\n" + _ANSWER, export_dir,
                                requests_file], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, env=env, cwd=folder)
    return process, name


def collect(handle, who: str) -> dict:
    """{"answers": [{output: array}], versions} of a finished `answers`; error on failure."""
    import tensorflow as tf  # deferred: only to read the answers' TensorProtos
    from tensorflow.core.framework import tensor_pb2

    process, _ = handle
    stdout, stderr = process.communicate()
    lines = [line for line in stdout.splitlines() if line.startswith(_MARK)]
    if not lines:
        last = (stderr.strip().splitlines() or [f"status {process.returncode}"])[-1]
        raise ServingCheckError(f"{who} did not answer: {last[:300]}")
    result = json.loads(lines[-1][len(_MARK):])
    if "error" in result:
        raise ServingCheckError(f"{who} cannot load or run the export: {result['error'][:400]}")
    result["answers"] = [{k: tf.make_ndarray(tensor_pb2.TensorProto.FromString(
        base64.b64decode(v))) for k, v in a.items()} for a in result["answers"]]
    return result


def check(export_dir: str, release: str, cache: str, atol: float) -> list[str]:
    """The lines to print: one per signature, then the verdict (see the module docstring)."""
    try:
        server_releases.python_packages(release)
    except ValueError as e:
        raise ServingCheckError(f"--release {e}") from None
    if not atol >= 0:
        raise ServingCheckError(f"--atol {atol}: expected a number >= 0")
    export_dir = os.path.abspath(export_dir)
    requests = requests_of(export_dir)
    python = ensure_venv(cache, release)
    with tempfile.TemporaryDirectory(prefix="albert-tf-serving-check-") as folder:
        requests_file = os.path.join(folder, "requests.json")
        atomic.atomic_write_json(requests_file, requests)
        logger.info("replaying %d warmup requests here and in the release's TensorFlow",
                    len(requests))
        here = answers(sys.executable, export_dir, requests_file, folder, "here")
        there = answers(python, export_dir, requests_file, folder, "release")
        ours = collect(here, "this TensorFlow")
        theirs = collect(there, f"TensorFlow for tensorflow/serving {release}")
    rows = compare([r["signature"] for r in requests], ours["answers"], theirs["answers"],
                   atol)
    lines = [f"{name}: {count} requests, largest |difference| {delta:.2g}: "
             + (problem or "same") for name, count, delta, problem in rows]
    where = (f"TensorFlow {theirs['tensorflow']} / tensorflow-text {theirs['tensorflow_text']} "
             f"(tensorflow/serving {release}'s) against TensorFlow {ours['tensorflow']}")
    bad = [f"{name}: {problem}" for name, _, _, problem in rows if problem]
    if bad:
        raise ServingCheckError(f"{export_dir} answers differently in {where}: "
                                + "; ".join(bad))
    return lines + [f"{export_dir}: loads and answers alike in {where}"]


def run_command(args: argparse.Namespace) -> int:
    """`albert-tf serving-check` with its parsed arguments (`check_command.parser`)."""
    cli.setup_logging()
    for line in check(args.export, args.release, args.cache, args.atol):
        sys.stdout.write(line + "\n")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return run_command(check_command.parse(sys.argv[1:] if argv is None else argv))


if __name__ == "__main__":
    sys.exit(main())
