"""Writes the Model Garden TF2 and TF-Hub fixtures that tests/checkpoint/test_model_garden.py
and tests/checkpoint/test_tfhub.py check.

Every checkpoint here is written by TF Model Garden (tf-models-official) itself, from tiny
ALBERT models whose every variable is drawn at random, and the numbers the tests compare
with are Model Garden's own outputs on them. Under tests/fixtures/:

  model_garden/<name>/release/    a directory as the released TF2 ALBERT tarballs are laid
                                  out: albert_config.json, 30k-clean.model,
                                  bert_model.ckpt-1.{index,data-00000-of-00001}, checkpoint
  model_garden/<name>/reference.npz
  tfhub/<name>/savedmodel/        a SavedModel as Model Garden's export_tfhub writes the
                                  albert_en_* family: saved_model.pb, variables/,
                                  assets/30k-clean.model, keras_metadata.pb (no config file)
  tfhub/<name>/reference.npz

| fixture | how it is written | E | H | heads | I | L | types | heads of the model |
|---|---|---|---|---|---|---|---|---|
| model_garden/encoder | the converter (tf2_albert_encoder_checkpoint_converter) from a random TF1 checkpoint; root encoder/ | 6 | 12 | 3 | 20 | 3 | 2 | - |
| model_garden/equal | the converter, E == H (no projection: every later layer_with_weights-N shifts down by one) | 8 | 8 | 2 | 14 | 2 | 3 | - |
| model_garden/pretrainer | BertPretrainerV2 (masked_lm), tf.train.Checkpoint(**checkpoint_items): roots encoder/ and masked_lm/, what export_tfhub restores | 4 | 10 | 2 | 16 | 2 | 2 | MLM |
| model_garden/legacy | BertPretrainer (masked_lm + a 2-class classification on the pooled output, the sentence-order head), tf.train.Checkpoint(model=...): root model/, as older releases | 6 | 8 | 4 | 12 | 4 | 2 | MLM, SOP |
| model_garden/next_sentence | BertPretrainerV2 with a `next_sentence` ClassificationHead (its own pooler), roots encoder/, masked_lm/, next_sentence.pooler_dense/ | 4 | 10 | 2 | 16 | 2 | 2 | (refused) |
| tfhub/albert_en_tiny | export_tfhub_lib.export_model(with_mlm=True, sp_model_file=30k-clean.model) from model_garden/pretrainer | 4 | 10 | 2 | 16 | 2 | 2 | MLM (the `mlm` subobject) |

Model Garden's AlbertEncoder shares one transformer block across all layers (no groups), so
every fixture is all-shared. V = 94: the SentencePiece model is
tests/fixtures/tasks/mlm/hf/spiece.model (trained on lower-cased text), copied as
30k-clean.model. Activation: "gelu" (Model Garden's tanh approximation); dropout 0.

reference.npz holds the texts (upper case and accents included), the ids of Model Garden's
own ALBERT preprocessing (export_tfhub_lib.create_preprocessing with the SentencePiece
model and do_lower_case=True, i.e. albert_en_preprocess: case folding, diacritics
stripped, [CLS] A [SEP] B [SEP], padded), `ids_a` / `ids_b` (each text's pieces, -1
padded), `masked_lm_positions`, and Model Garden's float32 outputs on those inputs after
restoring the written bytes into a new model: `sequence_output`, `pooled_output`,
`mlm_logits`, `sop_logits` (legacy's classification logits) where the model has them.
For tfhub/, the outputs are those of the SavedModel loaded back with
tf.saved_model.load (as hub.load does): its call and its `mlm` call.

How to run (needs tf-models-official and tensorflow-text of its TensorFlow; the tests need
neither):

    python3 -m venv /tmp/tf2peers
    /tmp/tf2peers/bin/pip install "tf-models-official==2.20.*" "tensorflow-text==2.20.*"
    /tmp/tf2peers/bin/python tools/make_tf2_fixtures.py          # -> tests/fixtures
    /tmp/tf2peers/bin/python tools/make_tf2_fixtures.py --out DIR

Fixed seeds; the same library versions give the same numbers.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import tensorflow as tf
import tf_keras
from official.legacy.albert import configs as albert_configs
from official.modeling import tf_utils
from official.nlp.configs import encoders
from official.nlp.modeling import layers, models, networks
from official.nlp.tools import export_tfhub_lib
from official.nlp.tools import tf2_albert_encoder_checkpoint_converter as converter

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SPM_MODEL = os.path.join(REPO, "tests", "fixtures", "tasks", "mlm", "hf", "spiece.model")
SPM_NAME = "30k-clean.model"  # the released directories' name for it
CHECKPOINT = "bert_model.ckpt"  # -> bert_model.ckpt-1.* (tf.train.Checkpoint.save numbers it)
SEED = 20251125
SEQ_LENGTH = 36

# albert_config.json of each Model Garden fixture (original names).
CONFIGS = {
    "encoder": dict(embedding_size=6, hidden_size=12, num_attention_heads=3,
                    intermediate_size=20, num_hidden_layers=3, type_vocab_size=2),
    "equal": dict(embedding_size=8, hidden_size=8, num_attention_heads=2, intermediate_size=14,
                  num_hidden_layers=2, type_vocab_size=3),
    "pretrainer": dict(embedding_size=4, hidden_size=10, num_attention_heads=2,
                       intermediate_size=16, num_hidden_layers=2, type_vocab_size=2),
    "legacy": dict(embedding_size=6, hidden_size=8, num_attention_heads=4, intermediate_size=12,
                   num_hidden_layers=4, type_vocab_size=2),
    "next_sentence": dict(embedding_size=4, hidden_size=10, num_attention_heads=2,
                          intermediate_size=16, num_hidden_layers=2, type_vocab_size=2),
}
COMMON = dict(vocab_size=94, num_hidden_groups=1, inner_group_num=1, hidden_act="gelu",
              hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
              max_position_embeddings=40, initializer_range=0.02)

# Two segments each, padded to SEQ_LENGTH; upper case and accents, which the ALBERT
# preprocessing folds and strips.
TEXTS_A = ["The cat sat on the mat.", "Paris is the capital of France.", "Rain fell."]
TEXTS_B = ["A dog ran in the park.", "the river flows.", "Birds sing in the CAFÉ."]
MASKED_LM_POSITIONS = [[1, 3, 5], [2, 4, 7], [1, 2, 6]]


# ---------------------------------------------------------------------------- helpers
def config_of(name: str) -> dict:
    return {**COMMON, **CONFIGS[name]}


def write_config(directory: str, name: str) -> str:
    path = os.path.join(directory, "albert_config.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(config_of(name), f, indent=2, sort_keys=True)
        f.write("\n")
    return path


def random_value(name: str, shape, rng: np.random.Generator) -> np.ndarray:
    """Gains around 1, biases and betas around 0, kernels and tables of scale 0.4."""
    if name.endswith("gamma"):
        value = 1.0 + 0.2 * rng.standard_normal(shape)
    elif name.endswith(("bias", "beta")):
        value = 0.2 * rng.standard_normal(shape)
    else:
        value = 0.4 * rng.standard_normal(shape)
    return value.astype(np.float32)


def randomize(model, rng) -> None:
    for variable in model.variables:
        variable.assign(random_value(variable.name.split(":")[0], variable.shape, rng))


def albert_encoder(cfg: dict, dict_outputs: bool):
    """Model Garden's AlbertEncoder, as its converter builds it from albert_config.json."""
    return networks.AlbertEncoder(
        vocab_size=cfg["vocab_size"], embedding_width=cfg["embedding_size"],
        hidden_size=cfg["hidden_size"], num_layers=cfg["num_hidden_layers"],
        num_attention_heads=cfg["num_attention_heads"],
        intermediate_size=cfg["intermediate_size"],
        activation=tf_utils.get_activation(cfg["hidden_act"]), dropout_rate=0.0,
        attention_dropout_rate=0.0, max_sequence_length=cfg["max_position_embeddings"],
        type_vocab_size=cfg["type_vocab_size"],
        initializer=tf_keras.initializers.TruncatedNormal(stddev=cfg["initializer_range"]),
        dict_outputs=dict_outputs)


def encoder_config(cfg: dict) -> encoders.EncoderConfig:
    return encoders.EncoderConfig(type="albert", albert=encoders.AlbertEncoderConfig(
        vocab_size=cfg["vocab_size"], embedding_width=cfg["embedding_size"],
        hidden_size=cfg["hidden_size"], num_layers=cfg["num_hidden_layers"],
        num_attention_heads=cfg["num_attention_heads"],
        intermediate_size=cfg["intermediate_size"], hidden_activation=cfg["hidden_act"],
        dropout_rate=0.0, attention_dropout_rate=0.0,
        max_position_embeddings=cfg["max_position_embeddings"],
        type_vocab_size=cfg["type_vocab_size"], initializer_range=cfg["initializer_range"]))


def release_directory(root: str, name: str) -> str:
    directory = os.path.join(root, "model_garden", name, "release")
    shutil.rmtree(os.path.dirname(directory), ignore_errors=True)
    os.makedirs(directory)
    write_config(directory, name)
    shutil.copyfile(SPM_MODEL, os.path.join(directory, SPM_NAME))
    return directory


# ------------------------------------------------------------------------ inputs
def preprocessing():
    """Model Garden's ALBERT preprocessing (what albert_en_preprocess is exported from)."""
    return export_tfhub_lib.create_preprocessing(
        sp_model_file=SPM_MODEL, do_lower_case=True, tokenize_with_offsets=False,
        default_seq_length=SEQ_LENGTH)


def inputs_and_ids() -> dict[str, np.ndarray]:
    pre = preprocessing()
    out = {"texts_a": np.array(TEXTS_A), "texts_b": np.array(TEXTS_B)}
    for key, texts in (("ids_a", TEXTS_A), ("ids_b", TEXTS_B)):
        pieces = pre.tokenize(tf.constant(texts))  # [B, (pieces)]
        rows = [list(map(int, row)) for row in pieces.to_list()]
        ids = np.full((len(rows), max(map(len, rows))), -1, np.int32)
        for r, row in enumerate(rows):
            ids[r, :len(row)] = row
        out[key] = ids
    # The wrapper's call is a tf.function attribute (callable once saved and loaded).
    packed = pre.bert_pack_inputs.__call__([pre.tokenize(tf.constant(TEXTS_A)),
                                            pre.tokenize(tf.constant(TEXTS_B))],
                                           seq_length=SEQ_LENGTH)
    for key in ("input_word_ids", "input_mask", "input_type_ids"):
        out[key] = packed[key].numpy().astype(np.int32)
    lengths = [(a >= 0).sum() + (b >= 0).sum() + 3 for a, b in zip(out["ids_a"], out["ids_b"])]
    assert list(out["input_mask"].sum(-1)) == lengths, "truncated: lengthen SEQ_LENGTH"
    assert min(lengths) < SEQ_LENGTH, "no padded row"
    out["masked_lm_positions"] = np.array(MASKED_LM_POSITIONS, np.int32)
    assert (out["masked_lm_positions"] < np.array(lengths)[:, None]).all()
    return out


def model_inputs(data) -> dict[str, tf.Tensor]:
    return {k: tf.constant(data[k]) for k in ("input_word_ids", "input_mask", "input_type_ids")}


def save_reference(path: str, data: dict, outputs: dict) -> None:
    np.savez(path, **data, **{k: np.asarray(v, np.float32) for k, v in outputs.items()})


# ---------------------------------------------------------------- TF1 -> converter
def tf1_random_checkpoint(cfg: dict, prefix: str, rng) -> None:
    """An original (TF1) ALBERT encoder checkpoint with random values, under the
    google-research names: what the Model Garden converter reads."""
    e, h, i = cfg["embedding_size"], cfg["hidden_size"], cfg["intermediate_size"]
    block = "bert/encoder/transformer/group_0/inner_group_0/"
    shapes = {
        "bert/embeddings/word_embeddings": (cfg["vocab_size"], e),
        "bert/embeddings/position_embeddings": (cfg["max_position_embeddings"], e),
        "bert/embeddings/token_type_embeddings": (cfg["type_vocab_size"], e),
        "bert/embeddings/LayerNorm/gamma": (e,), "bert/embeddings/LayerNorm/beta": (e,),
        "bert/pooler/dense/kernel": (h, h), "bert/pooler/dense/bias": (h,),
    }
    if e != h:
        shapes.update({"bert/encoder/embedding_hidden_mapping_in/kernel": (e, h),
                       "bert/encoder/embedding_hidden_mapping_in/bias": (h,)})
    for part in ("query", "key", "value"):
        shapes[f"{block}attention_1/self/{part}/kernel"] = (h, h)
        shapes[f"{block}attention_1/self/{part}/bias"] = (h,)
    shapes.update({
        f"{block}attention_1/output/dense/kernel": (h, h),
        f"{block}attention_1/output/dense/bias": (h,),
        f"{block}LayerNorm/gamma": (h,), f"{block}LayerNorm/beta": (h,),
        f"{block}ffn_1/intermediate/dense/kernel": (h, i),
        f"{block}ffn_1/intermediate/dense/bias": (i,),
        f"{block}ffn_1/intermediate/output/dense/kernel": (i, h),
        f"{block}ffn_1/intermediate/output/dense/bias": (h,),
        f"{block}LayerNorm_1/gamma": (h,), f"{block}LayerNorm_1/beta": (h,),
        "global_step": (),
    })
    names = sorted(shapes)
    values = [tf.constant(np.int64(0)) if n == "global_step"
              else tf.constant(random_value(n, shapes[n], rng)) for n in names]
    tf.raw_ops.SaveV2(prefix=prefix, tensor_names=names, shape_and_slices=[""] * len(names),
                      tensors=values)


def make_converted(root: str, name: str, rng) -> str:
    """A release directory written by Model Garden's converter (encoder, root encoder/)."""
    directory = release_directory(root, name)
    cfg = config_of(name)
    with tempfile.TemporaryDirectory() as tmp:
        tf1 = os.path.join(tmp, "model.ckpt-100")
        tf1_random_checkpoint(cfg, tf1, rng)
        converter.convert_checkpoint(
            albert_configs.AlbertConfig.from_json_file(
                os.path.join(directory, "albert_config.json")),
            os.path.join(directory, CHECKPOINT), tf1, "encoder", converted_model="encoder")
    return directory


def encoder_reference(root: str, name: str, directory: str, data) -> None:
    """Model Garden's AlbertEncoder restored from the written bytes, on the inputs."""
    encoder = albert_encoder(config_of(name), dict_outputs=True)
    prefix = tf.train.latest_checkpoint(directory)
    tf.train.Checkpoint(encoder=encoder).restore(prefix).assert_existing_objects_matched()
    out = encoder(model_inputs(data))
    save_reference(os.path.join(root, "model_garden", name, "reference.npz"), data,
                   {"sequence_output": out["sequence_output"],
                    "pooled_output": out["pooled_output"]})


# ------------------------------------------------------------------------ pretrainers
def pretrainer_v2(cfg: dict, heads=None):
    encoder = albert_encoder(cfg, dict_outputs=True)
    model = models.BertPretrainerV2(encoder_network=encoder,
                                    mlm_activation=tf_utils.get_activation(cfg["hidden_act"]),
                                    classification_heads=heads)
    model(model.inputs)  # builds the masked_lm (and heads') variables
    return model


def next_sentence_head(cfg: dict):
    return [layers.ClassificationHead(inner_dim=cfg["hidden_size"], num_classes=2,
                                      name="next_sentence")]


def make_pretrainer(root: str, name: str, data, rng) -> None:
    """BertPretrainerV2 as Model Garden pretraining checkpoints it for export_tfhub:
    tf.train.Checkpoint(**pretrainer.checkpoint_items)."""
    directory = release_directory(root, name)
    cfg = config_of(name)
    heads = next_sentence_head(cfg) if name == "next_sentence" else None
    model = pretrainer_v2(cfg, heads)
    randomize(model, rng)
    tf.train.Checkpoint(**model.checkpoint_items).save(os.path.join(directory, CHECKPOINT))
    if name == "next_sentence":
        return  # refused by albert-tf: no outputs to compare
    fresh = pretrainer_v2(cfg)
    tf.train.Checkpoint(**fresh.checkpoint_items).restore(
        tf.train.latest_checkpoint(directory)).assert_existing_objects_matched()
    out = fresh(dict(model_inputs(data), masked_lm_positions=tf.constant(
        data["masked_lm_positions"])))
    save_reference(os.path.join(root, "model_garden", name, "reference.npz"), data,
                   {"sequence_output": out["sequence_output"],
                    "pooled_output": out["pooled_output"], "mlm_logits": out["mlm_logits"]})


def legacy_pretrainer(cfg: dict):
    encoder = albert_encoder(cfg, dict_outputs=False)
    return models.BertPretrainer(
        network=encoder, num_classes=2, num_token_predictions=len(MASKED_LM_POSITIONS[0]),
        activation=tf_utils.get_activation(cfg["hidden_act"]),
        initializer=tf_keras.initializers.TruncatedNormal(stddev=cfg["initializer_range"]),
        output="logits")


def make_legacy(root: str, name: str, data, rng) -> None:
    """The older layout: tf.train.Checkpoint(model=BertPretrainer) (root model/)."""
    directory = release_directory(root, name)
    cfg = config_of(name)
    model = legacy_pretrainer(cfg)
    randomize(model, rng)
    tf.train.Checkpoint(model=model).save(os.path.join(directory, CHECKPOINT))
    fresh = legacy_pretrainer(cfg)
    tf.train.Checkpoint(model=fresh).restore(
        tf.train.latest_checkpoint(directory)).assert_existing_objects_matched()
    inputs = model_inputs(data)
    out = fresh([inputs["input_word_ids"], inputs["input_mask"], inputs["input_type_ids"],
                 tf.constant(data["masked_lm_positions"])])
    sequence, pooled = fresh.encoder([inputs["input_word_ids"], inputs["input_mask"],
                                      inputs["input_type_ids"]])
    save_reference(os.path.join(root, "model_garden", name, "reference.npz"), data,
                   {"sequence_output": sequence, "pooled_output": pooled,
                    "mlm_logits": out["masked_lm"], "sop_logits": out["classification"]})


# ------------------------------------------------------------------------ TF-Hub
def make_tfhub(root: str, name: str, source: str, data) -> None:
    """A SavedModel as export_tfhub writes the albert_en_* family, from the `source`
    pretrainer checkpoint, with its mlm subobject; outputs of the SavedModel itself."""
    folder = os.path.join(root, "tfhub", name)
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder)
    directory = os.path.join(folder, "savedmodel")
    release = os.path.join(root, "model_garden", source, "release")
    with tempfile.TemporaryDirectory() as tmp:
        spm = os.path.join(tmp, SPM_NAME)  # the asset keeps its file name
        shutil.copyfile(SPM_MODEL, spm)
        export_tfhub_lib.export_model(
            directory, encoder_config=encoder_config(config_of(source)),
            model_checkpoint_path=tf.train.latest_checkpoint(release), with_mlm=True,
            sp_model_file=spm)
    hub = tf.saved_model.load(directory)
    inputs = model_inputs(data)
    out = hub(inputs)
    mlm = hub.mlm(dict(inputs, masked_lm_positions=tf.constant(data["masked_lm_positions"])))
    save_reference(os.path.join(folder, "reference.npz"), data,
                   {"sequence_output": out["sequence_output"],
                    "pooled_output": out["pooled_output"], "mlm_logits": mlm["mlm_logits"],
                    "num_layers": np.float32(len(out["encoder_outputs"]))})


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.path.join(REPO, "tests", "fixtures"))
    args = parser.parse_args(argv)
    tf_keras.utils.set_random_seed(SEED)
    rng = np.random.default_rng(SEED)
    data = inputs_and_ids()
    for name in ("encoder", "equal"):
        directory = make_converted(args.out, name, rng)
        encoder_reference(args.out, name, directory, data)
    for name in ("pretrainer", "next_sentence"):
        make_pretrainer(args.out, name, data, rng)
    make_legacy(args.out, "legacy", data, rng)
    make_tfhub(args.out, "albert_en_tiny", "pretrainer", data)
    print(f"wrote {args.out}/model_garden and {args.out}/tfhub")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
