"""One override of Keras 3's `fit` / `evaluate` step: `install_step_functions(model, N)`.

Keras 3's TensorFlow trainer does not train albert-tf's models under every strategy, so
one class, `FitOverride`, replaces the parts that fail, on one model instance: its
docstring lists each Keras behaviour it replaces, why, and the Keras versions it was
read against. Nothing else in albert-tf patches Keras' training machinery, and the
override reads Keras' private members only through the names that docstring lists.

Gradient accumulation (`accumulation_steps` N > 1) is part of that step, the one
mechanism both training commands (and a user's own `fit` after
`install_step_functions`) have: each replica splits its batch into N equal parts and
runs the forward/backward pass on them one after another (a `tf.while_loop` with no
parallel iterations, so only one part's activations are alive at a time), averaging
the gradients before the one update, as nanoGPT's loop does:

    grads = 0
    for part in split(batch, N):
        grads += gradient(loss(model(part.x), part.y)) / N
    optimizer.apply(grads)

A step of `fit` stays one update of the whole batch, so step counts, schedules,
checkpoints, resumes and the step-time calibration mean the same with or without it.
The average of the parts' mean losses is the whole batch's mean loss when the parts
weigh the same (as data-parallel replicas average theirs, and the original ALBERT its
TPU cores'); for the masked-LM loss, normalized by each part's count of masked tokens,
it is that per-part mean.
"""

from __future__ import annotations

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


def install_step_functions(model: keras.Model, accumulation_steps: int = 1,
                           evaluation_xla: bool | None = None) -> keras.Model:
    """Makes `model.fit` / `model.evaluate` work under any strategy with
    `steps_per_execution` and `jit_compile`, each update made of `accumulation_steps`
    parts of every replica's batch (`FitOverride`).

    Call after `model.compile(...)` and before the optimizer is built; returns the
    model. The override is bound to this instance only. A stock
    `keras.optimizers.LossScaleOptimizer` (which `compile` adds for mixed_float16)
    is replaced by this module's `LossScaleOptimizer` around the same optimizer.
    `evaluation_xla`: XLA for `evaluate` and `predict` (None: as `model.jit_compile`;
    False: training alone compiles with XLA, 6).
    """
    FitOverride(model, accumulation_steps, evaluation_xla).install()
    return model


class FitOverride:
    """The one override of Keras' `fit` / `evaluate` machinery, for one compiled model.

    Read against Keras 3.10 to 3.15 (`keras_compat.KERAS_REQUIREMENT`), TensorFlow
    backend (`keras/src/backend/tensorflow/trainer.py`, `keras/src/trainers/trainer.py`).
    What it replaces on the instance, and why:

    1. `make_train_function` / `make_test_function` -> `loop_function`. Keras' loop over
       `steps_per_execution` carries `tf.experimental.Optional` outputs whose element
       spec is patched during tracing, which fails under MirroredStrategy ("You must feed
       a value for placeholder tensor", keras-team/keras#19246). Ours carries only a
       counter and a "data left" flag.
    2. The per-replica metric reduction. Under MultiWorkerMirroredStrategy Keras reduces
       the results with `strategy.reduce("MEAN", v, axis=0)`, which fails on scalars
       ("Invalid reduction dimension 0 for input with 0 dimensions",
       tensorflow/tensorflow#72388, keras-team/keras#20585). `loop_function` reads the
       metric variables (sync-on-read, "sum" aggregated) once, in cross-replica context:
       the exact global values on every worker.
    3. `train_step` -> `replica_train_step`: the forward/backward pass of each part, its
       gradients accumulated (the module docstring), then one optimizer update. With
       `jit_compile` under a multi-replica strategy Keras compiles a function that holds
       `strategy.run`, which XLA cannot place across devices (and its "auto" turns XLA
       off under tf.distribute); we compile the per-replica forward/backward pass, and
       the cross-replica gradient sum and the update run outside XLA.
    4. `_maybe_symbolic_build` -> `symbolic_build`. Keras draws a batch from a fresh
       iterator whenever a strategy is set, even when the model is built: the draw starts
       a dataset iteration, so a `reshuffle_each_iteration` shuffle trains on its second
       order and a resume's skip is done twice; and it reduces the whole distributed batch
       (the failing reduction of 2). We build from replica 0's batch, drawn only when
       something is unbuilt.
    5. `keras.optimizers.LossScaleOptimizer` -> this module's `LossScaleOptimizer`
       (float16 loss scaling): Keras decides per replica whether the gradients are
       finite; ours all-reduces that verdict.
    6. `make_predict_function`, only when `evaluation_xla` differs from the model's
       `jit_compile`: Keras' own, built with `jit_compile=evaluation_xla` (through its
       public setter, restored after). XLA compiles a program for every input shape, and
       evaluation meets many (each length bucket, full and last batches) for few passes,
       so its compiles cost more than they save (benchmarks/bench_eval_xla.py).

    Keras' private members it touches, and nothing else: it sets `_maybe_symbolic_build`;
    it reads `_call_has_training_arg`, `_compute_loss`, `_loss_tracker` (the train step's
    loss, as Keras' `train_step`), `_compile_metrics` (the compiled metrics, updated
    without reading their results), `_symbolic_build` and `_distribute_strategy` (Keras'
    own build, and whether a strategy was set).
    """

    # The private members above, by name: a Keras upgrade that renames one fails here.
    PRIVATE_MEMBERS = ("_maybe_symbolic_build", "_call_has_training_arg", "_compute_loss",
                       "_loss_tracker", "_compile_metrics", "_symbolic_build",
                       "_distribute_strategy")

    def __init__(self, model: keras.Model, accumulation_steps: int = 1,
                 evaluation_xla: bool | None = None):
        self.model = model
        self.parts = int(accumulation_steps)
        self.evaluation_xla = evaluation_xla

    def install(self) -> None:
        """Binds the replacements (1, 3, 4, and 6 when evaluation's XLA differs from
        training's) to the model and swaps its loss-scale optimizer (5); Keras rebuilds
        its functions through them on the next fit."""
        model = self.model
        missing = [name for name in self.PRIVATE_MEMBERS if not hasattr(model, name)]
        if missing:
            raise RuntimeError(f"install_step_functions: Keras {keras.__version__} has no "
                               f"{', '.join(missing)} (read against Keras 3.10 to 3.15)")
        optimizer = model.optimizer
        if type(optimizer) is keras.optimizers.LossScaleOptimizer:
            if optimizer.built:
                raise ValueError("install_step_functions: call it before the optimizer is built")
            model.optimizer = LossScaleOptimizer(
                optimizer.inner_optimizer, initial_scale=optimizer.initial_scale,
                dynamic_growth_steps=optimizer.dynamic_growth_steps, name=optimizer.name)
        model.make_train_function = self.make_train_function
        model.make_test_function = self.make_test_function
        model._maybe_symbolic_build = self.symbolic_build
        model.train_function = model.test_function = None
        if self.evaluation_jit() != bool(model.jit_compile):
            model.make_predict_function = self.predict_function_maker(model.make_predict_function)
            model.predict_function = None

    def predict_function_maker(self, keras_make):
        """Keras' `make_predict_function` (`keras_make`), building with or without XLA as
        `evaluation_jit` says (6)."""
        model = self.model

        def make_predict_function(force: bool = False):
            if model.predict_function is None or force:
                trained_with = model.jit_compile
                model.jit_compile = self.evaluation_jit()
                try:
                    keras_make(force)
                finally:
                    model.jit_compile = trained_with
            return model.predict_function

        return make_predict_function

    # ---------------------------------------------------------------- 1, 2: the loop
    def make_train_function(self, force: bool = False):
        model = self.model
        if model.train_function is None or force:
            model.train_function = self.loop_function(self.replica_train_step())
        return model.train_function

    def make_test_function(self, force: bool = False):
        model = self.model
        if model.test_function is None or force:
            model.test_function = self.loop_function(self.replica_test_step())
        return model.test_function

    def loop_function(self, replica_step):
        """Runs up to `steps_per_execution` replica steps per call, then reads the metrics
        in cross-replica context (1, 2)."""
        model = self.model
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
            return model.get_metrics_result(), last_had_data

        def function(iterator):
            logs, had_data = loop(iterator)
            if not bool(had_data):
                raise StopIteration
            return logs

        return function

    # ---------------------------------------------------------------- 3: the step
    def evaluation_jit(self) -> bool:
        """`jit_compile` for evaluate and predict: `evaluation_xla`, or the model's (6)."""
        if self.evaluation_xla is None:
            return bool(self.model.jit_compile)
        return bool(self.evaluation_xla)

    def uses_xla(self, evaluation: bool = False) -> bool:
        # TPUStrategy compiles the whole replica function itself.
        model = self.model
        wanted = self.evaluation_jit() if evaluation else model.jit_compile
        return bool(wanted) and not isinstance(model.distribute_strategy,
                                               tf.distribute.TPUStrategy)

    def replica_train_step(self):
        """The step each replica runs on its batch: N parts' forward/backward passes
        (XLA when enabled), their gradients averaged, one update."""
        model = self.model

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

        if self.uses_xla():
            forward_backward = tf.function(forward_backward, jit_compile=True,
                                           reduce_retracing=True)

        def part_step(x, y, sample_weight):
            y_pred, grads = forward_backward(x, y, sample_weight)
            # The compiled metrics without reading their results: they are read once,
            # after the loop, in cross-replica context (2).
            if model._compile_metrics is not None:
                model._compile_metrics.update_state(y, y_pred, sample_weight=sample_weight)
            return grads

        def step(data):
            x, y, sample_weight = keras.utils.unpack_x_y_sample_weight(data)
            if self.parts == 1:
                grads = part_step(x, y, sample_weight)
            else:
                grads = _accumulated(part_step, (x, y, sample_weight), self.parts)
            # Outside XLA: the optimizer all-reduces the gradients across replicas.
            model.optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))

        return step

    def replica_test_step(self):
        test_step = self.model.test_step
        if self.uses_xla(evaluation=True):
            # No cross-replica synchronization in a test step: compile all of it.
            test_step = tf.function(test_step, jit_compile=True, reduce_retracing=True)

        def step(data):
            test_step(data)

        return step

    # ---------------------------------------------------------------- 4: the build
    def symbolic_build(self, iterator=None, data_batch=None):
        """Keras' `_maybe_symbolic_build`: builds what is unbuilt from replica 0's batch,
        drawing it only if needed (4)."""
        model = self.model
        if model._distribute_strategy is None:
            return
        strategy = model.distribute_strategy
        if iterator is not None and data_batch is None:
            iterator = ((begin, end, _FirstReplica(it, strategy)) for begin, end, it in iterator)
        with strategy.scope():
            # Keras' `_symbolic_build` iterates only when something is unbuilt.
            model._symbolic_build(iterator=iterator, data_batch=data_batch)


def _accumulated(part_step, data, parts: int) -> list:
    """The mean of `part_step`'s gradients over `parts` equal slices of `data`, the
    slices run one after another (the module docstring's loop, as a `tf.while_loop`)."""

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
        return i + 1, [s + tf.convert_to_tensor(grads[k]) for s, k in zip(sums, held, strict=True)]

    _, sums = tf.while_loop(lambda i, _: i < parts, body,
                            (tf.constant(1), [tf.convert_to_tensor(first[k]) for k in held]),
                            parallel_iterations=1)
    grads = [None] * len(first)
    for k, total in zip(held, sums, strict=True):
        grads[k] = total / parts
    return grads


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
