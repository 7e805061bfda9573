"""Sizes a file or a flag sets are bounded before anything is allocated or looped over.

One rule (`AlbertConfig.validate`, `config.check_sequence_length`, `check_num_classes`;
the bounds `config.MAX_SIZES`, `MAX_DEPTH`, `MAX_PARAMETERS`, `MAX_SEQ_LENGTH`,
`MAX_CLASSES`), reached from every door: a checkpoint's config (`convert`, `export`),
`from_preset`, a stranger's `.keras` file, a task record, the preprocessor and
create-data's `--max-seq-length`. Each case checks the exit status (or the error), the
one line naming the field, value and file, that the input files are unchanged, and that
the refusal costs little time and memory. A text is cut to what its window can use
before it is tokenized, so a long text costs what a window costs.
"""

from __future__ import annotations

import ast
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import textwrap
import zipfile

import pytest

from albert_tf.config import (
    MAX_CLASSES,
    MAX_DEPTH,
    MAX_PARAMETERS,
    MAX_SEQ_LENGTH,
    MAX_SIZES,
    AlbertConfig,
    ConfigError,
)
from tests.helpers.fresh_process import SAFETY_NET_S
from tests.helpers.paths import FIXTURES
from tests.test_bad_inputs import assert_one_line_error, run_cli, snapshot

HF = os.path.join(FIXTURES, "shared", "hf")


def _hf_with(tmp_path, **changes):
    """A copy of the tiny Hugging Face fixture whose config.json says `changes`."""
    copy = shutil.copytree(HF, tmp_path / "hf")
    config = json.loads((copy / "config.json").read_text())
    config.update(changes)
    (copy / "config.json").write_text(json.dumps(config))
    return copy


@pytest.mark.parametrize("changes, field", [
    ({"num_hidden_layers": 1_000_000}, "num_hidden_layers=1,000,000 exceeds the largest allowed"),
    ({"num_hidden_layers": 200, "inner_group_num": 4}, "= 800 blocks exceeds"),
    ({"vocab_size": 10**9}, "vocab_size=1,000,000,000 exceeds"),
    ({"hidden_size": 300_000, "num_attention_heads": 1}, "hidden_size=300,000 exceeds"),
    ({"intermediate_size": 10**8}, "intermediate_size=100,000,000 exceeds"),
    ({"max_position_embeddings": 10**7}, "max_position_embeddings=10,000,000 exceeds"),
    ({"vocab_size": 1 << 20, "embedding_size": 4096}, "weights"),
])
def test_a_checkpoint_asking_for_too_much_is_refused_at_once(capsys, tmp_path, changes, field,
                                                             spm_41_path):
    source = _hf_with(tmp_path, **changes)
    before = snapshot(source)
    code, line = run_cli(capsys, "convert", source, tmp_path / "out", "--spm-model", spm_41_path)
    # The bound's own message: refused by the rule, before any weight is read or built.
    assert_one_line_error(code, line, field, str(source))
    assert snapshot(source) == before
    assert not (tmp_path / "out").exists()


def test_the_bounds_admit_every_released_size():
    for name in ("albert-base", "albert-large", "albert-xlarge", "albert-xxlarge", "bert-large"):
        config = AlbertConfig.from_size(name)
        assert config.encoder_parameters() < MAX_PARAMETERS
    AlbertConfig(vocab_size=250_002, embedding_size=128, hidden_size=4096,
                 intermediate_size=16384, num_attention_heads=64, num_hidden_layers=48,
                 max_position_embeddings=4096)
    AlbertConfig(num_hidden_layers=MAX_DEPTH, hidden_size=64, num_attention_heads=1,
                 intermediate_size=64, embedding_size=16, vocab_size=MAX_SIZES["vocab_size"])


def test_a_maximal_legal_depth_builds_and_runs():
    """The deepest legal encoder (shared weights) is built and called, holding one block's
    weights whatever its depth; the subprocess timeout is only a safety net for a hang."""
    script = textwrap.dedent(f"""
        import numpy as np
        from albert_tf import AlbertConfig, AlbertEncoder
        counts = []
        for depth in (1, {MAX_DEPTH}):
            config = AlbertConfig(vocab_size=50, embedding_size=8, hidden_size=8,
                                  num_attention_heads=1, intermediate_size=8,
                                  num_hidden_layers=depth, max_position_embeddings=16)
            ids = np.ones([1, 4], np.int32)
            encoder = AlbertEncoder(config)
            out = encoder({{"input_word_ids": ids, "input_mask": ids, "input_type_ids": 0 * ids}})
            counts.append((encoder.count_params(), list(out["sequence_output"].shape)))
        print(counts)
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=SAFETY_NET_S, env={**os.environ, "CUDA_VISIBLE_DEVICES": ""})
    assert out.returncode == 0, out.stderr[-2000:]
    shallow, deepest = ast.literal_eval(out.stdout.strip().splitlines()[-1])
    assert shallow == deepest and deepest[1] == [1, 4, 8], (shallow, deepest)


@pytest.fixture(scope="module")
def saved_classifier(tmp_path_factory, spm_model_path):
    from albert_tf import AlbertConfig, AlbertSequenceClassifier
    from albert_tf.tokenizer.preprocessor import AlbertPreprocessor
    from albert_tf.tokenizer.spm import AlbertTokenizer

    config = AlbertConfig(vocab_size=AlbertTokenizer(spm_model_path).vocab_size,
                          embedding_size=8, hidden_size=12, num_hidden_layers=1,
                          num_attention_heads=3, intermediate_size=20,
                          max_position_embeddings=64)
    model = AlbertSequenceClassifier(config, num_classes=2,
                                     preprocessor=AlbertPreprocessor(spm_model_path, 16))
    path = tmp_path_factory.mktemp("keras") / "m.keras"
    model.save(path)
    return path


def _edited_keras(source, target, edit):
    with zipfile.ZipFile(source) as archive:
        entries = {name: archive.read(name) for name in archive.namelist()}
    config = json.loads(entries["config.json"])
    edit(config["config"])
    entries["config.json"] = json.dumps(config).encode()
    with zipfile.ZipFile(target, "w") as archive:
        for name, data in entries.items():
            archive.writestr(name, data)
    return target


@pytest.mark.parametrize("edit, message", [
    (lambda c: c["config"].update(vocab_size=10**9), "vocab_size=1,000,000,000 exceeds"),
    (lambda c: c.update(num_classes=10**9),
     f"num_classes=1000000000 must be an integer in [1, {MAX_CLASSES}]"),
    (lambda c: c["config"].update(hidden_size=300_000), "hidden_size=300,000 exceeds"),
    (lambda c: c["preprocessor"]["config"].update(seq_length=10**7), "seq_length=10000000"),
])
def test_a_strangers_keras_file_asking_for_too_much_is_refused_on_load(tmp_path, saved_classifier,
                                                                       edit, message):
    import keras

    path = _edited_keras(saved_classifier, tmp_path / "stranger.keras", edit)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises((ConfigError, ValueError, TypeError), match=re.escape(message)):
        keras.saving.load_model(path)
    assert (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak) / 1024 < 500  # MB


def test_create_data_refuses_a_sequence_longer_than_any_model(capsys, tmp_path, corpus_file,
                                                              spm_model_path):
    code, line = run_cli(capsys, "create-data", "--input", corpus_file, "--output-dir",
                         tmp_path / "d", "--spm-model", spm_model_path, "--max-seq-length",
                         "100000000")
    assert_one_line_error(code, line, "seq_length=100000000 exceeds the longest any model may "
                          f"have, {MAX_SEQ_LENGTH}")
    assert not (tmp_path / "d").exists()


def test_a_long_text_is_cut_to_what_the_window_uses_and_gives_the_same_ids(spm_model_path):
    """Texts far past the cap give the ids of the Python tokenizer (which cuts alike) and
    of the uncut text; the cut costs what a window costs."""
    from albert_tf.tokenizer.preprocessor import AlbertPreprocessor
    from albert_tf.tokenizer.spm import text_byte_cap

    pre = AlbertPreprocessor(spm_model_path, 16)
    tok = pre.tokenizer
    texts = ["the cat sat on a mat " * 50_000, "short text", "é" * 600 + " done"]
    assert len(texts[0].encode()) > 100 * text_byte_cap(16)
    graph = pre(texts)["input_word_ids"].numpy().tolist()
    for text, ids in zip(texts, graph):
        assert ids == tok.encode_pair(text, seq_length=16)["input_word_ids"]
        whole = tok.pack(tok.encode(text), seq_length=16)["input_word_ids"]  # uncut
        assert ids == whole


@pytest.mark.parametrize("content, message", [
    ('{"resolved": {"precis', "invalid JSON"),
    ("", "invalid JSON"),
    ("[1, 2]", "expected a JSON object, not an array"),
    ("/dev/zero", "not a regular file"),
    ("directory", "not a regular file"),
])
def test_a_run_record_is_read_through_the_size_rule_naming_the_file(tmp_path, content, message):
    from albert_tf.errors import UserError
    from albert_tf.training.pretrain.progress import RUN_CONFIG_FILE, read_run_config

    path = tmp_path / RUN_CONFIG_FILE
    if content == "/dev/zero":
        os.symlink("/dev/zero", path)
    elif content == "directory":
        path.mkdir()
    else:
        path.write_text(content)
    with pytest.raises(UserError) as caught:
        read_run_config(str(tmp_path))
    line = str(caught.value)
    assert str(path) in line and "\n" not in line and "use a new output_dir" in line, line
    assert message in line or "character device" in line or "directory" in line, line
