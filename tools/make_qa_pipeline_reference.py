"""Writes tests/fixtures/tasks/qa/pipeline_options.json: transformers' question-answering
pipeline's answers (top_k, max_answer_len, handle_impossible_answer, align_to_words) for
Hugging Face's AlbertForQuestionAnswering (tests/fixtures/tasks/qa/hf, random weights) on
contexts of one window, decoded independently of albert-tf.

Nothing here imports albert_tf. transformers 5 dropped the question-answering pipeline
class; its decoding lives on in `transformers.pipelines.document_question_answering`
(`select_starts_ends`, `decode_spans`: the softmax per window, [CLS]'s null score, the
top_k spans of at most max_answer_len tokens), which this script calls, and the 4.x
pipeline's read-out is written out below (`read_out`: a token span to characters, whole
words through the fast tokenizer's `token_to_word` / `word_to_chars` when
align_to_words, the empty answer appended with the null score, sorted by score, top_k).
Each answer records whether its span begins or ends on a lone "▁" piece (which
transformers' offsets give the next character; albert-tf never answers with one), and
each case the softmax normalisers (`log_z`: log-sum-exp of the masked start
and end logits), so a span's logit score s + e maps to the pipeline's probability
exp(s + e - log_z).

`windows` records how transformers' tokenizer cuts a long context with
`return_overflowing_tokens=True, stride=overlap` (the pipeline's doc_stride): each
window's first context piece and count.

Run:
    /work/refvenv/bin/python tools/make_qa_pipeline_reference.py   # -> tests/fixtures/...
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys

import numpy as np
import torch
import transformers

# The long-context reference's sentences and questions (its vocabulary's corpus; tools/ is
# on sys.path when a tool runs).
from make_long_qa_reference import QUESTIONS, SENTENCES, reference_model
from transformers.pipelines.document_question_answering import select_starts_ends

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HF_DIR = os.path.join(REPO, "tests", "fixtures", "tasks", "qa", "hf")
OUT = os.path.join(REPO, "tests", "fixtures", "tasks", "qa", "pipeline_options.json")
SEQ_LENGTH = 64
CASES = 30
# The option sets (the pipeline's names and its defaults where not given).
OPTIONS = [
    {"top_k": 1, "max_answer_len": 15, "handle_impossible_answer": False, "align_to_words": True},
    {"top_k": 3, "max_answer_len": 4, "handle_impossible_answer": True, "align_to_words": True},
    {"top_k": 2, "max_answer_len": 6, "handle_impossible_answer": True, "align_to_words": False},
    {"top_k": 4, "max_answer_len": 2, "handle_impossible_answer": False, "align_to_words": False},
    # every span of a short context listed: where the empty answer falls among them
    {"top_k": 60, "max_answer_len": 2, "handle_impossible_answer": True, "align_to_words": False},
]


def read_out(enc, context, starts, ends, scores, null, options):
    """The 4.x QuestionAnsweringPipeline.postprocess for one window (question first)."""
    answers = []
    for s, e, score in zip(starts, ends, scores):
        start, end = enc.offsets[s][0], enc.offsets[e][1]
        if options["align_to_words"]:
            try:
                start = enc.word_to_chars(enc.token_to_word(s), sequence_index=1)[0]
                end = enc.word_to_chars(enc.token_to_word(e), sequence_index=1)[1]
            except Exception:  # noqa: BLE001 - the pipeline's own fallback
                pass
        # A lone "▁" piece (its offset: the next character) begins or ends the span.
        lone = any(enc.tokens[t] == "\u2581" for t in (s, e))
        answers.append({"score": float(score), "start": int(start), "end": int(end),
                        "answer": context[start:end], "lone_underline": lone})
    if options["handle_impossible_answer"]:
        answers.append({"score": float(null), "start": 0, "end": 0, "answer": ""})
    return sorted(answers, key=lambda a: a["score"], reverse=True)[:options["top_k"]]


def case(model, tokenizer, question, context):
    enc = tokenizer(question, context, truncation="only_second", max_length=SEQ_LENGTH,
                    return_overflowing_tokens=True, stride=0)
    if len(enc.encodings) != 1:
        return None  # one window per case
    encoding = enc.encodings[0]
    assert encoding.type_ids == [int(sid == 1) for sid in encoding.sequence_ids[:-1]] + [1]
    ids = enc["input_ids"][0]
    with torch.no_grad():
        out = model(input_ids=torch.tensor([ids]),
                    token_type_ids=torch.tensor([encoding.type_ids]),
                    attention_mask=torch.tensor([encoding.attention_mask]))
    start, end = out.start_logits.numpy(), out.end_logits.numpy()  # [1, T]
    # The pipeline's p_mask: 1 where a token is not the context's, [CLS] (index 0) allowed.
    p_mask = np.array([[sid != 1 for sid in encoding.sequence_ids]], np.int64)
    p_mask[0, 0] = 0
    attention = np.array([encoding.attention_mask])
    undesired = (np.abs(p_mask - 1) & attention) == 0
    log_z = [float(np.log(np.exp(np.where(undesired, -10000.0, x)).sum()))
             for x in (start, end)]
    results = []
    for options in OPTIONS:
        starts, ends, scores, null = select_starts_ends(
            start, end, p_mask, attention, top_k=options["top_k"],
            handle_impossible_answer=options["handle_impossible_answer"],
            max_answer_len=options["max_answer_len"])
        results.append(read_out(encoding, context, starts, ends, scores, null, options))
    return {"question": question, "context": context, "log_z": sum(log_z), "answers": results}


def overflow_windows(tokenizer, question, context, overlap):
    """The windows transformers' tokenizer cuts a long context into with `stride=overlap`
    (what its question-answering pipeline calls doc_stride): (first context piece, count)
    each, with the question's pieces and the context's."""
    enc = tokenizer(question, context, truncation="only_second", max_length=SEQ_LENGTH,
                    return_overflowing_tokens=True, stride=overlap)
    whole = tokenizer(context, add_special_tokens=False, return_offsets_mapping=True)
    offsets = [tuple(o) for o in whole["offset_mapping"]]
    spans = []
    for encoding in enc.encodings:
        mine = [tuple(o) for o, sid in zip(encoding.offsets, encoding.sequence_ids) if sid == 1]
        first = next(i for i in range(len(offsets)) if offsets[i:i + len(mine)] == mine)
        spans.append([first, len(mine)])
    query = sum(sid == 0 for sid in enc.encodings[0].sequence_ids)
    return {"question": question, "context": context, "overlap": overlap,
            "question_pieces": query, "context_pieces": len(offsets), "windows": spans}


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=OUT)
    args = parser.parse_args(argv)
    model, tokenizer = reference_model()
    rng = random.Random(41)
    cases = []
    while len(cases) < CASES:
        found = case(model, tokenizer, rng.choice(QUESTIONS),
                     " ".join(rng.choice(SENTENCES) for _ in range(rng.randint(1, 3) if len(cases) % 3 else 1)))
        cases += [found] if found else []
    long = " ".join(rng.choice(SENTENCES) for _ in range(20))
    windows = [overflow_windows(tokenizer, question, long, overlap)
               for question in QUESTIONS[:2] for overlap in (0, 8, 20, 40)]
    settings = {"seq_length": SEQ_LENGTH, "options": OPTIONS,
                "transformers": transformers.__version__, "torch": torch.__version__}
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump({"settings": settings, "cases": cases, "windows": windows}, f, indent=1)
        f.write("\n")
    empty = sum(a["answer"] == "" for c in cases for row in c["answers"] for a in row)
    print(f"wrote {args.out}: {len(cases)} cases x {len(OPTIONS)} option sets, {empty} empty "
          "answers listed")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
