"""`albert-tf demo`: the whole job, end to end, on real text with no download.

    corpus -> SentencePiece vocabulary -> SOP + n-gram-masked TFRecords -> LAMB
    pretraining -> SavedModel with in-graph tokenization -> answers from a fresh process

With no arguments it uses the embedded corpus (Python's own documentation) and a
small ALBERT that pretrains in a few minutes on two CPU cores. The same command
scales to real runs: `--corpus`/`--tfds` for the text, `--preset` for the model,
`--steps`/`--batch-size` for the budget. Every stage writes into `--output` and is
skipped when its result is already complete, so a rerun (or a resume after a
kill) does only what is left.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import subprocess
import sys
import time

from albert_tf import runio
from albert_tf.runio import UserError

logger = logging.getLogger("albert_tf.demo")

# A small ALBERT for two CPU cores: the paper's shape (E=128, heads = H/64, FFN = 4H,
# all layers shared), narrower and shallower.
DEMO_MODEL = {"embedding_size": 128, "hidden_size": 256, "num_hidden_layers": 4,
              "num_attention_heads": 4, "intermediate_size": 1024,
              "max_position_embeddings": 128}

ANSWERS_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "demo_answers.py")


@dataclasses.dataclass(frozen=True)
class DemoOptions:
    output: str = "albert_demo"
    corpus: str | None = None       # text files/globs; None: the embedded corpus
    tfds: str | None = None         # NAME[:SPLIT[:FIELD]] of a tensorflow-datasets corpus
    preset: str | None = None       # None: the small demo model
    steps: int = 600
    batch_size: int = 32
    seq_length: int = 128
    vocab_size: int = 5000
    dupe_factor: int = 3
    learning_rate: float = 0.004


class DemoError(UserError):
    """Bad input for the demo: reported as one line."""


# ------------------------------------------------------------------- stages
def _stage(number: int, name: str, done: bool) -> bool:
    state = "done already, skipped" if done else "running"
    logger.info("[%d/6] %s: %s", number, name, state)
    return done


def corpus_stage(opts: DemoOptions) -> tuple[str, list[str]]:
    """Returns the corpus spec for create-data and the text files for vocabulary training."""
    from albert_tf.training import corpus

    if opts.corpus:
        try:
            paths = corpus.expand_patterns(opts.corpus)
        except ValueError as e:
            raise DemoError(str(e)) from None
        _stage(1, f"corpus: {len(paths)} file(s) from --corpus", True)
        return opts.corpus, paths
    spec = f"tfds:{opts.tfds}" if opts.tfds else corpus.EMBEDDED
    path = os.path.join(opts.output, "corpus", "corpus.txt")
    if not _stage(1, f"corpus: {spec} -> {path}", os.path.exists(path)):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        source = corpus.open_corpus(spec)
        report = corpus.CorpusReport()
        stats = corpus.write_corpus_file(path, (d.sentences for d in source.read(report)))
        logger.info("corpus: %d documents, %d sentences, %d characters", stats["documents"],
                    stats["sentences"], stats["characters"])
    return path, [path]


def vocab_stage(opts: DemoOptions, texts: list[str]) -> str:
    from albert_tf.training.vocab import train_vocab

    prefix = os.path.join(opts.output, "vocab", "spiece")
    if not _stage(2, f"vocabulary ({opts.vocab_size} pieces) -> {prefix}.model",
                  os.path.exists(prefix + ".model")):
        train_vocab(texts, prefix, opts.vocab_size)
    return prefix + ".model"


def data_stage(opts: DemoOptions, corpus_spec: str, spm_model: str) -> str:
    from albert_tf.training import corpus, sop
    from albert_tf.training.pretraining_data import SUMMARY_FILE, create_pretraining_data

    out = os.path.join(opts.output, "data")
    summary_path = os.path.join(out, SUMMARY_FILE)
    if not _stage(3, f"pretraining data (SOP + n-gram masking) -> {out}",
                  os.path.exists(summary_path)):
        options = sop.GenerationOptions(max_seq_length=opts.seq_length,
                                        max_predictions_per_seq=20,
                                        dupe_factor=opts.dupe_factor)
        summary = create_pretraining_data(corpus.open_corpus(corpus_spec), out, spm_model,
                                          options)
        logger.info("data: %d instances, masked fraction %.3f, SOP swapped %.3f",
                    summary["instances"], summary["masked_fraction"],
                    summary["sop"]["swapped_fraction"])
    return os.path.join(out, "pretrain-*.tfrecord")


def pretrain_stage(opts: DemoOptions, data: str, spm_model: str) -> tuple[str, dict]:
    from albert_tf.training.pretrain import PretrainConfig, run

    out = os.path.join(opts.output, "pretrain")
    model_dir = os.path.join(out, "model")
    summary_path = os.path.join(out, "demo_summary.json")
    if _stage(4, f"pretraining ({opts.steps} steps, LAMB) -> {out}",
              os.path.exists(summary_path)):
        with open(summary_path, encoding="utf-8") as f:
            return model_dir, json.load(f)
    cfg = PretrainConfig(
        model=opts.preset or "albert-base", albert={} if opts.preset else DEMO_MODEL,
        train_data=data, output_dir=out, spm_model=spm_model,
        global_batch_size=opts.batch_size, train_steps=opts.steps,
        warmup_steps=max(1, opts.steps // 10), learning_rate=opts.learning_rate,
        checkpoint_every=max(1, min(100, opts.steps)), log_every=10, keep_checkpoints=2,
        shuffle_buffer=2000)
    summary = run(cfg)
    final = {k: v[-1] for k, v in summary["history"].items()} if summary["history"] else {}
    result = {"steps": summary["step"], "examples_per_sec": summary["examples_per_sec"],
              "final_metrics": final}
    runio.atomic_write_json(summary_path, result)
    return model_dir, result


def export_stage(opts: DemoOptions, model_dir: str) -> str:
    from albert_tf.serving.export import export

    base = os.path.join(opts.output, "export", "albert_demo")
    version = os.path.join(base, "1")
    if not _stage(5, f"SavedModel with in-graph tokenization -> {version}",
                  os.path.exists(os.path.join(version, "saved_model.pb"))):
        export(model_dir, base, version=1)
    return version


def answers_stage(saved_model: str) -> dict:
    """Runs the exported model in a fresh process that imports only TF and tensorflow-text."""
    _stage(6, "answers from the SavedModel in a fresh process", False)
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    result = subprocess.run([sys.executable, ANSWERS_SCRIPT, saved_model], env=env,
                            capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"the answers process failed:\n{result.stderr[-2000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


# ------------------------------------------------------------------- report
def _report(opts: DemoOptions, spm_model: str, data: str, model_dir: str, saved_model: str,
            pretrain: dict, answers: dict, timings: dict) -> None:
    out = os.path.abspath(opts.output)
    lines = ["", "Fill-mask (top 3 per [MASK]):"]
    for item in answers["fill_mask"]:
        guesses = ", ".join(f"{t} ({s:.2f})" for t, s in zip(item["tokens"], item["scores"]))
        lines.append(f"  {item['text']}\n    -> {guesses}")
    lines.append("\nSentence similarity (cosine of mean-pooled token embeddings):")
    for item in answers["similarity"]:
        lines.append(f"  {item['score']:+.3f}  {item['a']!r} ~ {item['b']!r}")
    metrics = pretrain.get("final_metrics", {})
    lines += ["", f"Pretraining: {pretrain.get('steps')} steps, "
              f"MLM accuracy {metrics.get('mlm_accuracy', float('nan')):.3f}, "
              f"SOP accuracy {metrics.get('sop_accuracy', float('nan')):.3f}",
              "Stage wall times: " + ", ".join(f"{k} {v:.0f}s" for k, v in timings.items()),
              "", "Where everything is:",
              f"  vocabulary   {os.path.abspath(spm_model)}",
              f"  TFRecords    {os.path.abspath(data)}",
              f"  checkpoints  {os.path.join(out, 'pretrain', 'checkpoints')}",
              f"  TensorBoard  tensorboard --logdir {os.path.join(out, 'pretrain', 'tensorboard')}",
              f"  model        {os.path.abspath(model_dir)}",
              f"  SavedModel   {os.path.abspath(saved_model)}",
              "", "Serve it with TF Serving (REST on 8501, gRPC on 8500):",
              f"  docker run --rm -p 8501:8501 -p 8500:8500 "
              f"-v {os.path.dirname(os.path.abspath(saved_model))}:/models/albert_demo "
              f"-e MODEL_NAME=albert_demo tensorflow/serving",
              "  echo 'the [MASK] statement is used to define a function.' | albert-tf predict "
              "--server http://localhost:8501 --model albert_demo --signature fill_mask --input -",
              "or without a server:",
              f"  echo 'a list is a mutable [MASK] of items.' | albert-tf predict --saved-model "
              f"{os.path.dirname(os.path.abspath(saved_model))} --signature fill_mask --input -"]
    sys.stdout.write("\n".join(lines) + "\n")


def run_demo(opts: DemoOptions) -> dict:
    """Runs (or resumes) every stage; returns the answers and where the artifacts are."""
    os.makedirs(opts.output, exist_ok=True)
    timings = {}

    def timed(name, fn, *args):
        start = time.monotonic()
        value = fn(*args)
        timings[name] = time.monotonic() - start
        return value

    corpus_spec, texts = timed("corpus", corpus_stage, opts)
    spm_model = timed("vocab", vocab_stage, opts, texts)
    data = timed("data", data_stage, opts, corpus_spec, spm_model)
    model_dir, pretrain = timed("pretrain", pretrain_stage, opts, data, spm_model)
    saved_model = timed("export", export_stage, opts, model_dir)
    answers = timed("answers", answers_stage, saved_model)
    _report(opts, spm_model, data, model_dir, saved_model, pretrain, answers, timings)
    return {"spm_model": spm_model, "data": data, "model_dir": model_dir,
            "saved_model": saved_model, "pretrain": pretrain, "answers": answers,
            "timings": timings}


def _check_output(path: str) -> None:
    runio.check_writable_directory(path, "--output")


def parse_args(argv: list[str]) -> DemoOptions:
    defaults = DemoOptions()
    p = runio.ArgumentParser(prog="albert-tf demo", description=__doc__.split("\n")[0])
    p.add_argument("--output", default=defaults.output, help="where every stage writes")
    source = p.add_mutually_exclusive_group()
    source.add_argument("--corpus", help="text files or globs (one sentence per line, blank "
                        "line between documents, .gz allowed); default: the embedded corpus")
    source.add_argument("--tfds", help="a tensorflow-datasets corpus NAME[:SPLIT[:FIELD]], "
                        "e.g. wikipedia/20230601.en:train:text")
    p.add_argument("--preset", help="model preset (albert-base, albert-large, ...); "
                   "default: a small ALBERT for CPUs")
    p.add_argument("--steps", type=int, default=defaults.steps, help="pretraining steps")
    p.add_argument("--batch-size", type=int, default=defaults.batch_size)
    p.add_argument("--seq-length", type=int, default=defaults.seq_length)
    p.add_argument("--vocab-size", type=int, default=defaults.vocab_size)
    args = p.parse_args(argv)
    from albert_tf import AlbertConfig

    if args.preset and args.preset not in AlbertConfig.preset_names():
        raise DemoError(f"unknown preset {args.preset!r}; choose one of "
                        f"{', '.join(AlbertConfig.preset_names())}")
    for name in ("steps", "batch_size", "vocab_size"):
        if getattr(args, name) < 1:
            raise DemoError(f"--{name.replace('_', '-')} must be at least 1")
    if not 8 <= args.seq_length <= 512:
        raise DemoError("--seq-length must be in [8, 512]")
    # Before any stage runs: the sequences must fit the model's position table.
    model = (AlbertConfig.from_preset(args.preset) if args.preset
             else AlbertConfig(**DEMO_MODEL))
    model.check_sequence_length(args.seq_length, "--seq-length")
    return DemoOptions(output=args.output, corpus=args.corpus, tfds=args.tfds,
                       preset=args.preset, steps=args.steps, batch_size=args.batch_size,
                       seq_length=args.seq_length, vocab_size=args.vocab_size)


@runio.command("demo")
def main(argv: list[str]) -> int:
    runio.setup_logging()
    opts = parse_args(argv)
    _check_output(opts.output)
    run_demo(opts)
    return 0
