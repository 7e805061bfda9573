"""On-device export: size, latency and int8 accuracy of .tflite files against the SavedModel.

One albert-base-shape classifier (random weights, vocab_size 30,000 as released, the
2-class head drawn wide so that probabilities differ between texts; texts tokenized by a
5,000-piece vocabulary trained from the embedded corpus) is written as the default
SavedModel export and as float32, float16 and int8 (dynamic range) .tflite files through
`write_litert` (each passes the parity gate first), and, when onnxruntime, torch and
transformers are installed (`pip install -e .[bench]`), as the peer: the same weights
written as a Hugging Face directory (`convert --to hf`) and exported to ONNX, run by ONNX
Runtime's CPU provider from Hugging Face's tokenizer (`serving_peers`). Sizes on disk;
then, for 1 and 2 threads, each in a fresh process, batch-1 latency from raw text (a
12-word text and a ~128-piece text that both tokenizers split alike), the stacks taking
turns call by call (p50 and p99 over --requests calls), or with --alone each stack in a
process of its own, as a server runs it (runtimes sharing a process share the cores with
each other's idle threads). Then a small classifier is fine-tuned (bench_serving's length-tercile
task, E64 H128 L4) and exported float32 / float16 / int8: dev accuracy of each and
top-1 agreement and max |Δ probability| against float32.

    python benchmarks/bench_litert.py                 # albert-base shape
    python benchmarks/bench_litert.py --alone         # each stack in its own process
    python benchmarks/bench_litert.py --model tiny    # a smoke run

ONNX Runtime at batch 32 and PyTorch are in bench_serving.py.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # the peers' idle threads do not spin
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_serving import (  # noqa: E402
    TWELVE_WORDS,
    cpu_flags,
    finetuned_classifier,
    long_text,
    sentences,
    spm_model,
    widen_head,
)

QUANTIZE = ("none", "float16", "int8")
ONNX = "onnxruntime"
LABELS = ["short", "mid", "long"]


def directory_size(path: str) -> int:
    return sum(os.path.getsize(os.path.join(root, name))
               for root, _, names in os.walk(path) for name in names)


def write_all(model, spm_path: str, seq_length: int, folder: str) -> dict[str, str]:
    """{"savedmodel" | quantize: path}: the default SavedModel export and the .tflite files."""
    from albert_tf.checkpoint import task_record_of
    from albert_tf.serving import export
    from albert_tf.serving.litert.convert import write_litert
    from albert_tf.tokenizer import AlbertPreprocessor

    preprocessor = AlbertPreprocessor(spm_path, seq_length)
    paths = {"savedmodel": os.path.join(folder, "saved")}
    export.save_module(export.build_module(model, preprocessor), paths["savedmodel"], "bench")
    for quantize in QUANTIZE:
        paths[quantize] = os.path.join(folder, f"model_{quantize}.tflite")
        start = time.perf_counter()
        report = write_litert(model, preprocessor.tokenizer, task_record_of(model),
                              paths[quantize], "classification", seq_length, quantize)
        print(f"  {quantize}: written and checked in {time.perf_counter() - start:.0f}s; "
              f"parity gate: {report.summary()}", flush=True)
    return paths


def onnx_peer(model, spm_path: str, seq_length: int, folder: str) -> dict[str, str]:
    """{"hf": the weights as a Hugging Face directory, ONNX: them exported to ONNX}."""
    import shutil

    import onnxruntime  # noqa: F401  (ImportError: the peer is left out)
    import serving_peers

    from albert_tf import save_checkpoint
    from albert_tf.checkpoint.convert import convert

    # The model keeps the released 30,000-row table that the smaller vocabulary indexes
    # into: saved without it, the vocabulary joins the Hugging Face directory afterwards.
    checkpoint = os.path.join(folder, "checkpoint")
    save_checkpoint(model, checkpoint, seq_length=seq_length)
    hf_dir = convert(checkpoint, os.path.join(folder, "hf"), to="hf")
    shutil.copyfile(spm_path, os.path.join(hf_dir, "spiece.model"))
    return {"hf": hf_dir, ONNX: serving_peers.export_onnx(hf_dir, os.path.join(folder,
                                                                                "albert.onnx"))}


def time_child(args) -> int:
    """Runs in a fresh process: batch-1 latency of the stacks in its paths, --threads threads."""
    import numpy as np
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    tf.config.threading.set_inter_op_parallelism_threads(args.threads)
    from albert_tf.serving.litert import runtime

    paths = json.loads(args.time_child)
    texts = json.loads(os.environ["BENCH_LITERT_TEXTS"])
    stacks = {}
    if "savedmodel" in paths:
        saved = tf.saved_model.load(paths["savedmodel"]).signatures["serving_default"]
        stacks["savedmodel"] = lambda t: saved(text=tf.constant([t]))["probabilities"].numpy()
    for quantize in (q for q in QUANTIZE if q in paths):
        runner = runtime.open_interpreter(paths[quantize], args.threads).get_signature_runner(
            "serving_default")
        stacks[quantize] = (lambda r: lambda t: r(text=runtime.strings([t]))["probabilities"])(
            runner)
    if ONNX in paths:
        import serving_peers

        onnx = serving_peers.onnx_session_stack(paths["hf"], paths[ONNX], args.seq_length,
                                                threads=args.threads)
        stacks[ONNX] = lambda t: onnx([t])
    figures = {}
    for case, text in texts.items():
        for fn in stacks.values():  # warm-up
            fn(text), fn(text)
        if ONNX in stacks and "savedmodel" in stacks:  # the same weights and ids: the same
            # probabilities
            figures[f"{case}|{ONNX} max |dp|"] = float(np.abs(
                np.asarray(stacks[ONNX](text)) - stacks["savedmodel"](text)).max())
        times = {name: [] for name in stacks}
        for _ in range(args.requests):
            for name, fn in stacks.items():
                start = time.perf_counter()
                fn(text)
                times[name].append(time.perf_counter() - start)
        for name, values in times.items():
            figures[f"{case}|{name}"] = [float(np.percentile(values, 50) * 1e3),
                                         float(np.percentile(values, 99) * 1e3)]
    print("FIGURES " + json.dumps(figures))
    return 0


def latency(paths: dict, texts: dict, threads: int, requests: int, seq_length: int) -> dict:
    env = {**os.environ, "BENCH_LITERT_TEXTS": json.dumps(texts)}
    result = subprocess.run([sys.executable, __file__, "--time-child", json.dumps(paths),
                             "--threads", str(threads), "--requests", str(requests),
                             "--seq-length", str(seq_length)],
                            capture_output=True, text=True, env=env, timeout=3600)
    line = [s for s in result.stdout.splitlines() if s.startswith("FIGURES ")]
    if result.returncode or not line:
        raise RuntimeError(result.stderr[-3000:])
    return json.loads(line[0][len("FIGURES "):])


def accuracy(spm_path: str, folder: str, steps: int, count: int) -> None:
    import numpy as np

    from albert_tf import save_checkpoint
    from albert_tf.serving import export
    from albert_tf.serving.litert import runtime

    texts = sentences(count)
    small, dev, keras_accuracy = finetuned_classifier(spm_path, texts, steps)
    words = np.array([len(t.split()) for t in texts])  # the task's labels, as it made them
    labels = np.searchsorted(np.percentile(words, [33.3, 66.7]), words, side="right")[:len(dev)]
    checkpoint = os.path.join(folder, "finetuned")
    save_checkpoint(small, checkpoint, spm_model=spm_path, label_names=LABELS, seq_length=64)
    probabilities, sizes = {}, {}
    for quantize in QUANTIZE:
        path = os.path.join(folder, f"finetuned_{quantize}.tflite")
        export.export(checkpoint, path, format="litert", quantize=quantize)
        sizes[quantize] = os.path.getsize(path)
        runner = runtime.open_interpreter(path).get_signature_runner("serving_default")
        probabilities[quantize] = np.concatenate([runner(text=runtime.strings(dev[i:i + 64]))[
            "probabilities"] for i in range(0, len(dev), 64)])
    print(f"\nfine-tuned classifier (E64 H128 L4, 3 classes: length tercile; Keras dev accuracy "
          f"{keras_accuracy:.1%}), {len(dev)} dev sentences:")
    print("| file | size MB | dev accuracy | top-1 agreement with float32 | max |Δp| |")
    print("|---|---:|---:|---:|---:|")
    reference = probabilities["none"]
    for quantize, p in probabilities.items():
        print(f"| {quantize} | {sizes[quantize] / 1e6:.2f} | "
              f"{(p.argmax(-1) == labels).mean():.1%} | "
              f"{(p.argmax(-1) == reference.argmax(-1)).mean():.2%} | "
              f"{np.abs(p - reference).max():.4f} |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", choices=("base", "tiny"), default="base")
    parser.add_argument("--seq-length", type=int, default=128)
    parser.add_argument("--requests", type=int, default=30, help="timed calls per figure")
    parser.add_argument("--spm-model", help="SentencePiece model (default: train one)")
    parser.add_argument("--finetune-steps", type=int, default=300)
    parser.add_argument("--finetune-texts", type=int, default=3000)
    parser.add_argument("--skip-accuracy", action="store_true")
    parser.add_argument("--alone", action="store_true",
                        help="each stack timed in a process of its own (a server's case) "
                             "instead of the stacks taking turns in one")
    parser.add_argument("--time-child", help=argparse.SUPPRESS)
    parser.add_argument("--threads", type=int, default=1, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.time_child:
        return time_child(args)

    import tensorflow as tf

    from albert_tf import AlbertConfig, AlbertSequenceClassifier
    from albert_tf.tokenizer.spm import AlbertTokenizer

    with tempfile.TemporaryDirectory() as folder:
        spm_path = spm_model(args.spm_model, folder)
        tokenizer = AlbertTokenizer(spm_path)
        if args.model == "base":
            config = AlbertConfig.from_size("albert-base")
        else:
            config = AlbertConfig(vocab_size=tokenizer.vocab_size, embedding_size=32,
                                  hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                  intermediate_size=128)
        model = AlbertSequenceClassifier(config, 2)
        widen_head(model)
        print(f"cpu flags: {cpu_flags()}; {os.cpu_count()} cpus; tf {tf.__version__}; load "
              f"{os.getloadavg()[0]:.2f}; model={args.model} (random weights, vocab_size "
              f"{config.vocab_size}), export seq_length {args.seq_length}", flush=True)
        paths = write_all(model, spm_path, args.seq_length, folder)
        pool = sentences(400)
        try:
            import serving_peers

            paths.update(onnx_peer(model, spm_path, args.seq_length, folder))
            pool = [t for t, same in zip(pool, serving_peers.same_tokens(
                paths["hf"], tokenizer, pool, args.seq_length)) if same]
        except ImportError as e:
            print(f"ONNX Runtime peer left out: {e} (pip install -e .[bench])")
        sizes = {name: (directory_size(p) if os.path.isdir(p) else os.path.getsize(p))
                 for name, p in paths.items()}
        texts = {"12 words": TWELVE_WORDS,
                 "~128 pieces": long_text(tokenizer, pool, args.seq_length - 2)}
        figures = {}
        for threads in (1, 2):
            if args.alone:  # one process per stack
                figures[threads] = {}
                for name in (n for n in paths if n != "hf"):
                    alone = {name: paths[name], **({"hf": paths["hf"]} if name == ONNX else {})}
                    figures[threads].update(latency(alone, texts, threads, args.requests,
                                                    args.seq_length))
                continue
            figures[threads] = latency(paths, texts, threads, args.requests, args.seq_length)
            for case in texts:
                if f"{case}|{ONNX} max |dp|" in figures[threads]:
                    print(f"{threads} thread(s), {case}: ONNX Runtime vs SavedModel max |dp| "
                          f"{figures[threads].pop(f'{case}|{ONNX} max |dp|'):.1e}")
        print(f"load after timing {os.getloadavg()[0]:.2f}")
        print("\n| file | size MB | x float32 | threads | 12 words p50 / p99 ms | "
              "~128 pieces p50 / p99 ms |")
        print("|---|---:|---:|---:|---:|---:|")
        for name in (n for n in paths if n != "hf"):
            for threads in (1, 2):
                cells = [f"{figures[threads][f'{case}|{name}'][0]:.1f} / "
                         f"{figures[threads][f'{case}|{name}'][1]:.1f}" for case in texts]
                label = {"savedmodel": "SavedModel", ONNX: "ONNX Runtime float32 (.onnx)",
                         "none": ".tflite float32"}.get(name, f".tflite {name}")
                print(f"| {label} | {sizes[name] / 1e6:.1f} | {sizes[name] / sizes['none']:.2f} "
                      f"| {threads} | {cells[0]} | {cells[1]} |")
        for threads in (1, 2):
            p50 = {key: value[0] for key, value in figures[threads].items()}
            ratios = "; ".join(case + ": " + ", ".join(
                f"{name} {p50[f'{case}|savedmodel'] / p50[f'{case}|{name}']:.2f}x"
                for name in QUANTIZE) for case in texts)
            print(f"speed against the SavedModel, {threads} thread(s), p50: {ratios}")
            if ONNX in paths:
                ratios = "; ".join(case + ": " + ", ".join(
                    f"{name} {p50[f'{case}|{ONNX}'] / p50[f'{case}|{name}']:.2f}x"
                    for name in ("savedmodel",) + QUANTIZE) for case in texts)
                print(f"speed against ONNX Runtime, {threads} thread(s), p50: {ratios}")
        if not args.skip_accuracy:
            accuracy(spm_path, folder, args.finetune_steps, args.finetune_texts)
    return 0


if __name__ == "__main__":
    sys.exit(main())
