"""The one rule of span QA over doc-stride windows: windows, max context, candidates, answers.

Fine-tuning's SQuAD prediction (`training/finetune/squad.py`), a span model's
`predict((questions, contexts))` and the served graph
(`serving/signatures/span_windows.py`) all decode by this module. The window
arithmetic (`room_of`, `window_step`, `window_count`, `pieces_held`,
`max_context_score`) is written once for Python ints and int tensors alike, and the
graph calls it. Candidates and ranking keep this Python form beside the graph's
because fine-tuning labels its training windows and scores its evaluation in the
data pipeline's Python (`training/finetune/squad_data.py`), where no graph runs;
tests hold the two decodings equal:

* windows: the context's pieces are cut into windows of `room = seq_length - 3 -
  question pieces` pieces, a window starting every `min(room, doc_stride)` pieces
  until one reaches the end (`window_spans`); an empty context has one empty window;
* max context: each piece belongs, for answer starts, to the window that gives it the
  most context on its shorter side, ties to the earlier window (BERT's rule,
  `max_context`; scored as integers so Python and the graph never round differently);
* candidates: in every window the `n_best` highest start logits among its
  max-context pieces and the `n_best` highest end logits among all its context
  pieces form spans (start <= end < start + max_answer_length), scored start + end
  logit (`window_candidates`);
* answers: the candidates of all the question's windows ranked together; a span
  starts and ends on a piece showing visible text (`rank`);
* no answer: with an answerability head (SQuAD 2.0 fine-tuning) P(no answer) =
  1 - sigmoid(the highest answerable logit over the windows), "" above the record's
  no_answer_threshold; a foreign start/end head (Hugging Face's run_qa) takes the
  lowest null score ([CLS] start + end logit) over the windows and answers "" when it
  beats the best span by more than null_score_diff_threshold (`null_score_diff`).

This module is plain Python and NumPy (no TensorFlow, no Keras).
"""

from __future__ import annotations

import dataclasses
import unicodedata

import numpy as np

from albert_tf.errors import UserError
from albert_tf.tokenizer.kinds import WORDPIECE
from albert_tf.tokenizer.spm import SPIECE_UNDERLINE

# Max-context score = MAX_CONTEXT_SCALE * shorter side + window length: BERT's
# `min(left, right) + 0.01 * length` times 100, in integers, so no float rounding can
# break a tie differently in Python and in the graph.
MAX_CONTEXT_SCALE = 100


@dataclasses.dataclass
class ContextPieces:
    """A context's token ids with the character span [start, end) of each piece."""

    ids: list[int]
    starts: np.ndarray  # [P] int
    ends: np.ndarray  # [P] int, exclusive


@dataclasses.dataclass
class Window:
    """One doc-stride window: which example, and where its context pieces sit.

    Sequence position `offset + i` holds context piece `first + i`, i < count.
    `max_context[i]` says whether this window gives that piece its most context.
    """

    example: int
    offset: int
    first: int
    count: int
    max_context: np.ndarray  # [count] bool


# ------------------------------------------------------------------ alignment
def _words(text: str):
    """(start, end) of every run of non-whitespace characters (as `str.split`)."""
    start = None
    for i, char in enumerate(text):
        if char.isspace():
            if start is not None:
                yield start, i
                start = None
        elif start is None:
            start = i
    if start is not None:
        yield start, len(text)


def align_context(tokenizer, context: str) -> ContextPieces:
    """Tokenizes `context` and gives each piece its character span in `context`.

    SentencePiece never lets a piece cross whitespace, so the context is tokenized
    one whitespace-separated word at a time (the same pieces as tokenizing it whole),
    and inside a word each original character is normalised on its own, which gives
    an exact map from normalised to original characters. When a word's pieces do not
    spell its normalised characters (rare: a final sigma, a compatibility character
    that decomposes to a space), every piece of that word maps to the whole word.
    """
    if tokenizer.kind == WORDPIECE:  # exact spans of its own (`encode_with_offsets`)
        ids, offsets = tokenizer.encode_with_offsets(context)
        return ContextPieces(ids, *np.asarray(offsets, np.int64).reshape(-1, 2).T)
    ids, starts, ends = [], [], []
    for word_start, word_end in _words(context):
        word = context[word_start:word_end]
        pieces = tokenizer.tokenize(word)
        per_char = [tokenizer.normalize(char) for char in word]
        # normalised character j of the word comes from original character origin[j]
        origin = [word_start + k for k, text in enumerate(per_char) for _ in text]
        surfaces = [p.replace(SPIECE_UNDERLINE, "") for p in pieces]
        exact = "".join(surfaces) == "".join(per_char)
        position = 0
        for piece, surface in zip(pieces, surfaces):
            ids.append(tokenizer.piece_to_id(piece))
            if not exact:
                starts.append(word_start)
                ends.append(word_end)
            elif surface:
                starts.append(origin[position])
                ends.append(origin[position + len(surface) - 1] + 1)
            else:  # a lone "▁" before a piece of its own: empty, at the next character
                at = origin[position] if position < len(origin) else word_end
                starts.append(at)
                ends.append(at)
            position += len(surface)
    return ContextPieces(ids, np.asarray(starts, np.int64), np.asarray(ends, np.int64))


def answer_pieces(pieces: ContextPieces, start: int, end: int) -> tuple[int, int] | None:
    """First and last piece covering characters [start, end) of the context, or None."""
    inside = np.nonzero((pieces.ends > start) & (pieces.starts < end))[0]
    if not len(inside):
        return None
    return int(inside[0]), int(inside[-1])


# ------------------------------------------------------------------ windows
# The window arithmetic below is written once for Python ints and for int64 tensors
# alike (the served graph, `serving/signatures/span_windows.py`, calls it with
# `tf.minimum` / `tf.maximum`), so the two cannot cut a context differently.

# [CLS] question [SEP] context [SEP]: the positions of a window's row that are not context.
WINDOW_SPECIALS = 3


def room_of(seq_length, query_pieces):
    """Context pieces one window holds beside `[CLS] question [SEP] ... [SEP]`."""
    return seq_length - WINDOW_SPECIALS - query_pieces


def window_step(room, doc_stride, minimum=min):
    """Pieces between two windows' starts: `doc_stride`, at most a whole window."""
    return minimum(room, doc_stride)


def window_count(num_pieces, room, doc_stride, minimum=min, maximum=max):
    """How many windows a context of `num_pieces` pieces needs: len(window_spans(...)),
    1 + ceil((pieces - room) / step), at least 1."""
    return 1 + maximum(-((room - num_pieces) // window_step(room, doc_stride, minimum)), 0)


def pieces_held(windows, room, doc_stride, minimum=min):
    """The most context pieces `windows` windows hold (what a window cap allows)."""
    return room + (windows - 1) * window_step(room, doc_stride, minimum)


def context_room(seq_length: int, query_pieces: int) -> int:
    """`room_of`, refused when the question leaves no room for the context."""
    room = room_of(seq_length, query_pieces)
    if room < 1:
        raise UserError(f"seq_length={seq_length} leaves no room for the context after the "
                        f"{query_pieces}-piece question; raise it or lower max_query_length")
    return room


def query_limit(max_query_length: int, seq_length: int) -> int:
    """Question pieces kept: the record's max_query_length, at most seq_length - 4."""
    return min(max_query_length, room_of(seq_length, 1))


def window_spans(num_pieces: int, room: int, doc_stride: int) -> list[tuple[int, int]]:
    """(first piece, count) of each window: `room` pieces, one every `window_step`
    pieces, until one reaches the end."""
    step = window_step(room, doc_stride)
    return [(first, min(room, num_pieces - first))
            for first in range(0, step * window_count(num_pieces, room, doc_stride), step)]


def max_context_score(index, count, minimum=min):
    """How much context a window of `count` pieces gives its piece `index` (integers)."""
    return MAX_CONTEXT_SCALE * minimum(index, count - 1 - index) + count


def max_context(spans: list[tuple[int, int]]) -> list[np.ndarray]:
    """Per window, bool [count]: whether it gives each of its pieces the most context
    (the highest `max_context_score`; a tie goes to the earlier window)."""
    best: dict[int, tuple[int, int]] = {}
    for window, (first, count) in enumerate(spans):
        for i in range(count):
            score = max_context_score(i, count)
            if first + i not in best or score > best[first + i][0]:
                best[first + i] = (score, window)
    return [np.array([best[first + i][1] == window for i in range(count)], bool)
            for window, (first, count) in enumerate(spans)]


def question_windows(tokenizer, question: str, pieces: ContextPieces, seq_length: int,
                     doc_stride: int, max_query_length: int,
                     example: int = 0) -> tuple[list[list[int]], list[Window]]:
    """`[CLS] question [SEP] context window [SEP]` word ids of every window, and the windows.

    The question is cut to `query_limit(max_query_length, seq_length)` pieces.
    """
    query = tokenizer.encode(question)[:query_limit(max_query_length, seq_length)]
    spans = window_spans(len(pieces.ids), context_room(seq_length, len(query)), doc_stride)
    offset = len(query) + 2  # [CLS] question [SEP]
    rows, windows = [], []
    for (first, count), flags in zip(spans, max_context(spans)):
        rows.append([tokenizer.cls_id, *query, tokenizer.sep_id,
                     *pieces.ids[first:first + count], tokenizer.sep_id])
        windows.append(Window(example, offset, first, count, flags))
    return rows, windows


# ------------------------------------------------------------------ decoding
def _top(logits: np.ndarray, positions: np.ndarray, n: int) -> np.ndarray:
    """The `n` positions (of `positions`) with the highest logits."""
    return positions[np.argsort(-logits[positions], kind="stable")[:n]]


def window_candidates(window: Window, start_logits: np.ndarray, end_logits: np.ndarray,
                      n_best: int, max_answer_length: int) -> list[tuple[float, int, int]]:
    """(score, first piece, last piece) of the valid spans among the window's top logits."""
    positions = window.offset + np.arange(window.count)
    starts = _top(start_logits, positions[window.max_context], n_best)
    ends = _top(end_logits, positions, n_best)
    out = []
    for s in starts:
        for e in ends:
            if s <= e < s + max_answer_length:
                out.append((float(start_logits[s] + end_logits[e]),
                            window.first + int(s) - window.offset, window.first + int(e) - window.offset))
    return out


def beam_candidates(window: Window, start_index: np.ndarray, start_log_probs: np.ndarray,
                    end_index: np.ndarray, end_log_probs: np.ndarray,
                    max_answer_length: int) -> list[tuple[float, int, int]]:
    """The original run_squad_v2 beam head's spans in one window (its
    `accumulate_predictions_v2`): start i of the beam [k1] with each of its ends
    [k1 * k2] (row i * k2 + j), both in the context, the start in the window that gives it
    the most context, end >= start, at most max_answer_length pieces; score = start +
    end log-probability. (score, first piece, last piece), in beam order."""
    k2 = len(end_index) // len(start_index)
    out = []
    for i, s in enumerate(start_index):
        for j in range(k2):
            e = end_index[i * k2 + j]
            a, b = int(s) - window.offset, int(e) - window.offset
            if not (0 <= a < window.count and 0 <= b < window.count) or not window.max_context[a]:
                continue
            if a <= b < a + max_answer_length:
                out.append((float(start_log_probs[i] + end_log_probs[i * k2 + j]),
                            window.first + a, window.first + b))
    return out


def is_ignorable(char: str) -> bool:
    """Whether `char` alone makes no visible text: whitespace, separators, controls,
    format characters, combining marks and U+FFFD (`serving.offsets.IGNORABLE`, the
    in-graph decoder's class, is the same set)."""
    category = unicodedata.category(char)
    return (char.isspace() or char == "\ufffd" or category in ("Zs", "Zl", "Zp", "Cc", "Cf")
            or category.startswith("M"))


def _visible(context: str, pieces: ContextPieces, index: int) -> bool:
    return not all(is_ignorable(c) for c in context[pieces.starts[index]:pieces.ends[index]])


def rank(context: str, pieces: ContextPieces, spans, n_best: int) -> list[dict]:
    """The `n_best` best distinct answers of `spans` [(score, first, last)], best first:
    {"text", "score", "start", "end" (characters), "probability" (softmax over them)}."""
    entries, seen = [], set()
    for score, first, last in sorted(spans, key=lambda c: -c[0]):
        # An answer starts and ends on a piece with visible text (a lone "▁" piece
        # covers only a space), as the serving signature's decoding.
        if not (_visible(context, pieces, first) and _visible(context, pieces, last)):
            continue
        start, end = int(pieces.starts[first]), int(pieces.ends[last])
        text = context[start:end]
        if text in seen or not text.strip():
            continue
        seen.add(text)
        entries.append({"text": text, "score": score, "start": start, "end": end})
        if len(entries) == n_best:
            break
    if entries:
        scores = np.array([e["score"] for e in entries])
        probs = np.exp(scores - scores.max())
        for entry, p in zip(entries, probs / probs.sum()):
            entry["probability"] = float(p)
    return entries


def no_answer_probability(answerable_logits) -> float:
    """SQuAD 2.0 fine-tuning's P(no answer): 1 - sigmoid(the highest window's logit)."""
    return float(1.0 / (1.0 + np.exp(float(np.max(answerable_logits)))))


def null_score_diff(start_logits: list[np.ndarray], end_logits: list[np.ndarray],
                    best_score: float | None) -> float:
    """A foreign head's rule: the lowest [CLS] null score over the windows minus the best
    span's score (inf without a span); "" when it exceeds null_score_diff_threshold."""
    if best_score is None:
        return float("inf")
    return min(float(s[0] + e[0]) for s, e in zip(start_logits, end_logits)) - best_score
