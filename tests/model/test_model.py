import ast
import os
import textwrap

import keras
import numpy as np
import pytest

from albert_tf import (
    AlbertConfig,
    AlbertEncoder,
    AlbertMultipleChoice,
    AlbertPretrainer,
    AlbertSequenceClassifier,
    AlbertSequenceRegressor,
    AlbertSpanExtractor,
    AlbertTokenClassifier,
)
from albert_tf.embedding import AlbertEmbedding
from albert_tf.heads import ClassificationHead, MaskedLMHead
from albert_tf.transformer import AttentionSublayer, FeedForwardSublayer, TransformerBlock
from tests.helpers.jax_backend import run_on_jax
from tests.helpers.model_harness import (
    BATCH,
    CHOICES,
    PREDICTIONS,
    SEQ,
    as_numpy,
    check_serialization,
    count_params,
    encoder_inputs,
    pretrainer_inputs,
    pretrainer_labels,
    tiny_config,
)
from tests.helpers.paths import REPO


# ---------------------------------------------------------------- parameter counts
@pytest.mark.parametrize("preset, expected", [
    ("albert-base", 11_683_584), ("albert-large", 17_683_968),
    ("albert-xlarge", 58_724_864), ("albert-xxlarge", 222_595_584),
    ("bert-base", 109_081_344), ("bert-large", 334_607_360),
])
def test_paper_parameter_counts(preset, expected):
    assert count_params(AlbertEncoder(AlbertConfig.from_size(preset))) == expected


def _distinct(encoder):
    attentions = {id(b.attention) for b in encoder.distinct_blocks()}
    ffns = {id(b.ffn) for b in encoder.distinct_blocks()}
    return len(attentions), len(ffns)


@pytest.mark.parametrize("sharing, groups, inner, expected", [
    ("all", 1, 1, (1, 1)), ("all", 2, 2, (4, 4)), ("all", 5, 1, (5, 5)),
    ("attention", 1, 1, (1, 5)), ("attention", 2, 1, (2, 5)),
    ("ffn", 1, 1, (5, 1)), ("ffn", 2, 2, (10, 4)),
    ("none", 1, 1, (5, 5)), ("none", 1, 2, (10, 10)),
])
def test_distinct_weight_sets_per_sharing_mode(sharing, groups, inner, expected):
    config = tiny_config(sharing=sharing, num_hidden_groups=groups, inner_group_num=inner)
    encoder = AlbertEncoder(config)
    assert _distinct(encoder) == expected
    # Parameter count is exactly embeddings + projection + distinct sublayers + pooler.
    h, i, e = config.hidden_size, config.intermediate_size, config.embedding_size
    attention = 4 * (h * h + h) + 2 * h
    ffn = h * i + i + i * h + h + 2 * h
    embeddings = (config.vocab_size + config.max_position_embeddings + config.type_vocab_size) * e + 2 * e
    total = embeddings + (e * h + h) + expected[0] * attention + expected[1] * ffn + h * h + h
    assert count_params(encoder) == total


def test_depth_schedule_follows_the_original_grouping():
    config = tiny_config(num_hidden_groups=2, inner_group_num=2)  # 5 layers, 2 groups
    encoder = AlbertEncoder(config)
    # group = layer * G // L: layers 0,1,2 -> group 0; layers 3,4 -> group 1.
    for layer, group in enumerate([0, 0, 0, 1, 1]):
        for inner in range(2):
            assert encoder.block(layer, inner) is encoder.block(3 * group, inner)
            assert encoder.block(layer, inner) is not encoder.block(layer, 1 - inner)
    assert encoder.block(0, 0) is not encoder.block(3, 0)


def test_encoder_applies_blocks_in_schedule_order():
    """Recompute the forward pass by hand from the sublayers and compare."""
    config = tiny_config(num_hidden_groups=2, inner_group_num=2)
    encoder = AlbertEncoder(config)
    inputs = encoder_inputs(config)
    out = as_numpy(encoder(inputs))
    x = encoder.embeddings(inputs["input_word_ids"], inputs["input_type_ids"])
    x = encoder.embedding_projection(x)
    bias = (1.0 - inputs["input_mask"][:, None, None, :].astype("float32")) * -10000.0
    for layer in range(config.num_hidden_layers):
        for inner in range(config.inner_group_num):
            block = encoder.block(layer, inner)
            x = block.ffn(block.attention(x, bias))
        np.testing.assert_allclose(out["encoder_outputs"][layer], x, atol=1e-5)
    np.testing.assert_allclose(out["sequence_output"], x, atol=1e-5)
    pooled = np.tanh(np.asarray(x)[:, 0] @ np.asarray(encoder.pooler.kernel) + np.asarray(encoder.pooler.bias))
    np.testing.assert_allclose(out["pooled_output"], pooled, atol=1e-5)


def test_no_projection_when_embedding_equals_hidden():
    encoder = AlbertEncoder(tiny_config(embedding_size=12))
    assert encoder.embedding_projection is None


# ------------------------------------------------------------- shapes and dtypes
def test_encoder_outputs_shapes_and_dtypes():
    config = tiny_config()
    out = AlbertEncoder(config)(encoder_inputs(config))
    assert tuple(out["sequence_output"].shape) == (BATCH, SEQ, 12)
    assert tuple(out["pooled_output"].shape) == (BATCH, 12)
    assert tuple(out["encoder_outputs"].shape) == (config.num_hidden_layers, BATCH, SEQ, 12)
    assert all(keras.backend.standardize_dtype(t.dtype) == "float32" for t in keras.tree.flatten(out))


def test_padding_does_not_change_real_token_outputs():
    config = tiny_config()
    encoder = AlbertEncoder(config)
    inputs = encoder_inputs(config)
    short = {k: v[1:, :4] for k, v in inputs.items()}  # row 1 has 4 real tokens
    full = as_numpy(encoder(inputs))["sequence_output"][1, :4]
    np.testing.assert_allclose(as_numpy(encoder(short))["sequence_output"][0], full, atol=1e-5)


def test_pretrainer_outputs_and_tied_decoder():
    config = tiny_config()
    model = AlbertPretrainer(config)
    out = model(pretrainer_inputs(config))
    assert tuple(out["mlm_logits"].shape) == (BATCH, PREDICTIONS, config.vocab_size)
    assert tuple(out["sop_logits"].shape) == (BATCH, 2)
    # The decoder has no table of its own: V x E appears once among the weights.
    tables = [w for w in model.weights if tuple(w.shape) == (config.vocab_size, config.embedding_size)]
    assert len(tables) == 1


def test_pretrainer_loss_matches_a_numpy_computation():
    config = tiny_config()
    model = AlbertPretrainer(config)
    x, y = pretrainer_inputs(config), pretrainer_labels(config)
    out = as_numpy(model(x))
    loss = float(model.compute_loss(x, y, model(x)))

    def ce(logits, labels):
        logits = logits - logits.max(-1, keepdims=True)
        logp = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
        return -np.take_along_axis(logp, labels[..., None], -1)[..., 0]

    w = y["masked_lm_weights"]
    mlm = (ce(out["mlm_logits"], y["masked_lm_ids"]) * w).sum() / (w.sum() + 1e-5)
    sop = ce(out["sop_logits"], y["sentence_order_label"]).mean()
    assert loss == pytest.approx(mlm + sop, rel=1e-5)


def test_pretrainer_fit_reports_metrics_and_learns():
    config = tiny_config()
    keras.utils.set_random_seed(1)
    model = AlbertPretrainer(config)
    model.compile(optimizer=keras.optimizers.Adam(1e-2))
    x, y = pretrainer_inputs(config), pretrainer_labels(config)
    history = model.fit(x, y, epochs=60, verbose=0).history
    assert {"loss", "mlm_loss", "mlm_accuracy", "sop_loss", "sop_accuracy"} <= set(history)
    assert history["loss"][-1] < 0.2 * history["loss"][0]
    assert history["mlm_accuracy"][-1] == 1.0 and history["sop_accuracy"][-1] == 1.0


def test_dropout_is_off_by_default_and_on_when_configured():
    config = tiny_config()
    encoder = AlbertEncoder(config)
    inputs = encoder_inputs(config)
    a = as_numpy(encoder(inputs, training=True))["sequence_output"]
    b = as_numpy(encoder(inputs, training=False))["sequence_output"]
    np.testing.assert_array_equal(a, b)
    noisy = AlbertEncoder(config.replace(hidden_dropout_prob=0.5))
    a = as_numpy(noisy(inputs, training=True))["sequence_output"]
    b = as_numpy(noisy(inputs, training=False))["sequence_output"]
    assert np.abs(a - b).max() > 1e-3


def test_task_model_outputs():
    config = tiny_config()
    inputs = encoder_inputs(config)
    cases = [
        (AlbertSpanExtractor(config), {"start_logits": (BATCH, SEQ), "end_logits": (BATCH, SEQ)}),
        (AlbertSpanExtractor(config, answerability=True),
         {"start_logits": (BATCH, SEQ), "end_logits": (BATCH, SEQ), "answerable_logits": (BATCH,)}),
    ]
    for model, shapes in cases:
        out = model(inputs)
        assert {k: tuple(v.shape) for k, v in out.items()} == shapes
        assert all(keras.backend.standardize_dtype(v.dtype) == "float32" for v in out.values())
    # Single-output tasks return their array, as KerasHub's tasks do.
    arrays = [
        (AlbertSequenceClassifier(config, num_classes=3), inputs, (BATCH, 3)),
        (AlbertSequenceRegressor(config), inputs, (BATCH,)),
        (AlbertTokenClassifier(config, num_classes=4), inputs, (BATCH, SEQ, 4)),
        (AlbertMultipleChoice(config), encoder_inputs(config, batch=CHOICES, leading=(BATCH,)),
         (BATCH, CHOICES)),
    ]
    for model, x, shape in arrays:
        out = model(x)
        assert not isinstance(out, dict) and tuple(out.shape) == shape, type(model).__name__
        assert keras.backend.standardize_dtype(out.dtype) == "float32"


def test_multiple_choice_scores_each_option_independently():
    config = tiny_config()
    model = AlbertMultipleChoice(config)
    inputs = encoder_inputs(config, batch=CHOICES, leading=(BATCH,))
    logits = as_numpy(model(inputs))
    single = {k: v[1, 2:3] for k, v in inputs.items()}
    pooled = as_numpy(model.encoder(single))["pooled_output"]
    expected = pooled @ np.asarray(model.head.dense.kernel) + np.asarray(model.head.dense.bias)
    np.testing.assert_allclose(logits[1, 2], expected[0, 0], atol=1e-5)


def test_span_extractor_never_picks_padding():
    config = tiny_config()
    out = as_numpy(AlbertSpanExtractor(config)(encoder_inputs(config)))
    assert out["start_logits"][1, -1] < -1000 and out["end_logits"][1, -1] < -1000


def test_task_model_accepts_a_pretrained_encoder():
    config = tiny_config()
    pretrainer = AlbertPretrainer(config)
    classifier = AlbertSequenceClassifier(config, num_classes=2, encoder=pretrainer.encoder)
    assert classifier.encoder is pretrainer.encoder
    with pytest.raises(ValueError, match="config differs"):
        AlbertSequenceClassifier(config.replace(vocab_size=40), 2, encoder=pretrainer.encoder)


# ------------------------------------------------------------- serialization
@pytest.mark.parametrize("sharing", ["all", "attention", "ffn", "none"])
def test_encoder_serialization(sharing, tmp_path):
    config = tiny_config(sharing=sharing, num_hidden_groups=2, inner_group_num=2)
    check_serialization(AlbertEncoder(config), encoder_inputs(config), tmp_path)


def test_model_serialization(tmp_path):
    config = tiny_config(num_hidden_groups=2)
    inputs = encoder_inputs(config)
    check_serialization(AlbertPretrainer(config), pretrainer_inputs(config), tmp_path / "p")
    for i, model in enumerate([AlbertSequenceClassifier(config, 3), AlbertSequenceRegressor(config),
                               AlbertTokenClassifier(config, 4),
                               AlbertSpanExtractor(config, answerability=True)]):
        check_serialization(model, inputs, tmp_path / str(i))
    check_serialization(AlbertMultipleChoice(config),
                        encoder_inputs(config, batch=CHOICES, leading=(BATCH,)), tmp_path / "mc")


def test_layer_config_round_trips():
    layers = [
        AlbertEmbedding(37, 8, 16, 2, 0.02, 0.1),
        AttentionSublayer(12, 3, 0.02, 0.1, 0.2),
        FeedForwardSublayer(12, 20, "gelu_exact", 0.02, 0.1),
        TransformerBlock(AttentionSublayer(12, 3, 0.02, 0.0, 0.0),
                         FeedForwardSublayer(12, 20, "gelu", 0.02, 0.0)),
        MaskedLMHead(37, 8, "gelu", 0.02),
        ClassificationHead(3, 0.1, 0.02),
    ]
    for layer in layers:
        config = layer.get_config()
        assert layer.__class__.from_config(config).get_config() == config


# -------------------------------------------------------------- precision, XLA
@pytest.mark.parametrize("policy", ["mixed_bfloat16", "mixed_float16"])
def test_mixed_precision(policy):
    config = tiny_config()
    keras.utils.set_random_seed(2)
    model = AlbertPretrainer(config, dtype=policy)
    x, y = pretrainer_inputs(config), pretrainer_labels(config)
    out = model(x)
    dtypes = {keras.backend.standardize_dtype(out[name].dtype) for name in ("mlm_logits", "sop_logits")}
    assert dtypes == {"float32"}
    assert all(keras.backend.standardize_dtype(w.dtype) == "float32" for w in model.weights)
    assert keras.backend.standardize_dtype(model.encoder(x)["sequence_output"].dtype) == policy.split("_")[1]
    optimizer = keras.optimizers.Adam(1e-3)
    if policy == "mixed_float16":
        optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
    model.compile(optimizer=optimizer, jit_compile=True)
    history = model.fit(x, y, epochs=3, verbose=0).history
    assert np.all(np.isfinite(history["loss"]))
    # Close to the float32 model with the same weights.
    reference = AlbertPretrainer(config)
    reference.set_weights(model.get_weights())
    diff = np.abs(as_numpy(reference(x))["mlm_logits"] - as_numpy(model(x))["mlm_logits"]).max()
    assert diff < 0.1


def test_train_step_compiles_with_xla():
    config = tiny_config()
    model = AlbertPretrainer(config)
    model.compile(optimizer="adam", jit_compile=True)
    x, y = pretrainer_inputs(config), pretrainer_labels(config)
    model.fit(x, y, epochs=1, verbose=0)
    assert model.jit_compile is True
    # The forward pass lowers to XLA HLO (no host ops, static shapes).
    import tensorflow as tf

    forward = tf.function(lambda a: model(a), jit_compile=True)
    hlo = forward.experimental_get_compiler_ir({k: tf.constant(v) for k, v in x.items()})(
        stage="hlo")
    assert "HloModule" in hlo


# ------------------------------------------------------------- backend-agnostic
def test_albert_tf_has_no_top_level_tensorflow_import():
    offenders = []
    for name in sorted(os.listdir(os.path.join(REPO, "albert_tf"))):
        if not name.endswith(".py") or "tokeniz" in name:
            continue
        tree = ast.parse(open(os.path.join(REPO, "albert_tf", name)).read())
        for node in tree.body:  # module level only: lazy imports inside functions are allowed
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            if any(n.split(".")[0] in ("tensorflow", "tensorflow_text") for n in names):
                offenders.append(name)
    assert offenders == []


def test_model_trains_on_the_jax_backend_without_tensorflow():
    code = textwrap.dedent("""
        import sys
        sys.modules["tensorflow"] = None  # any import of TensorFlow now fails
        import numpy as np
        import keras
        assert keras.backend.backend() == "jax"
        from albert_tf import AlbertConfig, AlbertPretrainer
        cfg = AlbertConfig(vocab_size=37, embedding_size=8, hidden_size=12, num_hidden_layers=5,
                           num_attention_heads=3, intermediate_size=20, num_hidden_groups=2)
        ids = np.arange(14, dtype="int32").reshape(2, 7) % 37
        out = AlbertPretrainer(cfg)({"input_word_ids": ids, "input_mask": np.ones_like(ids),
                                     "input_type_ids": np.zeros_like(ids),
                                     "masked_lm_positions": np.array([[1, 2, 3], [0, 4, 6]], "int32")})
        assert out["mlm_logits"].shape == (2, 3, 37) and np.isfinite(out["mlm_logits"]).all()
        model = AlbertPretrainer(cfg)
        model.compile(optimizer="adam")
        x = {"input_word_ids": ids, "input_mask": np.ones_like(ids), "input_type_ids": np.zeros_like(ids),
             "masked_lm_positions": np.array([[1, 2, 3], [0, 4, 6]], "int32")}
        y = {"masked_lm_ids": np.array([[5, 6, 7], [8, 9, 10]], "int32"),
             "masked_lm_weights": np.ones((2, 3), "float32"),
             "sentence_order_label": np.array([0, 1], "int32")}
        history = model.fit(x, y, epochs=20, verbose=0).history
        assert history["loss"][-1] < history["loss"][0], history["loss"]
        assert 0.0 <= history["mlm_accuracy"][-1] <= 1.0
        print("ok")
    """)
    assert run_on_jax(code).strip().endswith("ok")


@pytest.mark.parametrize("sharing, groups, inner", [
    ("all", 1, 1), ("all", 2, 2), ("attention", 1, 1), ("ffn", 1, 2), ("none", 1, 1)])
def test_pooled_only_computes_the_same_pooled_output(sharing, groups, inner):
    """The last block run for [CLS] alone gives the pooled output of the full call."""
    config = tiny_config(sharing=sharing, num_hidden_groups=groups, inner_group_num=inner)
    encoder = AlbertEncoder(config)
    inputs = encoder_inputs(config)
    full = encoder(inputs)
    pooled = encoder(inputs, pooled_only=True)
    assert set(pooled) == {"pooled_output"}
    np.testing.assert_allclose(pooled["pooled_output"], full["pooled_output"], atol=1e-6)
    # The classifier reads it that way; its logits are the head on the full call's output.
    classifier = AlbertSequenceClassifier(config, 3, encoder=encoder)
    head = classifier.head(full["pooled_output"])
    np.testing.assert_allclose(classifier(inputs), head, atol=1e-6)
