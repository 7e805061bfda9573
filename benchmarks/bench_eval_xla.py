"""Fine-tuning's evaluation passes with and without XLA, on SST-2-like dev lengths.

`albert-tf finetune` trains with XLA (`jit_compile`) and evaluates after every epoch:
the dev set's predictions (`predict_rows`) and its loss (`eval_losses`), length-bucketed.
XLA compiles one program per input shape, and an evaluation meets several (each length
bucket, at the full batch and at its last, smaller batch), for a few passes in a run.
This times `--passes` whole evaluations (both calls) of an `--examples` dev set on the
model as fine-tuning compiles it, with `evaluation_xla` on (the model's XLA) and off
(`TrainConfig.eval_jit_compile`'s default), each in a fresh process (XLA's and
tf.function's caches live in a process), in one run. It prints the first pass (which
traces and compiles), the mean of the later ones, and the total.

    python benchmarks/bench_eval_xla.py                  # the tiny model, 3 passes
    python benchmarks/bench_eval_xla.py --model base     # albert-base, a few minutes
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_serving import cpu_flags  # noqa: E402

MODES = {"xla": True, "no xla": False}


def child(model_name: str, xla: bool, examples: int, passes: int, batch: int,
          seq_length: int) -> list[float]:
    """Seconds of each whole evaluation pass, in this process."""
    from bench_bucketing import build_model, make_data

    from albert_tf.training.finetune.bucketing import default_buckets
    from albert_tf.training.finetune.train import eval_losses, predict_rows
    from albert_tf.training.runtime.fit_steps import install_step_functions

    vocab_size = 30000
    data = make_data(examples, seq_length, vocab_size)
    model = build_model(model_name, vocab_size)
    model.compile(optimizer=model.optimizer, loss=model.loss, jit_compile=True)  # as finetune
    install_step_functions(model, evaluation_xla=xla)
    buckets = default_buckets(seq_length)
    seconds = []
    for _ in range(passes):
        start = time.perf_counter()
        predict_rows(model, data, batch, seq_length, buckets)
        eval_losses(model, {"dev": data}, batch, seq_length, buckets)
        seconds.append(time.perf_counter() - start)
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=("base", "tiny"), default="tiny")
    parser.add_argument("--examples", type=int, default=872, help="dev examples (SST-2: 872)")
    parser.add_argument("--passes", type=int, default=3, help="evaluations (epochs)")
    parser.add_argument("--batch-size", type=int, default=64, help="finetune's eval_batch_size")
    parser.add_argument("--seq-length", type=int, default=128)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.model, args.child == "xla", args.examples, args.passes,
                               args.batch_size, args.seq_length)))
        return

    print(f"model={args.model} examples={args.examples} passes={args.passes} "
          f"batch={args.batch_size} seq_length={args.seq_length}; CPU flags: {cpu_flags()}; "
          f"load average before: {os.getloadavg()[0]:.2f}")
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    totals = {}
    print(f"{'evaluation':<11} {'first pass':>11} {'later (mean)':>13} {'total':>9}")
    for mode, xla in MODES.items():
        out = subprocess.run(
            [sys.executable, __file__, "--model", args.model, "--examples", str(args.examples),
             "--passes", str(args.passes), "--batch-size", str(args.batch_size),
             "--seq-length", str(args.seq_length), "--child", "xla" if xla else "plain"],
            env=env, check=True, capture_output=True, text=True).stdout
        seconds = json.loads(out.strip().splitlines()[-1])
        later = sum(seconds[1:]) / max(1, len(seconds) - 1)
        totals[mode] = sum(seconds)
        print(f"{mode:<11} {seconds[0]:>10.2f}s {later:>12.2f}s {totals[mode]:>8.2f}s", flush=True)
    print(f"total, xla / no xla: {totals['xla'] / totals['no xla']:.2f}x; "
          f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
