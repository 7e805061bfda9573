"""Where a served call's time goes: TensorFlow's profiler by op type, oneDNN's by kernel.

Used by `bench_serving.py --profile`:

* `op_split(fn, calls)`: TensorFlow's profiler (`tf.profiler.experimental`) over `calls`
  calls of `fn`; the host plane's op events summed per op type, per call (matmul kernels,
  attention, element-wise, the rest).
* `onednn_split(saved_model, signature, inputs_npz, calls)`: a child process with
  ONEDNN_VERBOSE=1 (it must be set before TensorFlow starts) runs the signature; the
  primitive executions of its last `calls` calls are summed per primitive kind,
  implementation (the ISA) and weight layout, so a matmul that repacks its weights on
  every call, or runs on a plain-layout gemm, shows by name.

    python benchmarks/serving_profile.py --onednn MODEL_DIR SIGNATURE INPUTS.npz CALLS
"""

from __future__ import annotations

import collections
import glob
import os
import shutil
import subprocess
import sys
import tempfile

# Op types of the matmul kernels TensorFlow runs on CPU (oneDNN names, plain names).
MATMUL_OPS = ("_MklNativeFusedMatMul", "_MklFusedMatMul", "_MklMatMul", "MatMul", "_FusedMatMul",
              "_MklBatchMatMulV2", "BatchMatMulV2", "_MklEinsum", "Einsum")
# Profiler events that enclose others (the function, the executor): not op time.
_ENCLOSING = ("Process", "Run")


def op_split(fn, calls: int = 5) -> dict[str, tuple[float, float]]:
    """{op type: (ms per call, ops per call)} of `calls` calls of `fn`, profiled."""
    import tensorflow as tf
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    folder = tempfile.mkdtemp()
    try:
        tf.profiler.experimental.start(folder)
        for _ in range(calls):
            fn()
        tf.profiler.experimental.stop()
        path = glob.glob(os.path.join(folder, "**", "*.xplane.pb"), recursive=True)[0]
        space = xplane_pb2.XSpace()
        with open(path, "rb") as f:
            space.ParseFromString(f.read())
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    times, counts = collections.Counter(), collections.Counter()
    for plane in space.planes:
        if not plane.name.startswith("/host:CPU"):
            continue
        for line in plane.lines:
            for event in line.events:
                name = plane.event_metadata[event.metadata_id].name
                if ":" not in name or name.startswith(("$", "__inference")):
                    continue  # TF op events are "node name:op type"
                op_type = name.rsplit(":", 1)[1].strip()
                if op_type in _ENCLOSING or op_type.startswith("__inference"):
                    continue
                times[op_type] += event.duration_ps / 1e9 / calls
                counts[op_type] += 1 / calls
    return {op: (times[op], counts[op]) for op in times}


def group_ops(split: dict[str, tuple[float, float]]) -> dict[str, float]:
    """ms per call in matmul kernels, softmax, and everything else."""
    groups = collections.Counter()
    for op, (ms, _) in split.items():
        group = ("matmul kernels" if op in MATMUL_OPS else
                 "softmax" if "Softmax" in op else "everything else")
        groups[group] += ms
    return dict(groups)


def onednn_split(saved_model: str, signature: str, inputs_npz: str,
                 calls: int = 5) -> dict[tuple[str, str, str], tuple[float, int]]:
    """{(primitive kind, implementation, weight layout): (ms per call, executions per call)}."""
    env = {**os.environ, "ONEDNN_VERBOSE": "1", "TF_CPP_MIN_LOG_LEVEL": "2"}
    result = subprocess.run([sys.executable, os.path.abspath(__file__), "--onednn", saved_model,
                             signature, inputs_npz, str(calls)], env=env, capture_output=True,
                            text=True, check=True)
    lines = result.stdout.splitlines()
    start = max(i for i, line in enumerate(lines) if line == "--- timed calls ---")
    split: dict = collections.defaultdict(lambda: [0.0, 0])
    for line in lines[start + 1:]:
        fields = line.split(",")
        if not line.startswith("onednn_verbose") or fields[2:4] != ["primitive", "exec"]:
            continue
        kind, implementation, descriptors = fields[5], fields[6], fields[8]
        # "wei:f32:a:blocked:AB16b32a::f0": data type, padding, format kind, layout tag
        weights = next((d.split(":")[4] for d in descriptors.split()
                        if d.startswith("wei:")), "-")
        key = (kind, implementation, weights)
        split[key][0] += float(fields[-1]) / calls
        split[key][1] += 1
    return {key: (ms, count // calls) for key, (ms, count) in split.items()}


def _run_onednn(saved_model: str, signature: str, inputs_npz: str, calls: int) -> None:
    import ctypes

    import numpy as np
    import tensorflow as tf
    import tensorflow_text  # noqa: F401 (the text signatures' ops)

    fn = tf.saved_model.load(saved_model).signatures[signature]
    inputs = {k: tf.constant(v) for k, v in np.load(inputs_npz, allow_pickle=False).items()}
    libc = ctypes.CDLL(None)
    for _ in range(3):  # kernels created, weights packed where they are cached
        fn(**inputs)
    libc.fflush(None)  # oneDNN prints through C's stdout buffer
    print("--- timed calls ---", flush=True)
    for _ in range(calls):
        fn(**inputs)
    libc.fflush(None)


if __name__ == "__main__" and sys.argv[1:2] == ["--onednn"]:
    _run_onednn(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]))
