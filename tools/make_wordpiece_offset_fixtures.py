"""Writes the WordPiece offset reference: BertTokenizerFast's offsets into the raw text.

Reads the lines and the vocabulary of tests/fixtures/wordpiece (written by
tools/make_wordpiece_fixtures.py) and writes tests/fixtures/wordpiece/offsets.json.gz:

  {"transformers": VERSION, "forms": {FORM: {"options": {...}, "ids": [[ids]...],
   "offsets": [[[start, end]...]...]}}}

for the four forms of parity.json.gz: each line's ids without [CLS]/[SEP] and each
token's (start, end) characters in the line, from transformers' BertTokenizerFast
(the Rust `tokenizers` BertNormalizer + BertPreTokenizer + WordPiece, which track every
normalisation step's alignment), "[CLS]" typed in the text split as text
(split_special_tokens=True).

    /work/refvenv/bin/python tools/make_wordpiece_offset_fixtures.py

Needs transformers and tokenizers. Deterministic.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import sys
import tempfile

import transformers

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURE = os.path.join(os.path.dirname(HERE), "tests", "fixtures", "wordpiece")


def reference_offsets(vocab_path: str, lines: list[str], options: dict) -> dict:
    """Each line's ids and character offsets from BertTokenizerFast."""
    fast = transformers.BertTokenizerFast(vocab_path, split_special_tokens=True, **options)
    ids, offsets = [], []
    for line in lines:
        encoded = fast(line, add_special_tokens=False, return_offsets_mapping=True)
        ids.append(encoded["input_ids"])
        offsets.append([list(pair) for pair in encoded["offset_mapping"]])
    return {"options": options, "ids": ids, "offsets": offsets}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fixture", default=FIXTURE)
    args = parser.parse_args(argv)
    with gzip.open(os.path.join(args.fixture, "parity.json.gz"), "rt", encoding="utf-8") as f:
        parity = json.load(f)
    vocab_path = os.path.join(args.fixture, "vocab.txt")
    forms = {name: reference_offsets(vocab_path, parity["lines"], form["options"])
             for name, form in parity["forms"].items()}
    payload = {"transformers": transformers.__version__, "forms": forms}
    data = json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode()
    with tempfile.NamedTemporaryFile("wb", dir=args.fixture, delete=False) as f:
        f.write(gzip.compress(data, mtime=0))
    os.chmod(f.name, 0o644)
    os.replace(f.name, os.path.join(args.fixture, "offsets.json.gz"))
    for name, form in forms.items():
        print(f"{name}: {len(form['ids'])} lines", file=sys.stderr)


if __name__ == "__main__":
    main()
