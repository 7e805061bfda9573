import json

import pytest

from albert_tf import AlbertConfig, ConfigError
from albert_tf.config import SIZES

# albert_config.json as released with ALBERT v2 base (keys and values).
ORIGINAL_BASE_V2 = {
    "attention_probs_dropout_prob": 0, "hidden_act": "gelu", "hidden_dropout_prob": 0,
    "embedding_size": 128, "hidden_size": 768, "initializer_range": 0.02,
    "intermediate_size": 3072, "max_position_embeddings": 512, "num_attention_heads": 12,
    "num_hidden_layers": 12, "num_hidden_groups": 1, "net_structure_type": 0, "gap_size": 0,
    "num_memory_blocks": 0, "inner_group_num": 1, "down_scale_factor": 1,
    "type_vocab_size": 2, "vocab_size": 30000,
}

# A Hugging Face ALBERT config.json (albert-base-v2 style).
HF_BASE_V2 = {
    "architectures": ["AlbertForMaskedLM"], "attention_probs_dropout_prob": 0,
    "bos_token_id": 2, "classifier_dropout_prob": 0.1, "down_scale_factor": 1,
    "embedding_size": 128, "eos_token_id": 3, "gap_size": 0, "hidden_act": "gelu_new",
    "hidden_dropout_prob": 0, "hidden_size": 768, "initializer_range": 0.02,
    "inner_group_num": 1, "intermediate_size": 3072, "layer_norm_eps": 1e-12,
    "max_position_embeddings": 512, "model_type": "albert", "net_structure_type": 0,
    "num_attention_heads": 12, "num_hidden_groups": 1, "num_hidden_layers": 12,
    "num_memory_blocks": 0, "pad_token_id": 0, "type_vocab_size": 2, "vocab_size": 30000,
}


def write(tmp_path, name, values):
    path = tmp_path / name
    path.write_text(json.dumps(values, indent=2))
    return path


def test_reads_original_albert_config_json(tmp_path):
    config = AlbertConfig.from_json_file(write(tmp_path, "albert_config.json", ORIGINAL_BASE_V2))
    assert config == AlbertConfig.from_size("albert-base")


def test_reads_hugging_face_config_and_translates_activation(tmp_path):
    config = AlbertConfig.from_json_file(write(tmp_path, "config.json", HF_BASE_V2))
    assert config.hidden_act == "gelu"  # HF gelu_new = the original's tanh GELU
    assert config == AlbertConfig.from_size("albert-base")
    exact = AlbertConfig.from_json_file(write(tmp_path, "c2.json", {**HF_BASE_V2, "hidden_act": "gelu"}))
    assert exact.hidden_act == "gelu_exact"


def test_json_round_trip(tmp_path):
    config = AlbertConfig.from_size("albert-xlarge", num_hidden_groups=3, sharing="ffn")
    path = tmp_path / "albert_config.json"
    config.to_json_file(path)
    assert AlbertConfig.from_json_file(path) == config
    assert not list(tmp_path.glob("*.tmp-*"))


def test_validation_names_field_value_and_file(tmp_path):
    path = write(tmp_path, "albert_config.json", {**ORIGINAL_BASE_V2, "hidden_size": 770})
    with pytest.raises(ConfigError, match=r"hidden_size=770 is not divisible by "
                                          r"num_attention_heads=12 \(in .*albert_config.json\)"):
        AlbertConfig.from_json_file(path)


def test_unknown_keys_are_an_error(tmp_path):
    path = write(tmp_path, "albert_config.json", {**ORIGINAL_BASE_V2, "hiden_size": 5})
    with pytest.raises(ConfigError, match="unknown config keys in .*: hiden_size"):
        AlbertConfig.from_json_file(path)


def test_invalid_json_names_the_line(tmp_path):
    path = tmp_path / "albert_config.json"
    path.write_text('{\n  "hidden_size": 768,\n  oops\n}')
    with pytest.raises(ConfigError, match=r"albert_config.json:3: invalid JSON"):
        AlbertConfig.from_json_file(path)


@pytest.mark.parametrize("field, value, message", [
    ("sharing", "some", "sharing='some' is not one of"),
    ("hidden_act", "gelu2", "hidden_act='gelu2' is not one of"),
    ("num_hidden_groups", 13, "num_hidden_groups=13 exceeds num_hidden_layers=12"),
    ("hidden_dropout_prob", 1.5, r"hidden_dropout_prob=1.5 must be in \[0, 1\)"),
    ("vocab_size", 0, "vocab_size=0 must be a positive integer"),
])
def test_field_validation(field, value, message):
    with pytest.raises(ConfigError, match=message):
        AlbertConfig(**{field: value})


def test_presets_follow_the_paper():
    for name in ("albert-base", "albert-large", "albert-xlarge", "albert-xxlarge"):
        config = AlbertConfig.from_size(name)
        assert config.embedding_size == 128 and config.sharing == "all"
        assert config.num_attention_heads == config.hidden_size // 64
        assert config.intermediate_size == 4 * config.hidden_size
    for name in ("bert-base", "bert-large"):
        config = AlbertConfig.from_size(name)
        assert config.embedding_size == config.hidden_size and config.sharing == "none"
    with pytest.raises(ConfigError, match="unknown size 'albert-huge'"):
        AlbertConfig.from_size("albert-huge")
    assert set(SIZES) == set(AlbertConfig.size_names())
    # the old name: the same config, and a FutureWarning naming the new one
    with pytest.warns(FutureWarning, match="AlbertConfig.from_preset is now AlbertConfig.from_size"):
        assert AlbertConfig.from_preset("albert-base") == AlbertConfig.from_size("albert-base")


def test_group_of_layer_matches_the_original_formula():
    # The original: group_idx = int(layer_idx / num_hidden_layers * num_hidden_groups).
    for layers, groups in [(12, 1), (12, 5), (24, 7), (5, 2), (3, 3)]:
        config = AlbertConfig(num_hidden_layers=layers, num_hidden_groups=groups)
        assert [config.group_of_layer(i) for i in range(layers)] == \
            [int(i / layers * groups) for i in range(layers)]
