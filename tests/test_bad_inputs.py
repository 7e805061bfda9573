"""The bad-input matrix: every command, fed what a user gets wrong, answers with one
line naming what and where, exits non-zero (2 for bad input), and loses nothing.

Each case drives the real command line (`albert_tf.infra.cli.main`, in this
process unless a fresh one is the point) and checks three things: the exit status,
that the last stderr line names the problem and its place, and that every input
and pre-existing output is byte-for-byte unchanged with no partial or hidden
temporary file left behind. Correct acceptances (inputs that must keep working)
are part of the matrix too.
"""

from __future__ import annotations

import errno
import glob
import hashlib
import http.server
import json
import math
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest

from albert_tf import errors
from albert_tf.infra import atomic, cli
from tests.helpers.cli import CLI
from tests.helpers.fresh_process import SAFETY_NET_S
from tests.helpers.paths import FIXTURES

TINY = ["albert.embedding_size=16", "albert.hidden_size=32", "albert.num_hidden_layers=1",
        "albert.num_attention_heads=2", "albert.intermediate_size=64", "train_steps=2",
        "global_batch_size=2", "checkpoint_every=1", "log_every=1"]


# ----------------------------------------------------------------- helpers
def snapshot(*roots) -> dict[str, str]:
    """{path: sha256} of every file (hidden ones included) under `roots`."""
    result = {}
    for root in map(str, roots):
        paths = [root] if os.path.isfile(root) else [
            os.path.join(d, f) for d, _, files in os.walk(root) for f in files]
        for path in paths:
            with open(path, "rb") as f:
                result[path] = hashlib.sha256(f.read()).hexdigest()
    return result


def hidden_temporaries(root) -> list[str]:
    return [os.path.join(d, n) for d, dirs, files in os.walk(str(root))
            for n in files + dirs if atomic.is_temporary(n)]


def run_cli(capsys, *argv) -> tuple[int, str]:
    """(exit status, last stderr line) of `albert-tf ARGV` run in this process."""
    code = cli.main([str(a) for a in argv])
    err = capsys.readouterr().err.strip().splitlines()
    return code, err[-1] if err else ""


def assert_one_line_error(code, line, *names, status=2):
    assert code == status, (code, line)
    assert "Traceback" not in line and line.startswith("albert-tf "), line
    for name in names:
        assert str(name) in line, (name, line)


# ----------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
def corpus(tmp_path_factory, corpus_documents):
    from albert_tf.training.data.corpus import write_corpus_file

    path = tmp_path_factory.mktemp("bad_corpus") / "corpus.txt"
    write_corpus_file(str(path), iter(corpus_documents[:12]))
    return path


@pytest.fixture(scope="module")
def shards(tmp_path_factory, corpus, spm_model_path):
    """Two data sets of the same text: seq_length 32 (2 shards) and 48 (1 shard)."""
    from albert_tf.training.data import create_data

    root = tmp_path_factory.mktemp("bad_shards")
    for length, per_shard in ((32, "6"), (48, "12")):
        assert create_data.main([
            "--input", str(corpus), "--output-dir", str(root / f"len{length}"),
            "--spm-model", spm_model_path, "--max-seq-length", str(length),
            "--max-predictions-per-seq", "5", "--dupe-factor", "1", "--processes", "1",
            "--documents-per-shard", per_shard]) == 0
    return root


@pytest.fixture(scope="module")
def tiny_checkpoint(tmp_path_factory, spm_41_path):
    """The 41-token Hugging Face fixture converted to our format, with its vocabulary."""
    from albert_tf.checkpoint import convert

    dst = tmp_path_factory.mktemp("bad_ckpt") / "tiny"
    convert.convert(os.path.join(FIXTURES, "shared", "hf"), str(dst), spm_model=spm_41_path)
    return dst


# ---------------------------------------------------------------- create-data
def test_create_data_refuses_a_named_binary_file(capsys, tmp_path, spm_model_path):
    binary = tmp_path / "model.bin"
    binary.write_bytes(b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)) * 40)
    before = snapshot(binary)
    code, line = run_cli(capsys, "create-data", "--input", binary, "--output-dir",
                         tmp_path / "out", "--spm-model", spm_model_path, "--processes", "1")
    assert_one_line_error(code, line, binary, "not a text file")
    assert snapshot(binary) == before and not (tmp_path / "out").exists()


def test_create_data_skips_and_counts_binary_and_overlong_inputs(capsys, caplog, tmp_path,
                                                                 corpus, spm_model_path):
    """A glob that also matches a binary file, and a document holding a 1.5 MB line:
    both are left out, counted per file in summary.json and named on stderr."""
    data = tmp_path / "data"
    data.mkdir()
    shutil.copy(corpus, data / "a.txt")
    (data / "b.txt").write_bytes(b"\x00\x01binary\x00" * 100)
    (data / "c.txt").write_text("First sentence of a long document here.\n"
                                + "x" * 1_500_000 + "\nThe last sentence of it.\n\n",
                                encoding="utf-8")
    code = cli.main(["create-data", "--input", f"{data}/*.txt", "--output-dir",
                     str(tmp_path / "out"), "--spm-model", spm_model_path, "--processes", "1",
                     "--max-seq-length", "32", "--max-predictions-per-seq", "5",
                     "--dupe-factor", "1"])
    err = capsys.readouterr().err
    assert code == 0, err[-2000:]
    skipped = json.load(open(tmp_path / "out" / "summary.json"))["skipped"]
    assert skipped["binary_file"]["files"] == {str(data / "b.txt"): 1}
    assert skipped["overlong_line"]["files"] == {str(data / "c.txt"): 1}
    assert "line 2" in skipped["overlong_line"]["examples"][0]
    warnings = caplog.text  # the warnings name the files (logged to stderr by the CLI)
    assert str(data / "b.txt") in warnings and str(data / "c.txt") in warnings


def test_create_data_names_a_missing_input_before_any_work(capsys, tmp_path, corpus,
                                                           spm_model_path):
    missing = tmp_path / "typo.txt"
    code, line = run_cli(capsys, "create-data", "--input", f"{corpus},{missing}",
                         "--output-dir", tmp_path / "out", "--spm-model", spm_model_path)
    assert_one_line_error(code, line, missing, "no such file")
    assert not (tmp_path / "out").exists()


def test_create_data_rerun_after_a_failed_run_is_not_refused(capsys, tmp_path, corpus,
                                                             spm_model_path):
    text = tmp_path / "corpus.txt"
    text.write_text("Only one sentence in this document.\n\n", encoding="utf-8")
    argv = ["create-data", "--input", text, "--output-dir", tmp_path / "out",
            "--spm-model", spm_model_path, "--processes", "1", "--max-seq-length", "32",
            "--max-predictions-per-seq", "5", "--dupe-factor", "1"]
    code, line = run_cli(capsys, *argv)
    assert_one_line_error(code, line, "no instances", "summary.json")
    shutil.copy(corpus, text)  # the user fixes the input and reruns the same command
    code, line = run_cli(capsys, *argv)
    assert code == 0, line
    assert glob.glob(str(tmp_path / "out" / "pretrain-*.tfrecord"))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_killing_create_data_kills_its_workers(tmp_path, corpus_documents, spm_model_path):
    from albert_tf.training.data.corpus import write_corpus_file

    text = tmp_path / "corpus.txt"
    write_corpus_file(str(text), iter(corpus_documents[:40]))
    proc = subprocess.Popen(
        [*CLI, "create-data", "--input", str(text),
         "--output-dir", str(tmp_path / "out"), "--spm-model", spm_model_path,
         "--processes", "2", "--documents-per-shard", "1", "--dupe-factor", "5"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def children():
        """The pool's worker processes (not multiprocessing's resource tracker)."""
        found = []
        for stat in glob.glob("/proc/[0-9]*/stat"):
            pid = stat.split("/")[2]
            try:
                fields = open(stat).read().rsplit(")", 1)[1].split()
                command = open(f"/proc/{pid}/cmdline", "rb").read()
            except OSError:
                continue
            if int(fields[1]) == proc.pid and b"spawn_main" in command:
                found.append(int(pid))
        return found

    deadline = time.time() + 120
    while len(children()) < 2 and time.time() < deadline:
        time.sleep(0.1)
    workers = children()
    assert len(workers) >= 2, "the workers never started"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    deadline = time.time() + 120  # a safety net: the loop ends when they are gone
    alive = workers
    while alive and time.time() < deadline:
        time.sleep(0.2)
        alive = [pid for pid in workers if os.path.exists(f"/proc/{pid}")
                 and open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] != "Z"]
    assert not alive, f"workers {alive} outlived their killed parent"


# ------------------------------------------------------------------- pretrain
def _pretrain(capsys, train, output, *extra):
    return run_cli(capsys, "pretrain", "--train-data", train, "--output-dir", output,
                   *TINY, *extra)


@pytest.mark.parametrize("damage", ["truncated", "garbage", "mixed_length"])
def test_pretrain_names_a_bad_shard_before_training(capsys, tmp_path, shards, damage):
    data = tmp_path / "data"
    shutil.copytree(shards / "len32", data)
    bad = data / "pretrain-00001.tfrecord"
    if damage == "truncated":
        bad.write_bytes(bad.read_bytes()[:-100])
    elif damage == "garbage":
        bad.write_bytes(b"this is not a TFRecord file at all" * 10)
    else:
        shutil.copy(shards / "len48" / "pretrain-00000.tfrecord", bad)
    before = snapshot(data)
    code, line = _pretrain(capsys, f"{data}/pretrain-*.tfrecord", tmp_path / "run")
    assert_one_line_error(code, line, bad)
    assert snapshot(data) == before
    assert not (tmp_path / "run" / "checkpoints").exists()  # refused before any step


def test_pretrain_refuses_data_longer_than_the_position_table(capsys, tmp_path, shards):
    code, line = _pretrain(capsys, shards / "len48" / "pretrain-00000.tfrecord",
                           tmp_path / "run", "albert.max_position_embeddings=40")
    assert_one_line_error(code, line, "seq_length=48", "max_position_embeddings=40")
    assert not (tmp_path / "run" / "checkpoints").exists()


def _damaged_copy(source, target, damage, records=None):
    """`source` (a TFRecord shard) rewritten to `target` with `damage` done to the records
    at the indices `records` (None: all of them)."""
    import tensorflow as tf

    feature, index, value = damage
    with tf.io.TFRecordWriter(str(target)) as writer:
        for i, raw in enumerate(tf.data.TFRecordDataset(str(source))):
            example = tf.train.Example.FromString(raw.numpy())
            if records is None or i in records:
                values = example.features.feature[feature]
                kind = "float_list" if feature == "masked_lm_weights" else "int64_list"
                getattr(values, kind).value[index] = value
            writer.write(example.SerializeToString())


# (feature, index in the record, value): what the parser accepts and the model cannot use.
RECORD_DAMAGE = {
    "nan weight": ("masked_lm_weights", 0, math.nan),
    "id past the vocabulary": ("input_ids", 1, 30000),  # albert-base: 30,000 pieces
    "masked label past the vocabulary": ("masked_lm_ids", 0, 40000),
    "position past the sequence": ("masked_lm_positions", 0, 70),
    "sentence-order label 7": ("next_sentence_labels", 0, 7),
    "segment past type_vocab_size": ("segment_ids", 1, 9),
}


@pytest.mark.parametrize("case", sorted(RECORD_DAMAGE))
def test_pretrain_refuses_records_the_model_cannot_use(capsys, tmp_path, shards, case):
    """Every record of the shard damaged: refused at the first batch naming the file,
    the record, the feature and the value; nothing trained, nothing exported."""
    data = tmp_path / "data"
    data.mkdir()
    bad = data / "pretrain-00000.tfrecord"
    _damaged_copy(shards / "len32" / "pretrain-00000.tfrecord", bad, RECORD_DAMAGE[case])
    feature, _, value = RECORD_DAMAGE[case]
    before = snapshot(data)
    code, line = _pretrain(capsys, bad, tmp_path / "run")
    shown = "nan" if feature == "masked_lm_weights" else str(value)
    assert_one_line_error(code, line, f"{bad}: record ", "(counting from 0)",
                          f"{feature} holds {shown}, not ")
    assert snapshot(data) == before
    assert not (tmp_path / "run" / "model").exists()
    assert not (tmp_path / "run" / "checkpoints").exists()


def test_evaluation_names_the_exact_bad_record(tmp_path, shards, spm_model_path):
    """Read in order, the one damaged record is named by its index in its file."""
    from albert_tf import AlbertConfig, AlbertPretrainer
    from albert_tf.tokenizer.spm import AlbertTokenizer
    from albert_tf.training.pretrain.evaluation import evaluate_pretraining

    model = AlbertPretrainer(AlbertConfig(
        vocab_size=AlbertTokenizer(spm_model_path).vocab_size, embedding_size=8, hidden_size=12,
        num_hidden_layers=1, num_attention_heads=3, intermediate_size=20,
        max_position_embeddings=32))

    bad = tmp_path / "pretrain-00000.tfrecord"
    _damaged_copy(shards / "len32" / "pretrain-00000.tfrecord", bad,
                  RECORD_DAMAGE["position past the sequence"], records={5})
    with pytest.raises(errors.UserError, match=rf"{bad}: record 5 \(counting from 0\): "
                                               r"masked_lm_positions holds 70, not a position "
                                               r"in the sequence \(0 to 31\)"):
        evaluate_pretraining(model, str(bad), batch_size=2)


def test_pretrain_stops_on_a_loss_that_is_not_finite_without_exporting(capsys, tmp_path,
                                                                       shards):
    code, line = _pretrain(capsys, shards / "len32" / "pretrain-00000.tfrecord",
                           tmp_path / "run", "optimizer=adamw", "learning_rate=1e30",
                           "clipnorm=0", "warmup_steps=0")
    assert_one_line_error(code, line, "pretraining stopped at step", "the loss is nan",
                          "nothing was exported", status=1)
    assert not (tmp_path / "run" / "model").exists()
    checkpoints = tmp_path / "run" / "checkpoints"
    assert not checkpoints.exists() or not [n for n in os.listdir(checkpoints)
                                            if n.startswith("ckpt-2")]  # none after the NaN


def test_demo_refuses_a_sequence_longer_than_its_model(capsys, tmp_path):
    # The demo's own model sizes its position table from --seq-length; a size's table
    # (512 entries) bounds it, checked before any stage runs.
    code, line = run_cli(capsys, "demo", "--output", tmp_path / "demo", "--seq-length", "1024")
    assert_one_line_error(code, line, "seq_length=1024",
                          "max_position_embeddings=512 (--seq-length)")
    assert not (tmp_path / "demo").exists()


def test_finetune_checks_the_sequence_length_against_the_checkpoint(capsys, tmp_path,
                                                                    tiny_checkpoint):
    # The fixture's position table has 13 entries.
    code, line = run_cli(capsys, "finetune", "--task", "classify", "--checkpoint",
                         tiny_checkpoint, "--output", tmp_path / "ft", "--data", "x.csv",
                         "--columns", "text", "--seq-length", "64")
    assert_one_line_error(code, line, "seq_length=64", "max_position_embeddings=13",
                          tiny_checkpoint)
    assert not (tmp_path / "ft").exists()


def test_pretrain_unwritable_output_is_one_line_and_creates_nothing(capsys, tmp_path, shards):
    blocker = tmp_path / "a_file"
    blocker.write_text("I am a file, not a directory\n")
    code, line = _pretrain(capsys, shards / "len32" / "pretrain-00000.tfrecord",
                           blocker / "run")
    assert_one_line_error(code, line, blocker, "not a directory")
    assert blocker.read_text() == "I am a file, not a directory\n"


def test_pretrain_unknown_size_lists_the_sizes(capsys, tmp_path, shards):
    code, line = _pretrain(capsys, shards / "len32" / "pretrain-00000.tfrecord",
                           tmp_path / "run", "model=albert-bsae")
    assert_one_line_error(code, line, "unknown size 'albert-bsae'", "albert-base",
                          "albert-xxlarge")


@pytest.mark.parametrize("argv, names", [
    (["pretrain", "--train-data", "x", "--output-dir", "o", "seq_length=0"],
     ["seq_length=0", "must be an integer from 3"]),
    (["pretrain", "--train-data", "x", "--output-dir", "o", "learning_rate=NaN"],
     ["NaN"]),
    (["pretrain", "--train-data", "x", "--output-dir", "o", "oops"],
     ["'oops'", "KEY=VALUE"]),
    (["create-data", "--output-dir", "o", "--spm-model", "m", "--processes", "0"],
     ["--processes=0", "positive"]),
    (["vocab", "--input", "x", "--output", "o", "--vocab-size", "9", "--num-threads", "0"],
     ["--num-threads=0"]),
    (["params", "--config", "albert-bsae"], ["unknown size 'albert-bsae'", "albert-base"]),
], ids=["pretrain_seq_length_0", "pretrain_nan", "pretrain_not_key_value",
        "create_data_processes_0", "vocab_threads_0", "params_unknown_preset"])
def test_zero_nan_and_malformed_options_are_refused(capsys, tmp_path, monkeypatch, argv, names):
    monkeypatch.chdir(tmp_path)
    code, line = run_cli(capsys, *argv)
    assert_one_line_error(code, line, *names)
    assert os.listdir(tmp_path) == []


def test_finetune_uses_the_same_key_value_grammar(capsys, tmp_path, tiny_checkpoint):
    code, line = run_cli(capsys, "finetune", "--task", "classify", "--checkpoint",
                         tiny_checkpoint, "--output", tmp_path / "ft", "--set", "oops")
    assert_one_line_error(code, line, "--set 'oops'", "KEY=VALUE")


def test_an_atomic_write_that_hits_a_full_disk_leaves_the_old_file(tmp_path, monkeypatch,
                                                                   capsys):
    target = tmp_path / "summary.json"
    target.write_text('{"old": true}\n')

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device", str(target))

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(errors.UserError) as caught:
        atomic.atomic_write_json(target, {"new": True})
    assert target.read_text() == '{"old": true}\n' and hidden_temporaries(tmp_path) == []
    assert cli.report_error("create-data", caught.value) == 2
    line = capsys.readouterr().err.strip()
    assert line == (f"albert-tf create-data: cannot write {target}: No space left on device; "
                    "nothing was written")


def test_remote_atomic_writes_go_through_the_registered_file_system(tmp_path, monkeypatch):
    """A remote path is written to a temporary name and renamed by the registered file
    system; with none registered, by tf.io.gfile, imported on that first remote path;
    without TensorFlow, one clear error."""
    import tensorflow as tf

    calls = []

    def local(path):
        return path.replace("mem://bucket", str(tmp_path))

    class Recording:  # tf.io.gfile's interface, on a local directory
        def GFile(self, path, mode):
            calls.append(("open", os.path.basename(path)))
            return tf.io.gfile.GFile(local(path), mode)

        def rename(self, src, dst, overwrite):
            calls.append(("rename", os.path.basename(dst), overwrite))
            tf.io.gfile.rename(local(src), local(dst), overwrite=overwrite)

        def remove(self, path):
            calls.append(("remove", os.path.basename(path)))

    monkeypatch.setattr(atomic, "_remote_filesystem", Recording())
    atomic.atomic_write_json("mem://bucket/run.json", {"step": 3})
    assert json.loads((tmp_path / "run.json").read_text()) == {"step": 3}
    assert calls[0][0] == "open" and atomic.is_temporary(calls[0][1])
    assert calls[1] == ("rename", "run.json", True)

    # None registered: TensorFlow's file systems (its in-memory ram:// one here).
    monkeypatch.setattr(atomic, "_remote_filesystem", None)
    target = f"ram://{tmp_path.name}/run.json"
    atomic.atomic_write_json(target, {"step": 4})
    assert atomic._remote_filesystem is tf.io.gfile
    assert json.loads(tf.io.gfile.GFile(target).read()) == {"step": 4}
    assert tf.io.gfile.listdir(f"ram://{tmp_path.name}/") == ["run.json"]  # no temporary left

    monkeypatch.setattr(atomic, "_remote_filesystem", None)
    monkeypatch.setitem(sys.modules, "tensorflow", None)  # TensorFlow cannot be imported
    with pytest.raises(errors.UserError, match="mem://bucket/x.json: writing to a remote path needs"):
        atomic.atomic_write_json("mem://bucket/x.json", {})


def test_a_failed_staged_directory_leaves_no_empty_parents(tmp_path):
    final = tmp_path / "models" / "albert" / "1"
    with pytest.raises(RuntimeError):
        with atomic.staged_directory(final) as staging:
            open(os.path.join(staging, "part"), "w").close()
            raise RuntimeError("killed half-way")
    assert os.listdir(tmp_path) == []


# ----------------------------------------------------------------- the config
@pytest.mark.parametrize("field, value", [("initializer_range", math.nan),
                                          ("initializer_range", math.inf),
                                          ("hidden_dropout_prob", math.nan)])
def test_config_refuses_non_finite_values_naming_the_field_and_file(capsys, tmp_path, field,
                                                                    value):
    from albert_tf import AlbertConfig, ConfigError

    with pytest.raises(ConfigError, match=f"{field}=(nan|inf) must be a finite number"):
        AlbertConfig(**{field: value})
    path = tmp_path / "albert_config.json"
    path.write_text(json.dumps({**AlbertConfig().to_dict(), field: value}))  # NaN/Infinity
    code, line = run_cli(capsys, "params", "--config", path)
    assert_one_line_error(code, line, field, path)


def test_config_from_dict_none_and_acceptances():
    from albert_tf import AlbertConfig, ConfigError

    with pytest.raises(ConfigError, match="expected a dict of config fields, got NoneType"):
        AlbertConfig.from_dict(None)
    # Correct acceptances: finite values, and a sequence exactly as long as the table.
    config = AlbertConfig(initializer_range=1e-3, max_position_embeddings=64)
    config.check_sequence_length(64)
    with pytest.raises(ConfigError, match=r"seq_length=0 must be an integer from 3 .* to "
                                          r"max_position_embeddings=64$"):
        config.check_sequence_length(0)


# --------------------------------------------------- numbers outside their rule
def test_save_checkpoint_refuses_a_seq_length_past_the_position_table(tmp_path):
    from albert_tf import AlbertConfig, AlbertPretrainer, ConfigError, save_checkpoint

    model = AlbertPretrainer(AlbertConfig(vocab_size=37, embedding_size=8, hidden_size=12,
                                          num_hidden_layers=1, num_attention_heads=3,
                                          intermediate_size=20, max_position_embeddings=64))
    with pytest.raises(ConfigError, match=r"seq_length=1000000 must be an integer from 3 .* "
                                          r"to max_position_embeddings=64 \(seq_length of "
                                          rf"the model saved to {tmp_path / 'ckpt'}"):
        save_checkpoint(model, tmp_path / "ckpt", seq_length=10**6)
    assert os.listdir(tmp_path) == []
    save_checkpoint(model, tmp_path / "ckpt", seq_length=64)  # acceptance: the whole table


@pytest.mark.parametrize("model, argument", [("AlbertSequenceClassifier", 0),
                                             ("AlbertTokenClassifier", -2),
                                             ("AlbertSequenceClassifier", 2.0)])
def test_a_head_of_no_classes_is_refused_naming_the_argument(model, argument):
    import albert_tf
    from albert_tf import AlbertConfig, ConfigError

    with pytest.raises(ConfigError, match=rf"num_classes={argument!r} must be an integer in "
                                          rf"\[1, 32768\] \({model}\)"):
        getattr(albert_tf, model)(AlbertConfig(vocab_size=37, hidden_size=12,
                                               num_attention_heads=3, num_hidden_layers=1),
                                  num_classes=argument)


def test_export_refuses_a_version_past_int64_before_loading(capsys, tmp_path, tiny_checkpoint):
    code, line = run_cli(capsys, "export", "--checkpoint", tiny_checkpoint, "--output",
                         tmp_path / "models" / "m", "--version", str(2**63))
    assert_one_line_error(code, line, "--version=9223372036854775808 must be an integer from 0 "
                                      "to 9223372036854775807")
    assert not (tmp_path / "models").exists()


@pytest.mark.parametrize("sizes, names", [
    ("100000000", ["--embedding-sizes=100000000", "hidden_size=128"]),
    ("64,0", ["--embedding-sizes=0"]),
    ("64,32,64", ["--embedding-sizes names 64 twice"]),
])
def test_ablate_checks_embedding_sizes_before_the_data_stage(capsys, tmp_path, sizes, names):
    code, line = run_cli(capsys, "ablate", "--output", tmp_path / "ablation",
                         "--embedding-sizes", sizes)
    assert_one_line_error(code, line, *names)
    assert os.listdir(tmp_path) == []  # no data stage, no directory


@pytest.mark.parametrize("minutes", ["1e9", "inf", "-3"])
def test_demo_budget_has_its_rule(capsys, tmp_path, minutes):
    code, line = run_cli(capsys, "demo", "--output", tmp_path / "demo", "--minutes", minutes)
    assert_one_line_error(code, line, f"--minutes={float(minutes)!r}", "in (0, 10080]")
    assert os.listdir(tmp_path) == []


# --------------------------------------------------------- export and convert
def test_export_of_a_non_checkpoint_names_the_directory_first(capsys, tmp_path):
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "readme.txt").write_text("not a model\n")
    code, line = run_cli(capsys, "export", "--checkpoint", tmp_path / "notes", "--output",
                         tmp_path / "models" / "m")
    assert_one_line_error(code, line, tmp_path / "notes", "not a checkpoint")
    assert "spm" not in line.lower() and not (tmp_path / "models").exists()


def test_export_refuses_seq_length_zero(capsys, tmp_path, tiny_checkpoint):
    code, line = run_cli(capsys, "export", "--checkpoint", tiny_checkpoint, "--output",
                         tmp_path / "models" / "m", "--seq-length", "0")
    assert_one_line_error(code, line, "seq_length=0 must be an integer from 3",
                          "max_position_embeddings=13 (--seq-length")
    assert not (tmp_path / "models").exists()


def test_export_without_tensorflow_serving_api_is_one_line_and_writes_nothing(
        tmp_path, tiny_checkpoint):
    script = ("import sys; sys.modules['tensorflow_serving'] = None\n"
              "from albert_tf.infra import cli\n"
              f"sys.exit(cli.main(['export', '--checkpoint', {str(tiny_checkpoint)!r}, "
              f"'--output', {str(tmp_path / 'models' / 'm')!r}]))")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}, timeout=SAFETY_NET_S)
    line = proc.stderr.strip().splitlines()[-1]
    assert_one_line_error(proc.returncode, line, "tensorflow-serving-api")
    assert not (tmp_path / "models").exists()


def test_setup_declares_tensorflow_serving_api_as_a_core_dependency():
    from albert_tf.keras_compat import KERAS_REQUIREMENT

    setup = open(os.path.join(os.path.dirname(FIXTURES), "..", "setup.py")).read()
    core = setup.split("install_requires=[", 1)[1].split("]", 1)[0]
    assert "tensorflow-serving-api" in core and "_keras_requirement()" in core
    assert KERAS_REQUIREMENT.startswith("keras>=") and ",<" in KERAS_REQUIREMENT


def test_convert_refuses_a_vocabulary_of_another_size(capsys, tmp_path, spm_model_path):
    src = os.path.join(FIXTURES, "shared", "hf")
    before = snapshot(src, spm_model_path)
    code, line = run_cli(capsys, "convert", src, tmp_path / "out", "--spm-model",
                         spm_model_path)
    assert_one_line_error(code, line, spm_model_path, "1000 pieces", "vocab_size=41")
    assert snapshot(src, spm_model_path) == before and not (tmp_path / "out").exists()


# -------------------------------------------------------------------- predict
class _Server:
    """A REST endpoint with one text signature that answers `reply(rows)` to predict."""

    def __init__(self, reply, metadata=None):
        metadata = metadata if metadata is not None else {"metadata": {"signature_def": {
            "signature_def": {"serving_default": {"inputs": {"text": {"dtype": "DT_STRING"}},
                                                  "outputs": {"label": {}}}}}}}

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _send(self, data: bytes):
                self.send_response(200)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                self._send(json.dumps(metadata).encode())

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                self._send(reply(len(body["instances"])))

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()


@pytest.mark.parametrize("reply, status, names", [
    (lambda n: json.dumps({"predictions": ["pos"] * (n - 1)}).encode(), 1,
     ["rows 1-3", "returned 2 predictions for 3 inputs"]),  # the server's fault: named
    (lambda n: b"<html>502 Bad Gateway</html>", 1, ["not JSON", "<html>"]),
    (lambda n: json.dumps({"predictions": ["pos"] * n}).encode(), 0, []),  # acceptance
], ids=["short_reply", "not_json", "full_reply_accepted"])
def test_predict_against_a_server_that_misbehaves(capsys, tmp_path, reply, status, names):
    source = tmp_path / "texts.txt"
    source.write_text("one\ntwo\nthree\n", encoding="utf-8")
    out = tmp_path / "out.jsonl"
    with _Server(reply) as server:
        code, line = run_cli(capsys, "predict", "--server", server.url, "--model", "m",
                             "--input", source, "--output", out)
    if status == 0:
        assert code == 0 and len(out.read_text().splitlines()) == 3
        return
    assert_one_line_error(code, line, *names, status=status)
    if status == 1:
        assert server.url in line
    assert not out.exists() and hidden_temporaries(tmp_path) == []


def _two_outputs(dtype="DT_FLOAT", rank=2):
    """Metadata of a signature with a string label and [B, 2] probabilities."""
    return {"metadata": {"signature_def": {"signature_def": {"serving_default": {
        "inputs": {"text": {"dtype": "DT_STRING"}},
        "outputs": {"label": {"dtype": "DT_STRING", "tensor_shape": {"dim": [{"size": "-1"}]}},
                    "probabilities": {"dtype": dtype, "tensor_shape": {
                        "dim": [{"size": "-1"}] * rank}}}}}}}}


def _rows(n, probabilities):
    return json.dumps({"predictions": [{"label": "pos", "probabilities": probabilities}] * n},
                      allow_nan=True).encode()


@pytest.mark.parametrize("reply, metadata, names", [
    (lambda n: json.dumps({"predictions": "abc"}).encode(), None,
     ['"predictions" is a JSON string, not a list of rows']),
    (lambda n: json.dumps({"predictions": None}).encode(), None, ["JSON null"]),
    (lambda n: json.dumps({"predictions": 5}).encode(), None, ["JSON number"]),
    (lambda n: json.dumps({"predictions": [None] * n}).encode(), None,
     ["row 1: output 'label' holds null"]),
    (lambda n: json.dumps({"predictions": [float("nan")] * n}).encode(), None,
     ["row 1: output 'label' holds NaN"]),
    (lambda n: _rows(n, [0.5, float("inf")]), _two_outputs(),
     ["row 1: output 'probabilities' holds Infinity, not a finite number"]),
    (lambda n: _rows(n, 0.5), _two_outputs(),
     ["row 1: output 'probabilities' holds 0.5 where the signature has a list"]),
    (lambda n: json.dumps({"predictions": [{"label": "pos"}] * n}).encode(), _two_outputs(),
     ["row 1: expected the outputs ['label', 'probabilities'], got ['label']"]),
    (lambda n: json.dumps({"outputs": {"label": ["a"] * n, "probabilities": [[1, 0]]}}).encode(),
     _two_outputs(), ['"outputs" columns have different lengths']),
    (lambda n: b"{}", {"metadata": {"signature_def": {"signature_def": ["x"]}}},
     ["unexpected model metadata"]),
    (lambda n: b"{}", {"metadata": {"signature_def": {"signature_def": {
        "serving_default": {"inputs": ["text"], "outputs": {}}}}}},
     ["unexpected model metadata: signature 'serving_default'"]),
], ids=["string", "null", "number", "null_rows", "nan", "infinity", "scalar_for_a_list",
        "missing_output", "ragged_columns", "metadata_list", "metadata_inputs_list"])
def test_predict_checks_a_reply_against_the_signature_and_the_rows(capsys, tmp_path, reply,
                                                                   metadata, names):
    """Nonsense from a server is one line, exit 1, naming the server, rows and output;
    no output file is written (not "a", "b", "c" for three rows)."""
    source = tmp_path / "texts.txt"
    source.write_text("one\ntwo\nthree\n", encoding="utf-8")
    out = tmp_path / "out.jsonl"
    before = snapshot(tmp_path)
    with _Server(reply, metadata) as server:
        code, line = run_cli(capsys, "predict", "--server", server.url, "--model", "m",
                             "--input", source, "--output", out)
    assert_one_line_error(code, line, server.url, *names, status=1)
    assert snapshot(tmp_path) == before and hidden_temporaries(tmp_path) == []


def test_predict_accepts_a_reply_that_fits(capsys, tmp_path):
    source = tmp_path / "texts.txt"
    source.write_text("one\ntwo\n", encoding="utf-8")
    out = tmp_path / "out.jsonl"
    with _Server(lambda n: _rows(n, [0.25, 0.75]), _two_outputs()) as server:
        code, line = run_cli(capsys, "predict", "--server", server.url, "--model", "m",
                             "--input", source, "--output", out)
    assert code == 0, line
    assert [json.loads(r) for r in out.read_text().splitlines()] == [
        {"index": i, "label": "pos", "probabilities": [0.25, 0.75]} for i in range(2)]


@pytest.mark.parametrize("route, names", [
    (["--server", "http://127.0.0.1:9", "--timeout", "0"], ["--timeout=0.0", "in (0, 86400]"]),
    (["--server", "http://127.0.0.1:9", "--timeout", "-1"], ["--timeout=-1.0"]),
    (["--server", "http://127.0.0.1:9", "--timeout", "nan"], ["--timeout=nan"]),
    (["--server", "http://127.0.0.1:9", "--timeout", "1e300"], ["--timeout=1e+300", "in (0, 86400]"]),
    (["--server", "ftp://127.0.0.1:9"], ["--server 'ftp://127.0.0.1:9'", "http://HOST:PORT"]),
    (["--server", "localhost:8501"], ["--server 'localhost:8501'", "http://HOST:PORT"]),
    (["--grpc", "http://localhost:8500"], ["--grpc 'http://localhost:8500'", "HOST:PORT"]),
    (["--server", "http://127.0.0.1:9", "--version", str(2**63)], ["--version=9223372036854775808"]),
])
def test_predict_checks_timeouts_addresses_and_versions_before_any_request(capsys, tmp_path,
                                                                          route, names):
    source = tmp_path / "texts.txt"
    source.write_text("one\n", encoding="utf-8")
    listener = socket.create_server(("127.0.0.1", 0))  # stands at the routes' address
    port = listener.getsockname()[1]
    route = [part.replace(":9", f":{port}") for part in route]
    names = [name.replace(":9", f":{port}") for name in names]
    try:
        code, line = run_cli(capsys, "predict", *route, "--input", source)
        assert_one_line_error(code, line, *names)
        listener.setblocking(False)
        with pytest.raises(BlockingIOError):  # refused before any connection was made
            listener.accept()
    finally:
        listener.close()


# ------------------------------------------------------------- Keras versions
@pytest.mark.parametrize("version, supported", [("3.9.2", False), ("3.10.0", True),
                                                ("3.15.1", True), ("3.16.0", False),
                                                ("4.0.0", False)])
def test_keras_version_range(monkeypatch, version, supported):
    from albert_tf import keras_compat

    monkeypatch.delenv(keras_compat.ALLOW_ENV, raising=False)
    if supported:
        keras_compat.check_keras_version(version)
        return
    with pytest.raises(keras_compat.UnsupportedKerasError) as caught:
        keras_compat.check_keras_version(version)
    assert f"Keras {version} is installed" in str(caught.value)
    assert "3.10 to 3.15.x" in str(caught.value)


def test_importing_the_models_under_an_unsupported_keras_is_one_clear_error():
    script = ("import keras; keras.__version__ = '3.99.0'\n"
              "import albert_tf.models")
    env = {k: v for k, v in os.environ.items() if k != "ALBERT_TF_ALLOW_ANY_KERAS"}
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env=env, timeout=SAFETY_NET_S)
    assert proc.returncode != 0
    assert "UnsupportedKerasError: albert-tf supports Keras 3.10 to 3.15.x" in proc.stderr
    assert "Keras 3.99.0 is installed" in proc.stderr


def test_private_keras_members_still_exist():
    import keras

    from albert_tf import keras_compat

    missing = [m for m in keras_compat.PRIVATE_MODEL_MEMBERS if not hasattr(keras.Model, m)]
    assert not missing, f"this Keras lacks {missing}: update keras_compat and distribute.py"


# --------------------------------------------------------------------- --debug
def test_debug_shows_the_traceback_and_the_default_is_one_line(capsys, tmp_path, monkeypatch):
    missing = tmp_path / "nope.json"
    code, line = run_cli(capsys, "params", "--config", missing)
    assert_one_line_error(code, line, missing, "not found")
    monkeypatch.setenv(cli.DEBUG_ENV, "0")  # restored after the test
    assert cli.main(["--debug", "params", "--config", str(missing)]) == 2
    assert "Traceback (most recent call last)" in capsys.readouterr().err


def test_an_unexpected_error_is_one_line_with_the_debug_hint(capsys, monkeypatch):
    from albert_tf import params

    def broken(build=False):
        raise KeyError("internal")

    monkeypatch.setattr(params, "parameter_table", broken)
    code, line = run_cli(capsys, "params")
    assert code == 1
    assert line == ("albert-tf params: unexpected error: KeyError: 'internal' "
                    "(rerun with --debug for the traceback)")
