"""Answers from an exported ALBERT SavedModel, as a fresh serving process sees it.

Run as a script (`python demo_answers.py SAVED_MODEL_DIR`), not imported: it loads
the SavedModel with nothing but TensorFlow and tensorflow-text (which registers the
SentencePiece ops), exactly what TF Serving has, and prints one JSON line.
"""

import json
import sys

import numpy as np
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the ops the in-graph tokenizer uses)

FILL_MASK = [
    "the [MASK] statement is used to define a function.",
    "a list is a mutable [MASK] of items.",
    "this module provides access to the [MASK] system.",
    "if the file does not exist, an [MASK] is raised.",
]
SIMILARITY = [
    ("return a new list sorted in ascending order.", "sort the items of the list."),
    ("return a new list sorted in ascending order.", "the socket is closed when the server stops."),
    ("open the file for reading.", "read the contents of a file."),
    ("open the file for reading.", "an integer is divided by zero."),
]


def main(path: str) -> None:
    model = tf.saved_model.load(path)
    fill = model.signatures["fill_mask"](text=tf.constant(FILL_MASK))
    answers = []
    for i, text in enumerate(FILL_MASK):
        # "▁" marks a word start in SentencePiece pieces; show the word itself.
        tokens = [t.decode().replace("\u2581", "") for t in fill["top_k_tokens"][i, 0, :3].numpy()]
        scores = [float(s) for s in fill["top_k_scores"][i, 0, :3].numpy()]
        answers.append({"text": text, "tokens": tokens, "scores": scores})
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
    print(json.dumps({"fill_mask": answers, "similarity": pairs}))


if __name__ == "__main__":
    main(sys.argv[1])
