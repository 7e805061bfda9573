"""Writes the WordPiece reference fixtures: ids from transformers' BertTokenizer.

Under tests/fixtures/wordpiece/:

  vocab.txt     a small Chinese-style vocabulary built here: [PAD], [unused*], [UNK],
                [CLS], [SEP], [MASK] first (the Chinese BERT/ALBERT order), then single
                characters (CJK ideographs, kana, hangul, Latin, symbols) with "##"
                forms, whole frequent words and "##" word endings, taken from the parity
                lines' words as BertTokenizer splits them; every eleventh character is
                left out so [UNK] paths occur.
  parity.json.gz {"lines": [...], "forms": {FORM: {"options": {...}, "bert": [[ids]...],
                "legacy": [[ids]...]}}}: for each form (uncased, cased, uncased with
                accents kept, uncased without CJK splitting) the ids of
                transformers.BertTokenizer (Rust `tokenizers`, what transformers 5 loads
                for tokenizer_class BertTokenizer) and of BertTokenizerLegacy (the Python
                one, its basic and wordpiece tokenizers composed as the original FullTokenizer does),
                "[CLS]" typed in the text split as text in both (split_special_tokens=True).

The lines are the project's tokenizer parity lines (`tests/helpers/tokenizer_cases.py`:
`parity_lines` over the embedded corpus, `HARD_CASES`, `WORDPIECE_CASES`), produced by the
project's own interpreter (`--project-python`) and stored in the fixture, so the test
reads the same text whatever packages it has.

    /work/refvenv/bin/python tools/make_wordpiece_fixtures.py   # -> tests/fixtures/wordpiece

Needs transformers and tokenizers (not torch for this part). Deterministic.
"""

from __future__ import annotations

import argparse
import collections
import gzip
import json
import os
import subprocess
import sys
import tempfile

import transformers

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

FORMS = {
    "uncased": dict(do_lower_case=True),
    "cased": dict(do_lower_case=False),
    "uncased_accents": dict(do_lower_case=True, strip_accents=False),
    "uncased_no_cjk_split": dict(do_lower_case=True, tokenize_chinese_chars=False),
}
HEAD = ["[PAD]"] + [f"[unused{i}]" for i in range(1, 10)] + ["[UNK]", "[CLS]", "[SEP]", "[MASK]"]

_LINES_PROGRAM = """
import json, sys
from albert_tf.training.data.embedded import embedded_documents
from tests.helpers.tokenizer_cases import WORDPIECE_CASES, parity_lines
docs = list(embedded_documents(max_documents=300))
lines = parity_lines(docs, real=600, variants=600, long_lines=8) + WORDPIECE_CASES
json.dump(lines, sys.stdout)
"""


def project_lines(python: str) -> list[str]:
    """The parity lines, made by the project's interpreter from its own helpers."""
    out = subprocess.run([python, "-c", _LINES_PROGRAM], cwd=ROOT, check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out)


def build_vocab(lines: list[str]) -> list[str]:
    """A deterministic Chinese-style vocabulary from the lines' words (see module doc)."""
    basic = transformers.models.bert.tokenization_bert_legacy.BasicTokenizer
    words = collections.Counter()
    for lower in (True, False):
        tokenizer = basic(do_lower_case=lower)
        for line in lines:
            words.update(tokenizer.tokenize(line))
    chars = collections.Counter(c for w, n in words.items() for c in w for _ in range(n))
    ordered_chars = [c for c, _ in sorted(chars.items(), key=lambda kv: (-kv[1], kv[0]))]
    kept_chars = [c for i, c in enumerate(ordered_chars) if i % 11 != 10]
    frequent = [w for w, _ in sorted(words.items(), key=lambda kv: (-kv[1], kv[0]))
                if len(w) > 1][:900]
    whole = frequent[:600]
    endings = sorted({"##" + w[k:] for w in frequent[:400] for k in (2, 3) if len(w) > k + 1})
    vocab, seen = [], set()
    for token in HEAD + kept_chars + ["##" + c for c in kept_chars] + whole + endings:
        if token not in seen and token.strip() == token and token:
            seen.add(token)
            vocab.append(token)
    return vocab


def reference_ids(vocab_path: str, lines: list[str], options: dict) -> dict:
    """Each line's ids (no [CLS]/[SEP]) from BertTokenizer and BertTokenizerLegacy.

    The legacy tokenizer is run as the original FullTokenizer composes it (its
    `basic_tokenizer`, then its `wordpiece_tokenizer` on each word): its `tokenize`
    keeps "[CLS]" typed in the text whole even with split_special_tokens=True.
    """
    fast = transformers.BertTokenizer(vocab_path, split_special_tokens=True, **options)
    legacy = transformers.models.bert.tokenization_bert_legacy.BertTokenizerLegacy(
        vocab_path, **options)

    def legacy_ids(line: str) -> list[int]:
        words = legacy.basic_tokenizer.tokenize(line)
        return legacy.convert_tokens_to_ids(
            [piece for word in words for piece in legacy.wordpiece_tokenizer.tokenize(word)])

    return {"bert": [fast.encode(line, add_special_tokens=False) for line in lines],
            "legacy": [legacy_ids(line) for line in lines]}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.path.join(ROOT, "tests", "fixtures", "wordpiece"))
    parser.add_argument("--project-python", default=os.path.join(ROOT, ".venv", "bin", "python"))
    args = parser.parse_args(argv)
    lines = project_lines(args.project_python)
    vocab = build_vocab(lines)
    os.makedirs(args.out, exist_ok=True)
    vocab_path = os.path.join(args.out, "vocab.txt")
    with open(vocab_path, "w", encoding="utf-8", newline="\n") as f:
        f.write("".join(token + "\n" for token in vocab))
    forms = {name: {"options": options, **reference_ids(vocab_path, lines, options)}
             for name, options in FORMS.items()}
    payload = {"transformers": transformers.__version__, "lines": lines, "forms": forms}
    data = json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode()
    with tempfile.NamedTemporaryFile("wb", dir=args.out, delete=False) as f:
        f.write(gzip.compress(data, mtime=0))
    os.chmod(f.name, 0o644)
    os.replace(f.name, os.path.join(args.out, "parity.json.gz"))
    for name, form in forms.items():
        differ = sum(a != b for a, b in zip(form["bert"], form["legacy"]))
        print(f"{name}: {len(lines)} lines, BertTokenizer and BertTokenizerLegacy differ on "
              f"{differ}", file=sys.stderr)
    print(f"vocab.txt: {len(vocab)} tokens", file=sys.stderr)


if __name__ == "__main__":
    main()
