"""results.json, results.md (the paper's ablation tables) and PNG plots of `albert-tf ablate`."""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from albert_tf.infra import atomic

from . import grid as ablate_grid
from .grid import Setting

logger = logging.getLogger(__name__)

RESULTS_JSON, RESULTS_MD = "results.json", "results.md"
PARAMS_PLOT, OBJECTIVE_PLOT, DOWNSTREAM_PLOT = ("mlm_vs_parameters.png", "objective_cross_task.png",
                                                "downstream_vs_parameters.png")
SHARING_LABELS = {"all": "all-shared", "attention": "shared-attention", "ffn": "shared-FFN",
                  "none": "not-shared"}
OBJECTIVE_LABELS = {"none": "None (MLM only)", "nsp": "NSP", "sop": "SOP"}
# (column title, result key, format)
COLUMNS = (("Parameters", "parameters", "params"), ("MLM acc.", "mlm_accuracy", "pct"),
           ("NSP acc.", "nsp_accuracy", "pct"), ("SOP acc.", "sop_accuracy", "pct"),
           ("Downstream acc.", "downstream_accuracy", "pct"),
           ("Examples/s", "examples_per_sec", "rate"))
TITLES = {
    "embedding": "Table 3: the effect of the vocabulary embedding size E",
    "sharing": "Table 4: the effect of cross-layer parameter-sharing strategies",
    "objective": "Table 5: the effect of the sentence-prediction loss (NSP vs SOP), "
                 "each model scored on both tasks",
    "dropout": "The effect of dropout in pretraining",
}


def _cell(value: Any, kind: str) -> str:
    if value is None:
        return "-"
    if kind == "params":
        return f"{value / 1e6:.3g}M"
    if kind == "pct":
        return f"{100 * value:.1f}"
    return f"{value:.1f}"


def _row_label(table: str, setting: Setting) -> str:
    if table == "embedding":
        return f"{SHARING_LABELS[setting.sharing]}, E={setting.embedding_size}"
    if table == "sharing":
        return f"{SHARING_LABELS[setting.sharing]}, E={setting.embedding_size}"
    if table == "objective":
        return OBJECTIVE_LABELS[setting.objective]
    return "with dropout" if setting.dropout else "without dropout"


def table_rows(tables: dict[str, list[Setting]], results: dict[str, dict]) -> dict[str, list[dict]]:
    """Per table, its rows: {"label", "name", and every COLUMNS key (None if not run)}."""
    out = {}
    for table, settings in tables.items():
        rows = []
        for setting in settings:
            result = results.get(setting.name)
            row = {"label": _row_label(table, setting), "name": setting.name,
                   "done": result is not None}
            row.update({key: result.get(key) if result else None for _, key, _ in COLUMNS})
            rows.append(row)
        out[table] = rows
    return out


def markdown(rows: dict[str, list[dict]], header: list[str]) -> str:
    """The tables as Markdown, in the paper's order (3, 4, 5, dropout)."""
    lines = ["# ALBERT ablation results", "", *header, ""]
    for table in ("embedding", "sharing", "objective", "dropout"):
        if table not in rows:
            continue
        lines += [f"## {TITLES[table]}", "",
                  "| Model | " + " | ".join(title for title, _, _ in COLUMNS) + " |",
                  "|---|" + "---:|" * len(COLUMNS)]
        for row in rows[table]:
            cells = [_cell(row[key], kind) for _, key, kind in COLUMNS]
            label = row["label"] if row["done"] else f"{row['label']} (not run yet)"
            lines.append(f"| {label} | " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines)


def _plot_params(path: str, results: dict[str, dict], key: str, ylabel: str, title: str) -> bool:
    """One line per sharing mode: `key` against encoder parameters (SOP, no dropout)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    series: dict[str, list[tuple[int, float, int]]] = {}
    for result in results.values():
        s = result["setting"]
        if s["objective"] != "sop" or s["dropout"] or result.get(key) is None:
            continue
        series.setdefault(s["sharing"], []).append(
            (result["parameters"], result[key], s["embedding_size"]))
    if not series:
        return False
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for sharing in ("all", "attention", "ffn", "none"):
        points = sorted(series.get(sharing, []))
        if not points:
            continue
        xs, ys = [p[0] / 1e6 for p in points], [100 * p[1] for p in points]
        ax.plot(xs, ys, marker="o", label=SHARING_LABELS[sharing])
        for x, y, (_, _, e) in zip(xs, ys, points):
            ax.annotate(f"E={e}", (x, y), textcoords="offset points", xytext=(4, 4), fontsize=7)
    ax.set_xlabel("encoder parameters (M)")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    _save(fig, path)
    return True


def _plot_objectives(path: str, rows: list[dict], majority: dict[str, float]) -> bool:
    """Grouped bars: held-out NSP and SOP accuracy of the models trained with each objective.

    `majority`: per task ("nsp", "sop"), the accuracy of always answering the
    held-out set's more frequent label (NSP sets hold a few more negatives than
    positives: a one-sentence chunk always takes a random next)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    done = [r for r in rows if r["done"]]
    if not done:
        return False
    x = np.arange(len(done))
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for offset, objective in ((-0.2, "nsp"), (0.2, "sop")):
        values = [100 * r[f"{objective}_accuracy"] for r in done]
        bars = ax.bar(x + offset, values, 0.4, label=f"{objective.upper()} task")
        ax.bar_label(bars, fmt="%.1f", fontsize=7)
        if objective in majority:
            ax.axhline(100 * majority[objective], color=bars[0].get_facecolor(), linestyle="--",
                       linewidth=1, label=f"{objective.upper()} majority label")
    ax.set_xticks(x, [f"trained: {r['label']}" for r in done])
    ax.set_ylabel("held-out accuracy (%)")
    ax.set_ylim(0, 100)
    ax.set_title("Sentence-pair tasks, each model scored on both")
    ax.legend()
    fig.tight_layout()
    _save(fig, path)
    return True


def _save(fig, path: str) -> None:
    import matplotlib.pyplot as plt

    with atomic.atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=110, format="png")
    plt.close(fig)


def majority_rates(data) -> dict[str, float]:
    """Per held-out sentence-pair set, the accuracy of always answering its commoner label."""
    rates = {}
    for objective in ("nsp", "sop"):
        summary = (data.summaries if data else {}).get(f"heldout-{objective}")
        if summary and summary.get("negative_fraction") is not None:
            rates[objective] = max(summary["negative_fraction"], 1 - summary["negative_fraction"])
    return rates


def write_report(output: str, grid: str, settings: Sequence[Setting], results: dict[str, dict],
                 data, base: Setting, embedding_sizes: Sequence[int]) -> dict:
    """Writes results.json, results.md and the plots; returns paths and printable lines."""
    tables = ablate_grid.table_settings(base, tuple(embedding_sizes))
    if grid != "paper":
        tables = {grid: tables[grid]}
    rows = table_rows(tables, results)
    budget = next(iter(results.values()))["budget"] if results else {}
    done = [s.name for s in settings if s.name in results]
    header = [f"{len(done)} of {len(settings)} configurations finished; each pretrained "
              f"{budget.get('steps')} steps (batch {budget.get('batch_size')}, sequence "
              f"{budget.get('seq_length')}) on the same data with seed {budget.get('seed')}.",
              "Accuracies are on held-out documents; parameters count the encoder (with pooler).",
              "Downstream: classification of held-out sentences by their source, every model "
              f"fine-tuned {budget.get('finetune_steps')} steps the same way.",
              "Majority-label accuracy of the held-out sentence-pair sets: " + ", ".join(
                  f"{t.upper()} {100 * r:.1f}" for t, r in majority_rates(data).items()) + "."]
    paths = {"results_json": os.path.join(output, RESULTS_JSON),
             "results_md": os.path.join(output, RESULTS_MD)}
    plots = {PARAMS_PLOT: lambda p: _plot_params(p, results, "mlm_accuracy", "held-out MLM accuracy (%)",
                                                 "MLM accuracy against parameters per sharing mode"),
             DOWNSTREAM_PLOT: lambda p: _plot_params(p, results, "downstream_accuracy",
                                                     "downstream accuracy (%)",
                                                     "Downstream accuracy against parameters"),
             OBJECTIVE_PLOT: lambda p: "objective" in rows and _plot_objectives(
                 p, rows["objective"], majority_rates(data))}
    for name, draw in plots.items():
        path = os.path.join(output, name)
        if draw(path):
            paths[name] = path
    with atomic.atomic_write(paths["results_md"]) as f:
        f.write(markdown(rows, header) + "\n")
    document = {"grid": grid, "finished": done,
                "pending": [s.name for s in settings if s.name not in results],
                "tables": rows, "results": results, "data": data.summaries if data else None}
    atomic.atomic_write_json(paths["results_json"], document)
    lines = [markdown(rows, header[:1]), "Written:"] + [f"  {p}" for p in paths.values()]
    return {"paths": paths, "lines": lines, "finished": done}
