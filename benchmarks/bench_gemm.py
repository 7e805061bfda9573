"""Where a batch-1 request's time goes: the encoder's matmuls alone, TensorFlow against ONNX Runtime.

A served call is almost all matmuls (docs/serving.md). This runs just them: the six
matmuls of one albert-base layer (Q, K, V, attention output: 768 x 768; FFN: 768 x 3072
and 3072 x 768, each with its bias), repeated over the 12 layers with the same weights as
ALBERT shares them, on M token rows (M = a request's tokens), in:

* TensorFlow as the exported graph runs them (`tf.matmul` + bias in a tf.function, which
  TensorFlow's oneDNN rewrite turns into `_MklNativeFusedMatMul`), float32 and bfloat16;
* TensorFlow float32 with each sublayer cut into as many independent branches as threads
  (Q/K/V and the FFN's first matmul by columns, the output matmuls by rows, the branches'
  sums added), each op on one intra-op thread and the branches side by side on the
  inter-op threads (`tf_float32_split`): what splitting a request across cores by hand
  would buy; `tf_float32_ksplit` cuts every matmul instead along its inner axis (each
  branch multiplies half the columns of x by half the rows of the weights, a slice of the
  variable TensorFlow takes without a copy) and adds the two products;
* ONNX Runtime's CPU provider on the same chain (MatMul + Add nodes, float32).

Each (stack, threads) in a process of its own, since thread pools are per process; 1 and
2 intra-op threads. It prints ms per chain and GFLOP/s, and TensorFlow's ratio to ONNX
Runtime: the per-thread efficiency and the thread scaling of the two matmul libraries,
which set how fast a batch-1 request can be.

    python benchmarks/bench_gemm.py                       # M = 16 48 128, threads 1 2
    python benchmarks/bench_gemm.py --tokens 16 --threads 2 --calls 50
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_serving import cpu_flags  # noqa: E402

HIDDEN, INTERMEDIATE, LAYERS = 768, 3072, 12
# One layer's matmuls: (rows in, columns out).
SHAPES = [(HIDDEN, HIDDEN)] * 4 + [(HIDDEN, INTERMEDIATE), (INTERMEDIATE, HIDDEN)]
STACKS = ("tf_float32", "tf_bfloat16", "tf_float32_split", "tf_float32_ksplit",
          "onnxruntime")


def flops(tokens: int) -> float:
    return 2.0 * tokens * LAYERS * sum(k * n for k, n in SHAPES)


def weights():
    import numpy as np

    rng = np.random.default_rng(0)
    return ([(rng.standard_normal(s) * 0.02).astype(np.float32) for s in SHAPES],
            [np.zeros(s[1], np.float32) for s in SHAPES])


def layers_chain(dense):
    """The 12 layers' matmuls as one tf.function, through `dense(x, i)` (kernel i of SHAPES)."""
    import tensorflow as tf

    @tf.function
    def chain(x):
        for _ in range(LAYERS):
            x = x + dense(dense(x, 0) + dense(x, 1) + dense(x, 2), 3)
            x = x + dense(tf.nn.gelu(dense(x, 4)), 5)
        return x

    return chain


def tensorflow_chain(dtype: str, threads: int):
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(threads)
    kernels, biases = weights()
    kernels = [tf.Variable(tf.cast(w, dtype)) for w in kernels]
    biases = [tf.Variable(tf.cast(b, dtype)) for b in biases]

    def dense(x, i):
        return tf.matmul(x, kernels[i]) + biases[i]

    chain = layers_chain(dense)
    return lambda x: chain(tf.cast(x, dtype))


def tensorflow_split_chain(threads: int):
    """The chain with each sublayer in `threads` independent branches, one thread per op."""
    import numpy as np
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(threads)
    kernels, biases = weights()
    # Column halves for the matmuls whose outputs stay apart (Q, K, V, FFN in), row halves
    # for the ones that sum them (attention out, FFN out): kernel i, branch b.
    by_columns = (0, 1, 2, 4)
    parts = [[tf.Variable(p) for p in np.split(w, threads, axis=1 if i in by_columns else 0)]
             for i, w in enumerate(kernels)]
    bias_parts = [[tf.Variable(p) for p in np.split(b, threads)] if i in by_columns
                  else tf.Variable(b) for i, b in enumerate(biases)]

    def branch_in(x, i, b):
        return tf.matmul(x, parts[i][b]) + bias_parts[i][b]

    @tf.function
    def chain(x):
        for _ in range(LAYERS):
            x = x + tf.add_n([tf.matmul(branch_in(x, 0, b) + branch_in(x, 1, b) +
                                        branch_in(x, 2, b), parts[3][b])
                              for b in range(threads)]) + bias_parts[3]
            x = x + tf.add_n([tf.matmul(tf.nn.gelu(branch_in(x, 4, b)), parts[5][b])
                              for b in range(threads)]) + bias_parts[5]
        return x

    return lambda x: chain(tf.constant(x))


def tensorflow_ksplit_chain(threads: int):
    """The chain with every matmul's inner axis cut in `threads`, one thread per op."""
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(threads)
    kernels, biases = weights()
    kernels = [tf.Variable(w) for w in kernels]
    biases = [tf.Variable(b) for b in biases]

    def dense(x, i):
        step = kernels[i].shape[0] // threads
        return tf.add_n([tf.matmul(x[:, b * step:(b + 1) * step],
                                   kernels[i][b * step:(b + 1) * step])
                         for b in range(threads)]) + biases[i]

    chain = layers_chain(dense)
    return lambda x: chain(tf.constant(x))


def onnxruntime_chain(threads: int):
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    kernels, biases = weights()
    initializers = [numpy_helper.from_array(w, f"w{i}") for i, w in enumerate(kernels)]
    initializers += [numpy_helper.from_array(b, f"b{i}") for i, b in enumerate(biases)]
    nodes: list = []

    def node(op, inputs, domain=""):
        name = f"t{len(nodes)}"
        nodes.append(helper.make_node(op, inputs, [name], domain=domain))
        return name

    def dense(x, i):
        return node("Add", [node("MatMul", [x, f"w{i}"]), f"b{i}"])

    x = "x"
    for _ in range(LAYERS):
        qkv = node("Add", [node("Add", [dense(x, 0), dense(x, 1)]), dense(x, 2)])
        x = node("Add", [x, dense(qkv, 3)])
        x = node("Add", [x, dense(node("Gelu", [dense(x, 4)], "com.microsoft"), 5)])
    graph = helper.make_graph(
        nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["M", HIDDEN])],
        [helper.make_tensor_value_info(x, TensorProto.FLOAT, ["M", HIDDEN])], initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid("com.microsoft", 1)])
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    session = ort.InferenceSession(model.SerializeToString(), options,
                                   providers=["CPUExecutionProvider"])
    return lambda x: session.run(None, {"x": x})


def child(stack: str, threads: int, tokens: list[int], calls: int) -> dict[int, float]:
    """{M: ms per chain}, in this process."""
    import numpy as np

    run = (onnxruntime_chain(threads) if stack == "onnxruntime" else
           tensorflow_split_chain(threads) if stack == "tf_float32_split" else
           tensorflow_ksplit_chain(threads) if stack == "tf_float32_ksplit" else
           tensorflow_chain(stack.split("_")[1], threads))
    out = {}
    for m in tokens:
        x = np.random.default_rng(1).standard_normal((m, HIDDEN)).astype(np.float32)
        for _ in range(5):
            run(x)  # kernels created
        start = time.perf_counter()
        for _ in range(calls):
            run(x)
        out[m] = (time.perf_counter() - start) / calls * 1e3
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tokens", type=int, nargs="+", default=[16, 48, 128])
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--calls", type=int, default=30, help="timed chains per figure")
    parser.add_argument("--stacks", nargs="+", choices=STACKS, default=list(STACKS))
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        stack, threads = args.child.split(":")
        print("MS " + json.dumps(child(stack, int(threads), args.tokens, args.calls)), flush=True)
        return 0
    print(f"cpu flags: {cpu_flags()}; {os.cpu_count()} cpus; load before "
          f"{os.getloadavg()[0]:.2f}; {args.calls} chains per figure", flush=True)
    figures = {}
    for threads in args.threads:
        for stack in args.stacks:
            result = subprocess.run(
                [sys.executable, __file__, "--child", f"{stack}:{threads}", "--calls",
                 str(args.calls), "--tokens", *map(str, args.tokens)],
                capture_output=True, text=True, timeout=3600)
            line = [s for s in result.stdout.splitlines() if s.startswith("MS ")]
            if result.returncode or not line:
                if stack == "onnxruntime" and "No module named" in result.stderr:
                    print("ONNX Runtime left out (pip install -e .[bench])", flush=True)
                    continue
                raise RuntimeError(result.stderr[-3000:])
            figures[stack, threads] = {int(k): v for k, v in json.loads(line[0][3:]).items()}
    stacks = [s for s in args.stacks if any(key[0] == s for key in figures)]
    print("\n| M tokens | threads | " + " | ".join(f"{s}: ms (GFLOP/s)" for s in stacks) +
          " | TensorFlow float32 / ONNX Runtime |")
    print("|---:|---:|" + "---:|" * (len(stacks) + 1))
    for m in args.tokens:
        for threads in args.threads:
            cells = [f"{figures[s, threads][m]:.1f} ({flops(m) / figures[s, threads][m] / 1e6:.0f})"
                     for s in stacks]
            ratio = (f"{figures['onnxruntime', threads][m] / figures['tf_float32', threads][m]:.2f}x"
                     if {"onnxruntime", "tf_float32"} <= set(stacks) else "-")
            print(f"| {m} | {threads} | " + " | ".join(cells) + f" | {ratio} |")
    for stack in stacks:
        if len(args.threads) > 1:
            lo, hi = min(args.threads), max(args.threads)
            print(f"{stack}: {hi} threads over {lo}: " + ", ".join(
                f"M={m} {figures[stack, lo][m] / figures[stack, hi][m]:.2f}x" for m in args.tokens))
    print(f"load after {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
