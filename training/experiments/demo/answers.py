"""Answers from the demo's exported SavedModels, as a fresh serving process sees them.

Run as a script, not imported: it loads the SavedModels with nothing but TensorFlow
and tensorflow-text (which registers the SentencePiece ops), exactly what TF
Serving has, feeds them raw sentences and prints one JSON line:

    python answers.py --encoder ENCODER_DIR [--classifier CLASSIFIER_DIR]
        [--heldout CLASSIFY_HELDOUT.jsonl] [--questions QUESTIONS.json]

--questions: a JSON list of {"text": "... [MASK] ...", "answer": "word"}; each is
scored as a hit when the answer is among the top 5 words for its [MASK].
"""

import argparse
import json

import numpy as np
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the ops the in-graph tokenizer uses)

# Shown to the user: documentation-style sentences written for the demo (not taken
# from the corpus), with the word that was masked.
FILL_MASK = [
    ("the [MASK] statement is used to define a function.", "def"),
    ("a list is a mutable sequence of [MASK].", "items"),
    ("if the file does not exist, an [MASK] is raised.", "exception"),
    ("return a new list containing the [MASK] of the dictionary.", "keys"),
    ("this method returns true if the string is [MASK].", "empty"),
]
# Unseen sentences for the classifier (written for the demo, one per class).
CLASSIFY = [
    "the event loop schedules the coroutine and returns a future for its result.",
    "set the content type header of the message before sending it to the mail server.",
    "the loader finds the module spec and executes the module in its namespace.",
    "open the url and read the response body sent by the web server.",
    "parse the document and return the root element of the tree.",
    "a class definition creates a new type whose instances share its attributes.",
]
SIMILARITY = [
    ("return a new list sorted in ascending order.", "sort the items of the list."),
    ("return a new list sorted in ascending order.", "the socket is closed when the server stops."),
    ("open the file for reading.", "read the contents of a file."),
    ("open the file for reading.", "an integer is divided by zero."),
]
BATCH = 64


def _words(tokens) -> list[str]:
    # "▁" marks a word start in SentencePiece pieces; show the word itself (a bare
    # "▁", a word start whose word is in the next pieces, stays as it is).
    return [t.decode().replace("\u2581", "") or t.decode() for t in tokens]


def fill_mask(model, texts: list[str]) -> list[dict]:
    out = model.signatures["fill_mask"](text=tf.constant(texts))
    rows = []
    for i, text in enumerate(texts):
        rows.append({"text": text, "tokens": _words(out["top_k_tokens"][i, 0].numpy()),
                     "scores": [float(s) for s in out["top_k_scores"][i, 0].numpy()]})
    return rows


def score_questions(model, questions: list[dict]) -> dict:
    rows = fill_mask(model, [q["text"] for q in questions])
    for row, q in zip(rows, questions):
        row["answer"] = q["answer"]
        row["hit"] = q["answer"].lower() in [t.lower() for t in row["tokens"]]
    hits = sum(r["hit"] for r in rows)
    return {"questions": len(rows), "top5_hits": hits, "top5_rate": hits / len(rows),
            "rows": rows}


def similarity(model) -> list[dict]:
    encode = model.signatures["serving_default"]
    pairs = []
    for a, b in SIMILARITY:
        out = encode(text=tf.constant([a, b]))
        # Mean of the token embeddings over real tokens: the sentence embedding.
        mask = out["input_mask"].numpy()[..., None].astype("float32")
        pooled = (out["sequence_output"].numpy() * mask).sum(1) / mask.sum(1)
        cosine = float(np.dot(pooled[0], pooled[1])
                       / (np.linalg.norm(pooled[0]) * np.linalg.norm(pooled[1]) + 1e-9))
        pairs.append({"a": a, "b": b, "score": cosine})
    return pairs


def classify(model, texts: list[str]) -> list[dict]:
    signature = model.signatures["serving_default"]
    rows = []
    for start in range(0, len(texts), BATCH):
        out = signature(text=tf.constant(texts[start:start + BATCH]))
        for label, probs in zip(out["label"].numpy(), out["probabilities"].numpy()):
            rows.append({"label": label.decode(), "probability": float(probs.max())})
    return rows


def heldout_accuracy(model, path: str) -> dict:
    with open(path, encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    predicted = classify(model, [r["text"] for r in rows])
    correct = sum(p["label"] == r["label"] for p, r in zip(predicted, rows))
    return {"examples": len(rows), "accuracy": correct / len(rows)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--encoder", required=True)
    parser.add_argument("--classifier")
    parser.add_argument("--heldout")
    parser.add_argument("--questions")
    args = parser.parse_args()
    encoder = tf.saved_model.load(args.encoder)
    fills = fill_mask(encoder, [t for t, _ in FILL_MASK])
    for row, (_, answer) in zip(fills, FILL_MASK):
        row["answer"] = answer
    answers = {"fill_mask": fills, "similarity": similarity(encoder)}
    if args.questions:
        with open(args.questions, encoding="utf-8") as f:
            answers["questions"] = score_questions(encoder, json.load(f))
    if args.classifier:
        classifier = tf.saved_model.load(args.classifier)
        labelled = classify(classifier, CLASSIFY)
        answers["classify"] = [{"text": t, **row} for t, row in zip(CLASSIFY, labelled)]
        if args.heldout:
            answers["classifier_heldout"] = heldout_accuracy(classifier, args.heldout)
    print(json.dumps(answers))


if __name__ == "__main__":
    main()
