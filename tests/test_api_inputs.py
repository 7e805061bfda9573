"""The Python API refuses what it cannot train or predict on, before the graph.

Each case is one UserError naming the problem (value, row, bound): string, one-hot,
out-of-range and fractional class ids; NaN and infinite scores; labels of the wrong
count; an empty batch or a None row of text; seq_length=0; "no" for a boolean. Correct
acceptances (what must keep working) are part of the matrix.
"""

from __future__ import annotations

import numpy as np
import pytest

from albert_tf import (
    AlbertEncoder,
    AlbertMultipleChoice,
    AlbertSequenceClassifier,
    AlbertSequenceRegressor,
    AlbertTokenClassifier,
    errors,
)
from albert_tf.api_inputs import InputError, LabelError, SettingError, check_labels
from tests.helpers.model_harness import BATCH, SEQ, encoder_inputs, tiny_config


@pytest.fixture(scope="module")
def config():
    return tiny_config(num_hidden_layers=1)


@pytest.fixture(scope="module")
def classifier(config):
    return AlbertSequenceClassifier(config, num_classes=2)


@pytest.mark.parametrize("labels, words", [
    (["pos", "neg"], "not strings such as 'pos'"),
    ([[1, 0], [0, 1]], "look one-hot"),
    ([0, 2], "label 2 at row 1 is outside [0, 1]"),
    ([-1, 0], "label -1 at row 0 is outside [0, 1]"),
    ([0.5, 1.7], "label 0.5 at row 0 is not an integer"),
    ([0.0, np.nan], "at row 1 is not an integer"),
    ([0, None], "label 1 is None"),
    ([0, 1, 1], "3 labels for 2 rows"),
    ([[0, 1], [1]], "ragged"),
], ids=["strings", "one_hot", "too_large", "negative", "fractional", "nan", "none", "count",
        "ragged"])
def test_a_classifier_refuses_labels_it_cannot_train_on(classifier, config, labels, words):
    x = encoder_inputs(config)
    for method in (classifier.fit, classifier.evaluate):
        with pytest.raises(LabelError) as e:
            method(x, labels, verbose=0)
        assert isinstance(e.value, errors.UserError)
        assert words in str(e.value) and str(e.value).startswith("AlbertSequenceClassifier")


def test_a_classifier_takes_integer_ids_and_whole_floats(classifier, config):
    for labels in ([0, 1], np.array([[1], [0]]), np.array([1.0, 0.0]), [True, False]):
        check_labels(classifier, labels, rows=BATCH)  # no error


@pytest.mark.parametrize("labels, words", [
    ([0.5, np.nan], "label nan at row 1 is not a finite number"),
    ([np.inf, 1.0], "label inf at row 0 is not a finite number"),
    (["0.5", "1"], "not strings"),
    ([[0.5, 1.0], [1.0, 2.0]], "not one score per row"),
])
def test_a_regressor_refuses_non_finite_and_non_numeric_scores(config, labels, words):
    model = AlbertSequenceRegressor(config)
    with pytest.raises(LabelError, match=None) as e:
        model.fit(encoder_inputs(config), labels, verbose=0)
    assert words in str(e.value)
    check_labels(model, [0.5, 4.75], rows=BATCH)  # finite floats are what it takes


def test_a_token_classifier_checks_ids_per_position(config):
    model = AlbertTokenClassifier(config, num_classes=3)
    labels = np.zeros((BATCH, SEQ), "int32")
    labels[1, 4] = 3
    with pytest.raises(LabelError, match=r"label 3 at row 1, position 4 is outside \[0, 2\] "
                                         r"or -100 \(ignored\)"):
        model.fit(encoder_inputs(config), labels, verbose=0)
    labels[1, 4] = -100  # the ignored label is a label
    check_labels(model, labels, rows=BATCH)
    with pytest.raises(LabelError, match=r"per token \[B, T\], not shape \[2\]"):
        check_labels(model, [0, 1])


def test_multiple_choice_labels_are_within_the_choices(config):
    model = AlbertMultipleChoice(config)
    x = (["a context", "another"], [["a", "b", "c"], ["d", "e", "f"]])
    with pytest.raises(LabelError, match=r"label 3 at row 1 is outside \[0, 2\].* among 3"):
        model.fit(x, [0, 3], verbose=0)


@pytest.mark.parametrize("x, words", [
    ([], "x is empty: give at least one text"),
    (["a text", None], "x: row 1 is None, not a string"),
    (["a text", 7], "x: row 1 is int 7, not a string"),
    ((["a", "b"], ["c", None]), "column 1 of the text tuple: row 1 is None"),
    ((["a"], []), "column 1 of the text tuple is empty"),
    ([1, 2], "x: row 0 is int 1, not a string"),
    ([["a", ["b"]]], "x: row 0 is list ['a', ['b']], not a string"),
    ((["a"], [["b", ["c"]]]), "column 1 of the text tuple, row 0,: row 1 is list ['c']"),
    (np.array([["a", "b"], ["c", "d"]]), "x is an array of shape [2, 2] and dtype <U1"),
    (np.array([1, 2]), "x is an array of shape [2] and dtype int64"),
    (["ok", "bad \ud800 x"], "x: row 1 holds '\\ud800' at character 4, a lone surrogate"),
], ids=["empty", "none", "int_row", "tuple_none", "tuple_empty", "numbers", "nested",
        "nested_choices", "2d_array", "int_array", "lone_surrogate"])
def test_predict_names_an_empty_batch_and_a_row_that_is_not_text(classifier, x, words):
    with pytest.raises(InputError) as e:
        classifier.predict(x, verbose=0)
    assert words in str(e.value), str(e.value)


@pytest.mark.parametrize("value", ["no", "False", 0, 1, None])
def test_boolean_settings_are_parsed_strictly(config, value):
    with pytest.raises(SettingError, match=rf"remat={value!r} must be True or False"):
        AlbertEncoder(config, remat=value)
    with pytest.raises(SettingError, match=r"remat="):
        AlbertSequenceClassifier(config, num_classes=2, remat=value)
    assert AlbertEncoder(config, remat=False).remat is False


def test_from_preset_refuses_seq_length_0(tiny_checkpoint):
    with pytest.raises(errors.UserError, match=r"seq_length=0 must be an integer from 3"):
        AlbertSequenceClassifier.from_preset(tiny_checkpoint, num_classes=2, seq_length=0)


@pytest.mark.parametrize("batch_size", [-1, 0, 1.5, "8", True])
def test_a_batch_size_that_is_no_positive_integer_is_named(classifier, batch_size):
    """batch_size=-1 was answered by TensorFlow's "Batch size must be greater than zero"
    (BatchDatasetV2), 0 taken as the default."""
    for call in (lambda: classifier.predict(["a", "b"], batch_size=batch_size, verbose=0),
                 lambda: classifier.fit(["a", "b"], [0, 1], batch_size=batch_size, verbose=0)):
        with pytest.raises(SettingError, match=rf"AlbertSequenceClassifier: batch_size="
                                               rf"{batch_size!r} must be a positive integer"):
            call()


@pytest.mark.parametrize("arguments, words", [
    ({"load_weights": "no"}, r"load_weights='no' must be True or False"),
    ({"load_weights": 0}, r"load_weights=0 must be True or False"),
    ({"label_names": "ab"}, r"from_preset: label_names='ab' must be a list of names"),
    ({"label_names": ["neg", 1]}, r"from_preset: label_names\[1\]=1 is not a string"),
], ids=["load_weights_no", "load_weights_0", "label_names_string", "label_names_int"])
def test_from_preset_checks_its_arguments_as_the_cli_does(tiny_checkpoint, arguments, words):
    """load_weights="no" loaded the weights; label_names="ab" became ['a', 'b']."""
    with pytest.raises(SettingError, match=words):
        AlbertSequenceClassifier.from_preset(tiny_checkpoint, num_classes=2, **arguments)
