"""Links and outputs that appear meanwhile: nothing of the user's is followed or replaced.

* Lock, claim and temporary files are created exclusively (O_CREAT|O_EXCL|O_NOFOLLOW):
  a symbolic link, hard link or FIFO planted under a lock's name is refused naming it,
  and the file it points to keeps its bytes (`convert`, `finetune`'s claim, `vocab`'s
  temporaries); a lock a killed writer left is taken over.
* Single-file outputs take their final name exclusively at the rename: a `.tflite`,
  `vocab`'s pair, `predict --output` and a task model's `.keras` file that appear while
  they are written (another run, another program) are refused and kept; vocab's
  `.model` / `.vocab` appear both or neither.
* `model.save("m.keras")` through albert-tf writes a temporary and renames it: a save
  killed part-way leaves the previous file whole; an unrelated file is not replaced
  unless asked.

Each case checks the exit status, the one line naming what and where, and checksums of
the user's files before and after.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import zipfile

import pytest

from albert_tf.errors import UserError
from albert_tf.infra import atomic, exclusive
from tests.helpers.paths import FIXTURES
from tests.test_bad_inputs import assert_one_line_error, hidden_temporaries, run_cli, snapshot

PRECIOUS = b"the user's precious file\n"


def _precious(tmp_path):
    path = tmp_path / "home" / "precious"
    path.parent.mkdir()
    path.write_bytes(PRECIOUS)
    return path


def _plant(kind: str, where, target):
    if kind == "symlink":
        os.symlink(target, where)
    elif kind == "hardlink":
        os.link(target, where)
    elif kind == "fifo":
        os.mkfifo(where)


# ----------------------------------------------------------------- 1. links and claims
@pytest.mark.parametrize("kind", ["symlink", "hardlink", "fifo"])
def test_a_planted_lock_file_is_refused_and_never_written(capsys, tmp_path, kind, spm_41_path):
    precious = _precious(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    lock = out / f".ckpt{atomic.LOCK_MARK}"
    _plant(kind, lock, precious)
    before = snapshot(precious)
    code, line = run_cli(capsys, "convert", os.path.join(FIXTURES, "shared", "hf"),
                         out / "ckpt", "--spm-model", spm_41_path)
    assert_one_line_error(code, line, str(lock))
    assert any(s in line for s in ("symbolic link", "FIFO", "other hard links")), line
    assert snapshot(precious) == before
    assert sorted(os.listdir(out)) == [lock.name]  # nothing written, the plant left alone


def test_a_lock_a_killed_writer_left_is_taken_over(tmp_path):
    target = tmp_path / "run"
    lock = tmp_path / f".run{atomic.LOCK_MARK}"
    lock.write_text("999999\n")  # a regular file of ours, no process holds it
    with atomic.claimed_directory(target) as staging:
        (open(os.path.join(staging, "x"), "w")).close()
        assert lock.read_text().strip() == str(os.getpid())
    assert sorted(os.listdir(tmp_path)) == ["run"]


def test_finetune_claim_refuses_a_symlinked_lock(capsys, tmp_path):
    precious = _precious(tmp_path)
    os.symlink(precious, tmp_path / f".run{atomic.LOCK_MARK}")
    with pytest.raises(UserError, match="symbolic link"):
        with atomic.claimed(tmp_path / "run"):
            pass
    assert precious.read_bytes() == PRECIOUS


def test_temporaries_and_probes_never_follow_a_planted_link(tmp_path, monkeypatch):
    """The temporary name is random; planted anyway (the name forced), it is refused."""
    precious = _precious(tmp_path)
    fixed = str(tmp_path / ".out.json.tmp-1-deadbeef")
    os.symlink(precious, fixed)
    monkeypatch.setattr(atomic, "temporary_path", lambda path: fixed)
    for write in (lambda: atomic.atomic_write_json(tmp_path / "out.json", {}),
                  lambda: atomic.atomic_path(tmp_path / "out.json").__enter__()):
        with pytest.raises(UserError, match="symbolic link"):
            write()
    assert precious.read_bytes() == PRECIOUS and not (tmp_path / "out.json").exists()


# --------------------------------------------------------- 5. outputs taken exclusively
def test_a_file_output_that_appears_meanwhile_is_refused_and_kept(tmp_path):
    path = tmp_path / "model.tflite"
    with pytest.raises(exclusive.OutputExistsError, match=f"{path} appeared while writing"):
        with atomic.atomic_path(path, replace=False) as tmp:
            with open(tmp, "wb") as f:
                f.write(b"ours")
            path.write_bytes(PRECIOUS)  # another program's, while we wrote
    assert path.read_bytes() == PRECIOUS and hidden_temporaries(tmp_path) == []
    with pytest.raises(exclusive.OutputExistsError):
        with atomic.atomic_write(path, "wb", replace=False) as f:
            f.write(b"ours")
    assert path.read_bytes() == PRECIOUS and hidden_temporaries(tmp_path) == []


def test_of_two_writers_of_one_new_file_exactly_one_wins(tmp_path):
    path = tmp_path / "out.bin"
    first = atomic.atomic_path(path, replace=False)
    second = atomic.atomic_path(path, replace=False)
    tmp1, tmp2 = first.__enter__(), second.__enter__()
    for tmp, data in ((tmp1, b"one"), (tmp2, b"two")):
        with open(tmp, "wb") as f:
            f.write(data)
    first.__exit__(None, None, None)
    with pytest.raises(exclusive.OutputExistsError):
        second.__exit__(None, None, None)
    assert path.read_bytes() == b"one" and hidden_temporaries(tmp_path) == []


def _vocab_argv(tmp_path):
    import random
    words = ["abc", "bad", "cab", "dab", "face", "bead", "fed", "deaf", "ace", "bee"]
    (tmp_path / "t.txt").write_text("\n".join(" ".join(random.Random(i).choices(words, k=8))
                                              for i in range(300)) + "\n")
    return ["vocab", "--input", tmp_path / "t.txt", "--output", tmp_path / "v",
            "--vocab-size", "30", "--input-sentence-size", "0", "--num-threads", "1"]


@pytest.mark.parametrize("appears", [".model", ".vocab"])
def test_vocab_refuses_a_file_that_appears_meanwhile_and_writes_neither(
        capsys, tmp_path, monkeypatch, appears):
    from albert_tf.training.data import vocab

    real = vocab._check_written

    def then_a_file_appears(tmp_prefix, output_prefix):
        real(tmp_prefix, output_prefix)
        (tmp_path / f"v{appears}").write_bytes(PRECIOUS)

    monkeypatch.setattr(vocab, "_check_written", then_a_file_appears)
    code, line = run_cli(capsys, *_vocab_argv(tmp_path))
    assert_one_line_error(code, line, f"{tmp_path / 'v'}{appears} appeared while writing")
    assert (tmp_path / f"v{appears}").read_bytes() == PRECIOUS
    other = ".vocab" if appears == ".model" else ".model"
    assert not (tmp_path / f"v{other}").exists()  # both or neither
    assert hidden_temporaries(tmp_path) == []


def test_vocab_overwrite_that_fails_keeps_the_old_pair_whole(capsys, tmp_path, monkeypatch):
    from albert_tf.infra import atomic as atomic_module
    argv = _vocab_argv(tmp_path)
    assert run_cli(capsys, *argv)[0] == 0
    before = snapshot(tmp_path / "v.model", tmp_path / "v.vocab")
    real = atomic_module.commit

    def fail_on_model(tmp, path, **kw):
        if str(path).endswith(".model"):
            raise OSError(28, "No space left on device")
        return real(tmp, path, **kw)

    monkeypatch.setattr(atomic_module, "commit", fail_on_model)
    code, line = run_cli(capsys, *argv, "--overwrite")
    assert_one_line_error(code, line, "No space left on device")
    assert snapshot(tmp_path / "v.model", tmp_path / "v.vocab") == before
    assert hidden_temporaries(tmp_path) == []


# ------------------------------------------------------------------- a model's .keras
@pytest.fixture(scope="module")
def tiny_classifier():
    from albert_tf import AlbertConfig, AlbertSequenceClassifier
    config = AlbertConfig(vocab_size=37, embedding_size=8, hidden_size=12, num_hidden_layers=1,
                          num_attention_heads=3, intermediate_size=20,
                          max_position_embeddings=16)
    return AlbertSequenceClassifier(config, num_classes=2)


def test_keras_save_refuses_an_unrelated_file_unless_asked(tmp_path, tiny_classifier):
    path = tmp_path / "m.keras"
    path.write_bytes(PRECIOUS)
    with pytest.raises(UserError, match=f"{path}: it exists and is not a Keras archive"):
        tiny_classifier.save(path)
    assert path.read_bytes() == PRECIOUS and hidden_temporaries(tmp_path) == []
    with pytest.raises(UserError, match="overwrite=False"):
        tiny_classifier.save(path, overwrite=False)
    tiny_classifier.save(path, overwrite=True)  # asked
    assert zipfile.is_zipfile(path)
    tiny_classifier.save(path)  # an earlier Keras archive is replaced, as Keras does
    assert zipfile.is_zipfile(path) and hidden_temporaries(tmp_path) == []


def test_keras_save_into_a_symlink_replaces_the_link_not_its_target(tmp_path, tiny_classifier):
    precious = _precious(tmp_path)
    os.symlink(precious, tmp_path / "m.keras")
    with pytest.raises(UserError, match="not a Keras archive"):
        tiny_classifier.save(tmp_path / "m.keras")
    assert precious.read_bytes() == PRECIOUS


def test_a_killed_keras_save_leaves_the_previous_file_whole(tmp_path):
    """Killed 0.1-0.25 s into the save: the good file stays under its name, whole."""
    script = textwrap.dedent(f"""
        import os, sys, time
        from albert_tf import AlbertConfig, AlbertSequenceClassifier
        config = AlbertConfig(vocab_size=3000, embedding_size=128, hidden_size=256,
                              num_hidden_layers=1, num_attention_heads=4,
                              intermediate_size=1024, max_position_embeddings=64)
        model = AlbertSequenceClassifier(config, num_classes=2)
        model.save({str(tmp_path / 'm.keras')!r})
        print("saved", flush=True)
        while True:
            model.save({str(tmp_path / 'm.keras')!r})
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "CUDA_VISIBLE_DEVICES": ""})
    try:
        assert proc.stdout.readline().strip() == "saved"
        import time
        for delay in (0.1, 0.15, 0.2, 0.25):
            time.sleep(delay)
            with zipfile.ZipFile(tmp_path / "m.keras") as archive:  # whole at every moment
                assert archive.testzip() is None
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
    with zipfile.ZipFile(tmp_path / "m.keras") as archive:
        assert archive.testzip() is None and "config.json" in archive.namelist()
