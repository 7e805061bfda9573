"""One flag name per idea across the commands: --output, --seq-length, --overwrite,
--cased; the older names stay as aliases, listed after the shared one."""

from __future__ import annotations

import contextlib
import importlib
import io
import os
import re

import pytest

from albert_tf.infra.cli import COMMANDS

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
    from albert_tf.checkpoint import convert
    from albert_tf.infra import arguments
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


README = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "README.md")


def _readme_aliases() -> dict[str, set[str]]:
    """The README's claim "the older names still work where they were used: `--old`
    (command, ...), ..." as {old name: commands}."""
    with open(README, encoding="utf-8") as f:
        text = " ".join(f.read().split())
    claim = re.search(r"the older names still work where they were used: (.*?)\.", text)
    assert claim, "the README no longer states where the older flag names work"
    pairs = re.findall(r"`(--[a-z-]+)` \(([a-z, -]+)\)", claim.group(1))
    return {alias: {c.strip() for c in commands.split(",")} for alias, commands in pairs}


def test_the_readme_says_where_each_old_flag_name_works():
    claimed = _readme_aliases()
    assert set(claimed) == {alias for old in SHARED.values() for alias in old}
    for command in COMMANDS:
        text = _help(command)
        for alias, commands in claimed.items():
            # Every command the README names takes it; no other command does.
            assert bool(re.search(rf"{alias}\b", text)) == (command in commands), (command, alias)


def test_the_commands_that_read_checkpoints_name_every_format():
    from albert_tf.checkpoint.formats import FORMATS

    names = ["KerasHub", "albert-tf", "Hugging Face", "TF-Hub", "Model Garden", "brightmart",
             "TF1"]
    assert len(names) == len(FORMATS)
    for command in ("convert", "export", "finetune"):
        # argparse wraps lines at hyphens too ("TF-" / "Hub"): join them back
        text = re.sub(r"-\s+", "-", " ".join(_help(command).split()))
        for name in names:
            assert name in text, (command, name)
