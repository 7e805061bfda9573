"""A Python user's repeated `predict` on raw text: our task model against Hugging Face's
`pipeline("text-classification")` on the same weights.

Both sides load the tiny Hugging Face classifier fixture (tests/fixtures/tasks/seq_single/hf:
AlbertForSequenceClassification, 3 labels, its own spiece.model) and classify the same
--rows texts --calls times; each prints the first call, the median and the slowest. Each
stack runs in a process of its own: ours with this interpreter (the project's
virtualenv), the peer with --peer-python (an environment with transformers and torch,
which the project does not depend on). The ratio is ours / theirs on the median call.

    python benchmarks/bench_predict.py
    python benchmarks/bench_predict.py --peer-python /work/refvenv/bin/python --calls 7 --rows 8
    git archive COMMIT | tar -x -C /tmp/before   # and a row for another checkout of ours:
    python benchmarks/bench_predict.py --baseline-root /tmp/before

Take the figures on a quiet machine: the table prints the load average and CPU flags.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLASSIFIER = os.path.join(ROOT, "tests", "fixtures", "tasks", "seq_single", "hf")
WORDS = ("a gripping, funny film with a wonderful cast; numbers like 1,234 and accents: "
         "café. I left before the end, it was dull and far too long").split()


def texts(rows: int) -> list[str]:
    """`rows` distinct sentences of 5 to 12 words (within the fixture's 64 positions)."""
    return [" ".join(WORDS[(3 * i + j) % len(WORDS)] for j in range(5 + (5 * i) % 8))
            for i in range(rows)]


def _ours(rows: int, calls: int) -> list[float]:
    from albert_tf import AlbertSequenceClassifier

    model = AlbertSequenceClassifier.from_preset(CLASSIFIER)
    batch = texts(rows)
    return [_timed(lambda: model.predict(batch, verbose=0)) for _ in range(calls)]


def _peer(rows: int, calls: int) -> list[float]:
    from transformers import pipeline

    classify = pipeline("text-classification", model=CLASSIFIER, device="cpu")
    batch = texts(rows)
    # truncated as our preprocessor packs (64 = the fixture's max_position_embeddings)
    return [_timed(lambda: classify(batch, batch_size=rows, truncation=True, max_length=64))
            for _ in range(calls)]


def _timed(call) -> float:
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


def _run_side(python: str, side: str, rows: int, calls: int, root: str = ROOT) -> list[float]:
    """`side`'s seconds per call, run in a fresh `python` that imports albert_tf from `root`."""
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONPATH": root}
    result = subprocess.run([python, os.path.abspath(__file__), "--side", side,
                             "--rows", str(rows), "--calls", str(calls)],
                            capture_output=True, text=True, env=env, cwd=ROOT)
    if result.returncode != 0:
        raise SystemExit(f"bench_predict: the {side} side failed: {result.stderr[-800:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def _cpu_flags() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            found = set(re.findall(r"\b(avx512_bf16|amx_bf16|avx2)\b", f.read()))
    except OSError:
        return "unknown"
    return " ".join(sorted(found)) or "none of avx2/avx512_bf16/amx_bf16"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=8, help="texts per call")
    parser.add_argument("--calls", type=int, default=7, help="calls per side")
    parser.add_argument("--peer-python", default="/work/refvenv/bin/python",
                        help="interpreter with transformers and torch")
    parser.add_argument("--baseline-root", help="another checkout of albert-tf (e.g. the "
                        "commit before a change): one more row, its predict on text")
    parser.add_argument("--side", choices=("ours", "peer"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.side:  # a child process: one side, its seconds as JSON on the last line
        seconds = (_ours if args.side == "ours" else _peer)(args.rows, args.calls)
        sys.stdout.write(json.dumps(seconds) + "\n")
        return
    load = os.getloadavg()
    ours = _run_side(sys.executable, "ours", args.rows, args.calls)
    peer = _run_side(args.peer_python, "peer", args.rows, args.calls)
    baseline = args.baseline_root and _run_side(sys.executable, "ours", args.rows, args.calls,
                                                os.path.abspath(args.baseline_root))
    lines = [f"CPU flags: {_cpu_flags()}; load average before: {load[0]:.2f}, after: "
             f"{os.getloadavg()[0]:.2f}",
             f"{args.calls} calls of predict on {args.rows} texts, seconds per call",
             "| | first | median | slowest |", "|---|---:|---:|---:|"]
    named = [("albert-tf `model.predict(texts)`", ours),
             ("transformers `pipeline(\"text-classification\")`", peer)]
    if baseline:
        named.append((f"albert-tf at {args.baseline_root}", baseline))
    for name, seconds in named:
        lines.append(f"| {name} | {seconds[0]:.3f} | {statistics.median(seconds):.3f} | "
                     f"{max(seconds):.3f} |")
    ratio = statistics.median(ours) / statistics.median(peer)
    lines.append(f"ratio ours / transformers on the median call: {ratio:.2f}x")
    sys.stdout.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
