"""Pretraining-data throughput: instances written per core, examples delivered by tf.data,
and what an albert-base train step consumes, so that the pipeline is seen not to be the bottleneck.

    python benchmarks/bench_data.py              # full run (~5 min on 2 idle cores)
    python benchmarks/bench_data.py --quick      # fewer documents and steps
    python benchmarks/bench_data.py --json out.json

Figures (all on the embedded corpus, with a vocabulary trained on it):
  * create-data in one process (the rate per core): instances/s and tokens/s at seq 128
    and 512 (dupe_factor 4; the rate per instance does not depend on it);
  * create-data on all cores over the whole corpus, worker start-up (TensorFlow import)
    included;
  * pretraining_dataset: examples/s at seq 128, batch 8, static and dynamic masking;
  * AlbertPretrainer(albert-base) train steps at seq 128, batch 8 (LAMB, compiled as
    `model.fit` compiles it), in examples/s and tokens/s.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

REFERENCE_TRAIN = 4.4  # sequences/s of an albert-base train step at seq 128, batch 8 (issue figure)


def make_vocab(work: str) -> str:
    from albert_tf.training.data.corpus import write_corpus_file
    from albert_tf.training.data.embedded import embedded_documents
    from albert_tf.training.data.vocab import train_vocab

    write_corpus_file(os.path.join(work, "corpus.txt"), embedded_documents())
    model, _ = train_vocab([os.path.join(work, "corpus.txt")], os.path.join(work, "spm"), 4000)
    return model


def bench_generation(work: str, spm_model: str, seq: int, documents: int, processes: int) -> dict:
    from albert_tf.training.data import corpus, create_data, pairs

    options = pairs.GenerationOptions(max_seq_length=seq, dupe_factor=4)
    corpus_all = corpus.open_corpus(os.path.join(work, "corpus.txt"))
    documents = min(documents, corpus_all.total)
    subset = corpus.Corpus(f"first {documents}", lambda report: (
        d for _, d in zip(range(documents), corpus_all.read(report))), documents, [documents])
    out = tempfile.mkdtemp(dir=work)
    start = time.perf_counter()
    summary = create_data.create_pretraining_data(
        subset, out, spm_model, options, documents_per_shard=max(1, documents // 8), processes=processes)
    wall = time.perf_counter() - start
    return {"seq": seq, "processes": processes, "documents": summary["documents"],
            "instances": summary["instances"], "wall_s": round(wall, 2),
            "instances_per_s": round(summary["instances"] / wall, 1),
            "tokens_per_s": round(summary["tokens"] / wall), "output": out}


def bench_pipeline(pattern: str, spm_model: str, seq: int, batch: int, steps: int, dynamic: bool) -> dict:
    from albert_tf.tokenizer.spm import AlbertTokenizer
    from albert_tf.training.pretrain.dynamic_masking import DynamicMasking
    from albert_tf.training.pretrain.pipeline import pretraining_dataset

    masking = DynamicMasking.from_tokenizer(AlbertTokenizer(spm_model)) if dynamic else None
    iterator = iter(pretraining_dataset(pattern, batch, seq, 20, dynamic_masking=masking, seed=0))
    for _ in range(10):
        next(iterator)
    start = time.perf_counter()
    for _ in range(steps):
        next(iterator)
    wall = time.perf_counter() - start
    return {"seq": seq, "batch": batch, "dynamic_masking": dynamic,
            "examples_per_s": round(steps * batch / wall, 1)}


def bench_train_step(pattern: str, seq: int, batch: int, steps: int) -> dict:
    from albert_tf import AlbertConfig, AlbertPretrainer
    from albert_tf.training.pretrain.pipeline import pretraining_dataset
    from albert_tf.training.runtime.optimization import create_optimizer

    model = AlbertPretrainer(AlbertConfig.from_size("albert-base"))
    model.compile(optimizer=create_optimizer("lamb", 1e-4))
    batches = list(pretraining_dataset(pattern, batch, seq, 20, seed=0).take(steps + 2))
    for x, y in batches[:2]:  # tracing and compilation
        model.train_on_batch(x, y)
    start = time.perf_counter()
    for x, y in batches[2:]:
        model.train_on_batch(x, y)
    wall = time.perf_counter() - start
    return {"seq": seq, "batch": batch, "steps": steps, "examples_per_s": round(steps * batch / wall, 2),
            "tokens_per_s": round(steps * batch * seq / wall)}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer documents and steps")
    parser.add_argument("--no-train-step", action="store_true", help="skip the albert-base train step")
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args(argv)
    documents, steps = (60, 100) if args.quick else (240, 400)
    work = tempfile.mkdtemp(prefix="bench_data_")
    spm_model = make_vocab(work)
    cores = os.cpu_count() or 1
    bench_generation(work, spm_model, 128, 2, 1)  # warm-up: imports and first-call costs
    gen = [bench_generation(work, spm_model, seq, documents, 1) for seq in (128, 512)]
    if not args.quick:
        gen.append(bench_generation(work, spm_model, 512, 10**6, cores))
    pattern = os.path.join(gen[0]["output"], "pretrain-*.tfrecord")
    pipe = [bench_pipeline(pattern, spm_model, 128, 8, steps, dynamic) for dynamic in (False, True)]
    train = None if args.no_train_step else bench_train_step(pattern, 128, 8, 3 if args.quick else 8)
    consumed = train["examples_per_s"] if train else REFERENCE_TRAIN
    print(f"create-data (dupe_factor 4, embedded corpus; {cores} cores)")
    for g in gen:
        print(f"  seq {g['seq']:>3}  processes {g['processes']}  documents {g['documents']:>3}: "
              f"{g['instances_per_s']:>7.1f} instances/s ({g['instances_per_s'] / g['processes']:.1f} per "
              f"process), {g['tokens_per_s']} tokens/s, {g['instances']} instances in {g['wall_s']} s"
              + (" (incl. worker start-up)" if g["processes"] > 1 else ""))
    print("pretraining_dataset (seq 128, batch 8)")
    for p in pipe:
        print(f"  {'dynamic' if p['dynamic_masking'] else 'static '} masking: {p['examples_per_s']:>8.1f} "
              f"examples/s = {p['examples_per_s'] / consumed:.0f}x the train step")
    source = "measured" if train else "issue reference figure"
    print(f"albert-base train step (seq 128, batch 8, {source}): {consumed} examples/s"
          + (f", {train['tokens_per_s']} tokens/s" if train else ""))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"generation": gen, "pipeline": pipe, "train_step": train,
                       "train_examples_per_s": consumed}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
