"""Does Keras' int8 quantization make the classifier faster on this CPU?

Builds an albert-base-shape AlbertSequenceClassifier (random weights: speed does not
depend on the values), times its forward pass at batch 32 x seq 128 in float32,
then after `model.quantize("int8")` (Keras' dynamic int8: int8 kernels with
per-channel scales, activations quantized per call), both as tf.functions in the
same process, medians of --repeats calls.

    python benchmarks/bench_int8.py

Measured on the 2-core development CPU (avx512f avx512_bf16 avx512_vnni, no AMX):
int8 0.32x float32 (TensorFlow runs the int8 matmuls without oneDNN's VNNI kernels),
so exports offer float32 and bfloat16 only.
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def median_seconds(fn, repeats: int) -> float:
    import numpy as np

    fn()  # trace and warm up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=4)
    args = parser.parse_args()
    import warnings

    import numpy as np
    import tensorflow as tf

    from albert_tf import AlbertConfig, AlbertSequenceClassifier
    from albert_tf.training.runtime.distribute import cpu_bf16_features

    config = AlbertConfig(**{**AlbertConfig.from_size("albert-base").to_dict(),
                             "vocab_size": 5000})
    model = AlbertSequenceClassifier(config, 3)
    rng = np.random.default_rng(0)
    inputs = {"input_word_ids": rng.integers(5, 5000, (args.batch, args.seq)).astype("int32"),
              "input_mask": np.ones((args.batch, args.seq), "int32"),
              "input_type_ids": np.zeros((args.batch, args.seq), "int32")}
    fp32 = median_seconds(tf.function(lambda: model(inputs)), args.repeats)
    with warnings.catch_warnings():  # LayerNorm / Dropout have nothing to quantize
        warnings.simplefilter("ignore")
        model.quantize("int8")
    int8 = median_seconds(tf.function(lambda: model(inputs)), args.repeats)
    print(f"cpu flags: {' '.join(sorted(cpu_bf16_features())) or 'none'}; {os.cpu_count()} cpus; "
          f"albert-base classifier forward, batch {args.batch} x seq {args.seq}")
    print(f"float32 {fp32 * 1e3:.0f} ms, int8 {int8 * 1e3:.0f} ms: int8 / float32 speed "
          f"{fp32 / int8:.2f}x")


if __name__ == "__main__":
    main()
