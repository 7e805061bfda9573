"""The demo's ending: what it prints, OUTPUT/demo_report.json and the training-curve PNG.

Every figure printed is also in the JSON report, under the same name, so tests
and people can check the printout against the file.
"""

from __future__ import annotations

import os
import sys

from albert_tf.infra import atomic
from albert_tf.serving import server_releases

REPORT_FILE = "demo_report.json"
PLOT_FILE = "training_curves.png"


def curves(pretrain: dict) -> dict[str, list]:
    """Per-evaluation points of the pretraining run: steps and train / held-out accuracies.

    Train figures are Keras' running means over each interval; held-out ones are the
    first `eval_steps` batches of the held-out documents after the interval.
    """
    history = pretrain.get("history", {})
    count = len(history.get("mlm_accuracy", []))
    first = pretrain.get("start_step", 0)
    every = pretrain.get("curve_every", 1)
    steps = [min(first + (i + 1) * every, pretrain["steps"]) for i in range(count)]
    return {"steps": steps, **{k: history.get(k, []) for k in (
        "mlm_accuracy", "sop_accuracy", "val_mlm_accuracy", "val_sop_accuracy")}}


def plot(path: str, pretrain: dict, classifier: dict | None, heldout_accuracy: float | None):
    """Writes the PNG: pretraining accuracies against steps, and the classifier's."""
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt

    points = curves(pretrain)
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    ax = axes[0]
    for key, label, style in (("mlm_accuracy", "MLM train", "C0--"),
                              ("val_mlm_accuracy", "MLM held-out", "C0-"),
                              ("sop_accuracy", "SOP train", "C1--"),
                              ("val_sop_accuracy", "SOP held-out", "C1-")):
        if points[key]:
            ax.plot(points["steps"], points[key], style, marker="o", markersize=3, label=label)
    held = pretrain.get("heldout", {})
    if held:
        ax.plot([pretrain["steps"]] * 2, [held["mlm_accuracy"], held["sop_accuracy"]], "k*",
                markersize=9, label="all held-out documents")
    ax.set(xlabel="pretraining step", ylabel="accuracy", ylim=(0, 1),
           title="Pretraining (masked LM, sentence order)")
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right", fontsize=8)
    ax = axes[1]
    if classifier:
        dev = [h.get("accuracy") for h in classifier["dev_history"]]
        ax.plot(range(1, len(dev) + 1), dev, "C2-", marker="o", label="dev documents")
        if heldout_accuracy is not None:
            ax.axhline(heldout_accuracy, color="C2", linestyle=":",
                       label=f"held-out documents ({heldout_accuracy:.2f})")
        scratch = classifier["scratch"]["heldout"]["accuracy"]
        ax.axhline(scratch, color="C3", linestyle="-.",
                   label=f"random encoder, held-out ({scratch:.2f})")
        base = classifier["baseline"]["best_constant_accuracy"]
        ax.axhline(base, color="gray", linestyle="--", label=f"majority class ({base:.2f})")
        ax.set(xlabel="fine-tuning epoch", ylim=(0, 1), xticks=range(1, len(dev) + 1))
        ax.legend(loc="lower right", fontsize=8)
    ax.set(ylabel="accuracy", title="Classifier: where a sentence was written")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    with atomic.atomic_write(path, "wb") as f:
        fig.savefig(f, format="png", dpi=80)
    plt.close(fig)


def steps_line(budget: dict) -> str:
    """The printout's line on the pretraining step count: fixed, or chosen by the budget
    (and what the stages before pretraining left of it)."""
    if not budget["chosen"]:
        return f"Steps: {budget['steps']} (fixed by --steps or an earlier budget run)"
    left = budget["pretraining_left_s"]
    room = (f"left {left:.0f}s for pretraining" if left > 0 else
            f"left nothing for pretraining past them (the stages before it ran {-left:.0f}s "
            "over; give more --minutes)")
    return (f"Steps: {budget['steps']}, chosen for the {budget['minutes']:g}-minute budget: "
            f"{budget['seconds_per_step']:.3f} s/step measured over {budget['measured_steps']} "
            f"steps {room} (warmup {budget['warmup_steps']} steps)"
            + (f"; planned {budget['planned_steps']}, shortened at step "
               f"{budget['shortened_at']} when the steps got slower"
               if budget["shortened_at"] else ""))


def _lines(report: dict) -> list[str]:
    lines = ["", "Fill-mask (top 5 words per [MASK]; the masked word in brackets):"]
    for item in report["fill_mask"]:
        guesses = ", ".join(f"{t} ({s:.2f})" for t, s in zip(item["tokens"], item["scores"]))
        lines.append(f"  {item['text']}  [{item['answer']}]\n    -> {guesses}")
    questions = report.get("questions")
    if questions:
        lines.append(f"Fill-mask questions: right word in the top 5 for "
                     f"{questions['top5_hits']} of {questions['questions']}")
    if report.get("classify"):
        lines.append("\nClassifier on new sentences (label, probability):")
        for item in report["classify"]:
            lines.append(f"  {item['label']:<10} {item['probability']:.2f}  {item['text']}")
    lines.append("\nSentence similarity (cosine of mean-pooled token embeddings):")
    for item in report["similarity"]:
        lines.append(f"  {item['score']:+.3f}  {item['a']!r} ~ {item['b']!r}")
    pre = report["pretraining"]
    lines += ["", f"Pretraining: {pre['steps']} steps in {pre['train_wall_s']:.0f}s "
              f"({pre['precision']}, XLA {'on' if pre['xla'] else 'off'}); "
              f"held-out documents: MLM accuracy {pre['heldout_mlm_accuracy']:.3f}, "
              f"SOP accuracy {pre['heldout_sop_accuracy']:.3f}; last train interval: "
              f"MLM {pre['train_mlm_accuracy']:.3f}, SOP {pre['train_sop_accuracy']:.3f}"]
    if pre["precision_candidates"]:
        lines.append("Precision: timed on this CPU, " + ", ".join(
            f"{name} {seconds:.3f} s/step" for name, seconds in pre["precision_candidates"].items())
            + "; trained with the fastest")
    lines.append(steps_line(report["budget"]))
    fill = report["fill_mask_accuracy"]
    lines.append(f"Fill-mask on the held-out documents' {fill['masked_tokens']} masked pieces: "
                 f"top-1 {fill['top1']:.3f}, top-5 {fill['top5']:.3f}; unigram baseline "
                 f"(always the most often masked pieces of the training records) top-1 "
                 f"{fill['unigram_top1']:.3f}, top-5 {fill['unigram_top5']:.3f}")
    cls = report.get("classifier")
    if cls:
        lines.append(f"Classifier on held-out documents: accuracy {cls['heldout_accuracy']:.3f} "
                     f"({cls['heldout_examples']} sentences) vs majority class "
                     f"{cls['majority_accuracy']:.3f}; error {cls['error']:.3f} vs "
                     f"{cls['majority_error']:.3f} ({cls['error_ratio']:.2f} of the baseline's)")
        lines.append(f"Pretrained vs random encoder (same fine-tuning, scored in process): "
                     f"{cls['pretrained_accuracy']:.3f} vs {cls['scratch_accuracy']:.3f}, "
                     f"{cls['pretraining_gain_points']:+.1f} points; majority class "
                     f"{cls['majority_accuracy']:.3f}")
    lines.append("Stage wall times: " + ", ".join(
        f"{k} {v:.0f}s" for k, v in report["timings"].items())
        + f"; total {sum(report['timings'].values()):.0f}s")
    lines += ["", f"Training curves: {report['plot']}", f"Report: {report['report']}",
              "", "Where everything is:"]
    lines += [f"  {name:<34} {path}" for name, path in report["artifacts"].items()]
    lines.append(f"  {'view the logs':<34} tensorboard --logdir "
                 f"{report['artifacts']['TensorBoard logs']}")
    return lines


def _serving_lines(saved: dict) -> list[str]:
    encoder = os.path.dirname(os.path.abspath(saved["albert_demo"]))
    lines = ["", "Serve it with TF Serving (REST on 8501, gRPC on 8500):",
             f"  docker run --rm -p 8501:8501 -p 8500:8500 -v {encoder}:/models/albert_demo "
             f"-e MODEL_NAME=albert_demo {server_releases.image(server_releases.NEWEST_RELEASE)}",
             "  echo 'the [MASK] statement is used to define a function.' | albert-tf predict "
             "--server http://localhost:8501 --model albert_demo --signature fill_mask --input -",
             "or without a server:",
             f"  echo 'a list is a mutable [MASK] of items.' | albert-tf predict --saved-model "
             f"{encoder} --signature fill_mask --input -"]
    if "albert_demo_classifier" in saved:
        classifier = os.path.dirname(os.path.abspath(saved["albert_demo_classifier"]))
        lines.append(f"  echo 'the coroutine waits for the future.' | albert-tf predict "
                     f"--saved-model {classifier} --input -")
    return lines


def _budget(pretrain: dict) -> dict:
    """How the step count was set: by the time budget (and what was measured) or fixed."""
    decision = pretrain.get("budget")
    if not decision:
        return {"chosen": False, "steps": pretrain["steps"], "minutes": None}
    calibration = pretrain.get("calibration") or {}
    # The count the run ended with: the choice, or fewer if the run fell behind its deadline.
    return {"chosen": True, "minutes": pretrain["minutes"], **decision,
            "planned_steps": decision["steps"],
            "steps": calibration.get("train_steps", decision["steps"]),
            "warmup_steps": calibration.get("warmup_steps", decision["warmup_steps"]),
            "shortened_at": calibration.get("shortened_at"),
            "schedule_overhead_s": calibration.get("schedule_overhead_s")}


def write(output: str, pretrain: dict, classifier: dict | None, answers: dict,
          timings: dict, artifacts: dict, saved: dict) -> dict:
    """Prints the ending, writes the PNG and demo_report.json; returns the report."""
    out = os.path.abspath(output)
    held = pretrain["heldout"]
    train = pretrain.get("final_train", {})
    report = {
        "pretraining": {"steps": pretrain["steps"], "train_wall_s": pretrain["train_wall_s"],
                        "precision": pretrain.get("precision", "float32"),
                        "xla": pretrain.get("xla", True),
                        "precision_candidates": pretrain.get("precision_candidates", {}),
                        "examples_per_sec": pretrain["examples_per_sec"],
                        "heldout_mlm_accuracy": held["mlm_accuracy"],
                        "heldout_sop_accuracy": held["sop_accuracy"],
                        "heldout_mlm_loss": held["mlm_loss"], "heldout_examples": held["examples"],
                        "train_mlm_accuracy": train.get("mlm_accuracy", float("nan")),
                        "train_sop_accuracy": train.get("sop_accuracy", float("nan")),
                        "curves": curves(pretrain)},
        # .get: a pretraining summary written before these figures existed has none.
        "fill_mask_accuracy": {"top1": held["mlm_accuracy"],
                               "top5": held.get("mlm_top5_accuracy", float("nan")),
                               "unigram_top1": held.get("unigram_top1_accuracy", float("nan")),
                               "unigram_top5": held.get("unigram_top5_accuracy", float("nan")),
                               "masked_tokens": held["masked_tokens"],
                               "baseline": "the k pieces most often masked in the training "
                                           "records (their masked labels)"},
        "budget": _budget(pretrain),
        "fill_mask": answers["fill_mask"], "similarity": answers["similarity"],
        "timings": timings, "artifacts": {k: os.path.abspath(v) for k, v in artifacts.items()},
        "plot": os.path.join(out, PLOT_FILE), "report": os.path.join(out, REPORT_FILE)}
    if "questions" in answers:
        report["questions"] = answers["questions"]
    heldout_accuracy = None
    if classifier:
        measured = answers["classifier_heldout"]
        heldout_accuracy = measured["accuracy"]
        majority = classifier["baseline"]["best_constant_accuracy"]
        report["classify"] = answers["classify"]
        report["classifier"] = {
            "heldout_accuracy": heldout_accuracy, "heldout_examples": measured["examples"],
            "majority_accuracy": majority, "error": 1 - heldout_accuracy,
            "majority_error": 1 - majority,
            "error_ratio": (1 - heldout_accuracy) / max(1 - majority, 1e-9),
            "pretrained_accuracy": classifier["heldout"]["accuracy"],
            "scratch_accuracy": classifier["scratch"]["heldout"]["accuracy"],
            "pretraining_gain_points": 100 * (classifier["heldout"]["accuracy"]
                                              - classifier["scratch"]["heldout"]["accuracy"]),
            "scratch_dev_accuracy": [h.get("accuracy")
                                     for h in classifier["scratch"]["dev_history"]],
            "train_majority": classifier["baseline"],
            "dev_accuracy": [h.get("accuracy") for h in classifier["dev_history"]]}
    plot(report["plot"], pretrain, classifier, heldout_accuracy)
    atomic.atomic_write_json(report["report"], report)
    sys.stdout.write("\n".join(_lines(report) + _serving_lines(saved)) + "\n")
    return report
