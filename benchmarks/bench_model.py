"""Encoder forward and train-step throughput, peak memory and MFU, ours vs KerasHub.

Each measurement runs in its own subprocess so that its peak resident memory
(ru_maxrss) is its own and one XLA compilation does not warm the next. The
matmul peak used for model-FLOPs utilisation is measured in the same run.

    python benchmarks/bench_model.py                 # the full table (~15 min on 2 cores)
    python benchmarks/bench_model.py --quick         # fewer steps, seq 128 only
    python benchmarks/bench_model.py --one '{"impl": "ours", ...}'   # one row, JSON out
    python benchmarks/bench_model.py --compare attention   # fused vs einsum attention
    python benchmarks/bench_model.py --compare precision   # float32 vs mixed_bfloat16
    python benchmarks/bench_model.py --profile mixed_bfloat16   # where a train step's time goes

`--compare` builds every variant in one process and times them interleaved
(A, B, A, B, ...; medians over --repeats), which keeps ratios honest on a busy
machine; `--compare precision` also measures both matmul peaks in the same run.

KerasHub rows appear when keras-hub is installed (`pip install -e .[bench]`).
Both sides run the same Keras backend with jit_compile=True, the same optimizer
(Adam) and the same loss (mean square of the sequence output), so the train step
differs only in the encoder.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import sys
import time

import table_runs  # (benchmarks/, the script's folder)

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def encoder_flops_per_token(size: str, seq: int) -> float:
    """Forward matmul FLOPs per token (2 per multiply-add), embeddings lookups excluded."""
    from albert_tf import AlbertConfig

    c = AlbertConfig.from_size(size)
    h, i, e, layers = c.hidden_size, c.intermediate_size, c.embedding_size, c.num_hidden_layers
    per_layer = 2 * (4 * h * h + 2 * h * i) + 2 * 2 * seq * h  # projections + QK^T and PV
    projection = 2 * e * h if e != h else 0
    return layers * c.inner_group_num * per_layer + projection + 2 * h * h / seq  # pooler on [CLS]


def cpu_flags() -> str:
    """The CPU's SIMD / matrix flags relevant here (from /proc/cpuinfo)."""
    from albert_tf.training.runtime.distribute import cpu_bf16_features

    features = cpu_bf16_features()
    return " ".join(sorted(features)) or "no avx512 / amx flags"


def build(impl: str, size: str, precision: str):
    import keras

    from albert_tf import AlbertConfig, AlbertEncoder

    config = AlbertConfig.from_size(size)
    dtype = None if precision == "float32" else precision
    if impl == "ours":
        encoder = AlbertEncoder(config, dtype=dtype)
        names = ("input_word_ids", "input_mask", "input_type_ids")
    else:
        import keras_hub

        encoder = keras_hub.models.AlbertBackbone(
            vocabulary_size=config.vocab_size, num_layers=config.num_hidden_layers,
            num_heads=config.num_attention_heads, embedding_dim=config.embedding_size,
            hidden_dim=config.hidden_size, intermediate_dim=config.intermediate_size,
            num_groups=config.num_hidden_groups, dropout=0.0,
            max_sequence_length=config.max_position_embeddings, dtype=dtype)
        names = ("token_ids", "padding_mask", "segment_ids")
    inputs = {n: keras.Input((None,), dtype="int32", name=n) for n in names}
    sequence = encoder(inputs)["sequence_output"]
    model = keras.Model(inputs, keras.ops.cast(sequence, "float32"))
    return model, names


def make_step(spec: dict):
    """(step function, model) for one spec: a compiled train or predict step on fixed inputs."""
    import keras
    import numpy as np

    model, names = build(spec["impl"], spec["size"], spec["precision"])
    batch, seq = spec["batch"], spec["seq"]
    rng = np.random.default_rng(0)
    x = {names[0]: rng.integers(5, 30000, (batch, seq)).astype("int32"),
         names[1]: np.ones((batch, seq), "int32"), names[2]: np.zeros((batch, seq), "int32")}
    optimizer = keras.optimizers.Adam(1e-4)
    if spec["precision"] == "mixed_float16":
        optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
    model.compile(optimizer=optimizer, loss="mse", jit_compile=spec.get("jit", True))
    if spec["mode"] == "train":
        y = np.zeros((batch, seq, model.output_shape[-1]), "float32")
        step = lambda: model.train_on_batch(x, y)  # noqa: E731
    else:
        step = lambda: model.predict_on_batch(x)  # noqa: E731
    return step, model


def measure(spec: dict) -> dict:
    import numpy as np

    step, _ = make_step(spec)
    batch, seq = spec["batch"], spec["seq"]
    for _ in range(spec["warmup"]):
        step()
    times = []
    for _ in range(spec["steps"]):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    median = float(np.median(times))
    flops = encoder_flops_per_token(spec["size"], seq) * (3 if spec["mode"] == "train" else 1)
    tokens_per_s = batch * seq / median
    return {**spec, "step_s": median, "tokens_per_s": tokens_per_s,
            "tflops": tokens_per_s * flops / 1e12,
            "peak_rss_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20}


def matmul_peak(dtype: str, n: int = 2048, repeats: int = 10) -> float:
    """Measured TFLOP/s of an n x n matmul chain in `dtype` (the MFU denominator).

    The best of XLA and TensorFlow's own (oneDNN) kernels: on CPUs they differ, and
    for bfloat16 only oneDNN uses the AVX-512 BF16 / AMX instructions.
    """
    import tensorflow as tf

    a = tf.cast(tf.random.normal((n, n), dtype=tf.float32), dtype)
    best = float("inf")
    for jit in (True, False):
        @tf.function(jit_compile=jit, autograph=False)
        def chain(x):
            for _ in range(repeats):
                x = tf.matmul(x, a) * tf.cast(1.0 / n, dtype)
            return x

        chain(a).numpy()
        for _ in range(3):
            start = time.perf_counter()
            chain(a).numpy()
            best = min(best, time.perf_counter() - start)
    return 2 * n**3 * repeats / best / 1e12


def matmul_chains(n: int = 1024, repeats: int = 10) -> tuple[dict, float]:
    """({"matmul DTYPE jit=J": warm callable}, FLOPs per call) for the interleaved peak."""
    import tensorflow as tf

    chains = {}
    for dtype in ("float32", "bfloat16"):
        a = tf.cast(tf.random.normal((n, n), dtype=tf.float32), dtype)
        for jit in (True, False):
            @tf.function(jit_compile=jit, autograph=False)
            def chain(x, a=a, dtype=dtype):
                for _ in range(repeats):
                    x = tf.matmul(x, a) * tf.cast(1.0 / n, dtype)
                return x

            chain(a).numpy()
            chains[f"matmul {dtype} jit={jit}"] = lambda chain=chain, a=a: chain(a).numpy()
    return chains, 2 * n**3 * repeats


def run_one(spec: dict) -> dict:
    row, error = table_runs.run_child(__file__, spec)
    return {**spec, "error": error} if error else row


def plan(quick: bool, with_keras_hub: bool) -> list[dict]:
    steps, warmup = (3, 1) if quick else (8, 2)
    shapes = [(128, 8)] if quick else [(128, 8), (512, 2)]
    impls = ["ours"] + (["keras_hub"] if with_keras_hub else [])
    specs = []
    for seq, batch in shapes:
        for mode in ("forward", "train"):
            for impl in impls:
                specs.append(dict(impl=impl, size="albert-base", precision="float32", mode=mode,
                                  seq=seq, batch=batch, steps=steps, warmup=warmup))
    for jit in (True, False):  # on CPU, bf16 matmuls are fast in oneDNN, not in XLA
        specs.append(dict(impl="ours", size="albert-base", precision="mixed_bfloat16",
                          mode="train", seq=128, batch=8, steps=steps, warmup=warmup, jit=jit))
    specs.append(dict(impl="ours", size="albert-base", precision="float32", mode="train",
                      seq=128, batch=8, steps=steps, warmup=warmup, jit=False))
    if with_keras_hub:
        specs.append(dict(impl="keras_hub", size="albert-base", precision="mixed_bfloat16",
                          mode="train", seq=128, batch=8, steps=steps, warmup=warmup))
    for size in ("albert-large", "bert-large"):
        specs.append(dict(impl="ours", size=size, precision="float32", mode="train",
                          seq=128, batch=8, steps=max(3, steps // 2), warmup=1))
    return specs


@contextlib.contextmanager
def attention_path(name: str):
    """Traces the model with `einsum` or `fused` attention (swapped while the step traces)."""
    from albert_tf import transformer

    fused = transformer.fused_attention
    if name == "einsum":
        transformer.fused_attention = transformer.einsum_attention
    try:
        yield
    finally:
        transformer.fused_attention = fused


def interleaved(variants: dict[str, dict], repeats: int, warmup: int = 2,
                extra: dict | None = None) -> dict[str, float]:
    """Median step seconds of each variant, all built in this process and timed A, B, A, B.

    `extra`: more {name: callable} (already warm) timed in the same rounds.
    """
    import numpy as np

    steps = dict(extra or {})
    for name, spec in variants.items():
        with attention_path(spec.get("attention", "fused")):
            step, _ = make_step(spec)
            for _ in range(warmup):  # traces (and compiles) the step under this path
                step()
        steps[name] = step
    times = {name: [] for name in steps}
    for _ in range(repeats):
        for name, step in steps.items():
            start = time.perf_counter()
            step()
            times[name].append(time.perf_counter() - start)
    return {name: float(np.median(t)) for name, t in times.items()}


def attention_op_times(repeats: int, shape=(8, 128, 12, 64)) -> list[str]:
    """Forward + backward of the attention op alone, fused vs einsum, alternating calls.

    `shape` is [B,T,N,D] (albert-base heads at seq 128, a quarter of each row padded).
    Runs on the current Keras backend: TensorFlow with and without XLA, or JAX (jit).
    """
    import keras
    import numpy as np
    from keras import ops

    from albert_tf.transformer import attention_bias_from_mask, einsum_attention, fused_attention

    backend = keras.backend.backend()
    rng = np.random.default_rng(0)
    mask = np.ones(shape[:2], "int32")
    mask[:, shape[1] * 3 // 4:] = 0
    scale = 1.0 / np.sqrt(shape[-1])
    lines = []
    for dtype in ("float32", "bfloat16"):
        q, k, v = (ops.cast(rng.normal(size=shape).astype("float32"), dtype) for _ in range(3))
        bias = attention_bias_from_mask(mask, dtype)
        fns = {}
        for name, attend in (("einsum", einsum_attention), ("fused", fused_attention)):
            for jit in ((False, True) if backend == "tensorflow" else (True,)):
                fns[name, jit] = _grad_fn(backend, attend, bias, scale, jit)
        times = {key: [] for key in fns}
        for fn in fns.values():
            [np.asarray(g) for g in fn(q, k, v)]
        for _ in range(repeats):
            for key, fn in fns.items():
                start = time.perf_counter()
                [np.asarray(g) for g in fn(q, k, v)]
                times[key].append(time.perf_counter() - start)
        for jit in sorted({j for _, j in fns}):
            e, f = (float(np.median(times[n, jit])) for n in ("einsum", "fused"))
            lines.append(f"op {backend} {dtype:<9} fwd+bwd {shape} jit={str(jit):<5} einsum "
                         f"{e * 1e3:7.1f} ms  fused {f * 1e3:7.1f} ms  fused speed / einsum: "
                         f"{e / f:.2f}x")
    return lines


def _grad_fn(backend: str, attend, bias, scale: float, jit: bool):
    """d sum(attend(q, k, v)) / d(q, k, v) as one compiled function of (q, k, v)."""
    if backend == "jax":
        import jax
        import jax.numpy as jnp

        return jax.jit(jax.grad(lambda q, k, v: jnp.sum(
            attend(q, k, v, bias, scale).astype("float32")), argnums=(0, 1, 2)))
    import tensorflow as tf

    @tf.function(jit_compile=jit)
    def grads(q, k, v):
        with tf.GradientTape() as tape:
            tape.watch([q, k, v])
            total = tf.reduce_sum(tf.cast(attend(q, k, v, bias, scale), tf.float32))
        return tape.gradient(total, [q, k, v])
    return grads


def compare(what: str, size: str, seq: int, batch: int, repeats: int) -> list[str]:
    """Side-by-side ratios for `attention` (fused / einsum) or `precision` (bf16 / fp32)."""
    base = dict(impl="ours", size=size, seq=seq, batch=batch)
    lines = [f"cpu flags: {cpu_flags()}; {os.cpu_count()} cpus; {size} seq {seq} x batch "
             f"{batch}; medians of {repeats} interleaved steps"]
    if what == "attention":
        lines += attention_op_times(repeats=15)
        for precision, mode, jit in (("float32", "forward", True), ("float32", "train", False),
                                     ("mixed_bfloat16", "train", False)):
            spec = dict(base, precision=precision, mode=mode, jit=jit)
            t = interleaved({a: dict(spec, attention=a) for a in ("einsum", "fused")}, repeats)
            lines.append(f"model {precision:<15} {mode:<8} jit={str(jit):<5} einsum "
                         f"{t['einsum'] * 1e3:8.1f} ms  fused {t['fused'] * 1e3:8.1f} ms"
                         f"  fused speed / einsum: {t['einsum'] / t['fused']:.2f}x")
        return lines
    chains, chain_flops = matmul_chains()
    variants = {f"{p} jit={j}": dict(base, precision=p, mode="train", jit=j)
                for p in ("float32", "mixed_bfloat16") for j in (True, False)}
    t = interleaved(variants, repeats, extra=chains)
    peak = {dtype: max(chain_flops / t.pop(name) / 1e12 for name in list(t)
                       if name.startswith(f"matmul {dtype}")) for dtype in ("float32", "bfloat16")}
    lines.append(f"matmul peak (1024^3 chains, best of XLA and oneDNN, timed in the same rounds):"
                 f" float32 {peak['float32']:.3f}, bfloat16 {peak['bfloat16']:.3f} TFLOP/s: "
                 f"bf16 / fp32 {peak['bfloat16'] / peak['float32']:.2f}x")
    flops = encoder_flops_per_token(size, seq) * 3 * batch * seq
    for name, seconds in t.items():
        dtype = "bfloat16" if "bfloat16" in name else "float32"
        lines.append(f"train step {name:<22} {seconds * 1e3:8.1f} ms  "
                     f"{flops / seconds / 1e12:.3f} TFLOP/s = {flops / seconds / 1e12 / peak[dtype]:.0%}"
                     f" of the {dtype} matmul peak")
    fp32 = min(v for k, v in t.items() if k.startswith("float32"))
    bf16 = min(v for k, v in t.items() if k.startswith("mixed"))
    lines.append(f"best mixed_bfloat16 / best float32 train step speed: {fp32 / bf16:.2f}x")
    return lines


def profile(precision: str, size: str, seq: int, batch: int, steps: int, top: int = 18):
    """Per-op-type share of a train step (TensorFlow's kernels, no XLA), from the profiler.

    Returns lines "op type  ms/step  share". Op names show which kernels ran: _Mkl* and
    _Fused* are oneDNN's; Cast ops are the mixed-precision conversions.
    """
    import collections
    import glob
    import tempfile

    import tensorflow as tf
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    step, _ = make_step(dict(impl="ours", size=size, seq=seq, batch=batch,
                             precision=precision, mode="train", jit=False))
    step(), step()
    with tempfile.TemporaryDirectory() as logdir:
        tf.profiler.experimental.start(logdir)
        for _ in range(steps):
            step()
        tf.profiler.experimental.stop()
        space = xplane_pb2.XSpace()
        with open(glob.glob(f"{logdir}/**/*.xplane.pb", recursive=True)[0], "rb") as f:
            space.ParseFromString(f.read())
    totals = collections.Counter()
    for plane in space.planes:
        if plane.name != "/host:CPU":
            continue
        for line in plane.lines:
            for event in line.events:
                name = plane.event_metadata[event.metadata_id].name
                op_type = name.rsplit(":", 1)[-1] if ":" in name else ""
                # "Process" / "Run" are the executor's spans around many ops, not ops.
                if (op_type[:1].isupper() or op_type.startswith("_")) and \
                        op_type not in ("Process", "Run"):
                    totals[op_type] += event.duration_ps / 1e9  # ms
    total = sum(totals.values())
    lines = [f"{precision} train step profile ({size} seq {seq} x {batch}, TensorFlow kernels"
             f", cpu flags: {cpu_flags()}): {total / steps:.1f} ms of op time per step"]
    for op_type, ms in totals.most_common(top):
        lines.append(f"  {op_type:<36} {ms / steps:9.1f} ms/step {ms / total:6.1%}")
    return lines


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--one", help="measure one spec (JSON) and print JSON")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", help="also write the rows to this file")
    parser.add_argument("--compare", choices=("attention", "precision"))
    parser.add_argument("--profile", choices=("float32", "mixed_bfloat16"))
    parser.add_argument("--size", default="albert-base", help="for --compare / --profile")
    parser.add_argument("--seq", type=int, default=128, help="for --compare / --profile")
    parser.add_argument("--batch", type=int, default=4, help="for --compare / --profile")
    parser.add_argument("--repeats", type=int, default=7, help="for --compare / --profile")
    args = parser.parse_args(argv)
    if args.compare:
        print("\n".join(compare(args.compare, args.size, args.seq, args.batch, args.repeats)))
        return 0
    if args.profile:
        print("\n".join(profile(args.profile, args.size, args.seq, args.batch, args.repeats)))
        return 0
    if args.one:
        print(json.dumps(measure(json.loads(args.one))))
        return 0
    try:
        import keras_hub  # noqa: F401
        with_keras_hub = True
    except ImportError:
        with_keras_hub = False
        print("keras-hub not installed: KerasHub rows skipped (pip install -e .[bench])")
    peak = {"float32": matmul_peak("float32"), "mixed_bfloat16": matmul_peak("bfloat16")}
    print(f"matmul peak (2048^3, XLA): float32 {peak['float32']:.3f} TFLOP/s, "
          f"bfloat16 {peak['mixed_bfloat16']:.3f} TFLOP/s")
    rows = []
    header = f"{'impl':<10} {'size':<13} {'precision':<15} {'mode':<8} {'jit':<5} " \
             f"{'seq x b':<8} {'tokens/s':>9} {'MFU':>6} {'peak RSS':>9}"
    print(header)
    for spec in plan(args.quick, with_keras_hub):
        row = run_one(spec)
        rows.append(row)
        if "error" in row:
            print(f"{spec['impl']:<10} {spec['size']:<13} {spec['precision']:<15} "
                  f"{spec['mode']:<8} ERROR {row['error']}")
            continue
        mfu = row["tflops"] / peak["mixed_bfloat16" if "bfloat16" in row["precision"] else "float32"]
        row["mfu"] = mfu
        print(f"{row['impl']:<10} {row['size']:<13} {row['precision']:<15} {row['mode']:<8} "
              f"{str(row.get('jit', True)):<5} {row['seq']}x{row['batch']:<4} "
              f"{row['tokens_per_s']:>9.0f} {mfu:>6.1%} "
              f"{row['peak_rss_gib']:>7.2f}Gi", flush=True)
    return table_runs.finish(summarize(rows), peak, rows, args.json)


def summarize(rows: list[dict]) -> list[str]:
    def find(**kw):
        for r in rows:
            if "error" not in r and all(r.get(k, True if k == "jit" else None) == v
                                        for k, v in kw.items()):
                return r["tokens_per_s"]
        return None

    lines = []
    for mode in ("forward", "train"):
        for seq, _batch in ((128, 8), (512, 2)):
            ours = find(impl="ours", mode=mode, seq=seq, precision="float32", size="albert-base")
            hub = find(impl="keras_hub", mode=mode, seq=seq, precision="float32",
                       size="albert-base")
            if ours and hub:
                lines.append(f"ours / KerasHub, float32 {mode} seq {seq}: {ours / hub:.2f}x")
    fp32 = max(filter(None, [find(impl="ours", mode="train", seq=128, precision="float32",
                                  size="albert-base", jit=j) for j in (True, False)]),
               default=None)
    bf16 = max(filter(None, [find(impl="ours", mode="train", seq=128, precision="mixed_bfloat16",
                                  jit=j) for j in (True, False)]), default=None)
    if fp32 and bf16:
        lines.append(f"ours best mixed_bfloat16 / best float32 train step: {bf16 / fp32:.2f}x")
    large = find(size="albert-large")
    bert = find(size="bert-large")
    if large and bert:
        lines.append(f"albert-large / bert-large train step: {large / bert:.2f}x (paper: ~1.7x)")
    return lines


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
