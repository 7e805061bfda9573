"""How far tensorflow-text's LiteRT WordPiece kernels are from BERT's rules: a measurement.

LiteRT runs no string op but the TF-Text kernels its registrar adds; for WordPiece those are
`FastBertNormalize` and `FastWordpieceTokenize`, composed by `tf_text.FastBertTokenizer`
(its own lower-casing + NFD accent stripping, then whitespace, punctuation and CJK
splitting). This runs that tokenizer (the same kernels, in TensorFlow) on the WordPiece
parity lines of tests/fixtures/wordpiece in the four forms and counts the lines whose ids
equal `WordPieceTokenizer.encode` (which equals transformers' BertTokenizer), printing a
few lines that differ; then the same with the normaliser model the export writes
(`serving/litert/wordpiece_model.normalizer_model`, BERT's rules as a character map).

    .venv/bin/python tools/wordpiece_litert_kernels.py
"""

from __future__ import annotations

import gzip
import json
import os
import sys

import tensorflow as tf
import tensorflow_text as tf_text

from albert_tf.serving.litert.text_graph import LiteText
from albert_tf.serving.litert.wordpiece_model import LiteWordPieceError
from albert_tf.tokenizer.wordpiece import MAX_WORD_CHARS, SUFFIX, UNK_TOKEN, WordPieceTokenizer

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURE = os.path.join(ROOT, "tests", "fixtures", "wordpiece")


def main() -> None:
    with gzip.open(os.path.join(FIXTURE, "parity.json.gz"), "rt", encoding="utf-8") as f:
        parity = json.load(f)
    lines = parity["lines"]
    for form, entry in parity["forms"].items():
        tok = WordPieceTokenizer(os.path.join(FIXTURE, "vocab.txt"), **entry["options"])
        kernels = tf_text.FastBertTokenizer(
            vocab=tok.tokens, suffix_indicator=SUFFIX, unknown_token=UNK_TOKEN,
            max_bytes_per_word=4 * MAX_WORD_CHARS + 4, token_out_type=tf.int64,
            lower_case_nfd_strip_accents=tok.do_lower_case)
        got = kernels.tokenize(tf.constant(lines)).to_list()
        differ = [line for line, ids in zip(lines, got) if ids != tok.encode(line)]
        print(f"{form} ({entry['options']}): {len(lines) - len(differ)} / {len(lines)} lines "
              "equal", file=sys.stderr)
        for line in differ[:8]:
            print(f"    {line[:70]!r}", file=sys.stderr)
        try:
            values, splits = LiteText(tok, 32).tokenize(tf.constant(lines))
        except LiteWordPieceError as e:
            print(f"  with the export's normaliser: refused ({e})", file=sys.stderr)
            continue
        values, splits = values.numpy().tolist(), splits.numpy().tolist()
        ours = [values[a:b] for a, b in zip(splits[:-1], splits[1:])]
        equal = sum(ids == tok.encode(line) for line, ids in zip(lines, ours))
        print(f"  with the export's normaliser: {equal} / {len(lines)} lines equal", file=sys.stderr)


if __name__ == "__main__":
    main()
