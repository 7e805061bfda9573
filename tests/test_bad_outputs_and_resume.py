"""Outputs, vocabularies and resume: where a run meets what is already on disk.

* A model and a vocabulary of another size are refused wherever they are paired
  (fine-tune, convert, save_checkpoint, export, pretrain), before any work, by one
  rule (`albert_tf.checkpoint.opened.check_vocab_size`) naming both files and sizes.
* A checkpoint directory is written whole: `convert --force` / `save_checkpoint`
  swap the directory, so nothing of the old checkpoint survives; a directory that
  also holds other files is refused, naming them, unless the caller keeps them.
* Outputs are claimed: of two runs into the same new output exactly one wins, and
  an output that is also an input is refused.
* Failed and interrupted runs leave the previous state, and nothing that blocks a
  rerun; what killed runs left beside an output is cleaned up by the next one.
* A resumed pretraining run is compared with the run_config.json it continues.

Each case checks the exit status, that the one line names what and where, and
that nothing was lost (checksums of the inputs and earlier outputs, no hidden
temporary left).
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time

import pytest

from albert_tf import errors
from albert_tf.checkpoint import CheckpointError, convert, open_checkpoint, save_checkpoint
from albert_tf.infra import atomic, cli
from tests.helpers.cli import CLI
from tests.helpers.fresh_process import SAFETY_NET_S
from tests.helpers.paths import FIXTURES
from tests.test_bad_inputs import assert_one_line_error, hidden_temporaries, run_cli, snapshot

WORDS = ["abc", "bad", "cab", "dab", "face", "bead", "fed", "deaf", "ace", "bee"]
FAST = ["--set", "jit_compile=false", "buckets=none"]


def _tiny_pretrain(**changes) -> list[str]:
    values = {"albert.embedding_size": 16, "albert.hidden_size": 16,
              "albert.num_hidden_layers": 1, "albert.num_attention_heads": 2,
              "albert.intermediate_size": 32, "train_steps": 2, "global_batch_size": 2,
              "checkpoint_every": 1, "log_every": 1}
    values.update({key.replace("__", "."): value for key, value in changes.items()})
    return [f"{key}={value}" for key, value in values.items()]


def _dead_pid() -> int:
    """The id of a process that has ended."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _cli_process(*argv) -> subprocess.Popen:
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    return subprocess.Popen([*CLI, *map(str, argv)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            env=env)


# ----------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
def checkpoint41(tmp_path_factory, spm_41_path):
    """The 41-token Hugging Face fixture in our format, with its 41-piece vocabulary."""
    dst = tmp_path_factory.mktemp("outputs_ckpt") / "tiny"
    convert.convert(os.path.join(FIXTURES, "shared", "hf"), str(dst), spm_model=spm_41_path)
    return dst


@pytest.fixture(scope="module")
def train_csv(tmp_path_factory):
    rng = random.Random(0)
    path = tmp_path_factory.mktemp("outputs_data") / "train.csv"
    rows = [" ".join(rng.choice(WORDS) for _ in range(5)) + f",{i % 2}" for i in range(16)]
    path.write_text("text,label\n" + "\n".join(rows) + "\n", encoding="utf-8")
    return path


def _finetune_args(checkpoint, output, data, *extra, task="classify"):
    return [str(a) for a in (
        "finetune", "--task", task, "--checkpoint", checkpoint, "--output", output,
        "--data", data, data, "--columns", "text:label", "--seq-length", "12",
        "--epochs", "2", "--batch-size", "8", *FAST, *extra)]


@pytest.fixture(scope="module")
def shard(tmp_path_factory, corpus_documents, spm_model_path):
    """One small pretraining shard (seq_length 32) made with `spm_model_path`."""
    from albert_tf.training.data import create_data
    from albert_tf.training.data.corpus import write_corpus_file

    root = tmp_path_factory.mktemp("outputs_shard")
    write_corpus_file(str(root / "corpus.txt"), iter(corpus_documents[:12]))
    assert create_data.main([
        "--input", str(root / "corpus.txt"), "--output-dir", str(root / "data"),
        "--spm-model", spm_model_path, "--max-seq-length", "32",
        "--max-predictions-per-seq", "5", "--dupe-factor", "1", "--processes", "1"]) == 0
    return str(root / "data" / "pretrain-*.tfrecord")


@pytest.fixture(scope="module")
def pretrained_run(tmp_path_factory, shard, spm_model_path):
    """A finished 2-step pretraining run of a tiny model (hidden 16, 1 layer, batch 2)."""
    run = tmp_path_factory.mktemp("outputs_pretrain") / "run"
    assert cli.main(["pretrain", "--train-data", shard, "--output-dir", str(run),
                     "--spm-model", spm_model_path, *_tiny_pretrain()]) == 0
    return run


# -------------------------------------------- 1. a model and a vocabulary of another size
def _with_wrong_vocabulary(checkpoint, tmp_path, spm_model_path):
    """A copy of `checkpoint` whose spiece.model is another model's (1000 pieces)."""
    copy = shutil.copytree(checkpoint, tmp_path / "wrong_vocab")
    shutil.copyfile(spm_model_path, copy / "spiece.model")
    return copy


@pytest.mark.parametrize("where", ["--set spm_model", "spiece.model in the checkpoint"])
def test_finetune_refuses_a_vocabulary_of_another_size(capsys, tmp_path, checkpoint41,
                                                       train_csv, spm_model_path, where):
    if where == "--set spm_model":
        checkpoint, extra, spm = checkpoint41, ["spm_model=" + spm_model_path], spm_model_path
    else:
        checkpoint = _with_wrong_vocabulary(checkpoint41, tmp_path, spm_model_path)
        extra, spm = [], checkpoint / "spiece.model"
    before = snapshot(checkpoint, train_csv, spm_model_path)
    code, line = run_cli(capsys, *_finetune_args(checkpoint, tmp_path / "out", train_csv),
                         *extra)
    assert_one_line_error(code, line, f"SentencePiece model {spm} has 1000 pieces",
                          f"{os.path.join(checkpoint, 'albert_config.json')} has vocab_size=41")
    assert snapshot(checkpoint, train_csv, spm_model_path) == before
    assert not (tmp_path / "out").exists() and not hidden_temporaries(tmp_path)


def test_save_convert_export_and_pretrain_refuse_it_with_the_same_line(
        capsys, tmp_path, checkpoint41, spm_model_path, shard):
    # save_checkpoint: before anything is written
    model = open_checkpoint(checkpoint41).load()
    with pytest.raises(CheckpointError, match=rf"SentencePiece model {spm_model_path} has 1000 "
                                              rf"pieces but the model saved to .*saved has "
                                              r"vocab_size=41"):
        save_checkpoint(model, tmp_path / "saved", spm_model=spm_model_path)
    assert not (tmp_path / "saved").exists()
    # convert: a Hugging Face directory shipping another model's spiece.model
    hf = shutil.copytree(os.path.join(FIXTURES, "shared", "hf"), tmp_path / "hf")
    shutil.copyfile(spm_model_path, hf / "spiece.model")
    before = snapshot(hf)
    code, line = run_cli(capsys, "convert", hf, tmp_path / "converted")
    assert_one_line_error(code, line, f"{hf / 'spiece.model'} has 1000 pieces",
                          f"{hf / 'config.json'} has vocab_size=41")
    assert snapshot(hf) == before and not (tmp_path / "converted").exists()
    # export: refused on the way in (it used to build the model first)
    wrong = _with_wrong_vocabulary(checkpoint41, tmp_path, spm_model_path)
    code, line = run_cli(capsys, "export", "--checkpoint", wrong, "--output",
                         tmp_path / "models" / "m")
    assert_one_line_error(code, line, f"{wrong / 'spiece.model'} has 1000 pieces",
                          f"{wrong / 'albert_config.json'} has vocab_size=41")
    assert not (tmp_path / "models").exists()
    # pretrain: --spm-model against --init-checkpoint's config
    code, line = run_cli(capsys, "pretrain", "--train-data", shard, "--output-dir",
                         tmp_path / "run", "--spm-model", spm_model_path, "--init-checkpoint",
                         checkpoint41, *_tiny_pretrain())
    assert_one_line_error(code, line, f"{spm_model_path} has 1000 pieces",
                          f"{checkpoint41 / 'albert_config.json'} has vocab_size=41")
    assert not (tmp_path / "run" / "checkpoints").exists()
    assert not hidden_temporaries(tmp_path)


# --------------------------------------------------- 2. a checkpoint directory, whole
def test_convert_force_replaces_the_checkpoint_directory_as_a_whole(capsys, tmp_path,
                                                                    spm_41_path):
    dst = tmp_path / "ckpt"
    assert cli.main(["convert", os.path.join(FIXTURES, "shared", "hf"), str(dst),
                     "--spm-model", spm_41_path]) == 0
    assert sorted(os.listdir(dst)) == ["albert_config.json", "albert_task.json",
                                       "model.weights.h5", "spiece.model"]
    before = snapshot(dst)
    grouped = os.path.join(FIXTURES, "grouped", "hf")  # vocab 37, no SentencePiece model
    code, line = run_cli(capsys, "convert", grouped, dst)
    assert_one_line_error(code, line, dst, "already holds a checkpoint; pass --overwrite")
    assert snapshot(dst) == before
    capsys.readouterr()
    assert cli.main(["convert", grouped, str(dst), "--force"]) == 0
    # The old spiece.model (41 pieces) does not survive beside the 37-word model.
    assert sorted(os.listdir(dst)) == ["albert_config.json", "albert_task.json",
                                       "model.weights.h5"]
    opened = open_checkpoint(dst)
    assert opened.config.vocab_size == 37 and opened.tokenizer.spm_model is None
    opened.load()
    assert sorted(os.listdir(tmp_path)) == ["ckpt"]  # no staging, old copy or lock


def test_a_checkpoint_directory_holding_other_files_is_refused_unless_kept(
        capsys, tmp_path, checkpoint41):
    dst = shutil.copytree(checkpoint41, tmp_path / "ckpt")
    (dst / "notes.txt").write_text("mine\n")
    (dst / "eval").mkdir()
    before = snapshot(dst)
    code, line = run_cli(capsys, "convert", os.path.join(FIXTURES, "grouped", "hf"), dst,
                         "--force")
    assert_one_line_error(code, line, str(dst), "holds files a checkpoint does not write",
                          "eval, notes.txt")
    assert snapshot(dst) == before
    model = open_checkpoint(os.path.join(FIXTURES, "grouped", "hf")).load()
    with pytest.raises(CheckpointError, match="eval, notes.txt"):
        save_checkpoint(model, dst)
    assert snapshot(dst) == before
    save_checkpoint(model, dst, keep_other_files=True)  # asked: carried over, untouched
    assert sorted(os.listdir(dst)) == ["albert_config.json", "albert_task.json", "eval",
                                       "model.weights.h5", "notes.txt"]  # no stale spiece.model
    assert (dst / "notes.txt").read_text() == "mine\n"
    assert open_checkpoint(dst).config.vocab_size == 37
    assert sorted(os.listdir(tmp_path)) == ["ckpt"]


# ------------------------------------------------------------ 3. claims and self-reference
def test_a_claimed_output_is_exclusive_and_one_that_appears_is_kept(tmp_path):
    out = tmp_path / "a" / "out"
    with atomic.claimed_directory(out) as staging:
        with pytest.raises(errors.UserError,
                           match=rf"{out} is being written by another process "
                                 rf"\(pid {os.getpid()}\)"):
            with atomic.claimed_directory(out):
                pass
        open(os.path.join(staging, "mine.txt"), "w").close()
    assert os.listdir(out) == ["mine.txt"] and os.listdir(tmp_path / "a") == ["out"]

    other = tmp_path / "other"
    with pytest.raises(errors.UserError, match=f"{other} appeared while writing it"):
        with atomic.claimed_directory(other) as staging:
            open(os.path.join(staging, "mine.txt"), "w").close()
            other.mkdir()  # a writer that does not claim
            (other / "theirs.txt").write_text("kept\n")
    assert os.listdir(other) == ["theirs.txt"]
    assert sorted(os.listdir(tmp_path)) == ["a", "other"]  # no staging, no lock


def test_two_converts_into_the_same_new_directory_exactly_one_wins(tmp_path, spm_41_path):
    """Two different models at once into one new DST: one is written whole, the other
    refused with one line; never a mixture."""
    dst = tmp_path / "ckpt"
    procs = [_cli_process("convert", os.path.join(FIXTURES, "shared", "hf"), dst,
                          "--spm-model", spm_41_path),
             _cli_process("convert", os.path.join(FIXTURES, "grouped", "hf"), dst)]
    results = [(p.wait(timeout=SAFETY_NET_S), p.stderr.read().strip().splitlines()) for p in procs]
    assert sorted(code for code, _ in results) == [0, 2], results
    loser = next(lines for code, lines in results if code == 2)[-1]
    assert loser.startswith("albert-tf convert: ") and str(dst) in loser, loser
    assert any(s in loser for s in ("being written by another process", "appeared while",
                                    "already holds a checkpoint", "not overwriting")), loser
    winner = open_checkpoint(dst)
    shared = winner.config.vocab_size == 41
    assert sorted(os.listdir(dst)) == ["albert_config.json", "albert_task.json",
                                       "model.weights.h5"] + (["spiece.model"] if shared else [])
    winner.load()  # weights and config of one and the same model
    assert sorted(os.listdir(tmp_path)) == ["ckpt"]


@pytest.mark.slow
def test_two_finetunes_into_the_same_new_output_exactly_one_wins(tmp_path, checkpoint41,
                                                                 train_csv):
    out = tmp_path / "out"
    procs = [_cli_process(*_finetune_args(checkpoint41, out, train_csv)),
             _cli_process(*_finetune_args(checkpoint41, out, train_csv, task="regress"))]
    results = [(p.wait(timeout=SAFETY_NET_S), p.stderr.read().strip().splitlines()) for p in procs]
    assert sorted(code for code, _ in results) == [0, 2], [(c, lines[-3:]) for c, lines in results]
    loser = next(lines for code, lines in results if code == 2)[-1]
    assert loser.startswith("albert-tf finetune: ") and str(out) in loser, loser
    task = json.loads((out / "albert_task.json").read_text())["task"]
    best = json.loads((out / "eval_results.json").read_text())["best"]
    # The task record, the metrics and the predictions are one run's.
    assert ("accuracy" in best) == (task == "classification"), (task, best)
    rows = (out / "predictions_eval.tsv").read_text().splitlines()
    predictions = {row.split("\t")[2] for row in rows[1:]}  # labels, or scores
    assert (predictions <= {"0", "1"}) == (task == "classification"), (task, predictions)
    assert sorted(os.listdir(tmp_path)) == ["out"]


@pytest.mark.parametrize("case", ["finetune output inside --data", "finetune output holds --data",
                                  "convert DST is SRC", "convert DST inside SRC"])
def test_an_output_that_is_also_an_input_is_refused(capsys, tmp_path, checkpoint41, train_csv,
                                                    case):
    data = tmp_path / "data"
    data.mkdir()
    shutil.copy(train_csv, data / "train.csv")
    ckpt = shutil.copytree(checkpoint41, tmp_path / "ckpt")
    before = snapshot(tmp_path)
    if case == "finetune output inside --data":
        argv = _finetune_args(ckpt, data / "out", data)
        names = [f"--output {data / 'out'} lies inside the --data directory {data}"]
    elif case == "finetune output holds --data":
        argv = _finetune_args(ckpt, data, data / "train.csv", "--overwrite")
        names = [f"--output {data} contains the --data file {data / 'train.csv'}",
                 "would overwrite the data it reads"]
    elif case == "convert DST is SRC":
        argv = ["convert", ckpt, ckpt, "--force"]
        names = [f"DST {ckpt} is the checkpoint directory {ckpt}"]
    else:
        argv = ["convert", ckpt, ckpt / "converted"]
        names = [f"DST {ckpt / 'converted'} lies inside the checkpoint directory {ckpt}"]
    code, line = run_cli(capsys, *argv)
    assert_one_line_error(code, line, *names)
    assert snapshot(tmp_path) == before and not hidden_temporaries(tmp_path)


# ------------------------------------------------- 4. failed and interrupted runs
@pytest.mark.parametrize("failure", [KeyboardInterrupt, RuntimeError])
@pytest.mark.parametrize("existing", [False, True])
def test_a_failed_or_interrupted_finetune_leaves_the_previous_state(
        capsys, tmp_path, monkeypatch, checkpoint41, train_csv, failure, existing):
    """Training stopped after its epoch-1 model was saved (a failure or Ctrl-C): a new
    --output does not appear, an existing one (--overwrite) is unchanged, and the same
    command then runs."""
    from albert_tf.training.finetune import run as finetune_run

    out = tmp_path / "runs" / "out"
    if existing:
        out.mkdir(parents=True)
        (out / "eval_results.json").write_text('{"old": true}\n')
    before = snapshot(tmp_path)
    model = open_checkpoint(checkpoint41).load()

    def stopped(task, source, config, strategy):
        save_checkpoint(model, config.output_dir)  # the epoch-1 model
        raise failure("stopped after epoch 1")

    monkeypatch.setattr(finetune_run, "finetune", stopped)
    extra = ["--overwrite"] if existing else []
    code, line = run_cli(capsys, *_finetune_args(checkpoint41, out, train_csv), *extra)
    assert code == (130 if failure is KeyboardInterrupt else 1), line
    assert snapshot(tmp_path) == before and not hidden_temporaries(tmp_path)
    assert out.exists() == existing  # and no empty runs/ either
    assert os.listdir(tmp_path) == (["runs"] if existing else [])

    def finished(task, source, config, strategy):
        save_checkpoint(model, config.output_dir)
        return {"best": None, "history": [], "checkpoint": config.output_dir,
                "predictions": []}

    monkeypatch.setattr(finetune_run, "finetune", finished)
    assert cli.main(_finetune_args(checkpoint41, out, train_csv) + extra) == 0  # not blocked
    assert "albert_config.json" in os.listdir(out) and not hidden_temporaries(tmp_path)


@pytest.mark.slow
def test_ctrl_c_during_real_fine_tuning_then_the_same_command_runs(capsys, tmp_path, monkeypatch,
                                                                   checkpoint41, train_csv):
    from albert_tf.training.finetune import train

    original = train._EvaluateEachEpoch.on_epoch_end

    def interrupted(self, epoch, logs=None):
        original(self, epoch, logs)  # evaluates and saves the epoch-1 model
        raise KeyboardInterrupt

    monkeypatch.setattr(train._EvaluateEachEpoch, "on_epoch_end", interrupted)
    argv = _finetune_args(checkpoint41, tmp_path / "out", train_csv)
    assert cli.main(argv) == 130
    assert os.listdir(tmp_path) == []  # no epoch-1 model, no staging, no lock
    monkeypatch.setattr(train._EvaluateEachEpoch, "on_epoch_end", original)
    assert cli.main(argv) == 0
    assert json.loads((tmp_path / "out" / "albert_task.json").read_text())["task"] == \
        "classification"
    assert sorted(os.listdir(tmp_path)) == ["out"]


def _create_data(output, corpus, spm, *extra):
    return [str(a) for a in (
        "create-data", "--input", corpus, "--output-dir", output, "--spm-model", spm,
        "--processes", "1", "--max-seq-length", "32", "--max-predictions-per-seq", "5",
        "--dupe-factor", "1", *extra)]


def test_a_failed_or_interrupted_create_data_leaves_nothing_that_binds(
        capsys, tmp_path, monkeypatch, corpus_documents, spm_model_path):
    from albert_tf.training.data import create_data
    from albert_tf.training.data.corpus import write_corpus_file

    corpus = tmp_path / "corpus.txt"
    write_corpus_file(str(corpus), iter(corpus_documents[:6]))
    broken = tmp_path / "broken.model"
    broken.write_bytes(b"\x08\x01 not a SentencePiece model")
    before = snapshot(tmp_path)
    # A failure before the first shard: no new directory, no create_data_config.json.
    code, line = run_cli(capsys, *_create_data(tmp_path / "a" / "out", corpus, broken))
    assert_one_line_error(code, line, broken, "not a valid SentencePiece model")
    assert snapshot(tmp_path) == before and sorted(os.listdir(tmp_path)) == [
        "broken.model", "corpus.txt"]
    # Ctrl-C before the first shard, in a directory the user made: left as it was.
    out = tmp_path / "out"
    out.mkdir()
    (out / "README").write_text("mine\n")
    before = snapshot(tmp_path)

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    with monkeypatch.context() as patch:
        patch.setattr(create_data, "make_shard", interrupted)
        assert cli.main(_create_data(out, corpus, spm_model_path)) == 130
    assert snapshot(tmp_path) == before and os.listdir(out) == ["README"]
    # A run that makes no instances keeps only summary.json, which its error names.
    empty = tmp_path / "empty.txt"
    empty.write_text("Only one sentence in this document.\n\n", encoding="utf-8")
    code, line = run_cli(capsys, *_create_data(tmp_path / "none", empty, spm_model_path))
    assert_one_line_error(code, line, "no instances", "summary.json")
    assert os.listdir(tmp_path / "none") == ["summary.json"]
    # The rerun of the first command with the vocabulary fixed is not blocked.
    assert cli.main(_create_data(tmp_path / "a" / "out", corpus, spm_model_path)) == 0
    assert not hidden_temporaries(tmp_path)


def test_what_a_killed_writer_left_is_cleaned_up_and_a_live_ones_kept(capsys, tmp_path,
                                                                      spm_41_path):
    dead, live = _dead_pid(), subprocess.Popen([sys.executable, "-c",
                                                "import time; time.sleep(60)"])
    try:
        dst = tmp_path / "ckpt"
        stale = tmp_path / f".ckpt.tmp-{dead}-0badf00d"  # a killed --overwrite run's staging
        nested = tmp_path / f"..ckpt.tmp-{dead}-0badf00d.tmp-{dead}-00c0ffee"
        running = tmp_path / f".ckpt.tmp-{live.pid}-cafebabe"
        for path in (stale, nested, running):
            path.mkdir()
            (path / "model.weights.h5").write_bytes(b"partial")
        (tmp_path / ".ckpt.tmp-lock").write_text(f"{dead}\n")  # its lock, released by death
        assert cli.main(["convert", os.path.join(FIXTURES, "shared", "hf"), str(dst),
                         "--spm-model", spm_41_path]) == 0
        assert sorted(os.listdir(tmp_path)) == sorted(["ckpt", running.name])
        open_checkpoint(dst).load()
    finally:
        live.kill()
        live.wait()
    # A replacement killed between its two renames: the previous directory comes back.
    target = tmp_path / "model"
    aside = tmp_path / f".model.tmp-{dead}-12345678.old"
    shutil.copytree(dst, aside)
    before = {os.path.relpath(p, aside): h for p, h in snapshot(aside).items()}
    (tmp_path / f".model.tmp-{dead}-87654321").mkdir()  # its finished staging directory
    removed = atomic.remove_stale_temporaries(target)
    assert sorted(removed) == sorted([aside.name, f".model.tmp-{dead}-87654321"])
    assert {os.path.relpath(p, target): h for p, h in snapshot(target).items()} == before
    assert sorted(os.listdir(tmp_path)) == sorted(["ckpt", "model", running.name])


# ----------------------------------------------------------------- 5. resume
@pytest.mark.parametrize("changes, fields", [
    ({"albert__num_hidden_layers": 3}, ["albert.num_hidden_layers 1 -> 3"]),
    ({"albert__hidden_size": 32}, ["albert.hidden_size 16 -> 32"]),
    ({"global_batch_size": 4, "seed": 7}, ["global_batch_size 2 -> 4", "seed 12345 -> 7"]),
])
def test_resume_refuses_other_model_or_data_settings(capsys, pretrained_run, shard,
                                                     spm_model_path, changes, fields):
    before = snapshot(pretrained_run)
    code, line = run_cli(capsys, "pretrain", "--train-data", shard, "--output-dir",
                         pretrained_run, "--spm-model", spm_model_path,
                         *_tiny_pretrain(train_steps=3, **changes))
    names = [key.replace("__", ".") for key in changes]
    assert_one_line_error(code, line, f"{pretrained_run} holds a run with other settings",
                          pretrained_run / "run_config.json", *fields,
                          f"--allow-change {','.join(names)}")
    assert snapshot(pretrained_run) == before  # checkpoints, run_config.json, model/


def test_resume_continues_with_allowed_changes_only(capsys, tmp_path, pretrained_run, shard,
                                                   spm_model_path):
    run = shutil.copytree(pretrained_run, tmp_path / "run")
    base = ["pretrain", "--train-data", shard, "--output-dir", run, "--spm-model",
            spm_model_path]
    code, line = run_cli(capsys, *base, *_tiny_pretrain(albert__hidden_size=32),
                         "--allow-change", "albert.hiden_size")
    assert_one_line_error(code, line, "--allow-change albert.hiden_size",
                          "not a setting that a resume compares")
    # Allowed, but the checkpoint cannot hold it: one line, nothing changed.
    before = snapshot(run)
    code, line = run_cli(capsys, *base, *_tiny_pretrain(albert__hidden_size=32),
                         "--allow-change", "albert.hidden_size")
    assert_one_line_error(code, line, str(run / "checkpoints" / "ckpt-2"),
                          "does not fit this run's model")
    assert snapshot(run) == before
    # train_steps may change freely; the batch size only when named.
    assert cli.main([*map(str, base), *_tiny_pretrain(train_steps=3, global_batch_size=4),
                     "--allow-change", "global_batch_size"]) == 0
    config = json.loads((run / "run_config.json").read_text())
    assert (config["train_steps"], config["global_batch_size"]) == (3, 4)
    assert sorted(n for n in os.listdir(run / "checkpoints") if n.endswith(".index")) == [
        "ckpt-1.index", "ckpt-2.index", "ckpt-3.index"]
    assert not hidden_temporaries(run)


def test_resume_on_other_data_under_the_same_name_is_refused(capsys, tmp_path, shard,
                                                            spm_model_path):
    """run_config.json records each training file's size and a hash of its ends: the same
    glob over rewritten data is named, and continues only when allowed."""
    import tensorflow as tf

    data = shutil.copytree(os.path.dirname(shard), tmp_path / "data")
    pattern, run = str(data / "pretrain-*.tfrecord"), tmp_path / "run"
    base = ["pretrain", "--train-data", pattern, "--output-dir", run, "--spm-model",
            spm_model_path]
    assert cli.main([*map(str, base), *_tiny_pretrain()]) == 0
    recorded = json.loads((run / "run_config.json").read_text())["resolved"]["train_files"]
    path = data / "pretrain-00000.tfrecord"
    assert list(recorded) == [str(path)]
    records = [r.numpy() for r in tf.data.TFRecordDataset(str(path))]
    with tf.io.TFRecordWriter(str(path)) as writer:  # the same records, in another order
        for record in reversed(records):
            writer.write(record)
    capsys.readouterr()
    before = snapshot(tmp_path)
    code, line = run_cli(capsys, *base, *_tiny_pretrain(train_steps=3))
    assert_one_line_error(code, line, f"{run} holds a run with other settings",
                          f"train_files ({path} {recorded[str(path)]} -> ",
                          "--allow-change train_files")
    assert snapshot(tmp_path) == before
    assert cli.main([*map(str, base), *_tiny_pretrain(train_steps=3),
                     "--allow-change", "train_files"]) == 0


# ------------------------------------------- 6. one rule for replacing an output
def _user_directory(root):
    """A directory the user owns: a note and a file in a subfolder."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "notes.txt").write_text("mine\n")
    (root / "sub").mkdir(exist_ok=True)
    (root / "sub" / "data.bin").write_bytes(bytes(range(256)))
    return root


def test_finetune_overwrite_refuses_a_directory_that_was_never_a_run(capsys, tmp_path,
                                                                     train_csv):
    """--overwrite replaces a run, never the user's files: refused before the checkpoint
    is even opened (it does not exist here), naming what is not a run's."""
    output = _user_directory(tmp_path / "userdir")
    before = snapshot(tmp_path)
    code, line = run_cli(capsys, *_finetune_args(tmp_path / "ckpts" / "none", output, train_csv,
                                                 "--overwrite"))
    assert_one_line_error(code, line, f"--output {output}", "notes.txt, sub",
                          "fine-tuning does not write", "not replacing it")
    assert snapshot(tmp_path) == before and hidden_temporaries(tmp_path) == []


@pytest.mark.parametrize("existing", [".model", ".vocab"])
def test_vocab_refuses_existing_files_unless_overwrite(capsys, tmp_path, existing):
    (tmp_path / "t.txt").write_text("\n".join(" ".join(random.Random(i).choices(WORDS, k=8))
                                              for i in range(300)) + "\n")
    (tmp_path / f"v{existing}").write_bytes(b"a vocabulary a dataset was made with")
    before = snapshot(tmp_path)
    argv = ["vocab", "--input", tmp_path / "t.txt", "--output", tmp_path / "v",
            "--vocab-size", "30", "--input-sentence-size", "0", "--num-threads", "1"]
    code, line = run_cli(capsys, *argv)
    assert_one_line_error(code, line, f"--output {tmp_path / 'v'}{existing} exists",
                          "pass --overwrite to replace it")
    assert snapshot(tmp_path) == before and hidden_temporaries(tmp_path) == []
    code, line = run_cli(capsys, *argv, "--overwrite")  # asked: replaced
    assert code == 0, line
    assert (tmp_path / f"v{existing}").read_bytes() != b"a vocabulary a dataset was made with"


def test_create_data_refuses_shards_it_did_not_write(capsys, tmp_path, spm_model_path,
                                                     corpus_documents):
    from albert_tf.training.data.corpus import write_corpus_file

    write_corpus_file(str(tmp_path / "corpus.txt"), iter(corpus_documents[:4]))
    data = tmp_path / "data"
    data.mkdir()
    (data / "pretrain-00000.tfrecord").write_bytes(b"records made by another tool")
    (data / "readme.txt").write_text("mine\n")
    before = snapshot(tmp_path)
    code, line = run_cli(capsys, "create-data", "--input", tmp_path / "corpus.txt",
                         "--output-dir", data, "--spm-model", spm_model_path,
                         "--processes", "1")
    assert_one_line_error(code, line, f"--output-dir {data}", "pretrain-00000.tfrecord",
                          "create-data did not write")
    assert snapshot(tmp_path) == before and hidden_temporaries(tmp_path) == []


def test_pretrain_refuses_a_directory_holding_a_model_of_no_run(capsys, tmp_path, shard,
                                                                spm_model_path, checkpoint41):
    out = tmp_path / "out"
    shutil.copytree(checkpoint41, out / "model")
    before = snapshot(tmp_path)
    code, line = run_cli(capsys, "pretrain", "--train-data", shard, "--output-dir", out,
                         "--spm-model", spm_model_path, *_tiny_pretrain())
    assert_one_line_error(code, line, f"output_dir {out} holds model", "pretrain did not write")
    assert snapshot(tmp_path) == before and hidden_temporaries(tmp_path) == []


def test_convert_to_a_foreign_format_force_keeps_the_users_files(capsys, tmp_path,
                                                                 checkpoint41):
    target = "hf"
    dst = _user_directory(tmp_path / "dst")
    (dst / "config.json").write_text("{}")
    before = snapshot(tmp_path)
    code, line = run_cli(capsys, "convert", checkpoint41, dst, "--to", target, "--force")
    assert_one_line_error(code, line, str(dst), f"a {target} checkpoint does not write",
                          "notes.txt, sub")
    assert snapshot(tmp_path) == before and hidden_temporaries(tmp_path) == []


def test_the_rule_for_a_file_output(tmp_path):
    """Missing: written; existing: refused unless asked; a directory: never a file."""
    path = tmp_path / "out.jsonl"
    assert atomic.check_replaceable(path, replace=False, option="--output") == []
    path.write_text("x")
    with pytest.raises(errors.UserError, match="--output .*out.jsonl exists; choose another"):
        atomic.check_replaceable(path, option="--output")
    assert atomic.check_replaceable(path, replace=True) == []
    with pytest.raises(errors.UserError, match="is a directory"):
        atomic.check_replaceable(tmp_path, replace=True)
    with pytest.raises(TypeError, match="needs `writes`"):
        with atomic.claimed_directory(tmp_path / "new", replace=True):
            pass


# --------------------------------------------- 7. one pretraining per output_dir
@pytest.mark.parametrize("command", ["pretrain", "demo"])
def test_a_second_run_into_a_claimed_directory_is_refused_at_once(capsys, tmp_path, shard,
                                                                  spm_model_path, command):
    """While another writer holds the directory (here this process), pretrain and demo are
    refused before any work, naming its pid; the directory is left as it was."""
    out = tmp_path / "out"
    out.mkdir()
    (out / "run_config.json").write_text("{}")
    before = snapshot(tmp_path)
    argv = (["pretrain", "--train-data", shard, "--output-dir", out, "--spm-model",
             spm_model_path, *_tiny_pretrain()] if command == "pretrain"
            else ["demo", "--output", out, "--steps", "2"])
    with atomic.claimed(out):
        code, line = run_cli(capsys, *argv)
    assert_one_line_error(code, line, f"{out} is being written by another process "
                                      f"(pid {os.getpid()})")
    assert snapshot(tmp_path) == before and sorted(os.listdir(tmp_path)) == ["out"]


@pytest.mark.slow
def test_two_pretrains_into_one_output_dir_the_second_is_refused(tmp_path, shard,
                                                                 spm_model_path):
    out = tmp_path / "run"
    first = _cli_process("pretrain", "--train-data", shard, "--output-dir", out,
                         "--spm-model", spm_model_path, *_tiny_pretrain(train_steps=2000))
    try:
        for _ in range(600):  # the first one has written its run_config.json: it is training
            if (out / "run_config.json").exists() or first.poll() is not None:
                break
            time.sleep(0.1)
        second = _cli_process("pretrain", "--train-data", shard, "--output-dir", out,
                              "--spm-model", spm_model_path, *_tiny_pretrain(train_steps=2000))
        code, lines = second.wait(timeout=SAFETY_NET_S), second.stderr.read().strip().splitlines()
        assert code == 2 and lines[-1] == (
            f"albert-tf pretrain: {out} is being written by another process (pid "
            f"{first.pid}); wait for it to finish, or choose another output"), lines[-3:]
        assert first.poll() is None  # the first one trains on
    finally:
        first.kill()
        first.wait()


# ------------------------------------------------------------ 8. a full disk
def _limited_process(limit_bytes: int, *argv) -> subprocess.CompletedProcess:
    """`albert-tf ARGV` in a process whose files may not grow past `limit_bytes`
    (RLIMIT_FSIZE: a write past it fails with EFBIG, as a full disk fails with ENOSPC)."""
    import resource

    def limit():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit_bytes, limit_bytes))

    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "TF_CPP_MIN_LOG_LEVEL": "3"}
    return subprocess.run([*CLI, *map(str, argv)],
                          capture_output=True, text=True, env=env, preexec_fn=limit,
                          timeout=SAFETY_NET_S)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_FSIZE semantics")
@pytest.mark.parametrize("command", ["convert", "convert --to hf", "create-data", "vocab"])
def test_a_write_the_disk_refuses_is_one_line_naming_the_output(tmp_path, checkpoint41,
                                                                spm_41_path, corpus_documents,
                                                                command):
    """No segfault at interpreter exit (an HDF5 file left open), no unexpected error, no
    hidden temporary name: one line naming the output, status 2, nothing left behind."""
    from albert_tf.training.data.corpus import write_corpus_file

    work = tmp_path / "work"
    work.mkdir()
    corpus = tmp_path / "corpus.txt"
    write_corpus_file(str(corpus), iter(corpus_documents[:40]))
    output = work / "out"
    argv = {"convert": ["convert", checkpoint41, output],
            "convert --to hf": ["convert", checkpoint41, output, "--to", "hf"],
            "create-data": ["create-data", "--input", corpus, "--output-dir", output,
                            "--spm-model", spm_41_path, "--processes", "1"],
            "vocab": ["vocab", "--input", corpus, "--output", output, "--vocab-size", "200",
                      "--input-sentence-size", "0", "--num-threads", "1"]}[command]
    before = snapshot(tmp_path)
    result = _limited_process(8_000, *argv)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2, (result.returncode, lines[-5:])
    named = f"{output}.model" if command == "vocab" else str(output)
    assert lines[-1].startswith(f"albert-tf {command.split()[0]}: cannot write {named}"), lines[-3:]
    # SentencePiece's trainer reports no failed write (its truncated model does not load):
    # the reason is the file system's for the same write.
    assert "File too large" in lines[-1] and ".tmp-" not in lines[-1]
    assert "Traceback" not in result.stderr
    assert snapshot(tmp_path) == before and hidden_temporaries(tmp_path) == []
    assert os.listdir(work) == [] or command == "create-data" and not os.listdir(output)


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_FSIZE semantics")
def test_finetune_into_a_full_disk_is_one_line_and_no_crash(tmp_path, checkpoint41, train_csv):
    output = tmp_path / "out"
    result = _limited_process(8_000, *_finetune_args(checkpoint41, output, train_csv))
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2, (result.returncode, lines[-5:])
    assert lines[-1].startswith(f"albert-tf finetune: cannot write {output}: File too large")
    assert not output.exists() and sorted(os.listdir(tmp_path)) == []


# --------------------------------------------------- 9. leftovers and messages
def test_the_next_export_removes_what_a_killed_one_left(capsys, tmp_path, checkpoint41):
    base = tmp_path / "models" / "tiny"
    stale = base / f".1.tmp-{_dead_pid()}-0badc0de"
    (stale / "variables").mkdir(parents=True)
    (stale / "saved_model.pb").write_bytes(b"half written")
    running = base / f".7.tmp-{os.getpid()}-12345678"  # a live export's: kept
    running.mkdir()
    code, line = run_cli(capsys, "export", "--checkpoint", checkpoint41, "--output", base)
    assert code == 0, line
    assert sorted(os.listdir(base)) == sorted(["1", "batching_parameters.txt", running.name])


def test_a_failed_ablate_leaves_nothing_that_blocks_the_corrected_rerun(capsys, tmp_path):
    from albert_tf.training.experiments.ablate import run as ablate

    output = tmp_path / "ablation"
    code, line = run_cli(capsys, "ablate", "--output", output, "--corpus",
                         tmp_path / "missing.txt", "--steps", "2")
    assert_one_line_error(code, line, "missing.txt")
    assert os.listdir(tmp_path) == []
    # An ablation.json no data or run was made under binds nothing.
    output.mkdir()
    (output / ablate.ABLATION_FILE).write_text(json.dumps({"steps": 99}))
    ablate._prepare_output(ablate.AblateOptions(output=str(output), steps=2))
    assert json.loads((output / ablate.ABLATION_FILE).read_text())["steps"] == 2


def test_a_path_with_a_newline_stays_one_line(capsys, tmp_path):
    prefix = tmp_path / "v\nx"
    (tmp_path / "v\nx.model").write_bytes(b"an existing vocabulary")
    code = cli.main(["vocab", "--input", str(tmp_path / "in.txt"), "--output", str(prefix),
                     "--vocab-size", "30"])
    errors_ = [line for line in capsys.readouterr().err.splitlines()
               if line.startswith("albert-tf") or "x.model" in line]
    assert code == 2 and errors_ == [
        f"albert-tf vocab: --output {tmp_path}/v\\nx.model exists; pass --overwrite to "
        "replace it"], errors_


def test_convert_to_hf_files_have_the_modes_of_the_umask(tmp_path, checkpoint41):
    old = os.umask(0o022)
    try:
        convert.convert(str(checkpoint41), str(tmp_path / "hf"), to="hf")
    finally:
        os.umask(old)
    modes = {name: oct(os.stat(tmp_path / "hf" / name).st_mode & 0o777)
             for name in os.listdir(tmp_path / "hf")}
    assert set(modes.values()) == {"0o644"}, modes
    assert "model.safetensors" in modes


@pytest.mark.slow
def test_sigterm_mid_pretraining_leaves_whole_checkpoints(tmp_path, shard, spm_model_path):
    out = tmp_path / "run"
    proc = _cli_process("pretrain", "--train-data", shard, "--output-dir", out,
                        "--spm-model", spm_model_path, *_tiny_pretrain(train_steps=100000))
    checkpoints = out / "checkpoints"
    # Wait for the state the test needs (two whole checkpoints), not for a time: under load
    # the first checkpoint can take minutes. The deadline is a safety net only.
    deadline = time.monotonic() + 1800
    while len(list(checkpoints.glob("ckpt-*.index"))) < 2 and proc.poll() is None:
        assert time.monotonic() < deadline, "no two checkpoints in 30 minutes"
        time.sleep(0.05)
    assert proc.poll() is None, proc.stderr.read()[-2000:]
    proc.send_signal(signal.SIGTERM)
    code, lines = proc.wait(timeout=SAFETY_NET_S), proc.stderr.read().strip().splitlines()
    assert code == 128 + signal.SIGTERM, lines[-3:]
    assert lines[-1] == "albert-tf pretrain: terminated (SIGTERM)"
    names = os.listdir(checkpoints)
    data = {n.split(".data-")[0] for n in names if ".data-" in n}
    index = {n[:-len(".index")] for n in names if n.endswith(".index")}
    assert data == index and data, names  # every data file has its index
    assert not [n for n in names if "_temp" in n], names
    assert not [n for n in os.listdir(tmp_path) if "lock" in n]
