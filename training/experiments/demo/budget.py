"""The demo's time budget: how many pretraining steps fit, and the schedule over them.

`--minutes M` (the default, 12) replaces a step count: pretraining measures its own
step time over its first `CALIBRATION_STEPS` steps after compilation
(`pretrain.run.Calibration`, no separate run), and `Budget.choose` turns it into
the number of steps that fits what is left of the budget once the stages after
pretraining are reserved for. The classifier fine-tuned from a random encoder runs
before pretraining, so the pretrained classifier's cost is a measurement, not a
guess; export and answers are estimated (`EXPORT_AND_ANSWERS_S`). `--steps N`
skips all of this: a fixed, exactly reproducible run.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import time

logger = logging.getLogger("albert_tf.demo")

DEFAULT_MINUTES = 12.0
MAX_MINUTES = 7 * 24 * 60.0  # a week: --minutes is a budget the run keeps, not "forever"
# Warmup: 10% of the run, but at least 100 steps and at most a quarter of it. The post-LN
# model at LAMB 0.01 stays on the frequent-piece solution for good when warmup is short:
# over 400 steps, 40 warmup steps ended at held-out MLM accuracy 0.061, 100 at 0.135.
MIN_WARMUP_STEPS = 100
# Steps timed after the first (compiling) one; they train like every other step, on
# the warmup of MIN_WARMUP_STEPS (the chosen warmup when the run is 400-1,000 steps).
CALIBRATION_STEPS = 20
# Evaluation and checkpoint cadence when the step count is chosen by the budget (it is
# not known when `fit` starts); with --steps, EVAL_POINTS evaluations over the run.
BUDGET_EVAL_EVERY = 150
EVAL_POINTS = 8
# The stages after pretraining that are not measured before it. On the 2-core development
# CPU (AVX-512) a clean-clone demo took 4.3 s to export both models and 6.5 s to answer
# from them in a fresh process; twice that is reserved, for slower CPUs. The end of
# pretraining (model/ written, the evaluation traced and the held-out model loaded) takes
# about 6 s plus the forward passes over the held-out records, a third of a training step
# per batch.
EXPORT_AND_ANSWERS_S = 20.0
FINAL_EVALUATION_S = 6.0
FORWARD_FRACTION = 1 / 3  # a forward pass's share of a training step (no backward, no update)
MARGIN = 0.03  # of the budget: noise in the step time, the report, the interpreter start


def warmup_steps(steps: int) -> int:
    """The learning-rate warmup of a demo pretraining run of `steps` steps."""
    return max(1, min(max(steps // 10, MIN_WARMUP_STEPS), steps // 4))


def eval_every(steps: int | None) -> int:
    """Steps between two held-out evaluations (and checkpoints); None: a budget run."""
    return BUDGET_EVAL_EVERY if steps is None else max(1, steps // EVAL_POINTS)


@dataclasses.dataclass
class Budget:
    """The wall time of one demo run, counted from `started` (time.monotonic())."""

    seconds: float
    started: float
    classifier_s: float = 0.0  # the pretrained classifier's cost: the baseline's, measured
    heldout_batches: int = 0   # of the final evaluation over all held-out documents
    decision: dict | None = None
    deadline: float | None = None  # time.monotonic() by which pretraining must end (choose)

    def pretraining_deadline(self) -> float:
        """When pretraining must end so that the stages after it fit (set by `choose`)."""
        if self.deadline is None:
            raise RuntimeError("the budget has not chosen a step count yet")
        return self.deadline

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def reserved_after_pretraining(self, seconds_per_step: float) -> dict[str, float]:
        final = FINAL_EVALUATION_S + self.heldout_batches * seconds_per_step * FORWARD_FRACTION
        return {"classifier": self.classifier_s, "export and answers": EXPORT_AND_ANSWERS_S,
                "final evaluation": final, "margin": MARGIN * self.seconds}

    def choose(self, seconds_per_step: float, step: int, every: int,
               eval_steps: int) -> tuple[int, int]:
        """(train_steps, warmup_steps) that end pretraining in time; logs why.

        Each evaluation of `eval_steps` held-out batches (forward only) and its
        checkpoint (about a second) are spread over the `every` steps between two.
        """
        reserved = self.reserved_after_pretraining(seconds_per_step)
        spent = self.elapsed()
        left = self.seconds - spent - sum(reserved.values())
        per_step = seconds_per_step + (
            eval_steps * seconds_per_step * FORWARD_FRACTION + 1.0) / every
        steps = step + max(1, math.floor(left / per_step))
        self.deadline = self.started + self.seconds - sum(reserved.values())
        self.decision = {"budget_s": self.seconds, "spent_s": spent, "reserved_s": reserved,
                         "pretraining_left_s": left, "seconds_per_step": seconds_per_step,
                         "measured_steps": CALIBRATION_STEPS, "at_step": step,
                         "steps": steps, "warmup_steps": warmup_steps(steps)}
        logger.info("budget: %.3f s/step measured over %d steps; of %.0f s, %.0f s spent and "
                    "%.0f s reserved after pretraining (%s) leave %.0f s -> %d pretraining "
                    "steps, warmup %d", seconds_per_step, CALIBRATION_STEPS, self.seconds,
                    spent, sum(reserved.values()),
                    ", ".join(f"{k} {v:.0f} s" for k, v in reserved.items()), left, steps,
                    warmup_steps(steps))
        if left <= 0:
            logger.warning("budget: nothing left for pretraining past the calibration steps; "
                           "give more --minutes")
        return steps, warmup_steps(steps)
