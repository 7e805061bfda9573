"""`convert --to hf` of a directory transformers 5 saved (tokenizer.json only) writes the
file as it is, beside a tokenizer_config.json; `--to albert-tf` ships it too."""

from __future__ import annotations

import json
import os

from albert_tf.checkpoint import convert, open_checkpoint

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(__file__)), "fixtures", "tokenizer_json")


def test_convert_keeps_the_tokenizer_json(tmp_path):
    for name, kind in (("albert", "sentencepiece"), ("bert", "wordpiece")):
        source = os.path.join(FIXTURES, name)
        hf, ours = tmp_path / f"{name}_hf", tmp_path / f"{name}_ours"
        assert convert.main([source, str(hf), "--to", "hf"]) == 0
        assert sorted(os.listdir(hf)) == ["config.json", "model.safetensors", "tokenizer.json",
                                          "tokenizer_config.json"]
        with open(os.path.join(source, "tokenizer.json"), "rb") as f:
            assert (hf / "tokenizer.json").read_bytes() == f.read()
        config = json.loads((hf / "tokenizer_config.json").read_text(encoding="utf-8"))
        assert config["tokenizer_class"] == {"albert": "AlbertTokenizer",
                                             "bert": "BertTokenizer"}[name]
        assert convert.main([source, str(ours)]) == 0
        assert (ours / "tokenizer.json").is_file() and not (ours / "spiece.model").exists()
        for written in (hf, ours):
            files = open_checkpoint(str(written)).tokenizer
            assert files.spm_model.endswith("tokenizer.json") and files.kind == kind
