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

Long because it is the command's table of configurations, their runs and the output rule
that makes a rerun continue. The command line and its options: `command.py`.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import sys
import time
from typing import Any

import keras

from albert_tf import AlbertConfig
from albert_tf.checkpoint import open_checkpoint
from albert_tf.infra import atomic
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
from . import command
from . import grid as ablate_grid
from . import report as ablate_report
from .command import SMALL_MODEL, AblateOptions, parse_args  # noqa: F401 - the command line's
from .command import base_model as _base_model
from .data import AblationData, DataOptions, prepare_data

logger = logging.getLogger("albert_tf.ablate")

ABLATION_FILE = "ablation.json"
EVAL_BATCH_SIZE = 64
HELDOUT_DUPE_FACTOR = 2  # held-out documents, twice (other chunks and masks)
RESULT_FILE = "result.json"
PRETRAIN_SUMMARY = "pretrain_summary.json"


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
        # The whole base config as overrides of a size: the size adopts the
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


def _refused(error: Exception) -> int:
    logger.debug("ablate failed", exc_info=True)
    print(f"albert-tf ablate: {error}", file=sys.stderr)
    return 2


def run_command(parsed: tuple[AblateOptions, bool]) -> int:
    """`albert-tf ablate` with its parsed options (`command.parse`): the grid's tables on
    stdout, 0; or 2 with one line on stderr."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    opts, report_only = parsed
    try:
        with atomic.claimed(opts.output):  # one ablation per --output at a time
            report = run_ablation(opts, report_only)
    except (ValueError, FileNotFoundError) as e:  # UsageError, ConfigError: ValueErrors
        return _refused(e)
    sys.stdout.write("\n".join(["", *report["lines"], ""]))
    return 0


def main(argv: list[str]) -> int:
    try:
        parsed = command.parse(argv)
    except (ValueError, FileNotFoundError) as e:
        return _refused(e)
    return run_command(parsed)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
