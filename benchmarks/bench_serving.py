"""Serving speed: the exported SavedModel against the stacks users would run instead.

Default: the peers. One albert-base-shape classifier (random weights, its 2-class head
drawn wide enough that the probabilities differ between texts) is saved as an albert-tf
checkpoint, exported with `albert-tf export`'s defaults and reloaded with
tf.saved_model.load, and written as a Hugging Face directory (`convert --to hf`) from which
transformers (PyTorch eager) and ONNX Runtime (that module exported to ONNX) serve it with
transformers' tokenizer: raw text in, probabilities out, in one process. The three must
agree to 1e-4 on every text before anything is timed. Calls are interleaved (A, B, C,
B, C, A, ..., the order rotating): batch 1 with a 12-word text and a ~128-piece text (p50,
p99), once call by call (each call after the other stacks' calls, their weights in the
caches) and once in blocks of --block calls per stack (back to back, as a server answers
one request after another), and batch 32 with documentation sentences (texts/s). Then the
SavedModel's time is split: the `token_ids` signature on the same texts tokenized in Python (the encoder and read-out)
vs the text signature (plus tokenization and packing in the graph).

    pip install torch==2.13.0 && pip install -e .[bench]   # a CPU torch first
    python benchmarks/bench_serving.py                     # albert-base, seq 128
    python benchmarks/bench_serving.py --model demo        # the demo's model shape
    python benchmarks/bench_serving.py --eager             # SavedModel vs eager Keras
    python benchmarks/bench_serving.py --precision         # bfloat16 vs float32 exports
    python benchmarks/bench_serving.py --profile           # where the time goes, by kernel

`--eager` exports an AlbertSequenceClassifier twice, with dynamic padding (the default)
and padded to a fixed --seq-length, and times the text signature against the eager Keras
model fed by the Python `AlbertTokenizer`, and one 12-word text through both exports.

`--precision` exports the albert-base-shape classifier (random weights) with
`--precision float32` and `bfloat16`, padded to a fixed --seq-length (128 is the
target shape), and times both side by side (calls alternate A, B, A, B): texts/s at
batch 32 and p50 latency at batch 1. Agreement is measured on a classifier that
was actually fine-tuned (random weights give near-uniform probabilities that say
nothing): a small ALBERT fine-tuned for --finetune-steps on a 3-class task from the
embedded corpus (the sentence's length tercile in words), exported both ways through
`albert_tf.serving.export.export`; top-1 agreement and max |Δ probability| on its
held-out dev sentences.

Texts are sentences of the embedded corpus; the vocabulary is trained from it
(`train_vocab`, 5000 pieces unless --spm-model is given: the vocabulary's size changes
one gather, not the speed). Latency percentiles are over --requests timed calls.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

TWELVE_WORDS = "The quick brown fox jumps over the lazy dog near the river bank."


def sentences(count: int) -> list[str]:
    from albert_tf.training.data.embedded import embedded_documents

    out = [s for doc in embedded_documents(max_documents=200) for s in doc if len(s) > 20]
    return (out * (count // max(len(out), 1) + 1))[:count]


def spm_model(path: str | None, folder: str) -> str:
    if path:
        return path
    from albert_tf.training.data.corpus import write_corpus_file
    from albert_tf.training.data.embedded import embedded_documents
    from albert_tf.training.data.vocab import train_vocab

    corpus = os.path.join(folder, "corpus.txt")
    write_corpus_file(corpus, iter(embedded_documents()))
    return train_vocab([corpus], os.path.join(folder, "spm"), 5000)[0]


def build(name: str, vocab_size: int, seq_length: int | None = None):
    """An AlbertSequenceClassifier (2 classes, random weights): albert-base's shape, the
    demo's model (`demo`, positions = `seq_length`) or a tiny one for smoke runs."""
    from albert_tf import AlbertConfig, AlbertSequenceClassifier

    if name == "base":
        config = AlbertConfig.from_size("albert-base").replace(vocab_size=vocab_size)
    elif name == "demo":
        from albert_tf.training.experiments.demo.run import DEMO_MODEL

        config = AlbertConfig(vocab_size=vocab_size, **{
            **DEMO_MODEL, "max_position_embeddings": seq_length or DEMO_MODEL[
                "max_position_embeddings"]})
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

    from albert_tf.serving.signatures.base import PAD_MULTIPLE

    def run(texts):  # padded as the graph pads: to the longest row, rounded up
        rows = [tokenizer.encode_pair(t, None, seq_length) for t in texts]
        longest = max(sum(r["input_mask"]) for r in rows)
        length = min(seq_length, -(-longest // PAD_MULTIPLE) * PAD_MULTIPLE)
        features = {k: np.array([r[k][:length] for r in rows], np.int32) for k in rows[0]}
        return model(features, training=False).numpy()  # logits [B,C]
    return run


def max_difference(served, eager, texts) -> dict[str, float]:
    """Largest |Δ| between each export's probabilities and the eager model's."""
    import numpy as np
    import tensorflow as tf

    want = tf.nn.softmax(eager(texts)).numpy()
    return {name: float(np.abs(fn(text=tf.constant(texts))["probabilities"].numpy() - want).max())
            for name, fn in served.items()}


def cpu_flags() -> str:
    from albert_tf.training.runtime.distribute import cpu_bf16_features

    return " ".join(sorted(cpu_bf16_features())) or "no avx512 / amx flags"


def export_both(model, spm_path: str, seq_length: int, folder: str) -> dict:
    """{"float32" | "bfloat16": serving_default} of `model` exported at a fixed seq_length."""
    import tensorflow as tf

    from albert_tf.serving import export
    from albert_tf.tokenizer import AlbertPreprocessor

    served = {}
    for dtype in ("float32", "bfloat16"):
        path = os.path.join(folder, f"speed_{dtype}")
        module = export.build_module(export.served_model(model, dtype),
                                     AlbertPreprocessor(spm_path, seq_length), pad_multiple=None)
        export.save_module(module, path, dtype)
        served[dtype] = tf.saved_model.load(path).signatures["serving_default"]
    return served


def alternating(fns: dict, batches: list, warmup: int = 1) -> dict[str, list[float]]:
    """Seconds per call of each function, calls alternating between them batch by batch."""
    import tensorflow as tf

    for fn in fns.values():
        for batch in batches[:warmup]:
            fn(text=tf.constant(batch))
    times = {name: [] for name in fns}
    for batch in batches:
        for name, fn in fns.items():
            start = time.perf_counter()
            fn(text=tf.constant(batch))
            times[name].append(time.perf_counter() - start)
    return times


def finetuned_classifier(spm_path: str, texts: list[str], steps: int, seq_length: int = 64):
    """A small ALBERT fine-tuned on the length tercile (in words) of `texts`; (model, dev)."""
    import keras
    import numpy as np

    from albert_tf import AlbertConfig, AlbertSequenceClassifier
    from albert_tf.tokenizer.spm import AlbertTokenizer

    tokenizer = AlbertTokenizer(spm_path)
    words = np.array([len(t.split()) for t in texts])
    cuts = np.percentile(words, [33.3, 66.7])
    labels = np.searchsorted(cuts, words, side="right").astype("int32")
    rows = [tokenizer.encode_pair(t, None, seq_length) for t in texts]
    x = {k: np.array([r[k] for r in rows], np.int32) for k in rows[0]}
    dev = len(texts) // 5  # the first fifth is held out
    keras.utils.set_random_seed(0)
    config = AlbertConfig(vocab_size=tokenizer.vocab_size, embedding_size=64, hidden_size=128,
                          num_hidden_layers=4, num_attention_heads=4, intermediate_size=512,
                          max_position_embeddings=seq_length)
    model = AlbertSequenceClassifier(config, 3)
    model.compile(optimizer=keras.optimizers.Adam(3e-4),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    train = {k: v[dev:] for k, v in x.items()}
    model.fit(train, labels[dev:], batch_size=32, verbose=0,
              epochs=max(1, steps * 32 // len(labels[dev:])))
    logits = model.predict({k: v[:dev] for k, v in x.items()}, verbose=0)
    accuracy = float((logits.argmax(-1) == labels[:dev]).mean())
    return model, texts[:dev], accuracy


def precision_main(args) -> None:
    import numpy as np
    import tensorflow as tf

    from albert_tf import save_checkpoint
    from albert_tf.serving import export

    with tempfile.TemporaryDirectory() as folder:
        spm_path = spm_model(args.spm_model, folder)
        from albert_tf.tokenizer.spm import AlbertTokenizer

        model = build(args.model, AlbertTokenizer(spm_path).vocab_size)
        served = export_both(model, spm_path, args.seq_length, folder)
        text = sentences(32 * (args.requests + 3))
        print(f"cpu flags: {cpu_flags()}; {os.cpu_count()} cpus; tf {tf.__version__}; "
              f"model={args.model} (random weights), every request padded to {args.seq_length}")
        print("| export | batch | texts/s | p50 ms | p99 ms |\n|---|---|---|---|---|")
        p50 = {}
        for batch in (32, 1):
            batches = [text[i * batch:(i + 1) * batch] for i in range(args.requests)]
            times = alternating(served, batches)
            for dtype, t in times.items():
                p50[dtype, batch] = float(np.percentile(t, 50))
                print(f"| {dtype} | {batch} | {batch * len(t) / sum(t):.1f} | "
                      f"{p50[dtype, batch] * 1e3:.1f} | {np.percentile(t, 99) * 1e3:.1f} |")
        print(f"bfloat16 / float32 export: batch 32 throughput "
              f"{p50['float32', 32] / p50['bfloat16', 32]:.2f}x (from p50), batch 1 p50 latency "
              f"{p50['float32', 1] / p50['bfloat16', 1]:.2f}x better")
        texts = sentences(args.finetune_texts)
        small, dev, accuracy = finetuned_classifier(spm_path, texts, args.finetune_steps)
        checkpoint = os.path.join(folder, "finetuned")
        save_checkpoint(small, checkpoint, spm_model=spm_path, label_names=["short", "mid", "long"],
                        seq_length=64)
        probs = {}
        for dtype in ("float32", "bfloat16"):
            path = export.export(checkpoint, os.path.join(folder, f"ft_{dtype}"), precision=dtype)
            fn = tf.saved_model.load(path).signatures["serving_default"]
            probs[dtype] = np.concatenate([fn(text=tf.constant(dev[i:i + 64]))["probabilities"]
                                           .numpy() for i in range(0, len(dev), 64)])
        agree = float((probs["bfloat16"].argmax(-1) == probs["float32"].argmax(-1)).mean())
        diff = float(np.abs(probs["bfloat16"] - probs["float32"]).max())
        print(f"fine-tuned classifier (E64 H128 L4, length-tercile task, dev accuracy "
              f"{accuracy:.1%} in fp32, {len(dev)} dev sentences): bf16 vs fp32 export top-1 "
              f"agreement {agree:.2%}, max |Δ probability| {diff:.4f}")


# ------------------------------------------------------------------ the peers
def widen_head(model, scale: float = 30.0) -> None:
    """Scales the random classifier kernel so the probabilities differ from text to text
    (at the initializer's 0.02 they are all ~0.5, and agreement would say little)."""
    kernel = next(w for w in model.weights if "classifier" in w.path and "kernel" in w.path)
    kernel.assign(kernel.numpy() * scale)


def long_text(tokenizer, texts: list[str], pieces: int = 126) -> str:
    """`texts` joined until the text is `pieces` SentencePiece pieces."""
    words = " ".join(texts).split()
    low, high = 1, len(words)
    while low < high:  # the most words that still fit
        mid = (low + high + 1) // 2
        if len(tokenizer.tokenize(" ".join(words[:mid]))) <= pieces:
            low = mid
        else:
            high = mid - 1
    return " ".join(words[:low])


def interleaved(stacks: dict, batches: list, warmup: int = 3,
                block: int = 1) -> dict[str, list[float]]:
    """Seconds per call of every stack, the stacks taking turns.

    `block` 1: on each batch in turn, so every call follows the other stacks' calls (their
    weights in the caches: a process serving several models). `block` N: N calls each in
    turn (a server answering one request after another). The order of the stacks rotates
    from round to round, so none always follows the same one.
    """
    for batch in batches[:warmup]:
        for fn in stacks.values():
            fn(batch)
    times = {name: [] for name in stacks}
    order = list(stacks)
    for start in range(0, len(batches), block):
        for name in order:
            for batch in batches[start:start + block]:
                began = time.perf_counter()
                stacks[name](batch)
                times[name].append(time.perf_counter() - began)
        order = order[1:] + order[:1]
    return times


def agreement(stacks: dict, cases: dict[str, list[str]]) -> dict[tuple[str, str], float]:
    """{(stack, case): the largest |Δ probability| against the first stack}."""
    import numpy as np

    first, *others = stacks
    differences = {}
    for case, texts in cases.items():
        want = stacks[first](texts)
        for name in others:
            differences[name, case] = float(np.abs(stacks[name](texts) - want).max())
    return differences


def peers_main(args) -> int:
    import numpy as np
    import serving_peers
    import tensorflow as tf
    import tensorflow_text  # noqa: F401

    from albert_tf import save_checkpoint
    from albert_tf.checkpoint.convert import convert
    from albert_tf.serving import export
    from albert_tf.tokenizer.spm import AlbertTokenizer

    ours = "albert-tf SavedModel"
    with tempfile.TemporaryDirectory() as folder:
        spm_path = spm_model(args.spm_model, folder)
        tokenizer = AlbertTokenizer(spm_path)
        seq_length = args.seq_length or (64 if args.model == "demo" else 128)
        model = build(args.model, tokenizer.vocab_size, seq_length)
        widen_head(model)
        checkpoint = os.path.join(folder, "checkpoint")
        save_checkpoint(model, checkpoint, spm_model=spm_path, seq_length=seq_length)
        served = tf.saved_model.load(export.export(checkpoint, os.path.join(folder, "export")))
        text_signature = served.signatures["serving_default"]
        ids_signature = served.signatures["token_ids"]
        hf_dir = convert(checkpoint, os.path.join(folder, "hf"), to="hf")
        stacks = {
            ours: lambda texts: text_signature(text=tf.constant(texts))["probabilities"].numpy(),
            "transformers (PyTorch eager)": serving_peers.transformers_stack(hf_dir, seq_length),
            "ONNX Runtime": serving_peers.onnx_stack(hf_dir, seq_length, folder, args.spinning),
        }
        # The texts both tokenizers split alike, so that all three stacks do the same work.
        pool = sentences(4000)
        alike = [t for t, same in zip(pool, serving_peers.same_tokens(
            hf_dir, tokenizer, pool, seq_length)) if same]
        short, long = TWELVE_WORDS, long_text(tokenizer, alike, min(126, seq_length - 2))
        many = (alike * (32 * (args.requests + 3) // len(alike) + 1))[:32 * (args.requests + 3)]
        cases = {"batch 1, 12 words": [short], "batch 1, long": [long], "batch 32": many[:32]}
        differences = agreement(stacks, cases)
        worst = max(differences.values())
        print(f"cpu flags: {cpu_flags()}; {os.cpu_count()} cpus; tf {tf.__version__}; "
              f"{serving_peers.versions()}; kernels capped at {args.max_isa or 'nothing'}; "
              f"ONNX Runtime threads {'spin' if args.spinning else 'do not spin'} between calls")
        print(f"model={args.model} (random weights), export defaults, seq_length {seq_length}, "
              f"vocab {tokenizer.vocab_size}; long text = {len(tokenizer.tokenize(long))} "
              f"pieces; agreement max |Δ probability| {worst:.1e}; {len(alike)} of {len(pool)} "
              "sentences tokenized alike by transformers' tokenizer (the others are not used)")
        if worst > 1e-4:
            print("the stacks disagree (> 1e-4), not timing them: " + ", ".join(
                f"{name} on {case} {d:.1e}" for (name, case), d in differences.items()))
            return 1
        batches = [many[i * 32:(i + 1) * 32] for i in range(args.requests)]
        batch32 = {name: 32 * len(t) / sum(t) for name, t in interleaved(stacks, batches).items()}
        for block, how in ((1, "calls interleaved one by one (each after the other stacks' "
                               "calls)"),
                           (args.block, f"in blocks of {args.block} calls (back to back, as a "
                                        "server answers)")):
            figures = {name: {"batch 32": batch32[name]} for name in stacks}
            for label, text in (("12 words", short), ("long", long)):
                times = interleaved(stacks, [[text]] * args.requests, block=block)
                for name, t in times.items():
                    figures[name][label] = (np.percentile(t, 50) * 1e3,
                                            np.percentile(t, 99) * 1e3)
            print(f"\nbatch 1 {how}; batch 32 interleaved:")
            print_peers(figures, ours)
        split = time_split(text_signature, ids_signature, tokenizer, seq_length,
                           {"batch 1, 12 words": [[short]] * args.requests,
                            "batch 32": batches})
        print_split(split)
    return 0


def print_peers(figures: dict, ours: str) -> None:
    print("| stack | batch 1, 12 words: p50 / p99 ms | batch 1, long: p50 / p99 ms "
          "| batch 32: texts/s |\n|---|---:|---:|---:|")
    for name, f in figures.items():
        print(f"| {name} | {f['12 words'][0]:.1f} / {f['12 words'][1]:.1f} "
              f"| {f['long'][0]:.1f} / {f['long'][1]:.1f} | {f['batch 32']:.1f} |")
    for peer in figures:
        if peer == ours:
            continue
        mine, theirs = figures[ours], figures[peer]
        print(f"{ours} vs {peer}: batch 1 p50 {theirs['12 words'][0] / mine['12 words'][0]:.2f}x "
              f"(12 words), {theirs['long'][0] / mine['long'][0]:.2f}x (long); batch 32 "
              f"{mine['batch 32'] / theirs['batch 32']:.2f}x  (>1: ours faster)")


def time_split(text_signature, ids_signature, tokenizer, seq_length: int, cases: dict) -> dict:
    """{case: (text signature p50 ms, token_ids signature p50 ms)}, interleaved; the ids
    come from the Python tokenizer, padded to the case's longest text as the graph pads."""
    import numpy as np
    import tensorflow as tf

    def ids(texts):
        rows = [tokenizer.encode_pair(t, None, seq_length) for t in texts]
        return {k: tf.constant([r[k] for r in rows], tf.int32) for k in rows[0]}

    out = {}
    for label, batches in cases.items():
        encoded = {id(b): ids(b) for b in batches}
        times = interleaved({
            "text": lambda b: text_signature(text=tf.constant(b)),
            "ids": lambda b, encoded=encoded: ids_signature(**encoded[id(b)])}, batches)
        out[label] = (np.percentile(times["text"], 50) * 1e3,
                      np.percentile(times["ids"], 50) * 1e3)
    return out


def print_split(split: dict) -> None:
    print("where the SavedModel's time goes (p50 ms): | case | whole text call | encoder + "
          "read-out (token_ids signature) | tokenization + packing in the graph |")
    for label, (text, ids) in split.items():
        print(f"| {label} | {text:.1f} | {ids:.1f} | {text - ids:.1f} ({(text - ids) / text:.0%}) |")


# ------------------------------------------------------------------ the profile
def profile_main(args) -> int:
    """Where the default export's time goes, case by case: TensorFlow ops and oneDNN kernels."""
    import numpy as np
    import serving_profile
    import tensorflow as tf
    import tensorflow_text  # noqa: F401

    from albert_tf import save_checkpoint
    from albert_tf.serving import export
    from albert_tf.tokenizer.spm import AlbertTokenizer

    with tempfile.TemporaryDirectory() as folder:
        spm_path = spm_model(args.spm_model, folder)
        tokenizer = AlbertTokenizer(spm_path)
        seq_length = args.seq_length or (64 if args.model == "demo" else 128)
        model = build(args.model, tokenizer.vocab_size, seq_length)
        checkpoint = os.path.join(folder, "checkpoint")
        save_checkpoint(model, checkpoint, spm_model=spm_path, seq_length=seq_length)
        path = export.export(checkpoint, os.path.join(folder, "export"))
        signature = tf.saved_model.load(path).signatures["token_ids"]
        pool = sentences(400)
        cases = {"batch 1, 12 words": [TWELVE_WORDS],
                 "batch 1, long": [long_text(tokenizer, pool, min(126, seq_length - 2))],
                 "batch 32": pool[:32]}
        print(f"cpu flags: {cpu_flags()}; {os.cpu_count()} cpus; tf {tf.__version__}; "
              f"model={args.model}, the token_ids signature of the default export")
        for label, texts in cases.items():
            rows = [tokenizer.encode_pair(t, None, seq_length) for t in texts]
            longest = max(sum(r["input_mask"]) for r in rows)
            inputs = {k: np.array([r[k][:longest] for r in rows], np.int32) for k in rows[0]}
            tensors = {k: tf.constant(v) for k, v in inputs.items()}
            for _ in range(3):
                signature(**tensors)
            ops = serving_profile.op_split(lambda tensors=tensors: signature(**tensors),
                                           args.profile_calls)
            total = sum(ms for ms, _ in ops.values())
            print(f"\n{label} ({len(texts)} x {longest} tokens): TensorFlow ops, "
                  f"{total:.1f} ms per call in op kernels (profiled)")
            for group, ms in sorted(serving_profile.group_ops(ops).items(), key=lambda g: -g[1]):
                print(f"  {group:<16} {ms:7.2f} ms  {ms / total:6.1%}")
            print("  | op type | ms/call | ops/call |\n  |---|---:|---:|")
            for op, (ms, count) in sorted(ops.items(), key=lambda o: -o[1][0])[:8]:
                print(f"  | {op} | {ms:.2f} | {count:.0f} |")
            npz = os.path.join(folder, "inputs.npz")
            np.savez(npz, **inputs)
            kernels = serving_profile.onednn_split(path, "token_ids", npz, args.profile_calls)
            dnn = sum(ms for ms, _ in kernels.values())
            print(f"  oneDNN primitives, {dnn:.1f} ms per call (ONEDNN_VERBOSE): "
                  "| kind | implementation (ISA) | weight layout | ms/call | calls |")
            for (kind, impl, layout), (ms, count) in sorted(kernels.items(),
                                                            key=lambda k: -k[1][0])[:8]:
                print(f"  | {kind} | {impl} | {layout} | {ms:.2f} | {count} |")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", choices=("base", "demo", "tiny"), default="base")
    parser.add_argument("--seq-length", type=int,
                        help="default: 128 (64 for the demo's model); --eager: 512")
    parser.add_argument("--requests", type=int, default=40, help="timed calls per figure")
    parser.add_argument("--block", type=int, default=10,
                        help="batch-1 calls each stack makes in a row in the second table")
    parser.add_argument("--spm-model", help="SentencePiece model (default: train one)")
    parser.add_argument("--precision", action="store_true",
                        help="bfloat16 vs float32 exports instead (use --seq-length 128)")
    parser.add_argument("--spinning", action="store_true",
                        help="leave ONNX Runtime's threads spin-waiting between calls (its "
                        "default in a process of its own)")
    parser.add_argument("--max-isa", choices=("avx2",),
                        help="cap TensorFlow's and PyTorch's kernels (oneDNN, XLA, ATen) at "
                        "AVX2, to approximate an AVX2-only CPU (ONNX Runtime has no such cap)")
    parser.add_argument("--eager", action="store_true",
                        help="the SavedModel vs the eager Keras model instead of the peers")
    parser.add_argument("--profile", action="store_true",
                        help="where the default export's time goes instead: TensorFlow's "
                        "profiler by op type and oneDNN's kernels (ONEDNN_VERBOSE)")
    parser.add_argument("--profile-calls", type=int, default=5, help="calls profiled per case")
    parser.add_argument("--finetune-steps", type=int, default=300)
    parser.add_argument("--finetune-texts", type=int, default=3000)
    args = parser.parse_args()
    # Before TensorFlow or torch is imported (both are imported inside the modes).
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    if args.max_isa:
        os.environ.update(ONEDNN_MAX_CPU_ISA="AVX2", ATEN_CPU_CAPABILITY="avx2",
                          XLA_FLAGS=(os.environ.get("XLA_FLAGS", "") + " --xla_cpu_max_isa=AVX2"))
    if args.precision or args.eager:
        args.seq_length = args.seq_length or (128 if args.precision else 512)
    if args.precision:
        precision_main(args)
        return 0
    if args.profile:
        return profile_main(args)
    if not args.eager:
        return peers_main(args)

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
        from albert_tf.serving.signatures.base import PAD_MULTIPLE

        for name, multiple in (("dynamic", PAD_MULTIPLE), ("fixed", None)):
            path = os.path.join(folder, name)
            export.save_module(export.build_module(model, pre, pad_multiple=multiple), path, name)
            served[name] = tf.saved_model.load(path).signatures["serving_default"]
        text = sentences(32 * (args.requests + 3))
        rows = ["| path | batch | req/s | texts/s | p50 ms | p99 ms |", "|---|---|---|---|---|---|"]
        for batch in (1, 32):
            batches = [text[i * batch:(i + 1) * batch] for i in range(args.requests)]
            graph = served["dynamic"]
            rows.append(summary("SavedModel text signature", batch, timed(
                lambda b, graph=graph: graph(text=tf.constant(b)), batches)))
            rows.append(summary("eager model + Python tokenizer", batch, timed(
                eager_predict(model, tokenizer, args.seq_length), batches)))
        parity = max_difference(served, eager_predict(model, tokenizer, args.seq_length),
                                text[:32])
        single = [[TWELVE_WORDS]] * args.requests
        for name in ("dynamic", "fixed"):
            fn = served[name]
            label = f"12 words, {'dynamic padding' if name == 'dynamic' else f'fixed {args.seq_length}'}"
            rows.append(summary(label, 1, timed(lambda b, fn=fn: fn(text=tf.constant(b)), single)))
    print(f"model={args.model} (random weights) seq_length={args.seq_length} "
          f"vocab={tokenizer.vocab_size} cpus={os.cpu_count()} tf={tf.__version__}")
    print("\n".join(rows))
    print("parity with the eager model + Python tokenizer on 32 sentences, max |Δ probability|: "
          + ", ".join(f"{name} {value:.2e}" for name, value in parity.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
