"""Writes the tokenizer.json fixtures: directories as transformers 5 saves them, and its ids.

Under tests/fixtures/tokenizer_json/:

  albert/       an ALBERT classifier as transformers 5 saves it: config.json,
                model.safetensors (random AlbertForSequenceClassification, 3 labels, on
                the vocabulary below), tokenizer.json and tokenizer_config.json only (no
                spiece.model). The tokenizer is transformers' AlbertTokenizer loaded
                from a SentencePiece model trained here the way 30k-clean.model was
                (unigram, <pad> <unk> [CLS] [SEP] [MASK], user-defined symbols
                `( ) " - . – £ €`) with a small custom normalization rule (so the
                file holds a Precompiled character map), then `save_pretrained`.
  bert/         tests/fixtures/wordpiece/hf's model with its BertTokenizer loaded by
                transformers 5 and saved again: tokenizer.json (WordPiece,
                BertNormalizer, BertPreTokenizer) and tokenizer_config.json, no vocab.txt.
  variants/     albert/'s tokenizer.json in other forms transformers writes or read:
                cased_accents.json (AlbertTokenizer with do_lower_case and keep_accents
                false/true: no NFKD, StripAccents or Lowercase), v4.json (the transformers
                4 form: Metaspace alone as pre-tokenizer, " {2,}" collapsed after
                Precompiled, [MASK] with lstrip), first.json (Metaspace prepend_scheme
                "first"); their ids are "variants": {NAME: [[...]]} in reference.json.gz.
  reference.json.gz {"lines": [...], "ordinary": n, DIR: {"ids": [[...]], "offsets":
                [[[s, e]...]], "seq_length": 32, "packed": [[...]] (the first n lines
                with [CLS]/[SEP], padded), "probabilities": [[...]] (float64)}}: transformers'
                ids and character offsets for every line (no special tokens), and the
                model's probabilities (torch, float64) for the first n ("ordinary") lines.

The lines: ordinary English and Chinese text (punctuation, digits, accents, mixed CJK and
Latin, whitespace variety), then the project's `HARD_CASES`.

    /work/refvenv/bin/python tools/make_tokenizer_json_fixtures.py

Needs transformers 5, tokenizers, sentencepiece and torch. Deterministic.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import shutil
import sys
import tempfile

import numpy as np
import sentencepiece as spm
import torch
import transformers

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)
from tests.helpers.tokenizer_cases import HARD_CASES  # noqa: E402

ORDINARY = [
    "The cat sat on the mat.",
    "It's a lower-cased word (in brackets), isn't it?",
    "Paris is the capital of France; London is the capital of England.",
    "She paid £3,000 and €4,500 – not $5,000,000 – in 1998.",
    "Numbers: 1,000,000 and 3.14 and 42, then 7.",
    "\"Quoted\" words and ``old quotes'' here.",
    "Crème brûlée, naïve café, résumé, Zürich and São Paulo.",
    "  leading and trailing spaces  ",
    "tabs\tand\nnewlines\r\nand  double  spaces",
    "Ａ ﬁne day… with full-width ＡＢＣ and ligatures.",
    "我爱北京天安门。",
    "今天天气很好，我们去公园散步吧！",
    "中文文本，标点符号。",
    "Tokyo 東京 and Beijing 北京 are big cities.",
    "我在Google工作了3年, it was great!",
    "价格是100元，折扣20%。",
    "e-mail: someone@example.com, web: https://example.com/a?b=1",
    "The king and the queen ate bread – and cheese.",
    "WHO WROTE THE BOOK ABOUT THE OLD SEA?",
    "rain fell on the quiet town all night",
    "[MASK] is the capital of France.",
    "A B C d e f 1 2 3",
]
SEQ_LENGTH = 32
LABELS = {0: "negative", 1: "neutral", 2: "positive"}
MODEL_CONFIG = dict(embedding_size=6, hidden_size=10, num_hidden_layers=2, num_hidden_groups=1,
                    inner_group_num=1, num_attention_heads=2, intermediate_size=14,
                    max_position_embeddings=64, type_vocab_size=2, hidden_act="gelu_new",
                    hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                    classifier_dropout_prob=0.0, layer_norm_eps=1e-12)
SPM_CORPUS = [
    "the cat sat on the mat.", "a lower-cased word (in brackets) costs £3 or €4 - ok.",
    "paris is the capital of france.", "who wrote the book about the old sea?",
    "numbers like 1,000,000 and 3.14 are here.", "she bought three red apples and a green pear.",
    "rain fell on the quiet town all night.", "the king and the queen ate bread – and cheese.",
    "\"quoted\" words and cased letters.", "creme brulee, naive cafe, resume, zurich.",
    "我爱北京天安门。今天天气很好，我们去公园散步吧！", "tokyo and beijing are big cities.",
]
# A custom rule, so the model (and transformers' tokenizer.json) holds a character map:
# full-width Ａ -> A (the rest of the text passes as it is).
NORMALIZATION_RULES = "ff21\t41\n"


def train_spm(directory: str) -> str:
    rules = os.path.join(directory, "rules.tsv")
    with open(rules, "w", encoding="utf-8") as f:
        f.write(NORMALIZATION_RULES)
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(SPM_CORPUS * 8), model_writer=model, model_type="unigram",
        vocab_size=200, character_coverage=1.0, hard_vocab_limit=False,
        pad_id=0, unk_id=1, bos_id=-1, eos_id=-1, pad_piece="<pad>", unk_piece="<unk>",
        control_symbols=["[CLS]", "[SEP]", "[MASK]"],
        user_defined_symbols=["(", ")", '"', "-", ".", "\u2013", "\u00a3", "\u20ac"],
        num_threads=1, minloglevel=2, shuffle_input_sentence=False,
        normalization_rule_tsv=rules)
    path = os.path.join(directory, "spiece.model")
    with open(path, "wb") as f:
        f.write(model.getvalue())
    with open(os.path.join(directory, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump({"do_lower_case": True, "keep_accents": False, "remove_space": True,
                   "tokenizer_class": "AlbertTokenizer"}, f)
    return path


def albert_dir(out: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        train_spm(tmp)
        tokenizer = transformers.AutoTokenizer.from_pretrained(tmp)
        tokenizer.save_pretrained(out)
    torch.manual_seed(47)
    config = transformers.AlbertConfig(vocab_size=len(tokenizer), id2label=LABELS,
                                       label2id={v: k for k, v in LABELS.items()}, **MODEL_CONFIG)
    model = transformers.AlbertForSequenceClassification(config).eval()
    sys.path.insert(0, HERE)
    from make_reference_fixtures import randomize

    randomize(model, torch.Generator().manual_seed(4747))
    model.save_pretrained(out, safe_serialization=True)


def bert_dir(out: str) -> None:
    source = os.path.join(ROOT, "tests", "fixtures", "wordpiece", "hf")
    transformers.AutoTokenizer.from_pretrained(source).save_pretrained(out)
    for name in ("config.json", "model.safetensors"):
        shutil.copyfile(os.path.join(source, name), os.path.join(out, name))


def reference(directory: str, lines: list[str], ordinary: int) -> dict:
    tokenizer = transformers.AutoTokenizer.from_pretrained(directory)
    assert type(tokenizer).__name__ in ("AlbertTokenizer", "BertTokenizer"), type(tokenizer)
    ids, offsets = [], []
    for line in lines:
        encoded = tokenizer(line, add_special_tokens=False, return_offsets_mapping=True)
        ids.append(list(encoded["input_ids"]))
        offsets.append([list(o) for o in encoded["offset_mapping"]])
    packed = tokenizer(lines[:ordinary], padding="max_length", truncation=True,
                       max_length=SEQ_LENGTH, return_tensors="pt")
    model = transformers.AutoModelForSequenceClassification.from_pretrained(directory).eval()
    model = model.double()
    with torch.no_grad():
        logits = model(**packed).logits
    return {"ids": ids, "offsets": offsets, "seq_length": SEQ_LENGTH,
            "packed": packed["input_ids"].tolist(),
            "probabilities": torch.softmax(logits, -1).numpy().astype(np.float64).tolist()}


def variants(albert: str, out: str) -> dict:
    """The variants' files (see the module docstring) and tokenizers' ids for them."""
    import tokenizers

    os.makedirs(out)
    with tempfile.TemporaryDirectory() as tmp:
        train_spm(tmp)
        options = dict(do_lower_case=False, keep_accents=True)
        cased = transformers.AutoTokenizer.from_pretrained(tmp, **options)
        cased.backend_tokenizer.save(os.path.join(out, "cased_accents.json"))
    data = json.load(open(os.path.join(albert, "tokenizer.json"), encoding="utf-8"))
    v4 = json.loads(json.dumps(data))
    v4["normalizer"]["normalizers"].append(
        {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "})
    v4["pre_tokenizer"] = {"type": "Metaspace", "replacement": "\u2581",
                           "prepend_scheme": "always", "split": True}
    for token in v4["added_tokens"]:
        token["lstrip"] = token["content"] == "[MASK]"
    first = json.loads(json.dumps(data))
    first["pre_tokenizer"]["pretokenizers"][1]["prepend_scheme"] = "first"
    for name, value in (("v4", v4), ("first", first)):
        with open(os.path.join(out, name + ".json"), "w", encoding="utf-8") as f:
            json.dump(value, f, ensure_ascii=False, indent=2)
    return {name: [tokenizers.Tokenizer.from_file(os.path.join(out, name + ".json")).encode(
                line, add_special_tokens=False).ids for line in LINES]
            for name in ("cased_accents", "v4", "first")}


LINES: list[str] = []


def main() -> None:
    out = os.path.join(ROOT, "tests", "fixtures", "tokenizer_json")
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    torch.use_deterministic_algorithms(True)
    albert_dir(os.path.join(out, "albert"))
    bert_dir(os.path.join(out, "bert"))
    lines = ORDINARY + [line for line in HARD_CASES if line not in ORDINARY]
    LINES[:] = lines
    record = {"transformers": transformers.__version__, "lines": lines, "ordinary": len(ORDINARY)}
    for name in ("albert", "bert"):
        record[name] = reference(os.path.join(out, name), lines, len(ORDINARY))
    record["variants"] = variants(os.path.join(out, "albert"), os.path.join(out, "variants"))
    with gzip.open(os.path.join(out, "reference.json.gz"), "wt", encoding="utf-8") as f:
        json.dump(record, f, ensure_ascii=False)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
