"""Tokenize + pack throughput: in-graph `AlbertPreprocessor` vs a Python `AlbertTokenizer` loop.

Both run in the same process on the same 1,024 English sentences (or pairs) of
the embedded corpus, with the same SentencePiece model, and produce the same
ids (checked before timing). The graph is a warm `tf.function` (tracing is not
timed); the two alternate, and each figure is the median of --repeats runs.

  python benchmarks/bench_tokenizer.py [--spm-model 30k-clean.model] [--seq-length 128]

Without --spm-model, a 5,000-piece vocabulary is trained on the embedded
corpus first (about half a minute).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

import numpy as np


def _sentences(count: int) -> list[str]:
    from albert_tf.training.data.embedded import embedded_documents

    sentences: list[str] = []
    for document in embedded_documents():
        sentences.extend(document)
        if len(sentences) >= count:
            return sentences[:count]
    raise SystemExit(f"the embedded corpus has only {len(sentences)} sentences")


def _train_model(directory: str) -> str:
    from albert_tf.training.data.corpus import write_corpus_file
    from albert_tf.training.data.embedded import embedded_documents
    from albert_tf.training.data.vocab import train_vocab

    corpus = os.path.join(directory, "corpus.txt")
    write_corpus_file(corpus, embedded_documents())
    model, _ = train_vocab([corpus], os.path.join(directory, "bench"), 5000)
    return model


def _median_seconds(fns, repeats: int) -> list[float]:
    """Median wall time of each of `fns`, run in turn so that they share the machine's load."""
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(repeats):
        for fn, samples in zip(fns, times):
            start = time.perf_counter()
            fn()
            samples.append(time.perf_counter() - start)
    return [statistics.median(samples) for samples in times]


def run(spm_model: str, batch_size: int, seq_length: int, repeats: int) -> list[tuple]:
    import tensorflow as tf

    from albert_tf.tokenizer import AlbertPreprocessor

    pre = AlbertPreprocessor(spm_model, seq_length)
    tok = pre.tokenizer
    sentences = _sentences(2 * batch_size)
    texts_a, texts_b = sentences[:batch_size], sentences[batch_size:]
    a, b = tf.constant(texts_a), tf.constant(texts_b)
    graph_single = tf.function(lambda x: pre(x))
    graph_pair = tf.function(lambda x, y: pre((x, y)))
    cases = [
        ("single", lambda: graph_single(a)["input_word_ids"].numpy(),
         lambda: [tok.encode_pair(t, None, seq_length) for t in texts_a], 1, graph_single(a)),
        ("pair", lambda: graph_pair(a, b)["input_word_ids"].numpy(),
         lambda: [tok.encode_pair(x, y, seq_length) for x, y in zip(texts_a, texts_b)], 2,
         graph_pair(a, b)),
    ]
    rows = []
    for name, graph_fn, python_fn, segments, graph_out in cases:
        python_out = python_fn()
        same = np.array_equal(graph_out["input_word_ids"].numpy(),
                              np.array([p["input_word_ids"] for p in python_out]))
        if not same:
            raise SystemExit(f"{name}: in-graph and Python ids differ; not timing")
        graph_s, python_s = _median_seconds([graph_fn, python_fn], repeats)
        rows.append((name, segments, batch_size / graph_s, batch_size / python_s))
    return rows


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--spm-model", help="SentencePiece model (default: train one)")
    parser.add_argument("--batch-size", type=int, default=1024)
    parser.add_argument("--seq-length", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=9)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as directory:
        spm_model = args.spm_model or _train_model(directory)
        rows = run(spm_model, args.batch_size, args.seq_length, args.repeats)
        from albert_tf.tokenizer.spm import AlbertTokenizer

        vocab_size = AlbertTokenizer(spm_model).vocab_size
    import tensorflow as tf

    print(f"\ntokenize + pack, batch {args.batch_size}, seq_length {args.seq_length}, "
          f"vocab {vocab_size}, {os.cpu_count()} CPUs, TF {tf.__version__}, "
          f"median of {args.repeats}")
    print("| input  | sentences/row | in-graph rows/s | Python rows/s | in-graph / Python |")
    print("|--------|---------------|-----------------|---------------|-------------------|")
    for name, segments, graph_rate, python_rate in rows:
        print(f"| {name:<6} | {segments:>13} | {graph_rate:>15,.0f} | {python_rate:>13,.0f} | "
              f"{graph_rate / python_rate:>16.2f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
