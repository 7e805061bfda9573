"""Fine-tuning a directory as transformers 5 saves it (tokenizer.json, no spiece.model):
the run tokenizes with the file and ships it; weights without any tokenizer file are one
line before any work."""

from __future__ import annotations

import csv
import os
import shutil

import pytest

from albert_tf.checkpoint import open_checkpoint
from albert_tf.training.finetune import run as finetune_run

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(__file__))),
                        "fixtures", "tokenizer_json")


def _csv(path) -> None:
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["text", "label"])
        for i in range(8):
            writer.writerow([["The cat sat on the mat.", "It's lower-cased (ok).", "我爱北京。"][i % 3],
                             ["negative", "neutral", "positive"][i % 3]])


def test_weights_without_a_tokenizer_file_are_one_line(tmp_path, capsys):
    bare = tmp_path / "bare"
    bare.mkdir()
    for name in ("config.json", "model.safetensors"):
        shutil.copyfile(os.path.join(FIXTURES, "albert", name), bare / name)
    _csv(tmp_path / "train.csv")
    assert finetune_run.main(["--task", "classification", "--checkpoint", str(bare), "--output",
                              str(tmp_path / "out"), "--data", str(tmp_path / "train.csv"),
                              "--columns", "text:label", "--seq-length", "32"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "tokenizer.json" in err and "spm_model" in err
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_a_tokenizer_json_directory_fine_tunes_and_ships_its_file(tmp_path):
    _csv(tmp_path / "train.csv")
    output = tmp_path / "out"
    assert finetune_run.main(["--task", "classification", "--checkpoint",
                              os.path.join(FIXTURES, "albert"), "--output", str(output),
                              "--data", str(tmp_path / "train.csv"), "--columns", "text:label",
                              "--epochs", "1", "--batch-size", "4", "--seq-length", "32"]) == 0
    assert (output / "tokenizer.json").read_bytes() == open(
        os.path.join(FIXTURES, "albert", "tokenizer.json"), "rb").read()
    assert not (output / "spiece.model").exists()
    files = open_checkpoint(str(output)).tokenizer
    assert files.spm_model == str(output / "tokenizer.json") and files.kind == "sentencepiece"
