"""Held-out pretraining evaluation (training/pretrain/evaluation.py) against Keras' own metrics."""

import pytest

from tests.helpers.pretraining_records import write_pretraining_records


@pytest.fixture(scope="module")
def heldout_records(tmp_path_factory, corpus_documents, spm_model_path):
    return write_pretraining_records(tmp_path_factory.mktemp("heldout_records"),
                                     corpus_documents[:8], spm_model_path, 32, 5)


@pytest.fixture(scope="module")
def pretrainer(spm_model_path):
    import keras

    from albert_tf import AlbertConfig, AlbertPretrainer
    from albert_tf.tokenizer.spm import AlbertTokenizer

    keras.utils.set_random_seed(7)
    config = AlbertConfig(vocab_size=AlbertTokenizer(spm_model_path).vocab_size,
                          embedding_size=8, hidden_size=12, num_hidden_layers=2,
                          num_attention_heads=3, intermediate_size=20,
                          max_position_embeddings=32)
    model = AlbertPretrainer(config)
    model.compile(optimizer="adam")
    return model


def test_matches_keras_metrics(pretrainer, heldout_records):
    """The figures equal Keras' own metric classes fed the model's outputs batch by batch.

    (Not `model.evaluate`: its first step updates the loss trackers once more, symbolically,
    which biases its SOP means by one batch.)
    """
    import keras

    from albert_tf.training.pretrain.evaluation import evaluate_pretraining
    from albert_tf.training.pretrain.pipeline import pretraining_dataset

    result = evaluate_pretraining(pretrainer, heldout_records, batch_size=4)
    mlm_acc = keras.metrics.SparseCategoricalAccuracy()
    sop_acc = keras.metrics.SparseCategoricalAccuracy()
    mlm_ce = keras.metrics.Mean()
    sop_ce = keras.metrics.Mean()
    batches = 0
    for inputs, labels in pretraining_dataset(heldout_records, 4, 32, 5, is_training=False):
        out = pretrainer(inputs, training=False)
        weights = labels["masked_lm_weights"]
        mlm_acc.update_state(labels["masked_lm_ids"], out["mlm_logits"], sample_weight=weights)
        mlm_ce.update_state(keras.losses.sparse_categorical_crossentropy(
            labels["masked_lm_ids"], out["mlm_logits"], from_logits=True), sample_weight=weights)
        sop_acc.update_state(labels["sentence_order_label"], out["sop_logits"])
        sop_ce.update_state(keras.losses.sparse_categorical_crossentropy(
            labels["sentence_order_label"], out["sop_logits"], from_logits=True))
        batches += 1
    assert batches > 10 and result["examples"] == 4 * batches
    assert result["mlm_accuracy"] == pytest.approx(float(mlm_acc.result()), abs=1e-6)
    assert result["sop_accuracy"] == pytest.approx(float(sop_acc.result()), abs=1e-6)
    assert result["mlm_loss"] == pytest.approx(float(mlm_ce.result()), rel=1e-5)
    assert result["sop_loss"] == pytest.approx(float(sop_ce.result()), rel=1e-5)


def test_reads_a_checkpoint_and_refuses_tiny_data(pretrainer, heldout_records, tmp_path):
    from albert_tf import save_checkpoint
    from albert_tf.training.pretrain.evaluation import evaluate_pretraining

    path = save_checkpoint(pretrainer, str(tmp_path / "model"))
    from_disk = evaluate_pretraining(path, heldout_records, batch_size=4, max_batches=2)
    in_memory = evaluate_pretraining(pretrainer, heldout_records, batch_size=4, max_batches=2)
    assert from_disk == pytest.approx(in_memory, rel=1e-5)
    with pytest.raises(ValueError, match="fewer records than one batch"):
        evaluate_pretraining(pretrainer, heldout_records, batch_size=100_000)
