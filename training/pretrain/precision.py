"""`--precision auto` on a CPU, decided by measurement.

Each recipe the CPU offers (`distribute.cpu_training_candidates`: float32 under XLA, and
mixed_bfloat16 through TensorFlow's oneDNN kernels where the CPU has bf16 instructions)
trains `TRIAL_STEPS` steps of the run's own model on one batch of the run's own data,
after the step that traces and compiles it; the fastest trains the run. Which one wins
depends on the CPU (AMX, AVX-512 BF16 without AMX, AVX2) and on the model's shape, so it
is measured rather than read off the CPU flags. The trial models are thrown away.
"""

from __future__ import annotations

import dataclasses
import gc
import logging
import time
from collections.abc import Callable

import keras

from ..runtime.distribute import candidate_name

logger = logging.getLogger(__name__)

TRIAL_STEPS = 8  # timed steps per candidate, after the one that compiles
# A shorter "auto" run trains in float32 without timing anything: the trials (and XLA's
# compilation) would cost more than the faster recipe could save.
MEASURE_MIN_STEPS = 500


@dataclasses.dataclass(frozen=True)
class PrecisionChoice:
    """The recipe a run trains with, and what each candidate measured.

    `candidates`: {candidate_name: seconds per step} of the recipes timed; empty when
    nothing was (one candidate, a short run, several replicas).
    """

    precision: str
    jit_compile: bool | None
    candidates: dict[str, float]

    @property
    def name(self) -> str:
        return candidate_name(self.precision, self.jit_compile)


def choose(candidates: list[tuple[str, bool | None]],
           build_step: Callable[[str, bool | None], Callable[[], object]],
           steps: int = TRIAL_STEPS) -> PrecisionChoice:
    """Times each candidate (several) or takes the only one; returns the fastest.

    Args:
      candidates: (precision, jit_compile) pairs, `distribute.cpu_training_candidates`.
      build_step: (precision, jit_compile) -> a function that trains the run's model one
        step on the run's data; called with that precision as the global Keras dtype
        policy.
      steps: timed steps per candidate, after the first (tracing, compiling) one.
    """
    if len(candidates) == 1:
        return PrecisionChoice(*candidates[0], {})
    timed: dict[str, float] = {}
    previous = keras.config.dtype_policy()
    try:
        for precision, jit in candidates:
            keras.config.set_dtype_policy(precision)
            step = build_step(precision, jit)
            step()  # traced and compiled: not timed
            start = time.perf_counter()
            for _ in range(steps):
                step()
            name = candidate_name(precision, jit)
            timed[name] = (time.perf_counter() - start) / steps
            logger.info("precision trial: %s %.3f s/step over %d steps", name, timed[name],
                        steps)
            del step
            gc.collect()
    finally:
        keras.config.set_dtype_policy(previous)
    precision, jit = min(candidates, key=lambda c: timed[candidate_name(*c)])
    choice = PrecisionChoice(precision, jit, timed)
    logger.info("precision auto: %s, the fastest of %s", choice.name,
                ", ".join(f"{name} {seconds:.3f} s/step" for name, seconds in timed.items()))
    return choice
