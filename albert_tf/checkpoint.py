"""Checkpoints: the weights people already have, and albert-tf's own format.

`load_checkpoint(path)` recognises three formats:

* the original google-research ALBERT TF1 checkpoints: a directory with
  `albert_config.json` and `model.ckpt-*` (or a checkpoint prefix); the TF-Hub
  `module/` prefix, optimizer slots (`adam_m`, `adam_v`) and `global_step` are
  ignored. Reading them needs TensorFlow (imported only then, by
  `albert_tf.checkpoint_readers`, which reads all foreign files).
* Hugging Face ALBERT directories: `config.json` + `model.safetensors` (read with
  `safetensors.numpy`, no torch) or `pytorch_model.bin` (needs torch).
* ours: `albert_config.json` + `model.weights.h5` + `albert_task.json`
  (+ `spiece.model`), written by `save_checkpoint`.

TF1 and Hugging Face weights are placed through NAME_TABLE, one explicit row per
tensor. Whatever cannot be placed (missing, unexpected or mis-shaped tensors) is
reported in one `CheckpointError` that lists every problem.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import uuid
from typing import Any, Iterable

import numpy as np

from albert_tf.checkpoint_readers import (HF_CONFIG_FILE, HF_WEIGHT_FILES, CheckpointError,
                                          TensorSource, h5_shapes, read_hf, read_tf1, tf1_prefix)
from albert_tf.config import AlbertConfig
from albert_tf.task_record import TASK_FILE, TaskRecord, TaskRecordError

__all__ = ["load_checkpoint", "save_checkpoint", "detect_format", "read_task_info",
           "task_record_of", "CheckpointError", "NAME_TABLE"]

logger = logging.getLogger(__name__)

CONFIG_FILE = "albert_config.json"
WEIGHTS_FILE = "model.weights.h5"
SPM_FILE = "spiece.model"


# ----------------------------------------------------------------------------------
# The name table: ours <-> original TF1 <-> Hugging Face.
#
# Columns: (our variable, TF1 name, TF1 layout, HF key, HF layout).
# * Our variable is an attribute path from the AlbertPretrainer; "block." starts at
#   encoder.block(first layer of group g, inner group i).
# * {g} and {i} are the group and inner-group indices.
# * Layout: "=" the source tensor is stored as we store it; "T" it is the transpose.
#   Our Dense kernels are [in, out] like TF1's; HF nn.Linear weights are [out, in].
#   The TF1 SOP `output_weights` is [2, H] (the original multiplies by its transpose),
#   our sop_head.dense kernel is [H, 2].
# ----------------------------------------------------------------------------------
_BLOCK_TF1 = "bert/encoder/transformer/group_{g}/inner_group_{i}/"
_BLOCK_HF = "albert.encoder.albert_layer_groups.{g}.albert_layers.{i}."

NAME_TABLE: tuple[tuple[str, str, str, str, str], ...] = (
    ("encoder.embeddings.word_embeddings.embeddings", "bert/embeddings/word_embeddings", "=",
     "albert.embeddings.word_embeddings.weight", "="),
    ("encoder.embeddings.position_embeddings.embeddings", "bert/embeddings/position_embeddings",
     "=", "albert.embeddings.position_embeddings.weight", "="),
    ("encoder.embeddings.token_type_embeddings.embeddings",
     "bert/embeddings/token_type_embeddings", "=",
     "albert.embeddings.token_type_embeddings.weight", "="),
    ("encoder.embeddings.layer_norm.gamma", "bert/embeddings/LayerNorm/gamma", "=",
     "albert.embeddings.LayerNorm.weight", "="),
    ("encoder.embeddings.layer_norm.beta", "bert/embeddings/LayerNorm/beta", "=",
     "albert.embeddings.LayerNorm.bias", "="),
    ("encoder.embedding_projection.kernel", "bert/encoder/embedding_hidden_mapping_in/kernel",
     "=", "albert.encoder.embedding_hidden_mapping_in.weight", "T"),
    ("encoder.embedding_projection.bias", "bert/encoder/embedding_hidden_mapping_in/bias", "=",
     "albert.encoder.embedding_hidden_mapping_in.bias", "="),
    ("block.attention.query.kernel", _BLOCK_TF1 + "attention_1/self/query/kernel", "=",
     _BLOCK_HF + "attention.query.weight", "T"),
    ("block.attention.query.bias", _BLOCK_TF1 + "attention_1/self/query/bias", "=",
     _BLOCK_HF + "attention.query.bias", "="),
    ("block.attention.key.kernel", _BLOCK_TF1 + "attention_1/self/key/kernel", "=",
     _BLOCK_HF + "attention.key.weight", "T"),
    ("block.attention.key.bias", _BLOCK_TF1 + "attention_1/self/key/bias", "=",
     _BLOCK_HF + "attention.key.bias", "="),
    ("block.attention.value.kernel", _BLOCK_TF1 + "attention_1/self/value/kernel", "=",
     _BLOCK_HF + "attention.value.weight", "T"),
    ("block.attention.value.bias", _BLOCK_TF1 + "attention_1/self/value/bias", "=",
     _BLOCK_HF + "attention.value.bias", "="),
    ("block.attention.output_dense.kernel", _BLOCK_TF1 + "attention_1/output/dense/kernel", "=",
     _BLOCK_HF + "attention.dense.weight", "T"),
    ("block.attention.output_dense.bias", _BLOCK_TF1 + "attention_1/output/dense/bias", "=",
     _BLOCK_HF + "attention.dense.bias", "="),
    ("block.attention.layer_norm.gamma", _BLOCK_TF1 + "LayerNorm/gamma", "=",
     _BLOCK_HF + "attention.LayerNorm.weight", "="),
    ("block.attention.layer_norm.beta", _BLOCK_TF1 + "LayerNorm/beta", "=",
     _BLOCK_HF + "attention.LayerNorm.bias", "="),
    ("block.ffn.intermediate.kernel", _BLOCK_TF1 + "ffn_1/intermediate/dense/kernel", "=",
     _BLOCK_HF + "ffn.weight", "T"),
    ("block.ffn.intermediate.bias", _BLOCK_TF1 + "ffn_1/intermediate/dense/bias", "=",
     _BLOCK_HF + "ffn.bias", "="),
    ("block.ffn.output_dense.kernel", _BLOCK_TF1 + "ffn_1/intermediate/output/dense/kernel", "=",
     _BLOCK_HF + "ffn_output.weight", "T"),
    ("block.ffn.output_dense.bias", _BLOCK_TF1 + "ffn_1/intermediate/output/dense/bias", "=",
     _BLOCK_HF + "ffn_output.bias", "="),
    ("block.ffn.layer_norm.gamma", _BLOCK_TF1 + "LayerNorm_1/gamma", "=",
     _BLOCK_HF + "full_layer_layer_norm.weight", "="),
    ("block.ffn.layer_norm.beta", _BLOCK_TF1 + "LayerNorm_1/beta", "=",
     _BLOCK_HF + "full_layer_layer_norm.bias", "="),
    ("encoder.pooler.kernel", "bert/pooler/dense/kernel", "=", "albert.pooler.weight", "T"),
    ("encoder.pooler.bias", "bert/pooler/dense/bias", "=", "albert.pooler.bias", "="),
    ("mlm_head.dense.kernel", "cls/predictions/transform/dense/kernel", "=",
     "predictions.dense.weight", "T"),
    ("mlm_head.dense.bias", "cls/predictions/transform/dense/bias", "=",
     "predictions.dense.bias", "="),
    ("mlm_head.layer_norm.gamma", "cls/predictions/transform/LayerNorm/gamma", "=",
     "predictions.LayerNorm.weight", "="),
    ("mlm_head.layer_norm.beta", "cls/predictions/transform/LayerNorm/beta", "=",
     "predictions.LayerNorm.bias", "="),
    ("mlm_head.output_bias", "cls/predictions/output_bias", "=", "predictions.bias", "="),
    ("sop_head.dense.kernel", "cls/seq_relationship/output_weights", "T",
     "sop_classifier.classifier.weight", "T"),
    ("sop_head.dense.bias", "cls/seq_relationship/output_bias", "=",
     "sop_classifier.classifier.bias", "="),
)

# Heads: a source holding none of a head's tensors leaves that head initialised.
HEADS = ("mlm_head", "sop_head")

# Hugging Face files may store copies of tied tensors: (copy, the tensor it must equal).
HF_TIED_COPIES = {"predictions.decoder.weight": "albert.embeddings.word_embeddings.weight",
                  "predictions.decoder.bias": "predictions.bias"}


# ----------------------------------------------------------------------------------
# Placing a source's tensors in a pretrainer.
# ----------------------------------------------------------------------------------
def _resolve(model, path: str, block):
    obj = block if path.startswith("block.") else model
    for attribute in path.split(".")[1 if path.startswith("block.") else 0:]:
        obj = getattr(obj, attribute)
    return obj


def _table_rows(model, kind: str) -> Iterable[tuple[str, Any, str, str]]:
    """(our path, variable, source name, layout) for every tensor the model needs."""
    config = model.config
    first_layer = {}
    for layer in range(config.num_hidden_layers):
        first_layer.setdefault(config.group_of_layer(layer), layer)
    for ours, tf1, tf1_layout, hf, hf_layout in NAME_TABLE:
        source_name, layout = (tf1, tf1_layout) if kind == "tf1" else (hf, hf_layout)
        if ours.startswith("encoder.embedding_projection") and \
                model.encoder.embedding_projection is None:
            continue  # E == H: the original has no embedding_hidden_mapping_in
        if not ours.startswith("block."):
            yield ours, _resolve(model, ours, None), source_name, layout
            continue
        for g in range(config.num_hidden_groups):
            for i in range(config.inner_group_num):
                block = model.encoder.block(first_layer[g], i)
                yield ours, _resolve(model, ours, block), source_name.format(g=g, i=i), layout


def _place(model, source: TensorSource, config_path: str) -> list[str]:
    """Assigns every tensor of `source` to `model`; returns the heads left initialised.

    Raises CheckpointError listing every missing, unexpected and mis-shaped tensor.
    """
    rows = list(_table_rows(model, source.kind))
    present_heads = {h for h in HEADS
                     if any(o.startswith(h) and n in source.shapes for o, _, n, _ in rows)}
    problems, used, assignments = [], set(), []
    for ours, variable, name, layout in rows:
        if ours.split(".")[0] in HEADS and ours.split(".")[0] not in present_heads:
            continue
        if name not in source.shapes:
            problems.append(f"missing: {name}")
            continue
        used.add(name)
        expected = tuple(variable.shape)[::-1] if layout == "T" else tuple(variable.shape)
        if tuple(source.shapes[name]) != expected:
            problems.append(f"mis-shaped: {name}: {tuple(source.shapes[name])} in the "
                            f"checkpoint, {expected} expected")
            continue
        assignments.append((variable, name, layout))
    tied = set(HF_TIED_COPIES) if source.kind == "hf" else set()
    problems += [f"unexpected: {n}" for n in sorted(set(source.shapes) - used - tied)]
    if source.kind == "hf" and not problems:
        problems += _check_tied_copies(source)
    if problems:
        raise CheckpointError(
            f"{source.path}: {len(problems)} tensor(s) do not fit the model of "
            f"{config_path}:\n  " + "\n  ".join(problems))
    for variable, name, layout in assignments:
        value = source.read(name)
        variable.assign(np.asarray(value.T if layout == "T" else value, variable.dtype))
    return [h for h in HEADS if h not in present_heads]


def _check_tied_copies(source: TensorSource) -> list[str]:
    problems = []
    for copy, original in HF_TIED_COPIES.items():
        if copy in source.shapes and original in source.shapes and \
                not np.array_equal(source.read(copy), source.read(original)):
            problems.append(f"tied copy differs: {copy} != {original} (albert-tf ties them)")
    return problems


# ----------------------------------------------------------------------------------
# Formats and the public API.
# ----------------------------------------------------------------------------------
def detect_format(path: str | os.PathLike) -> str:
    """Which checkpoint `path` holds: "albert_tf", "hf" or "tf1"; CheckpointError if none."""
    path = os.fspath(path)
    if os.path.isdir(path) and os.path.isfile(os.path.join(path, WEIGHTS_FILE)):
        return "albert_tf"
    if os.path.isdir(path) and os.path.isfile(os.path.join(path, HF_CONFIG_FILE)) and any(
            os.path.isfile(os.path.join(path, f)) for f in HF_WEIGHT_FILES):
        return "hf"
    if tf1_prefix(path) is not None:
        return "tf1"
    if not os.path.exists(path) and not os.path.exists(path + ".index"):
        raise CheckpointError(f"{path}: no such file or directory")
    raise CheckpointError(
        f"{path}: not a checkpoint: expected {WEIGHTS_FILE} (albert-tf), {HF_CONFIG_FILE} + "
        f"{' or '.join(HF_WEIGHT_FILES)} (Hugging Face), or model.ckpt-*.index (TF1)")


def read_config(path: str | os.PathLike) -> AlbertConfig:
    """The model config of any checkpoint `load_checkpoint` reads, without its weights."""
    path = os.fspath(path)
    kind = detect_format(path)
    if kind == "albert_tf":
        return AlbertConfig.from_json_file(os.path.join(path, CONFIG_FILE))
    prefix = tf1_prefix(path) if kind == "tf1" else None
    return AlbertConfig.from_json_file(os.path.join(os.path.dirname(prefix), CONFIG_FILE)
                                       if prefix else os.path.join(path, HF_CONFIG_FILE))


def check_seq_length(checkpoint: str | os.PathLike, seq_length: int) -> None:
    """Raises ConfigError unless `seq_length` fits the position table of `checkpoint`.

    Cheap (reads the config only): call it before reading data or building models.
    """
    read_config(checkpoint).check_sequence_length(seq_length,
                                                  where=f"checkpoint {os.fspath(checkpoint)}")


def _read_config(path: str) -> AlbertConfig:
    if not os.path.isfile(path):
        raise CheckpointError(f"{path}: not found (the checkpoint's model config)")
    config = AlbertConfig.from_json_file(path)
    if config.sharing != "all":
        raise CheckpointError(
            f"{path}: sharing={config.sharing!r}, but TF1 and Hugging Face checkpoints hold "
            f"weights per group shared across depth, i.e. sharing='all'")
    return config


def _load_foreign(path: str, kind: str):
    from albert_tf.models import AlbertPretrainer

    prefix = tf1_prefix(path) if kind == "tf1" else None
    config_path = (os.path.join(os.path.dirname(prefix), CONFIG_FILE) if prefix
                   else os.path.join(path, HF_CONFIG_FILE))
    config = _read_config(config_path)  # first: a bad config fails before any tensor is read
    source = read_tf1(prefix) if prefix else read_hf(path)
    model = AlbertPretrainer(config)
    for head in _place(model, source, config_path):
        logger.warning("%s has no %s weights; that head keeps its random initialisation",
                       source.path, head)
    logger.info("loaded %d tensors from %s (%s)", len(source.shapes), source.path, kind)
    return model


def read_task_info(directory: str | os.PathLike) -> dict[str, Any]:
    """albert_task.json of one of our checkpoint directories, validated, as a dict.

    `TaskRecord.read(directory).to_dict()`: the fields of the checkpoint's task,
    defaults filled in for older files (pretraining if the file is absent).
    """
    return TaskRecord.read(directory).to_dict()


def _ensure_built(model) -> None:
    """Calls `model` once on a dummy batch if Keras does not consider it built yet.

    The models create all their weights in __init__; Keras' save/load_weights still
    insist on the `built` flag, which a first call sets.
    """
    if model.built:
        return
    shape = (1, 1, 2) if model.task == "multiple_choice" else (1, 2)
    from albert_tf.inputs import INPUT_MASK, INPUT_TYPE_IDS, INPUT_WORD_IDS

    inputs = {name: np.zeros(shape, np.int32) for name in (INPUT_WORD_IDS, INPUT_TYPE_IDS)}
    inputs[INPUT_MASK] = np.ones(shape, np.int32)
    if model.task == "pretraining":
        inputs["masked_lm_positions"] = np.zeros((1, 1), np.int32)
    model(inputs)


def _load_ours(directory: str):
    from albert_tf.models import TASK_MODELS

    config = AlbertConfig.from_json_file(os.path.join(directory, CONFIG_FILE))
    record = TaskRecord.read(directory)
    task = record.task
    if task not in TASK_MODELS:
        raise CheckpointError(f"{os.path.join(directory, TASK_FILE)}: task={task!r} is not one "
                              f"of {', '.join(TASK_MODELS)}")
    kwargs = {}
    if task in ("classification", "token_classification"):
        kwargs["num_classes"] = record.num_classes
    elif task == "span":
        kwargs["answerability"] = record.answerability
    model = TASK_MODELS[task](config, **kwargs)
    _ensure_built(model)
    weights = os.path.join(directory, WEIGHTS_FILE)
    keras_error = None
    try:
        model.load_weights(weights)
    except (ValueError, OSError) as e:
        keras_error = e
    # Keras ignores tensors the model has no place for; the count catches them.
    if keras_error is not None or len(h5_shapes(weights)) != len(model.weights):
        problems = _weights_file_problems(model, weights) or [f"keras: {keras_error}"]
        raise CheckpointError(
            f"{weights}: {len(problems)} tensor(s) do not fit the {task} model of "
            f"{CONFIG_FILE} and {TASK_FILE}:\n  " + "\n  ".join(problems))
    return model


def _weights_file_problems(model, weights: str) -> list[str]:
    """Missing, mis-shaped and unexpected datasets of `weights`, against what Keras
    writes for `model` (the layout is Keras'; it is the reference)."""
    with tempfile.TemporaryDirectory() as tmp:
        model.save_weights(os.path.join(tmp, WEIGHTS_FILE))
        expected = h5_shapes(os.path.join(tmp, WEIGHTS_FILE))
    found = h5_shapes(weights)
    problems = [f"missing: {n}" for n in expected if n not in found]
    problems += [f"mis-shaped: {n}: {found[n]} in the file, model needs {shape}"
                 for n, shape in expected.items() if n in found and found[n] != shape]
    problems += [f"unexpected: {n}" for n in found if n not in expected]
    return problems


def _save_model_weights(model, path: str) -> None:
    """`model.save_weights` without the optimizer's state: a checkpoint holds the model
    (resumable training state lives in the training run's own checkpoints)."""
    from albert_tf import keras_compat

    optimizer = getattr(model, "optimizer", None)
    keras_compat.save_weights_only(model, path,
                                   objects_to_skip=[optimizer] if optimizer is not None else None)


def load_checkpoint(path: str | os.PathLike):
    """Reads a TF1, Hugging Face or albert-tf checkpoint into a model.

    Args:
      path: a TF1 checkpoint directory (albert_config.json + model.ckpt-*) or
        prefix, a Hugging Face ALBERT directory, or one of our directories.

    Returns:
      An `AlbertPretrainer` for TF1 and Hugging Face sources and our pretraining
      checkpoints (heads the source lacks keep their initialisation; a warning says
      so); for our fine-tuned directories, the task model `albert_task.json` names.

    Raises:
      CheckpointError: unreadable files, or tensors that do not fit the config
        (every missing, unexpected and mis-shaped tensor listed at once).

    Example:
        >>> model = load_checkpoint("albert_base/")  # albert_config.json + model.ckpt-best
    """
    path = os.fspath(path)
    kind = detect_format(path)
    return _load_ours(path) if kind == "albert_tf" else _load_foreign(path, kind)


def save_checkpoint(model, directory: str | os.PathLike, spm_model: str | None = None,
                    label_names: list[str] | None = None, do_lower_case: bool = True,
                    seq_length: int | None = None, extra_info: dict | None = None) -> str:
    """Writes `model` as albert_config.json + model.weights.h5 + albert_task.json (+ spiece.model).

    The files are written in a temporary directory next to `directory` and moved in
    only when complete, so a crash never leaves a partial checkpoint behind.
    albert_task.json is the model's `TaskRecord`, validated before anything is written.

    Args:
      model: an `AlbertPretrainer` or a fine-tuning model from `albert_tf.models`.
      directory: where to write (created if needed; our files in it are replaced).
      spm_model: the SentencePiece model to copy in as spiece.model.
      label_names: class names, one per class, for classification tasks.
      do_lower_case: whether the tokenizer lower-cases (recorded for serving).
      seq_length: the sequence length the model was fine-tuned with, if any.
      extra_info: more `TaskRecord` fields (e.g. a span model's "max_query_length"
        or SQuAD 2.0's tuned "no_answer_threshold"); they may not replace the
        fields above, and fields they leave out take `task_record`'s defaults.

    Returns:
      `directory`.

    Raises:
      TaskRecordError: a field that is unknown, invalid or does not apply to the task.
    """
    directory = os.path.abspath(os.fspath(directory))
    record = task_record_of(model, label_names=label_names, do_lower_case=do_lower_case,
                            seq_length=seq_length, extra_info=extra_info,
                            source=os.path.join(directory, TASK_FILE))
    if spm_model is not None and not os.path.isfile(spm_model):
        raise FileNotFoundError(f"SentencePiece model not found: {spm_model}")
    parent = os.path.dirname(directory)
    os.makedirs(parent, exist_ok=True)
    # A unique sibling (not mkdtemp, whose 0700 mode would survive the rename).
    tmp = os.path.join(parent, f".{os.path.basename(directory)}.tmp-{uuid.uuid4().hex}")
    os.makedirs(tmp)
    try:
        model.config.to_json_file(os.path.join(tmp, CONFIG_FILE))
        _ensure_built(model)
        _save_model_weights(model, os.path.join(tmp, WEIGHTS_FILE))
        if spm_model is not None:
            shutil.copyfile(spm_model, os.path.join(tmp, SPM_FILE))
        record.write(tmp)
        if not os.path.exists(directory):
            os.replace(tmp, directory)
            return directory
        for name in (WEIGHTS_FILE, CONFIG_FILE, SPM_FILE, TASK_FILE):  # file by file
            if os.path.exists(os.path.join(tmp, name)):
                os.replace(os.path.join(tmp, name), os.path.join(directory, name))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return directory


def task_record_of(model, label_names: list[str] | None = None, do_lower_case: bool = True,
                   seq_length: int | None = None, extra_info: dict | None = None,
                   source: str | None = None) -> TaskRecord:
    """The `TaskRecord` of `model` with these settings (what `save_checkpoint` writes).

    Raises:
      TaskRecordError: as `TaskRecord.create`; ValueError if `extra_info` repeats a
        field the model or the other arguments decide.
    """
    decided = {"task": model.task, "do_lower_case": bool(do_lower_case), "seq_length": seq_length}
    if model.task in ("classification", "token_classification"):
        decided["num_classes"] = model.num_classes
        decided["label_names"] = list(label_names) if label_names is not None else None
    elif label_names is not None:
        raise TaskRecordError(f"label_names given for a {model.task} model")
    if model.task == "span":
        decided["answerability"] = bool(model.answerability)
    clashes = sorted(set(extra_info or {}) & (set(decided) | {"num_classes", "label_names"}))
    if clashes:
        raise ValueError(f"extra_info may not replace albert_task.json fields: {clashes}")
    fields = {k: v for k, v in decided.items() if k != "task"}
    return TaskRecord.create(model.task, source=source, **fields, **(extra_info or {}))
