"""Peak memory of a training step: plain, with the encoder's rematerialization, and with
gradient accumulation.

Each mode runs in its own fresh process: it builds `AlbertSequenceClassifier` at the
given preset's shapes (albert-xxlarge by default: H=4096, I=16384, 64 heads, 12
layers sharing one block), compiles it with plain SGD (no optimizer slots, so the
difference is the activations kept for the backward pass) and the training commands'
step functions (`fit_steps.install_step_functions`), and trains `--steps` steps on a
random batch. "accumulate" runs each batch as `--parts` parts in turn, one update
(`--gradient-accumulation-steps` of finetune and pretrain). It prints the peak
resident memory of the process and the part of it above the built model, the step
time, and the first loss (the same in every mode, the heads' dropout switched off:
rematerialization recomputes, and the parts' mean loss is the batch's). On a GPU the peak is the device's
(`tf.config.experimental.get_memory_info`).

Cheap enough for 2 cores / 24 GB at the defaults (batch 2, 128 tokens: about a
minute per mode on a 2-core CPU):

    python benchmarks/bench_remat.py
    python benchmarks/bench_remat.py --preset albert-large --batch 8 --seq-length 256 --parts 4
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

MODES = ("plain", "remat", "accumulate")


def _rss_mib() -> float:
    """The process's peak resident memory so far, in MiB (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _current_rss_mib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2 ** 20


def child(args) -> dict:
    """One mode, in this process: build, then train `args.steps` steps."""
    import keras
    import numpy as np
    import tensorflow as tf

    import albert_tf.models
    from albert_tf import AlbertConfig, AlbertSequenceClassifier
    from albert_tf.training.runtime.fit_steps import install_step_functions

    # No dropout anywhere (the presets have none; the heads' 0.1 off): each mode then
    # computes the same first loss, a check that none of them changes the gradient.
    albert_tf.models.HEAD_DROPOUT = 0.0
    gpu = bool(tf.config.list_physical_devices("GPU"))
    keras.utils.set_random_seed(0)  # the same weights in both modes: the same loss
    config = AlbertConfig.from_size(args.size)
    model = AlbertSequenceClassifier(config, num_classes=2, remat=args.mode == "remat")
    model.compile(optimizer="sgd", jit_compile=False)
    install_step_functions(model, args.parts if args.mode == "accumulate" else 1)
    rng = np.random.default_rng(0)
    shape = (args.batch, args.seq_length)
    x = {"input_word_ids": rng.integers(5, config.vocab_size, shape).astype("int32"),
         "input_mask": np.ones(shape, "int32"), "input_type_ids": np.zeros(shape, "int32")}
    y = rng.integers(0, 2, args.batch).astype("int32")
    built = _current_rss_mib()
    if gpu:
        tf.config.experimental.reset_memory_stats("GPU:0")
    times, losses = [], []

    class Timed(keras.callbacks.Callback):
        def on_train_batch_begin(self, batch, logs=None):
            self.start = time.perf_counter()

        def on_train_batch_end(self, batch, logs=None):
            times.append(time.perf_counter() - self.start)
            losses.append(float(logs["loss"]))

    model.fit(tf.data.Dataset.from_tensors((x, y)).repeat(args.steps), epochs=1, verbose=0,
              callbacks=[Timed()])
    result = {"mode": args.mode, "device": "GPU" if gpu else "CPU",
              "peak_mib": _rss_mib(), "built_mib": built,
              "step_s": min(times[1:] or times), "first_loss": losses[0]}
    if gpu:
        result["device_peak_mib"] = tf.config.experimental.get_memory_info("GPU:0")["peak"] / 2 ** 20
    return result


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--size", default="albert-xxlarge")
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--seq-length", type=int, default=128)
    p.add_argument("--steps", type=int, default=2)
    p.add_argument("--parts", type=int, default=2, help="accumulation: parts per batch")
    p.add_argument("--mode", choices=MODES, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.mode:  # a child: one mode, one JSON line
        print(json.dumps(child(args)))
        return 0
    rows = []
    if args.batch % args.parts:
        p.error(f"--batch {args.batch} does not split into --parts {args.parts}")
    for mode in MODES:
        argv = [sys.executable, __file__, "--mode", mode, "--size", args.size,
                "--batch", str(args.batch), "--seq-length", str(args.seq_length),
                "--steps", str(args.steps), "--parts", str(args.parts)]
        done = subprocess.run(argv, capture_output=True, text=True)
        if done.returncode:
            sys.stderr.write(done.stderr[-3000:])
            return done.returncode
        rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
    print(f"{args.size}, batch {args.batch} x {args.seq_length} tokens, {args.steps} SGD steps, "
          f"{rows[0]['device']}")
    key = "device_peak_mib" if "device_peak_mib" in rows[0] else "peak_mib"
    print(f"{'mode':<10} {'peak MiB':>9} {'above model MiB':>16} {'step s':>7} "
          f"{'first loss':>11}")
    for row in rows:
        above = row[key] - (0 if key == "device_peak_mib" else row["built_mib"])
        name = f"{row['mode']} x{args.parts}" if row["mode"] == "accumulate" else row["mode"]
        print(f"{name:<10} {row[key]:>9.0f} {above:>16.0f} {row['step_s']:>7.2f} "
              f"{row['first_loss']:>11.6f}")
    for row, what in zip(rows[1:], ("rematerialization", f"accumulation in {args.parts} parts")):
        saved = rows[0][key] - row[key]
        print(f"{what} saves {saved:.0f} MiB of peak memory ({100 * saved / rows[0][key]:.1f}%), "
              f"steps {row['step_s'] / rows[0]['step_s']:.2f}x as long")
    return 0


if __name__ == "__main__":
    sys.exit(main())
