"""The two Unicode walks an export pays for, over the assigned code points (what the product
reads, `albert_tf.tokenizer.normalize.assigned_characters`) and over every code point (what it
would read otherwise), side by side in one run, with the results checked equal:

* the in-graph tokenizer's Unicode tables (`normalize.unicode_tables`), read once per process
  that builds a SavedModel's text graph;
* the LiteRT character map of a SentencePiece model (`spm_model.composed_rules`), composed
  once per .tflite export of a SentencePiece vocabulary;
* the LiteRT model of a Unigram tokenizer.json (`json_spm_model.lite_json_model`), composed
  once per .tflite export of a transformers 5 directory: here the tokenizer.json transformers
  makes of the same model (`json_of_spm.tokenizer_json_of_spm`).

    python benchmarks/bench_unicode_walks.py                       # the repo's real model
    python benchmarks/bench_unicode_walks.py --spm-model spiece.model --repeats 5

Take the figures on a quiet machine: the table prints the load average and CPU flags.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_serving import cpu_flags  # noqa: E402

REAL_MODEL = os.path.join(os.path.dirname(__file__), "..", "tests", "data", "real",
                          "google_albert", "albertvi_30k-clean.model")


def _median(fn, repeats: int) -> tuple[float, object]:
    """The median seconds of `repeats` calls of `fn`, and its last result."""
    times, result = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def _json_walks(proto: bytes, every: list[str], repeats: int) -> tuple[float, float, bool]:
    """(seconds over the mapped code points, seconds over every one, same model) of the
    LiteRT model of the tokenizer.json transformers makes of `proto`."""
    import json
    import tempfile

    from albert_tf.serving.litert import json_spm_model
    from albert_tf.tokenizer.json_of_spm import tokenizer_json_of_spm
    from albert_tf.tokenizer.kinds import python_tokenizer

    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "tokenizer.json")
        with open(path, "w", encoding="utf-8") as f:
            json.dump(tokenizer_json_of_spm(proto, True, False), f, ensure_ascii=False)
        tokenizer = python_tokenizer(path)
    mapped_s, model = _median(lambda: json_spm_model.lite_json_model(tokenizer).model_proto, repeats)
    domain = json_spm_model.mapped_code_points
    json_spm_model.mapped_code_points = lambda own, named: every
    try:
        walked_s, walked = _median(lambda: json_spm_model.lite_json_model(tokenizer).model_proto,
                                   repeats)
    finally:
        json_spm_model.mapped_code_points = domain
    return mapped_s, walked_s, model == walked


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--spm-model", default=REAL_MODEL, help="a SentencePiece .model")
    parser.add_argument("--repeats", type=int, default=3, help="medians of this many runs")
    args = parser.parse_args(argv)
    import numpy as np

    from albert_tf.serving.litert import spm_model
    from albert_tf.tokenizer import normalize

    every = spm_model._code_points()
    rows = []
    assigned_s, fast = _median(lambda: normalize.tables_of(normalize.assigned_characters()),
                             args.repeats)
    every_s, full = _median(lambda: normalize.tables_of(every), args.repeats)
    same = all(np.array_equal(np.asarray(getattr(fast, field.name)),
                              np.asarray(getattr(full, field.name)))
               for field in dataclasses.fields(fast))
    rows.append(("Unicode tables", assigned_s, every_s, same))
    with open(args.spm_model, "rb") as f:
        proto = f.read()

    def mapped():
        spm_model.composed_rules.cache_clear()
        spm_model._own_keys.cache_clear()
        return spm_model.composed_rules(proto, True, False)

    def walked():
        image = {c: spm_model.character_image(c, True, False) for c in every}
        return tuple(sorted(spm_model.compose_rules(proto, image).items()))

    mapped_s, rules = _median(mapped, args.repeats)
    walked_s, walked_rules = _median(walked, args.repeats)
    rows.append((f"LiteRT character map ({len(rules):,} rules)", mapped_s, walked_s,
                 rules == walked_rules))
    rows.append(("LiteRT model of its tokenizer.json", *_json_walks(proto, every, args.repeats)))
    print(f"load average {os.getloadavg()[0]:.2f}; CPU flags: {cpu_flags()}; "
          f"median of {args.repeats}; {len(normalize.assigned_characters()):,} assigned of "
          f"{len(every):,} code points")
    print(f"{'walk':<40} {'assigned s':>10} {'every s':>8} {'ratio':>6}  equal")
    for name, ours, theirs, equal in rows:
        print(f"{name:<40} {ours:>10.2f} {theirs:>8.2f} {theirs / ours:>5.1f}x  {equal}")
    return 0 if all(row[3] for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
