"""Model Garden TF2 checkpoints through the one door: tests/fixtures/model_garden/ (written by
tf-models-official itself, tools/make_tf2_fixtures.py) against its recorded outputs.

No tf-models-official here: the checkpoints are read from their bytes (with TensorFlow,
as any TF checkpoint) and compared with the npz.
"""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.core.protobuf import trackable_object_graph_pb2

from albert_tf.checkpoint import (
    FORMATS,
    CheckpointError,
    convert,
    detect_format,
    load_checkpoint,
    open_checkpoint,
)
from albert_tf.checkpoint.model_garden import OBJECT_GRAPH
from albert_tf.config import AlbertConfig
from albert_tf.infra import cli
from albert_tf.tokenizer.spm import AlbertTokenizer
from tests.helpers.foreign import assert_lists_problems, assert_tokenizer_matches
from tests.helpers.fresh_process import call_signatures
from tests.helpers.paths import FIXTURES
from tests.test_bad_inputs import (
    assert_one_line_error,
    hidden_temporaries,
    run_cli,
    snapshot,
)

MODEL_GARDEN = os.path.join(FIXTURES, "model_garden")
CHECKPOINTS = ("encoder", "equal", "pretrainer", "legacy")
ATOL = 1e-4  # float32 against Model Garden's float32
INPUTS = ("input_word_ids", "input_mask", "input_type_ids")


def release(name: str) -> str:
    return os.path.join(MODEL_GARDEN, name, "release")


def reference(name: str) -> dict[str, np.ndarray]:
    with np.load(os.path.join(MODEL_GARDEN, name, "reference.npz")) as data:
        return dict(data)


def on_real_tokens(x, mask):
    return np.asarray(x) * (np.asarray(mask)[..., None] > 0)


def assert_encoder_matches(model, ref, atol=ATOL):
    """sequence_output on real tokens and pooled_output equal the reference's."""
    out = model.encoder({k: ref[k] for k in INPUTS})
    mask = ref["input_mask"]
    assert mask.min() == 0 and ref["input_type_ids"].max() == 1  # padded, two segments
    np.testing.assert_allclose(on_real_tokens(out["sequence_output"], mask),
                               on_real_tokens(ref["sequence_output"], mask), atol=atol, rtol=0)
    np.testing.assert_allclose(out["pooled_output"], ref["pooled_output"], atol=atol, rtol=0)


def strings(values):
    return np.array([str(v).encode() for v in values], dtype=object)


@pytest.fixture(scope="module")
def loaded():
    return {name: open_checkpoint(release(name)).load() for name in CHECKPOINTS}


# ------------------------------------------------------------------ detection
@pytest.mark.parametrize("name", CHECKPOINTS)
def test_a_tf2_checkpoint_is_model_garden_not_tf1(name):
    assert detect_format(release(name)) == "model_garden"
    order = list(FORMATS)
    assert order.index("model_garden") < order.index("tf1")


def test_tf1_checkpoints_stay_tf1_and_the_rule_reads_the_index(tmp_path):
    for tf1 in (os.path.join(FIXTURES, "grouped", "tf1"), os.path.join(FIXTURES, "shared", "tf1")):
        assert detect_format(tf1) == "tf1"
    # The file names are TF1's: only the index's object graph tells them apart.
    copy = tmp_path / "renamed"
    copy.mkdir()
    for suffix in (".index", ".data-00000-of-00001"):
        shutil.copyfile(os.path.join(release("encoder"), "bert_model.ckpt-1" + suffix),
                        copy / ("model.ckpt-7" + suffix))
    assert OBJECT_GRAPH in dict(tf.train.list_variables(str(copy / "model.ckpt-7")))
    assert detect_format(copy) == "model_garden"
    assert detect_format(copy / "model.ckpt-7.index") == "model_garden"


def test_the_keys_number_layers_but_the_names_do_not():
    """When E == H there is no projection, and every later layer_with_weights-N moves:
    the keys differ, the object graph's variable names (what the reader uses) do not."""
    keys = {name: [k for k, _ in tf.train.list_variables(
        os.path.join(release(name), "bert_model.ckpt-1")) if "_query_dense/kernel" in k]
        for name in ("encoder", "equal")}
    assert keys["encoder"][0].startswith("encoder/layer_with_weights-5/")
    assert keys["equal"][0].startswith("encoder/layer_with_weights-4/")
    for name in ("encoder", "equal"):
        assert keys[name] and open_checkpoint(release(name)).load() is not None


# ------------------------------------------------------------------ config, task, tokenizer
def test_config_task_and_tokenizer():
    opened = open_checkpoint(release("encoder"))
    assert opened.format == "model_garden"
    assert opened.config == AlbertConfig(
        vocab_size=94, embedding_size=6, hidden_size=12, num_hidden_layers=3,
        num_attention_heads=3, intermediate_size=20, max_position_embeddings=40,
        type_vocab_size=2, hidden_act="gelu")
    assert opened.tokenizer.spm_model.endswith("30k-clean.model")
    assert (opened.tokenizer.do_lower_case, opened.tokenizer.keep_accents) == (True, False)
    tasks = {name: open_checkpoint(release(name)).task_record.task for name in CHECKPOINTS}
    assert tasks == {"encoder": "pretraining", "equal": "pretraining",
                     "pretrainer": "masked_lm", "legacy": "pretraining"}


def test_equal_sizes_have_no_projection(loaded):
    assert loaded["equal"].encoder.embedding_projection is None
    assert loaded["encoder"].encoder.embedding_projection is not None


def test_tokenizer_ids_equal_model_garden_preprocessing():
    files = open_checkpoint(release("encoder")).tokenizer
    tokenizer = AlbertTokenizer(files.spm_model, files.do_lower_case,
                                keep_accents=files.keep_accents)
    ref = reference("encoder")
    assert_tokenizer_matches(tokenizer, ref)
    assert tokenizer.encode("CAFÉ") == tokenizer.encode("cafe")  # folded and stripped


# ------------------------------------------------------------------ parity
@pytest.mark.parametrize("name", CHECKPOINTS)
def test_encoder_matches_model_garden(loaded, name):
    assert_encoder_matches(loaded[name], reference(name))


def test_load_checkpoint_is_the_same_door():
    assert_encoder_matches(load_checkpoint(release("equal")), reference("equal"))


@pytest.mark.parametrize("name", ["pretrainer", "legacy"])
def test_pretrainer_heads_match_model_garden(loaded, name):
    ref = reference(name)
    out = loaded[name]({**{k: ref[k] for k in INPUTS},
                        "masked_lm_positions": ref["masked_lm_positions"]})
    np.testing.assert_allclose(out["mlm_logits"], ref["mlm_logits"], atol=ATOL, rtol=0)
    if name == "legacy":  # BertPretrainer's classification on the pooled output = SOP
        np.testing.assert_allclose(out["sop_logits"], ref["sop_logits"], atol=ATOL, rtol=0)
    else:
        assert "sop_logits" not in out  # a masked_lm model: no sentence-order head to invent


def test_converted_to_ours_loads_to_equal_outputs(tmp_path):
    dst = tmp_path / "ours"
    assert convert.main([release("legacy"), str(dst)]) == 0
    with open(dst / "albert_task.json", encoding="utf-8") as f:
        record = json.load(f)
    assert (record["task"], record["do_lower_case"], record["keep_accents"]) == \
        ("pretraining", True, False)
    assert os.path.isfile(dst / "spiece.model")
    model = open_checkpoint(dst).load()
    ref = reference("legacy")
    assert_encoder_matches(model, ref)
    out = model({**{k: ref[k] for k in INPUTS}, "masked_lm_positions": ref["masked_lm_positions"]})
    np.testing.assert_allclose(out["sop_logits"], ref["sop_logits"], atol=ATOL, rtol=0)


# ------------------------------------------------------------------ what does not fit
def rewrite_checkpoint(src_prefix: str, dst_prefix: str, change) -> None:
    """Writes a copy of an object-based checkpoint after `change(tensors, graph)`:
    tensors {key: array}, graph the TrackableObjectGraph (edited in place)."""
    reader = tf.train.load_checkpoint(src_prefix)
    graph = trackable_object_graph_pb2.TrackableObjectGraph()
    graph.ParseFromString(reader.get_tensor(OBJECT_GRAPH))
    tensors = {k: reader.get_tensor(k) for k in reader.get_variable_to_shape_map()
               if k != OBJECT_GRAPH}
    change(tensors, graph)
    tensors[OBJECT_GRAPH] = np.array(graph.SerializeToString(), dtype=object)
    names = sorted(tensors)
    tf.raw_ops.SaveV2(prefix=dst_prefix, tensor_names=names, shape_and_slices=[""] * len(names),
                      tensors=[tf.constant(tensors[n]) for n in names])


def copy_release(tmp_path, name="encoder"):
    directory = tmp_path / name
    directory.mkdir()
    for file in ("albert_config.json", "30k-clean.model"):
        shutil.copyfile(os.path.join(release(name), file), directory / file)
    return directory


def key_of(graph, full_name):
    return next(a.checkpoint_key for n in graph.nodes for a in n.attributes
                if a.full_name == full_name)


def test_wrong_tensors_are_one_error_listing_them_all(tmp_path):
    def damage(tensors, graph):
        del tensors[key_of(graph, "pooler_transform/bias")]
        key = key_of(graph, "embedding_projection/kernel")
        tensors[key] = np.zeros((6, 11), np.float32)
        stray = graph.nodes.add()  # a variable Model Garden's encoder does not have
        stray.attributes.add(name="VARIABLE_VALUE", full_name="transformer/stray/kernel",
                             checkpoint_key="encoder/stray/.ATTRIBUTES/VARIABLE_VALUE")
        graph.nodes[0].children.add(node_id=len(graph.nodes) - 1, local_name="stray")
        tensors["encoder/stray/.ATTRIBUTES/VARIABLE_VALUE"] = np.zeros(3, np.float32)

    directory = copy_release(tmp_path)
    rewrite_checkpoint(os.path.join(release("encoder"), "bert_model.ckpt-1"),
                       str(directory / "bert_model.ckpt-1"), damage)
    with pytest.raises(CheckpointError) as error:
        open_checkpoint(directory).load()
    assert_lists_problems(str(error.value), 3, ("missing: pooler_transform/bias",
                 "mis-shaped: embedding_projection/kernel: (6, 11) in the checkpoint, (6, 12)",
                 "unexpected: transformer/stray/kernel"),
                          "save_counter")


def convert_errors(capsys, src, dst) -> tuple[int, str]:
    """(exit status, all of stderr) of `albert-tf convert SRC DST`: a tensor error lists
    every tensor, one per line, after its first line."""
    code = cli.main(["convert", str(src), str(dst)])
    return code, capsys.readouterr().err.strip()


def test_a_head_with_its_own_pooler_is_refused_naming_it(capsys, tmp_path):
    path = release("next_sentence")
    before = snapshot(path)
    out = tmp_path / "out"
    code, message = convert_errors(capsys, path, out)
    assert_one_line_error(code, message, "unexpected: bert/next_sentence/pooler_dense/kernel",
                          "unexpected: bert/next_sentence/pooler_dense/bias",
                          "bert/next_sentence: a classification head with a pooler of its own")
    assert not out.exists() and snapshot(path) == before


@pytest.mark.parametrize("change, names", [
    (lambda c: c.update(num_hidden_groups=2),
     ["albert_config.json", "num_hidden_groups=2", "one transformer block"]),
    (lambda c: c.update(hidden_size=14, num_attention_heads=2),
     ["bert_model.ckpt-1", "tensor(s) do not fit", "mis-shaped"]),
])
def test_what_albert_tf_cannot_hold_is_refused_in_one_line(capsys, tmp_path, change, names):
    directory = shutil.copytree(release("encoder"), tmp_path / "encoder")
    path = os.path.join(directory, "albert_config.json")
    with open(path, encoding="utf-8") as f:
        config = json.load(f)
    change(config)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(config, f)
    before = snapshot(directory)
    out = tmp_path / "out"
    code, message = convert_errors(capsys, directory, out)
    assert_one_line_error(code, message, *names)
    assert snapshot(directory) == before and not out.exists()
    assert not hidden_temporaries(tmp_path)


def test_a_missing_config_is_named(capsys, tmp_path):
    directory = shutil.copytree(release("encoder"), tmp_path / "encoder")
    os.remove(os.path.join(directory, "albert_config.json"))
    code, line = run_cli(capsys, "convert", directory, tmp_path / "out")
    assert_one_line_error(code, line, os.path.join(directory, "albert_config.json"),
                          "does not record its depth")


# ------------------------------------------------------------------ serving raw text
@pytest.mark.slow
def test_exported_checkpoint_serves_model_garden_features(tmp_path):
    from albert_tf.serving import export

    ref = reference("encoder")
    length = ref["input_word_ids"].shape[1]
    assert export.main(["--checkpoint", release("encoder"), "--output", str(tmp_path / "mg"),
                        "--seq-length", str(length)]) == 0
    calls = {"encoder": (str(tmp_path / "mg" / "1"), "text_pair",
                         {"text_a": strings(ref["texts_a"]), "text_b": strings(ref["texts_b"])})}
    got = call_signatures(calls, tmp_path)["encoder"]
    assert_served_features(got, ref)


def assert_served_features(got, ref):
    """The served features of the reference's texts (padded to the server's own length)
    equal the reference's on every real token."""
    lengths = ref["input_mask"].sum(-1)
    np.testing.assert_array_equal(got["input_mask"].sum(-1), lengths)
    for row, length in enumerate(lengths):
        np.testing.assert_allclose(got["sequence_output"][row, :length],
                                   ref["sequence_output"][row, :length], atol=ATOL, rtol=0)
    np.testing.assert_allclose(got["pooled_output"], ref["pooled_output"], atol=ATOL, rtol=0)
