"""`albert-tf convert`: TF1 and Hugging Face fixtures -> our format, checked against HF outputs."""

from __future__ import annotations

import json
import logging
import os
import shutil

import pytest

from albert_tf import AlbertPretrainer, load_checkpoint
from albert_tf.checkpoint import convert, detect_format, open_checkpoint
from albert_tf.infra import cli
from tests.checkpoint.test_checkpoint import FIXTURES, assert_matches_reference


@pytest.mark.parametrize("name, fmt", [("grouped", "tf1"), ("shared", "hf")])
def test_convert_round_trip_matches_hugging_face(tmp_path, caplog, name, fmt):
    dst = str(tmp_path / "out")
    with caplog.at_level(logging.INFO):
        assert cli.main(["convert", os.path.join(FIXTURES, name, fmt), dst]) == 0
    assert f"converted {fmt} checkpoint" in caplog.text
    assert detect_format(dst) == "albert_tf"
    model = load_checkpoint(dst)
    assert type(model) is AlbertPretrainer
    assert_matches_reference(model, name)
    assert open_checkpoint(dst).task_record.do_lower_case is True


def test_spm_model_found_beside_tf1_checkpoint(tmp_path, spm_41_path):
    src = shutil.copytree(os.path.join(FIXTURES, "shared", "tf1"), tmp_path / "albert_base")
    shutil.copyfile(spm_41_path, src / "30k-clean.model")
    dst = tmp_path / "out"
    assert convert.main([str(src / "model.ckpt-0"), str(dst), "--cased"]) == 0
    assert (dst / "spiece.model").read_bytes() == open(spm_41_path, "rb").read()
    assert open_checkpoint(dst).task_record.do_lower_case is False


def test_hf_tokenizer_config_sets_casing(tmp_path, spm_41_path):
    src = shutil.copytree(os.path.join(FIXTURES, "shared", "hf"), tmp_path / "hf")
    shutil.copyfile(spm_41_path, src / "spiece.model")
    (src / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": False}))
    dst = tmp_path / "out"
    assert convert.main([str(src), str(dst)]) == 0
    assert (dst / "spiece.model").read_bytes() == open(spm_41_path, "rb").read()
    assert open_checkpoint(dst).task_record.do_lower_case is False


def one_error_line(capsys) -> str:
    err = capsys.readouterr().err
    assert err.startswith("albert-tf convert: ") and "Traceback" not in err
    return err


def test_bad_arguments_and_inputs_return_2(tmp_path, capsys):
    assert convert.main([str(tmp_path / "absent"), str(tmp_path / "out")]) == 2
    assert "no such file or directory" in one_error_line(capsys)
    assert convert.main([str(tmp_path)]) == 2
    assert "required" in one_error_line(capsys)
    src = os.path.join(FIXTURES, "shared", "hf")
    assert convert.main([src, str(tmp_path / "o"), "--spm-model", str(tmp_path / "x")]) == 2
    assert "--spm-model" in one_error_line(capsys)


def test_existing_checkpoint_needs_force(tmp_path, capsys):
    src, dst = os.path.join(FIXTURES, "shared", "hf"), str(tmp_path / "out")
    assert convert.main([src, dst]) == 0
    assert convert.main([os.path.join(FIXTURES, "grouped", "hf"), dst]) == 2
    assert "--overwrite" in one_error_line(capsys)
    assert convert.main([os.path.join(FIXTURES, "grouped", "hf"), dst, "--force"]) == 0
    assert_matches_reference(load_checkpoint(dst), "grouped", ("sop_logits",))


def test_unfit_checkpoint_lists_problems_without_traceback(tmp_path, capsys):
    src = shutil.copytree(os.path.join(FIXTURES, "grouped", "tf1"), tmp_path / "tf1")
    config = json.loads((src / "albert_config.json").read_text())
    (src / "albert_config.json").write_text(json.dumps({**config, "inner_group_num": 3}))
    assert convert.main([str(src), str(tmp_path / "out")]) == 2
    err = one_error_line(capsys)
    assert "group_0/inner_group_2/ffn_1/intermediate/dense/kernel" in err
    assert not os.path.exists(tmp_path / "out")
