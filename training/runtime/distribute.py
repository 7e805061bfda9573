"""Distribution strategies, precision policies, and the Keras 3 `fit` workarounds.

`create_strategy("tpu:NAME" | "mirrored" | "multi_worker" | "cpu" | "default")` builds
the strategy, `set_precision` picks the Keras dtype policy for it, and
`install_step_functions(model)` replaces the train/test functions Keras 3 builds for
`fit`/`evaluate` with ones that work under every strategy (each workaround names
its upstream issue below):

* keras-team/keras#19246: with `steps_per_execution > 1` under MirroredStrategy,
  Keras' `tf.while_loop` over `tf.experimental.Optional` outputs fails with "You
  must feed a value for placeholder tensor". Our loop carries only a counter and
  a flag; the metrics are read once after it.
* tensorflow/tensorflow#72388, keras-team/keras#20585: under
  MultiWorkerMirroredStrategy Keras reduces the per-replica metric results with
  `strategy.reduce("MEAN", v, axis=0)`, which fails on scalars ("Invalid reduction
  dimension 0 for input with 0 dimensions"), and `_maybe_symbolic_build` reduces a
  whole input batch, which fails to convert a PerReplica. We read the metric
  variables (sync-on-read, "sum" aggregated) in cross-replica context instead, which
  gives the exact global values on every worker, and build from replica 0's batch.
* Keras' `_maybe_symbolic_build` draws a batch from a fresh iterator whenever a
  strategy is set, even when the model is built: that starts a dataset iteration,
  so a `reshuffle_each_iteration` shuffle trains on its second order (the run
  differs from one without a strategy) and a resume's skip is done twice. We draw
  only when something is unbuilt.
* float16 loss scaling under a multi-replica strategy: Keras' LossScaleOptimizer
  decides per replica whether the gradients are finite; `LossScaleOptimizer`
  here all-reduces that verdict (see its docstring).
* `jit_compile` under a multi-replica strategy: Keras compiles a function that
  contains `strategy.run`, which XLA cannot place across devices (and Keras' "auto"
  turns XLA off under tf.distribute). We compile the per-replica forward/backward
  pass; the cross-replica gradient sum and the optimizer update run outside XLA.
"""

from __future__ import annotations

import json
import logging
import os
import types

import keras
import tensorflow as tf

from albert_tf.checkpoint.task_record import TRAINING_PRECISIONS
from albert_tf.errors import UserError
from albert_tf.keras_compat import unscale_loss_for_distribution

logger = logging.getLogger(__name__)

STRATEGIES = ("default", "cpu", "mirrored", "multi_worker", "tpu")
PRECISIONS = ("auto",) + TRAINING_PRECISIONS
_PRECISION_ALIASES = {"fp32": "float32", "float16": "mixed_float16",
                      "fp16": "mixed_float16", "bfloat16": "mixed_bfloat16",
                      "bf16": "mixed_bfloat16"}


class StrategyError(UserError):
    """A strategy that cannot be built from the given name or environment."""


def create_strategy(spec: str = "default") -> tf.distribute.Strategy:
    """Builds a `tf.distribute.Strategy` from a short spec.

    Args:
        spec: "default" (TF's default: one device, the GPU if any), "cpu" (one CPU),
            "mirrored" (all local GPUs, or all local logical CPUs when there is no
            GPU), "multi_worker" (MultiWorkerMirroredStrategy from `TF_CONFIG`),
            "tpu" (the local TPU VM) or "tpu:NAME_OR_ADDRESS" (a Cloud TPU name or
            "grpc://host:port").
    """
    name, _, target = spec.partition(":")
    if name == "default":
        return tf.distribute.get_strategy()
    if name == "cpu":
        return tf.distribute.OneDeviceStrategy("/cpu:0")
    if name == "mirrored":
        gpus = tf.config.list_logical_devices("GPU")
        devices = None if gpus else [d.name for d in tf.config.list_logical_devices("CPU")]
        return tf.distribute.MirroredStrategy(devices)
    if name == "multi_worker":
        _check_tf_config()
        return tf.distribute.MultiWorkerMirroredStrategy()
    if name == "tpu":
        return _tpu_strategy(target or "local")
    raise StrategyError(f"strategy={spec!r}: expected one of {', '.join(STRATEGIES)} "
                        "(tpu may be written tpu:NAME_OR_ADDRESS)")


def _check_tf_config() -> None:
    raw = os.environ.get("TF_CONFIG")
    if not raw:
        raise StrategyError("strategy=multi_worker needs the TF_CONFIG environment variable "
                            '({"cluster": {"worker": [...]}, "task": {...}})')
    try:
        config = json.loads(raw)
        workers = config["cluster"]["worker"]
        task = config["task"]
        task["type"], int(task["index"])
    except (json.JSONDecodeError, KeyError, TypeError, ValueError) as e:
        raise StrategyError(f"TF_CONFIG is not a valid cluster spec: {e}") from None
    if not workers:
        raise StrategyError("TF_CONFIG: cluster.worker is empty")


def _tpu_strategy(target: str) -> tf.distribute.TPUStrategy:
    try:
        resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=target)
        tf.config.experimental_connect_to_cluster(resolver)
        tf.tpu.experimental.initialize_tpu_system(resolver)
    except (ValueError, tf.errors.OpError) as e:
        raise StrategyError(f"strategy=tpu:{target}: cannot reach the TPU: {e}") from None
    return tf.distribute.TPUStrategy(resolver)


def resolve_jit_compile(requested: bool | None) -> bool:
    """`jit_compile` for model.compile: as requested, or (None) XLA on GPUs only.

    TPUs compile with XLA whatever this says. On CPU, None skips XLA's compile time,
    which suits short runs; for long ones pass True: XLA measured 1.5x faster for the
    albert-base LAMB pretraining step on 2 cores (benchmarks/bench_pretrain.py).
    """
    if requested is not None:
        return bool(requested)
    return bool(tf.config.list_logical_devices("GPU"))


def is_chief(strategy: tf.distribute.Strategy) -> bool:
    """True on the worker that writes final artifacts (task 0 unless a chief is named)."""
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
        return True
    if resolver.task_type == "chief":
        return True
    has_chief = "chief" in resolver.cluster_spec().as_dict()
    return not has_chief and resolver.task_type == "worker" and resolver.task_id == 0


def cpu_bf16_features(cpuinfo: str = "/proc/cpuinfo") -> frozenset[str]:
    """The CPU flags that decide bfloat16 speed on this machine (empty off Linux).

    `avx512_bf16` converts and dot-products bf16 in AVX-512 registers; `amx_bf16` /
    `amx_tile` are the matrix tiles that make oneDNN's bf16 matmuls several times
    faster than float32. The one place that reads them.
    """
    wanted = {"avx512f", "avx512_bf16", "avx512_vnni", "amx_tile", "amx_bf16", "amx_int8"}
    try:
        with open(cpuinfo) as f:
            for line in f:
                if line.startswith("flags"):
                    return frozenset(wanted.intersection(line.split(":", 1)[1].split()))
    except OSError:
        pass
    return frozenset()


def _policy_name(precision: str) -> str:
    """A `--precision` value with its alias resolved ("auto" stays "auto")."""
    policy = _PRECISION_ALIASES.get(precision, precision)
    if policy not in PRECISIONS:
        raise UserError(f"precision={precision!r}: expected one of {', '.join(PRECISIONS)}")
    return policy


# The instructions that make oneDNN's bf16 matmuls faster than float32 on a CPU.
_BF16_CPU_FLAGS = frozenset({"avx512_bf16", "amx_bf16"})


def fastest_cpu_training(precision: str = "auto",
                         features: frozenset[str] | None = None) -> tuple[str, bool | None]:
    """(precision, jit_compile) that trains fastest here, for runs that want wall time
    rather than float32 results (the demo).

    "auto" on a CPU with bf16 instructions (`avx512_bf16` or AMX) is mixed_bfloat16,
    else float32. XLA is on for float32 only: its CPU backend does not use the bf16
    instructions, TensorFlow's oneDNN kernels do. On an AVX-512 BF16 CPU without AMX the
    demo's pretraining step measured 1.41x float32 under XLA (0.39 vs 0.55 s,
    benchmarks/bench_demo_recipe.py v2k-bf16 vs seq64-v2k) with the same held-out
    accuracy (README, Main job). With a GPU, "auto"
    and XLA are left to `set_precision` and `resolve_jit_compile`.
    `features`: `cpu_bf16_features()` by default.
    """
    policy = _policy_name(precision)
    if tf.config.list_logical_devices("GPU"):
        return policy, None
    if policy == "auto":
        features = cpu_bf16_features() if features is None else features
        policy = "mixed_bfloat16" if features & _BF16_CPU_FLAGS else "float32"
    return policy, policy == "float32"


def set_precision(precision: str, strategy: tf.distribute.Strategy) -> str:
    """Sets the global Keras dtype policy and returns its name.

    "auto" is mixed_bfloat16 on TPU, mixed_float16 on GPU (the LossScaleOptimizer is
    added by `compile`) and float32 on CPU. bf16 on CPU stays opt-in ("mixed_bfloat16"):
    on an AVX-512 BF16 CPU without AMX its train step measured 1.2-2.2x float32 with
    TensorFlow's (oneDNN) kernels and about 1x under XLA, short of the 2.5x at which
    "auto" would switch (benchmarks/bench_model.py --compare precision prints the ratio
    and `cpu_bf16_features()`; README, Benchmarks).
    Aliases: float16/fp16, bfloat16/bf16, fp32.
    Call it before the model is built.
    """
    policy = _policy_name(precision)
    if policy == "auto":
        if isinstance(strategy, tf.distribute.TPUStrategy):
            policy = "mixed_bfloat16"
        elif tf.config.list_logical_devices("GPU"):
            policy = "mixed_float16"
        else:
            policy = "float32"
    keras.config.set_dtype_policy(policy)
    return policy


def scale_batch(global_batch_size: int, strategy: tf.distribute.Strategy) -> int:
    """The per-replica batch size; the global batch must split evenly across replicas."""
    replicas = strategy.num_replicas_in_sync
    if global_batch_size % replicas:
        raise UserError(f"global batch size {global_batch_size} is not divisible by the "
                         f"{replicas} replicas of {type(strategy).__name__}")
    return global_batch_size // replicas


# ------------------------------------------------------------------ workarounds
def install_step_functions(model: keras.Model) -> keras.Model:
    """Makes `model.fit` / `model.evaluate` work under any strategy with
    `steps_per_execution` and `jit_compile` (see the module docstring).

    Call after `model.compile(...)` and before the optimizer is built; returns the
    model. The replacements are bound to this instance only. A stock
    `keras.optimizers.LossScaleOptimizer` (which `compile` adds for mixed_float16)
    is replaced by this module's `LossScaleOptimizer` around the same optimizer.
    """
    optimizer = model.optimizer
    if type(optimizer) is keras.optimizers.LossScaleOptimizer:
        if optimizer.built:
            raise ValueError("install_step_functions: call it before the optimizer is built")
        model.optimizer = LossScaleOptimizer(
            optimizer.inner_optimizer, initial_scale=optimizer.initial_scale,
            dynamic_growth_steps=optimizer.dynamic_growth_steps, name=optimizer.name)
    model.make_train_function = types.MethodType(_make_train_function, model)
    model.make_test_function = types.MethodType(_make_test_function, model)
    model._maybe_symbolic_build = types.MethodType(_maybe_symbolic_build, model)
    model.train_function = model.test_function = None
    return model


def _make_train_function(self, force=False):
    if self.train_function is None or force:
        self.train_function = _loop_function(self, _train_replica_step(self))
    return self.train_function


def _make_test_function(self, force=False):
    if self.test_function is None or force:
        self.test_function = _loop_function(self, _test_replica_step(self))
    return self.test_function


def _uses_xla(model: keras.Model) -> bool:
    # TPUStrategy compiles the whole replica function itself.
    return bool(model.jit_compile) and not isinstance(
        model.distribute_strategy, tf.distribute.TPUStrategy)


def _train_replica_step(model: keras.Model):
    """The step each replica runs: forward/backward (XLA when enabled), then update."""

    def forward_backward(x, y, sample_weight):
        with tf.GradientTape() as tape:
            y_pred = model(x, training=True) if model._call_has_training_arg else model(x)
            loss = model._compute_loss(x=x, y=y, y_pred=y_pred,
                                       sample_weight=sample_weight, training=True)
            batch = tf.shape(tf.nest.flatten(x)[0])[0]
            model._loss_tracker.update_state(unscale_loss_for_distribution(loss),
                                             sample_weight=batch)
            loss = model.optimizer.scale_loss(loss)
        return y_pred, tape.gradient(loss, model.trainable_variables)

    if _uses_xla(model):
        forward_backward = tf.function(forward_backward, jit_compile=True,
                                       reduce_retracing=True)

    def step(data):
        x, y, sample_weight = keras.utils.unpack_x_y_sample_weight(data)
        y_pred, grads = forward_backward(x, y, sample_weight)
        # Outside XLA: the optimizer all-reduces the gradients across replicas.
        model.optimizer.apply_gradients(zip(grads, model.trainable_variables))
        _update_compiled_metrics(model, x, y, y_pred, sample_weight)

    return step


def _update_compiled_metrics(model, x, y, y_pred, sample_weight):
    # `compute_metrics` without reading the results: they are read once, after the
    # loop, in cross-replica context.
    if model._compile_metrics is not None:
        model._compile_metrics.update_state(y, y_pred, sample_weight=sample_weight)


def _test_replica_step(model: keras.Model):
    test_step = model.test_step
    if _uses_xla(model):
        # No cross-replica synchronization in a test step: compile all of it.
        test_step = tf.function(test_step, jit_compile=True, reduce_retracing=True)

    def step(data):
        test_step(data)

    return step


def _loop_function(model: keras.Model, replica_step):
    """Runs up to `steps_per_execution` replica steps per call, then reads the metrics.

    keras-team/keras#19246: Keras' loop carries `tf.experimental.Optional` outputs
    whose element spec is patched during tracing, which breaks under
    MirroredStrategy; this loop carries only a counter and a "data left" flag.
    """
    strategy = model.distribute_strategy

    @tf.function(reduce_retracing=True)
    def loop(iterator):
        def body(step, _):
            optional = iterator.get_next_as_optional()

            def consume():
                strategy.run(replica_step, args=(optional.get_value(),))
                return tf.constant(True)

            return step + 1, tf.cond(optional.has_value(), consume,
                                     lambda: tf.constant(False))

        _, last_had_data = tf.while_loop(
            lambda step, has_data: tf.logical_and(step < model.steps_per_execution,
                                                  has_data),
            body, (tf.constant(0), tf.constant(True)))
        # tensorflow/tensorflow#72388, keras-team/keras#20585: read the
        # sync-on-read metric variables in cross-replica context (a global, exact
        # reduction on every worker) instead of Keras' failing per-result reduce.
        return model.get_metrics_result(), last_had_data

    def function(iterator):
        logs, had_data = loop(iterator)
        if not bool(had_data):
            raise StopIteration
        return logs

    return function


def _maybe_symbolic_build(self, iterator=None, data_batch=None):
    """Builds what is unbuilt from replica 0's batch, drawing it only if needed.

    Keras draws a batch whenever a strategy is set, then restarts the iterator: the
    draw starts a dataset iteration, which advances a `reshuffle_each_iteration`
    shuffle (training would see the second order) and repeats a resume's skip.
    And it reduces the whole distributed batch with `strategy.reduce("MEAN", ...)`,
    which fails under MultiWorkerMirroredStrategy (same reduction path as
    tensorflow/tensorflow#72388, keras-team/keras#20585); any replica's batch has
    the shapes and dtypes the build needs.
    """
    if self._distribute_strategy is None:
        return
    strategy = self.distribute_strategy
    if iterator is not None and data_batch is None:
        iterator = ((begin, end, _FirstReplica(it, strategy)) for begin, end, it in iterator)
    with strategy.scope():
        # Keras' `_symbolic_build` iterates only when something is unbuilt.
        self._symbolic_build(iterator=iterator, data_batch=data_batch)


class _FirstReplica:
    """An iterator of distributed batches that yields replica 0's part of each."""

    def __init__(self, iterator, strategy):
        self.iterator, self.strategy = iterator, strategy

    def __next__(self):
        return tf.nest.map_structure(
            lambda v: self.strategy.experimental_local_results(v)[0]
            if isinstance(v, tf.distribute.DistributedValues) else v, next(self.iterator))


@keras.saving.register_keras_serializable(package="albert_tf")
class LossScaleOptimizer(keras.optimizers.LossScaleOptimizer):
    """`keras.optimizers.LossScaleOptimizer` whose replicas skip or apply a step together.

    Keras checks each replica's own (not yet all-reduced) gradients for inf/nan
    and branches on that, so when only some replicas overflow, the others apply
    an update that already mixes in the non-finite gradients of the rest (the
    all-reduce runs inside the update) and the weights become NaN. Here the
    verdict is all-reduced first: any non-finite gradient skips the step everywhere.
    """

    def check_finite(self, grads):
        finite = super().check_finite(grads)
        context = tf.distribute.get_replica_context()
        if context is None or context.num_replicas_in_sync == 1:
            return finite
        overflowed = context.all_reduce(tf.distribute.ReduceOp.SUM,
                                        tf.cast(tf.logical_not(finite), tf.float32))
        return tf.equal(overflowed, 0.0)
