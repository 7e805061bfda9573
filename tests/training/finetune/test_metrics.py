"""GLUE and SQuAD metrics against hand-computed values, scikit-learn and scipy."""

import itertools

import numpy as np
import pytest
from scipy import stats
from sklearn import metrics as sklearn_metrics

from albert_tf.training.finetune import metrics


def test_accuracy_and_binary_f1_by_hand():
    labels = [1, 1, 0, 0, 1, 0]
    preds = [1, 0, 1, 0, 1, 0]
    assert metrics.accuracy(labels, preds) == pytest.approx(4 / 6)
    # TP=2, FP=1, FN=1: precision = recall = 2/3.
    assert metrics.f1_binary(labels, preds) == pytest.approx(2 / 3)
    assert metrics.f1_binary(labels, [0] * 6) == 0.0
    with pytest.raises(ValueError, match="equal length"):
        metrics.accuracy([1, 0], [1])


def test_matthews_binary_by_hand_and_equals_phi():
    # TP=3, TN=2, FP=1, FN=1 -> (3*2 - 1*1) / sqrt(4*4*3*3) = 5/12.
    labels = [1, 1, 1, 1, 0, 0, 0]
    preds = [1, 1, 1, 0, 1, 0, 0]
    assert metrics.matthews_corrcoef(labels, preds) == pytest.approx(5 / 12)
    # For two classes MCC is the phi coefficient: Pearson of the 0/1 vectors.
    rng = np.random.default_rng(0)
    a, b = rng.integers(0, 2, 50), rng.integers(0, 2, 50)
    assert metrics.matthews_corrcoef(a, b) == pytest.approx(np.corrcoef(a, b)[0, 1])
    assert metrics.matthews_corrcoef([0, 1, 1], [1, 1, 1]) == 0.0


def test_matthews_multiclass_by_hand():
    # Confusion (rows true, cols predicted): [[2,1,0],[0,2,1],[1,0,1]]; c=5, s=8,
    # t=(3,3,2), p=(3,3,2): (5*8 - 22) / sqrt((64-22)*(64-22)) = 18/42.
    labels = [0, 0, 0, 1, 1, 1, 2, 2]
    preds = [0, 0, 1, 1, 1, 2, 0, 2]
    assert metrics.matthews_corrcoef(labels, preds) == pytest.approx(18 / 42)


def test_pearson_matches_numpy_and_spearman_by_hand():
    rng = np.random.default_rng(1)
    x, y = rng.normal(size=40), rng.normal(size=40)
    assert metrics.pearson(x, y) == pytest.approx(np.corrcoef(x, y)[0, 1])
    # No ties: 1 - 6 * sum(d^2) / (n (n^2 - 1)) with d = (-2, 1, -1, -1, 3).
    assert metrics.spearman([10, 20, 30, 40, 50], [3, 1, 4, 5, 2]) == pytest.approx(1 - 6 * 16 / 120)
    # Ties share their mean rank: y ranks are (1, 2, 3.5, 5, 3.5).
    expected = np.corrcoef([1, 2, 3, 4, 5], [1, 2, 3.5, 5, 3.5])[0, 1]
    assert metrics.spearman([1, 2, 3, 4, 5], [5, 6, 7, 8, 7]) == pytest.approx(expected)
    # Monotone but non-linear: Spearman 1, Pearson below 1.
    assert metrics.spearman(x, np.exp(3 * x)) == pytest.approx(1.0)
    assert metrics.pearson(x, np.exp(3 * x)) < 0.95


@pytest.mark.parametrize("seed", range(6))
def test_glue_metrics_equal_scikit_learn_and_scipy(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(5, 200))
    classes = 2 + seed % 3  # binary, 3-way (MNLI), 4-way
    labels, preds = rng.integers(0, classes, n), rng.integers(0, classes, n)
    agree = rng.random(n) < 0.6  # better than chance, as a trained model
    preds[agree] = labels[agree]
    assert metrics.accuracy(labels, preds) == pytest.approx(sklearn_metrics.accuracy_score(labels, preds))
    assert metrics.matthews_corrcoef(labels, preds) == pytest.approx(
        sklearn_metrics.matthews_corrcoef(labels, preds), abs=1e-12)
    binary_labels, binary_preds = labels % 2, preds % 2
    assert metrics.f1_binary(binary_labels, binary_preds) == pytest.approx(
        sklearn_metrics.f1_score(binary_labels, binary_preds, zero_division=0.0))
    # STS-B-like scores on a 0..5 grid of fifths: many ties for Spearman.
    x = np.round(rng.uniform(0, 5, n) * 5) / 5
    y = x + rng.normal(0, 1.5, n)
    y[: n // 3] = np.round(y[: n // 3])
    assert metrics.pearson(x, y) == pytest.approx(stats.pearsonr(x, y)[0], abs=1e-12)
    assert metrics.spearman(x, y) == pytest.approx(stats.spearmanr(x, y)[0], abs=1e-12)


def test_degenerate_cases_match_scikit_learn():
    for labels, preds in [([0, 1, 1], [1, 1, 1]), ([0, 0, 0], [0, 0, 0]), ([1, 0], [0, 1])]:
        assert metrics.matthews_corrcoef(labels, preds) == sklearn_metrics.matthews_corrcoef(labels, preds)
        assert metrics.f1_binary(labels, preds) == sklearn_metrics.f1_score(labels, preds, zero_division=0.0)


@pytest.mark.parametrize("text, expected", [
    ("The  Quick, brown-fox!", "quick brownfox"),
    ("An apple a day", "apple day"),
    ("theater, another, anthem", "theater another anthem"),
    ("  Denver Broncos. ", "denver broncos"),
    ("A", ""),
])
def test_official_squad_normalisation(text, expected):
    assert metrics.normalize_answer(text) == expected


def test_squad_exact_and_f1_by_hand():
    assert metrics.squad_exact("Denver Broncos", "the Denver Broncos.") == 1.0
    # gold tokens (cat sat on mat), predicted (cat on mat): P=1, R=3/4.
    assert metrics.squad_f1("the cat sat on the mat", "cat on a mat") == pytest.approx(6 / 7)
    assert metrics.squad_f1("1990", "1990s") == 0.0
    assert metrics.squad_f1("", "") == 1.0
    assert metrics.squad_f1("", "something") == 0.0
    # Repeated tokens count by multiplicity: common = min counts = 1.
    assert metrics.squad_f1("go go", "go") == pytest.approx(2 * 1 * 0.5 / 1.5)


def test_squad_evaluate_v1_and_v2():
    gold = {"q1": ["Paris", "paris france"], "q2": [], "q3": ["1990", "in 1990"]}
    preds = {"q1": "Paris, France", "q2": "", "q3": "1990s"}
    result = metrics.squad_evaluate(gold, preds)
    # q1: EM 1 (second gold), q2: empty == empty, q3: 0.
    assert result["exact"] == pytest.approx(200 / 3)
    assert result["f1"] == pytest.approx(200 / 3)
    assert result["HasAns_exact"] == pytest.approx(50.0)
    assert result["NoAns_exact"] == pytest.approx(100.0)
    # Missing predictions score zero.
    assert metrics.squad_evaluate({"a": ["x"], "b": ["y"]}, {"a": "x"})["exact"] == 50.0


def test_no_answer_threshold_by_hand():
    gold = {"a": ["one"], "b": [], "c": ["two three"], "d": []}
    preds = {"a": "one", "b": "four", "c": "three", "d": "five"}
    probs = {"a": 0.1, "b": 0.4, "c": 0.3, "d": 0.9}
    _, f1 = metrics.squad_scores(gold, preds)
    # Sweep from all-unanswered (2 of 4): +1 (a) -> 3, +2/3 (c) -> 3.67, -1 (b), -1 (d).
    best, threshold = metrics.best_no_answer_threshold(gold, preds, probs, f1)
    assert threshold == 0.3
    assert best == pytest.approx(100 * (1 + 2 / 3 + 1 + 1) / 4)
    applied = metrics.apply_no_answer_threshold(preds, probs, threshold)
    assert applied == {"a": "one", "b": "", "c": "three", "d": ""}
    assert metrics.squad_evaluate(gold, applied)["f1"] == pytest.approx(best)


def _brute_force_best(gold, preds, probs):
    candidates = sorted(set(probs.values())) + [min(probs.values()) - 1.0]
    return max(metrics.squad_evaluate(gold, metrics.apply_no_answer_threshold(preds, probs, t))["f1"]
               for t in candidates)


def test_no_answer_threshold_equals_brute_force_with_ties():
    rng = np.random.default_rng(3)
    words = ["red", "green", "blue", "cyan"]
    for trial in range(20):
        gold, preds, probs = {}, {}, {}
        for i in range(9):
            qid = f"q{trial}_{i}"
            gold[qid] = [] if rng.random() < 0.4 else [" ".join(rng.choice(words, 2))]
            preds[qid] = " ".join(rng.choice(words, rng.integers(1, 3)))
            probs[qid] = float(rng.integers(0, 4)) / 4  # many ties
        _, f1 = metrics.squad_scores(gold, preds)
        best, threshold = metrics.best_no_answer_threshold(gold, preds, probs, f1)
        assert best == pytest.approx(_brute_force_best(gold, preds, probs))
        applied = metrics.apply_no_answer_threshold(preds, probs, threshold)
        assert metrics.squad_evaluate(gold, applied)["f1"] == pytest.approx(best)


def test_metrics_are_symmetric_where_they_should_be():
    for a, b in itertools.permutations([[0, 1, 1, 0, 1], [1, 1, 0, 0, 1]], 2):
        assert metrics.matthews_corrcoef(a, b) == pytest.approx(metrics.matthews_corrcoef(b, a))


def test_a_results_line_prints_counts_as_integers_and_scores_to_four_decimals():
    line = metrics.results_line({"epoch": 8, "accuracy": 0.8125, "f1": np.float32(0.5),
                                 "examples": np.int64(872)})
    assert line == "epoch=8, accuracy=0.8125, f1=0.5000, examples=872"
