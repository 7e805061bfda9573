"""One flag name per idea across the commands: --output, --seq-length, --overwrite,
--cased; the older names stay as aliases, listed after the shared one."""

from __future__ import annotations

import contextlib
import importlib
import io
import re

import pytest

from albert_tf.cli import COMMANDS

# The shared name of each idea and the names commands used before.
SHARED = {"--output": ("--output-dir",), "--seq-length": ("--max-seq-length",),
          "--overwrite": ("--force",), "--cased": ("--no-lower-case",)}


def _help(command: str) -> str:
    module = importlib.import_module(COMMANDS[command][0])
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
        module.main(["--help"])  # the command wrapper may turn the exit into a status
    assert "usage:" in out.getvalue(), command
    return out.getvalue()


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_command_names_an_idea_by_its_shared_flag(command):
    text = _help(command)
    usage = text.split("\n\n")[0]
    for shared, old in SHARED.items():
        for alias in old:
            if re.search(rf"{alias}\b", text):
                # Listed together, the shared name first; the usage line shows it alone.
                assert re.search(rf"{shared}( [A-Z_]+)?, {alias}\b", text), (command, alias)
                assert not re.search(rf"{alias}\b", usage), (command, alias)


def test_an_old_name_still_parses():
    from albert_tf import arguments
    from albert_tf.checkpoint import convert
    from albert_tf.training.data import create_data, vocab

    parser = arguments.ArgumentParser()
    create_data.add_generation_arguments(parser)
    old = parser.parse_args(["--output-dir", "d", "--spm-model", "s", "--max-seq-length", "64"])
    new = parser.parse_args(["--output", "d", "--spm-model", "s", "--seq-length", "64"])
    assert vars(old) == vars(new) and new.max_seq_length == 64 and new.output_dir == "d"
    assert convert._parser().parse_args(["a", "b", "--force"]).force
    assert convert._parser().parse_args(["a", "b", "--overwrite"]).force
    base = ["--input", "t.txt", "--output", "v", "--vocab-size", "50"]
    assert vocab._parser().parse_args(base + ["--no-lower-case"]).do_lower_case is False
    assert vocab._parser().parse_args(base + ["--cased"]).do_lower_case is False
