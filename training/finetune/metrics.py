"""The official metrics of GLUE, SQuAD 1.1/2.0, RACE and NER, in plain NumPy.

GLUE: accuracy, binary F1, Matthews correlation (CoLA), Pearson and Spearman
correlation (STS-B). SQuAD: exact match and token F1 after the official answer
normalisation (lower case, drop punctuation and the articles a/an/the, collapse
whitespace), the maximum over the gold answers, and for 2.0 the no-answer
threshold that maximises a score on dev. Every score is returned as a float;
SQuAD scores are percentages as the official scripts print them. NER: conlleval's
entity-level precision, recall and F1 (fractions, as seqeval returns them).
"""

from __future__ import annotations

import collections
import re
import string
from collections.abc import Mapping, Sequence

import numpy as np

from albert_tf.tagging import entities

_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_PUNCTUATION = frozenset(string.punctuation)


def results_line(results: Mapping[str, object]) -> str:
    """"name=value, ..." for a log line: scores to four decimals, counts (the epoch, a
    number of examples) as the integers they are (`epoch=8, accuracy=0.8125`)."""
    return ", ".join(f"{name}={value:.4f}" if isinstance(value, (float, np.floating))
                     else f"{name}={value}" for name, value in results.items())


# ------------------------------------------------------------------ GLUE
def accuracy(labels: Sequence[int], predictions: Sequence[int]) -> float:
    """Fraction of `predictions` equal to `labels` (both [N])."""
    labels, predictions = _pair(labels, predictions)
    return float(np.mean(labels == predictions))


def f1_binary(labels: Sequence[int], predictions: Sequence[int], positive: int = 1) -> float:
    """F1 of the `positive` class (MRPC, QQP); 0.0 when it is never predicted nor present."""
    labels, predictions = _pair(labels, predictions)
    true_pos = np.sum((predictions == positive) & (labels == positive))
    predicted = np.sum(predictions == positive)
    actual = np.sum(labels == positive)
    if true_pos == 0:
        return 0.0
    precision, recall = true_pos / predicted, true_pos / actual
    return float(2 * precision * recall / (precision + recall))


def matthews_corrcoef(labels: Sequence[int], predictions: Sequence[int]) -> float:
    """Matthews correlation coefficient (CoLA), multi-class form (Gorodkin 2004).

    0.0 when either side is constant, as scikit-learn returns.
    """
    labels, predictions = _pair(labels, predictions)
    classes = np.union1d(labels, predictions)
    # confusion[i, j]: examples of true class i predicted as class j.
    confusion = np.zeros((len(classes), len(classes)), dtype=np.float64)
    np.add.at(confusion, (np.searchsorted(classes, labels),
                          np.searchsorted(classes, predictions)), 1.0)
    true_k, pred_k = confusion.sum(axis=1), confusion.sum(axis=0)
    correct, total = np.trace(confusion), confusion.sum()
    numerator = correct * total - np.dot(true_k, pred_k)
    denominator = np.sqrt((total**2 - np.dot(pred_k, pred_k)) * (total**2 - np.dot(true_k, true_k)))
    return float(numerator / denominator) if denominator else 0.0


def pearson(x: Sequence[float], y: Sequence[float]) -> float:
    """Pearson correlation of two [N] sequences (STS-B); 0.0 if either is constant."""
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    if x.shape != y.shape or x.ndim != 1 or len(x) < 2:
        raise ValueError(f"pearson needs two equal 1-D sequences of length >= 2, got {x.shape} and {y.shape}")
    dx, dy = x - x.mean(), y - y.mean()
    denominator = np.sqrt(np.dot(dx, dx) * np.dot(dy, dy))
    return float(np.dot(dx, dy) / denominator) if denominator else 0.0


def spearman(x: Sequence[float], y: Sequence[float]) -> float:
    """Spearman rank correlation: Pearson of the ranks, ties sharing their mean rank."""
    return pearson(_ranks(x), _ranks(y))


def _ranks(values: Sequence[float]) -> np.ndarray:
    values = np.asarray(values, np.float64)
    order = np.argsort(values, kind="stable")
    ranks = np.empty(len(values), np.float64)
    ranks[order] = np.arange(1, len(values) + 1)
    # Tied values get the mean of the ranks they span.
    _, inverse, counts = np.unique(values, return_inverse=True, return_counts=True)
    sums = np.bincount(inverse, weights=ranks)
    return sums[inverse] / counts[inverse]


def _pair(labels, predictions) -> tuple[np.ndarray, np.ndarray]:
    labels, predictions = np.asarray(labels).reshape(-1), np.asarray(predictions).reshape(-1)
    if labels.shape != predictions.shape or not len(labels):
        raise ValueError(f"labels and predictions must be non-empty and of equal length, "
                         f"got {labels.shape[0]} and {predictions.shape[0]}")
    return labels, predictions


# ----------------------------------------------------------------- SQuAD
def normalize_answer(text: str) -> str:
    """The official SQuAD normalisation: lower, drop punctuation and a/an/the, collapse spaces."""
    text = "".join(ch for ch in text.lower() if ch not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def squad_exact(gold: str, prediction: str) -> float:
    """1.0 if the normalised strings are equal, else 0.0."""
    return float(normalize_answer(gold) == normalize_answer(prediction))


def squad_f1(gold: str, prediction: str) -> float:
    """Token-overlap F1 of the normalised strings; an empty side scores 1.0 only against empty."""
    gold_tokens = normalize_answer(gold).split()
    pred_tokens = normalize_answer(prediction).split()
    if not gold_tokens or not pred_tokens:
        return float(gold_tokens == pred_tokens)
    common = sum((collections.Counter(gold_tokens) & collections.Counter(pred_tokens)).values())
    if not common:
        return 0.0
    precision, recall = common / len(pred_tokens), common / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def squad_scores(gold_answers: Mapping[str, Sequence[str]],
                 predictions: Mapping[str, str]) -> tuple[dict[str, float], dict[str, float]]:
    """Per-question exact and F1 scores (0/1 and [0, 1]), the maximum over the gold answers.

    Args:
      gold_answers: question id -> gold answer texts; an empty list (or only answers
        that normalise to nothing) marks an unanswerable SQuAD 2.0 question, whose
        only correct prediction is "".
      predictions: question id -> predicted text ("" = no answer). A missing
        prediction scores 0, as in the official scripts.
    """
    exact, f1 = {}, {}
    for qid, answers in gold_answers.items():
        golds = [a for a in answers if normalize_answer(a)] or [""]
        prediction = predictions.get(qid)
        if prediction is None:
            exact[qid] = f1[qid] = 0.0
            continue
        exact[qid] = max(squad_exact(g, prediction) for g in golds)
        f1[qid] = max(squad_f1(g, prediction) for g in golds)
    return exact, f1


def squad_evaluate(gold_answers: Mapping[str, Sequence[str]],
                   predictions: Mapping[str, str]) -> dict[str, float]:
    """Official EM/F1 in percent over all questions of `gold_answers`.

    For SQuAD 2.0 also the same split by answerable ("HasAns_*") and unanswerable
    ("NoAns_*") questions when both kinds are present.
    """
    if not gold_answers:
        raise ValueError("squad_evaluate needs at least one gold question")
    exact, f1 = squad_scores(gold_answers, predictions)
    result = {"exact": _percent(exact.values()), "f1": _percent(f1.values()),
              "total": float(len(exact))}
    has_answer = [q for q, a in gold_answers.items() if any(normalize_answer(x) for x in a)]
    answerable = frozenset(has_answer)
    no_answer = [q for q in gold_answers if q not in answerable]
    if has_answer and no_answer:
        for prefix, qids in (("HasAns", has_answer), ("NoAns", no_answer)):
            result[f"{prefix}_exact"] = _percent(exact[q] for q in qids)
            result[f"{prefix}_f1"] = _percent(f1[q] for q in qids)
    return result


def best_no_answer_threshold(gold_answers: Mapping[str, Sequence[str]],
                             predictions: Mapping[str, str],
                             no_answer_probs: Mapping[str, float],
                             scores: Mapping[str, float]) -> tuple[float, float]:
    """The no-answer threshold that maximises `scores` (SQuAD 2.0 EM or F1) on dev.

    A question is answered "" when its no-answer probability is > threshold, else
    with its prediction. As in the official script the sweep starts from "every
    question unanswered" and admits questions in order of increasing probability;
    unlike it, questions with equal probability are admitted together, so the
    returned score is always one that the threshold actually achieves.

    Returns:
      (best score in percent, threshold).
    """
    has_answer = {q: any(normalize_answer(a) for a in golds) for q, golds in gold_answers.items()}
    ordered = sorted(has_answer, key=lambda q: no_answer_probs[q])
    score = float(sum(not h for h in has_answer.values()))
    # Start below every probability: all questions unanswered.
    best_score, best_threshold = score, float(no_answer_probs[ordered[0]]) - 1.0
    for position, qid in enumerate(ordered):
        if has_answer[qid]:
            score += scores.get(qid, 0.0)
        elif predictions.get(qid):
            score -= 1.0  # an unanswerable question now gets a non-empty answer
        is_last_of_tie = (position + 1 == len(ordered)
                          or no_answer_probs[ordered[position + 1]] != no_answer_probs[qid])
        if is_last_of_tie and score > best_score:
            best_score, best_threshold = score, float(no_answer_probs[qid])
    return 100.0 * best_score / len(ordered), best_threshold


def apply_no_answer_threshold(predictions: Mapping[str, str], no_answer_probs: Mapping[str, float],
                              threshold: float) -> dict[str, str]:
    """Predictions with "" wherever the no-answer probability exceeds `threshold`."""
    return {q: ("" if no_answer_probs[q] > threshold else text) for q, text in predictions.items()}


def _percent(values) -> float:
    values = list(values)
    return 100.0 * sum(values) / len(values)


# ------------------------------------------------------------------ NER
def entity_scores(gold: Sequence[Sequence[str]], predicted: Sequence[Sequence[str]]
                  ) -> dict[str, float]:
    """conlleval's entity-level micro precision, recall and F1 (fractions, not percentages).

    Args:
      gold, predicted: each sentence's tags, one per word (`albert_tf.tagging`);
        entities are read by conlleval's rule in any scheme, and one counts as found
        only when its type and its words are exactly the gold entity's.

    Returns:
      {"precision", "recall", "f1"}; a score with nothing to divide is 0.0, as
      conlleval and seqeval report it.
    """
    counts = _entity_counts(gold, predicted).values()
    return _scores(*(sum(c[i] for c in counts) for i in range(3)))


def entity_report(gold: Sequence[Sequence[str]], predicted: Sequence[Sequence[str]]
                  ) -> dict[str, dict[str, float]]:
    """`entity_scores` per entity type, as seqeval's classification_report gives them.

    Returns:
      type -> {"precision", "recall", "f1", "support" (the gold entities of the
      type)}, for every type found in either side, sorted by type.
    """
    return {kind: {**_scores(correct, found, expected), "support": expected}
            for kind, (correct, found, expected)
            in sorted(_entity_counts(gold, predicted).items())}


def _entity_counts(gold, predicted) -> dict[str, list[int]]:
    """type -> [correct, predicted, gold] entity counts over all sentences."""
    if len(gold) != len(predicted):
        raise ValueError(f"{len(gold)} gold sentences but {len(predicted)} predicted")
    counts: dict[str, list[int]] = {}
    for gold_tags, predicted_tags in zip(gold, predicted):
        if len(gold_tags) != len(predicted_tags):
            raise ValueError(f"{len(gold_tags)} gold tags but {len(predicted_tags)} predicted")
        gold_set, predicted_set = set(entities(gold_tags)), set(entities(predicted_tags))
        for column, found in enumerate((gold_set & predicted_set, predicted_set, gold_set)):
            for kind, _, _ in found:
                counts.setdefault(kind, [0, 0, 0])[column] += 1
    return counts


def _scores(correct: int, found: int, expected: int) -> dict[str, float]:
    precision = correct / found if found else 0.0
    recall = correct / expected if expected else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": precision, "recall": recall, "f1": f1}
