"""Pretraining step throughput: ours vs KerasHub's AlbertMaskedLM, albert-large vs bert-large.

The batches are real pretraining data: the embedded corpus through `albert-tf
vocab` / `create-data` code at seq 128 with 20 predictions, read by the training
input pipeline; every row trains on the same batches. Rows that are compared
run in one subprocess and are timed in turns (ours, KerasHub, ours, ...), so a
shared machine's drifting CPU share hits them alike; the best round counts.
Model-FLOPs utilisation is the best step against this machine's best float32
matmul rate (2048^3 chain, the better of XLA and oneDNN), measured in the same
run after every round. Peak RSS is the group's process.

    python benchmarks/bench_pretrain.py            # the full table (~20 min on 2 cores)
    python benchmarks/bench_pretrain.py --quick    # fewer steps, no large models
    python benchmarks/bench_pretrain.py --one '{"rows": [...], ...}'   # one group, JSON

Rows:
* ours / keras_hub: Keras' own `fit` step (forward, loss, LAMB update) of
  AlbertPretrainer (MLM + SOP) / KerasHub AlbertMaskedLM (MLM only) at albert-base,
  the same optimizer (our LAMB), weighted MLM loss and accuracy, XLA on and off.
* ours_fit: the `albert-tf pretrain` path: tf.data pipeline, `model.fit` with our
  step functions and steps_per_execution, as on CPU (no XLA).
* albert-large / bert-large: ours, XLA, dropout off for both (the paper: ~1.7x).

KerasHub rows appear when keras-hub is importable (`pip install keras-hub`).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time

import table_runs  # (benchmarks/, the script's folder)

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
SEQ, PREDICTIONS = 128, 20


# ------------------------------------------------------------------- the data
def make_batches(directory: str, batch: int, count: int) -> str:
    """Writes `count` batches of real pretraining data to directory/batches.npz."""
    import numpy as np

    from albert_tf.training.data import create_data
    from albert_tf.training.data.corpus import write_corpus_file
    from albert_tf.training.data.embedded import embedded_documents
    from albert_tf.training.data.vocab import train_vocab
    from albert_tf.training.pretrain.pipeline import pretraining_dataset

    corpus = os.path.join(directory, "corpus.txt")
    write_corpus_file(corpus, embedded_documents(max_documents=300))
    spm_model, _ = train_vocab([corpus], os.path.join(directory, "spm"), 3000,
                               input_sentence_size=20000, num_threads=2)
    records = os.path.join(directory, "records")  # also read by the ours_fit row
    code = create_data.main([
        "--input", corpus, "--output", records, "--spm-model", spm_model,
        "--seq-length", str(SEQ), "--max-predictions-per-seq", str(PREDICTIONS),
        "--dupe-factor", "1", "--processes", "1"])
    if code:
        raise RuntimeError("create-data failed")
    arrays: dict[str, list] = {}
    dataset = pretraining_dataset(os.path.join(records, "*.tfrecord"), batch, SEQ,
                                  PREDICTIONS, seed=0)
    for features, labels in dataset.take(count):
        for name, value in {**features, **labels}.items():
            arrays.setdefault(name, []).append(value.numpy())
    path = os.path.join(directory, "batches.npz")
    np.savez(path, **{k: np.stack(v) for k, v in arrays.items()})
    return path


def load_batches(path: str, impl: str):
    """The saved batches as a repeating tf.data.Dataset of (inputs, labels[, weights])."""
    import numpy as np
    import tensorflow as tf

    data = dict(np.load(path))
    x = {n: data[n] for n in ("input_word_ids", "input_mask", "input_type_ids",
                              "masked_lm_positions")}
    if impl == "keras_hub":
        x = {"token_ids": x["input_word_ids"], "padding_mask": x["input_mask"],
             "segment_ids": x["input_type_ids"], "mask_positions": x["masked_lm_positions"]}
        elements = (x, data["masked_lm_ids"], data["masked_lm_weights"])
    else:
        elements = (x, {n: data[n] for n in ("masked_lm_ids", "masked_lm_weights",
                                             "sentence_order_label")})
    return tf.data.Dataset.from_tensor_slices(elements).repeat()  # one element = one batch


# ------------------------------------------------------------------ the FLOPs
def pretraining_flops_per_sequence(preset: str, seq: int = SEQ,
                                   predictions: int = PREDICTIONS) -> float:
    """Training FLOPs of one sequence: 3 x forward matmul FLOPs (2 per multiply-add).

    Forward: per token the E->H projection and L x (QKV + output + FFN + QK^T and PV);
    per masked position the MLM head (H->E dense, E->V tied decoder); the pooler
    and SOP head once. Embedding lookups and elementwise work are not counted.
    """
    from albert_tf import AlbertConfig

    c = AlbertConfig.from_size(preset)
    h, i, e, v = c.hidden_size, c.intermediate_size, c.embedding_size, c.vocab_size
    layer = 2 * (4 * h * h + 2 * h * i) + 2 * 2 * seq * h
    per_token = c.num_hidden_layers * c.inner_group_num * layer + (2 * e * h if e != h else 0)
    mlm = predictions * (2 * h * e + 2 * e * v)
    return 3 * (seq * per_token + mlm + 2 * h * h + 2 * h * 2)


def matmul_peak(n: int = 2048, repeats: int = 10) -> float:
    """Measured float32 TFLOP/s of an n x n matmul chain: the better of XLA and
    TensorFlow's own (oneDNN) kernels, best of 3 (the MFU denominator)."""
    import tensorflow as tf

    a = tf.random.normal((n, n))

    def chain(x):
        for _ in range(repeats):
            x = tf.matmul(x, a) * (1.0 / n)
        return x

    best = float("inf")
    for jit in (True, False):
        compiled = tf.function(chain, jit_compile=jit)
        compiled(a).numpy()
        for _ in range(3):
            start = time.perf_counter()
            compiled(a).numpy()
            best = min(best, time.perf_counter() - start)
    return 2 * n**3 * repeats / best / 1e12


# ---------------------------------------------------------------- the models
def _optimizer():
    from albert_tf.training.runtime.optimization import create_optimizer

    return create_optimizer("lamb", 1e-4, train_steps=1000, warmup_steps=10)


def build_ours(preset: str, jit: bool):
    import keras

    from albert_tf import AlbertConfig, AlbertPretrainer

    config = AlbertConfig.from_size(preset, hidden_dropout_prob=0.0,
                                      attention_probs_dropout_prob=0.0)
    keras.utils.set_random_seed(0)
    model = AlbertPretrainer(config)
    model.compile(optimizer=_optimizer(), jit_compile=jit)
    return model


def build_keras_hub(preset: str, jit: bool):
    import keras
    import keras_hub

    from albert_tf import AlbertConfig

    c = AlbertConfig.from_size(preset)
    keras.utils.set_random_seed(0)
    backbone = keras_hub.models.AlbertBackbone(
        vocabulary_size=c.vocab_size, num_layers=c.num_hidden_layers,
        num_heads=c.num_attention_heads, embedding_dim=c.embedding_size,
        hidden_dim=c.hidden_size, intermediate_dim=c.intermediate_size,
        num_groups=c.num_hidden_groups, dropout=0.0,
        max_sequence_length=c.max_position_embeddings)
    model = keras_hub.models.AlbertMaskedLM(backbone)
    # The same weighted MLM loss as ours (masked_lm_weights as sample weights).
    model.compile(optimizer=_optimizer(),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  weighted_metrics=["sparse_categorical_accuracy"], jit_compile=jit)
    return model


def _keras_fit_runner(row: dict, batches: str):
    """One `fit` call of `chunk` steps of Keras' own train function on the saved batches."""
    build = build_ours if row["impl"] == "ours" else build_keras_hub
    model = build(row["preset"], row["jit"])
    data = load_batches(batches, row["impl"])
    return lambda steps: model.fit(data, steps_per_epoch=steps, epochs=1, verbose=0)


def _pretrain_fit_runner(row: dict, records: str, batch: int):
    """The `albert-tf pretrain` path: its tf.data pipeline, model and step functions."""
    import tensorflow as tf

    from albert_tf.training.pretrain.run import run as pretrain

    spe = row["steps_per_execution"]
    cfg = pretrain.load_config(None, [
        f"model={row['preset']}", f"train_data={records}/*.tfrecord", "output_dir=unused",
        f"global_batch_size={batch}", f"steps_per_execution={spe}",
        f"train_steps={spe}", f"checkpoint_every={spe}", "jit_compile=false"])
    strategy = tf.distribute.get_strategy()
    model = pretrain.build_model(cfg, strategy, None)
    train, _ = pretrain.make_datasets(cfg, strategy, SEQ, PREDICTIONS, 0)
    return lambda steps: model.fit(train, steps_per_epoch=steps, epochs=1, verbose=0)


def measure(spec: dict) -> list[dict]:
    """Rows compared with each other, timed in turns in one process.

    Each round times `chunk` steps of every row (the order alternating between
    rounds), then the matmul peak. On a shared machine a step takes either its
    uncontended time or much longer, so the best round is reported (medians are
    kept in the JSON), and MFU is the best step against the best peak.
    """
    import numpy as np

    runners = []
    for row in spec["rows"]:
        if row["impl"] == "ours_fit":
            runner = _pretrain_fit_runner(row, spec["records"], spec["batch"])
        else:
            runner = _keras_fit_runner(row, spec["batches"])
        runner(spec["chunk"])  # compilation and warm-up
        runners.append(runner)
    seconds = [[] for _ in runners]
    peaks = []
    for round_index in range(spec["rounds"]):
        order = list(range(len(runners)))
        for index in order if round_index % 2 == 0 else order[::-1]:
            start = time.perf_counter()
            runners[index](spec["chunk"])
            seconds[index].append((time.perf_counter() - start) / spec["chunk"])
        peaks.append(matmul_peak(repeats=5))
    results = []
    peak = max(peaks)
    for row, times in zip(spec["rows"], seconds):
        step = min(times)
        sequences = spec["batch"] / step
        tflops = sequences * pretraining_flops_per_sequence(row["preset"]) / 1e12
        results.append({**row, "batch": spec["batch"], "step_s": step,
                        "median_step_s": float(np.median(times)), "sequences_per_s": sequences,
                        "tokens_per_s": sequences * SEQ, "tflops": tflops, "mfu": tflops / peak,
                        "peak_tflops": peak, "median_peak_tflops": float(np.median(peaks)),
                        "peak_rss_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20})
    return results


# ---------------------------------------------------------------------- table
def run_group(spec: dict) -> list[dict]:
    rows, error = table_runs.run_child(__file__, spec)
    return [{**row, "error": error} for row in spec["rows"]] if error else rows


def plan(quick: bool, keras_hub: bool, batches: str, records: str, batch: int) -> list[dict]:
    """Groups of rows timed in turns (see `measure`)."""
    rounds = 2 if quick else 6
    common = dict(batches=batches, records=records, batch=batch, chunk=2, rounds=rounds)
    impls = ["ours"] + (["keras_hub"] if keras_hub else [])
    groups = [dict(rows=[dict(impl=i, preset="albert-base", jit=True) for i in impls],
                   **common),
              dict(rows=[dict(impl=i, preset="albert-base", jit=False) for i in impls]
                   + [dict(impl="ours_fit", preset="albert-base", jit=False,
                           steps_per_execution=2)], **common)]
    if not quick:
        groups.append(dict(rows=[dict(impl="ours", preset=p, jit=True)
                                 for p in ("albert-large", "bert-large")],
                           **{**common, "rounds": 6, "chunk": 1}))
    return groups


def summarize(rows: list[dict]) -> list[str]:
    def find(**kw):
        for r in rows:
            if "error" not in r and all(r.get(k) == v for k, v in kw.items()):
                return r["sequences_per_s"]
        return None

    lines = []
    for jit in (True, False):
        ours = find(impl="ours", preset="albert-base", jit=jit)
        hub = find(impl="keras_hub", preset="albert-base", jit=jit)
        if ours and hub:
            lines.append(f"ours / KerasHub AlbertMaskedLM train step, albert-base seq {SEQ}, "
                         f"XLA {'on' if jit else 'off'}: {ours / hub:.2f}x")
    large, bert = find(preset="albert-large"), find(preset="bert-large")
    if large and bert:
        lines.append(f"albert-large / bert-large train step: {large / bert:.2f}x "
                     "(paper, TPU: ~1.7x)")
    return lines


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--one", help="measure one group (JSON, see plan) and print JSON")
    parser.add_argument("--quick", action="store_true", help="fewer steps, no large models")
    parser.add_argument("--batch", type=int, default=8, help="sequences per step (default 8)")
    parser.add_argument("--json", help="also write the rows to this file")
    args = parser.parse_args(argv)
    if args.one:
        print(json.dumps(measure(json.loads(args.one))))
        return 0
    try:
        import keras_hub  # noqa: F401
        keras_hub_available = True
    except ImportError:
        keras_hub_available = False
        print("keras-hub not importable: KerasHub rows skipped (pip install keras-hub)")
    with tempfile.TemporaryDirectory() as directory:
        batches = make_batches(directory, args.batch, 8)
        peak = matmul_peak()
        print(f"float32 matmul peak (2048^3): {peak:.3f} TFLOP/s; batch {args.batch}, "
              f"seq {SEQ}, {PREDICTIONS} predictions")
        print(f"{'impl':<10} {'preset':<13} {'XLA':<4} {'seq/s':>7} {'tokens/s':>9} "
              f"{'TFLOP/s':>8} {'peak':>6} {'MFU':>6} {'step s':>7} {'peak RSS':>9}")
        rows = []
        for group in plan(args.quick, keras_hub_available, batches,
                          os.path.join(directory, "records"), args.batch):
            for row in run_group(group):
                rows.append(row)
                label = (f"{row['impl']:<10} {row['preset']:<13} "
                         f"{'on' if row['jit'] else 'off':<4}")
                if "error" in row:
                    print(f"{label} ERROR {row['error']}", flush=True)
                    continue
                print(f"{label} {row['sequences_per_s']:>7.2f} {row['tokens_per_s']:>9.0f} "
                      f"{row['tflops']:>8.3f} {row['peak_tflops']:>6.3f} {row['mfu']:>6.1%} "
                      f"{row['step_s']:>7.2f} {row['peak_rss_gib']:>7.2f}Gi", flush=True)
    return table_runs.finish(summarize(rows), peak, rows, args.json)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
