"""The cost of doc-stride windows in served span QA: a 1-window vs a 4-window context.

An albert-base-shape AlbertSpanExtractor (random weights) behind the served span graph
(`serving/signatures/span.py`'s `serving_default`: tokenization with offsets, the window
split, one batch of every window, decoding across windows), at seq_length 384, doc_stride
128 (the SQuAD defaults). Batch 1: one question on a context that fills one window
(about 360 pieces) and one that needs four (about 750 pieces). The calls alternate
(A, B, A, B, ...) after a warm-up; p50 / p90 latency over --requests calls each, with the
CPU flags, core count and load average printed.

    python benchmarks/bench_windows.py                 # albert-base, seq 384
    python benchmarks/bench_windows.py --model tiny    # a smoke run
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_serving import cpu_flags, sentences, spm_model  # noqa: E402

QUESTION = "What does the passage say about the river and the town?"


def context_of(tokenizer, windows: int, seq_length: int, doc_stride: int, query: int) -> str:
    """Corpus sentences whose pieces need exactly `windows` windows, close to the most."""
    from albert_tf.span_decoding import context_room, window_count

    room = context_room(seq_length, query)
    target = room + (windows - 1) * doc_stride - 16  # near the top of that window count
    text, pieces = [], 0
    for sentence in sentences(2000):
        count = len(tokenizer.encode(sentence))
        if pieces + count > target:
            continue
        text.append(sentence)
        pieces += count
        if pieces > target - 12:
            break
    context = " ".join(text)
    assert window_count(len(tokenizer.encode(context)), room, doc_stride) == windows
    return context


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=("base", "tiny"), default="base")
    parser.add_argument("--requests", type=int, default=30)
    parser.add_argument("--spm-model", help="default: a 5000-piece vocabulary of the corpus")
    args = parser.parse_args(argv)

    import numpy as np
    import tensorflow as tf

    from albert_tf import AlbertConfig, AlbertSpanExtractor
    from albert_tf.checkpoint.task_record import TaskRecord
    from albert_tf.serving.signatures.span import SpanModule
    from albert_tf.tokenizer import AlbertPreprocessor

    seq_length, doc_stride = 384, 128
    with tempfile.TemporaryDirectory() as folder:
        pre = AlbertPreprocessor(spm_model(args.spm_model, folder), seq_length)
        base = AlbertConfig.from_size("albert-base")
        config = base.replace(vocab_size=pre.tokenizer.vocab_size) if args.model == "base" else \
            AlbertConfig(vocab_size=pre.tokenizer.vocab_size, embedding_size=16, hidden_size=32,
                         num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                         max_position_embeddings=512)
        record = TaskRecord.create("span", seq_length=seq_length, doc_stride=doc_stride)
        module = SpanModule(AlbertSpanExtractor(config), pre, record)
        answer = module.answer.get_concrete_function()
        query = len(pre.tokenizer.encode(QUESTION))
        contexts = {n: context_of(pre.tokenizer, n, seq_length, doc_stride, query) for n in (1, 4)}
        inputs = {n: (tf.constant([QUESTION]), tf.constant([c])) for n, c in contexts.items()}
        for n in contexts:  # warm-up: every shape's kernels once
            for _ in range(3):
                answer(*inputs[n])
        times = {n: [] for n in contexts}
        for _ in range(args.requests):
            for n in contexts:
                started = time.perf_counter()
                answer(*inputs[n])["answer"].numpy()
                times[n].append(time.perf_counter() - started)
    load = os.getloadavg()
    print(f"cpu flags: {cpu_flags()}; {os.cpu_count()} cpus; tf {tf.__version__}; load "
          f"average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    print(f"model {args.model}, seq_length {seq_length}, doc_stride {doc_stride}, batch 1, "
          f"{args.requests} calls each, alternating")
    p50 = {}
    for n, values in times.items():
        ms = np.array(values) * 1000
        p50[n] = np.percentile(ms, 50)
        pieces = len(pre.tokenizer.encode(contexts[n]))
        print(f"{n} window(s) ({pieces} context pieces): p50 {p50[n]:.1f} ms, "
              f"p90 {np.percentile(ms, 90):.1f} ms")
    print(f"4 windows / 1 window: {p50[4] / p50[1]:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
