"""Writes tests/fixtures/hf_readers/record.json.gz: what transformers 4 and 5 read from the
directories `albert-tf convert --to hf` writes.

Each source fixture (written by transformers itself) is converted with the project's
`albert-tf convert SRC DST --to hf`; then every given Python (one with transformers 5,
one with transformers 4) loads each written directory with `AutoTokenizer` and
`AutoModelForSequenceClassification` and records, on the lines of
`make_tokenizer_json_fixtures` (ordinary English and Chinese text, then the project's
`HARD_CASES`), the ids (no special tokens) and, for the ordinary lines packed to 32 tokens,
the model's probabilities (float64). The reference is transformers 5 on the source
directory, and its tokenizer.json of the spiece.model. The record also holds the written directory's file names, config.json and
tokenizer_config.json, so the test (`tests/checkpoint/test_hf_readers.py`) can check that
`convert --to hf` still writes what was read here.

    /work/refvenv/bin/python tools/make_hf_reader_fixtures.py \\
        --albert-tf .venv/bin/albert-tf --reader /work/hf4venv/bin/python

The first Python (this one) must have transformers 5 and torch; `--reader` adds others
(transformers 4: a virtualenv with `transformers>=4.40,<5` whose .pth points at this
one's site-packages for torch). Deterministic.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
FIXTURES = os.path.join(ROOT, "tests", "fixtures")
# name -> source directory (under tests/fixtures), each saved by transformers
SOURCES = {
    "sentencepiece": "tasks/seq_single/hf",  # spiece.model + tokenizer_config.json (v4's form)
    "wordpiece": "wordpiece/hf",  # vocab.txt + tokenizer_config.json (BertTokenizer)
    "tokenizer_json_unigram": "tokenizer_json/albert",  # transformers 5: tokenizer.json only
    "tokenizer_json_wordpiece": "tokenizer_json/bert",
}
SEQ_LENGTH = 32
OUT = os.path.join(FIXTURES, "hf_readers", "record.json.gz")


def measure(directories: dict[str, str], lines: list[str], ordinary: int) -> dict:
    """transformers' ids and probabilities for each directory (run in the reader's Python)."""
    import torch
    import transformers

    out = {"transformers": transformers.__version__, "tokenizers": {}}
    for name, directory in directories.items():
        tokenizer = transformers.AutoTokenizer.from_pretrained(directory)
        model = transformers.AutoModelForSequenceClassification.from_pretrained(directory)
        packed = tokenizer(lines[:ordinary], padding="max_length", truncation=True,
                           max_length=SEQ_LENGTH, return_tensors="pt")
        with torch.no_grad():
            logits = model.eval().double()(**packed).logits
        out["tokenizers"][name] = {
            "class": type(tokenizer).__name__,
            "ids": [tokenizer(line, add_special_tokens=False)["input_ids"] for line in lines],
            "packed": packed["input_ids"].tolist(),
            "probabilities": torch.softmax(logits, -1).tolist()}
    return out


def transformers_tokenizer_json(directory: str) -> dict:
    import transformers

    tokenizer = transformers.AutoTokenizer.from_pretrained(directory)
    return json.loads(tokenizer.backend_tokenizer.to_str())


def _run_reader(python: str, directories: dict[str, str], lines: list[str], ordinary: int,
                tmp: str) -> dict:
    request = os.path.join(tmp, "request.json")
    with open(request, "w", encoding="utf-8") as f:
        json.dump({"directories": directories, "lines": lines, "ordinary": ordinary}, f)
    done = subprocess.run([python, os.path.abspath(__file__), "--measure", request],
                          check=True, capture_output=True, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--albert-tf", help="the project's albert-tf command")
    parser.add_argument("--reader", action="append", default=[],
                        help="another Python with transformers (repeatable)")
    parser.add_argument("--measure", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        with open(args.measure, encoding="utf-8") as f:
            request = json.load(f)
        print(json.dumps(measure(request["directories"], request["lines"], request["ordinary"])))
        return
    sys.path.insert(0, HERE)
    from make_tokenizer_json_fixtures import ORDINARY

    sys.path.insert(0, ROOT)
    from tests.helpers.tokenizer_cases import HARD_CASES

    lines = ORDINARY + [line for line in HARD_CASES if line not in ORDINARY]
    with tempfile.TemporaryDirectory() as tmp:
        written = {}
        for name, source in SOURCES.items():
            written[name] = os.path.join(tmp, name)
            subprocess.run([args.albert_tf, "convert", os.path.join(FIXTURES, source),
                            written[name], "--to", "hf"], check=True, capture_output=True)
        sources = {name: os.path.join(FIXTURES, source) for name, source in SOURCES.items()}
        record = {"lines": lines, "ordinary": len(ORDINARY), "seq_length": SEQ_LENGTH,
                  "sources": SOURCES,
                  "reference": measure(sources, lines, len(ORDINARY)),
                  "written": {}, "readers": []}
        # transformers 5's own tokenizer.json of the spiece.model (what ours must equal)
        spm_source = transformers_tokenizer_json(sources["sentencepiece"])
        record["reference"]["sentencepiece_tokenizer_json"] = spm_source
        for name, directory in written.items():
            record["written"][name] = {
                "files": sorted(os.listdir(directory)),
                **{key: json.load(open(os.path.join(directory, key + ".json"), encoding="utf-8"))
                   for key in ("config", "tokenizer_config")}}
        for python in [sys.executable, *args.reader]:
            record["readers"].append(_run_reader(python, written, lines, len(ORDINARY), tmp))
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with gzip.GzipFile(OUT, "wb", mtime=0) as raw:
        raw.write(json.dumps(record, ensure_ascii=False).encode("utf-8"))
    for reader in record["readers"]:
        for name, got in reader["tokenizers"].items():
            want = record["reference"]["tokenizers"][name]
            same = sum(a == b for a, b in zip(got["ids"], want["ids"]))
            worst = max(abs(a - b) for p, q in zip(got["probabilities"], want["probabilities"])
                        for a, b in zip(p, q))
            print(f"transformers {reader['transformers']} {name}: {got['class']}, ids equal on "
                  f"{same}/{len(lines)} lines, probabilities within {worst:.1e}")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
