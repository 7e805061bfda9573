"""`albert-tf ablate`: the paper's ablations (sharing, embedding size, objective, dropout) in one command.

Every configuration of a grid (`grid.py`) is pretrained on the same data
for the same steps with the same seed, then scored on documents it never saw:

  parameters      encoder weights, built, checked against `params.encoder_parameters`
  MLM accuracy    held-out masked-LM accuracy
  NSP / SOP acc.  the sentence head on held-out NSP and SOP pairs (both, for every model)
  throughput      pretraining examples per second
  downstream      accuracy on a classification task drawn from the corpus (for the
                  embedded corpus: which part of the Python docs a sentence is from),
                  every model fine-tuned the same way

OUTPUT/
  ablation.json            the options, checked on a rerun
  data/                    the shared data (`data.py`)
  runs/NAME/               per configuration: pretrain/, finetune/, result.json
  results.json             every configuration's results and the tables
  results.md               the tables laid out as the paper's Tables 3, 4, 5 and its dropout table
  *.png                    the plots

A configuration whose result.json exists is skipped, so rerunning the command
after a kill continues where it stopped (a half-trained configuration resumes
from its last pretraining checkpoint).

Long because it is the command's table of configurations, their runs, the output rule
that makes a rerun continue, and the command line that configures them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import math
import os
import sys
import time
from typing import Any

import keras

from albert_tf import AlbertConfig, arguments, atomic
from albert_tf.arguments import number_field
from albert_tf.checkpoint import open_checkpoint
from albert_tf.errors import UsageError
from albert_tf.params import encoder_parameters
from albert_tf.tokenizer.spm import AlbertTokenizer

from ...data import masking
from ...data import pairs as sop
from ...data.split import LABEL_COLUMN, TEXT_COLUMN
from ...finetune.sequence import file_task
from ...finetune.train import TrainConfig, finetune
from ...pretrain.config import PretrainConfig
from ...pretrain.evaluation import evaluate_pretraining
from ...pretrain.run import run
from . import grid as ablate_grid
from . import report as ablate_report
from .data import AblationData, DataOptions, prepare_data

logger = logging.getLogger("albert_tf.ablate")

ABLATION_FILE = "ablation.json"
EVAL_BATCH_SIZE = 64
HELDOUT_DUPE_FACTOR = 2  # held-out documents, twice (other chunks and masks)
RESULT_FILE = "result.json"
PRETRAIN_SUMMARY = "pretrain_summary.json"
# The base model for two CPU cores: the paper's shape (heads = H/64, FFN = 4H,
# all layers shared, E = 128), narrow and shallow; sized by measurement (README).
# E = H/2 (the paper's base has E = H/6; a 128-wide model has little to factorize).
SMALL_MODEL = {"hidden_size": 128, "num_hidden_layers": 6, "num_attention_heads": 2,
               "intermediate_size": 512, "embedding_size": 64, "max_position_embeddings": 128}


@dataclasses.dataclass(frozen=True)
class AblateOptions:
    """One ablation run. Everything but `output` and `grid` must match on a rerun."""

    output: str
    grid: str = "paper"
    corpus: str | None = None           # corpus spec; None: the embedded corpus
    preset: str | None = None           # base model: preset or albert_config.json; None: SMALL_MODEL
    # Numbers: ranges checked by `arguments.check_numbers` (the one numeric check).
    steps: int = number_field(600, minimum=1)
    batch_size: int = number_field(32, minimum=1)
    seq_length: int = 64
    optimizer: str = "adamw"            # at batch 32 (LAMB is for the paper's 4096)
    learning_rate: float = number_field(0.001, exclusive_minimum=0.0)
    vocab_size: int = number_field(3000, minimum=1)
    dupe_factor: int = number_field(2, minimum=1)
    embedding_sizes: tuple[int, ...] | None = None  # None: ablate_grid.default_embedding_sizes
    finetune_steps: int = number_field(100, minimum=1)
    finetune_learning_rate: float = number_field(1e-4, exclusive_minimum=0.0)
    seed: int = number_field(12345, minimum=0)

    def __post_init__(self):
        if self.grid not in ablate_grid.GRIDS:
            raise ValueError(f"--grid {self.grid!r} is not one of {', '.join(ablate_grid.GRIDS)}")
        arguments.check_numbers(self, names={name: "--" + name.replace("_", "-") for name in (
            "steps", "batch_size", "vocab_size", "dupe_factor", "finetune_steps", "seed")})
        # Before any data is made: the base model's position table bounds it.
        sop.check_pair_seq_length(self.seq_length, _base_model(self)["max_position_embeddings"],
                                  where="--seq-length")
        if self.embedding_sizes is not None:
            ablate_grid.check_embedding_sizes(self.embedding_sizes,
                                              _base_model(self)["hidden_size"])

    def budget(self) -> dict[str, Any]:
        """What every configuration's result depends on besides its setting."""
        return {k: v for k, v in dataclasses.asdict(self).items() if k not in ("output", "grid")}


# ------------------------------------------------------------------ helpers
def _read_json(path: str) -> Any:
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def base_setting(opts: AblateOptions) -> ablate_grid.Setting:
    """The grid's base: the base model's sharing and E, SOP, no dropout."""
    base = _base_model(opts)
    return ablate_grid.Setting(sharing=base["sharing"], embedding_size=base["embedding_size"])


def embedding_sizes(opts: AblateOptions) -> tuple[int, ...]:
    """The E values of the embedding table: the option, else scaled to the base model's H."""
    if opts.embedding_sizes:
        return tuple(opts.embedding_sizes)
    return ablate_grid.default_embedding_sizes(_base_model(opts)["hidden_size"])


def _base_model(opts: AblateOptions) -> dict[str, Any]:
    """The base model's AlbertConfig fields: a preset, a config file, or SMALL_MODEL."""

    if not opts.preset:
        return {**AlbertConfig().to_dict(), **SMALL_MODEL}
    if opts.preset in AlbertConfig.preset_names():
        return AlbertConfig.from_preset(opts.preset).to_dict()
    return AlbertConfig.from_json_file(opts.preset).to_dict()


def model_config(opts: AblateOptions, setting: ablate_grid.Setting, vocab_size: int):
    """The AlbertConfig of one configuration."""

    return AlbertConfig.from_dict({**setting.albert_overrides(_base_model(opts)),
                                   "vocab_size": vocab_size})


# What ablate writes into --output besides ABLATION_FILE (which marks its run).
OUTPUT_ENTRIES = ("data", "runs", ablate_report.RESULTS_JSON, ablate_report.RESULTS_MD, "*.png")


def _has_work(output: str) -> bool:  # data or runs made under its ablation.json
    return any(os.path.isdir(os.path.join(output, n)) and os.listdir(os.path.join(output, n))
               for n in ("data", "runs"))


def _prepare_output(opts: AblateOptions) -> list[str]:
    """Checks (or writes) ablation.json; returns the directories this call created.

    ablation.json binds a directory only once data or a run was made under it: a run that
    failed before (a corpus that does not exist) does not block the corrected rerun."""
    atomic.check_resumable(opts.output, OUTPUT_ENTRIES, (ABLATION_FILE,), "--output", "ablate")
    runs = os.path.join(opts.output, "runs")
    created = atomic.missing_parents(runs) + ([] if os.path.isdir(runs) else [runs])
    os.makedirs(runs, exist_ok=True)
    path = os.path.join(opts.output, ABLATION_FILE)
    budget = json.loads(json.dumps(opts.budget()))  # tuples as lists, as they read back
    if os.path.exists(path) and _has_work(opts.output):
        previous = _read_json(path)
        changed = sorted(k for k in set(budget) | set(previous)
                         if budget.get(k) != previous.get(k))
        if changed:
            raise ValueError(f"{opts.output} holds an ablation run with other settings "
                             f"({', '.join(changed)} differ, see {path}); use another --output")
    else:
        atomic.atomic_write_json(path, budget)
    return created


def _undo_unstarted(opts: AblateOptions, created: list[str]) -> None:
    """After a run that failed before making any data or run: removes its ablation.json
    and the directories it created (if empty), so nothing of it stays behind."""
    if _has_work(opts.output):
        return
    with contextlib.suppress(FileNotFoundError):
        os.remove(os.path.join(opts.output, ABLATION_FILE))
    for directory in reversed(created):
        with contextlib.suppress(OSError):
            os.rmdir(directory)  # only if empty


# -------------------------------------------------------- one configuration
def pretrain(opts: AblateOptions, setting: ablate_grid.Setting, data: AblationData,
             out: str) -> dict:
    """Pretrains one configuration (resuming from its checkpoints); returns run()'s summary."""

    base = _base_model(opts)
    albert = {k: v for k, v in setting.albert_overrides(base).items()
              if k not in ("vocab_size", "hidden_dropout_prob", "attention_probs_dropout_prob")}
    cfg = PretrainConfig(
        # The whole base config as overrides of a preset: the preset adopts the
        # vocabulary's size.
        model="albert-base", albert=albert, train_data=data.train[setting.objective],
        output_dir=out, spm_model=data.spm_model, global_batch_size=opts.batch_size,
        train_steps=opts.steps, warmup_steps=max(1, opts.steps // 10),
        optimizer=opts.optimizer, learning_rate=opts.learning_rate, dropout=setting.dropout,
        checkpoint_every=max(1, min(100, opts.steps)), log_every=max(1, min(50, opts.steps)),
        keep_checkpoints=1, seed=opts.seed, shuffle_buffer=2000,
        sentence_pair_loss=sop.trains_sentence_pair(setting.objective))
    return run(cfg)


def count_parameters(model_dir: str) -> tuple[int, int, Any]:
    """(encoder weights as built, the formula's count, the model) of a pretrained checkpoint."""

    model = open_checkpoint(model_dir).load()
    built = sum(math.prod(w.shape) for w in model.encoder.weights)
    return built, encoder_parameters(model.config), model


def downstream(opts: AblateOptions, data: AblationData, model_dir: str, out: str) -> dict | None:
    """Fine-tunes the checkpoint on the corpus' classification task; held-out accuracy."""
    if not data.classify_train:
        return None

    tokenizer = AlbertTokenizer(data.spm_model)
    task = file_task(data.classify_train, data.classify_heldout, [TEXT_COLUMN], LABEL_COLUMN,
                     False, tokenizer, opts.seq_length)
    config = TrainConfig(output_dir=out, train_steps=opts.finetune_steps, batch_size=32,
                         learning_rate=opts.finetune_learning_rate, seq_length=opts.seq_length,
                         seed=opts.seed, spm_model=data.spm_model, jit_compile=None, verbose=0,
                         buckets=[])  # one padded shape: one trace, the same for every model
    summary = finetune(task, model_dir, config)
    final = summary["history"][-1]  # the last evaluation, not the best: no choice made on held-out
    return {"accuracy": float(final["accuracy"]), "best_epoch_accuracy": summary["best"]["accuracy"],
            "examples": len(task.train), "heldout_examples": len(task.evals["eval"]),
            "steps": opts.finetune_steps}


def run_configuration(opts: AblateOptions, setting: ablate_grid.Setting, data: AblationData,
                      out: str) -> dict:
    """Pretrains, evaluates and fine-tunes one configuration; returns its result."""

    start = time.monotonic()
    summary_path = os.path.join(out, PRETRAIN_SUMMARY)
    if os.path.exists(summary_path):  # pretrained before a kill: its throughput was measured then
        summary = _read_json(summary_path)
    else:
        summary = pretrain(opts, setting, data, os.path.join(out, "pretrain"))
        atomic.atomic_write_json(summary_path, summary)
    model_dir = summary["exported"]
    parameters, formula, model = count_parameters(model_dir)
    scores = {objective: evaluate_pretraining(model, pattern, batch_size=EVAL_BATCH_SIZE)
              for objective, pattern in data.heldout.items()}  # one full pass each
    del model
    keras.backend.clear_session()
    pretrain_s = time.monotonic() - start
    task = downstream(opts, data, model_dir, os.path.join(out, "finetune"))
    keras.backend.clear_session()
    return {
        "setting": setting.to_dict(), "budget": opts.budget(),
        "parameters": parameters, "parameters_formula": formula,
        "mlm_accuracy": scores["sop"]["mlm_accuracy"],
        "mlm_accuracy_nsp_set": scores["nsp"]["mlm_accuracy"],
        "sop_accuracy": scores["sop"]["sop_accuracy"],
        "nsp_accuracy": scores["nsp"]["sop_accuracy"],
        "heldout_examples": {k: v["examples"] for k, v in scores.items()},
        "heldout_masked_tokens": scores["sop"]["masked_tokens"],
        # Without the first step (tracing): what the architecture costs, not the set-up.
        "examples_per_sec": summary["steady_examples_per_sec"] or summary["examples_per_sec"],
        "downstream_accuracy": task["accuracy"] if task else None,
        "downstream": task,
        "final_train_metrics": {k: v[-1] for k, v in summary["history"].items()},
        "pretrain_and_eval_s": round(pretrain_s, 1),
        "wall_s": round(time.monotonic() - start, 1),
    }


# ---------------------------------------------------------------- the grid
def run_ablation(opts: AblateOptions, report_only: bool = False) -> dict:
    """Runs (or resumes) every configuration of the grid; writes results.json/.md and plots.

    The report is rewritten after each configuration, so a long run shows its
    finished tables while it goes on. `report_only`: train nothing, report what
    has finished.
    """

    if report_only and not os.path.exists(os.path.join(opts.output, ABLATION_FILE)):
        raise ValueError(f"{opts.output} holds no ablation run ({ABLATION_FILE} is missing)")
    created = _prepare_output(opts)
    sizes = embedding_sizes(opts)
    settings = ablate_grid.grid_settings(opts.grid, base_setting(opts), sizes)
    data_opts = DataOptions(opts.corpus, opts.vocab_size, opts.seq_length,
                            masking.max_predictions_for(opts.seq_length, sop.GenerationOptions.masked_lm_prob),
                            opts.dupe_factor,
                            HELDOUT_DUPE_FACTOR, opts.seed)
    try:
        data = prepare_data(data_opts, opts.output, sorted({s.objective for s in settings}))
    except BaseException:
        _undo_unstarted(opts, created)
        raise

    def report():
        return ablate_report.write_report(opts.output, opts.grid, settings, results, data,
                                          base_setting(opts), sizes)

    results: dict[str, dict] = {}
    for setting in settings:
        path = os.path.join(opts.output, "runs", setting.name, RESULT_FILE)
        if os.path.exists(path):
            results[setting.name] = _read_json(path)
    timings: list[float] = []
    for i, setting in enumerate(settings, start=1):
        if setting.name in results or report_only:
            state = "done already, skipped" if setting.name in results else "not run"
            logger.info("[%d/%d] %s: %s", i, len(settings), setting.name, state)
            continue
        logger.info("[%d/%d] %s: pretraining %d steps%s", i, len(settings), setting.name,
                    opts.steps, _eta(timings, len(settings) - i + 1))
        out = os.path.join(opts.output, "runs", setting.name)
        os.makedirs(out, exist_ok=True)
        result = run_configuration(opts, setting, data, out)
        atomic.atomic_write_json(os.path.join(out, RESULT_FILE), result)
        results[setting.name] = result
        timings.append(result["wall_s"])
        logger.info("[%d/%d] %s: %.0f s, %.1f examples/s, MLM %.3f, SOP %.3f, NSP %.3f, "
                    "downstream %s", i, len(settings), setting.name, result["wall_s"],
                    result["examples_per_sec"], result["mlm_accuracy"], result["sop_accuracy"],
                    result["nsp_accuracy"], _fmt(result["downstream_accuracy"]))
        report()
    return report()


def _eta(timings: list[float], remaining: int) -> str:
    if not timings:
        return ""
    seconds = sum(timings) / len(timings) * remaining
    return f" (about {math.ceil(seconds / 60)} min left for {remaining} configurations)"


def _fmt(value) -> str:
    return "-" if value is None else f"{value:.3f}"


# ------------------------------------------------------------------- CLI
def parse_args(argv: list[str]) -> tuple[AblateOptions, bool]:
    d = AblateOptions(output="")
    p = arguments.ArgumentParser(prog="albert-tf ablate", description=__doc__.split("\n\n")[0])
    p.add_argument("--output", required=True, help="where the data, runs, tables and plots go")
    p.add_argument("--grid", default=d.grid, choices=ablate_grid.GRIDS,
                   help="paper (all four tables) or one of them (default %(default)s)")
    source = p.add_mutually_exclusive_group()
    source.add_argument("--corpus", help="text files or globs (one sentence per line, blank "
                        "line between documents); default: the embedded corpus")
    source.add_argument("--tfds", help="a tensorflow-datasets corpus NAME[:SPLIT[:FIELD]]")
    p.add_argument("--preset", help="base model: a preset (albert-base, ...) or an "
                   "albert_config.json; default: a small ALBERT for CPUs")
    p.add_argument("--steps", type=int, default=d.steps, help="pretraining steps per "
                   "configuration (default %(default)s)")
    p.add_argument("--batch-size", type=int, default=d.batch_size)
    p.add_argument("--seq-length", type=int, default=d.seq_length)
    p.add_argument("--embedding-sizes", help="E values of the embedding table, e.g. "
                   "64,128,256,768 (default: the paper's for H >= 768, else H/4,H/2,H)")
    p.add_argument("--vocab-size", type=int, default=d.vocab_size,
                   help="SentencePiece pieces (default %(default)s)")
    p.add_argument("--finetune-steps", type=int, default=d.finetune_steps,
                   help="downstream fine-tuning steps per model (default %(default)s)")
    p.add_argument("--seed", type=int, default=d.seed)
    p.add_argument("--report-only", action="store_true",
                   help="train nothing: write the tables and plots of the finished configurations")
    args = p.parse_args(argv)
    try:
        sizes = (tuple(int(x) for x in args.embedding_sizes.split(","))
                 if args.embedding_sizes else None)
    except ValueError:
        raise UsageError(f"--embedding-sizes {args.embedding_sizes!r}: expected "
                         "comma-separated integers") from None
    if args.preset:

        if args.preset not in AlbertConfig.preset_names() and not os.path.isfile(args.preset):
            raise UsageError(f"--preset {args.preset!r} is neither a preset "
                             f"({', '.join(AlbertConfig.preset_names())}) nor a file")
    corpus = f"tfds:{args.tfds}" if args.tfds else args.corpus
    return AblateOptions(output=args.output, grid=args.grid, corpus=corpus, preset=args.preset,
                         steps=args.steps, batch_size=args.batch_size,
                         seq_length=args.seq_length, vocab_size=args.vocab_size,
                         embedding_sizes=sizes, finetune_steps=args.finetune_steps,
                         seed=args.seed), args.report_only


def main(argv: list[str]) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    try:
        opts, report_only = parse_args(argv)
        with atomic.claimed(opts.output):  # one ablation per --output at a time
            report = run_ablation(opts, report_only)
    except (ValueError, FileNotFoundError) as e:  # UsageError, ConfigError: ValueErrors
        logger.debug("ablate failed", exc_info=True)
        print(f"albert-tf ablate: {e}", file=sys.stderr)
        return 2
    sys.stdout.write("\n".join(["", *report["lines"], ""]))
    return 0
