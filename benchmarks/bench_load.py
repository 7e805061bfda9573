"""Serving under a server's load: concurrent batch-1 clients against one loaded model.

One albert-base-shape classifier (random weights, vocab_size 30,000 as released; texts
tokenized by a 5,000-piece vocabulary trained from the embedded corpus) is written as
each stack a server could load: the SavedModel as `albert-tf export` writes it, the same
loaded with one intra-op thread per request (TF Serving's
--tensorflow_intra_op_parallelism=1), its `--branches 2` export (each sublayer in two
branches that the inter-op threads run side by side) loaded so, the `--precision bfloat16`
export and its `--branches 2` loaded so, the SavedModel with `--batching` (concurrent calls
joined in the graph), the LiteRT float32
file, and, when onnxruntime, torch and transformers are installed (`pip install -e .[bench]`),
the same weights exported to ONNX and run by ONNX Runtime's CPU provider from Hugging Face's
tokenizer (`serving_peers`): float32 with its default threads and with one thread per
request, and its dynamic int8 quantization (`onnxruntime.quantization.quantize_dynamic`).

Each stack is loaded in a process of its own (the order alternating between repeats), as
a server holds it, and driven by C client threads that share it:

* closed loop (default): each client sends a batch-1 request (one text of the corpus,
  raw text in, probabilities out) as soon as its previous one is answered, for
  --seconds; requests/s and p50 / p99 / max latency, for C in --clients;
* open loop (--open-loop): requests arrive at a fixed Poisson rate (50% and 80% of the
  best stack's closed-loop capacity) and are handed to a pool of --pool threads;
  latency counts from the arrival, so queueing shows in p99.

    python benchmarks/bench_load.py                          # 1, 2, 4, 8, 16 clients
    python benchmarks/bench_load.py --clients 1 4 --seconds 10 --repeats 2
    python benchmarks/bench_load.py --open-loop
    python benchmarks/bench_load.py --profile   # and where each SavedModel's call goes, by op
    python benchmarks/bench_load.py --model tiny --seconds 2 # a smoke run

Take the figures on a quiet machine: the table prints the load average before and after.

CPU kinds (--isa): one AMX machine also stands in for the CPUs without AMX, by capping the
instructions oneDNN (TensorFlow's matmul library) may use, in each stack's process:

    python benchmarks/bench_load.py --isa native AVX512_CORE_BF16 AVX2 --clients 1 4 \
        --stacks savedmodel savedmodel_1t branches2_1t bf16_branches2_1t onnxruntime

`AVX512_CORE_BF16` is AVX-512 with bf16 instructions and no AMX, `AVX2` a CPU with
neither. The cap reaches oneDNN only: TensorFlow's own kernels and ONNX Runtime keep the
machine's instructions (so the ONNX Runtime column is measured natively under every cap,
and a table's ratio column compares each stack with the SavedModel as exported), and
bfloat16 stacks are left out under caps without bf16 instructions (TensorFlow, which
tests the real CPU, would hand oneDNN bf16 matmuls it cannot build).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import random
import subprocess
import sys
import tempfile
import threading
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_serving import cpu_flags, sentences, spm_model, widen_head  # noqa: E402

ONNX, SAVED, BATCHED, LITE = "onnxruntime", "savedmodel", "batched", "litert"
SAVED_ONE_THREAD, BF16_ONE_THREAD = "savedmodel_1t", "bf16_1t"
BRANCHED, BF16_BRANCHED = "branches2_1t", "bf16_branches2_1t"
BRANCHED_DEFAULT = "branches2"  # the --branches 2 files with the default threads
ONNX_ONE_THREAD, ONNX_INT8 = "onnxruntime_1t", "onnxruntime_int8"
LABELS = {SAVED: "SavedModel (as exported)", BATCHED: "SavedModel --batching",
          SAVED_ONE_THREAD: "SavedModel, 1 thread per request",
          BF16_ONE_THREAD: "SavedModel bfloat16, 1 thread per request",
          BRANCHED: "SavedModel --branches 2, 1 thread per op",
          BRANCHED_DEFAULT: "SavedModel --branches 2, default threads",
          BF16_BRANCHED: "SavedModel bfloat16 --branches 2, 1 thread per op",
          LITE: ".tflite float32", ONNX: "ONNX Runtime float32",
          ONNX_ONE_THREAD: "ONNX Runtime float32, 1 thread per request",
          ONNX_INT8: "ONNX Runtime int8 (dynamic)"}
STACKS = (SAVED, SAVED_ONE_THREAD, BF16_ONE_THREAD, BRANCHED, BF16_BRANCHED, BRANCHED_DEFAULT,
          BATCHED, LITE, ONNX, ONNX_ONE_THREAD, ONNX_INT8)
PROFILE_CALLS, PROFILE_OPS = 10, 8  # --profile: calls timed and profiled, op types shown
# --isa: the instruction sets oneDNN may use (its ONEDNN_MAX_CPU_ISA), "native" = all.
ISA_ENV, NATIVE = "ONEDNN_MAX_CPU_ISA", "native"
ISAS = (NATIVE, "AVX512_CORE_AMX", "AVX512_CORE_BF16", "AVX512_CORE", "AVX2")
BF16_ISAS = (NATIVE, "AVX512_CORE_AMX", "AVX512_CORE_BF16")
BF16_STACKS = ("bf16_1t", "bf16_branches2_1t")
# Loaded with one intra-op thread and as many inter-op threads as cores.
ONE_THREAD = (SAVED_ONE_THREAD, BF16_ONE_THREAD, BRANCHED, BF16_BRANCHED)


# The SavedModel exports the stacks load: (dtype, branches, in-graph batching).
EXPORTS = {SAVED: ("float32", 1, False), BF16_ONE_THREAD: ("bfloat16", 1, False),
           BRANCHED: ("float32", 2, False), BF16_BRANCHED: ("bfloat16", 2, False),
           BATCHED: ("float32", 1, True)}
# Stacks that load another stack's files with other threads.
SAME_FILES = {SAVED_ONE_THREAD: SAVED, BRANCHED_DEFAULT: BRANCHED, ONNX_ONE_THREAD: ONNX}


def write_stacks(model, spm_path: str, seq_length: int, folder: str,
                 stacks=STACKS) -> dict[str, str]:
    """{stack: path} of the files `stacks` load, written into `folder` (only those)."""
    from bench_litert import onnx_peer

    from albert_tf.checkpoint import task_record_of
    from albert_tf.serving import export
    from albert_tf.serving.litert.convert import write_litert
    from albert_tf.serving.signatures.base import Batching
    from albert_tf.tokenizer import AlbertPreprocessor

    wanted = {SAME_FILES.get(stack, stack) for stack in stacks}
    preprocessor = AlbertPreprocessor(spm_path, seq_length)
    paths = {}
    for stack, (dtype, branches, batching) in EXPORTS.items():
        if stack in wanted:
            paths[stack] = os.path.join(folder, stack)
            module = export.build_module(export.served_model(model, dtype, branches),
                                         preprocessor, batching=Batching() if batching else None)
            export.save_module(module, paths[stack], "bench")
    if LITE in wanted:
        paths[LITE] = os.path.join(folder, "model.tflite")
        write_litert(model, preprocessor.tokenizer, task_record_of(model), paths[LITE],
                     "classification", seq_length, "none")
    if wanted & {ONNX, ONNX_INT8}:
        try:
            paths.update(onnx_peer(model, spm_path, seq_length, folder))
        except ImportError as e:
            print(f"ONNX Runtime peer left out: {e} (pip install -e .[bench])", flush=True)
        else:
            from onnxruntime.quantization import QuantType, quantize_dynamic

            if ONNX_INT8 in wanted:
                paths[ONNX_INT8] = os.path.join(folder, "albert_int8.onnx")
                quantize_dynamic(paths[ONNX], paths[ONNX_INT8], weight_type=QuantType.QInt8)
    paths.update({stack: paths[same] for stack, same in SAME_FILES.items() if same in paths})
    return paths


def load_stack(name: str, paths: dict, seq_length: int):
    """texts -> probabilities, for one stack; safe to call from several threads."""
    if name in (SAVED, BATCHED, BRANCHED_DEFAULT, *ONE_THREAD):
        import tensorflow as tf
        import tensorflow_text  # noqa: F401  (registers the SentencePiece ops)

        if name in ONE_THREAD:
            # What TF Serving's --tensorflow_intra_op_parallelism=1 and
            # --tensorflow_inter_op_parallelism=<cores> give: each request's ops on one
            # thread, concurrent requests on the other cores.
            tf.config.threading.set_intra_op_parallelism_threads(1)
            tf.config.threading.set_inter_op_parallelism_threads(os.cpu_count() or 1)
        signature = tf.saved_model.load(paths[name]).signatures["serving_default"]
        return lambda text: signature(text=tf.constant([text]))["probabilities"].numpy()
    if name == LITE:
        from albert_tf.serving.litert import runtime

        local = threading.local()  # an interpreter is not thread-safe: one per client

        def run(text):
            if not hasattr(local, "runner"):
                local.runner = runtime.open_interpreter(paths[LITE], 1).get_signature_runner(
                    "serving_default")
            return local.runner(text=runtime.strings([text]))["probabilities"]
        return run
    import serving_peers

    session = serving_peers.onnx_session_stack(paths["hf"], paths[name], seq_length,
                                               threads=1 if name == ONNX_ONE_THREAD else None)
    return lambda text: session([text])


def closed_loop(call, texts: list[str], clients: int, seconds: float) -> list[float]:
    latencies: list[float] = []
    lock = threading.Lock()
    deadline = time.perf_counter() + seconds

    def client(seed: int) -> None:
        rng, mine = random.Random(seed), []
        while time.perf_counter() < deadline:
            start = time.perf_counter()
            call(rng.choice(texts))
            mine.append(time.perf_counter() - start)
        with lock:
            latencies.extend(mine)

    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return latencies


def open_loop(call, texts: list[str], rate: float, seconds: float, pool: int) -> list[float]:
    rng = random.Random(0)
    arrivals, t = [], 0.0
    while t < seconds:
        t += rng.expovariate(rate)
        arrivals.append(t)
    latencies: list[float] = []
    start = time.perf_counter()

    def serve(arrival: float, text: str) -> None:
        call(text)
        latencies.append(time.perf_counter() - start - arrival)

    with concurrent.futures.ThreadPoolExecutor(pool) as executor:
        for arrival in arrivals:
            time.sleep(max(0.0, start + arrival - time.perf_counter()))
            executor.submit(serve, arrival, rng.choice(texts))
    return latencies


def child(args) -> int:
    """In a process of its own: one stack under each load; prints FIGURES json."""
    import numpy as np

    paths, texts = json.loads(args.child), json.loads(os.environ["BENCH_LOAD_TEXTS"])
    call = load_stack(args.stack, paths, args.seq_length)
    for text in texts[:5]:
        call(text)  # warm-up: every kernel's first call
    if args.profile:
        return profile_child(call, median_text(texts))
    figures = {}
    loads = ([("open", float(r)) for r in args.rates] if args.rates else
             [("closed", c) for c in args.clients])
    for kind, value in loads:
        if kind == "closed":
            closed_loop(call, texts, value, min(1.0, args.seconds))  # threads' first calls
            latencies = closed_loop(call, texts, value, args.seconds)
        else:
            latencies = open_loop(call, texts, value, args.seconds, args.pool)
        ms = np.array(latencies) * 1e3
        figures[f"{kind}|{value}"] = {"rps": len(ms) / args.seconds,
                                      "p50": float(np.percentile(ms, 50)),
                                      "p99": float(np.percentile(ms, 99)), "max": float(ms.max())}
    print("FIGURES " + json.dumps(figures), flush=True)
    return 0


def median_text(texts: list[str]) -> str:
    """The text --profile times: the corpus sentence of median length."""
    return sorted(texts, key=len)[len(texts) // 2]


def profile_child(call, text: str) -> int:
    """One text's calls, timed, then profiled by op type; prints FIGURES json."""
    import serving_profile

    start = time.perf_counter()
    for _ in range(PROFILE_CALLS):
        call(text)
    ms = (time.perf_counter() - start) / PROFILE_CALLS * 1e3
    ops = serving_profile.op_split(lambda: call(text), PROFILE_CALLS)
    print("FIGURES " + json.dumps({"ms": ms, "ops": ops}), flush=True)
    return 0


def run_child(stack: str, paths: dict, texts: list[str], args, rates=None,
              profile: bool = False, isa: str = "native") -> dict:
    command = [sys.executable, __file__, "--child", json.dumps(paths), "--stack", stack,
               "--seconds", str(args.seconds), "--seq-length", str(args.seq_length),
               "--pool", str(args.pool), "--clients", *map(str, args.clients)]
    if rates:
        command += ["--rates", *map(str, rates)]
    if profile:
        command += ["--profile"]
    env = {**os.environ, "BENCH_LOAD_TEXTS": json.dumps(texts)}
    if isa != NATIVE:
        env[ISA_ENV] = isa
    result = subprocess.run(command, capture_output=True, text=True, timeout=3600, env=env)
    line = [s for s in result.stdout.splitlines() if s.startswith("FIGURES ")]
    if result.returncode or not line:
        raise RuntimeError(result.stderr[-3000:])
    return json.loads(line[0][len("FIGURES "):])


def print_profiles(stacks: list[str], paths: dict, texts: list[str], args) -> None:
    """Each SavedModel stack's ms per call on one sentence, and its op types by time."""
    print(f"\nOne call on the median corpus sentence ({len(median_text(texts).split())} words), "
          f"{PROFILE_CALLS} calls: ms per call; op types by ms per call (ops per call), "
          "TensorFlow's profiler, summed over threads")
    for stack in stacks:
        if SAME_FILES.get(stack, stack) in EXPORTS:
            figures = run_child(stack, paths, texts, args, profile=True)
            ops = sorted(figures["ops"].items(), key=lambda kv: -kv[1][0])[:PROFILE_OPS]
            print(f"- {LABELS[stack]}: {figures['ms']:.1f} ms; " + ", ".join(
                f"{op} {ms:.2f} ({count:.0f})" for op, (ms, count) in ops), flush=True)


def merged(runs: list[dict]) -> dict:
    """Each load's figures over repeats: mean requests/s, the worst percentiles' median."""
    out = {}
    for key in runs[0]:
        values = [r[key] for r in runs]
        out[key] = {"rps": sum(v["rps"] for v in values) / len(values),
                    **{p: sorted(v[p] for v in values)[len(values) // 2]
                       for p in ("p50", "p99", "max")}}
    return out


def print_table(figures: dict, loads: list[str], title: str, base: str = ONNX) -> None:
    """One row per load; the last column divides each stack's req/s by `base`'s."""
    stacks = list(figures)
    print(f"\n{title}\n\n| load | " + " | ".join(
        f"{LABELS[s]} req/s (p50 / p99 / max ms)" for s in stacks) +
        (f" | ours / {LABELS[base]} req/s |" if base in stacks else " |"))
    print("|---|" + "---:|" * (len(stacks) + (base in stacks)))
    for key in loads:
        cells = [f"{figures[s][key]['rps']:.1f} ({figures[s][key]['p50']:.1f} / "
                 f"{figures[s][key]['p99']:.1f} / {figures[s][key]['max']:.1f})" for s in stacks]
        if base in stacks:
            cells.append(", ".join(f"{s} {figures[s][key]['rps'] / figures[base][key]['rps']:.2f}x"
                                   for s in stacks if s != base))
        print(f"| {key.replace('|', ' ')} | " + " | ".join(cells) + " |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", choices=("base", "tiny"), default="base")
    parser.add_argument("--seq-length", type=int, default=128)
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 2, 4, 8, 16])
    parser.add_argument("--seconds", type=float, default=10.0, help="per load and stack")
    parser.add_argument("--repeats", type=int, default=2, help="the stacks' order alternates")
    parser.add_argument("--open-loop", action="store_true")
    parser.add_argument("--pool", type=int, default=8, help="open loop: server threads")
    parser.add_argument("--spm-model", help="SentencePiece model (default: train one)")
    parser.add_argument("--stacks", nargs="+", choices=STACKS, default=list(STACKS),
                        help="the stacks to measure (default: all; ONNX Runtime where installed)")
    parser.add_argument("--profile", action="store_true",
                        help="also profile each SavedModel stack by op type (one sentence)")
    parser.add_argument("--isa", nargs="+", choices=ISAS, default=[NATIVE],
                        help="oneDNN instruction caps to measure under, each a table "
                        "(default: native)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--stack", help=argparse.SUPPRESS)
    parser.add_argument("--rates", type=float, nargs="*", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args)

    import tensorflow as tf

    from albert_tf import AlbertConfig, AlbertSequenceClassifier
    from albert_tf.tokenizer.spm import AlbertTokenizer

    with tempfile.TemporaryDirectory() as folder:
        spm_path = spm_model(args.spm_model, folder)
        tokenizer = AlbertTokenizer(spm_path)
        config = AlbertConfig.from_size("albert-base") if args.model == "base" else \
            AlbertConfig(vocab_size=tokenizer.vocab_size, embedding_size=32, hidden_size=64,
                         num_hidden_layers=2, num_attention_heads=4, intermediate_size=128)
        model = AlbertSequenceClassifier(config, 2)
        widen_head(model)
        paths = write_stacks(model, spm_path, args.seq_length, folder, args.stacks)
        texts = sentences(200)
        print(f"cpu flags: {cpu_flags()}; {os.cpu_count()} cpus; tf {tf.__version__}; "
              f"model={args.model}, seq_length {args.seq_length}; {args.seconds:.0f} s per load, "
              f"{args.repeats} repeats; load before {os.getloadavg()[0]:.2f}", flush=True)
        for isa in args.isa:
            stacks = [s for s in args.stacks if s in paths
                      and (isa in BF16_ISAS or s not in BF16_STACKS)]
            runs = {s: [] for s in stacks}
            for repeat in range(args.repeats):
                for stack in (stacks if repeat % 2 == 0 else stacks[::-1]):
                    runs[stack].append(run_child(stack, paths, texts, args, isa=isa))
            closed = {s: merged(r) for s, r in runs.items()}
            caption = "" if isa == NATIVE else (
                f" (oneDNN capped at {isa}; ONNX Runtime native; bfloat16 left out where "
                "the cap has no bf16)")
            print_table(closed, [f"closed|{c}" for c in args.clients],
                        f"Closed loop, {isa}: C clients, batch-1 requests back to back{caption}",
                        base=SAVED if isa != NATIVE or ONNX not in stacks else ONNX)
        if args.open_loop:
            capacity = max(max(v["rps"] for v in closed[s].values()) for s in stacks)
            rates = [round(0.5 * capacity, 1), round(0.8 * capacity, 1)]
            opened = {s: merged([run_child(s, paths, texts, args, rates)]) for s in stacks}
            print_table(opened, [f"open|{r}" for r in rates],
                        f"Open loop: Poisson arrivals at 50% and 80% of {capacity:.1f} req/s, "
                        f"{args.pool} server threads")
        if args.profile:
            print_profiles(stacks, paths, texts, args)
        print(f"\nload after {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
