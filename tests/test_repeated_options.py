"""A repeated option, in every command: a list option accumulates, a single-valued one
given twice is one line naming both values (exit 2), before any work.

`finetune --set spm_model=SP --set jit_compile=false` keeps both settings; `--data A
--data B` is `--data A B`; `export --output A --output B` is refused, not written to B.
"""

from __future__ import annotations

import pytest

from albert_tf.training.finetune import command as finetune_command
from albert_tf.training.finetune import run as finetune
from tests.test_bad_inputs import assert_one_line_error, run_cli


def test_list_options_accumulate_as_one_list():
    parser = finetune_command.parser()
    base = ["--task", "classify", "--checkpoint", "c", "--output", "o"]
    once = parser.parse_args([*base, "--data", "train.csv", "dev.csv",
                              "--set", "spm_model=sp.model", "jit_compile=false"])
    twice = parser.parse_args([*base, "--data", "train.csv", "--data", "dev.csv",
                               "--set", "spm_model=sp.model", "--set", "jit_compile=false"])
    assert vars(once) == vars(twice)
    assert twice.data == ["train.csv", "dev.csv"]
    assert finetune.parse_overrides(twice.set) == finetune.parse_overrides(once.set)


@pytest.mark.parametrize("argv, flag, values", [
    (["export", "--checkpoint", "c", "--output", "a", "--output", "b"], "--output",
     "'a', then 'b'"),
    (["vocab", "--input", "t.txt", "--output", "v", "--vocab-size", "30", "--vocab-size", "40"],
     "--vocab-size", "30, then 40"),
    (["create-data", "--input", "c.txt", "--output-dir", "d", "--spm-model", "a.model",
      "--spm-model", "b.model"], "--spm-model", "'a.model', then 'b.model'"),
    (["finetune", "--task", "classify", "--checkpoint", "a", "--checkpoint", "b"],
     "--checkpoint", "'a', then 'b'"),
])
def test_a_single_valued_option_given_twice_is_one_line(capsys, tmp_path, argv, flag, values):
    code, line = run_cli(capsys, *argv)
    assert_one_line_error(code, line, f"{flag} is given twice ({values}); give it once")
    assert list(tmp_path.iterdir()) == []
