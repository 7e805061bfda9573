"""`convert --to hf` writes what transformers 4 and 5 both read: the directories written
now are the ones `tools/make_hf_reader_fixtures.py` had transformers 4 and 5 load
(tests/fixtures/hf_readers), and there each gave the ids and probabilities that
transformers 5 gives on the source directory (saved by transformers itself)."""

from __future__ import annotations

import gzip
import json
import os

import numpy as np
import pytest

from albert_tf.checkpoint import convert

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(__file__)), "fixtures")


@pytest.fixture(scope="module")
def record():
    with gzip.open(os.path.join(FIXTURES, "hf_readers", "record.json.gz"), "rt",
                   encoding="utf-8") as f:
        return json.load(f)


def test_convert_writes_what_transformers_read(tmp_path, record):
    for name, source in record["sources"].items():
        dst = tmp_path / name
        assert convert.main([os.path.join(FIXTURES, source), str(dst), "--to", "hf"]) == 0
        seen = record["written"][name]
        assert sorted(os.listdir(dst)) == seen["files"], name
        for key in ("config", "tokenizer_config"):
            assert json.loads((dst / f"{key}.json").read_text(encoding="utf-8")) == seen[key]
    # beside spiece.model, the tokenizer.json transformers 5 makes of it, key for key
    written = json.loads((tmp_path / "sentencepiece" / "tokenizer.json").read_text("utf-8"))
    assert written == record["reference"]["sentencepiece_tokenizer_json"]
    assert "spiece.model" in record["written"]["sentencepiece"]["files"]


def test_transformers_4_and_5_read_the_written_directories_alike(record):
    majors = sorted(reader["transformers"].split(".")[0] for reader in record["readers"])
    assert majors == ["4", "5"]
    reference = record["reference"]["tokenizers"]
    assert set(reference) == set(record["sources"])
    for reader in record["readers"]:
        for name, got in reader["tokenizers"].items():
            want = reference[name]
            where = f"transformers {reader['transformers']}, {name}"
            assert len(got["ids"]) == len(record["lines"]) > record["ordinary"]
            differ = [line for line, a, b in zip(record["lines"], got["ids"], want["ids"])
                      if a != b]
            assert not differ, (where, differ[:3])
            assert got["packed"] == want["packed"], where
            np.testing.assert_allclose(got["probabilities"], want["probabilities"],
                                       atol=1e-9, rtol=0, err_msg=where)


def test_a_sentencepiece_model_without_cls_has_no_tokenizer_json():
    from albert_tf.errors import UserError
    from albert_tf.tokenizer.json_of_spm import tokenizer_json_of_spm
    from albert_tf.tokenizer.spm_proto import unigram_model_proto

    proto = unigram_model_proto(["<pad>", "<unk>", "[SEP]", "a"], [0.0, 0.0, 0.0, -1.0], 1,
                                control=(0, 2))
    with pytest.raises(UserError, match=r"^x/spiece.model has no '\[CLS\]' piece"):
        tokenizer_json_of_spm(proto, True, False, where="x/spiece.model")
