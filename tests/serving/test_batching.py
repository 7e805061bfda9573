"""`export --batching`: concurrent requests joined by TensorFlow's BatchFunction op inside the
SavedModel answer exactly what the plain export answers, call by call and from many threads
at once, with the same fused kernels; the options are refused where they cannot apply."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from albert_tf.infra import cli
from albert_tf.serving import export
from albert_tf.serving.provenance import PROVENANCE_FILE
from albert_tf.serving.signatures.base import Batching
from tests.helpers.fresh_process import run_fresh
from tests.helpers.paths import REPO, TASK_FIXTURES

TEXTS = [b"", b"a gripping, funny film", b"dull.", "Caf\u00e9 \U0001F600 ".encode() * 30,
         b"bad \xff bytes", b"one more text of medium length for the queue"]

# In a fresh process: each export's outputs for the whole batch, then each text sent alone
# from its own thread, all threads at once (16 calls in flight), for each signature; and
# the op types one call runs (TensorFlow's profiler, `benchmarks/serving_profile.py`).
CONCURRENT = r"""
import pickle, sys, threading
import numpy as np
import tensorflow as tf
import tensorflow_text  # noqa: F401
payload = pickle.load(open(sys.argv[1], "rb"))
sys.path.insert(0, payload.pop("benchmarks"))
from serving_profile import op_split
results = {}
for key, (path, signature, inputs, output) in payload.items():
    model = tf.saved_model.load(path)
    fn = model.signatures[signature]
    whole = fn(**{k: tf.constant(v) for k, v in inputs.items()})[output].numpy()
    rows = len(next(iter(inputs.values())))
    alone = [None] * (rows * 4)
    def call(i):
        one = {k: tf.constant(v[i % rows:i % rows + 1]) for k, v in inputs.items()}
        alone[i] = fn(**one)[output].numpy()[0]
    threads = [threading.Thread(target=call, args=(i,)) for i in range(rows * 4)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    graph = fn.graph.as_graph_def()
    ops = {n.op for n in graph.node} | {n.op for f in graph.library.function for n in f.node_def}
    first = {k: tf.constant(v[:1]) for k, v in inputs.items()}
    ran = set(op_split(lambda: fn(**first), calls=2))
    results[key] = {"whole": whole, "alone": np.stack(alone), "batch_op": "BatchFunction" in ops,
                    "ran": ran}
results["albert_tf_imported"] = any(m.startswith("albert_tf") for m in sys.modules)
pickle.dump(results, open(sys.argv[2], "wb"))
"""


def _provenance(path: str) -> dict:
    with open(os.path.join(path, PROVENANCE_FILE), encoding="utf-8") as f:
        return json.load(f)


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
    root = tmp_path_factory.mktemp("batching")
    paths = {}
    for name in ("seq_single", "choice"):
        source = os.path.join(TASK_FIXTURES, name, "hf")
        paths[name, "plain"] = export.export(source, str(root / name / "plain"), seq_length=48)
        paths[name, "batched"] = export.export(
            source, str(root / name / "batched"), seq_length=48,
            batching=Batching(max_batch_size=4, timeout_ms=20.0))
    return paths


@pytest.mark.slow
def test_batched_exports_answer_as_the_plain_ones_under_concurrent_calls(exports, tmp_path):
    options = np.array([[b"a cat", b"a dog"], ["\u00fcber".encode(), b"\xff"], [b"", b"yes"]],
                       dtype=object)
    cases = {"seq_single": ("text_pair", {"text_a": np.array(TEXTS, dtype=object),
                                          "text_b": np.array(TEXTS[::-1], dtype=object)},
                            "probabilities"),
             "choice": ("serving_default", {"context": np.array(TEXTS[:3], dtype=object),
                                            "options": options}, "probabilities")}
    payload = {(name, kind): (exports[name, kind], *cases[name])
               for name in cases for kind in ("plain", "batched")}
    payload["benchmarks"] = os.path.join(REPO, "benchmarks")
    results = run_fresh(CONCURRENT, payload, tmp_path)
    for name in cases:
        plain, batched = results[name, "plain"], results[name, "batched"]
        assert batched["batch_op"] and not plain["batch_op"], name
        recorded = [_provenance(exports[name, kind])["batching"] for kind in ("plain", "batched")]
        assert recorded[0] is None and recorded[1]["max_batch_size"] == 4 \
            and recorded[1]["timeout_ms"] == 20.0, recorded
        np.testing.assert_allclose(batched["whole"], plain["whole"], atol=1e-6, err_msg=name)
        rows = len(plain["whole"])
        expected = np.concatenate([plain["whole"]] * 4)[:rows * 4]
        np.testing.assert_allclose(batched["alone"], expected, atol=1e-6, err_msg=name)
        np.testing.assert_allclose(plain["alone"], expected, atol=1e-6, err_msg=name)
        # The batched model call is optimized as the plain one: the same matmul kernels
        # (bias and GELU fused into them), no GELU left to run op by op.
        kernels = [{op for op in results[name, kind]["ran"] if "MatMul" in op}
                   for kind in ("plain", "batched")]
        assert kernels[0] == kernels[1] and any("Fused" in op for op in kernels[0]), kernels
        assert "Pow" not in plain["ran"] and "Pow" not in batched["ran"], name


@pytest.mark.parametrize("args, message", [
    (["--batching-timeout-ms", "5"], "--batching-timeout-ms goes with --batching"),
    (["--batching", "--batching-max-size", "0"], "--batching-max-size 0: expected 1 to 1024"),
    (["--batching", "--batching-timeout-ms", "nan"], "--batching-timeout-ms nan: expected 0 to 1000"),
    (["--batching", "--token-ids-only"], "--batching goes with the text signatures"),
    (["--batching", "--task", "encoder"], "--batching joins one-row-per-text model calls"),
])
def test_batching_options_are_refused_in_one_line(tmp_path, capsys, args, message):
    code = cli.main(["export", "--checkpoint", os.path.join(TASK_FIXTURES, "seq_single", "hf"),
                     "--output", str(tmp_path / "m"), *args])
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert code == 2 and last.startswith("albert-tf export: ") and message in last, last
    assert not os.path.exists(tmp_path / "m" / "1")


def test_a_wrong_flag_is_refused_before_a_hub_handle_is_fetched(tmp_path, capsys, monkeypatch):
    """The flags are checked first: a typo does not wait on (or fail with) a download."""
    from albert_tf.serving import export_plan

    fetched = []
    monkeypatch.setattr(export_plan, "resolve_checkpoint", lambda path: fetched.append(path) or path)
    code = cli.main(["export", "--checkpoint", "hf://albert/albert-base-v2", "--output",
                     str(tmp_path / "m"), "--batching", "--batching-max-size", "0"])
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert code == 2 and "--batching-max-size 0: expected 1 to 1024" in last, last
    assert fetched == []
