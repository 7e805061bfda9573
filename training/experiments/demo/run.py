"""`albert-tf demo`: the whole job, end to end, on real text with no download.

    corpus split by document -> SentencePiece vocabulary -> SOP + n-gram-masked
    TFRecords -> LAMB pretraining (held-out MLM / SOP accuracy) -> a fine-tuned
    classifier -> SavedModels with in-graph tokenization -> answers from a fresh process
    -> training curves (PNG) and OUTPUT/demo_report.json

With no arguments it uses the embedded corpus (Python's own documentation) and a
small ALBERT whose recipe was chosen by benchmarks/bench_demo_recipe.py to learn
most in a few minutes on two CPU cores. The classifier learns where a sentence
of the documentation was written (the language reference, asyncio, email,
importlib, internet protocols, xml), labels that come from the corpus itself.
`--corpus`/`--tfds` pretrain on your text (no classifier: it has no labels),
`--preset` picks a paper-sized model, `--steps`/`--batch-size` the budget. Every
stage writes into `--output` and is skipped when its result is already complete,
so a rerun (or a resume after a kill) does only what is left.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import subprocess
import sys
import time

from albert_tf import AlbertConfig, arguments, atomic, cli
from albert_tf.errors import UserError
from albert_tf.serving import export

from ...data import corpus, pairs
from ...data import split as corpus_tasks
from ...data.create_data import SUMMARY_FILE, create_pretraining_data
from ...data.vocab import train_vocab
from ...finetune import run as finetune_cli
from ...pretrain.config import PretrainConfig
from ...pretrain.evaluation import evaluate_pretraining
from ...pretrain.run import run
from ...runtime.distribute import fastest_cpu_training
from . import report as demo_report

logger = logging.getLogger("albert_tf.demo")

# The recipe measured best for a few minutes on 2 CPU cores (see the sweep table in
# README.md, benchmarks/bench_demo_recipe.py): the paper's shape (E < H, all layers
# shared, heads = H/64, FFN = 4H), short sequences and a small vocabulary.
DEMO_MODEL = {"embedding_size": 128, "hidden_size": 256, "num_hidden_layers": 4,
              "num_attention_heads": 4, "intermediate_size": 1024,
              "max_position_embeddings": 64}
STAGES = 8
# Warmup: 10% of the run, but at least 100 steps and at most a quarter of it. The post-LN
# model at LAMB 0.01 stays on the frequent-piece solution for good when warmup is short:
# over 400 steps, 40 warmup steps ended at held-out MLM accuracy 0.061, 100 at 0.135.
MIN_WARMUP_STEPS = 100
ANSWERS_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "answers.py")
ENCODER_NAME, CLASSIFIER_NAME = "albert_demo", "albert_demo_classifier"


@dataclasses.dataclass(frozen=True)
class DemoOptions:
    output: str = "albert_demo"
    corpus: str | None = None       # text files/globs; None: the embedded corpus
    tfds: str | None = None         # NAME[:SPLIT[:FIELD]] of a tensorflow-datasets corpus
    preset: str | None = None       # None: the small demo model
    steps: int = 1200
    batch_size: int = 64
    seq_length: int = 64
    vocab_size: int = 2000
    dupe_factor: int = 3
    learning_rate: float = 0.01
    classifier_epochs: int = 3
    classifier_learning_rate: float = 2e-4
    # auto: mixed_bfloat16 where the CPU has bf16 instructions, else float32 under XLA
    # (distribute.fastest_cpu_training); the classifier is fine-tuned the same way.
    precision: str = "auto"
    questions: str | None = None    # JSON [{"text", "answer"}] of fill-mask questions to score


class DemoError(UserError):
    """Bad input for the demo: reported as one line."""


# ------------------------------------------------------------------- stages
def _stage(number: int, name: str, done: bool) -> bool:
    state = "done already, skipped" if done else "running"
    logger.info("[%d/%d] %s: %s", number, STAGES, name, state)
    return done


def warmup_steps(steps: int) -> int:
    """The learning-rate warmup of a demo pretraining run of `steps` steps."""
    return max(1, min(max(steps // 10, MIN_WARMUP_STEPS), steps // 4))


def training_precision(opts: DemoOptions) -> tuple[str, bool | None]:
    """(precision, jit_compile) of the demo's pretraining and fine-tuning."""

    return fastest_cpu_training(opts.precision)


def corpus_stage(opts: DemoOptions) -> dict:
    """Splits the corpus by document; returns split.json (paths, held-out documents, counts)."""

    spec = opts.corpus or (f"{corpus.TFDS_PREFIX}{opts.tfds}" if opts.tfds else corpus.EMBEDDED)
    out = os.path.join(opts.output, "corpus")
    path = os.path.join(out, "split.json")
    if not _stage(1, f"corpus {spec} split by document -> {out}", os.path.exists(path)):
        try:
            split = corpus_tasks.prepare_corpus_split(spec, out)
        except ValueError as e:
            raise DemoError(str(e)) from None
        logger.info("corpus: %d training and %d held-out documents (%d / %d sentences)",
                    split.counts["train"]["documents"], split.counts["heldout"]["documents"],
                    split.counts["train"]["sentences"], split.counts["heldout"]["sentences"])
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def vocab_stage(opts: DemoOptions, split: dict) -> str:

    prefix = os.path.join(opts.output, "vocab", "spiece")
    if not _stage(2, f"vocabulary ({opts.vocab_size} pieces) -> {prefix}.model",
                  os.path.exists(prefix + ".model")):
        train_vocab([split["train_text"]], prefix, opts.vocab_size)
    return prefix + ".model"


def data_stage(opts: DemoOptions, split: dict, spm_model: str) -> dict[str, str]:
    """TFRecords of the training and of the held-out documents."""

    out = os.path.join(opts.output, "data")
    done = all(os.path.exists(os.path.join(out, n, SUMMARY_FILE)) for n in ("train", "heldout"))
    records = {n: os.path.join(out, n, "pretrain-*.tfrecord") for n in ("train", "heldout")}
    if _stage(3, f"pretraining data (SOP + n-gram masking) -> {out}", done):
        return records
    for name in ("train", "heldout"):
        options = pairs.GenerationOptions(
            max_seq_length=opts.seq_length,
            max_predictions_per_seq=max(2, round(opts.seq_length * 0.15) + 1),
            dupe_factor=opts.dupe_factor if name == "train" else 1)
        summary = create_pretraining_data(corpus.open_corpus(split[f"{name}_text"]),
                                          os.path.join(out, name), spm_model, options)
        logger.info("data %s: %d instances, masked fraction %.3f, SOP swapped %.3f", name,
                    summary["instances"], summary["masked_fraction"],
                    summary["sop"]["swapped_fraction"])
    return records


def pretrain_stage(opts: DemoOptions, records: dict, spm_model: str) -> tuple[str, dict]:
    """Pretrains (evaluating on held-out documents as it goes); returns model/ and a summary."""

    out = os.path.join(opts.output, "pretrain")
    model_dir = os.path.join(out, "model")
    summary_path = os.path.join(out, "demo_summary.json")
    if _stage(4, f"pretraining ({opts.steps} steps, LAMB) -> {out}",
              os.path.exists(summary_path)):
        with open(summary_path, encoding="utf-8") as f:
            return model_dir, json.load(f)
    every = max(1, opts.steps // 12)
    precision, jit = training_precision(opts)
    cfg = PretrainConfig(
        model=opts.preset or "albert-base",
        albert={} if opts.preset else {**DEMO_MODEL, "max_position_embeddings": opts.seq_length},
        train_data=records["train"], eval_data=records["heldout"], output_dir=out,
        spm_model=spm_model, global_batch_size=opts.batch_size, train_steps=opts.steps,
        warmup_steps=warmup_steps(opts.steps), learning_rate=opts.learning_rate,
        checkpoint_every=every, eval_steps=4, log_every=max(1, min(10, every)),
        keep_checkpoints=2, shuffle_buffer=2000, precision=precision, jit_compile=jit)
    logger.info("pretraining precision %s, XLA %s", precision,
                {None: "auto", True: "on", False: "off"}[jit])
    start = time.monotonic()
    summary = run(cfg)
    wall = time.monotonic() - start
    heldout = evaluate_pretraining(model_dir, records["heldout"], batch_size=64)
    logger.info("held-out documents: MLM accuracy %.3f, SOP accuracy %.3f (%d examples)",
                heldout["mlm_accuracy"], heldout["sop_accuracy"], heldout["examples"])
    history = summary["history"]
    result = {"steps": summary["step"], "start_step": summary["start_step"],
              "curve_every": every, "examples_per_sec": summary["examples_per_sec"],
              "train_wall_s": wall, "history": history, "heldout": heldout,
              "precision": summary["precision"], "xla": summary["jit_compile"],
              "final_train": {k: v[-1] for k, v in history.items() if not k.startswith("val_")}}
    atomic.atomic_write_json(summary_path, result)
    return model_dir, result


def classifier_stage(opts: DemoOptions, split: dict, model_dir: str) -> dict | None:
    """Fine-tunes the source classifier with `albert-tf finetune --task classify`."""

    if not split.get("classify_train"):
        _stage(5, "classifier: the corpus has no source labels, nothing to fine-tune", True)
        return None
    out = os.path.join(opts.output, "classifier")
    model = os.path.join(out, "model")
    results = os.path.join(model, "eval_results.json")
    if not _stage(5, f"classifier on the corpus's source labels -> {model}",
                  os.path.exists(results)):
        rows = corpus_tasks.read_rows(split["classify_train"])
        fit, dev = corpus_tasks.split_rows_by_document(rows, 0.15)
        paths = [os.path.join(out, "fit.jsonl"), os.path.join(out, "dev.jsonl")]
        os.makedirs(out, exist_ok=True)
        for path, part in zip(paths, (fit, dev)):
            corpus_tasks.write_rows(path, part)
        precision, jit = training_precision(opts)
        code = finetune_cli.main([
            "--task", "classify", "--checkpoint", model_dir, "--output", model,
            "--data", *paths, "--columns", "text:label",
            "--epochs", str(opts.classifier_epochs), "--batch-size", "32",
            "--learning-rate", str(opts.classifier_learning_rate),
            "--seq-length", str(opts.seq_length), "--precision", precision,
            "--set", f"jit_compile={'auto' if jit is None else str(jit).lower()}"])
        if code != 0:
            raise RuntimeError(f"fine-tuning the classifier failed (exit {code})")
    with open(results, encoding="utf-8") as f:
        evaluation = json.load(f)
    train_labels = [r["label"] for r in corpus_tasks.read_rows(split["classify_train"])]
    held_labels = [r["label"] for r in corpus_tasks.read_rows(split["classify_heldout"])]
    return {"model": model, "dev_history": evaluation["history"],
            "baseline": corpus_tasks.majority_baseline(train_labels, held_labels),
            "heldout_file": split["classify_heldout"]}


def export_stage(opts: DemoOptions, model_dir: str, classifier: dict | None) -> dict:
    """SavedModels with raw-text signatures, written by `albert-tf export`."""

    sources = {ENCODER_NAME: model_dir}
    if classifier:
        sources[CLASSIFIER_NAME] = classifier["model"]
    paths = {}
    for name, checkpoint in sources.items():
        base = os.path.join(opts.output, "export", name)
        paths[name] = os.path.join(base, "1")
        if not _stage(6, f"SavedModel {name} with in-graph tokenization -> {paths[name]}",
                      os.path.exists(os.path.join(paths[name], "saved_model.pb"))):
            code = export.main(["--checkpoint", checkpoint, "--output", base, "--version", "1"])
            if code != 0:
                raise RuntimeError(f"exporting {checkpoint} failed (exit {code})")
    return paths


def answers_stage(opts: DemoOptions, saved: dict, classifier: dict | None) -> dict:
    """Runs the exported models in a fresh process that imports only TF and tensorflow-text."""
    _stage(7, "answers from the SavedModels in a fresh process", False)
    command = [sys.executable, ANSWERS_SCRIPT, "--encoder", saved[ENCODER_NAME]]
    if classifier:
        command += ["--classifier", saved[CLASSIFIER_NAME], "--heldout",
                    classifier["heldout_file"]]
    if opts.questions:
        command += ["--questions", opts.questions]
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    result = subprocess.run(command, env=env, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"the answers process failed:\n{result.stderr[-2000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def run_demo(opts: DemoOptions) -> dict:
    """Runs (or resumes) every stage; returns the report (also in OUTPUT/demo_report.json)."""

    os.makedirs(opts.output, exist_ok=True)
    timings = {}

    def timed(name, fn, *args):
        start = time.monotonic()
        value = fn(*args)
        timings[name] = time.monotonic() - start
        return value

    split = timed("corpus", corpus_stage, opts)
    spm_model = timed("vocab", vocab_stage, opts, split)
    records = timed("data", data_stage, opts, split, spm_model)
    model_dir, pretrain = timed("pretrain", pretrain_stage, opts, records, spm_model)
    classifier = timed("classifier", classifier_stage, opts, split, model_dir)
    saved = timed("export", export_stage, opts, model_dir, classifier)
    answers = timed("answers", answers_stage, opts, saved, classifier)
    _stage(8, "report and training curves", False)
    artifacts = {"corpus split": os.path.join(opts.output, "corpus"),
                 "vocabulary": spm_model, "TFRecords": os.path.dirname(records["train"]),
                 "held-out TFRecords": os.path.dirname(records["heldout"]),
                 "checkpoints": os.path.join(opts.output, "pretrain", "checkpoints"),
                 "TensorBoard logs": os.path.join(opts.output, "pretrain", "tensorboard"),
                 "pretrained model": model_dir, **{f"SavedModel {k}": v for k, v in saved.items()}}
    if classifier:
        artifacts["classifier"] = classifier["model"]
    return demo_report.write(opts.output, pretrain, classifier, answers, timings, artifacts,
                             saved)


def _check_output(path: str) -> None:
    atomic.check_writable_directory(path, "--output")


def parse_args(argv: list[str]) -> DemoOptions:
    defaults = DemoOptions()
    p = arguments.ArgumentParser(prog="albert-tf demo", description=__doc__.split("\n")[0])
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
    p.add_argument("--classifier-epochs", type=int, default=defaults.classifier_epochs)
    p.add_argument("--precision", default=defaults.precision,
                   help="auto (mixed_bfloat16 where the CPU has bf16 instructions, else "
                   "float32 with XLA), float32 or mixed_bfloat16")
    p.add_argument("--questions", help="JSON list of {\"text\", \"answer\"} fill-mask "
                   "questions to score (top 5)")
    args = p.parse_args(argv)

    if args.preset and args.preset not in AlbertConfig.preset_names():
        raise DemoError(f"unknown preset {args.preset!r}; choose one of "
                        f"{', '.join(AlbertConfig.preset_names())}")
    for name in ("steps", "batch_size", "vocab_size", "classifier_epochs"):
        if getattr(args, name) < 1:
            raise DemoError(f"--{name.replace('_', '-')} must be at least 1")
    # Before any stage runs: the sequences must fit the position table of the preset
    # (without one, the demo's model is albert-base resized, its table sized from
    # --seq-length up to the preset's) and hold a pretraining pair.
    pairs.check_pair_seq_length(args.seq_length, AlbertConfig.from_preset(
        args.preset or "albert-base").max_position_embeddings, where="--seq-length")

    try:
        fastest_cpu_training(args.precision)
    except UserError as e:
        raise DemoError(f"--precision: {e}") from None
    if args.questions and not os.path.isfile(args.questions):
        raise DemoError(f"--questions {args.questions}: no such file")
    return DemoOptions(output=args.output, corpus=args.corpus, tfds=args.tfds,
                       preset=args.preset, steps=args.steps, batch_size=args.batch_size,
                       seq_length=args.seq_length, vocab_size=args.vocab_size,
                       classifier_epochs=args.classifier_epochs, questions=args.questions,
                       precision=args.precision)


@cli.command("demo")
def main(argv: list[str]) -> int:
    cli.setup_logging()
    opts = parse_args(argv)
    _check_output(opts.output)
    run_demo(opts)
    return 0
