"""Which pretraining recipe learns most in the demo's few minutes on a CPU?

Every recipe pretrains from scratch on the embedded corpus's training documents
(`corpus_tasks.prepare_corpus_split`, the demo's own split) for the same number
of optimizer steps, then `pretrain_eval.evaluate_pretraining` measures held-out
MLM and SOP accuracy on the held-out documents. Accuracy at equal steps does not
depend on how busy the machine is; the seconds per step do, so each recipe's
step time is the median of its last steps, measured in the same process run one
after another, and the table prints them beside the first recipe's as a ratio
(compare ratios only within one run; the CPU flags and load average are printed).

    nice -n 10 python benchmarks/bench_demo_recipe.py                 # all recipes
    nice -n 10 python benchmarks/bench_demo_recipe.py --steps 100 --recipes base,seq64
    python benchmarks/bench_demo_recipe.py --table                    # print saved results

Results (one JSON per recipe) and the prepared data are kept in --work, so an
interrupted sweep resumes with the recipes not yet run.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def _shape(hidden: int, layers: int, embedding: int) -> dict:
    """The paper's family: E < H, all layers shared, heads = H/64, FFN = 4H."""
    return {"hidden_size": hidden, "num_hidden_layers": layers, "embedding_size": embedding,
            "num_attention_heads": max(1, hidden // 64), "intermediate_size": 4 * hidden}


# name -> (model shape, seq, batch, optimizer, lr, vocab, jit, precision[, options]). "base"
# is the demo's old recipe. Warmup is the demo's (`demo.warmup_steps`) unless options say
# "warmup", the decay linear; options may also set the training data's "dupe_factor"
# (default 3) and "dynamic_masking" (re-masking as the data is read). bf16 recipes run
# without XLA: XLA's CPU backend does not use the bf16 instructions.
RECIPES = {
    "base":        (_shape(256, 4, 128), 128, 32, "lamb", 0.004, 5000, False, "float32"),
    "base-xla":    (_shape(256, 4, 128), 128, 32, "lamb", 0.004, 5000, True, "float32"),
    "seq64":       (_shape(256, 4, 128), 64, 64, "lamb", 0.004, 5000, True, "float32"),
    "seq64-lr1e-2": (_shape(256, 4, 128), 64, 64, "lamb", 0.01, 5000, True, "float32"),
    "seq64-v2k":   (_shape(256, 4, 128), 64, 64, "lamb", 0.01, 2000, True, "float32"),
    "h128-v2k":    (_shape(128, 4, 64), 64, 64, "lamb", 0.01, 2000, True, "float32"),
    "seq64-v2k-bf16": (_shape(256, 4, 128), 64, 64, "lamb", 0.01, 2000, True, "mixed_bfloat16"),
    "v2k-bf16":    (_shape(256, 4, 128), 64, 64, "lamb", 0.01, 2000, False, "mixed_bfloat16"),
    "b16-lamb5e-3": (_shape(256, 4, 128), 64, 16, "lamb", 0.005, 2000, True, "float32"),
    "s128-b32-bf16": (_shape(256, 4, 128), 128, 32, "lamb", 0.01, 2000, False, "mixed_bfloat16"),
    "v2k-lamb3e-3": (_shape(256, 4, 128), 64, 64, "lamb", 0.003, 2000, True, "float32"),
    "v2k-lamb5e-3": (_shape(256, 4, 128), 64, 64, "lamb", 0.005, 2000, True, "float32"),
    "v2k-adamw1e-3": (_shape(256, 4, 128), 64, 64, "adamw", 0.001, 2000, True, "float32"),
    "v2k-adamw2e-3": (_shape(256, 4, 128), 64, 64, "adamw", 0.002, 2000, True, "float32"),
    "h128-adamw2e-3": (_shape(128, 4, 64), 64, 64, "adamw", 0.002, 2000, True, "float32"),
    # The larger embedded corpus (the installed stack's docstrings): fewer duplicates of
    # each document, re-masking as the data is read, longer fixed warmups.
    "v2k-dupe1": (_shape(256, 4, 128), 64, 64, "lamb", 0.01, 2000, True, "float32",
                  {"dupe_factor": 1}),
    "v2k-dupe1-dyn": (_shape(256, 4, 128), 64, 64, "lamb", 0.01, 2000, True, "float32",
                      {"dupe_factor": 1, "dynamic_masking": True}),
    "v2k-dupe1-w200": (_shape(256, 4, 128), 64, 64, "lamb", 0.01, 2000, True, "float32",
                       {"dupe_factor": 1, "warmup": 200}),
    "v2k-dupe1-w300-lr5e-3": (_shape(256, 4, 128), 64, 64, "lamb", 0.005, 2000, True,
                              "float32", {"dupe_factor": 1, "warmup": 300}),
    "v4k-dupe1": (_shape(256, 4, 128), 64, 64, "lamb", 0.01, 4000, True, "float32",
                  {"dupe_factor": 1}),
    "h128-dupe1": (_shape(128, 4, 64), 64, 64, "lamb", 0.01, 2000, True, "float32",
                   {"dupe_factor": 1}),
}


def recipe(name: str) -> tuple:
    """RECIPES[name] with its options filled in: (..., precision, options)."""
    fields = RECIPES[name]
    return (*fields[:8], {"dupe_factor": 3, "dynamic_masking": False, "warmup": None,
                          **(fields[8] if len(fields) > 8 else {})})


def prepare(work: str, vocab_size: int, seq_length: int, dupe_factor: int = 3) -> dict:
    """Split, vocabulary and TFRecords (train and held-out) for one vocab and seq length."""
    from albert_tf.training.data import corpus, pairs
    from albert_tf.training.data import split as corpus_tasks
    from albert_tf.training.data.create_data import SUMMARY_FILE, create_pretraining_data
    from albert_tf.training.data.vocab import train_vocab

    split_dir = os.path.join(work, "split")
    if not os.path.exists(os.path.join(split_dir, "split.json")):
        corpus_tasks.prepare_corpus_split(corpus.EMBEDDED, split_dir)
    train_text = os.path.join(split_dir, "train.txt")
    prefix = os.path.join(work, f"vocab{vocab_size}", "spiece")
    if not os.path.exists(prefix + ".model"):
        train_vocab([train_text], prefix, vocab_size)
    paths = {"spm_model": prefix + ".model"}
    for name in ("train", "heldout"):
        out = os.path.join(work, f"data-v{vocab_size}-s{seq_length}-d{dupe_factor}", name)
        if not os.path.exists(os.path.join(out, SUMMARY_FILE)):
            options = pairs.GenerationOptions(max_seq_length=seq_length,
                                            max_predictions_per_seq=max(4, seq_length * 20 // 128),
                                            dupe_factor=dupe_factor if name == "train" else 1)
            create_pretraining_data(corpus.open_corpus(os.path.join(split_dir, f"{name}.txt")),
                                    out, prefix + ".model", options)
        paths[name] = os.path.join(out, "pretrain-*.tfrecord")
    return paths


def run_one(work: str, name: str, steps: int) -> dict:
    """Pretrains recipe `name` for `steps` steps; returns its figures (also saved)."""
    import keras
    import numpy as np

    from albert_tf.training.experiments.demo.budget import warmup_steps
    from albert_tf.training.pretrain.config import PretrainConfig
    from albert_tf.training.pretrain.evaluation import evaluate_pretraining
    from albert_tf.training.pretrain.run import run

    shape, seq, batch, optimizer, lr, vocab, jit, precision, options = recipe(name)
    data = prepare(work, vocab, seq, options["dupe_factor"])
    warmup = options["warmup"] or warmup_steps(steps)
    out = os.path.join(work, f"runs-{steps}", name)
    step_times: list[float] = []

    class Timer(keras.callbacks.Callback):
        def on_train_batch_begin(self, batch, logs=None):
            self.start = time.perf_counter()

        def on_train_batch_end(self, batch, logs=None):
            step_times.append(time.perf_counter() - self.start)

    cfg = PretrainConfig(model="albert-base", albert={**shape, "max_position_embeddings": seq},
                         train_data=data["train"], eval_data=data["heldout"], eval_steps=4,
                         output_dir=out, spm_model=data["spm_model"],
                         global_batch_size=batch, train_steps=steps,
                         warmup_steps=warmup, learning_rate=lr, optimizer=optimizer,
                         dynamic_masking=options["dynamic_masking"],
                         checkpoint_every=max(1, steps // 6), log_every=max(1, steps // 10),
                         keep_checkpoints=1, shuffle_buffer=2000, jit_compile=jit,
                         precision=precision)
    original_fit = keras.Model.fit

    def fit(self, *args, callbacks=(), **kwargs):  # adds the step timer to the run's fit
        return original_fit(self, *args, callbacks=[*callbacks, Timer()], **kwargs)

    keras.Model.fit = fit
    start = time.perf_counter()
    try:
        summary = run(cfg)
    finally:
        keras.Model.fit = original_fit
    wall = time.perf_counter() - start
    held = evaluate_pretraining(os.path.join(out, "model"), data["heldout"], batch_size=64,
                                max_batches=20)
    history = summary["history"]
    result = {"recipe": name, "steps": steps, "shape": shape, "seq_length": seq,
              "batch_size": batch, "optimizer": optimizer, "learning_rate": lr,
              "warmup_steps": warmup, "dupe_factor": options["dupe_factor"],
              "dynamic_masking": options["dynamic_masking"],
              "vocab_size": vocab,
              "jit_compile": jit, "precision": precision, "train_wall_s": wall,
              "s_per_step": float(np.median(step_times[len(step_times) // 2:])),
              "train_mlm_accuracy": history["mlm_accuracy"][-1],
              "train_sop_accuracy": history["sop_accuracy"][-1],
              "heldout_mlm_accuracy": held["mlm_accuracy"],
              "heldout_sop_accuracy": held["sop_accuracy"],
              "heldout_mlm_loss": held["mlm_loss"],
              "heldout_examples": held["examples"], "load_average": os.getloadavg()[0],
              # the held-out curve (4 batches every sixth of the run): is SOP still rising?
              "heldout_sop_curve": history.get("val_sop_accuracy", []),
              "heldout_mlm_curve": history.get("val_mlm_accuracy", [])}
    return result


def _cpu_flags() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            flags = next(line for line in f if line.startswith("flags")).split()
    except (OSError, StopIteration):
        return "unknown"
    return " ".join(f for f in flags if f.startswith(("avx512_bf16", "amx", "avx512f", "avx2")))


def table(results: list[dict]) -> str:
    base = results[0]["s_per_step"] if results else 1.0
    rows = ["| recipe | H/L/E | seq x batch | optimizer, lr | vocab | XLA | precision | s/step | "
            "vs first | data | held-out MLM | held-out SOP | train MLM | train SOP | "
            "held-out SOP curve |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        s = r["shape"]
        rows.append(
            f"| {r['recipe']} | {s['hidden_size']}/{s['num_hidden_layers']}/"
            f"{s['embedding_size']} | {r['seq_length']} x {r['batch_size']} | "
            f"{r.get('optimizer', 'lamb')} {r['learning_rate']:g} | {r['vocab_size']} | "
            f"{'on' if r['jit_compile'] else 'off'} | {r['precision']} | {r['s_per_step']:.2f} | "
            f"{r['s_per_step'] / base:.2f} | dupe {r.get('dupe_factor', 3)}"
            f"{', dynamic masks' if r.get('dynamic_masking') else ''}, warmup "
            f"{r['warmup_steps']} | {r['heldout_mlm_accuracy']:.3f} | "
            f"{r['heldout_sop_accuracy']:.3f} | {r['train_mlm_accuracy']:.3f} | "
            f"{r['train_sop_accuracy']:.3f} | "
            f"{' '.join(f'{v:.2f}' for v in r.get('heldout_sop_curve', []))} |")
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", default="/tmp/albert_demo_recipes")
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--recipes", default=",".join(RECIPES))
    parser.add_argument("--one", help=argparse.SUPPRESS)
    parser.add_argument("--table", action="store_true", help="print the saved results")
    args = parser.parse_args()
    names = args.recipes.split(",")
    unknown = [n for n in names if n not in RECIPES]
    if unknown:
        parser.error(f"unknown recipe(s) {', '.join(unknown)}; known: {', '.join(RECIPES)}")
    results_dir = os.path.join(args.work, f"results-{args.steps}")
    os.makedirs(results_dir, exist_ok=True)
    if args.one:
        result = run_one(args.work, args.one, args.steps)
        path = os.path.join(results_dir, f"{args.one}.json")
        with open(path + ".tmp", "w", encoding="utf-8") as f:
            json.dump(result, f, indent=2)
        os.replace(path + ".tmp", path)
        return
    for name in names if not args.table else []:
        if os.path.exists(os.path.join(results_dir, f"{name}.json")):
            continue
        print(f"recipe {name}: {args.steps} steps ...", flush=True)
        subprocess.run([sys.executable, __file__, "--work", args.work, "--steps",
                        str(args.steps), "--recipes", name, "--one", name], check=True)
    results = [json.load(open(os.path.join(results_dir, f"{n}.json"), encoding="utf-8"))
               for n in names if os.path.exists(os.path.join(results_dir, f"{n}.json"))]
    print(f"CPU flags: {_cpu_flags()}; cores: {os.cpu_count()}; "
          f"load average now: {os.getloadavg()[0]:.1f}; steps per recipe: {args.steps}")
    print(table(results))


if __name__ == "__main__":
    main()
