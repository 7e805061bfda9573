"""RACE from its released layout: reading, errors, packing of the four options, end to end."""

import json
import os

import numpy as np
import pytest

from albert_tf import AlbertConfig, AlbertPretrainer, save_checkpoint
from albert_tf.checkpoint import open_checkpoint
from albert_tf.tokenizer.spm import AlbertTokenizer
from albert_tf.training.finetune.examples import DataError
from albert_tf.training.finetune.race import encode_race, find_split, qa_text, read_race
from albert_tf.training.finetune.run import main

ARTICLE = ("Tom lives in a small town near the sea. Every morning he walks his dog along the "
           "beach before school, and on Sundays he helps his father sell fish at the market.")


def _record(name, answers="AC"):
    return {"id": name, "article": ARTICLE,
            "questions": ["Where does Tom live?", "Tom helps his father _ on Sundays."],
            "options": [["near the sea", "in a city", "on a farm", "in the mountains"],
                        ["cook dinner", "read books", "sell fish", "clean the house"]],
            "answers": list(answers)}


def _layout(root, splits=("train", "dev", "test"), files=2):
    for split in splits:
        for level in ("middle", "high"):
            folder = root / "RACE" / split / level
            folder.mkdir(parents=True)
            for i in range(files):
                name = f"{i}.txt"
                (folder / name).write_text(json.dumps(_record(name, "AC" if i % 2 else "AD")))
    return root


@pytest.fixture(scope="module")
def tokenizer(spm_model_path):
    return AlbertTokenizer(spm_model_path)


def test_read_the_released_layout(tmp_path):
    root = _layout(tmp_path)
    assert find_split(str(root), "dev") == str(root / "RACE" / "dev")
    assert find_split(str(root / "RACE"), "dev") == str(root / "RACE" / "dev")
    examples = read_race(find_split(str(root), "train"))
    assert len(examples) == 2 * 2 * 2  # levels x files x questions
    assert [e.level for e in examples[:4]] == ["middle"] * 4
    assert examples[0].qid == "middle/0.txt-0" and examples[1].qid == "middle/0.txt-1"
    assert examples[4].qid == "high/0.txt-0"
    assert [e.label for e in examples[:4]] == [0, 3, 0, 2]
    assert examples[1].options[2] == "sell fish"


def test_json_lines_file_also_reads(tmp_path):
    folder = tmp_path / "dev" / "high"
    folder.mkdir(parents=True)
    (folder / "all.txt").write_text("\n".join(json.dumps(_record(f"h{i}")) for i in range(3)) + "\n")
    assert len(read_race(str(tmp_path / "dev"))) == 6


@pytest.mark.parametrize("content, message", [
    ("", r"1\.txt: the file is empty"),
    ('{"article": "a"}', r"1\.txt:1: no 'questions' field"),
    (json.dumps(_record("x", "AE")), r"1\.txt:1: question 1 has answer 'E'"),
    (json.dumps({**_record("x"), "answers": ["A"]}), r"2 questions, 2 option lists and 1 answers"),
    (json.dumps(_record("x")) + "\n{bad", r"1\.txt:2: not valid JSON"),
])
def test_errors_name_the_file(tmp_path, content, message):
    folder = tmp_path / "dev" / "middle"
    folder.mkdir(parents=True)
    (folder / "1.txt").write_text(content)
    with pytest.raises(DataError, match=message):
        read_race(str(tmp_path / "dev"))


def test_missing_split_directory(tmp_path):
    with pytest.raises(DataError, match="no RACE 'train' directory"):
        find_split(str(tmp_path), "train")
    (tmp_path / "dev").mkdir()
    with pytest.raises(DataError, match="no RACE questions"):
        read_race(str(tmp_path / "dev"))


def test_qa_text_fills_the_blank():
    assert qa_text("Tom helps his father _ on Sundays.", "sell fish") == \
        "Tom helps his father sell fish on Sundays."
    assert qa_text("Where does Tom live?", "near the sea") == "Where does Tom live? near the sea"


def test_encoding_packs_article_and_each_option(tokenizer, tmp_path):
    examples = read_race(str(_layout(tmp_path, ("dev",), files=1) / "RACE" / "dev"))[:2]
    seq, max_qa = 40, 6
    encoded = encode_race(tokenizer, examples, seq, max_qa)
    np.testing.assert_array_equal(encoded.labels["logits"], [0, 3])
    article = tokenizer.encode(ARTICLE)
    for example, ids, mask, types in zip(examples, *(encoded.features[n] for n in
                                                     ("input_word_ids", "input_mask", "input_type_ids"))):
        assert ids.shape[0] == 4 and ids.shape[1] <= seq
        for k, option in enumerate(example.options):
            qa = tokenizer.encode(qa_text(example.question, option))[-max_qa:]  # keeps the end
            length = int(mask[k].sum())
            row = list(ids[k, :length])
            context = article[:seq - 3 - len(qa)]
            assert row == [tokenizer.cls_id, *context, tokenizer.sep_id, *qa, tokenizer.sep_id]
            assert list(types[k, :length]) == [0] * (len(context) + 2) + [1] * (len(qa) + 1)
            assert not ids[k, length:].any() and not types[k, length:].any()


@pytest.mark.slow
def test_cli_race_end_to_end(tokenizer, spm_model_path, tmp_path):
    config = AlbertConfig(vocab_size=tokenizer.vocab_size, embedding_size=8, hidden_size=12,
                          num_hidden_layers=2, num_attention_heads=3, intermediate_size=20,
                          max_position_embeddings=64)
    checkpoint = str(tmp_path / "pretrained")
    save_checkpoint(AlbertPretrainer(config), checkpoint, spm_model=spm_model_path)
    root = _layout(tmp_path / "data")
    out = str(tmp_path / "out")
    assert main(["--task", "race", "--checkpoint", checkpoint, "--output", out, "--data", str(root),
                 "--epochs", "2", "--batch-size", "4", "--seq-length", "48",
                 "--set", "max_qa_length=16", "jit_compile=false"]) == 0
    with open(os.path.join(out, "race_test.json")) as f:
        test = json.load(f)
    assert {"accuracy", "accuracy_middle", "accuracy_high"} <= set(test["results"])
    assert len(test["predictions"]) == 8 and set(test["predictions"].values()) <= set("ABCD")
    with open(os.path.join(out, "eval_results.json")) as f:
        results = json.load(f)
    assert len(results["history"]) == 2
    assert open_checkpoint(out).task_record.task == "multiple_choice"
    # Dev predictions: one row per dev question; the reported accuracies recompute from them.
    with open(os.path.join(out, "predictions_dev.tsv"), encoding="utf-8") as f:
        rows = [line.rstrip("\n").split("\t") for line in f]
    assert rows[0] == ["id", "level", "label", "prediction"] and len(rows) == 9
    dev = read_race(find_split(str(root), "dev"))
    assert [r[0] for r in rows[1:]] == [e.qid for e in dev]
    assert [r[2] for r in rows[1:]] == ["ABCD"[e.label] for e in dev]
    for level in (None, "middle", "high"):
        chosen = [r for r in rows[1:] if level in (None, r[1])]
        key = "accuracy" + (f"_{level}" if level else "")
        assert results["best"][key] == pytest.approx(np.mean([r[2] == r[3] for r in chosen]))


# One file as RACE's release has them: RACE/<split>/<level>/<number>.txt holding a single JSON
# object on one line with no final newline, non-ASCII as \u escapes, paragraph breaks as \n
# escapes inside the article, an id made of the level and the file name, and blanks "_" in
# cloze questions.
RELEASED_BYTES = (
    b'{"answers": ["C", "A"], "options": [["at home", "in the park", "at the caf\\u00e9", '
    b'"at school"], ["Because it was raining.", "Because he was ill.", "Because he was late.", '
    b'"Because it was Sunday."]], "questions": ["Where did Anna meet Li Ming?", '
    b'"Li Ming took a taxi _ ."], "article": "Anna met Li Ming at the caf\\u00e9 near the '
    b'station.\\nIt was raining, so he took a taxi \\u2014 he didn\\u2019t want to get wet.", '
    b'"id": "middle6318.txt"}')


def test_released_file_bytes_read_exactly(tmp_path):
    folder = tmp_path / "RACE" / "dev" / "middle"
    folder.mkdir(parents=True)
    (folder / "6318.txt").write_bytes(RELEASED_BYTES)
    (tmp_path / "RACE" / "dev" / "high").mkdir()
    examples = read_race(find_split(str(tmp_path), "dev"))
    assert [e.qid for e in examples] == ["middle/middle6318.txt-0", "middle/middle6318.txt-1"]
    assert [e.label for e in examples] == [2, 0]
    assert examples[0].options[2] == "at the caf\u00e9"
    assert examples[0].article == ("Anna met Li Ming at the caf\u00e9 near the station.\nIt was "
                                   "raining, so he took a taxi \u2014 he didn\u2019t want to get wet.")
    # The option replaces the blank as run_race does, the question's own spacing kept.
    assert qa_text(examples[1].question, examples[1].options[0]) == \
        "Li Ming took a taxi Because it was raining. ."
