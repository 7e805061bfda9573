"""SQuAD 1.1 / 2.0 examples as features: doc-stride windows with their training targets.

Alignment. The original ALBERT `squad_utils` tokenizes the whole paragraph and
then aligns the pieces' text to the original characters with a banded
longest-common-subsequence search, because normalisation (NFKD, dropping
combining marks, lower case) changes the text. We avoid the search
(`albert_tf.span_decoding.align_context`: one word at a time, each character
normalised on its own): every piece has a [start, end) character span in the
original context, and an answer is the context's substring between the first and
last piece of the span. The windows and their max-context flags are
`albert_tf.span_decoding`'s, the rule the served graph follows too.
"""

from __future__ import annotations

import dataclasses
import json
import logging

import numpy as np

from albert_tf.infra import textio
from albert_tf.inputs import INPUT_NAMES
from albert_tf.span_decoding import (  # noqa: F401 (ContextPieces, Window re-exported)
    ContextPieces,
    Window,
    align_context,
    answer_pieces,
    question_windows,
)

from .bucketing import Encoded
from .examples import DataError, progress
from .glue import load_tfds

logger = logging.getLogger(__name__)


@dataclasses.dataclass
class SquadExample:
    """One question on one context.

    Attributes:
      qid: the question id.
      question, context: the texts.
      answers: every gold answer text (empty: unanswerable, SQuAD 2.0).
      answer_start: character offset of the first answer in `context` (training
        target), None when unanswerable.
      source: where it was read (a file, or a tensorflow-datasets split), for messages.
    """

    qid: str
    question: str
    context: str
    answers: list[str]
    answer_start: int | None
    source: str = ""

    @property
    def is_impossible(self) -> bool:
        return not self.answers


def build_windows(tokenizer, examples: list[SquadExample], seq_length: int, doc_stride: int,
                  max_query_length: int, training: bool,
                  answerability: bool = False) -> tuple[Encoded, list[Window], list[ContextPieces]]:
    """Cuts each example into `[CLS] question [SEP] context window [SEP]` features.

    Windows start every `doc_stride` context pieces until one reaches the end.
    With `training`, examples whose answer cannot be located in the context are
    skipped (logged), and labels are the answer's first and last sequence
    positions, or 0 ([CLS]) in windows without the answer; with `answerability`
    also "answerable_logits" (1.0 where the window holds the answer).

    Returns:
      (features [L_i] unpadded, one `Window` per feature, the aligned contexts).
    """
    features = {name: [] for name in INPUT_NAMES}
    starts, ends, answerable, windows, contexts = [], [], [], [], []
    skipped, aligned = [], {}
    for index, example in enumerate(progress(examples, len(examples), "SQuAD windows")):
        if example.context not in aligned:  # SQuAD asks several questions per context
            aligned[example.context] = align_context(tokenizer, example.context)
        pieces = aligned[example.context]
        contexts.append(pieces)  # one per example, skipped or not: indexed by Window.example
        target = None
        if training and not example.is_impossible:
            target = _answer_target(example, pieces)
            if target is None:
                skipped.append(example)
                continue
        rows, example_windows = question_windows(tokenizer, example.question, pieces, seq_length,
                                                 doc_stride, max_query_length, index)
        for word_ids, window in zip(rows, example_windows):
            offset, first, count = window.offset, window.first, window.count
            features["input_word_ids"].append(np.asarray(word_ids, np.int32))
            features["input_mask"].append(np.ones(len(word_ids), np.int32))
            features["input_type_ids"].append(np.asarray([0] * offset + [1] * (count + 1), np.int32))
            windows.append(window)
            inside = target is not None and first <= target[0] and target[1] < first + count
            starts.append(offset + target[0] - first if inside else 0)
            ends.append(offset + target[1] - first if inside else 0)
            answerable.append(float(inside))
    if skipped:
        _report_misplaced(skipped, len(examples), usable=bool(windows))
    labels = {}
    if training:
        labels = {"start_logits": np.asarray(starts, np.int32), "end_logits": np.asarray(ends, np.int32)}
        if answerability:
            labels["answerable_logits"] = np.asarray(answerable, np.float32)
    return Encoded(features, labels), windows, contexts


def _report_misplaced(skipped: list[SquadExample], total: int, usable: bool) -> None:
    """Training questions whose answer is not at its answer_start: counted on stderr, or,
    when that leaves nothing to train on, DataError naming the file and the first one."""
    first = skipped[0]
    sources = ", ".join(dict.fromkeys(e.source or "the training data" for e in skipped))
    example = (f"e.g. question id {first.qid!r}: answer {first.answers[0]!r} at character "
               f"{first.answer_start}")
    if not usable:
        raise DataError(f"{sources}: no usable SQuAD answers: none of the {total} training "
                        f"questions has its answer text at its answer_start in the context "
                        f"({example})")
    logger.warning("%s: skipped %d of %d training questions whose answer is not at its "
                   "answer_start in the context (%s)", sources, len(skipped), total, example)


def _answer_target(example: SquadExample, pieces: ContextPieces) -> tuple[int, int] | None:
    """First and last piece of the first answer; None if it is not at answer_start."""
    start = example.answer_start
    if start is None:
        return None
    end = start + len(example.answers[0])
    if example.context[start:end] != example.answers[0]:
        return None
    return answer_pieces(pieces, start, end)


def read_squad_json(path: str, version: str | None = None) -> list[SquadExample]:
    """Reads an official SQuAD 1.1 or 2.0 JSON file (`{"data": [{"paragraphs": ...}]}`).

    With `version` "v1.1", a question marked `is_impossible` or without answers is
    refused (SQuAD 1.1 has none: the file is SQuAD 2.0 data); None reads either.
    """
    try:
        data = json.loads(textio.read_text(path))  # not UTF-8: file, line and byte offset
    except OSError as e:
        raise DataError(f"{path}: cannot read ({e.strerror})") from None
    except json.JSONDecodeError as e:
        raise DataError(f"{path}:{e.lineno}: not valid JSON ({e.msg})") from None
    examples = []
    articles = _field(data, "data", list, path, "the file")
    for a, article in enumerate(articles):
        for p, paragraph in enumerate(_field(article, "paragraphs", list, path, f"data[{a}]")):
            where = f"data[{a}].paragraphs[{p}]"
            context = _field(paragraph, "context", str, path, where)
            for q, qa in enumerate(_field(paragraph, "qas", list, path, where)):
                at = f"{where}.qas[{q}]"
                answers = _field(qa, "answers", list, path, at)
                qid = str(_field(qa, "id", (str, int), path, at))
                impossible = qa.get("is_impossible")
                if version == "v1.1" and (impossible or not answers):
                    what = "is marked is_impossible" if impossible else "has no answers"
                    raise DataError(f"{path}: {at} (id {qid!r}) {what}; SQuAD 1.1 has no "
                                    "unanswerable questions (SQuAD 2.0 data? use --task "
                                    "squad/v2.0)")
                if impossible:
                    answers = []
                texts = [_field(x, "text", str, path, f"{at}.answers") for x in answers]
                start = _field(answers[0], "answer_start", int, path, f"{at}.answers") if answers else None
                examples.append(SquadExample(qid, _field(qa, "question", str, path, at), context,
                                             texts, start, source=path))
    if not examples:
        raise DataError(f"{path}: no questions")
    return examples


def _field(record, name, kind, path, where):
    if not isinstance(record, dict) or name not in record:
        raise DataError(f"{path}: {where} has no {name!r} field")
    value = record[name]
    if not isinstance(value, kind) or isinstance(value, bool):
        raise DataError(f"{path}: {where}.{name} has the wrong type ({type(value).__name__})")
    return value


def load_squad_tfds(version: str, split: str, data_dir: str | None = None) -> list[SquadExample]:
    """Reads `squad/v1.1` or `squad/v2.0` from tensorflow-datasets (split "train"/"validation")."""

    examples = []
    for record in load_tfds(f"squad/{version}", split, data_dir):
        texts = [t.decode("utf-8") for t in record["answers"]["text"]]
        starts = [int(s) for s in record["answers"]["answer_start"]]
        if record.get("is_impossible", False):
            texts, starts = [], []
        examples.append(SquadExample(
            record["id"].decode("utf-8"), record["question"].decode("utf-8"),
            record["context"].decode("utf-8"), texts, starts[0] if texts and starts else None,
            source=f"squad/{version} {split}"))
    if not examples:
        raise DataError(f"squad/{version} split {split!r} has no examples")
    return examples
