"""Writes tests/fixtures/real_spm_json/ids.json.gz: transformers 5 on the tokenizer.json it
makes of a real 30k ALBERT-convention SentencePiece model.

The model is tests/data/real/google_albert/albertvi_30k-clean.model (its source in
tests/data/real/README.md; a 30,000-piece unigram model with SentencePiece's nmt_nfkc
character map). transformers' AlbertTokenizer (lower-cased, accents stripped: the
released models' options) loads it as spiece.model and saves its tokenizer.json; the
record holds that file's SHA-256 (of its JSON with sorted keys, so the test can check
that `albert_tf.tokenizer.json_of_spm` makes the same file) and transformers' ids (no
special tokens) on `make_tokenizer_json_fixtures`' lines (ordinary English and Chinese,
then `HARD_CASES`) and a few Vietnamese ones.

    /work/refvenv/bin/python tools/make_real_spm_json_fixtures.py

Needs transformers 5. Deterministic.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import shutil
import sys
import tempfile

import transformers

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
MODEL = os.path.join(ROOT, "tests", "data", "real", "google_albert", "albertvi_30k-clean.model")
OUT = os.path.join(ROOT, "tests", "fixtures", "real_spm_json", "ids.json.gz")
VIETNAMESE = ["Tiếng Việt là ngôn ngữ chính thức của Việt Nam.",
              "Hà Nội (thủ đô) - TP. Hồ Chí Minh, 1.000.000 người.",
              "Tôi yêu [MASK] nhiều lắm!"]


def canonical_sha256(value) -> str:
    """SHA-256 of a JSON value written with sorted keys (the test computes it alike)."""
    text = json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def main() -> None:
    sys.path.insert(0, HERE)
    from make_tokenizer_json_fixtures import ORDINARY

    sys.path.insert(0, ROOT)
    from tests.helpers.tokenizer_cases import HARD_CASES

    lines = ORDINARY + [line for line in HARD_CASES if line not in ORDINARY] + VIETNAMESE
    with tempfile.TemporaryDirectory() as tmp:
        shutil.copyfile(MODEL, os.path.join(tmp, "spiece.model"))
        with open(os.path.join(tmp, "tokenizer_config.json"), "w", encoding="utf-8") as f:
            json.dump({"tokenizer_class": "AlbertTokenizer", "do_lower_case": True,
                       "keep_accents": False}, f)
        tokenizer = transformers.AutoTokenizer.from_pretrained(tmp)
        saved = os.path.join(tmp, "saved")
        tokenizer.save_pretrained(saved)
        with open(os.path.join(saved, "tokenizer.json"), encoding="utf-8") as f:
            written = json.load(f)
        tokenizer = transformers.AutoTokenizer.from_pretrained(saved)  # the saved file's rules
    record = {"transformers": transformers.__version__, "do_lower_case": True,
              "keep_accents": False, "tokenizer_json_sha256": canonical_sha256(written),
              "lines": lines,
              "ids": [tokenizer(line, add_special_tokens=False)["input_ids"] for line in lines]}
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with gzip.GzipFile(OUT, "wb", mtime=0) as raw:
        raw.write(json.dumps(record, ensure_ascii=False).encode("utf-8"))
    print(f"wrote {OUT}: {len(lines)} lines")


if __name__ == "__main__":
    main()
