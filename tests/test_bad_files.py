"""Foreign files are data, never code, and files that lie about their contents are named.

The bad-file matrix of `albert-tf convert` (the one door every command opens a
checkpoint by) and `predict`'s input, two classes:

  files that would run code or exhaust the machine: a SavedModel whose graph writes a
    file when called, a config that describes far more weights than its checkpoint
    holds (checked before any model is built), a file read whole that is /dev/zero,
    a FIFO or larger than textio's limit;
  files that lie: integer or non-finite weights, config fields of the wrong JSON
    type, a torch file that is no state dict, truncated TF2 variables, a
    saved_model.pb that is not one, a shard index without a weight_map or naming a
    file outside the checkpoint.

Each case checks the exit status, the one line naming what and where, that the
source is byte-for-byte unchanged and nothing was written; the "never built" cases
replace every task model class by one that fails the test if constructed, and the
SavedModel case arms a marker file its graph writes when run. Correct acceptances
(what must keep loading) are part of the matrix too.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import sys
import types

import h5py
import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

from albert_tf import errors
from albert_tf.checkpoint import open_checkpoint
from albert_tf.checkpoint.model_garden import read_object_graph
from albert_tf.infra import textio
from albert_tf.inputs import INPUT_NAMES
from tests.checkpoint.test_model_garden import assert_encoder_matches
from tests.helpers.foreign import write_armed_saved_model
from tests.helpers.paths import FIXTURES, TASK_FIXTURES
from tests.test_bad_inputs import assert_one_line_error, hidden_temporaries, run_cli, snapshot

HF = os.path.join(FIXTURES, "shared", "hf")  # V 41, E 6, H 16, 2 heads, I 24
TF1 = os.path.join(FIXTURES, "shared", "tf1")
KERAS_HUB = os.path.join(FIXTURES, "kerashub", "grouped", "preset")
KERAS_HUB_CLASSIFIER = os.path.join(FIXTURES, "kerashub", "classifier", "preset")
MODEL_GARDEN = os.path.join(FIXTURES, "model_garden", "encoder", "release")
HUB = os.path.join(FIXTURES, "tfhub", "albert_en_tiny")
SAVED_MODEL = os.path.join(HUB, "savedmodel")


def copy(source: str, tmp_path, name: str = "src"):
    return shutil.copytree(source, tmp_path / name)


def edit_json(path, change) -> None:
    with open(path, encoding="utf-8") as f:
        values = json.load(f)
    change(values)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(values, f)


def checksums(root) -> dict[str, str]:
    """`snapshot` of the regular files under `root`; a link to a device or a FIFO is
    recorded as such, not read (reading /dev/zero whole is what the tests refuse)."""
    special = {os.path.join(d, f) for d, _, files in os.walk(str(root)) for f in files
               if not stat.S_ISREG(os.stat(os.path.join(d, f)).st_mode)}
    regular = [os.path.join(d, f) for d, _, files in os.walk(str(root)) for f in files
               if os.path.join(d, f) not in special]
    large = {path for path in regular if os.path.getsize(path) > 1 << 24}  # the sparse one
    return {**{path: "special" for path in special},
            **{path: (os.stat(path).st_size, os.stat(path).st_mtime_ns) for path in large},
            **{k: v for path in regular if path not in large for k, v in snapshot(path).items()}}


def convert(capsys, tmp_path, src) -> tuple[int, str]:
    """`albert-tf convert SRC DST`; asserts SRC unchanged and nothing left behind on failure."""
    before = checksums(src)
    code, line = run_cli(capsys, "convert", src, tmp_path / "dst")
    assert checksums(src) == before
    if code != 0:
        assert not (tmp_path / "dst").exists() and not hidden_temporaries(tmp_path), line
    return code, line


@pytest.fixture
def never_built(monkeypatch):
    """Every task model class replaced by one that fails the test if constructed: the
    check must come before any weight is allocated."""
    from albert_tf import models

    def refuse(*args, **kwargs):
        raise AssertionError("a model was built before the config was compared with the "
                             "weights")

    for task in list(models.TASK_MODELS):
        monkeypatch.setitem(models.TASK_MODELS, task, refuse)


@pytest.fixture(scope="module")
def ours(tmp_path_factory):
    """The Hugging Face fixture in albert-tf's own format (V 41)."""
    from albert_tf.checkpoint import convert as convert_lib

    dst = tmp_path_factory.mktemp("ours") / "ours"
    convert_lib.convert(HF, str(dst))
    return str(dst)


# ==================================================================== class 2
# ------------------------------------------------- a SavedModel is data, never code
def test_a_saved_model_is_read_as_data_and_its_graph_never_runs(capsys, tmp_path):
    """A SavedModel with the fixture's encoder variables whose call copies /etc/hostname
    to a marker: calling it (as tf.saved_model.load did) writes the marker; albert-tf
    converts it from its structure and variables alone, and the marker never appears."""
    import tensorflow as tf

    source = read_object_graph(os.path.join(SAVED_MODEL, "variables", "variables"), "tfhub")
    weights = {n: source.read(n) for n in source.shapes if not n.startswith("cls/")}
    armed, marker = tmp_path / "armed", tmp_path / "marker"
    write_armed_saved_model(armed, weights, marker, hidden_size=10, depth=2)
    shutil.copytree(os.path.join(SAVED_MODEL, "assets"), armed / "assets", dirs_exist_ok=True)

    probe = {name: tf.ones([1, 4], tf.int32) for name in INPUT_NAMES}
    tf.saved_model.load(str(armed))(probe)  # the trap is armed: running the graph springs it
    assert marker.exists()
    marker.unlink()

    code, line = convert(capsys, tmp_path, armed)
    assert code == 0, line
    assert not marker.exists()  # no code of the file ran
    converted = open_checkpoint(tmp_path / "dst")
    assert converted.config.num_hidden_layers == 2  # the depth its signature declares
    with np.load(os.path.join(HUB, "reference.npz")) as ref:
        assert_encoder_matches(converted.load(), dict(ref))  # its weights, placed


def test_no_foreign_saved_model_is_loaded_or_called(capsys, tmp_path, monkeypatch):
    import tensorflow as tf

    def refuse(*args, **kwargs):
        raise AssertionError("tf.saved_model.load of a foreign file")

    monkeypatch.setattr(tf.saved_model, "load", refuse)
    code, line = convert(capsys, tmp_path, SAVED_MODEL)
    assert code == 0, line


# ---------------------------------- a config larger than its weights is never built
BUILT_NOT = ["weights but", "not building it"]


def _set_hf(field, value):
    return lambda values: values.update({field: value})


def _set_kerashub(field, value):
    return lambda values: values["config"].update({field: value})


# Within the size bounds (config.MAX_SIZES) but larger than the weights: the weights rule.
@pytest.mark.parametrize("source, config, change, names", [
    (HF, "config.json", _set_hf("vocab_size", 10**6), BUILT_NOT + ["vocab_size=1000000"]),
    (HF, "config.json", _set_hf("hidden_size", 3000), BUILT_NOT + ["hidden_size=3000"]),
    (TF1, "albert_config.json", _set_hf("vocab_size", 10**6),
     BUILT_NOT + ["vocab_size=1000000"]),
    # The preset ships its vocabulary, whose size is compared first (also before building).
    (KERAS_HUB, "config.json", _set_kerashub("vocabulary_size", 10**6),
     ["SentencePiece model", "vocab_size=1000000"]),
    (KERAS_HUB, "config.json", _set_kerashub("hidden_dim", 3000),
     BUILT_NOT + ["hidden_size=3000"]),
    (MODEL_GARDEN, "albert_config.json", _set_hf("intermediate_size", 60000),
     BUILT_NOT + ["intermediate_size=60000"]),
    ("ours", "albert_config.json", _set_hf("vocab_size", 10**6),
     BUILT_NOT + ["vocab_size=1000000"]),
    ("ours", "albert_config.json",
     lambda v: v.update(num_hidden_groups=200, num_hidden_layers=200),
     BUILT_NOT + ["num_hidden_groups=200", "more blocks than the checkpoint holds"]),
    # Past the size bounds: refused by the bound itself, before the weights are looked at.
    (HF, "config.json", _set_hf("vocab_size", 10**9),
     ["vocab_size=1,000,000,000 exceeds the largest allowed"]),
    (KERAS_HUB, "config.json", _set_kerashub("hidden_dim", 3 * 10**8),
     ["hidden_size=300,000,000 exceeds the largest allowed"]),
    ("ours", "albert_config.json", lambda v: v.update(num_hidden_layers=10**5),
     ["num_hidden_layers=100,000 exceeds the largest allowed"]),
], ids=["hf-vocab", "hf-hidden", "tf1-vocab", "kerashub-vocab", "kerashub-hidden",
        "model-garden-intermediate", "ours-vocab", "ours-groups", "hf-vocab-bound",
        "kerashub-hidden-bound", "ours-layers-bound"])
def test_a_config_larger_than_its_weights_is_refused_before_any_model_is_built(
        capsys, tmp_path, never_built, ours, source, config, change, names):
    src = copy(ours if source == "ours" else source, tmp_path)
    edit_json(src / config, change)
    code, line = convert(capsys, tmp_path, src)
    assert_one_line_error(code, line, src / config, *names)


def test_a_task_record_with_more_classes_than_its_head_is_refused_unbuilt(
        capsys, tmp_path, request):
    from albert_tf.checkpoint import convert as convert_lib

    src = tmp_path / "classifier"
    convert_lib.convert(os.path.join(TASK_FIXTURES, "seq_single", "hf"), str(src))
    request.getfixturevalue("never_built")
    edit_json(src / "albert_task.json", lambda v: v.update(num_classes=30000, label_names=None))
    code, line = convert(capsys, tmp_path, src)
    assert_one_line_error(code, line, "num_classes=30000", src / "albert_task.json",
                          "not building it")
    edit_json(src / "albert_task.json", lambda v: v.update(num_classes=10**8))  # past the bound
    code, line = convert(capsys, tmp_path, src)
    assert_one_line_error(code, line, "num_classes=100000000", src / "albert_task.json",
                          "from 1 to 32,768")


# --------------------------------------- a file read whole: regular, bounded in size
def _link_dev_zero(path) -> None:
    if os.path.lexists(path):
        os.remove(path)
    os.symlink("/dev/zero", path)


@pytest.mark.parametrize("source, name", [
    ("ours", "albert_config.json"), ("ours", "albert_task.json"), ("ours", "spiece.model"),
    (TF1, "albert_config.json"), (HF, "tokenizer_config.json"),
    (MODEL_GARDEN, "albert_config.json"), (KERAS_HUB_CLASSIFIER, "task.json")])
def test_a_file_read_whole_linked_to_dev_zero_is_refused_unread(capsys, tmp_path, ours,
                                                                source, name):
    src = copy(ours if source == "ours" else source, tmp_path)
    _link_dev_zero(src / name)
    code, line = convert(capsys, tmp_path, src)
    assert_one_line_error(code, line, src / name, "is a character device, not a regular file")


def test_a_fifo_is_refused_without_opening_it(capsys, tmp_path, ours):
    src = copy(ours, tmp_path)
    os.remove(src / "albert_config.json")
    os.mkfifo(src / "albert_config.json")  # opening it for reading would wait for a writer
    code, line = convert(capsys, tmp_path, src)
    assert_one_line_error(code, line, src / "albert_config.json", "is a FIFO")


def test_a_file_larger_than_the_limit_is_refused_unread(capsys, tmp_path, ours):
    src = copy(ours, tmp_path)
    os.truncate(src / "albert_task.json", textio.MAX_FILE_BYTES + 1)  # sparse: no disk used
    code, line = convert(capsys, tmp_path, src)
    assert_one_line_error(code, line, src / "albert_task.json", "1,073,741,825 bytes",
                          "more than the 1,073,741,824 a file read whole may hold")


def test_the_size_rule_reads_at_most_the_limit(tmp_path, monkeypatch):
    path = tmp_path / "config.json"
    path.write_text('{"a": 1}', encoding="utf-8")
    assert textio.read_json_object(path) == {"a": 1}
    monkeypatch.setattr(textio, "MAX_FILE_BYTES", 4)
    with pytest.raises(textio.FileSizeError, match=r"holds 8 bytes, more than the 4 a file"):
        textio.read_bytes(path)
    with pytest.raises(errors.UserError, match=r"config.json holds 8 bytes"):
        textio.read_json_object(path)


@pytest.mark.parametrize("kind", ["dev_zero", "fifo"])
def test_predict_input_goes_through_the_size_rule(capsys, tmp_path, kind):
    if kind == "dev_zero":
        source = "/dev/zero"
    else:
        source = tmp_path / "fifo"
        os.mkfifo(source)
    code, line = run_cli(capsys, "predict", "--input", source, "--output", tmp_path / "p.jsonl",
                         "--saved-model", SAVED_MODEL)  # refused before any model is loaded
    assert_one_line_error(code, line, source, "not a regular file")
    assert not (tmp_path / "p.jsonl").exists()


# ==================================================================== class 3
# ------------------------------------------------- weights that are not finite floats
def _hf_tensors(src) -> dict[str, np.ndarray]:
    return load_file(str(src / "model.safetensors"))


def test_an_integer_tensor_is_refused_not_cast_to_weights(capsys, tmp_path):
    src = copy(HF, tmp_path)
    tensors = _hf_tensors(src)
    name = "albert.embeddings.LayerNorm.weight"
    tensors[name] = np.full(tensors[name].shape, 10**9, np.int32)
    save_file(tensors, str(src / "model.safetensors"))
    code, line = convert(capsys, tmp_path, src)
    assert_one_line_error(code, line, src / "model.safetensors", "1 tensor(s) are not finite",
                          f"{name} (int32 values, not floating point)")


def test_nan_and_infinite_weights_are_named_with_their_counts(capsys, tmp_path):
    src = copy(HF, tmp_path)
    tensors = _hf_tensors(src)
    tensors["albert.pooler.bias"][:3] = np.nan
    tensors["albert.embeddings.LayerNorm.bias"][0] = np.inf
    save_file(tensors, str(src / "model.safetensors"))
    code, line = convert(capsys, tmp_path, src)
    assert_one_line_error(code, line, "2 tensor(s) are not finite floating-point weights",
                          "albert.pooler.bias (3 NaN of 16 values)",
                          "albert.embeddings.LayerNorm.bias (1 infinite of 6 values)")


def test_a_nan_in_a_kerashub_weight_is_named(capsys, tmp_path):
    src = copy(KERAS_HUB, tmp_path)
    with h5py.File(src / "model.weights.h5", "r+") as f:
        f["layers/dense_1/vars/1"][0] = np.nan  # the pooler's bias
    code, line = convert(capsys, tmp_path, src)
    assert_one_line_error(code, line, "backbone/layers/dense_1/vars/1 (1 NaN of 12 values)")


def test_our_format_refuses_integer_and_nan_weights(capsys, tmp_path, ours):
    src = copy(ours, tmp_path, "int")
    with h5py.File(src / "model.weights.h5", "r+") as f:
        name = "encoder/layers/dense_1/vars/1"
        del f[name]
        f[name] = np.arange(16, dtype=np.int32)
    code, line = convert(capsys, tmp_path, src)
    assert_one_line_error(code, line, f"{name} (int32 values, not floating point)")
    src = copy(ours, tmp_path, "nan")
    with h5py.File(src / "model.weights.h5", "r+") as f:
        f["encoder/embeddings/word_embeddings/vars/0"][2, :] = np.nan
    code, line = convert(capsys, tmp_path, src)
    assert_one_line_error(code, line, src / "model.weights.h5", "(6 NaN of 246 values)")


def test_float16_weights_and_an_int64_position_buffer_still_load(tmp_path):
    """Correct acceptances: half-precision safetensors, and the integer position_ids
    buffer older Hugging Face files store beside the weights (not a weight)."""
    src = copy(HF, tmp_path)
    tensors = {k: v.astype(np.float16) for k, v in _hf_tensors(src).items()}
    tensors["albert.embeddings.position_ids"] = np.arange(13, dtype=np.int64)[None]
    save_file(tensors, str(src / "model.safetensors"))
    model = open_checkpoint(src).load()
    word = model.encoder.embeddings.word_embeddings.embeddings.numpy()
    np.testing.assert_array_equal(word, tensors["albert.embeddings.word_embeddings.weight"]
                                  .astype(np.float32))


# ------------------------------------------------ config fields of the wrong JSON type
@pytest.mark.parametrize("source, name, change, names", [
    (HF, "config.json", _set_hf("layer_norm_eps", "1e-12"), ["layer_norm_eps='1e-12' must be "
                                                             "a number"]),
    (HF, "config.json", _set_hf("hidden_act", ["gelu"]), ["hidden_act=['gelu'] is not"]),
    (HF, "config.json", _set_hf("architectures", "AlbertModel"),
     ["architectures must be an array"]),
    (os.path.join(TASK_FIXTURES, "seq_single", "hf"), "config.json",
     _set_hf("id2label", ["a", "b", "c"]), ["id2label must be an object, got an array"]),
    (os.path.join(TASK_FIXTURES, "seq_single", "hf"), "config.json",
     lambda v: (v.pop("id2label"), v.pop("label2id", None), v.update(num_labels="3")),
     ["num_labels='3' must be a positive integer"]),
    (os.path.join(TASK_FIXTURES, "seq_single", "hf"), "config.json",
     _set_hf("id2label", {"0": "a", "1": ["b"], "2": "c"}),
     ["id2label['1'] must be a string"]),
    (TF1, "albert_config.json", _set_hf("sharing", ["all"]), ["sharing=['all'] is not one of"]),
    (KERAS_HUB_CLASSIFIER, "task.json", _set_hf("config", []),
     ["config must be an object, got an array"]),
    (KERAS_HUB_CLASSIFIER, "task.json", lambda v: v["config"].update(activation=["softmax"]),
     ["activation=['softmax']"]),
    (KERAS_HUB_CLASSIFIER, "preprocessor.json", _set_hf("config", "x"),
     ["config must be an object, got a string"]),
], ids=["eps-string", "act-list", "architectures-string", "id2label-list", "num_labels-string",
        "label-list", "sharing-list", "kerashub-task-list", "kerashub-activation-list",
        "kerashub-preprocessor-string"])
def test_a_field_of_the_wrong_json_type_is_one_line_naming_field_and_file(
        capsys, tmp_path, source, name, change, names):
    src = copy(source, tmp_path)
    edit_json(src / name, change)
    code, line = convert(capsys, tmp_path, src)
    assert_one_line_error(code, line, src / name, *names)


def test_tokenizer_options_must_be_booleans(capsys, tmp_path):
    src = copy(HF, tmp_path)
    (src / "tokenizer_config.json").write_text('{"do_lower_case": "false"}', encoding="utf-8")
    code, line = convert(capsys, tmp_path, src)  # "false" read as lower-casing, before
    assert_one_line_error(code, line, src / "tokenizer_config.json",
                          "do_lower_case must be true or false, got a string 'false'")


# ----------------------------------------------------------- files that are not theirs
class _FakeTensor:
    """What the stand-in torch's load returns for a tensor entry."""


@pytest.mark.parametrize("state, names", [
    ([1, 2, 3], ["holds a list, not a state dict"]),
    ({"albert.embeddings.word_embeddings.weight": _FakeTensor(), "note": "hello"},
     ["1 entries are not named tensors: note"]),
])
def test_a_torch_file_that_is_no_state_dict_is_named(capsys, tmp_path, monkeypatch, state,
                                                     names):
    """torch is not installed here: a stand-in module answers torch.load with what a
    crafted pytorch_model.bin holds (weights_only=True still yields lists and strings)."""
    fake = types.ModuleType("torch")
    fake.Tensor = _FakeTensor
    fake.load = lambda path, **kwargs: state
    monkeypatch.setitem(sys.modules, "torch", fake)
    src = tmp_path / "src"
    src.mkdir()
    shutil.copyfile(os.path.join(HF, "config.json"), src / "config.json")
    (src / "pytorch_model.bin").write_bytes(b"PK\x03\x04 a zip archive")
    code, line = convert(capsys, tmp_path, src)
    assert_one_line_error(code, line, src / "pytorch_model.bin", *names)


@pytest.mark.parametrize("source, data", [
    (MODEL_GARDEN, "bert_model.ckpt-1.data-00000-of-00001"),
    (SAVED_MODEL, "variables/variables.data-00000-of-00001"),
    (TF1, "model.ckpt-100.data-00000-of-00001"),
])
def test_a_truncated_variables_file_is_named(capsys, tmp_path, source, data):
    src = copy(source, tmp_path)
    path = src / data
    if not path.exists():
        path = next((src / os.path.dirname(data)).glob("*.data-*"))
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    code, line = convert(capsys, tmp_path, src)
    assert_one_line_error(code, line, str(path).split(".data-")[0])
    assert "not a readable TF2 checkpoint" in line or "its data files hold" in line, line


def test_a_garbage_saved_model_pb_is_named(capsys, tmp_path):
    src = copy(SAVED_MODEL, tmp_path)
    (src / "saved_model.pb").write_bytes(b"\xff\xfe not a protocol buffer \x00" * 20)
    code, line = convert(capsys, tmp_path, src)
    assert_one_line_error(code, line, src / "saved_model.pb", "not a SavedModel")


# --------------------------------------------------------------------- shard indexes
def _sharded(tmp_path, weight_map=None, index=None):
    """The HF fixture split into two shards beside model.safetensors.index.json."""
    src = copy(HF, tmp_path)
    tensors = _hf_tensors(src)
    os.remove(src / "model.safetensors")
    names = sorted(tensors)
    shards = {"model-00001-of-00002.safetensors": names[::2],
              "model-00002-of-00002.safetensors": names[1::2]}
    for file, keys in shards.items():
        save_file({k: tensors[k] for k in keys}, str(src / file))
    mapping = {k: file for file, keys in shards.items() for k in keys}
    values = index if index is not None else {
        "metadata": {}, "weight_map": weight_map(mapping) if weight_map else mapping}
    (src / "model.safetensors.index.json").write_text(json.dumps(values), encoding="utf-8")
    return src


def test_a_sharded_checkpoint_loads(tmp_path):
    src = _sharded(tmp_path)
    assert open_checkpoint(src).load().config.vocab_size == 41  # a correct acceptance


def _outside(mapping):
    return {**mapping, "albert.pooler.bias": "../outside.safetensors"}


@pytest.mark.parametrize("weight_map, index, names", [
    (None, {"metadata": {}}, ["weight_map must be an object", "got absent"]),
    (None, {"weight_map": ["model-00001-of-00002.safetensors"]},
     ["weight_map must be an object", "got an array"]),
    (_outside, None, ["weight_map['albert.pooler.bias'] = '../outside.safetensors' is not the "
                      "name of a file beside the index"]),
    (lambda m: {k: v for k, v in m.items() if k != "albert.pooler.bias"}, None,
     ["weight_map does not say where 1 tensor(s) are: albert.pooler.bias"]),
], ids=["no-weight-map", "list", "outside", "incomplete"])
def test_a_shard_index_must_map_every_tensor_to_a_file_beside_it(capsys, tmp_path, weight_map,
                                                                 index, names):
    src = _sharded(tmp_path, weight_map, index)
    outside = tmp_path / "outside.safetensors"
    save_file({"albert.pooler.bias": np.zeros(16, np.float32)}, str(outside))
    before = snapshot(outside)
    code, line = convert(capsys, tmp_path, src)
    assert_one_line_error(code, line, src / "model.safetensors.index.json", *names)
    assert snapshot(outside) == before
