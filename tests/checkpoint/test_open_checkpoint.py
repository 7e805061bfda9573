"""`open_checkpoint`: one door per checkpoint, its format detected once.

The fixtures (tests/fixtures/, made by tools/make_reference_fixtures.py) hold the same
Hugging Face weights as model.safetensors and as an original-name TF1 checkpoint; our
own format is written from them here. The counting tests wrap the one detection
function and the tensor-index readers and walk the path every command takes (open ->
tokenizer -> task record -> load), through convert and export themselves too.
"""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys

import keras
import numpy as np
import pytest

from albert_tf import AlbertPretrainer, AlbertSequenceClassifier, load_checkpoint, save_checkpoint
from albert_tf.checkpoint import (
    FORMATS,
    CheckpointError,
    OpenedCheckpoint,
    TaskRecord,
    TokenizerFiles,
    convert,
    foreign,
    formats,
    open_checkpoint,
)
from albert_tf.config import AlbertConfig
from albert_tf.errors import UserError
from tests.checkpoint.test_checkpoint import assert_matches_reference, pretrainer_outputs, reference
from tests.helpers.paths import FIXTURES, REPO, TASK_FIXTURES

FOREIGN = [("grouped", "hf"), ("grouped", "tf1"), ("shared", "hf"), ("shared", "tf1")]


@pytest.fixture(scope="module")
def ours(tmp_path_factory, spm_41_path) -> str:
    """Our format, written from the shared HF fixture with a tokenizer that is not the
    default (cased, accents kept) and a spiece.model of its size."""
    root = tmp_path_factory.mktemp("ours")
    spm = root / "vocab.model"
    shutil.copyfile(spm_41_path, spm)
    model = load_checkpoint(os.path.join(FIXTURES, "shared", "hf"))
    return save_checkpoint(model, root / "ckpt", spm_model=str(spm), do_lower_case=False,
                           extra_info={"keep_accents": True})


@pytest.fixture
def counts(monkeypatch):
    """Calls of the detection function, of each format's rule and of the tensor-index
    readers, while the test runs."""
    seen = {}

    def counted(name, function):
        def wrapper(*args, **kwargs):
            seen[name] = seen.get(name, 0) + 1
            return function(*args, **kwargs)
        return wrapper

    monkeypatch.setattr(formats, "detect_format", counted("detect_format", formats.detect_format))
    for name, reader in FORMATS.items():
        monkeypatch.setattr(reader, "detect",
                            classmethod(counted(f"detect:{name}", reader.detect.__func__)))
    for name in ("read_hf", "read_tf1"):
        monkeypatch.setattr(foreign, name, counted(name, getattr(foreign, name)))
    monkeypatch.setattr(TaskRecord, "read", classmethod(counted("TaskRecord.read",
                                                                TaskRecord.read.__func__)))
    monkeypatch.setattr(AlbertConfig, "from_json_file",
                        classmethod(counted("config", AlbertConfig.from_json_file.__func__)))
    return seen


def outputs(model) -> dict[str, np.ndarray]:
    return pretrainer_outputs(model, reference("shared"))


# ------------------------------------------------------------------ one detection, one read
@pytest.mark.parametrize("fmt", ["hf", "tf1", "albert_tf"])
def test_the_command_path_detects_once_and_reads_each_part_once(fmt, ours, counts):
    path = ours if fmt == "albert_tf" else os.path.join(FIXTURES, "shared", fmt)
    opened = open_checkpoint(path)
    assert opened.tokenizer.do_lower_case is (fmt != "albert_tf")
    assert opened.task_record.task == "pretraining"
    assert opened.config.vocab_size == 41
    model = opened.load()
    assert type(model) is AlbertPretrainer
    assert counts.pop("detect_format") == 1
    assert all(n == 1 for k, n in counts.items() if k.startswith("detect:")), counts
    assert counts.pop("config") == 1  # the config file, read once for .config and .load()
    index = {"hf": "read_hf", "tf1": "read_tf1"}.get(fmt)
    if index:  # the foreign tensor index: read for the record, reused by the load
        assert counts[index] == 1 and "TaskRecord.read" not in counts, counts
    else:
        assert counts["TaskRecord.read"] == 1 and not {"read_hf", "read_tf1"} & set(counts)


def test_convert_opens_its_source_once(tmp_path, counts):
    convert.convert(os.path.join(FIXTURES, "grouped", "tf1"), str(tmp_path / "out"))
    assert counts["detect_format"] == 1 and counts["read_tf1"] == 1, counts
    assert_matches_reference(load_checkpoint(tmp_path / "out"), "grouped", ("sop_logits",))


def test_export_opens_its_checkpoint_once(tmp_path, counts, monkeypatch):
    """export up to the serving module: the checkpoint behind it was opened once, and the
    model and record it serves come from that one opening."""
    pytest.importorskip("tensorflow_text")
    from albert_tf.serving import export

    built = {}

    class Built(Exception):
        pass

    def build_module(model, preprocessor, task, record, pad_multiple, batching=None):
        built.update(model=model, record=record, preprocessor=preprocessor)
        raise Built

    monkeypatch.setattr(export, "build_module", build_module)
    path = os.path.join(TASK_FIXTURES, "seq_single", "hf")
    with pytest.raises(Built):
        export.export(path, str(tmp_path / "models" / "m"))
    assert counts["detect_format"] == 1 and counts["read_hf"] == 1, counts
    assert built["record"] == open_checkpoint(path).task_record
    assert type(built["model"]) is AlbertSequenceClassifier
    assert not (tmp_path / "models").exists()


# ------------------------------------------------------------------ each format
@pytest.mark.parametrize("name,fmt", FOREIGN)
def test_foreign_formats_open_with_their_parts(name, fmt):
    path = os.path.join(FIXTURES, name, fmt)
    opened = open_checkpoint(path)
    assert isinstance(opened, OpenedCheckpoint)
    assert (opened.path, opened.format) == (path, fmt)
    config_file = "config.json" if fmt == "hf" else "albert_config.json"
    assert opened.config == AlbertConfig.from_json_file(os.path.join(path, config_file))
    assert opened.task_record.task == "pretraining"
    assert opened.task_record.source == path
    assert opened.tokenizer == TokenizerFiles(None, True, False)  # no vocabulary shipped
    loaded = opened.load()
    assert_matches_reference(loaded, name, ("sop_logits",))
    expected = pretrainer_outputs(load_checkpoint(path), reference(name))
    for key, value in pretrainer_outputs(loaded, reference(name)).items():
        np.testing.assert_array_equal(value, expected[key], err_msg=key)


def test_our_format_opens_with_its_parts(ours):
    opened = open_checkpoint(ours)
    assert (opened.path, opened.format) == (ours, "albert_tf")
    assert opened.config == load_checkpoint(ours).config
    assert opened.task_record == TaskRecord.create("pretraining", do_lower_case=False,
                                                   keep_accents=True, precision="float32")
    assert opened.tokenizer == TokenizerFiles(os.path.join(ours, "spiece.model"), False, True)
    got, expected = outputs(opened.load()), outputs(load_checkpoint(ours))
    for key in got:
        np.testing.assert_array_equal(got[key], expected[key], err_msg=key)


def test_each_load_builds_a_new_model():
    opened = open_checkpoint(os.path.join(FIXTURES, "shared", "hf"))
    first, second = opened.load(), opened.load()
    assert first is not second
    for a, b in zip(first.get_weights(), second.get_weights()):
        np.testing.assert_array_equal(a, b)


def test_tf1_prefix_finds_the_vocabulary_beside_it(tmp_path, spm_41_path):
    directory = shutil.copytree(os.path.join(FIXTURES, "shared", "tf1"), tmp_path / "base")
    shutil.copyfile(spm_41_path, directory / "30k-clean.model")
    for path in (directory, directory / "model.ckpt-0", directory / "model.ckpt-0.index"):
        opened = open_checkpoint(path)
        assert opened.format == "tf1"
        assert opened.tokenizer.spm_model == str(directory / "30k-clean.model")


def test_task_fixtures_give_their_records_and_tokenizers():
    path = os.path.join(TASK_FIXTURES, "seq_single", "hf")
    opened = open_checkpoint(path)
    record = opened.task_record
    assert (record.task, record.label_names) == ("classification",
                                                 ("negative", "neutral", "positive"))
    assert opened.tokenizer == TokenizerFiles(os.path.join(path, "spiece.model"), True, False)
    model = opened.load()
    assert type(model) is AlbertSequenceClassifier and model.num_classes == 3
    tf1 = open_checkpoint(os.path.join(TASK_FIXTURES, "seq_single", "tf1"))
    assert tf1.task_record.task == "classification" and tf1.task_record.label_names is None


# ------------------------------------------------------------------ tokenizer
def test_tokenizer_config_is_read_under_one_rule(tmp_path):
    """tokenizer_config.json says both casing and accents, for the record and the
    tokenizer alike (they used to be read by two functions that disagreed on accents)."""
    directory = shutil.copytree(os.path.join(FIXTURES, "shared", "hf"), tmp_path / "hf")
    (directory / "tokenizer_config.json").write_text(
        json.dumps({"do_lower_case": False, "keep_accents": True}), encoding="utf-8")
    opened = open_checkpoint(directory)
    assert (opened.task_record.do_lower_case, opened.task_record.keep_accents) == (False, True)
    assert (opened.tokenizer.do_lower_case, opened.tokenizer.keep_accents) == (False, True)
    (directory / "tokenizer_config.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(CheckpointError, match=r"tokenizer_config.json:1:2: invalid JSON"):
        _ = open_checkpoint(directory).tokenizer


def test_explicit_tokenizer_choices_win(tmp_path, ours, spm_41_path):
    opened = open_checkpoint(ours)
    spm = tmp_path / "other.model"
    shutil.copyfile(spm_41_path, spm)
    assert opened.tokenizer_files(str(spm), True, False) == TokenizerFiles(str(spm), True, False)
    assert opened.tokenizer_files(keep_accents=False) == TokenizerFiles(
        os.path.join(ours, "spiece.model"), False, False)
    assert opened.tokenizer_files() == opened.tokenizer  # nothing given: the checkpoint's
    with pytest.raises(UserError, match=f"SentencePiece model {tmp_path / 'none.model'} "
                                        "does not exist"):
        opened.tokenizer_files(str(tmp_path / "none.model"))


# ------------------------------------------------------------------ task named at open
def test_the_task_named_at_open_is_checked_by_the_record(ours):
    choice = os.path.join(TASK_FIXTURES, "choice", "tf1")
    with pytest.raises(CheckpointError, match="regression.*multiple_choice"):
        _ = open_checkpoint(choice).task_record
    assert open_checkpoint(choice, "multiple_choice").task_record.task == "multiple_choice"
    assert open_checkpoint(ours, "encoder").task_record.task == "pretraining"
    with pytest.raises(CheckpointError, match=f"{ours}: holds a pretraining model, not span"):
        _ = open_checkpoint(ours, "span").task_record  # before any weight is read
    with pytest.raises(CheckpointError, match="holds a classification model, not span"):
        open_checkpoint(os.path.join(TASK_FIXTURES, "seq_single", "hf"), "span").load()


# ------------------------------------------------------------------ not a checkpoint
def test_a_bad_path_is_one_error_naming_it(tmp_path):
    absent = tmp_path / "absent"
    with pytest.raises(CheckpointError) as error:
        open_checkpoint(absent)
    assert str(error.value) == f"{absent}: no such file or directory"
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "readme.txt").write_text("not a model\n")
    with pytest.raises(CheckpointError) as error:
        open_checkpoint(tmp_path / "notes")
    message = str(error.value)
    assert message.startswith(f"{tmp_path / 'notes'}: not a checkpoint: expected ")
    assert len(message.splitlines()) == 1
    for reader in FORMATS.values():
        assert reader.expects in message


def test_a_new_format_is_one_reader_in_the_table(tmp_path, monkeypatch):
    """The shape a later format (a KerasHub preset, ...) takes: a reader with a rule and
    its reading methods, one row in FORMATS; nothing else changes."""

    class Marked(OpenedCheckpoint):
        format, expects = "marked", "MARK (a test format)"

        @classmethod
        def detect(cls, path):
            return os.path.isfile(os.path.join(path, "MARK"))

        def _read_config(self):
            return AlbertConfig(vocab_size=37, embedding_size=8, hidden_size=12,
                                num_hidden_layers=1, num_attention_heads=3,
                                intermediate_size=24, max_position_embeddings=16)

        def _read_task_record(self):
            return TaskRecord.create("pretraining", source=self.path)

        def _load(self):
            return AlbertPretrainer(self.config)

    monkeypatch.setitem(FORMATS, "marked", Marked)
    with pytest.raises(CheckpointError, match=r"or MARK \(a test format\)"):
        open_checkpoint(tmp_path)
    (tmp_path / "MARK").write_text("")
    opened = open_checkpoint(tmp_path)
    assert opened.format == "marked" and opened.tokenizer == TokenizerFiles(None, True, False)
    assert type(load_checkpoint(tmp_path)) is AlbertPretrainer
    assert keras.ops.convert_to_numpy(opened.load().encoder.weights[0]).shape == (37, 8)


# ------------------------------------------------------------------ imports one way
def test_reading_the_parts_needs_no_keras_or_tensorflow():
    """Opening a checkpoint and reading its config, record and tokenizer imports neither
    Keras nor TensorFlow; only `.load()` (the models) and TF1 tensors do."""
    path = os.path.join(TASK_FIXTURES, "seq_single", "hf")
    code = ("import sys; from albert_tf.checkpoint import open_checkpoint\n"
            f"c = open_checkpoint({path!r}); c.config; c.task_record; c.tokenizer\n"
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'keras', 'tensorflow'}))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "[]"


def test_the_package_modules_never_import_the_package():
    """albert_tf/checkpoint/__init__.py imports its modules; none imports it back."""
    folder = os.path.join(REPO, "albert_tf", "checkpoint")
    for name in sorted(os.listdir(folder)):
        if not name.endswith(".py") or name == "__init__.py":
            continue
        with open(os.path.join(folder, name), encoding="utf-8") as f:
            tree = ast.parse(f.read())
        for node in ast.walk(tree):
            targets = ([node.module] if isinstance(node, ast.ImportFrom)
                       else [a.name for a in node.names] if isinstance(node, ast.Import)
                       else [])
            assert "albert_tf.checkpoint" not in targets, f"{name}:{node.lineno}"
            if isinstance(node, ast.ImportFrom) and node.module == "albert_tf":
                assert "checkpoint" not in {a.name for a in node.names}, f"{name}:{node.lineno}"
