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

  hf/           a Chinese-style Hugging Face ALBERT classifier on that vocabulary, random
                weights (`AlbertForSequenceClassification`, 3 labels): config.json and
                model.safetensors as save_pretrained writes them, vocab.txt, and a
                tokenizer_config.json with the keys the Chinese repos' have
                (tokenizer_class BertTokenizer).
  tf1/          the same weights as the original run_classifier checkpoint in the layout
                of google-research's albert_*_zh releases: albert_config.json with their
                keys, model.ckpt-best.{index,data-00000-of-00001} (no `checkpoint` file;
                the tests add vocab_chinese.txt).
  reference.npz mixed-script texts and pairs, BertTokenizer's ids for them (seq 32) and
                the classifier's probabilities in float64.

The lines are the project's tokenizer parity lines (`tests/helpers/tokenizer_cases.py`:
`parity_lines` over the embedded corpus, `HARD_CASES`, `WORDPIECE_CASES`), produced by the
project's own interpreter (`--project-python`) and stored in the fixture, so the test
reads the same text whatever packages it has.

    /work/refvenv/bin/python tools/make_wordpiece_fixtures.py   # -> tests/fixtures/wordpiece

Needs transformers, tokenizers, torch and TensorFlow (the TF1 files). Deterministic.
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


MODEL_CONFIG = dict(embedding_size=8, hidden_size=12, num_hidden_layers=3, num_hidden_groups=1,
                    inner_group_num=1, num_attention_heads=3, intermediate_size=20,
                    max_position_embeddings=64, type_vocab_size=2, hidden_act="gelu_new",
                    hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                    classifier_dropout_prob=0.0, layer_norm_eps=1e-12)
LABELS = {0: "negative", 1: "neutral", 2: "positive"}
SEQ_LENGTH = 32
# The keys of the Chinese repos' tokenizer_config.json (e.g. the CKIP and CLUE ones).
TOKENIZER_CONFIG = {"do_lower_case": True, "tokenize_chinese_chars": True,
                    "strip_accents": None, "unk_token": "[UNK]", "sep_token": "[SEP]",
                    "pad_token": "[PAD]", "cls_token": "[CLS]", "mask_token": "[MASK]",
                    "model_max_length": 512, "tokenizer_class": "BertTokenizer"}
# albert_base_zh's albert_config.json keys (google-research/albert's Chinese release).
ZH_CONFIG_KEYS = ("attention_probs_dropout_prob", "hidden_act", "hidden_dropout_prob",
                  "embedding_size", "hidden_size", "initializer_range", "intermediate_size",
                  "max_position_embeddings", "num_attention_heads", "num_hidden_layers",
                  "num_hidden_groups", "net_structure_type", "gap_size", "num_memory_blocks",
                  "inner_group_num", "down_scale_factor", "type_vocab_size", "vocab_size")
TEXTS = ["我爱北京天安门。", "今天天气很好，我们去公园散步吧！", "ALBERT模型在中文任务上的表现很好",
         "這是繁體中文的句子，請多指教。", "Hello, 世界! 2024年1月1日", "ひらがなとカタカナ 한국어",
         "Ｈｅｌｌｏ，Ｗｏｒｌｄ！😀", "Crème Brûlée ÀÉÎÕÜ 中文English混合text"]
PAIRS_B = ["他说：“你好！”然后离开了……", "《红楼梦》（曹雪芹）", "价格是￥1,234.56元",
           "臺灣、香港與澳門", "www.example.com/中文/路径", "自然语言处理是人工智能的一个分支" * 3,
           "emoji😀inside", "short"]


def write_model(out: str, vocab_path: str) -> None:
    """hf/, tf1/ and reference.npz (see the module docstring)."""
    import numpy as np
    import torch

    sys.path.insert(0, HERE)
    from make_reference_fixtures import TF1_ACTIVATION, randomize, save_tf1, tf1_task_table

    vocab = open(vocab_path, encoding="utf-8").read().split("\n")[:-1]
    torch.manual_seed(36)
    config = transformers.AlbertConfig(vocab_size=len(vocab), id2label=LABELS,
                                       label2id={v: k for k, v in LABELS.items()},
                                       **MODEL_CONFIG)
    model = transformers.AlbertForSequenceClassification(config).eval()
    model.set_attn_implementation("eager")
    randomize(model, torch.Generator().manual_seed(3636))
    hf_dir, tf1_dir = os.path.join(out, "hf"), os.path.join(out, "tf1")
    for folder in (hf_dir, tf1_dir):
        if os.path.isdir(folder):
            for name in os.listdir(folder):
                os.remove(os.path.join(folder, name))
    model.save_pretrained(hf_dir, safe_serialization=True)
    with open(os.path.join(hf_dir, "vocab.txt"), "w", encoding="utf-8", newline="\n") as f:
        f.write("".join(t + "\n" for t in vocab))
    with open(os.path.join(hf_dir, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(TOKENIZER_CONFIG, f, indent=2)
        f.write("\n")

    hf_config = json.load(open(os.path.join(hf_dir, "config.json"), encoding="utf-8"))
    heads = (("output_weights", "classifier.weight"), ("output_bias", "classifier.bias"))
    save_tf1(tf1_dir, hf_config, tf1_task_table(hf_config, model.state_dict(), heads))
    for suffix in (".index", ".data-00000-of-00001"):  # the zh releases' names
        os.replace(os.path.join(tf1_dir, "model.ckpt-1000" + suffix),
                   os.path.join(tf1_dir, "model.ckpt-best" + suffix))
    os.remove(os.path.join(tf1_dir, "checkpoint"))
    zh = dict(hf_config, hidden_act=TF1_ACTIVATION[hf_config["hidden_act"]],
              net_structure_type=0, gap_size=0, num_memory_blocks=0, down_scale_factor=1)
    with open(os.path.join(tf1_dir, "albert_config.json"), "w", encoding="utf-8") as f:
        json.dump({k: zh[k] for k in ZH_CONFIG_KEYS}, f, indent=2)
        f.write("\n")

    tokenizer = transformers.BertTokenizer.from_pretrained(hf_dir)
    outputs = {}
    for name, pair in (("single", None), ("pair", PAIRS_B)):
        enc = tokenizer(TEXTS, pair, padding="max_length", truncation="longest_first",
                        max_length=SEQ_LENGTH, return_tensors="pt")
        with torch.no_grad():
            logits = model.double()(**enc).logits.numpy()
        outputs[f"{name}_input_word_ids"] = enc["input_ids"].numpy().astype(np.int32)
        outputs[f"{name}_input_type_ids"] = enc["token_type_ids"].numpy().astype(np.int32)
        outputs[f"{name}_probabilities"] = torch.softmax(torch.from_numpy(logits), -1).numpy()
    np.savez(os.path.join(out, "reference.npz"), texts=np.array(TEXTS),
             texts_b=np.array(PAIRS_B), **outputs)


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
    write_model(args.out, vocab_path)
    for name, form in forms.items():
        differ = sum(a != b for a, b in zip(form["bert"], form["legacy"]))
        print(f"{name}: {len(lines)} lines, BertTokenizer and BertTokenizerLegacy differ on "
              f"{differ}", file=sys.stderr)
    print(f"vocab.txt: {len(vocab)} tokens", file=sys.stderr)


if __name__ == "__main__":
    main()
