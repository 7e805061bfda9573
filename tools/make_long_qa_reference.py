"""Writes tests/fixtures/tasks/qa/long_contexts.json: answers of Hugging Face's
AlbertForQuestionAnswering (tests/fixtures/tasks/qa/hf, random weights) on contexts of
3 to 10 doc-stride windows, decoded independently of albert-tf.

Nothing here imports albert_tf. The pieces and their character offsets come from the
`sentencepiece` package (`encode(..., return_type="proto")`: each piece's begin
and end in the input; the texts are lowercase ASCII with single spaces, so HF's
AlbertTokenizer normalisation leaves them unchanged and the offsets are the raw
characters'); the logits from transformers' model (float64); the windows, the
max-context rule and the decoding are written out below from the prose of BERT's
run_squad / Hugging Face's run_qa post-processing:

* windows of `seq_length - 3 - question pieces` context pieces, a new one every
  `doc_stride` pieces, until one reaches the context's end;
* a piece's max-context window: the highest min(left, right) + 0.01 * length
  (BERT's `_check_is_max_context`);
* per window the n_best (20) highest start logits among the context pieces whose
  max-context window it is, and the n_best highest end logits among its context pieces;
  spans with end >= start, at most max_answer_length (30) pieces, both ends on a piece
  that is not a lone "▁"; score = start + end logit, best over all windows;
* the null score: the lowest [CLS] start + end logit over the windows
  (run_qa's `min_null_prediction`); null_score_diff = null - best score, and the answer
  is "" when it exceeds 0.0 (the threshold albert-tf records for HF QA heads).

Run:
    /work/refvenv/bin/python tools/make_long_qa_reference.py   # -> tests/fixtures/...
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys

import numpy as np
import sentencepiece as spm
import torch
import transformers

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HF_DIR = os.path.join(REPO, "tests", "fixtures", "tasks", "qa", "hf")
OUT = os.path.join(REPO, "tests", "fixtures", "tasks", "qa", "long_contexts.json")
SEQ_LENGTH, DOC_STRIDE, N_BEST, MAX_ANSWER_LENGTH, THRESHOLD = 64, 24, 20, 30, 0.0
CASES = 60
# The sentences the fixture vocabulary was trained on (tools/make_reference_fixtures.py).
SENTENCES = [
    "the cat sat on the mat.", "a dog ran in the park.", "paris is the capital of france.",
    "the river flows to the sea in spring.", "she bought three red apples and a green pear.",
    "rain fell on the quiet town all night.", "the king and the queen ate bread.",
    "music plays in the hall after dinner.", "birds sing when the sun rises.",
    "he reads a long letter from his sister.", "the train leaves at nine in the morning.",
    "children play games in the garden."]
QUESTIONS = ["who wrote the book about the old sea?", "what is the capital of france?",
             "where does the river go?", "where did the cat sit?", "who ate bread?",
             "when does the train leave?"]


def pieces_with_offsets(sp, text):
    """(ids, [(begin, end)] characters, is_lone_underline) of `text`'s pieces."""
    proto = sp.encode(text, return_type="proto")
    return ([p.id for p in proto.pieces], [(p.begin, p.end) for p in proto.pieces],
            [p.piece == "\u2581" for p in proto.pieces])


def windows(num_pieces, room):
    out, first = [], 0
    while True:
        count = min(room, num_pieces - first)
        out.append((first, count))
        if first + count >= num_pieces:
            return out
        first += min(count, DOC_STRIDE)


def is_max_context(spans, index, position):
    best_score, best = None, None
    for i, (first, count) in enumerate(spans):
        end = first + count - 1
        if position < first or position > end:
            continue
        score = min(position - first, end - position) + 0.01 * count
        if best_score is None or score > best_score:
            best_score, best = score, i
    return best == index


def answer(model, sp, cls_id, sep_id, question, context):
    q_ids = sp.encode(question)[:SEQ_LENGTH - 4]
    c_ids, offsets, lone = pieces_with_offsets(sp, context)
    spans = windows(len(c_ids), SEQ_LENGTH - 3 - len(q_ids))
    null, candidates = np.inf, []
    for w, (first, count) in enumerate(spans):
        ids = [cls_id, *q_ids, sep_id, *c_ids[first:first + count], sep_id]
        types = [0] * (len(q_ids) + 2) + [1] * (count + 1)
        with torch.no_grad():
            out = model(input_ids=torch.tensor([ids]), token_type_ids=torch.tensor([types]),
                        attention_mask=torch.ones(1, len(ids), dtype=torch.long))
        start, end = out.start_logits[0].numpy(), out.end_logits[0].numpy()
        null = min(null, start[0] + end[0])
        offset = len(q_ids) + 2
        context_positions = list(range(offset, offset + count))
        starts = [p for p in context_positions if is_max_context(spans, w, first + p - offset)]
        starts = sorted(starts, key=lambda p: -start[p])[:N_BEST]
        ends = sorted(context_positions, key=lambda p: -end[p])[:N_BEST]
        for s in starts:
            for e in ends:
                a, b = first + s - offset, first + e - offset
                if s <= e < s + MAX_ANSWER_LENGTH and not lone[a] and not lone[b]:
                    candidates.append((start[s] + end[e], a, b))
    case = {"question": question, "context": context, "windows": len(spans)}
    if not candidates:
        return {**case, "span_text": "", "answer": "", "null_score_diff": None}
    score, a, b = max(candidates, key=lambda c: c[0])
    text = context[offsets[a][0]:offsets[b][1]].strip()
    diff = float(null - score)
    return {**case, "span_text": text, "answer": text if diff <= THRESHOLD else "",
            "null_score_diff": diff}


def reference_model():
    """The QA fixture's transformers model (float64, deterministic) and its tokenizer."""
    torch.use_deterministic_algorithms(True)
    model = transformers.AlbertForQuestionAnswering.from_pretrained(HF_DIR).double().eval()
    return model, transformers.AlbertTokenizer.from_pretrained(HF_DIR)


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=OUT)
    args = parser.parse_args(argv)
    model, tokenizer = reference_model()
    sp = spm.SentencePieceProcessor(model_file=os.path.join(HF_DIR, "spiece.model"))
    rng = random.Random(37)
    cases = []
    while len(cases) < CASES:
        context = " ".join(rng.choice(SENTENCES) for _ in range(rng.randint(4, 30)))
        case = answer(model, sp, tokenizer.cls_token_id, tokenizer.sep_token_id,
                      rng.choice(QUESTIONS), context)
        if 3 <= case["windows"] <= 10:
            cases.append(case)
    settings = {"seq_length": SEQ_LENGTH, "doc_stride": DOC_STRIDE, "n_best": N_BEST,
                "max_answer_length": MAX_ANSWER_LENGTH, "null_score_diff_threshold": THRESHOLD,
                "transformers": transformers.__version__, "torch": torch.__version__,
                "sentencepiece": spm.__version__}
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump({"settings": settings, "cases": cases}, f, indent=1)
        f.write("\n")
    counts = [c["windows"] for c in cases]
    print(f"wrote {args.out}: {len(cases)} cases, {min(counts)}-{max(counts)} windows, "
          f"{sum(bool(c['answer']) for c in cases)} answered")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
