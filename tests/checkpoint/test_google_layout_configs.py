"""brightmart/albert_zh's `*_google` releases are in google-research's TF1 layout but name
their config as brightmart does (albert_config_tiny_google.json, ...): the TF1 reader finds
it by that name. The configs are the real ones (tests/data/real/brightmart_albert_zh); the
checkpoint is the grouped fixture's google-research TF1 copy."""

from __future__ import annotations

import os
import shutil

import numpy as np
import pytest

from albert_tf import AlbertConfig, ConfigError
from albert_tf.checkpoint import CheckpointError, open_checkpoint
from tests.helpers.paths import FIXTURES, REAL

BRIGHTMART = os.path.join(REAL, "brightmart_albert_zh")
GOOGLE_TF1 = os.path.join(FIXTURES, "grouped", "tf1")
GOOGLE_NAMES = ("albert_config_tiny_google.json", "albert_config_small_google.json",
                "albert_config_base_google_fast.json")


def _release(tmp_path, config_name: str, config_source: str):
    """The TF1 fixture's checkpoint with `config_source` beside it as `config_name` only."""
    directory = tmp_path / "albert_zh_google"
    shutil.copytree(GOOGLE_TF1, directory)
    os.remove(directory / "albert_config.json")
    shutil.copyfile(config_source, directory / config_name)
    return directory


@pytest.mark.parametrize("name", GOOGLE_NAMES)
def test_the_tf1_reader_finds_a_google_release_config_by_its_name(tmp_path, name):
    real = os.path.join(BRIGHTMART, name)
    opened = open_checkpoint(str(_release(tmp_path, name, real)))
    assert opened.format == "tf1"
    assert os.path.basename(opened.config_path) == name
    assert opened.config == AlbertConfig.from_json_file(real)
    assert opened.config.vocab_size == 21128 and opened.config.embedding_size == 128


def test_a_google_release_named_config_loads_the_weights(tmp_path):
    renamed = _release(tmp_path, "albert_config_tiny_google.json",
                       os.path.join(GOOGLE_TF1, "albert_config.json"))
    got = open_checkpoint(str(renamed)).load()
    want = open_checkpoint(GOOGLE_TF1).load()
    assert len(got.weights) == len(want.weights)
    for a, b in zip(got.weights, want.weights):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_the_fast_tiny_config_is_refused_naming_its_file(tmp_path):
    """albert_config_tiny_google_fast.json declares 12 groups for 4 layers."""
    name = "albert_config_tiny_google_fast.json"
    opened = open_checkpoint(str(_release(tmp_path, name, os.path.join(BRIGHTMART, name))))
    with pytest.raises(ConfigError, match="num_hidden_groups=12 exceeds num_hidden_layers=4"
                       ) as caught:
        _ = opened.config
    assert name in str(caught.value) and "\n" not in str(caught.value)


def test_several_configs_beside_a_tf1_checkpoint_are_refused_naming_them(tmp_path):
    directory = _release(tmp_path, GOOGLE_NAMES[0], os.path.join(BRIGHTMART, GOOGLE_NAMES[0]))
    shutil.copyfile(os.path.join(BRIGHTMART, GOOGLE_NAMES[1]), directory / GOOGLE_NAMES[1])
    with pytest.raises(CheckpointError, match="several model configs"):
        _ = open_checkpoint(str(directory)).config


def test_a_tf1_checkpoint_without_any_config_names_both_names(tmp_path):
    directory = _release(tmp_path, "notes.json", os.path.join(GOOGLE_TF1, "albert_config.json"))
    with pytest.raises(CheckpointError, match="albert_config.json: not found, nor any "
                       "albert_config_"):
        _ = open_checkpoint(str(directory)).config
