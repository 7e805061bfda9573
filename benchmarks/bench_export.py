"""Export time: `albert-tf export` of the small task checkpoints in tests/fixtures/tasks
(Hugging Face and original TF1 directories: classifier, token labels, SQuAD spans, beam
spans, fill-mask, multiple choice), written four ways in one run:

* `ours`: as `albert-tf export` writes it (`serving.modules.write_signatures`: each
  signature traced once; the text graphs traced without AutoGraph, `graph_function`);
* `inline`: the same writer, the tokenizer's ops traced into every text signature (before
  `AlbertPreprocessor.tokenize` became one graph function the signatures call);
* `library`: the same writer, the ragged rows cut, masked and packed by TensorFlow's and
  tensorflow-text's own ops (`value_rowids`, `tf.ragged.boolean_mask`, `combine_segments`,
  `pad_model_inputs`: before `tokenizer/ragged_rows.py` wrote them in a few core ops each);
* `autograph`: the same writer, the text graphs traced with AutoGraph (`tf.function`);
* `archive`: Keras' `ExportArchive` writing the same signatures, traced without AutoGraph;
* `archive+autograph`: Keras' `ExportArchive` and AutoGraph, the peer (how Keras users
  export, and how this package wrote SavedModels before).

Each (checkpoint, way) runs in a fresh process (tracing caches live in a process), in
turn per repeat; the figure is the export call alone (the checkpoint opened, the
signatures traced and written, the warmup records), the median over repeats, and the
saved_model.pb size (a graph saved twice shows there). The CPU flags and the load
average before and after are printed: take figures on a quiet machine.

    python benchmarks/bench_export.py
    python benchmarks/bench_export.py --repeats 1 --checkpoints seq_single/hf qa/hf
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_serving import cpu_flags  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TASKS = os.path.join(ROOT, "tests", "fixtures", "tasks")
CHECKPOINTS = {  # name: extra export arguments
    "seq_single/hf": [], "token/hf": [], "qa/hf": [], "squad_v2_beam/tf1": [], "mlm/hf": [],
    "choice/tf1": ["--task", "multiple_choice", "--spm-model",
                   os.path.join(TASKS, "choice", "hf", "spiece.model")],
}
WAYS = ("ours", "inline", "library", "autograph", "archive", "archive+autograph")

# One export in a fresh process; the way decides what is patched before serving is imported.
_CHILD = r"""
import json, sys, time
way, checkpoint, output, extra = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
import tensorflow as tf
from albert_tf.tokenizer import traced
if "autograph" in way:
    traced.graph_function = tf.function  # AutoGraph on (the default)
if way == "inline":
    from albert_tf.tokenizer.preprocessor import AlbertPreprocessor

    def tokenize(self, texts):
        self._vocabulary()
        return self._tokenize(texts)

    AlbertPreprocessor.tokenize = tokenize
from albert_tf.serving import export, modules
if way == "library":
    import tensorflow_text as tf_text
    from albert_tf.tokenizer import ragged_rows

    def keep_where(ids, keep):
        return tf.ragged.boolean_mask(ids, ids.with_values(keep))

    def keep_first(ids, counts):
        rows = ids.value_rowids()
        position = tf.range(tf.size(ids.values, out_type=rows.dtype)) - tf.gather(
            ids.row_starts(), rows)
        keep = position < tf.gather(tf.cast(counts, rows.dtype), rows)
        return tf.RaggedTensor.from_value_rowids(tf.boolean_mask(ids.values, keep),
                                                 tf.boolean_mask(rows, keep), nrows=ids.nrows())

    def pack_rows(segments, seq_length, cls_id, sep_id, pad_id):
        word_ids, type_ids = tf_text.combine_segments(segments, start_of_sequence_id=cls_id,
                                                      end_of_segment_id=sep_id)
        word_ids, mask = tf_text.pad_model_inputs(word_ids, seq_length, pad_value=pad_id)
        type_ids, _ = tf_text.pad_model_inputs(type_ids, seq_length, pad_value=0)
        return tuple(tf.cast(v, tf.int32) for v in (word_ids, mask, type_ids))

    library = {"row_ids": lambda ids: ids.value_rowids(), "keep_where": keep_where,
               "keep_first": keep_first, "pack_rows": pack_rows}
    ours = {name: getattr(ragged_rows, name) for name in library}
    for module in [m for name, m in sys.modules.items() if name.startswith("albert_tf")]:
        for name, function in library.items():
            if getattr(module, name, None) is ours[name]:
                setattr(module, name, function)
if way.startswith("archive"):
    import keras

    def write_signatures(functions, directory, resources_of=None):
        archive = keras.export.ExportArchive()
        for name, function in functions.items():
            function.get_concrete_function()
            archive.add_endpoint(name, function)
        if resources_of is not None:
            archive.track(resources_of)
        archive.write_out(directory, verbose=False)

    modules.write_signatures = write_signatures
started = time.perf_counter()
assert export.main(["--checkpoint", checkpoint, "--output", output, *extra]) == 0
print("SECONDS", time.perf_counter() - started)
"""


def _one(way: str, checkpoint: str, folder: str) -> tuple[float, int]:
    output = os.path.join(folder, way.replace("+", "_"), checkpoint.replace("/", "_"))
    extra = CHECKPOINTS[checkpoint]
    result = subprocess.run(
        [sys.executable, "-c", _CHILD, way, os.path.join(TASKS, checkpoint), output,
         json.dumps(extra)], capture_output=True, text=True, cwd=ROOT)
    if result.returncode != 0:
        raise SystemExit(f"{way} {checkpoint} failed:\n{result.stderr[-3000:]}")
    seconds = float(next(line.split()[1] for line in result.stdout.splitlines()
                         if line.startswith("SECONDS")))
    size = os.path.getsize(os.path.join(output, "1", "saved_model.pb"))
    return seconds, size


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--checkpoints", nargs="+", default=list(CHECKPOINTS),
                        choices=list(CHECKPOINTS))
    parser.add_argument("--ways", nargs="+", default=list(WAYS), choices=WAYS)
    args = parser.parse_args(argv)
    print(f"CPU flags: {cpu_flags()}; load average before: {os.getloadavg()[0]:.2f}")
    seconds = {(c, w): [] for c in args.checkpoints for w in args.ways}
    sizes = {}
    with tempfile.TemporaryDirectory() as folder:
        for repeat in range(args.repeats):
            for checkpoint in args.checkpoints:
                ways = args.ways if repeat % 2 == 0 else args.ways[::-1]
                for way in ways:
                    started = time.perf_counter()
                    took, size = _one(way, checkpoint, os.path.join(folder, str(repeat)))
                    seconds[checkpoint, way].append(took)
                    sizes[checkpoint, way] = size
                    print(f"  {checkpoint:18} {way:18} export {took:6.2f} s "
                          f"(process {time.perf_counter() - started:5.1f} s)", flush=True)
    print(f"\nload average after: {os.getloadavg()[0]:.2f}")
    peer = args.ways[-1]
    header = "".join(f"{w:>20}" for w in args.ways)
    print(f"\nexport seconds (median of {args.repeats}); saved_model.pb MB\n{'':18}{header}"
          f"{'peer / ours':>14}")
    totals = {w: 0.0 for w in args.ways}
    for checkpoint in args.checkpoints:
        cells = ""
        for way in args.ways:
            median = statistics.median(seconds[checkpoint, way])
            totals[way] += median
            cells += f"{median:9.2f} s {sizes[checkpoint, way] / 1e6:5.2f} MB"
        ratio = (statistics.median(seconds[checkpoint, peer])
                 / statistics.median(seconds[checkpoint, args.ways[0]]))
        print(f"{checkpoint:18}{cells}{ratio:13.2f}x")
    print(f"{'total':18}" + "".join(f"{totals[w]:9.2f} s {'':8}" for w in args.ways)
          + f"{totals[peer] / totals[args.ways[0]]:13.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
