"""Chinese NER from files of one character a line (People's Daily, MSRA, Weibo, Resume,
CLUENER in CoNLL form), on the real Chinese vocab.txt: the model records that it reads
text character by character, and served on sentences as they are written (no spaces,
digit and Latin runs included) it finds the entities of its own predictions file, with
exact character offsets. The entities of a predictions file are read by seqeval
(independent of albert_tf.tagging)."""

from __future__ import annotations

import json
import os
import random

import numpy as np
import pytest
from seqeval.metrics.sequence_labeling import get_entities

from albert_tf import AlbertConfig, AlbertPretrainer, AlbertTokenClassifier, save_checkpoint
from albert_tf.serving import export
from albert_tf.tokenizer.wordpiece import WordPieceTokenizer
from albert_tf.training.finetune import run as finetune_run
from tests.helpers.fresh_process import call_signatures
from tests.helpers.paths import REAL_CHINESE_VOCAB

PEOPLE = ["张伟", "李娜", "王芳", "刘洋", "陈静"]
PLACES = ["北京", "上海", "深圳", "杭州", "Paris", "Tokyo"]
ORGS = ["华为", "Apple", "IBM", "腾讯", "CCTV"]
FILLERS = ["今天", "我们", "在", "的", "发布了", "新产品", "会议", "访问", "表示", "合作"]


def _sentence(rng: random.Random) -> list[tuple[str, str]]:
    """One sentence as (character, IOB2 tag) pairs: names, places and organisations (some
    of them Latin runs) between fillers, and a date with digit runs."""
    out: list[tuple[str, str]] = []

    def add(text: str, kind: str | None) -> None:
        for i, char in enumerate(text):
            out.append((char, "O" if kind is None else f"{'B' if i == 0 else 'I'}-{kind}"))

    for _ in range(rng.randint(2, 4)):
        kind = rng.choice(["PER", "LOC", "ORG", "DATE", None, None])
        if kind == "DATE":
            add(f"{rng.randint(1990, 2030)}年{rng.randint(1, 12)}月{rng.randint(1, 28)}日", kind)
        elif kind is not None:
            add(rng.choice({"PER": PEOPLE, "LOC": PLACES, "ORG": ORGS}[kind]), kind)
        add(rng.choice(FILLERS), None)
    return out


def _write(path, sentences) -> str:
    path.write_text("".join("".join(f"{c} {t}\n" for c, t in s) + "\n" for s in sentences),
                    encoding="utf-8")
    return str(path)


def _read_predictions(path) -> list[tuple[list[str], list[str]]]:
    """(characters, predicted tags) of each sentence of a predictions file."""
    out, chars, tags = [], [], []
    for line in open(path, encoding="utf-8"):
        if not line.strip():
            if chars:
                out.append((chars, tags))
            chars, tags = [], []
            continue
        char, _, predicted = line.rstrip("\n").split(" ")
        chars.append(char), tags.append(predicted)
    return out + ([(chars, tags)] if chars else [])


def test_tokenizer_split_characters_reads_every_character_as_a_word():
    tok = WordPieceTokenizer(REAL_CHINESE_VOCAB, split_characters=True)
    plain = WordPieceTokenizer(REAL_CHINESE_VOCAB)
    assert plain.tokenize("2024年iPhone") == ["202", "##4", "年", "iphone"]
    assert tok.tokenize("2024年iPhone") == ["2", "0", "2", "4", "年", "i", "p", "h", "o", "n",
                                            "e"]
    # Each character as fine-tuning encodes it, a word at a time.
    text = "12日 İstanbul,Ⅻ"
    assert tok.encode(text) == [i for c in text if not c.isspace() for i in plain.encode(c)]


@pytest.mark.slow
def test_char_level_ner_serves_its_predictions_on_text_as_written(tmp_path):
    rng = random.Random(7)
    train, dev = [_sentence(rng) for _ in range(400)], [_sentence(rng) for _ in range(80)]
    config = AlbertConfig(vocab_size=21128, embedding_size=16, hidden_size=32,
                          num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                          max_position_embeddings=64)
    start = save_checkpoint(AlbertPretrainer(config), str(tmp_path / "start"),
                            spm_model=REAL_CHINESE_VOCAB)
    out = str(tmp_path / "ner")
    assert finetune_run.main(["--task", "ner", "--checkpoint", start, "--output", out,
                              "--data", _write(tmp_path / "train.txt", train),
                              _write(tmp_path / "dev.txt", dev), "--epochs", "6",
                              "--batch-size", "16", "--learning-rate", "5e-3",
                              "--seq-length", "48", "--set", "jit_compile=false"]) == 0
    record = json.load(open(os.path.join(out, "albert_task.json"), encoding="utf-8"))
    assert record["split_characters"] is True and record["tokenizer"] == "wordpiece"
    predicted = _read_predictions(os.path.join(out, "predictions_eval.txt")
                                  if os.path.exists(os.path.join(out, "predictions_eval.txt"))
                                  else os.path.join(out, "predictions_dev.txt"))
    assert [c for c, _ in predicted] == [[c for c, _ in s] for s in dev]
    texts = ["".join(chars) for chars, _ in predicted]
    with_runs = [i for i, t in enumerate(texts) if any(c.isdigit() or c.isascii() for c in t)]
    assert len(with_runs) > 30  # the sentences the old reading got wrong

    # Python: the preprocessor reads the text as the predictions file's characters.
    model = AlbertTokenClassifier.from_preset(out)
    tok = WordPieceTokenizer(REAL_CHINESE_VOCAB)
    ids = np.asarray(model.preprocessor(texts[:4])["input_word_ids"])
    for row, text in zip(ids, texts[:4]):
        want = [tok.cls_id] + [i for c in text for i in tok.encode(c)] + [tok.sep_id]
        assert row[:len(want)].tolist() == want

    served = str(tmp_path / "served")
    assert export.main(["--checkpoint", out, "--output", served]) == 0
    (tmp_path / "fresh").mkdir()
    text_in = np.array([t.encode() for t in texts], dtype=object)
    got = call_signatures({"ner": (os.path.join(served, "1"), "serving_default",
                                   {"text": text_in})}, tmp_path / "fresh")["ner"]
    same = 0
    for row, (_, tags) in enumerate(predicted):
        want = [(kind, start, end + 1) for kind, start, end in get_entities(tags)]
        count = int(got["entity_count"][row])
        served_entities = [(got["entity_type"][row][k].decode(),
                            int(got["entity_start_char"][row][k]),
                            int(got["entity_end_char"][row][k])) for k in range(count)]
        for k, (_, start, end) in enumerate(served_entities):  # offsets cut the raw text
            assert got["entity_text"][row][k].decode() == texts[row][start:end]
        same += served_entities == want
    assert same / len(predicted) >= 0.95, (same, len(predicted))
    assert sum(len(get_entities(t)) for _, t in predicted) > 40  # it learnt entities
