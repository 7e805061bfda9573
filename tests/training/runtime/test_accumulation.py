"""Gradient accumulation gives the update of one batch N times larger (the one mechanism:
`fit_steps`, the parts of a batch run in turn inside one step, for the training commands
and a user's own `fit`); the encoder's rematerialization gives the same gradients."""

from __future__ import annotations

import keras
import numpy as np
import pytest

from albert_tf import AlbertSpanExtractor
from albert_tf.errors import UserError
from albert_tf.training.finetune.train import TrainConfig
from albert_tf.training.runtime.optimization import create_optimizer
from tests.helpers.model_harness import encoder_inputs, tiny_config

ROWS = 8


def _data(config):
    x = encoder_inputs(config, batch=ROWS, seq=7, seed=4)
    rng = np.random.default_rng(5)
    y = {"start_logits": rng.integers(0, 4, ROWS), "end_logits": rng.integers(0, 4, ROWS)}
    return x, y


def _model(config, **kwargs):
    keras.utils.set_random_seed(1)  # dropout is 0: the span head has none, the config too
    return AlbertSpanExtractor(config, **kwargs)


def test_an_optimizer_saved_with_the_former_per_update_schedule_loads():
    """`PerUpdate` stays loadable (a `.keras` file compiled with an earlier
    `create_optimizer(..., gradient_accumulation_steps=N)` holds it): batch b of an
    update of 4 batches reads the inner schedule at b // 4."""
    from albert_tf.training.runtime.optimization import PerUpdate, WarmupPolynomialDecay

    inner = WarmupPolynomialDecay(1e-3, train_steps=10, warmup_steps=2)
    saved = keras.saving.serialize_keras_object(PerUpdate(inner, 4))
    loaded = keras.saving.deserialize_keras_object(saved)
    for batch in (0, 3, 4, 9, 13):
        assert float(loaded(batch)) == pytest.approx(float(inner(batch // 4)))


@pytest.mark.parametrize("name", ["sgd", "adamw"])  # Adam's first step hides a gradient's scale
def test_a_step_of_n_parts_in_turn_makes_the_update_of_the_whole_batch(name):
    """`install_step_functions(model, 4)`: one step of fit on a batch of 8 runs 4 parts
    of 2 and updates once, as the same step without accumulation does."""
    import tensorflow as tf

    from albert_tf.training.runtime.fit_steps import install_step_functions

    config = tiny_config()
    x, y = _data(config)
    whole, parts = _model(config), _model(config)
    parts.set_weights(whole.get_weights())
    initial = [w.copy() for w in whole.get_weights()]
    for model, steps in ((whole, 1), (parts, 4)):
        optimizer = (keras.optimizers.SGD(0.5) if name == "sgd" else
                     create_optimizer(name, 1e-3, train_steps=10, warmup_steps=0))
        model.compile(optimizer=optimizer, jit_compile=False)
        install_step_functions(model, steps)
        model.fit(tf.data.Dataset.from_tensors((x, y)), epochs=1, verbose=0)
    assert int(parts.optimizer.iterations) == int(whole.optimizer.iterations) == 1
    changed = 0
    for a, b, before in zip(whole.get_weights(), parts.get_weights(), initial):
        np.testing.assert_allclose(b, a, atol=2e-6, rtol=0)
        changed += not np.allclose(a, before)
    assert changed > 10
    # Each part ran apart: the parts' mean loss is the whole batch's.
    assert float(parts.evaluate(x, y, verbose=0, return_dict=True)["loss"]) == pytest.approx(
        float(whole.evaluate(x, y, verbose=0, return_dict=True)["loss"]), abs=1e-5)


def test_the_pretrainer_accumulates_in_a_step_under_xla():
    """The pretraining model (its loss and metrics inside `compute_loss`), compiled with
    XLA as pretraining on a TPU would be: 4 parts of a batch of 8 give the whole batch's
    update when every example weighs the same (as many masked tokens in each)."""
    import tensorflow as tf

    from albert_tf import AlbertPretrainer
    from albert_tf.training.runtime.fit_steps import install_step_functions

    config = tiny_config()
    rng = np.random.default_rng(3)
    x = encoder_inputs(config, batch=ROWS, seq=9, seed=2)
    x["masked_lm_positions"] = rng.integers(1, 9, (ROWS, 3)).astype("int32")
    y = {"masked_lm_ids": rng.integers(0, config.vocab_size, (ROWS, 3)).astype("int32"),
         "masked_lm_weights": np.ones((ROWS, 3), "float32"),
         "sentence_order_label": rng.integers(0, 2, ROWS).astype("int32")}
    results = []
    for steps in (1, 4):
        keras.utils.set_random_seed(1)
        model = AlbertPretrainer(config)
        model.compile(optimizer=create_optimizer("lamb", 1e-2, train_steps=10, warmup_steps=0),
                      jit_compile=True)
        install_step_functions(model, steps)
        history = model.fit(tf.data.Dataset.from_tensors((x, y)).repeat(2), epochs=1,
                            verbose=0).history
        results.append((model.get_weights(), history, int(model.optimizer.iterations)))
    (whole, whole_log, whole_updates), (parts, parts_log, parts_updates) = results
    assert whole_updates == parts_updates == 2
    for a, b in zip(whole, parts):
        np.testing.assert_allclose(b, a, atol=5e-6, rtol=0)
    for name in ("loss", "mlm_loss", "sop_loss"):
        assert parts_log[name][-1] == pytest.approx(whole_log[name][-1], rel=1e-5), name


def test_the_batch_must_split_evenly():
    import tensorflow as tf

    from albert_tf.training.pretrain.config import load_config
    from albert_tf.training.runtime.fit_steps import check_replica_accumulation

    with pytest.raises(UserError, match="batch_size=6 is not divisible by "
                                        "gradient_accumulation_steps=4"):
        TrainConfig(output_dir="x", batch_size=6, gradient_accumulation_steps=4)
    assert TrainConfig(output_dir="x", batch_size=8, gradient_accumulation_steps=4
                       ).gradient_accumulation_steps == 4
    with pytest.raises(UserError, match="global_batch_size=10 is not divisible by "
                                        "gradient_accumulation_steps=4"):
        load_config(None, ["train_data=x", "output_dir=o", "global_batch_size=10",
                           "gradient_accumulation_steps=4"])
    assert load_config(None, ["train_data=x", "output_dir=o", "global_batch_size=12",
                              "gradient_accumulation_steps=4"]).gradient_accumulation_steps == 4

    class TwoReplicas(tf.distribute.Strategy):
        def __init__(self):  # only the replica count is read
            pass

        num_replicas_in_sync = 2

    with pytest.raises(UserError, match=r"each replica's batch=6 is not divisible by "
                                        r"gradient_accumulation_steps=4 \(2 replicas share "
                                        r"global_batch_size=12\)"):
        check_replica_accumulation(12, 4, TwoReplicas(), "global_batch_size")
    check_replica_accumulation(16, 4, TwoReplicas(), "global_batch_size")


def test_rematerialized_blocks_give_the_same_loss_and_gradients(monkeypatch):
    import tensorflow as tf

    from albert_tf.transformer import TransformerBlock

    # Counts the blocks' forward runs: rematerialization runs each block again for its
    # gradient, so a remat that did nothing would show the plain model's count.
    runs = []
    block_call = TransformerBlock.call

    def counted(self, *args, **kwargs):
        runs.append(self.name)
        return block_call(self, *args, **kwargs)

    monkeypatch.setattr(TransformerBlock, "call", counted)
    config = tiny_config(num_hidden_groups=2, inner_group_num=2)
    x, y = _data(config)
    plain, remat = _model(config), _model(config, remat=True)
    remat.set_weights(plain.get_weights())
    grads, counts = [], []
    for model in (plain, remat):
        runs.clear()
        with tf.GradientTape() as tape:
            out = model(x, training=True)
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
                y["start_logits"], out["start_logits"]))
        forward = len(runs)
        grads.append((float(loss), tape.gradient(loss, model.trainable_variables)))
        counts.append((forward, len(runs) - forward))
    depth = config.num_hidden_layers * config.inner_group_num
    assert counts == [(depth, 0), (depth, depth)], counts
    assert grads[0][0] == pytest.approx(grads[1][0], abs=1e-6)
    for a, b in zip(grads[0][1], grads[1][1]):
        if a is None:  # the pooler: this model does not read it
            assert b is None
            continue
        np.testing.assert_allclose(tf.convert_to_tensor(b).numpy(),
                                   tf.convert_to_tensor(a).numpy(), atol=1e-5, rtol=0)
    assert AlbertSpanExtractor.from_config(remat.get_config()).encoder.remat
    with pytest.raises(ValueError, match="remat=True needs hidden_dropout_prob=0"):
        _model(tiny_config(hidden_dropout_prob=0.1), remat=True)
