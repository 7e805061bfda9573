"""The Keras 3 `fit` workarounds: `install_step_functions(model)` replaces the
train/test functions Keras 3 builds for `fit`/`evaluate` with ones that work under
every strategy (each workaround names its upstream issue):


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

And gradient accumulation (`accumulation_steps` N > 1), the one way both training
commands have it: each replica splits its batch into N equal parts and runs the
forward/backward pass on them one after another (a `tf.while_loop` with no parallel
iterations, so only one part's activations are alive at a time), averaging the
gradients before the one update. A step of `fit` stays one update of the whole
batch, so step counts, schedules, checkpoints, resumes and the step-time
calibration mean the same with or without it. The average of the parts' mean losses
is the whole batch's mean loss when the parts weigh the same (as data-parallel
replicas average theirs, and the original ALBERT its TPU cores'); for the masked-LM
loss, normalized by each part's count of masked tokens, it is that per-part mean.
"""

from __future__ import annotations

import types

import keras
import tensorflow as tf

from albert_tf.errors import UserError
from albert_tf.keras_compat import unscale_loss_for_distribution


def check_accumulation(batch_size: int, steps: int, where: str = "",
                       field: str = "batch_size") -> None:
    """Refuses a batch (`field`) that N accumulation steps do not split evenly (the one rule)."""
    if steps > 1 and batch_size % steps:
        raise UserError(f"{field}={batch_size} is not divisible by gradient_accumulation_steps="
                        f"{steps}{where}: each update runs the batch as {steps} equal parts")


def check_replica_accumulation(batch_size: int, steps: int, strategy, field: str) -> None:
    """`check_accumulation` for the share of `batch_size` (`field`) each replica of
    `strategy` runs (the batch itself must split across the replicas first)."""
    replicas = strategy.num_replicas_in_sync
    if replicas == 1:
        check_accumulation(batch_size, steps, field=field)
    else:
        check_accumulation(batch_size // replicas, steps, f" ({replicas} replicas share "
                                                         f"{field}={batch_size})",
                           field="each replica's batch")


def install_step_functions(model: keras.Model, accumulation_steps: int = 1) -> keras.Model:
    """Makes `model.fit` / `model.evaluate` work under any strategy with
    `steps_per_execution` and `jit_compile` (see the module docstring), each update
    made of `accumulation_steps` parts of every replica's batch.

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
    model._accumulation_steps = int(accumulation_steps)
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

    parts = getattr(model, "_accumulation_steps", 1)

    def part_step(x, y, sample_weight):
        y_pred, grads = forward_backward(x, y, sample_weight)
        _update_compiled_metrics(model, x, y, y_pred, sample_weight)
        return grads

    def step(data):
        x, y, sample_weight = keras.utils.unpack_x_y_sample_weight(data)
        if parts == 1:
            grads = part_step(x, y, sample_weight)
        else:
            grads = _accumulated(part_step, (x, y, sample_weight), parts)
        # Outside XLA: the optimizer all-reduces the gradients across replicas.
        model.optimizer.apply_gradients(zip(grads, model.trainable_variables))

    return step


def _accumulated(part_step, data, parts: int) -> list:
    """The mean of `part_step`'s gradients over `parts` equal slices of `data`, the
    slices run one after another (see the module docstring)."""

    # Batches split evenly: the configs check it (`check_accumulation`) and the
    # training pipelines drop a last partial batch.
    part = tf.shape(tf.nest.flatten(data)[0])[0] // parts

    def sliced(i):
        return tf.nest.map_structure(
            lambda t: None if t is None else t[i * part:(i + 1) * part], data)

    # The first part outside the loop: it tells which variables get no gradient.
    first = part_step(*sliced(0))
    held = [i for i, g in enumerate(first) if g is not None]

    def body(i, sums):
        grads = part_step(*sliced(i))
        return i + 1, [s + tf.convert_to_tensor(grads[k]) for s, k in zip(sums, held)]

    _, sums = tf.while_loop(lambda i, _: i < parts, body,
                            (tf.constant(1), [tf.convert_to_tensor(first[k]) for k in held]),
                            parallel_iterations=1)
    grads = [None] * len(first)
    for k, total in zip(held, sums):
        grads[k] = total / parts
    return grads


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
