"""Messages at the edges: one line naming the user's path and the cause, never a hidden one.

* `vocab` on a full disk (a tmpfs of a few pages in a user and mount namespace: the
  kernel's own ENOSPC) and into a read-only directory (a read-only mount; a directory
  without write permission) names `--output` and the cause.
* SIGTERM ends every command with status 143 and "terminated (SIGTERM)", also where a
  library turned the interrupt into an error of its own; an export terminated at any
  stage leaves nothing that looks complete.
* An error printed while a progress bar's line is open starts on a line of its own.
"""

from __future__ import annotations

import io
import os
import random
import shutil
import signal
import subprocess
import sys
import time

import pytest

from albert_tf.errors import UserError
from albert_tf.infra import cli
from tests.helpers.cli import CLI
from tests.helpers.fresh_process import SAFETY_NET_S
from tests.helpers.paths import FIXTURES, REPO
from tests.test_bad_inputs import hidden_temporaries

ENV = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "TF_CPP_MIN_LOG_LEVEL": "3"}
LINUX = sys.platform.startswith("linux")


def _namespaces_work() -> bool:
    """Whether this machine lets a process mount a tmpfs in its own user+mount namespace."""
    if not LINUX or shutil.which("unshare") is None:
        return False
    probe = subprocess.run(["unshare", "-rm", "sh", "-c", "mount -t tmpfs none /mnt"],
                           capture_output=True)
    return probe.returncode == 0


needs_namespaces = pytest.mark.skipif(not _namespaces_work(),
                                      reason="needs unshare -rm and a tmpfs mount")


@pytest.fixture(scope="module")
def word_corpus(tmp_path_factory):
    """5,000 lines of 12 made-up words: enough distinct pieces for a 2,000-piece vocabulary,
    whose .vocab (38 kB) outgrows SentencePiece's write buffer."""
    rng = random.Random(0)
    words = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 9)))
             for _ in range(3000)]
    path = tmp_path_factory.mktemp("words") / "corpus.txt"
    path.write_text("".join(" ".join(rng.choice(words) for _ in range(12)) + "\n"
                            for _ in range(5000)))
    return path


def _vocab_argv(corpus, output) -> list[str]:
    return [*CLI, "vocab", "--input", str(corpus), "--output",
            str(output), "--vocab-size", "2000", "--num-threads", "1"]


def _in_a_mount(options: str, directory, argv) -> tuple[int, list[str], list[str]]:
    """Runs `argv` with a tmpfs mounted (`options`) at `directory` in a namespace of its
    own; (status, stderr lines, what the tmpfs holds after)."""
    script = (f'mount -t tmpfs -o {options} none "$1" || exit 99; shift; "$@"; code=$?; '
              'ls -A "$MOUNT"; exit $code')
    result = subprocess.run(["unshare", "-rm", "sh", "-c", script, "sh", str(directory), *argv],
                            capture_output=True, text=True, cwd=REPO, timeout=SAFETY_NET_S,
                            env={**ENV, "MOUNT": str(directory)})
    assert result.returncode != 99, result.stderr
    return result.returncode, result.stderr.strip().splitlines(), result.stdout.split()


# ------------------------------------------------------------- vocab: full and read-only
@needs_namespaces
@pytest.mark.parametrize("size", ["64k", "300k"])  # the .model does not fit / only it fits
def test_vocab_on_a_full_disk_names_the_output_and_no_space(tmp_path, word_corpus, size):
    disk = tmp_path / "disk"
    disk.mkdir()
    code, lines, left = _in_a_mount(f"size={size}", disk, _vocab_argv(word_corpus, disk / "sp"))
    assert code == 2, lines[-5:]
    assert lines[-1] in (f"albert-tf vocab: cannot write {disk}/sp{suffix}: No space left on "
                         "device; nothing was written" for suffix in (".model", ".vocab"))
    assert "Traceback" not in "\n".join(lines) and left == []  # no temporary, no half pair


@needs_namespaces
def test_vocab_into_a_read_only_file_system_names_the_directory(tmp_path, word_corpus):
    disk = tmp_path / "disk"
    disk.mkdir()
    code, lines, left = _in_a_mount("ro", disk, _vocab_argv(word_corpus, disk / "sp"))
    assert (code, lines[-1]) == (2, f"albert-tf vocab: --output's directory {disk} is not "
                                    f"writable: {disk} is on a read-only file system")
    assert "Traceback" not in "\n".join(lines) and left == []


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes anywhere (the read-only mount "
                    "above is root's case)")
def test_vocab_into_a_directory_without_write_permission_names_it(tmp_path, word_corpus):
    """Refused before the corpus is read; SentencePiece's own refusal named the hidden
    temporary file."""
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    try:
        result = subprocess.run(_vocab_argv(word_corpus, locked / "sp"), capture_output=True,
                                text=True, cwd=REPO, timeout=SAFETY_NET_S, env=ENV)
    finally:
        locked.chmod(0o755)
    lines = result.stderr.strip().splitlines()
    assert (result.returncode, lines[-1]) == (2, f"albert-tf vocab: --output's directory "
                                                 f"{locked} is not writable: no write "
                                                 f"permission in {locked}")
    assert "Traceback" not in result.stderr and os.listdir(locked) == []


def test_a_refused_write_is_named_by_the_os_reason(tmp_path):
    """The reason SentencePiece keeps to itself is the OS's for the same kind of write."""
    from albert_tf.training.data.vocab import _refused_write_reason

    assert _refused_write_reason("/dev/full") == os.strerror(28)  # ENOSPC
    fine = tmp_path / "fine"
    fine.write_bytes(b"")
    assert _refused_write_reason(str(fine)) is None
    os.symlink("/dev/full", tmp_path / "link")  # never written through a link
    assert _refused_write_reason(str(tmp_path / "link")) is None


# ------------------------------------------------------------------------- SIGTERM
def test_sigterm_turned_into_another_error_by_a_library_still_ends_as_terminated(capsys):
    """A library that catches the interrupt and raises its own error (as TensorFlow does
    for errors inside its callbacks) does not make SIGTERM an 'unexpected error'."""
    @cli.command("export")
    def main():
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)  # the handler raises here
        except BaseException as e:  # the library's conversion
            raise ValueError("Cannot convert the interrupted value") from e
        return 0

    assert main() == 128 + signal.SIGTERM
    assert capsys.readouterr().err.splitlines() == ["albert-tf export: terminated (SIGTERM)"]
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # restored after the command

    @cli.command("export")
    def failing():  # and an error without SIGTERM is still that error
        raise ValueError("bad")

    assert failing() == 1 and "unexpected error: ValueError: bad" in capsys.readouterr().err


def test_sigterm_inside_a_deferred_block_waits_until_it_ends(capsys):
    """Work that must finish whole (a checkpoint save) runs to its end; the command then
    ends as terminated, and a block without SIGTERM changes nothing."""
    done = []

    @cli.command("pretrain")
    def main():
        with cli.termination_deferred():
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.2)  # without the deferral the handler raises here
            done.append("saved")
        done.append("after the block")  # never: Terminated is raised as the block ends
        return 0

    assert main() == 128 + signal.SIGTERM and done == ["saved"]
    assert capsys.readouterr().err.splitlines() == ["albert-tf pretrain: terminated (SIGTERM)"]

    @cli.command("pretrain")
    def quiet():
        with cli.termination_deferred():
            done.append("quiet")
        return 0

    assert quiet() == 0 and done[-1] == "quiet"


_DEFERRED_UNDER_DASH_M = """
import os, runpy, signal, sys, time, types
from albert_tf.infra import cli

def main(argv):
    with cli.termination_deferred():
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.2)
        print("whole", flush=True)
    return 0

# `vocab` runs this job instead (both copies of cli.py import the job by its module name)
sys.modules[cli.COMMANDS["vocab"][0]] = types.SimpleNamespace(main=main)
sys.argv = ["albert-tf", "vocab"]
runpy.run_module("albert_tf.infra.cli", run_name="__main__")
"""


def test_python_dash_m_defers_as_the_console_script_does():
    """`python -m albert_tf.infra.cli` (how the tests and some launchers start commands)
    runs cli.py a second time as `__main__`; a handler of that copy ignored the deferral
    the commands ask of the imported module, and a checkpoint save was cut half-way."""
    result = subprocess.run([sys.executable, "-c", _DEFERRED_UNDER_DASH_M], text=True,
                            capture_output=True, timeout=SAFETY_NET_S, cwd=REPO)
    assert result.returncode == 128 + signal.SIGTERM, result.stderr[-2000:]
    assert result.stdout.split() == ["whole"]
    assert result.stderr.strip().splitlines()[-1] == "albert-tf vocab: terminated (SIGTERM)"


def _stage_markers(base):
    """(name, test) of export's stages, in the order they appear in its staging directory."""
    def staged(*parts):
        def seen():
            return any(os.path.exists(os.path.join(base, n, *parts)) for n in
                       (os.listdir(base) if os.path.isdir(base) else []) if n.startswith("."))
        return seen
    return [("staging", staged()), ("variables", staged("variables")),
            ("warmup", staged("assets.extra"))]


@pytest.mark.slow
@pytest.mark.parametrize("stage", ["staging", "variables", "warmup"])
def test_sigterm_at_every_export_stage_is_143_and_leaves_nothing(tmp_path, stage,
                                                                 spm_41_path):
    """SIGTERM as soon as a stage shows in the staging directory: status 143, the one
    line, no version and no temporary left."""
    checkpoint = os.path.join(FIXTURES, "shared", "hf")
    for attempt in range(2):
        base = tmp_path / f"models{attempt}"
        proc = subprocess.Popen([*CLI, "export", "--checkpoint",
                                 checkpoint, "--output", str(base), "--spm-model",
                                 spm_41_path], stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True, cwd=REPO, env=ENV)
        seen = dict(_stage_markers(str(base)))[stage]
        while proc.poll() is None and not seen():
            time.sleep(0.005)
        proc.send_signal(signal.SIGTERM)
        code, lines = proc.wait(timeout=SAFETY_NET_S), proc.stderr.read().strip().splitlines()
        if code == 0:  # it finished first: a complete export, nothing to check here
            continue
        assert (code, lines[-1]) == (143, "albert-tf export: terminated (SIGTERM)"), lines[-5:]
        assert not (base / "1").exists() and hidden_temporaries(tmp_path) == []


# ------------------------------------------------------------------- progress lines
def test_an_error_during_a_progress_bar_starts_on_its_own_line(monkeypatch):
    """Keras' progress bar (what `pretrain` shows) leaves its line open mid-epoch; the
    error after it, on the same terminal or log, is a line of its own."""
    import keras

    both = io.StringIO()  # stdout and stderr to one place, as a terminal or `2>&1` log
    monkeypatch.setattr(sys, "stdout", both)
    monkeypatch.setattr(sys, "stderr", both)

    @cli.command("pretrain")
    def main():
        bar = keras.utils.Progbar(10)
        bar.update(3, [("loss", 7.25)])
        raise UserError("train.tfrecord: record 12 is corrupt")

    assert main() == 2
    lines = both.getvalue().splitlines()
    assert lines[-1] == "albert-tf pretrain: train.tfrecord: record 12 is corrupt", lines
    assert "3/10" in lines[-2] and "loss: 7.25" in lines[-2]
    assert sys.stdout is both  # the command's stdout is given back


def test_a_finished_progress_bar_gets_no_blank_line(monkeypatch):
    both = io.StringIO()
    monkeypatch.setattr(sys, "stdout", both)
    monkeypatch.setattr(sys, "stderr", both)

    @cli.command("pretrain")
    def main():
        print("10/10 done")
        raise UserError("no checkpoint to export")

    assert main() == 2
    assert both.getvalue() == "10/10 done\nalbert-tf pretrain: no checkpoint to export\n"


def test_an_unexpected_errors_line_is_capped(capsys):
    """A library that echoes a whole input in its message (a 10 MB token) prints a capped
    line, its full length said; --debug shows it whole."""
    from albert_tf.infra import cli

    assert cli.report_error("export", RuntimeError("token: " + "x" * 10**6)) == 1
    err = capsys.readouterr().err
    assert len(err) < 1000 and "(1,000,007 characters)" in err and err.count("\n") == 1
