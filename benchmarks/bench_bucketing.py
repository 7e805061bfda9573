"""Fine-tuning throughput with length bucketing vs fixed max-length padding, SST-2-like lengths.

SST-2 sentences are short with a long tail, so padding every batch to
--seq-length wastes most of the compute. The lengths here are drawn from a
log-normal (median 11 tokens, mean ~13, clipped to 3..66 with [CLS]/[SEP])
that mimics SST-2's training sentences; the token ids are random (speed does
not depend on them). Both modes run the same pipeline code as `albert-tf
finetune` (`make_dataset`, `predict_rows`, `model.fit`), after one warm-up pass
so compilation (one program per bucket) is not timed.

    python benchmarks/bench_bucketing.py                   # albert-base, seq 128
    python benchmarks/bench_bucketing.py --model tiny      # a few seconds
    python benchmarks/bench_bucketing.py --seq-length 512  # run_glue.sh's length
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def sst2_like_lengths(n: int, seq_length: int, seed: int = 0):
    import numpy as np

    rng = np.random.default_rng(seed)
    lengths = np.exp(rng.normal(np.log(11.0), 0.6, size=n)).round().astype(int)
    return np.clip(lengths, 3, min(66, seq_length))


def make_data(n: int, seq_length: int, vocab_size: int):
    import numpy as np

    from albert_tf.training.finetune.bucketing import Encoded

    rng = np.random.default_rng(1)
    lengths = sst2_like_lengths(n, seq_length)
    features = {"input_word_ids": [rng.integers(5, vocab_size, l).astype(np.int32) for l in lengths],
                "input_mask": [np.ones(l, np.int32) for l in lengths],
                "input_type_ids": [np.zeros(l, np.int32) for l in lengths]}
    return Encoded(features, {"logits": rng.integers(0, 2, n)})


def build_model(name: str, vocab_size: int):
    import keras

    from albert_tf import AlbertConfig, AlbertSequenceClassifier
    from albert_tf.training.runtime.optimization import create_optimizer

    if name == "base":
        config = AlbertConfig.from_size("albert-base").replace(vocab_size=vocab_size)
    else:
        config = AlbertConfig(vocab_size=vocab_size, embedding_size=64, hidden_size=128,
                              num_hidden_layers=4, num_attention_heads=4, intermediate_size=512)
    model = AlbertSequenceClassifier(config, 2)
    model.compile(optimizer=create_optimizer("adamw", 2e-5, 1000, 100),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


def time_predict(model, data, batch, seq_length, buckets) -> float:
    from albert_tf.training.finetune.train import predict_rows

    predict_rows(model, data, batch, seq_length, buckets)  # warm-up: one compile per bucket
    start = time.perf_counter()
    predict_rows(model, data, batch, seq_length, buckets)
    return len(data) / (time.perf_counter() - start)


def warmup_data(data, batch, buckets):
    """`batch` examples of every non-empty bucket: one pass compiles each bucket's shape."""
    import numpy as np

    lengths = data.lengths()
    bucket_of = np.searchsorted(np.asarray(buckets), lengths)
    chosen = []
    for b in np.unique(bucket_of):
        members = np.nonzero(bucket_of == b)[0]
        chosen.extend(np.resize(members, batch))  # repeats members of a small bucket
    return data.subset(chosen), len(np.unique(bucket_of))


def time_train(model, data, batch, seq_length, buckets, steps: int) -> float:
    from albert_tf.training.finetune.bucketing import make_dataset

    warm, warm_steps = warmup_data(data, batch, buckets or [seq_length])
    model.fit(make_dataset(warm, batch, seq_length, buckets, training=True, seed=0),
              epochs=1, steps_per_epoch=warm_steps, verbose=0, shuffle=False)
    ds = make_dataset(data, batch, seq_length, buckets, training=True, seed=0)
    start = time.perf_counter()
    model.fit(ds, epochs=1, steps_per_epoch=steps, verbose=0, shuffle=False)
    return steps * batch / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=("base", "tiny"), default="base")
    parser.add_argument("--seq-length", type=int, default=128)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--examples", type=int, default=512, help="examples to predict")
    parser.add_argument("--train-steps", type=int, default=8, help="timed training steps")
    args = parser.parse_args()

    from albert_tf.training.finetune.bucketing import default_buckets

    vocab_size = 30000
    data = make_data(args.examples, args.seq_length, vocab_size)
    lengths = data.lengths()
    buckets = default_buckets(args.seq_length)
    padded = sum(min(b for b in buckets if b >= n) for n in lengths)
    print(f"model={args.model} seq_length={args.seq_length} batch={args.batch_size} "
          f"examples={len(data)} mean length={lengths.mean():.1f} max={lengths.max()} "
          f"buckets={buckets}")
    print(f"real tokens / computed tokens: fixed {lengths.sum() / (len(data) * args.seq_length):.1%}, "
          f"bucketed {lengths.sum() / padded:.1%}")
    print(f"{'mode':<8} {'padding':<9} {'examples/s':>11}")
    results = {}
    for mode in ("predict", "train"):
        for label, chosen in (("fixed", None), ("bucketed", buckets)):
            model = build_model(args.model, vocab_size)
            if mode == "predict":
                rate = time_predict(model, data, args.batch_size, args.seq_length, chosen)
            else:
                rate = time_train(model, data, args.batch_size, args.seq_length, chosen,
                                  args.train_steps)
            results[mode, label] = rate
            print(f"{mode:<8} {label:<9} {rate:>11.1f}", flush=True)
        print(f"{mode:<8} {'speed-up':<9} {results[mode, 'bucketed'] / results[mode, 'fixed']:>10.2f}x")


if __name__ == "__main__":
    main()
