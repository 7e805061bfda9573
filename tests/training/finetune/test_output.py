"""`albert-tf finetune` never destroys what the user owns: an --output that is, holds or lies
inside --checkpoint, or an existing run without --overwrite, is refused with one line and
exit status 2 before any work, and nothing on disk changes. Task settings that do not fit
are refused the same way. (--overwrite itself is exercised in tests/serving/test_parity.py.)"""

import hashlib
import os

import pytest

from albert_tf import errors
from albert_tf.training.finetune.run import main


def _tree(directory) -> dict:
    out = {}
    for root, _, names in os.walk(directory):
        for name in names:
            path = os.path.join(root, name)
            with open(path, "rb") as f:
                out[os.path.relpath(path, directory)] = hashlib.sha256(f.read()).hexdigest()
    return out


@pytest.fixture
def checkpoint(tmp_path):
    """A directory that looks like a checkpoint (refusals come before it is read)."""
    directory = tmp_path / "pretrained"
    directory.mkdir()
    for name, content in (("albert_config.json", "{}"), ("model.weights.h5", "weights"),
                          ("spiece.model", "pieces")):
        (directory / name).write_text(content)
    return directory


def _run(capsys, checkpoint, output, *extra, task="classify"):
    argv = ["--task", task, "--checkpoint", str(checkpoint), "--output", str(output),
            "--data", "train.csv", "--columns", "text:label", *extra]
    status = main(argv)
    lines = capsys.readouterr().err.strip().splitlines()
    return status, lines


@pytest.mark.parametrize("where, relation", [
    (lambda ckpt: ckpt, "is"),
    (lambda ckpt: ckpt / "finetuned", "lies inside"),
    (lambda ckpt: ckpt.parent, "contains"),
])
def test_output_that_would_overwrite_the_checkpoint_is_refused(checkpoint, capsys, where,
                                                               relation):
    before = _tree(checkpoint.parent)
    output = where(checkpoint)
    status, lines = _run(capsys, checkpoint, output)
    assert status == 2 and len(lines) == 1
    assert lines[0] == (f"albert-tf finetune: --output {output} {relation} the "
                        f"--checkpoint directory {os.path.realpath(checkpoint)}; fine-tuning "
                        "would overwrite the model it starts from")
    assert _tree(checkpoint.parent) == before
    assert not (checkpoint / "finetuned").exists()


def test_checkpoint_prefix_and_symlinked_output_are_seen_through(checkpoint, tmp_path, capsys):
    prefix = checkpoint / "model.ckpt-100"  # a TF1 prefix: its directory is the checkpoint
    status, lines = _run(capsys, prefix, checkpoint)
    assert status == 2 and "--checkpoint directory" in lines[0]
    link = tmp_path / "link"
    link.symlink_to(checkpoint, target_is_directory=True)
    status, lines = _run(capsys, checkpoint, link)
    assert status == 2 and f"--output {link} is the --checkpoint directory" in lines[0]


@pytest.mark.parametrize("content, message", [
    ({"albert_task.json": '{"task": "classification", "num_classes": 2}'},
     "already holds a fine-tuned model; pass --overwrite to replace it"),
    ({"notes.txt": "mine"}, "holds files fine-tuning does not write (notes.txt); not replacing "
                            "it: move them away or choose another directory"),
])
def test_existing_output_is_refused_without_overwrite(checkpoint, tmp_path, capsys, content,
                                                      message):
    output = tmp_path / "run"
    output.mkdir()
    for name, text in content.items():
        (output / name).write_text(text)
    before = _tree(tmp_path)
    status, lines = _run(capsys, checkpoint, output)
    assert status == 2 and lines == [f"albert-tf finetune: --output {output} {message}"]
    assert _tree(tmp_path) == before


def test_output_that_is_a_file_is_refused(checkpoint, tmp_path, capsys):
    output = tmp_path / "file"
    output.write_text("x")
    status, lines = _run(capsys, checkpoint, output, "--overwrite")
    assert status == 2 and lines == [f"albert-tf finetune: --output {output} exists "
                                     "and is not a directory"]


@pytest.mark.parametrize("task, extra, message", [
    ("squad/v1.1", ["--seq-length", "384", "--set", "max_query_length=500"],
     "--set: max_query_length=500 exceeds seq_length=384 - 4"),
    ("squad/v2.0", ["--set", "no_answer_threshold=1.5"],
     "--set: no_answer_threshold=1.5: expected a probability in [0, 1]"),
    ("squad/v1.1", ["--set", "n_best=0"], "--set: n_best=0: must be >= 1"),
    ("race", ["--seq-length", "64", "--set", "max_qa_length=62"],
     "--set: max_qa_length=62 exceeds seq_length=64 - 3"),
    ("classify", ["--set", "max_qa_length=16"],  # an alias, named by the table's name
     "--set max_qa_length: applies to squad/v1.1, squad/v2.0, race or ner only, "
     "not classification"),
    ("ner", ["--set", "tag_scheme=bio"],
     "--set: tag_scheme='bio' is not one of iob1, iob2, bioes"),
    ("ner", ["--set", "doc_stride=16"], "--set: doc_stride=16 does not apply to "
     "task='token_classification'"),
])
def test_task_settings_that_do_not_fit_are_refused_before_any_work(checkpoint, tmp_path, capsys,
                                                                   task, extra, message):
    output = tmp_path / "out"
    status, lines = _run(capsys, checkpoint, output, *extra, task=task)
    assert status == 2 and len(lines) == 1 and message in lines[0], lines
    assert not output.exists()


def test_the_task_names_are_the_family_table_s_and_aliases_still_run():
    """`--task` help lists the family table's names (the task table's for your own
    files); the task table's aliases find the same family, and no message prints them."""
    from albert_tf import tasks
    from albert_tf.training.finetune import command, families

    assert command.TASK_HELP.split(" (")[0] == families.listed()
    assert {"classify": "classification", "regress": "regression"} == dict(tasks.ALIASES)
    for alias, name in tasks.ALIASES.items():
        assert families.family(alias) is families.FAMILIES[name]
        assert families.canonical_task(alias) == name
        assert alias not in families.listed().replace(",", "").split()
    assert families.family("glue/cola") is families.family("glue/mrpc")
    with pytest.raises(errors.UsageError, match=r"--task 'spam': expected glue/<task>, "
                                                r"squad/v1\.1, .*, regression or ner$"):
        families.family("spam")
