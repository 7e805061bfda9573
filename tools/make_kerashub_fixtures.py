"""Writes the KerasHub fixtures that tests/checkpoint/test_kerashub.py and test_writers.py check.

The presets are written by keras-hub itself (`save_to_preset`) from tiny, randomly
initialised ALBERT models, and the numbers the tests compare with are keras-hub's own
outputs on them. For each preset, under tests/fixtures/kerashub/<name>/:

  preset/          the directory `save_to_preset` wrote (config.json, model.weights.h5,
                   metadata.json, tokenizer.json, assets/tokenizer/vocabulary.spm; task
                   presets add task.json, task.weights.h5, preprocessor.json)
  reference.npz    the texts, keras-hub's token ids and packed inputs (two segments,
                   padded), and keras-hub's outputs on them (float32)

| name       | kind                          | V  | E | H  | heads | I  | L | groups x inner | dtype    |
|------------|-------------------------------|----|---|----|-------|----|---|----------------|----------|
| grouped    | AlbertBackbone                | 94 | 6 | 12 | 3     | 20 | 4 | 2 x 2          | float32  |
| shared     | AlbertBackbone                | 94 | 8 | 10 | 2     | 14 | 3 | 1 x 1          | bfloat16 |
| classifier | AlbertTextClassifier, 3 classes, softmax | 94 | 6 | 8 | 2 | 10 | 2 | 1 x 1 | float32 |
| masked_lm  | AlbertMaskedLM                | 94 | 4 | 6  | 3     | 10 | 2 | 2 x 1          | float32  |

Every variable (LayerNorm gains and biases included) is drawn at random, so that a
mis-placed tensor moves the outputs. `shared` declares a bfloat16 dtype policy: its
weights are stored as bfloat16, and its reference is what keras-hub's `from_preset`
gives (it loads a float preset in the current float32 policy). The SentencePiece model
is tests/fixtures/tasks/mlm/hf/spiece.model (94 pieces, trained on lower-cased text):
keras-hub feeds text to it unchanged, so upper-case letters fall to <unk>, and the texts
below include some.

It also writes tests/fixtures/kerashub/peer_layouts.json: what the peers themselves write
for the `grouped` sizes, for the writers' tests (`albert-tf convert --to hf|kerashub`):
for each transformers class, the files, tensor names and shapes of `save_pretrained`
and its config.json (less transformers_version); for keras-hub, the datasets of
model.weights.h5 / task.weights.h5 (optimizer/ left out) and the JSON files of a backbone,
a classifier and a masked-LM preset.

How to run (needs keras-hub, tensorflow, tensorflow-text, torch and transformers; the
tests need none of keras-hub, torch or transformers):

    python3 -m venv /tmp/peers
    /tmp/peers/bin/pip install torch==2.13.0
    /tmp/peers/bin/pip install "tensorflow==2.21.*" "tensorflow-text==2.21.*" keras-hub \\
        transformers safetensors sentencepiece h5py
    /tmp/peers/bin/python tools/make_kerashub_fixtures.py          # -> tests/fixtures/kerashub
    /tmp/peers/bin/python tools/make_kerashub_fixtures.py --out DIR

Fixed seeds; the same library versions give the same numbers (metadata.json records the
save date, and HDF5 files their write times).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile

os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import h5py  # noqa: E402
import keras  # noqa: E402
import keras_hub  # noqa: E402
import numpy as np  # noqa: E402
import safetensors.numpy  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SPM_MODEL = os.path.join(REPO, "tests", "fixtures", "tasks", "mlm", "hf", "spiece.model")
SEED = 20251123

BACKBONES = {
    "grouped": dict(num_layers=4, num_heads=3, embedding_dim=6, hidden_dim=12,
                    intermediate_dim=20, num_groups=2, num_inner_repetitions=2,
                    max_sequence_length=40, num_segments=3),
    "shared": dict(num_layers=3, num_heads=2, embedding_dim=8, hidden_dim=10,
                   intermediate_dim=14, num_groups=1, num_inner_repetitions=1,
                   max_sequence_length=36, num_segments=2, dtype="bfloat16"),
    "classifier": dict(num_layers=2, num_heads=2, embedding_dim=6, hidden_dim=8,
                       intermediate_dim=10, num_groups=1, num_inner_repetitions=1,
                       max_sequence_length=40, num_segments=2),
    "masked_lm": dict(num_layers=2, num_heads=3, embedding_dim=4, hidden_dim=6,
                      intermediate_dim=10, num_groups=2, num_inner_repetitions=1,
                      max_sequence_length=20, num_segments=2),
}
NUM_CLASSES = 3
SEQUENCE_LENGTH = {"grouped": 32, "shared": 32, "classifier": 32, "masked_lm": 16}

# Two segments each; short enough that nothing is truncated. Upper case and an accent
# reach SentencePiece unchanged in keras-hub (no lower-casing), single spaces only.
TEXTS_A = ["the cat sat on the mat.", "Paris is the capital of france.", "rain fell."]
TEXTS_B = ["a dog ran in the park.", "the river flows.", "birds sing in the café."]
# Masked-LM inputs: the text around "[MASK]" is tokenized piece by piece and the mask id
# put in its place (keras-hub's tokenizer does not know the literal "[MASK]").
MASK_TEXTS = ["the cat sat on the [MASK].", "paris is the [MASK] of france."]

# The sizes of `grouped`, as Hugging Face configs, for the writers' record.
HF_CONFIG = dict(vocab_size=94, embedding_size=6, hidden_size=12, num_hidden_layers=4,
                 num_hidden_groups=2, inner_group_num=2, num_attention_heads=3,
                 intermediate_size=20, max_position_embeddings=40, type_vocab_size=3,
                 hidden_act="gelu_new", hidden_dropout_prob=0.0,
                 attention_probs_dropout_prob=0.0)
HF_LABELS = {0: "negative", 1: "neutral", 2: "positive"}
HF_TOKEN_LABELS = {0: "O", 1: "B-PER", 2: "I-PER", 3: "B-LOC"}
# record name -> (HF class, extra config)
HF_CLASSES = {
    "AlbertModel": ("AlbertModel", {}),
    "AlbertForPreTraining": ("AlbertForPreTraining", {}),
    "AlbertForMaskedLM": ("AlbertForMaskedLM", {}),
    "AlbertForSequenceClassification": ("AlbertForSequenceClassification",
                                        {"id2label": HF_LABELS}),
    "AlbertForSequenceClassification/multi_label": (
        "AlbertForSequenceClassification",
        {"id2label": HF_LABELS, "problem_type": "multi_label_classification"}),
    "AlbertForSequenceClassification/regression": (
        "AlbertForSequenceClassification", {"num_labels": 1, "problem_type": "regression"}),
    "AlbertForTokenClassification": ("AlbertForTokenClassification",
                                     {"id2label": HF_TOKEN_LABELS}),
    "AlbertForQuestionAnswering": ("AlbertForQuestionAnswering", {}),
    "AlbertForMultipleChoice": ("AlbertForMultipleChoice", {}),
}


def randomize(model, rng: np.random.Generator) -> None:
    """Draws every variable at random (gains around 1), so that each one matters."""
    for variable in model.weights:
        shape = tuple(variable.shape)
        name = variable.path
        if "layer_norm" in name and name.endswith("gamma"):
            value = 1.0 + 0.2 * rng.standard_normal(shape)
        elif name.endswith(("bias", "beta")):
            value = 0.2 * rng.standard_normal(shape)
        else:
            value = 0.4 * rng.standard_normal(shape)
        variable.assign(value.astype(keras.backend.standardize_dtype(variable.dtype)
                                     if variable.dtype != "bfloat16" else np.float32))


def tokenizer() -> keras_hub.models.AlbertTokenizer:
    return keras_hub.models.AlbertTokenizer(proto=SPM_MODEL)


def token_ids(tok, texts) -> np.ndarray:
    """keras-hub's ids of each text, padded with -1."""
    rows = [ids_of(tok, text) for text in texts]
    out = np.full((len(rows), max(map(len, rows))), -1, np.int32)
    for r, ids in enumerate(rows):
        out[r, :len(ids)] = ids
    return out


def ids_of(tok, text: str) -> list[int]:
    """keras-hub's ids of one text (the eager call gives a list or a tensor)."""
    return [int(i) for i in np.asarray(tok(text)).ravel()]


def packed(tok, name) -> dict[str, np.ndarray]:
    """[CLS] A [SEP] B [SEP] as keras-hub's classifier preprocessor packs it, padded."""
    pre = keras_hub.models.AlbertTextClassifierPreprocessor(
        tok, sequence_length=SEQUENCE_LENGTH[name])
    # By keyword: a positional tuple would be taken for (x, y).
    x = pre(x=(keras.ops.convert_to_tensor(TEXTS_A), keras.ops.convert_to_tensor(TEXTS_B)))
    x = x[0] if isinstance(x, tuple) else x  # (x,) when there are no labels
    lengths = [len(ids_of(tok, a)) + len(ids_of(tok, b)) + 3 for a, b in zip(TEXTS_A, TEXTS_B)]
    assert list(np.asarray(x["padding_mask"]).sum(-1)) == lengths, "truncated: lengthen"
    assert min(lengths) < SEQUENCE_LENGTH[name], "no padded row"
    return {"input_word_ids": np.asarray(x["token_ids"], np.int32),
            "input_type_ids": np.asarray(x["segment_ids"], np.int32),
            "input_mask": np.asarray(x["padding_mask"], np.int32)}


def masked(tok, seq_length) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """MASK_TEXTS packed as one segment, the mask id spliced in; and the mask positions."""
    mask_id = tok.token_to_id("[MASK]")
    rows, positions = [], []
    for text in MASK_TEXTS:
        before, after = text.split("[MASK]")
        ids = [tok.token_to_id("[CLS]")]
        ids += ids_of(tok, before.strip()) if before.strip() else []
        positions.append(len(ids))
        ids.append(mask_id)
        ids += ids_of(tok, after.strip()) if after.strip() else []
        ids.append(tok.token_to_id("[SEP]"))
        rows.append(ids)
    words = np.zeros((len(rows), seq_length), np.int32)
    mask = np.zeros_like(words)
    for r, ids in enumerate(rows):
        words[r, :len(ids)], mask[r, :len(ids)] = ids, 1
    inputs = {"input_word_ids": words, "input_type_ids": np.zeros_like(words),
              "input_mask": mask}
    return inputs, np.array(positions, np.int32)[:, None]


def keras_hub_inputs(inputs):
    return {"token_ids": inputs["input_word_ids"], "segment_ids": inputs["input_type_ids"],
            "padding_mask": inputs["input_mask"]}


def make_backbone(name: str, root: str, rng) -> None:
    tok = tokenizer()
    backbone = keras_hub.models.AlbertBackbone(vocabulary_size=tok.vocabulary_size(),
                                               **BACKBONES[name])
    randomize(backbone, rng)
    directory = os.path.join(root, name)
    shutil.rmtree(directory, ignore_errors=True)
    preset = os.path.join(directory, "preset")
    backbone.save_to_preset(preset)
    tok.save_to_preset(preset)
    # The reference is what a keras-hub user gets from the preset (bfloat16 loads as float32).
    loaded = keras_hub.models.AlbertBackbone.from_preset(preset)
    inputs = packed(tok, name)
    out = loaded(keras_hub_inputs(inputs))
    np.savez(os.path.join(directory, "reference.npz"), **inputs,
             texts_a=np.array(TEXTS_A), texts_b=np.array(TEXTS_B),
             ids_a=token_ids(tok, TEXTS_A), ids_b=token_ids(tok, TEXTS_B),
             sequence_output=np.asarray(out["sequence_output"], np.float32),
             pooled_output=np.asarray(out["pooled_output"], np.float32))


def make_classifier(root: str, rng) -> None:
    tok = tokenizer()
    backbone = keras_hub.models.AlbertBackbone(vocabulary_size=tok.vocabulary_size(),
                                               **BACKBONES["classifier"])
    pre = keras_hub.models.AlbertTextClassifierPreprocessor(
        tok, sequence_length=SEQUENCE_LENGTH["classifier"])
    task = keras_hub.models.AlbertTextClassifier(backbone, num_classes=NUM_CLASSES,
                                                 preprocessor=pre, activation="softmax")
    randomize(task, rng)
    directory = os.path.join(root, "classifier")
    shutil.rmtree(directory, ignore_errors=True)
    preset = os.path.join(directory, "preset")
    task.save_to_preset(preset)
    loaded = keras_hub.models.AlbertTextClassifier.from_preset(preset)
    inputs = packed(tok, "classifier")
    probabilities = loaded(keras_hub_inputs(inputs))
    np.savez(os.path.join(directory, "reference.npz"), **inputs,
             texts_a=np.array(TEXTS_A), texts_b=np.array(TEXTS_B),
             ids_a=token_ids(tok, TEXTS_A), ids_b=token_ids(tok, TEXTS_B),
             probabilities=np.asarray(probabilities, np.float32))


def make_masked_lm(root: str, rng) -> None:
    tok = tokenizer()
    backbone = keras_hub.models.AlbertBackbone(vocabulary_size=tok.vocabulary_size(),
                                               **BACKBONES["masked_lm"])
    pre = keras_hub.models.AlbertMaskedLMPreprocessor(
        tok, sequence_length=SEQUENCE_LENGTH["masked_lm"])
    task = keras_hub.models.AlbertMaskedLM(backbone, preprocessor=pre)
    randomize(task, rng)
    directory = os.path.join(root, "masked_lm")
    shutil.rmtree(directory, ignore_errors=True)
    preset = os.path.join(directory, "preset")
    task.save_to_preset(preset)
    loaded = keras_hub.models.AlbertMaskedLM.from_preset(preset)
    inputs, positions = masked(tok, SEQUENCE_LENGTH["masked_lm"])
    logits = loaded({**keras_hub_inputs(inputs), "mask_positions": positions})
    np.savez(os.path.join(directory, "reference.npz"), **inputs, masked_lm_positions=positions,
             texts=np.array(MASK_TEXTS), mlm_logits=np.asarray(logits, np.float32))


# ------------------------------------------------------------------ the writers' record
def h5_datasets(path: str) -> dict[str, list]:
    """Every dataset of a Keras .weights.h5 but optimizer/: [shape, dtype, vars name]."""
    found = {}

    def visit(name, obj):
        if isinstance(obj, h5py.Dataset) and not name.startswith("optimizer/"):
            found[name] = [list(obj.shape), str(obj.dtype), obj.parent.attrs.get("name")]

    with h5py.File(path, "r") as f:
        f.visititems(visit)
    return found


def json_file(path: str):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def keras_hub_layout(preset: str) -> dict:
    files = sorted(os.path.relpath(os.path.join(r, f), preset)
                   for r, _, fs in os.walk(preset) for f in fs)
    layout = {"files": files}
    for name in files:
        path = os.path.join(preset, name)
        if name.endswith(".weights.h5"):
            layout[name] = h5_datasets(path)
        elif name == "metadata.json":
            layout[name] = sorted(json_file(path))  # keys only: versions and a date
        elif name.endswith(".json"):
            layout[name] = json_file(path)
    return layout


def keras_hub_record() -> dict:
    tok = tokenizer()
    sizes = dict(BACKBONES["grouped"])
    record = {}
    with tempfile.TemporaryDirectory() as tmp:
        backbone = keras_hub.models.AlbertBackbone(vocabulary_size=tok.vocabulary_size(),
                                                   **sizes)
        backbone.save_to_preset(os.path.join(tmp, "backbone"))
        tok.save_to_preset(os.path.join(tmp, "backbone"))
        record["backbone"] = keras_hub_layout(os.path.join(tmp, "backbone"))
        pre = keras_hub.models.AlbertTextClassifierPreprocessor(tok, sequence_length=16)
        task = keras_hub.models.AlbertTextClassifier(backbone, num_classes=NUM_CLASSES,
                                                     preprocessor=pre)
        task.save_to_preset(os.path.join(tmp, "classifier"))
        record["classifier"] = keras_hub_layout(os.path.join(tmp, "classifier"))
        pre = keras_hub.models.AlbertMaskedLMPreprocessor(tok, sequence_length=16)
        task = keras_hub.models.AlbertMaskedLM(backbone, preprocessor=pre)
        task.save_to_preset(os.path.join(tmp, "masked_lm"))
        record["masked_lm"] = keras_hub_layout(os.path.join(tmp, "masked_lm"))
    return record


def hf_record() -> dict:
    record = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, (cls, extra) in HF_CLASSES.items():
            torch.manual_seed(SEED)
            config = transformers.AlbertConfig(**HF_CONFIG, **extra)
            model = getattr(transformers, cls)(config)
            directory = os.path.join(tmp, name.replace("/", "_"))
            model.save_pretrained(directory, safe_serialization=True)
            tensors = safetensors.numpy.load_file(os.path.join(directory, "model.safetensors"))
            hf_config = json_file(os.path.join(directory, "config.json"))
            hf_config.pop("transformers_version")
            record[name] = {"files": sorted(os.listdir(directory)),
                            "tensors": {k: list(v.shape) for k, v in sorted(tensors.items())},
                            "config": hf_config}
        tok = transformers.AlbertTokenizer(vocab_file=SPM_MODEL, do_lower_case=True)
        tok.save_pretrained(os.path.join(tmp, "tokenizer"))
        record["tokenizer"] = {
            "files": sorted(os.listdir(os.path.join(tmp, "tokenizer"))),
            "tokenizer_config.json": json_file(os.path.join(tmp, "tokenizer",
                                                            "tokenizer_config.json"))}
    return record


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default = os.path.join(REPO, "tests", "fixtures", "kerashub")
    parser.add_argument("--out", default=default, help="fixture root (default: %(default)s)")
    args = parser.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    keras.utils.set_random_seed(SEED)
    rng = np.random.default_rng(SEED)
    for name in ("grouped", "shared"):
        make_backbone(name, args.out, rng)
    make_classifier(args.out, rng)
    make_masked_lm(args.out, rng)
    layouts = {"versions": {"keras_hub": keras_hub.__version__, "keras": keras.__version__,
                            "transformers": transformers.__version__},
               "keras_hub": keras_hub_record(), "hf": hf_record()}
    with open(os.path.join(args.out, "peer_layouts.json"), "w", encoding="utf-8") as f:
        json.dump(layouts, f, indent=1, sort_keys=True)
        f.write("\n")
    print(f"wrote {args.out} (keras-hub {keras_hub.__version__}, keras {keras.__version__}, "
          f"transformers {transformers.__version__})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
