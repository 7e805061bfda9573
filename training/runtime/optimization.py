"""Pretraining optimizers and learning-rate schedule, as ALBERT was trained.

* `Lamb`: the LAMB update of the original ALBERT code (not `keras.optimizers.Lamb`):
  Adam moments without bias correction, weight decay added to the update inside the
  optimizer, and a per-variable trust ratio ||w|| / ||update||; LayerNorm and bias
  variables are excluded from both the decay and the trust ratio.
* `AdamW`: `keras.optimizers.AdamW` with the same exclusions, the alternative.
* `WarmupPolynomialDecay`: linear warmup, then polynomial decay to 0 (the original's
  `create_optimizer` schedule).

Both optimizers clip the *all-reduced* gradient at global norm 1.0, so a run on R
replicas follows the single-device trajectory (see `_CrossReplicaClipping`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

import keras
import tensorflow as tf
from keras import ops

from albert_tf.errors import UserError

# Defaults of the original pretraining (run_pretraining.py / optimization.py):
# lr 0.00176 for a global batch of 4096, 3125 warmup steps, 125k steps, linear decay.
DEFAULT_LEARNING_RATE = 0.00176
DEFAULT_WARMUP_STEPS = 3125
DEFAULT_TRAIN_STEPS = 125_000
DEFAULT_WEIGHT_DECAY = 0.01
DEFAULT_CLIPNORM = 1.0

# The original excludes variables whose TF1 name matches "LayerNorm", "layer_norm" or
# "bias". Keras 3 names a LayerNormalization's variables `gamma` / `beta`, so those
# are matched as a whole last path component too (a Dense bias is `.../bias`, the
# masked-LM head's `.../output_bias`).
DEFAULT_EXCLUDE_PATTERNS = ("LayerNorm", "layer_norm", "bias", r"(^|/)(gamma|beta)$")

OPTIMIZERS = ("lamb", "adamw")


def variable_path(variable) -> str:
    """A model variable's path as matched by the exclusion patterns ("enc/layer_norm/gamma")."""
    path = getattr(variable, "path", None) or variable.name
    return re.sub(r":\d+$", "", path)


def is_excluded(variable, patterns: Sequence[str] = DEFAULT_EXCLUDE_PATTERNS) -> bool:
    """True when `variable` is excluded from weight decay (and, in LAMB, the trust ratio)."""
    path = variable_path(variable)
    return any(re.search(p, path) for p in patterns)


class _CrossReplicaClipping:
    """Clips the gradient after the cross-replica sum instead of per replica.

    Keras clips in `apply` before `_backend_update_step` all-reduces, so under a
    distribution strategy each replica's partial gradient (its share of the loss,
    already divided by the replica count) is clipped on its own and the trajectory
    depends on the number of replicas. Summing first makes global-norm clipping act
    on the same gradient as on one device. (The TF1 original clipped per TPU core
    before CrossShardOptimizer; we prefer the replica-count-independent rule.)
    """

    def apply(self, grads, trainable_variables=None):
        # Dense gradients: an embedding's IndexedSlices repeat a row once per occurrence
        # of its token, and Keras' Adam and the accumulators would take each repeat as
        # a gradient of its own (squaring the parts, not their sum).
        grads = [tf.convert_to_tensor(g) if isinstance(g, tf.IndexedSlices) else g
                 for g in grads]
        return super().apply(grads, trainable_variables)

    def _clip_gradients(self, grads):
        context = tf.distribute.get_replica_context()
        if context is not None and context.num_replicas_in_sync > 1:
            grads = context.all_reduce(tf.distribute.ReduceOp.SUM, list(grads))
        return super()._clip_gradients(grads)

    def _all_reduce_sum_gradients(self, grads_and_vars):
        # Already summed in `_clip_gradients`; summing again would scale by R.
        return list(grads_and_vars)


@keras.saving.register_keras_serializable(package="albert_tf")
class Lamb(_CrossReplicaClipping, keras.optimizers.Optimizer):
    """ALBERT's LAMB (You et al. 2019, as in google-research/albert `lamb_optimizer.py`).

    For each variable w with gradient g (no bias correction):
        m <- b1 m + (1 - b1) g;   v <- b2 v + (1 - b2) g^2
        u  = m / (sqrt(v) + eps) + wd * w          (wd term skipped for excluded w)
        r  = ||w|| / ||u|| if both norms > 0 else 1 (r = 1 for excluded w)
        w <- w - lr * r * u
    Norms are Frobenius norms over the whole variable.

    Args:
        learning_rate: float or `keras.optimizers.schedules.LearningRateSchedule`.
        weight_decay_rate: decay coefficient added to the update (0.01 as the paper).
        beta_1, beta_2, epsilon: Adam moment decay rates and denominator epsilon.
        exclude_patterns: regular expressions searched in each variable's path
            (`variable.path`); a match excludes it from decay and the trust ratio.
        global_clipnorm: clip the (all-reduced) gradient at this global norm.

    Example:
        >>> opt = Lamb(WarmupPolynomialDecay(1e-3, train_steps=1000, warmup_steps=100))
    """

    def __init__(self, learning_rate=DEFAULT_LEARNING_RATE,
                 weight_decay_rate: float = DEFAULT_WEIGHT_DECAY, beta_1: float = 0.9,
                 beta_2: float = 0.999, epsilon: float = 1e-6,
                 exclude_patterns: Sequence[str] = DEFAULT_EXCLUDE_PATTERNS,
                 global_clipnorm: float | None = DEFAULT_CLIPNORM, name: str = "lamb",
                 **kwargs):
        # Keras' own `weight_decay` is decoupled (applied before the update, scaled by
        # lr only); LAMB's decay enters the update and the trust ratio, so it is ours.
        kwargs.pop("weight_decay", None)
        super().__init__(learning_rate=learning_rate, global_clipnorm=global_clipnorm,
                         name=name, **kwargs)
        self.weight_decay_rate = float(weight_decay_rate)
        self.beta_1 = float(beta_1)
        self.beta_2 = float(beta_2)
        self.epsilon = float(epsilon)
        self.exclude_patterns = tuple(exclude_patterns)

    def build(self, var_list):
        """Creates the m and v slots and records which variables are excluded."""
        if self.built:
            return
        super().build(var_list)
        self._m = self.add_optimizer_variables(var_list, "m")
        self._v = self.add_optimizer_variables(var_list, "v")
        # Decided here, from the Keras path: under a distribution strategy
        # `update_step` sees the per-replica tf.Variable, whose name has no path.
        self._excluded = [is_excluded(v, self.exclude_patterns) for v in var_list]

    def update_step(self, gradient, variable, learning_rate):
        index = self._get_variable_index(variable)
        if isinstance(gradient, tf.IndexedSlices):  # norms need the dense gradient
            gradient = tf.convert_to_tensor(gradient)
        lr = ops.cast(learning_rate, variable.dtype)
        gradient = ops.cast(gradient, variable.dtype)
        m, v = self._m[index], self._v[index]
        next_m = self.beta_1 * m + (1.0 - self.beta_1) * gradient
        next_v = self.beta_2 * v + (1.0 - self.beta_2) * ops.square(gradient)
        update = next_m / (ops.sqrt(next_v) + self.epsilon)
        if not self._excluded[index]:
            if self.weight_decay_rate:
                update = update + self.weight_decay_rate * variable
            w_norm = ops.sqrt(ops.sum(ops.square(variable)))
            u_norm = ops.sqrt(ops.sum(ops.square(update)))
            # Guard both norms as the original does: a zero-initialized variable
            # (or a zero update) keeps ratio 1 instead of dividing by zero.
            safe_u = ops.where(u_norm > 0, u_norm, ops.ones_like(u_norm))
            ratio = ops.where(w_norm > 0,
                              ops.where(u_norm > 0, w_norm / safe_u, 1.0), 1.0)
            update = ratio * update
        self.assign(m, next_m)
        self.assign(v, next_v)
        self.assign_sub(variable, lr * update)

    def get_config(self) -> dict:
        config = super().get_config()
        config.pop("weight_decay", None)
        config.update(weight_decay_rate=self.weight_decay_rate, beta_1=self.beta_1,
                      beta_2=self.beta_2, epsilon=self.epsilon,
                      exclude_patterns=list(self.exclude_patterns))
        return config


@keras.saving.register_keras_serializable(package="albert_tf")
class AdamW(_CrossReplicaClipping, keras.optimizers.AdamW):
    """`keras.optimizers.AdamW` with ALBERT's exclusions and defaults.

    Differs from the original `AdamWeightDecayOptimizer` only in that Keras' Adam
    applies bias correction. The excluded variables (LayerNorm, biases) are passed to
    `exclude_from_weight_decay(var_list=...)` when the optimizer is built, matched by
    path because Keras' own name patterns see only the last name component.
    """

    def __init__(self, learning_rate=DEFAULT_LEARNING_RATE,
                 weight_decay: float = DEFAULT_WEIGHT_DECAY, beta_1: float = 0.9,
                 beta_2: float = 0.999, epsilon: float = 1e-6,
                 exclude_patterns: Sequence[str] = DEFAULT_EXCLUDE_PATTERNS,
                 global_clipnorm: float | None = DEFAULT_CLIPNORM, name: str = "adamw",
                 **kwargs):
        super().__init__(learning_rate=learning_rate, weight_decay=weight_decay,
                         beta_1=beta_1, beta_2=beta_2, epsilon=epsilon,
                         global_clipnorm=global_clipnorm, name=name, **kwargs)
        self.exclude_patterns = tuple(exclude_patterns)

    def build(self, var_list):
        if self.built:
            return
        self.exclude_from_weight_decay(
            var_list=[v for v in var_list if is_excluded(v, self.exclude_patterns)])
        super().build(var_list)

    def get_config(self) -> dict:
        config = super().get_config()
        config["exclude_patterns"] = list(self.exclude_patterns)
        return config


@keras.saving.register_keras_serializable(package="albert_tf")
class WarmupPolynomialDecay(keras.optimizers.schedules.LearningRateSchedule):
    """Linear warmup to `learning_rate`, then polynomial decay to `end_learning_rate`.

    As the original `create_optimizer`: the decay is computed from step 0 over
    `train_steps` and the warmup overrides it for steps < `warmup_steps`, so
        lr(s) = learning_rate * s / warmup_steps                          s < warmup
        lr(s) = (lr - end) * (1 - min(s, train_steps) / train_steps)^power + end
    where s is the optimizer's iteration count before the update (0 for the first).

    Example:
        >>> WarmupPolynomialDecay(1e-3, train_steps=100, warmup_steps=10)(5)  # 5e-4
    """

    def __init__(self, learning_rate: float = DEFAULT_LEARNING_RATE,
                 train_steps: int = DEFAULT_TRAIN_STEPS,
                 warmup_steps: int = DEFAULT_WARMUP_STEPS, power: float = 1.0,
                 end_learning_rate: float = 0.0):
        if train_steps < 1:
            raise UserError(f"train_steps={train_steps} must be >= 1")
        if warmup_steps < 0:
            raise UserError(f"warmup_steps={warmup_steps} must be >= 0")
        self.learning_rate = float(learning_rate)
        self.train_steps = int(train_steps)
        self.warmup_steps = int(warmup_steps)
        self.power = float(power)
        self.end_learning_rate = float(end_learning_rate)

    def __call__(self, step):
        step = ops.cast(step, "float32")
        progress = ops.minimum(step, float(self.train_steps)) / float(self.train_steps)
        decayed = ((self.learning_rate - self.end_learning_rate)
                   * ops.power(1.0 - progress, self.power) + self.end_learning_rate)
        if not self.warmup_steps:
            return decayed
        warmup = self.learning_rate * step / float(self.warmup_steps)
        return ops.where(step < float(self.warmup_steps), warmup, decayed)

    def get_config(self) -> dict:
        return dict(learning_rate=self.learning_rate, train_steps=self.train_steps,
                    warmup_steps=self.warmup_steps, power=self.power,
                    end_learning_rate=self.end_learning_rate)


@keras.saving.register_keras_serializable(package="albert_tf")
class PerUpdate(keras.optimizers.schedules.LearningRateSchedule):
    """`schedule` at batch // `steps`: kept only so that a `.keras` file saved with an
    optimizer of an earlier `create_optimizer(..., gradient_accumulation_steps=N)` loads
    (albert-tf no longer builds one: gradient accumulation is `fit_steps`' alone).

    Keras (3.10 to 3.15) evaluates a schedule at every batch of an optimizer-accumulated
    update (its `_iterations`); this one saw the update number.
    """

    def __init__(self, schedule, steps: int):
        self.schedule = schedule
        self.steps = int(steps)

    def __call__(self, step):
        return self.schedule(ops.floor_divide(step, self.steps))

    def get_config(self) -> dict:
        return {"schedule": keras.saving.serialize_keras_object(self.schedule),
                "steps": self.steps}

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["schedule"] = keras.saving.deserialize_keras_object(config["schedule"])
        return cls(**config)


def create_optimizer(name: str = "lamb", learning_rate: float = DEFAULT_LEARNING_RATE,
                     train_steps: int = DEFAULT_TRAIN_STEPS,
                     warmup_steps: int = DEFAULT_WARMUP_STEPS, power: float = 1.0,
                     weight_decay: float = DEFAULT_WEIGHT_DECAY,
                     global_clipnorm: float | None = DEFAULT_CLIPNORM,
                     exclude_patterns: Iterable[str] = DEFAULT_EXCLUDE_PATTERNS,
                     ) -> keras.optimizers.Optimizer:
    """The pretraining optimizer `name` ("lamb" or "adamw") on the warmup + decay schedule.

    Gradient accumulation is not the optimizer's: `fit_steps.install_step_functions(model,
    N)` runs each batch as N parts inside one step (the one mechanism; a step stays one
    update, so `train_steps` and `warmup_steps` count the same with it).
    """
    schedule = WarmupPolynomialDecay(learning_rate, train_steps, warmup_steps, power)
    patterns = tuple(exclude_patterns)
    if name == "lamb":
        return Lamb(schedule, weight_decay_rate=weight_decay, exclude_patterns=patterns,
                    global_clipnorm=global_clipnorm)
    if name == "adamw":
        return AdamW(schedule, weight_decay=weight_decay, exclude_patterns=patterns,
                     global_clipnorm=global_clipnorm)
    raise UserError(f"optimizer={name!r} is not one of {', '.join(OPTIMIZERS)}")
