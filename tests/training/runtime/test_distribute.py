"""Strategies, precision, and the Keras 3 distribution workarounds.

The multi-device scenarios run in subprocesses: logical CPU devices must be
configured before TensorFlow initializes its runtime, and multi-worker training
needs one process per worker. Each scenario trains a small Keras model (the bugs
are in Keras' train loop, not in our model); the real pretrainer is covered in
tests/training/pretrain/test_run.py.
"""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

SCENARIO_TIMEOUT = 240


def _scenario(name: str, *args: str, env: dict | None = None) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, __file__, name, *args],
                            env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", **(env or {})},
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _result(proc: subprocess.Popen) -> dict:
    out, _ = proc.communicate(timeout=SCENARIO_TIMEOUT)
    lines = [l for l in out.splitlines() if l.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, f"scenario failed:\n{out[-4000:]}"
    return json.loads(lines[-1][len("RESULT "):])


# --------------------------------------------------------------- in-process tests
def test_create_strategy_names_and_errors(monkeypatch):
    import tensorflow as tf

    from albert_tf.training.runtime import distribute

    assert distribute.create_strategy("default") is tf.distribute.get_strategy()
    cpu = distribute.create_strategy("cpu")
    assert isinstance(cpu, tf.distribute.OneDeviceStrategy)
    assert cpu.num_replicas_in_sync == 1
    with pytest.raises(distribute.StrategyError, match="strategy='gpus'"):
        distribute.create_strategy("gpus")
    monkeypatch.delenv("TF_CONFIG", raising=False)
    with pytest.raises(distribute.StrategyError, match="TF_CONFIG"):
        distribute.create_strategy("multi_worker")
    monkeypatch.setenv("TF_CONFIG", '{"cluster": {}}')
    with pytest.raises(distribute.StrategyError, match="not a valid cluster spec"):
        distribute.create_strategy("multi_worker")


def test_precision_policy_selection(monkeypatch):
    import keras
    import tensorflow as tf

    from albert_tf.training.runtime import distribute

    default = tf.distribute.get_strategy()
    # No GPU, and a CPU without bf16 instructions (tests/training/runtime/test_precision.py covers those).
    monkeypatch.setattr(distribute, "cpu_bf16_features", frozenset)
    try:
        # "auto" keeps float32.
        assert distribute.set_precision("auto", default) == "float32"
        assert distribute.set_precision("bf16", default) == "mixed_bfloat16"
        assert keras.config.dtype_policy().name == "mixed_bfloat16"
        assert distribute.set_precision("float16", default) == "mixed_float16"
        with pytest.raises(ValueError, match="precision='int8'"):
            distribute.set_precision("int8", default)
    finally:
        keras.config.set_dtype_policy("float32")


def test_scale_batch():
    import tensorflow as tf

    from albert_tf.training.runtime import distribute

    assert distribute.scale_batch(12, tf.distribute.get_strategy()) == 12
    strategy = distribute.create_strategy("cpu")
    assert distribute.scale_batch(6, strategy) == 6


def _uncompilable_model(evaluation_xla):
    """A compiled XLA model (jit_compile=True) with a layer XLA cannot compile (a NumPy
    function): whichever pass runs under XLA fails, and only that one."""
    import keras
    import tensorflow as tf

    from albert_tf.training.runtime.fit_steps import install_step_functions

    class Doubled(keras.layers.Layer):
        def call(self, x):
            doubled = tf.numpy_function(lambda a: 2.0 * a, [x], tf.float32, stateful=False)
            return tf.ensure_shape(doubled, x.shape)

    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((5,)), Doubled(), keras.layers.Dense(1)])
    model.compile("sgd", "mse", jit_compile=True)
    return install_step_functions(model, evaluation_xla=evaluation_xla)


def test_evaluation_runs_without_xla_when_asked_and_training_keeps_it():
    """`evaluation_xla=False`: predict and evaluate run as plain graphs; the training step
    still compiles with XLA, and the model still says jit_compile=True."""
    import tensorflow as tf

    x = np.random.RandomState(0).randn(12, 5).astype("float32")
    y = x.sum(1, keepdims=True)
    model = _uncompilable_model(evaluation_xla=False)
    kernel, bias = model.layers[-1].get_weights()
    np.testing.assert_allclose(model.predict(x, batch_size=5, verbose=0), 2.0 * x @ kernel + bias,
                               rtol=1e-5)
    expected = float(np.mean((2.0 * x @ kernel + bias - y) ** 2))
    assert model.evaluate(x, y, batch_size=4, verbose=0) == pytest.approx(expected, rel=1e-5)
    assert model.jit_compile is True
    with pytest.raises(tf.errors.InvalidArgumentError, match="PyFunc|NumpyFunction|XLA"):
        model.fit(x, y, batch_size=4, epochs=1, verbose=0)


def test_evaluation_follows_the_models_xla_by_default():
    """The default (None) is the model's jit_compile: the same passes fail under XLA."""
    import tensorflow as tf

    x = np.ones((4, 5), "float32")
    model = _uncompilable_model(evaluation_xla=None)
    with pytest.raises(tf.errors.InvalidArgumentError, match="PyFunc|NumpyFunction|XLA"):
        model.predict(x, verbose=0)
    with pytest.raises(tf.errors.InvalidArgumentError, match="PyFunc|NumpyFunction|XLA"):
        model.evaluate(x, x[:, :1], verbose=0)


# ------------------------------------------------------------ subprocess scenarios
@pytest.mark.slow
def test_mirrored_steps_per_execution_matches_single_device():
    """2 logical CPUs, steps_per_execution=2, XLA on and off, clipping active; and
    float16 loss scaling when only one replica overflows."""
    result = _result(_scenario("mirrored"))
    reference = np.array(result["single"]["loss"])
    assert reference[-1] < reference[0]  # it trains
    for variant in ("mirrored", "mirrored_xla", "single_xla"):
        np.testing.assert_allclose(result[variant]["loss"], reference, rtol=2e-5,
                                   err_msg=variant)
        np.testing.assert_allclose(result[variant]["val_loss"], result["single"]["val_loss"],
                                   rtol=2e-5, err_msg=variant)
    # The gradient is clipped (norm > 1) in these runs; clipping each replica's
    # partial gradient, as Keras does, leaves the single-device trajectory.
    assert result["max_grad_norm"] > 1.0
    assert not np.allclose(result["per_replica_clipping"]["loss"], reference, rtol=1e-4)
    # float16: replica 1 overflows, replica 0 does not. Keras' per-replica verdict
    # lets replica 0 apply the all-reduced (non-finite) gradient; ours skips the
    # step on both and halves the loss scale on both.
    assert not result["loss_scaling"]["keras"]["finite"]
    assert result["loss_scaling"]["ours"] == {"finite": True, "unchanged": True,
                                              "scales": [2.0 ** 14, 2.0 ** 14],
                                              "optimizer_module": "albert_tf"}
    # Stock Keras still fails here (keras-team/keras#19246). If this assertion
    # fails, Keras fixed the bug and `install_step_functions` may be retired.
    assert "You must feed a value for placeholder" in result["stock_keras_error"]


@pytest.mark.slow
def test_multi_worker_trains_in_step():
    """Two local workers (TF_CONFIG on localhost) log identical metrics each epoch."""
    from tests.helpers.local_server import free_ports  # (this file also runs as a script)

    ports = free_ports(2)
    workers = [_scenario("multi_worker", str(i), ",".join(map(str, ports)))
               for i in range(2)]
    results = [_result(w) for w in workers]
    assert [r["chief"] for r in results] == [True, False]
    assert results[0]["history"] == results[1]["history"]
    assert results[0]["weights_digest"] == pytest.approx(results[1]["weights_digest"])
    # Same global batch on one device: the same trajectory.
    single = _result(_scenario("single_for_multi_worker"))
    np.testing.assert_allclose(results[0]["history"]["loss"], single["history"]["loss"],
                               rtol=2e-5)
    np.testing.assert_allclose(results[0]["history"]["mae"], single["history"]["mae"],
                               rtol=2e-5)


# ------------------------------------------------------------ scenario bodies
def _toy_model(keras, optimizer, steps_per_execution, jit_compile):
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((5,)), keras.layers.Dense(4, name="dense"),
                              keras.layers.LayerNormalization(name="layer_norm"),
                              keras.layers.Dense(1, name="out")])
    model.compile(optimizer, "mse", metrics=["mae"],
                  steps_per_execution=steps_per_execution, jit_compile=jit_compile)
    return model


def _toy_data(tf, batch, input_context=None):
    rng = np.random.RandomState(0)
    x = rng.randn(64, 5).astype("float32")
    y = (10.0 * x.sum(1, keepdims=True) + 3.0).astype("float32")
    ds = tf.data.Dataset.from_tensor_slices((x, y))
    if input_context is not None:
        ds = ds.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
        batch = input_context.get_per_replica_batch_size(batch)
    return ds.batch(batch)


def _fit(tf, keras, strategy, optimizer_fn, spe, jit, patch=True):
    from albert_tf.training.runtime import fit_steps

    with strategy.scope():
        model = _toy_model(keras, optimizer_fn(), spe, jit)
    if patch:
        fit_steps.install_step_functions(model)
    history = model.fit(_toy_data(tf, 8).repeat(), steps_per_epoch=4, epochs=3, verbose=0,
                        validation_data=_toy_data(tf, 8), validation_steps=4)
    return {k: [float(v) for v in vals] for k, vals in history.history.items()}


def _run_mirrored():
    import tensorflow as tf

    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(
        cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    import keras

    from albert_tf.training.runtime import distribute, optimization

    def lamb():
        return optimization.create_optimizer("lamb", 0.01, train_steps=100, warmup_steps=3)

    class PerReplicaClippingLamb(optimization.Lamb):
        # Keras' own order: clip each replica's gradient, then all-reduce.
        _clip_gradients = keras.optimizers.Optimizer._clip_gradients
        _all_reduce_sum_gradients = keras.optimizers.Optimizer._all_reduce_sum_gradients

    def per_replica_lamb():
        return PerReplicaClippingLamb(optimization.WarmupPolynomialDecay(0.01, 100, 3))

    mirrored = distribute.create_strategy("mirrored")
    assert mirrored.num_replicas_in_sync == 2
    default = tf.distribute.get_strategy()
    result = {
        "single": _fit(tf, keras, default, lamb, 1, False),
        "single_xla": _fit(tf, keras, default, lamb, 2, True),
        "mirrored": _fit(tf, keras, mirrored, lamb, 2, False),
        "mirrored_xla": _fit(tf, keras, mirrored, lamb, 2, True),
        "per_replica_clipping": _fit(tf, keras, mirrored, per_replica_lamb, 2, False),
    }
    model = _toy_model(keras, lamb(), 1, False)
    x, y = next(iter(_toy_data(tf, 8)))
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(keras.losses.mean_squared_error(y, model(x)))
    grads = tape.gradient(loss, [v.value for v in model.trainable_variables])
    result["max_grad_norm"] = float(tf.linalg.global_norm(grads))
    class StockLossScaleOptimizer(keras.optimizers.LossScaleOptimizer):
        """Keras' class under another name, which install_step_functions keeps."""

    result["loss_scaling"] = {
        "keras": _overflow_on_one_replica(tf, keras, mirrored, StockLossScaleOptimizer),
        # compile wraps in Keras' LossScaleOptimizer; install_step_functions swaps it.
        "ours": _overflow_on_one_replica(tf, keras, mirrored, lambda inner: inner)}
    try:
        _fit(tf, keras, mirrored, lamb, 2, False, patch=False)
        result["stock_keras_error"] = ""
    except Exception as e:  # noqa: BLE001 - we record what stock Keras raises
        result["stock_keras_error"] = str(e)
    return result


def _overflow_on_one_replica(tf, keras, strategy, wrapper):
    """float16 step where only replica 1's half of the batch overflows."""
    from albert_tf.training.runtime import fit_steps, optimization

    keras.config.set_dtype_policy("mixed_float16")
    try:
        with strategy.scope():
            keras.utils.set_random_seed(0)
            # No LayerNorm: the large inputs must overflow float16 downstream.
            model = keras.Sequential([keras.Input((5,)), keras.layers.Dense(4),
                                      keras.layers.Dense(1)])
            model.compile(wrapper(optimization.create_optimizer(
                "lamb", 0.01, train_steps=100, warmup_steps=0)), "mse")
        fit_steps.install_step_functions(model)
        before = [v.numpy() for v in model.trainable_variables]
        x = np.ones((4, 5), "float32")
        x[2:] = 3e4
        model.fit(tf.data.Dataset.from_tensor_slices((x, np.zeros((4, 1), "float32")))
                  .batch(4), verbose=0)
        after = [v.numpy() for v in model.trainable_variables]
        scales = [float(s.numpy()) for s in model.optimizer.dynamic_scale.value.values]
        kind = type(model.optimizer).__module__.split(".")[0]
    finally:
        keras.config.set_dtype_policy("float32")
    return {"finite": bool(all(np.isfinite(a).all() for a in after)),
            "unchanged": bool(all(np.array_equal(a, b) for a, b in zip(before, after))),
            "scales": scales, "optimizer_module": kind}


def _multi_worker_fit(tf, keras, strategy):
    from albert_tf.training.runtime import fit_steps, optimization

    with strategy.scope():
        model = _toy_model(keras, optimization.create_optimizer(
            "lamb", 0.01, train_steps=100, warmup_steps=3), 2, True)
    fit_steps.install_step_functions(model)
    data = strategy.distribute_datasets_from_function(
        lambda ctx: _toy_data(tf, 8, ctx).repeat())
    history = model.fit(data, steps_per_epoch=4, epochs=3, verbose=0)
    digest = float(sum(np.abs(v.numpy()).sum() for v in model.trainable_variables))
    return {k: [float(v) for v in vals] for k, vals in history.history.items()}, digest


def _run_multi_worker(index: str, ports: str):
    os.environ["TF_CONFIG"] = json.dumps({
        "cluster": {"worker": [f"localhost:{p}" for p in ports.split(",")]},
        "task": {"type": "worker", "index": int(index)}})
    import keras
    import tensorflow as tf

    from albert_tf.training.runtime import distribute

    strategy = distribute.create_strategy("multi_worker")
    history, digest = _multi_worker_fit(tf, keras, strategy)
    return {"history": history, "weights_digest": digest,
            "chief": distribute.is_chief(strategy)}


def _run_single_for_multi_worker():
    import keras
    import tensorflow as tf

    history, digest = _multi_worker_fit(tf, keras, tf.distribute.get_strategy())
    return {"history": history, "weights_digest": digest}


if __name__ == "__main__":
    scenario, *scenario_args = sys.argv[1:]
    runner = {"mirrored": _run_mirrored, "multi_worker": _run_multi_worker,
              "single_for_multi_worker": _run_single_for_multi_worker}[scenario]
    print("RESULT " + json.dumps(runner(*scenario_args)), flush=True)
