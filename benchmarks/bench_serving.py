"""Serving latency: the exported raw-text signature vs the eager model + Python tokenizer.

Exports an AlbertSequenceClassifier (albert-base shape, random weights: speed does
not depend on the values) twice, with dynamic padding (the default) and padded
to a fixed --seq-length, reloads both with tf.saved_model.load, and times:

* the text signature (tokenization in the graph) at batch 1 and 32, against the
  eager Keras model fed by the Python `AlbertTokenizer` (padded to the batch's
  longest row, rounded up to 16 as the graph does);
* one 12-word text through the dynamic export vs the fixed-length one.

Texts are sentences of the embedded corpus; the vocabulary is trained from it
(`train_vocab`, 5000 pieces unless --spm-model is given). Each figure follows
warm-up calls; latency percentiles are over --requests timed calls.

    python benchmarks/bench_serving.py                 # albert-base, seq 512
    python benchmarks/bench_serving.py --model tiny    # a smoke run in seconds
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

TWELVE_WORDS = "The quick brown fox jumps over the lazy dog near the river bank."


def sentences(count: int) -> list[str]:
    from albert_tf.training.corpus import embedded_documents

    out = [s for doc in embedded_documents(max_documents=200) for s in doc if len(s) > 20]
    return (out * (count // max(len(out), 1) + 1))[:count]


def spm_model(path: str | None, folder: str) -> str:
    if path:
        return path
    from albert_tf.training.corpus import embedded_documents, write_corpus_file
    from albert_tf.training.vocab import train_vocab

    corpus = os.path.join(folder, "corpus.txt")
    write_corpus_file(corpus, iter(embedded_documents()))
    return train_vocab([corpus], os.path.join(folder, "spm"), 5000)[0]


def build(name: str, vocab_size: int):
    from albert_tf import AlbertConfig, AlbertSequenceClassifier

    if name == "base":
        config = AlbertConfig.from_preset("albert-base").replace(vocab_size=vocab_size)
    else:
        config = AlbertConfig(vocab_size=vocab_size, embedding_size=32, hidden_size=64,
                              num_hidden_layers=2, num_attention_heads=4, intermediate_size=128)
    return AlbertSequenceClassifier(config, 2)


def timed(fn, batches, warmup: int = 3) -> list[float]:
    for batch in batches[:warmup]:
        fn(batch)
    times = []
    for batch in batches:
        start = time.perf_counter()
        fn(batch)
        times.append(time.perf_counter() - start)
    return times


def summary(label: str, batch: int, times: list[float]) -> str:
    import numpy as np

    p50, p99 = np.percentile(times, 50) * 1e3, np.percentile(times, 99) * 1e3
    rps = len(times) / sum(times)
    return (f"| {label:<38} | {batch:>5} | {rps:>8.2f} | {rps * batch:>9.1f} | {p50:>8.1f} "
            f"| {p99:>8.1f} |")


def eager_predict(model, tokenizer, seq_length: int):
    import numpy as np

    def run(texts):
        rows = [tokenizer.encode_pair(t, None, seq_length) for t in texts]
        longest = max(sum(r["input_mask"]) for r in rows)
        length = min(seq_length, -(-longest // 16) * 16)
        features = {k: np.array([r[k][:length] for r in rows], np.int32) for k in rows[0]}
        return model(features, training=False)["logits"].numpy()
    return run


def max_difference(served, eager, texts) -> dict[str, float]:
    """Largest |Δ| between each export's probabilities and the eager model's."""
    import numpy as np
    import tensorflow as tf

    want = tf.nn.softmax(eager(texts)).numpy()
    return {name: float(np.abs(fn(text=tf.constant(texts))["probabilities"].numpy() - want).max())
            for name, fn in served.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", choices=("base", "tiny"), default="base")
    parser.add_argument("--seq-length", type=int, default=512)
    parser.add_argument("--requests", type=int, default=40, help="timed calls per figure")
    parser.add_argument("--spm-model", help="SentencePiece model (default: train one)")
    args = parser.parse_args()

    import tensorflow as tf
    import tensorflow_text  # noqa: F401

    from albert_tf.serving import export
    from albert_tf.tokenizer import AlbertPreprocessor, AlbertTokenizer

    with tempfile.TemporaryDirectory() as folder:
        spm_path = spm_model(args.spm_model, folder)
        tokenizer = AlbertTokenizer(spm_path)
        model = build(args.model, tokenizer.vocab_size)
        pre = AlbertPreprocessor(spm_path, args.seq_length)
        served = {}
        for name, multiple in (("dynamic", 16), ("fixed", None)):
            path = os.path.join(folder, name)
            export.save_module(export.build_module(model, pre, pad_multiple=multiple), path, name)
            served[name] = tf.saved_model.load(path).signatures["serving_default"]
        text = sentences(32 * (args.requests + 3))
        rows = ["| path | batch | req/s | texts/s | p50 ms | p99 ms |", "|---|---|---|---|---|---|"]
        for batch in (1, 32):
            batches = [text[i * batch:(i + 1) * batch] for i in range(args.requests)]
            graph = served["dynamic"]
            rows.append(summary("SavedModel text signature", batch, timed(
                lambda b: graph(text=tf.constant(b)), batches)))
            rows.append(summary("eager model + Python tokenizer", batch, timed(
                eager_predict(model, tokenizer, args.seq_length), batches)))
        parity = max_difference(served, eager_predict(model, tokenizer, args.seq_length),
                                text[:32])
        single = [[TWELVE_WORDS]] * args.requests
        for name in ("dynamic", "fixed"):
            fn = served[name]
            label = f"12 words, {'dynamic padding' if name == 'dynamic' else f'fixed {args.seq_length}'}"
            rows.append(summary(label, 1, timed(lambda b: fn(text=tf.constant(b)), single)))
    print(f"model={args.model} (random weights) seq_length={args.seq_length} "
          f"vocab={tokenizer.vocab_size} cpus={os.cpu_count()} tf={tf.__version__}")
    print("\n".join(rows))
    print("parity with the eager model + Python tokenizer on 32 sentences, max |Δ probability|: "
          + ", ".join(f"{name} {value:.2e}" for name, value in parity.items()))


if __name__ == "__main__":
    main()
