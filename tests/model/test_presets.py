"""The KerasHub user's flow: from_preset on a checkpoint directory, compile() with no
arguments, fit / evaluate / predict on raw text, a .keras file that carries its
vocabulary and task record, Keras' export of the encoder."""

from __future__ import annotations

import logging
import os
import shutil

import keras
import numpy as np
import pytest
import tensorflow as tf

from albert_tf import (
    AlbertConfig,
    AlbertEncoder,
    AlbertMaskedLM,
    AlbertMultipleChoice,
    AlbertPretrainer,
    AlbertSequenceClassifier,
    AlbertSequenceRegressor,
    AlbertSpanExtractor,
    load_checkpoint,
    save_checkpoint,
)
from albert_tf.tokenizer.spm import AlbertTokenizer
from tests.helpers.model_harness import as_numpy

TEXTS = ["A gripping, funny film.", "Dull and far too long.", "The cast is wonderful!",
         "I left before the end.", "Numbers like 1,234 and accents: café.", ""]
LABELS = np.array([1, 0, 1, 0, 1, 0])


def _config(spm_model_path) -> AlbertConfig:
    return AlbertConfig(vocab_size=AlbertTokenizer(spm_model_path).vocab_size,
                        embedding_size=8, hidden_size=12, num_hidden_layers=2,
                        num_attention_heads=3, intermediate_size=20, max_position_embeddings=40)


@pytest.fixture
def pretrained(tmp_path, spm_model_path) -> str:
    """A pretraining checkpoint of its own (the tests delete it)."""
    keras.utils.set_random_seed(3)
    path = str(tmp_path / "pretrained")
    save_checkpoint(AlbertPretrainer(_config(spm_model_path)), path, spm_model=spm_model_path)
    return path


def test_from_preset_loads_the_encoder_and_warns_of_the_new_head(pretrained, caplog):
    with caplog.at_level(logging.WARNING):
        model = AlbertSequenceClassifier.from_preset(pretrained, num_classes=3)
    source = load_checkpoint(pretrained)
    for ours, theirs in zip(model.encoder.weights, source.encoder.weights):
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy())
    assert f"{pretrained} has no classifier weights; that head keeps its random " \
           "initialisation" in caplog.text
    assert model.preprocessor.seq_length == 40  # min(512, max_position_embeddings)
    assert model.task_record.num_classes == 3 and model.task_record.seq_length == 40


def test_from_preset_of_the_same_task_keeps_its_head_and_labels(pretrained, tmp_path, caplog):
    trained = AlbertSequenceClassifier.from_preset(pretrained, num_classes=2, seq_length=24)
    path = save_checkpoint(trained, str(tmp_path / "classifier"), spm_model=os.path.join(
        pretrained, "spiece.model"), label_names=["neg", "pos"], seq_length=24)
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        again = AlbertSequenceClassifier.from_preset(path)
    assert "random initialisation" not in caplog.text
    for ours, theirs in zip(again.weights, trained.weights):
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy())
    assert again.task_record.label_names == ("neg", "pos") and again.preprocessor.seq_length == 24
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        wider = AlbertSequenceClassifier.from_preset(path, num_classes=4)
    assert "classifier weights of other shapes" in caplog.text
    assert wider.task_record.label_names is None and wider.num_classes == 4


def test_the_pretrainers_masked_lm_head_goes_to_the_masked_lm(pretrained, caplog):
    with caplog.at_level(logging.WARNING):
        model = AlbertMaskedLM.from_preset(pretrained)
    assert "random initialisation" not in caplog.text
    source = load_checkpoint(pretrained)
    for ours, theirs in zip(model.mlm_head.weights, source.mlm_head.weights):
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


def test_from_preset_refuses_what_it_cannot_decide(pretrained):
    with pytest.raises(TypeError, match="holds a pretraining model; give num_classes"):
        AlbertSequenceClassifier.from_preset(pretrained)
    with pytest.raises(TypeError, match=r"unknown argument\(s\) \['num_labels'\]"):
        AlbertSequenceClassifier.from_preset(pretrained, num_labels=2)


def test_a_new_task_model_predicts_arrays_and_fits_without_compile(pretrained):
    keras.utils.set_random_seed(1)
    model = AlbertSequenceClassifier.from_preset(pretrained, num_classes=3, seq_length=16,
                                                 label_names=["neg", "mixed", "pos"])
    logits = model.predict(TEXTS, verbose=0)
    assert isinstance(logits, np.ndarray) and logits.shape == (len(TEXTS), 3)
    predicted = np.argmax(logits, axis=-1)  # one class per text, as KerasHub's
    assert predicted.shape == (len(TEXTS),)
    assert model.predict_labels(TEXTS) == [["neg", "mixed", "pos"][i] for i in predicted]
    # Compiled on construction with the task's defaults: fit works at once.
    assert isinstance(model.optimizer, keras.optimizers.AdamW)
    history = model.fit(TEXTS, [0, 1, 2, 0, 1, 2], batch_size=3, epochs=2, verbose=0)
    assert set(history.history) == {"loss", "accuracy"}
    assert np.all(np.isfinite(history.history["loss"]))
    bare = AlbertSequenceClassifier.from_preset(pretrained, num_classes=3, compile=False)
    assert not bare.compiled
    with pytest.raises(ValueError, match="compile"):
        bare.fit(TEXTS, [0, 1, 2, 0, 1, 2], verbose=0)
    regressor = AlbertSequenceRegressor.from_preset(pretrained, seq_length=16)
    scores = regressor.predict(TEXTS, verbose=0)
    assert isinstance(scores, np.ndarray) and scores.shape == (len(TEXTS),)
    assert set(regressor.fit(TEXTS, np.linspace(0, 1, 6), verbose=0).history) == {"loss", "mae"}


def test_predict_labels_of_a_multi_label_classifier(pretrained):
    model = AlbertSequenceClassifier.from_preset(pretrained, num_classes=3, seq_length=16,
                                                 label_names=["a", "b", "c"])
    model.task_record = model.task_record.replace(problem_type="multi_label")
    logits = model.predict(TEXTS, verbose=0)
    want = [[name for name, logit in zip("abc", row) if logit > 0] for row in logits]
    assert model.predict_labels(TEXTS) == want


def test_fit_and_predict_take_texts_and_pairs(pretrained):
    keras.utils.set_random_seed(0)
    model = AlbertSequenceClassifier.from_preset(pretrained, num_classes=2, seq_length=16)
    model.compile()  # AdamW, the task's loss and accuracy
    assert isinstance(model.optimizer, keras.optimizers.AdamW)
    before = model.evaluate(TEXTS, LABELS, verbose=0, return_dict=True)
    history = model.fit(TEXTS * 4, np.tile(LABELS, 4), batch_size=4, epochs=3, verbose=0)
    assert set(history.history) == {"loss", "accuracy"}
    after = model.evaluate(TEXTS, LABELS, verbose=0, return_dict=True)
    assert after["loss"] < before["loss"]  # it learned from the texts
    pairs = (TEXTS, TEXTS[::-1])
    model.fit(pairs, LABELS, batch_size=3, epochs=1, verbose=0, validation_data=(pairs, LABELS))
    dataset = tf.data.Dataset.from_tensor_slices((TEXTS, LABELS)).batch(4)
    model.fit(dataset, epochs=1, verbose=0)
    for x in (TEXTS, pairs):
        predicted = model.predict(x, verbose=0)
        direct = as_numpy(model(model.preprocessor(x), training=False))
        np.testing.assert_allclose(predicted, direct, atol=1e-6, rtol=0)
    single = model.predict("just one text", verbose=0)
    np.testing.assert_allclose(single, model.predict(["just one text"], verbose=0),
                               atol=1e-6)


def test_token_ids_and_plain_labels_keep_working(pretrained):
    model = AlbertSequenceRegressor.from_preset(pretrained, seq_length=16)
    model.compile()
    features = {k: v.numpy() for k, v in model.preprocessor(TEXTS).items()}
    history = model.fit(features, np.linspace(0, 1, len(TEXTS)), batch_size=2, epochs=1,
                        verbose=0)
    assert set(history.history) == {"loss", "mae"}
    np.testing.assert_allclose(model.predict(features, verbose=0),
                               model.predict(TEXTS, verbose=0), atol=1e-6)


def test_tasks_say_which_text_they_take(pretrained):
    span = AlbertSpanExtractor.from_preset(pretrained, seq_length=16)
    answered = span.predict((["who?"], ["the cast"]), verbose=0)  # strings out, as served
    assert answered["answer"].shape == answered["start_char"].shape == (1,)
    with pytest.raises(TypeError, match=r"takes \(text_a, text_b\) pairs as raw text, not one "
                                        "text per example"):
        span.predict(TEXTS, verbose=0)
    choice = AlbertMultipleChoice.from_preset(pretrained, seq_length=16)
    with pytest.raises(TypeError, match=r"takes \(contexts, choices\) with choices \[B, K\] as "
                                        "raw text, not one text per example"):
        choice.predict(TEXTS, verbose=0)
    for bad, message in (((["a", "b"], [["x", "y"], ["z"]]), "choices must hold as many options "
                          "in every row: row 0 has 2, row 1 has 1"),
                         (("a", [["x", "y"]]), "contexts must be a list of strings, one per row"),
                         ((["a"], [["x", "y"], ["z", "w"]]), "the two text columns differ in "
                          "rows: 1 and 2")):
        with pytest.raises((TypeError, ValueError), match=message):
            choice.predict(bad, verbose=0)
    classifier = AlbertSequenceClassifier.from_preset(pretrained, num_classes=2, seq_length=16)
    with pytest.raises(TypeError, match=r"takes one text per example or \(text_a, text_b\) "
                                        r"pairs as raw text, not \(contexts, choices\)"):
        classifier.predict((TEXTS[:2], [["a", "b"], ["c", "d"]]), verbose=0)
    bare = AlbertSequenceClassifier(_config_of(pretrained), num_classes=2)
    with pytest.raises(ValueError, match="has no preprocessor for raw text"):
        bare.predict(TEXTS, verbose=0)


def test_multiple_choice_takes_contexts_and_their_choices(pretrained):
    """(contexts [B], choices [B, K]): option k of row b is (context b, choice b k) packed
    as RACE fine-tuning packs it (the Python tokenizer's `encode_race` here: each choice
    keeps its last pieces, the context is cut to fill); fit, evaluate and predict take it,
    and tf.data of it."""
    import tensorflow as tf

    from albert_tf.tokenizer.spm import AlbertTokenizer
    from albert_tf.training.finetune.race import RaceExample, encode_race

    model = AlbertMultipleChoice.from_preset(pretrained, seq_length=16)
    contexts = [TEXTS[0] * 3, TEXTS[1], ""]  # the first cut to fit
    long_choice = " ".join(TEXTS[2:])  # keeps its last 13 pieces
    choices = [["red", "green", long_choice], ["one", "two", "three"], ["up", "", "left"]]
    labels = np.array([0, 2, 1])
    tokenizer = AlbertTokenizer(os.path.join(pretrained, "spiece.model"))
    examples = [RaceExample(str(i), "", c, "_", list(o), int(y))  # "_": the choice alone
                for i, (c, o, y) in enumerate(zip(contexts, choices, labels))]
    encoded = encode_race(tokenizer, examples, 16, max_qa_length=13).features
    reference = {name: np.stack([np.pad(rows, ((0, 0), (0, 16 - rows.shape[1])),
                                        constant_values=tokenizer.pad_id if name ==
                                        "input_word_ids" else 0) for rows in values])
                 for name, values in encoded.items()}
    assert len(tokenizer.encode(long_choice)) > 13 and len(tokenizer.encode(contexts[0])) > 13
    direct = as_numpy(model(reference, training=False))
    for x in ((contexts, choices), (np.array(contexts), np.array(choices)),
              (tf.constant(contexts), tf.constant(choices))):
        np.testing.assert_allclose(model.predict(x, verbose=0), direct, atol=1e-6)
    row = model.predict((contexts[1:2], choices[1:2]), verbose=0)
    np.testing.assert_allclose(row, direct[1:2], atol=1e-6)  # each row on its own
    assert not np.allclose(direct[0], direct[1])
    model.compile()
    before = model.evaluate((contexts, choices), labels, verbose=0, return_dict=True)["loss"]
    model.fit((contexts * 4, choices * 4), np.tile(labels, 4), batch_size=4, epochs=3, verbose=0)
    dataset = tf.data.Dataset.from_tensor_slices(((contexts, choices), labels)).batch(2)
    after = model.evaluate(dataset, verbose=0, return_dict=True)["loss"]
    assert after < before


def _config_of(path):
    return AlbertConfig.from_json_file(os.path.join(path, "albert_config.json"))


def test_a_keras_file_carries_its_vocabulary_and_record(pretrained, tmp_path):
    model = AlbertSequenceClassifier.from_preset(pretrained, num_classes=2, seq_length=16,
                                                 label_names=["neg", "pos"])
    model.compile()
    model.fit(TEXTS, LABELS, batch_size=3, epochs=1, verbose=0)
    expected = model.predict(TEXTS, verbose=0)
    path = str(tmp_path / "m.keras")
    model.save(path)
    shutil.rmtree(pretrained)  # the vocabulary's original file is gone
    loaded = keras.saving.load_model(path)
    np.testing.assert_allclose(loaded.predict(TEXTS, verbose=0), expected,
                               atol=1e-5, rtol=0)
    assert loaded.task_record == model.task_record
    assert loaded.task_record.label_names == ("neg", "pos")
    assert loaded.preprocessor.tokenizer.vocab_size == model.config.vocab_size
    loaded.fit(TEXTS, LABELS, batch_size=3, epochs=1, verbose=0)  # compiled as saved


def test_the_encoder_from_preset_exports_with_keras(pretrained, tmp_path):
    encoder = AlbertEncoder.from_preset(pretrained)
    encoder.export(str(tmp_path / "encoder"), verbose=False)
    served = tf.saved_model.load(str(tmp_path / "encoder"))
    inputs = {"input_word_ids": np.array([[2, 40, 41, 3, 0]], np.int32),
              "input_mask": np.array([[1, 1, 1, 1, 0]], np.int32),
              "input_type_ids": np.zeros((1, 5), np.int32)}
    got = served.serve(inputs)
    want = as_numpy(encoder(inputs))
    for key in ("sequence_output", "pooled_output", "encoder_outputs"):
        np.testing.assert_allclose(got[key].numpy(), want[key], atol=1e-5, rtol=0)


def test_save_checkpoint_and_export_take_what_the_model_holds(pretrained, tmp_path):
    import albert_tf
    from albert_tf.checkpoint import open_checkpoint

    model = AlbertSequenceClassifier.from_preset(pretrained, num_classes=2, seq_length=16,
                                                 label_names=["neg", "pos"])
    saved = open_checkpoint(albert_tf.save_checkpoint(model, str(tmp_path / "run")))
    assert saved.task_record == model.task_record  # labels, length, tokenizer settings
    assert saved.tokenizer.spm_model is not None  # the preprocessor's vocabulary
    path = albert_tf.export(model, str(tmp_path / "models" / "reviews"))
    served = tf.saved_model.load(path).signatures["serving_default"]
    answer = served(text=tf.constant(TEXTS))
    probabilities = tf.nn.softmax(model.predict(TEXTS, verbose=0)).numpy()
    np.testing.assert_allclose(answer["probabilities"].numpy(), probabilities, atol=1e-5)
    assert [label.decode() for label in answer["label"].numpy()] == [
        ["neg", "pos"][i] for i in probabilities.argmax(-1)]
