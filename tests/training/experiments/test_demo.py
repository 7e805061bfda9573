"""The main job: `albert-tf demo` end to end, its rerun, its report and its bad-input messages.

The slow quality test runs the demo for a fixed number of steps in float32 (deterministic,
so its verdict does not depend on the machine's speed) and checks the report's figures
against thresholds an untrained or broken model, or pretraining that does not pay, fails:
fill-mask against the unigram baseline, the classifier from the pretrained encoder
against the same fine-tuning from a random one. The budget (and `auto` precision) is
tested as a mechanism by a short budget run on a small corpus. The
fill-mask questions (tests/helpers/demo_questions.py, never in the training data) are
scored by the demo's fresh serving process and checked to be the ones asked.
"""

import json
import math
import os
import subprocess

import pytest

from tests.helpers.cli import CLI
from tests.helpers.demo_questions import QUESTIONS
from tests.helpers.fresh_process import SAFETY_NET_S
from tests.helpers.paths import REPO


def run_cli(*args, timeout=SAFETY_NET_S, input_text=None):
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    return subprocess.run([*CLI, *args], env=env,
                          capture_output=True, text=True, timeout=timeout, cwd=REPO,
                          input=input_text)


@pytest.mark.parametrize("args, message", [
    (["--corpus", "/no/such/corpus*.txt"], "matches no files"),
    (["--size", "albert-huge"], "unknown size 'albert-huge'"),
    (["--steps", "0"], "--steps must be at least 1"),
    (["--minutes", "0"], "--minutes=0.0 must be a finite number in (0, 10080] (the time budget"),
    (["--minutes", "nan"], "--minutes=nan must be a finite number in (0, 10080]"),
    (["--minutes", "1e9"], "--minutes=1000000000.0 must be a finite number in (0, 10080]"),
    (["--minutes", "5", "--steps", "100"], "not allowed with argument"),
    (["--questions", "/no/such/questions.json"], "no such file"),
    (["--precision", "int4"], "--precision: precision='int4': expected one of"),
])
def test_bad_input_is_one_clear_line(tmp_path, args, message):
    result = run_cli("demo", "--output", str(tmp_path / "out"), *args)
    assert result.returncode == 2
    lines = [l for l in result.stderr.splitlines() if l.startswith("albert-tf demo:")]
    assert len(lines) == 1 and message in lines[0], result.stderr[-2000:]
    assert "Traceback" not in result.stderr


def test_unwritable_output_is_one_clear_line(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    result = run_cli("demo", "--output", str(blocker / "out"))
    assert result.returncode == 2
    assert "is not writable" in result.stderr and "Traceback" not in result.stderr


def test_questions_are_not_in_the_corpus():
    from albert_tf.training.data import embedded

    text = " ".join(" ".join(d) for d in embedded.embedded_documents()).lower()
    assert len(QUESTIONS) >= 24 and len(set(QUESTIONS)) == len(QUESTIONS)
    for question, answer in QUESTIONS:
        assert question.count("[MASK]") == 1
        filled = question.replace("[MASK]", answer).rstrip(".")
        assert filled not in text, filled
        assert f" {answer} " in text  # a word the corpus uses, so a model can know it


def _questions_file(tmp_path) -> str:
    path = tmp_path / "questions.json"
    path.write_text(json.dumps([{"text": q, "answer": a} for q, a in QUESTIONS]))
    return str(path)


def test_demo_warmup_is_long_enough_for_short_runs():
    from albert_tf.training.experiments.demo.budget import warmup_steps

    assert warmup_steps(1200) == 120  # 10% of a long run
    assert warmup_steps(400) == 100  # not 40: that run never left the frequent pieces
    assert warmup_steps(200) == 50  # at most a quarter of the run
    assert warmup_steps(5000) == 500 and warmup_steps(3) == 1


def test_budget_leaves_time_for_the_stages_after_pretraining():
    from albert_tf.training.experiments.demo import budget as demo_budget

    seconds = 720.0
    budget = demo_budget.Budget(seconds, started=0.0, classifier_s=80.0, heldout_batches=54)
    budget.elapsed = lambda: 150.0  # spent before the choice (set-up stages, calibration)
    steps, warmup = budget.choose(0.5, step=21, every=150, eval_steps=4)
    # Written out: what is left after the reserve, over the step time plus each
    # evaluation's share (4 forward batches at a third of a step, 1 s of checkpoint).
    reserve = (80.0 + demo_budget.EXPORT_AND_ANSWERS_S + demo_budget.FINAL_EVALUATION_S
               + 54 * 0.5 / 3 + demo_budget.MARGIN * seconds)
    per_step = 0.5 + (4 * 0.5 / 3 + 1.0) / 150
    assert steps == 21 + int((seconds - 150.0 - reserve) / per_step)
    assert warmup == demo_budget.warmup_steps(steps) and 600 < steps < 900
    decision = budget.decision
    assert decision["steps"] == steps and decision["seconds_per_step"] == 0.5
    assert decision["pretraining_left_s"] == pytest.approx(seconds - 150.0 - reserve)
    assert sum(decision["reserved_s"].values()) == pytest.approx(reserve)
    # A faster machine gets more steps, and a budget already spent gets the least.
    assert budget.choose(0.25, step=21, every=150, eval_steps=4)[0] > 1.9 * (steps - 21)
    budget.elapsed = lambda: 2 * seconds
    assert budget.choose(0.5, step=21, every=150, eval_steps=4)[0] == 22


def test_the_steps_line_says_when_the_budget_left_nothing_for_pretraining():
    from albert_tf.training.experiments.demo.report import steps_line

    budget = {"chosen": True, "steps": 22, "minutes": 12.0, "seconds_per_step": 0.871,
              "measured_steps": 20, "pretraining_left_s": -55.2, "warmup_steps": 5,
              "planned_steps": 22, "shortened_at": None}
    line = steps_line(budget)
    assert line == ("Steps: 22, chosen for the 12-minute budget: 0.871 s/step measured over 20 "
                    "steps left nothing for pretraining past them (the stages before it ran 55s "
                    "over; give more --minutes) (warmup 5 steps)"), line
    assert "left 300s for pretraining (warmup 5 steps)" in steps_line(
        {**budget, "pretraining_left_s": 300.0})
    assert steps_line({**budget, "chosen": False}) == \
        "Steps: 22 (fixed by --steps or an earlier budget run)"


# The quality run: a fixed step count in float32 is deterministic, so what it learns does
# not depend on how fast the machine is (the budget's own test below checks the mechanism).
# 400 steps: about 90 s of pretraining, evaluations included, on the AVX-512 CPU of
# docs/demo.md, about three times that on an AVX2-only one; the demo's other stages take
# about as long again. The
# timeout is only a safety net for a hang on a slow or shared machine.
QUALITY_STEPS = 400
QUALITY_TIMEOUT = 3 * 3600


@pytest.mark.slow
def test_demo_end_to_end_learns_and_rerun_skips_finished_stages(tmp_path):
    """The demo at a fixed step count: pretraining pays, and the report says so."""
    out = tmp_path / "demo"
    # Two classifier epochs (the default is three): the random encoder stays at the majority
    # answer and the pretrained one is well above it, which is what the test proves.
    options = ["--questions", _questions_file(tmp_path), "--steps", str(QUALITY_STEPS),
               "--precision", "float32", "--classifier-epochs", "2"]
    # The step count, not the clock, decides the verdict; the timeout is a safety net for a
    # hang, generous for a slow or shared CPU (an AVX2-only one took 3x this one's time).
    first = run_cli("demo", "--output", str(out), *options, timeout=QUALITY_TIMEOUT)
    assert first.returncode == 0, first.stderr[-4000:]
    log = first.stderr + first.stdout
    for stage in range(1, 10):
        assert f"[{stage}/9]" in log
    report = json.loads((out / "demo_report.json").read_text())
    pre, cls, fill = report["pretraining"], report["classifier"], report["fill_mask_accuracy"]
    assert pre["steps"] == QUALITY_STEPS and not report["budget"]["chosen"]
    recorded = json.loads((out / "pretrain" / "run_config.json").read_text())
    assert recorded["train_steps"] == QUALITY_STEPS and not recorded.get("calibration")
    # An explicit precision is not timed; float32 trains under XLA, and the printout says so.
    assert (pre["precision"], pre["xla"], pre["precision_candidates"]) == ("float32", True, {})
    assert "(float32, XLA on)" in first.stdout
    # What pretraining must have learned. An untrained (or broken) model guesses the masked
    # piece no better than always answering the most frequent ones (the unigram baseline:
    # top-1 0.085, top-5 0.230) at a held-out MLM loss near log(2,000) = 7.6. At step 375 of
    # the 3,000-step run the held-out MLM accuracy was 0.153 at loss 5.39 (SOP still at
    # chance, 0.52, so it is reported, not asserted); a 400-step run decays its learning rate
    # to 0 by its last step. The thresholds leave room below those figures.
    assert pre["heldout_mlm_loss"] < math.log(2000) - 1.5, pre
    assert fill["top1"] == pre["heldout_mlm_accuracy"] and fill["masked_tokens"] > 10_000
    assert fill["top1"] > fill["unigram_top1"] + 0.03, fill
    assert fill["top5"] > fill["unigram_top5"], fill
    assert 0.0 < pre["heldout_sop_accuracy"] < 1.0, pre
    # The classifier from the pretrained encoder is scored as the random encoder's is, and
    # the served model agrees with the in-process score.
    assert cls["heldout_examples"] > 300 and 0.0 < cls["majority_accuracy"] < 0.5
    assert cls["pretrained_accuracy"] > cls["majority_accuracy"], cls
    assert cls["pretraining_gain_points"] == pytest.approx(
        100 * (cls["pretrained_accuracy"] - cls["scratch_accuracy"]))
    assert abs(cls["heldout_accuracy"] - cls["pretrained_accuracy"]) <= 0.01, cls
    assert cls["error"] == pytest.approx(1.0 - cls["heldout_accuracy"])
    assert set(report["timings"]) == {"corpus", "vocab", "data", "precision",
                                      "baseline classifier", "pretrain", "classifier",
                                      "export", "answers"}
    # The printed figures are the report's.
    assert f"MLM accuracy {pre['heldout_mlm_accuracy']:.3f}" in first.stdout
    assert f"accuracy {cls['heldout_accuracy']:.3f}" in first.stdout
    assert (f"{cls['pretrained_accuracy']:.3f} vs {cls['scratch_accuracy']:.3f}, "
            f"{cls['pretraining_gain_points']:+.1f} points") in first.stdout
    assert f"top-5 {fill['top5']:.3f}; unigram baseline" in first.stdout
    import sentencepiece

    pieces = sentencepiece.SentencePieceProcessor(model_file=str(out / "vocab" / "spiece.model"))
    for _, answer in QUESTIONS:  # one [MASK] can only be answered by a one-piece word
        assert len(pieces.encode(answer)) == 1, answer
    assert report["questions"]["questions"] == len(QUESTIONS)
    assert [r["text"] for r in report["questions"]["rows"]] == [q for q, _ in QUESTIONS]
    # The classifier answered raw sentences with its label names and probabilities.
    from albert_tf.training.data.split import LABELS

    labels = set(LABELS)
    assert report["classify"] and all(r["label"] in labels for r in report["classify"])
    assert all(0.0 < r["probability"] <= 1.0 for r in report["classify"])
    # The curves: a PNG with train and held-out points at increasing steps.
    png = out / "training_curves.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and str(png) in first.stdout
    curves = pre["curves"]
    assert curves["steps"] == sorted(curves["steps"]) and curves["steps"][-1] == pre["steps"]
    assert len(curves["val_mlm_accuracy"]) == len(curves["steps"]) >= 5
    assert curves["val_mlm_accuracy"][-1] > curves["val_mlm_accuracy"][0], curves  # it learned
    # Every artifact is where the report says.
    split = json.loads((out / "corpus" / "split.json").read_text())
    assert split["counts"]["heldout"]["documents"] > 20
    for path in report["artifacts"].values():
        assert os.path.exists(path), path
    saved = out / "export" / "albert_demo" / "1"
    assert (saved / "assets.extra" / "tf_serving_warmup_requests").exists()
    assert (out / "export" / "albert_demo_classifier" / "1" / "saved_model.pb").exists()
    assert list((out / "pretrain" / "tensorboard").rglob("events.out.tfevents.*"))
    assert "docker run" in first.stdout
    # The printed local predict command works as printed.
    command = next(l for l in first.stdout.splitlines() if "--saved-model" in l).strip()
    text, predict = command.split(" | ")
    result = run_cli(*predict.split()[1:], input_text=text.split("'")[1] + "\n")
    assert result.returncode == 0, result.stderr[-2000:]
    assert json.loads(result.stdout.splitlines()[0])["top_k_tokens"]

    second = run_cli("demo", "--output", str(out), *options, timeout=QUALITY_TIMEOUT)
    assert second.returncode == 0, second.stderr[-4000:]
    assert second.stderr.count("done already, skipped") == 8  # 1-6 and both exports
    again = json.loads((out / "demo_report.json").read_text())
    assert again["pretraining"] == report["pretraining"]
    assert again["classifier"]["scratch_accuracy"] == cls["scratch_accuracy"]
    assert f"pretraining ({QUALITY_STEPS} steps, LAMB)" in second.stderr


# The budget run's stages before pretraining take about 30 s here and the reserve after it
# about 30 s, which leaves about 30 s of pretraining: a count chosen from a measurement.
BUDGET_MINUTES = 1.5


@pytest.mark.slow
def test_demo_budget_sets_the_steps_from_the_measured_rate(tmp_path, corpus_documents):
    """A budget run (and `auto` precision) as a mechanism: the candidates timed, the
    fastest trained, the step count chosen from the measured rate and recorded, the
    report and the rerun consistent with it. No figure here depends on the machine's
    speed being any particular value."""
    from albert_tf.training.data.corpus import write_corpus_file
    from albert_tf.training.experiments.demo.budget import warmup_steps
    from albert_tf.training.runtime.distribute import candidate_name, cpu_training_candidates

    text = tmp_path / "corpus.txt"
    write_corpus_file(str(text), iter(corpus_documents[:200]))
    out = tmp_path / "demo"
    # A short budget: the figures checked are the mechanism's, not the machine's.
    options = ["--corpus", str(text), "--minutes", str(BUDGET_MINUTES), "--vocab-size", "800"]
    first = run_cli("demo", "--output", str(out), *options)
    assert first.returncode == 0, first.stderr[-4000:]
    report = json.loads((out / "demo_report.json").read_text())
    pre, budget = report["pretraining"], report["budget"]
    # auto: every candidate this CPU offers timed on the demo's model, the fastest trained.
    offered = [candidate_name(*c) for c in cpu_training_candidates("auto")]
    trained = candidate_name(pre["precision"], pre["xla"])
    if len(offered) > 1:
        assert list(pre["precision_candidates"]) == offered
        assert pre["precision_candidates"][trained] == min(pre["precision_candidates"].values())
        assert "Precision: timed on this CPU" in first.stdout
        assert first.stderr.count("precision trial:") == len(offered)
    else:
        assert pre["precision_candidates"] == {} and trained == offered[0]
    kept = json.loads((out / "precision.json").read_text())
    assert (kept["precision"], kept["xla"]) == (pre["precision"], pre["xla"])
    # The step count: chosen from the measured step time, recorded, and what ran.
    assert budget["chosen"] and budget["minutes"] == BUDGET_MINUTES
    assert budget["seconds_per_step"] > 0 and budget["measured_steps"] == 20
    assert budget["planned_steps"] >= pre["steps"] == budget["steps"] > 20
    assert budget["warmup_steps"] == min(warmup_steps(budget["planned_steps"]), pre["steps"])
    recorded = json.loads((out / "pretrain" / "run_config.json").read_text())
    assert recorded["train_steps"] == pre["steps"] and recorded["calibration"]
    assert recorded["resolved"]["precision_candidates"] == pre["precision_candidates"]
    assert f"{budget['seconds_per_step']:.3f} s/step measured over 20 steps" in first.stdout
    assert f"Steps: {pre['steps']}, chosen for the {BUDGET_MINUTES:g}-minute budget" in first.stdout
    # A rerun keeps both decisions instead of measuring again.
    second = run_cli("demo", "--output", str(out), *options, timeout=QUALITY_TIMEOUT)
    assert second.returncode == 0, second.stderr[-4000:]
    assert f"pretraining ({pre['steps']} steps, the count this budget run chose" in second.stderr
    assert "precision trial" not in second.stderr
    assert json.loads((out / "demo_report.json").read_text())["pretraining"] == pre



def test_the_old_preset_option_is_the_size_and_warns(caplog):
    """--preset, the old spelling of --size (a preset is what from_preset loads), is
    read as --size for one release, with one warning naming the new name."""
    from albert_tf.training.experiments.demo import command

    with caplog.at_level("WARNING", logger="albert_tf"):
        assert command.parse(["--preset", "albert-large"]).size == "albert-large"
    assert [r.getMessage() for r in caplog.records] == [
        "--preset is now --size; the old name goes in a later release"]
    caplog.clear()
    assert command.parse(["--size", "albert-large"]).size == "albert-large"
    assert caplog.records == []
