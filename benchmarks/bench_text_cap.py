"""What 100 texts of 1 MB cost a seq-16 SavedModel, with and without the text cut.

Exports a tiny classifier at seq_length 16 twice (the served graph as built, and the
same graph with `AlbertPreprocessor.cut` made the identity: the graph before texts
were cut to what the window uses), then calls each `serving_default` in a fresh
process on 100 texts of 1 MB and prints the growth of the peak resident memory and
the call's time.

    python benchmarks/bench_text_cap.py SPM_MODEL [--texts 100] [--megabytes 1]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

CALL = r"""
import json, resource, sys, time
import numpy as np, tensorflow as tf, tensorflow_text  # noqa: F401
path, count, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
served = tf.saved_model.load(path).signatures["serving_default"]
served(text=tf.constant(["warm up"]))
words = "the quick brown fox jumps over the lazy dog ".encode()
text = (words * (size // len(words) + 1))[:size]
texts = tf.constant([text] * count)
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
start = time.monotonic()
served(text=texts)
elapsed = time.monotonic() - start
grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
print(json.dumps({"peak_growth_mb": grown / 1024, "seconds": elapsed,
                  "input_mb": count * size / 2**20}))
"""


def _export(spm_model: str, output: str, cut: bool) -> str:
    from albert_tf import AlbertConfig, AlbertSequenceClassifier, save_checkpoint
    from albert_tf.serving import export
    from albert_tf.tokenizer.preprocessor import AlbertPreprocessor
    from albert_tf.tokenizer.spm import AlbertTokenizer

    if not cut:
        AlbertPreprocessor.cut = lambda self, texts, keep_last=False: texts
    config = AlbertConfig(vocab_size=AlbertTokenizer(spm_model).vocab_size, embedding_size=16,
                          hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                          intermediate_size=64, max_position_embeddings=64)
    checkpoint = os.path.join(output, "checkpoint")
    save_checkpoint(AlbertSequenceClassifier(config, num_classes=2), checkpoint,
                    spm_model=spm_model)
    target = os.path.join(output, "served", "m")
    export.export(checkpoint, target, seq_length=16)
    return os.path.join(target, "1")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("spm_model")
    parser.add_argument("--texts", type=int, default=100)
    parser.add_argument("--megabytes", type=float, default=1.0)
    parser.add_argument("--export-only", choices=("cut", "whole"), help=argparse.SUPPRESS)
    parser.add_argument("--output", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.export_only:
        print(_export(args.spm_model, args.output, args.export_only == "cut"))
        return
    size = int(args.megabytes * 2**20)
    results = {}
    with tempfile.TemporaryDirectory() as root:
        for mode in ("whole", "cut"):
            out = os.path.join(root, mode)
            path = subprocess.run([sys.executable, __file__, args.spm_model, "--export-only",
                                   mode, "--output", out], check=True, capture_output=True,
                                  text=True).stdout.strip().splitlines()[-1]
            reply = subprocess.run([sys.executable, "-c", CALL, path, str(args.texts), str(size)],
                                   check=True, capture_output=True, text=True)
            results[mode] = json.loads(reply.stdout.strip().splitlines()[-1])
    print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
