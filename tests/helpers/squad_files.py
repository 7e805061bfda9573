"""SQuAD JSON files as the released train/dev files lay them out, for the tests."""

from __future__ import annotations

import json


def write_squad_json(path, rows, version_two: bool = False) -> str:
    """Writes rows of (id, context, question, answer or None) as one SQuAD file (v1.1, or
    v2.0 with is_impossible); the answer's start is its first occurrence in the context."""
    paragraphs = []
    for qid, context, question, answer in rows:
        answers = [] if answer is None else [{"text": answer, "answer_start": context.index(answer)}]
        qa = {"id": qid, "question": question, "answers": answers}
        if version_two:
            qa["is_impossible"] = answer is None
        paragraphs.append({"context": context, "qas": [qa]})
    with open(path, "w", encoding="utf-8") as f:
        json.dump({"version": "2.0" if version_two else "1.1",
                   "data": [{"title": "t", "paragraphs": paragraphs}]}, f)
    return str(path)
