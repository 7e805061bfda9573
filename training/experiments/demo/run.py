"""`albert-tf demo`: the whole job, end to end, on real text with no download.

    corpus split by document -> SentencePiece vocabulary -> SOP + n-gram-masked
    TFRecords -> a classifier fine-tuned from a random encoder (the baseline) -> LAMB
    pretraining (held-out MLM / SOP / fill-mask accuracy) -> the classifier fine-tuned
    from the pretrained encoder -> SavedModels with in-graph tokenization -> answers
    from a fresh process -> training curves (PNG) and OUTPUT/demo_report.json

With no arguments it uses the embedded corpus (the documentation of Python and of
the installed packages, docs/corpus.md) and a small ALBERT whose recipe was chosen
by benchmarks/bench_demo_recipe.py to learn most in a few minutes on two CPU cores.
The classifier learns where a sentence of the documentation was written (the
language reference, areas of the standard library, NumPy, Keras, TensorFlow,
Matplotlib: `split.LABELS`), labels that come from the corpus itself.
`--corpus`/`--tfds` pretrain on your text (no classifier: it has no labels),
`--size` picks a paper-sized model, `--minutes` the time budget that sets the
number of pretraining steps (`budget.py`), or `--steps` a fixed, reproducible count.
Every stage writes into `--output` and is skipped when its result is already
complete, so a rerun (or a resume after a kill) does only what is left.

Long because it is the table of the job's nine stages, each a short function with
its own skip rule. The command line and its options: `command.py`.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time

import numpy as np

from albert_tf import precisions
from albert_tf.checkpoint import TASK_FILE
from albert_tf.infra import atomic, cli
from albert_tf.serving import export, layout
from albert_tf.tokenizer.spm import AlbertTokenizer

from ...data import corpus, masking, pairs
from ...data import split as corpus_tasks
from ...data.create_data import SHARD_GLOB, SUMMARY_FILE, create_pretraining_data
from ...data.vocab import train_vocab
from ...pretrain.config import PretrainConfig
from ...pretrain.evaluation import evaluate_pretraining, masked_label_counts
from ...pretrain.precision import PrecisionChoice
from ...pretrain.progress import RUN_CONFIG_FILE
from ...pretrain.run import Calibration, choose_precision, run
from ...runtime import layout as run_layout
from ...runtime.distribute import cpu_training_candidates
from . import budget as demo_budget
from . import classifier as demo_classifier
from . import command as demo_command
from . import report as demo_report
from .budget import warmup_steps
from .command import DemoError, DemoOptions

logger = logging.getLogger("albert_tf.demo")

# The recipe measured best for the demo's budget on 2 CPU cores (docs/demo.md#the-recipe,
# benchmarks/bench_demo_recipe.py): the paper's shape (E < H, all layers shared, heads =
# H/64, FFN = 4H) at H=128, short sequences and a small vocabulary. At equal wall time it
# takes ~4x the steps of H=256 and ends ahead on held-out MLM and SOP.
DEMO_MODEL = {"embedding_size": 64, "hidden_size": 128, "num_hidden_layers": 4,
              "num_attention_heads": 2, "intermediate_size": 512,
              "max_position_embeddings": 64}
STAGES = 9
ANSWERS_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "answers.py")
ENCODER_NAME, CLASSIFIER_NAME = "albert_demo", "albert_demo_classifier"
MASKED_COUNTS_FILE = "masked_label_counts.json"
HELDOUT_BATCH = 64  # the final evaluation's batch


# ------------------------------------------------------------------- stages
def _stage(number: int, name: str, done: bool) -> bool:
    state = "done already, skipped" if done else "running"
    logger.info("[%d/%d] %s: %s", number, STAGES, name, state)
    return done


PRECISION_FILE = "precision.json"


def precision_stage(opts: DemoOptions, records: dict, spm_model: str) -> PrecisionChoice:
    """(precision, XLA) of the demo's training jobs, decided once and kept for reruns.

    "auto" times the candidates on the pretraining model and data; an explicit
    precision trains float32 under XLA and bfloat16 without (XLA's CPU backend does
    not use the bf16 instructions).
    """
    path = os.path.join(opts.output, PRECISION_FILE)
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            kept = json.load(f)
        return PrecisionChoice(kept["precision"], kept["xla"], kept["precision_candidates"])
    if opts.precision == precisions.AUTO:
        # The budget run's upper bound of steps: long enough to be measured.
        choice = choose_precision(pretrain_config(opts, records, spm_model, 10**6, 1, 1,
                                                  PrecisionChoice(precisions.AUTO, None, {})))
    else:
        ((precision, _),) = cpu_training_candidates(opts.precision)
        choice = PrecisionChoice(precision, precision == "float32", {})
    atomic.atomic_write_json(path, {"precision": choice.precision, "xla": bool(choice.jit_compile),
                                    "precision_candidates": choice.candidates})
    return choice


def corpus_stage(opts: DemoOptions) -> dict:
    """Splits the corpus by document; returns split.json (paths, held-out documents, counts)."""

    spec = opts.corpus or (f"{corpus.TFDS_PREFIX}{opts.tfds}" if opts.tfds else corpus.EMBEDDED)
    out = os.path.join(opts.output, "corpus")
    path = os.path.join(out, corpus_tasks.SPLIT_FILE)
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
        # The stage's own files: a .vocab without its .model is what a killed run left.
        train_vocab([split["train_text"]], prefix, opts.vocab_size, overwrite=True)
    return prefix + ".model"


def data_stage(opts: DemoOptions, split: dict, spm_model: str) -> dict[str, str]:
    """TFRecords of the training and of the held-out documents."""

    out = os.path.join(opts.output, "data")
    done = all(os.path.exists(os.path.join(out, n, SUMMARY_FILE)) for n in ("train", "heldout"))
    records = {n: os.path.join(out, n, SHARD_GLOB) for n in ("train", "heldout")}
    if _stage(3, f"pretraining data (SOP + n-gram masking) -> {out}", done):
        unigram_counts(records, spm_model)
        return records
    for name in ("train", "heldout"):
        options = pairs.GenerationOptions(
            max_seq_length=opts.seq_length,
            max_predictions_per_seq=masking.max_predictions_for(
                opts.seq_length, pairs.GenerationOptions.masked_lm_prob),
            dupe_factor=opts.dupe_factor if name == "train" else 1)
        summary = create_pretraining_data(corpus.open_corpus(split[f"{name}_text"]),
                                          os.path.join(out, name), spm_model, options)
        logger.info("data %s: %d instances, masked fraction %.3f, SOP swapped %.3f", name,
                    summary["instances"], summary["masked_fraction"],
                    summary["sop"]["swapped_fraction"])
    unigram_counts(records, spm_model)
    return records


def unigram_counts(records: dict, spm_model: str) -> list[int]:
    """How often each piece is masked in the training records (the fill-mask baseline's
    ranking), counted once into data/train/MASKED_COUNTS_FILE."""
    path = os.path.join(os.path.dirname(records["train"]), MASKED_COUNTS_FILE)
    if not os.path.exists(path):
        counts = masked_label_counts(records["train"], AlbertTokenizer(spm_model).vocab_size)
        atomic.atomic_write_json(path, [int(c) for c in counts])
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def instances(records: dict, name: str) -> int:
    """The records create-data wrote for `name` ("train" or "heldout")."""
    with open(os.path.join(os.path.dirname(records[name]), SUMMARY_FILE), encoding="utf-8") as f:
        return json.load(f)["instances"]


def pretrain_config(opts: DemoOptions, records: dict, spm_model: str, steps: int,
                    warmup: int, every: int, choice: PrecisionChoice) -> PretrainConfig:
    """The demo's pretraining run: `steps` steps (the upper bound of a budget run)."""
    return PretrainConfig(
        model=opts.size or "albert-base",
        albert={} if opts.size else {**DEMO_MODEL, "max_position_embeddings": opts.seq_length},
        train_data=records["train"], eval_data=records["heldout"],
        output_dir=os.path.join(opts.output, "pretrain"), spm_model=spm_model,
        global_batch_size=opts.batch_size, train_steps=steps, warmup_steps=warmup,
        learning_rate=opts.learning_rate, checkpoint_every=every, eval_steps=4,
        log_every=max(1, min(10, every)), keep_checkpoints=2, shuffle_buffer=2000,
        precision=choice.precision, jit_compile=choice.jit_compile)


def _recorded_counts(out: str) -> tuple[int, int] | None:
    """(train_steps, warmup_steps) a budget run chose and recorded in run_config.json."""
    path = os.path.join(out, RUN_CONFIG_FILE)
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as f:
        recorded = json.load(f)
    if not recorded.get("calibration"):
        return None
    return recorded["train_steps"], recorded["warmup_steps"]


def pretrain_stage(opts: DemoOptions, records: dict, spm_model: str,
                   budget: demo_budget.Budget, choice: PrecisionChoice) -> tuple[str, dict]:
    """Pretrains (evaluating on held-out documents as it goes); returns model/ and a summary.

    With --steps, exactly that many steps; else as many as fit the budget, chosen after
    the first steps (budget.py); a resumed budget run keeps the count it chose.
    """
    out = os.path.join(opts.output, "pretrain")
    model_dir = run_layout.model_dir(out)
    summary_path = os.path.join(out, "demo_summary.json")
    recorded = _recorded_counts(out)
    if opts.steps is not None:
        plan = f"{opts.steps} steps"
    elif recorded:
        plan = f"{recorded[0]} steps, the count this budget run chose"
    else:
        plan = f"the steps that fit a {opts.minutes:g}-minute budget"
    if _stage(5, f"pretraining ({plan}, LAMB) -> {out}", os.path.exists(summary_path)):
        with open(summary_path, encoding="utf-8") as f:
            return model_dir, json.load(f)
    calibration = None
    if opts.steps is not None:
        steps, every = opts.steps, demo_budget.eval_every(opts.steps)
        cfg = pretrain_config(opts, records, spm_model, steps, warmup_steps(steps), every,
                              choice)
    elif recorded:
        every = demo_budget.eval_every(None)
        cfg = pretrain_config(opts, records, spm_model, recorded[0], recorded[1], every, choice)
    else:
        every = demo_budget.eval_every(None)
        # An upper bound on the count (0.05 s a step); the schedule until the choice
        # is the warmup of MIN_WARMUP_STEPS.
        upper = max(int(budget.seconds / 0.05), demo_budget.CALIBRATION_STEPS + 2)
        cfg = pretrain_config(opts, records, spm_model, upper,
                              demo_budget.MIN_WARMUP_STEPS, every, choice)
        calibration = Calibration(demo_budget.CALIBRATION_STEPS, lambda seconds, step:
                                  budget.choose(seconds, step, every, cfg.eval_steps),
                                  deadline=budget.pretraining_deadline)
    logger.info("pretraining precision %s, XLA %s", cfg.precision,
                {None: "auto", True: "on", False: "off"}[cfg.jit_compile])
    start = time.monotonic()
    summary = run(cfg, calibration=calibration, precision_choice=choice)
    wall = time.monotonic() - start
    start = time.monotonic()
    heldout = evaluate_pretraining(model_dir, records["heldout"], batch_size=HELDOUT_BATCH,
                                   unigram_counts=np.array(unigram_counts(records, spm_model)))
    logger.info("held-out documents: MLM accuracy %.3f (top 5: %.3f; unigram baseline %.3f / "
                "%.3f), SOP accuracy %.3f (%d examples, %.0f s)", heldout["mlm_accuracy"],
                heldout["mlm_top5_accuracy"], heldout["unigram_top1_accuracy"],
                heldout["unigram_top5_accuracy"], heldout["sop_accuracy"], heldout["examples"],
                time.monotonic() - start)
    history = summary["history"]
    result = {"steps": summary["step"], "start_step": summary["start_step"],
              "curve_every": every, "examples_per_sec": summary["examples_per_sec"],
              "train_wall_s": wall, "history": history, "heldout": heldout,
              "precision": summary["precision"], "xla": summary["jit_compile"],
              "precision_candidates": choice.candidates,
              "budget": budget.decision if calibration else None,
              "calibration": summary["calibration"], "minutes": opts.minutes,
              "final_train": {k: v[-1] for k, v in history.items() if not k.startswith("val_")}}
    atomic.atomic_write_json(summary_path, result)
    return model_dir, result


def classifier_stage(opts: DemoOptions, split: dict, checkpoint: str, scratch: bool,
                     choice: PrecisionChoice) -> dict:
    """Fine-tunes the source classifier from `checkpoint` and scores it on held-out documents.

    `scratch`: the baseline, from a random encoder (`checkpoint` is then its directory).
    Returns {"model", "dev_history", "heldout" (accuracy, examples), "wall_s"}.
    """
    out = os.path.join(opts.output, "classifier_scratch" if scratch else "classifier")
    model = run_layout.model_dir(out)
    summary_path = os.path.join(out, "demo_summary.json")
    name = ("baseline classifier from a randomly initialized encoder" if scratch
            else "classifier from the pretrained encoder")
    if _stage(4 if scratch else 6, f"{name} on the corpus's source labels -> {model}",
              os.path.exists(summary_path)):
        with open(summary_path, encoding="utf-8") as f:
            return json.load(f)
    start = time.monotonic()
    demo_classifier.fine_tune(
        checkpoint, model, demo_classifier.write_fit_and_dev(split, out),
        opts.classifier_epochs, opts.classifier_learning_rate, opts.seq_length,
        choice.precision, choice.jit_compile)
    heldout = demo_classifier.heldout_accuracy(model, split["classify_heldout"])
    logger.info("%s: held-out accuracy %.3f (%d sentences)", name, heldout["accuracy"],
                heldout["examples"])
    result = {"model": model, "dev_history": demo_classifier.dev_history(model),
              "heldout": heldout, "wall_s": time.monotonic() - start}
    atomic.atomic_write_json(summary_path, result)
    return result


def baseline_stage(opts: DemoOptions, split: dict, records: dict, spm_model: str,
                   choice: PrecisionChoice) -> dict | None:
    """The classifier from a random encoder of the pretrained model's shape (None: no labels)."""
    if not split.get("classify_train"):
        _stage(4, "baseline classifier: the corpus has no source labels", True)
        return None
    encoder = os.path.join(opts.output, "classifier_scratch", "random_encoder")
    if not os.path.exists(os.path.join(encoder, TASK_FILE)):
        cfg = pretrain_config(opts, records, spm_model, 1, 0, 1, choice)
        demo_classifier.write_random_encoder(cfg, encoder, opts.seq_length)
    return classifier_stage(opts, split, encoder, scratch=True, choice=choice)


def classifiers(opts: DemoOptions, split: dict, model_dir: str, scratch: dict | None,
                choice: PrecisionChoice) -> dict | None:
    """Both classifiers and the majority baseline (None: the corpus has no labels)."""
    if scratch is None:
        _stage(6, "classifier: the corpus has no source labels, nothing to fine-tune", True)
        return None
    pretrained = classifier_stage(opts, split, model_dir, scratch=False, choice=choice)
    train_labels = [r["label"] for r in corpus_tasks.read_rows(split["classify_train"])]
    held_labels = [r["label"] for r in corpus_tasks.read_rows(split["classify_heldout"])]
    return {**pretrained, "scratch": scratch,
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
        if not _stage(7, f"SavedModel {name} with in-graph tokenization -> {paths[name]}",
                      os.path.exists(os.path.join(paths[name], layout.SAVED_MODEL_FILE))):
            export.export(checkpoint, base, version=1)
    return paths


def answers_stage(opts: DemoOptions, saved: dict, classifier: dict | None) -> dict:
    """Runs the exported models in a fresh process that imports only TF and tensorflow-text."""
    _stage(8, "answers from the SavedModels in a fresh process", False)
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

    budget = demo_budget.Budget(opts.minutes * 60.0, time.monotonic())
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
    choice = timed("precision", precision_stage, opts, records, spm_model)
    scratch = timed("baseline classifier", baseline_stage, opts, split, records, spm_model,
                    choice)
    # The pretrained classifier costs what the baseline did (same data, steps, shapes).
    budget.classifier_s = scratch["wall_s"] if scratch else 0.0
    budget.heldout_batches = instances(records, "heldout") // HELDOUT_BATCH
    model_dir, pretrain = timed("pretrain", pretrain_stage, opts, records, spm_model, budget,
                                choice)
    classifier = timed("classifier", classifiers, opts, split, model_dir, scratch, choice)
    saved = timed("export", export_stage, opts, model_dir, classifier)
    answers = timed("answers", answers_stage, opts, saved, classifier)
    _stage(9, "report and training curves", False)
    artifacts = {"corpus split": os.path.join(opts.output, "corpus"),
                 "vocabulary": spm_model, "TFRecords": os.path.dirname(records["train"]),
                 "held-out TFRecords": os.path.dirname(records["heldout"]),
                 "pretraining checkpoints": run_layout.checkpoints_dir(os.path.join(opts.output, "pretrain")),
                 "TensorBoard logs": run_layout.tensorboard_dir(os.path.join(opts.output, "pretrain")),
                 "pretrained model": model_dir, **{f"SavedModel {k}": v for k, v in saved.items()}}
    if classifier:
        artifacts["classifier"] = classifier["model"]
        artifacts["baseline classifier"] = classifier["scratch"]["model"]
    return demo_report.write(opts.output, pretrain, classifier, answers, timings, artifacts,
                             saved)


def run_command(opts: DemoOptions) -> int:
    """`albert-tf demo` with its options, parsed and checked (`command.parse`)."""
    cli.setup_logging()
    # One demo per --output: a second one is refused at once, naming the first one's pid.
    with atomic.claimed(opts.output):
        run_demo(opts)
    return 0


@cli.command("demo")
def main(argv: list[str]) -> int:
    return run_command(demo_command.parse(argv))
