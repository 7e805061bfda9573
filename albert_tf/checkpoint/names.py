"""The one name table: albert-tf's variables <-> original TF1 names <-> Hugging Face keys.

`place(model, source, config_path)` puts every tensor of a checkpoint
(`readers.TensorSource`) into a model of `albert_tf.models` through
NAME_TABLE, or raises one `CheckpointError` listing every missing, unexpected and
mis-shaped tensor. `albert_tf.checkpoint.open_checkpoint` is the entry point.
Other formats bring their own column (`kerashub.KERAS_HUB_TABLE`) through
`table_rows`; the writers (`writers.py`) write by the same rows (`stored_tensors`).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable
from typing import Any

import numpy as np

from albert_tf.checkpoint.readers import (
    CheckpointError,
    TensorSource,
    refuse_weight_problems,
    weight_problem,
)

__all__ = ["NAME_TABLE", "POOLER", "HF_TIED_COPIES", "PROJECTION", "place",
           "table_rows", "format_rows", "stored_shape", "to_stored", "from_stored",
           "stored_tensors", "check_covered", "encoder_rows", "row_attribute", "held_shapes"]


# ----------------------------------------------------------------------------------
# The name table: ours <-> original TF1 <-> Hugging Face.
#
# Columns: (our variable, TF1 name, TF1 layout, HF key, HF layout).
# * Our variable is an attribute path from the model (`albert_tf.models`); a row
#   applies to the models that have its first attribute ("mlm_head", "head", ...).
#   "block." starts at encoder.block(first layer of group g, inner group i).
# * None: the format has no such tensor (the SQuAD 2.0 beam head is the original's
#   alone), so that format cannot fill a model that has it.
# * {g} and {i} are the group and inner-group indices.
# * Layout: "=" the source tensor is stored as we store it; "T" it is the transpose.
#   Our Dense kernels are [in, out] like TF1's; HF nn.Linear weights are [out, in].
#   Other formats' tables (KerasHub's, `kerashub.py`) also use "heads_out" and
#   "heads_in": Keras' EinsumDense attention kernels, see `stored_shape`.
#   The TF1 SOP `output_weights` is [2, H] (the original multiplies by its transpose),
#   our sop_head.dense kernel is [H, 2].
# ----------------------------------------------------------------------------------
_BLOCK_TF1 = "bert/encoder/transformer/group_{g}/inner_group_{i}/"
_BLOCK_HF = "albert.encoder.albert_layer_groups.{g}.albert_layers.{i}."

NAME_TABLE: tuple[tuple[str, str | None, str | None, str | None, str | None], ...] = (
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
    # Fine-tuning heads. `head` is the dense layer of the sequence classifier and
    # regressor (run_classifier, HF AlbertForSequenceClassification), the choice scorer
    # (run_race, HF AlbertForMultipleChoice) and the token classifier (HF
    # AlbertForTokenClassification). The original stores it [C, H] and multiplies by
    # its transpose, as HF's nn.Linear does.
    ("head.dense.kernel", "output_weights", "T", "classifier.weight", "T"),
    ("head.dense.bias", "output_bias", "=", "classifier.bias", "="),
    # Start/end logits: run_squad_v1's cls/squad layer [2, H], HF's qa_outputs.
    ("span_head.dense.kernel", "cls/squad/output_weights", "T", "qa_outputs.weight", "T"),
    ("span_head.dense.bias", "cls/squad/output_bias", "=", "qa_outputs.bias", "="),
    # run_squad_v2's head (tf.layers.dense kernels are [in, out], as ours); the end
    # and answer-class dense_0 layers read [h; h_start] and [start feature; h_CLS].
    ("beam_head.start_dense.kernel", "start_logits/dense/kernel", "=", None, None),
    ("beam_head.start_dense.bias", "start_logits/dense/bias", "=", None, None),
    ("beam_head.end_dense.kernel", "end_logits/dense_0/kernel", "=", None, None),
    ("beam_head.end_dense.bias", "end_logits/dense_0/bias", "=", None, None),
    ("beam_head.end_layer_norm.gamma", "end_logits/LayerNorm/gamma", "=", None, None),
    ("beam_head.end_layer_norm.beta", "end_logits/LayerNorm/beta", "=", None, None),
    ("beam_head.end_output.kernel", "end_logits/dense_1/kernel", "=", None, None),
    ("beam_head.end_output.bias", "end_logits/dense_1/bias", "=", None, None),
    ("beam_head.answer_dense.kernel", "answer_class/dense_0/kernel", "=", None, None),
    ("beam_head.answer_dense.bias", "answer_class/dense_0/bias", "=", None, None),
    ("beam_head.answer_output.kernel", "answer_class/dense_1/kernel", "=", None, None),
)

# The pooler, for models that never read it: loaded when present, else left initialised
# (Hugging Face builds those models without one).
POOLER = "encoder.pooler"
# The E -> H projection. When E == H albert-tf has none (as the original); formats that
# always store one (Hugging Face, KerasHub) are read when theirs is the identity, and
# written with the identity (`place`, `table_rows`).
PROJECTION = "encoder.embedding_projection"


# ----------------------------------------------------------------------------------
# Layouts: how a stored tensor relates to our variable of shape `shape`.
#   "="          as ours
#   "T"          the transpose (HF nn.Linear weights, the TF1 output_weights)
#   "heads_out"  our last axis split into (heads, head_size): Keras EinsumDense
#                query/key/value kernels [H, N, D] and biases [N, D] (ours [H, H], [H])
#   "heads_in"   our first axis split into (heads, head_size): the attention output
#                kernel [N, D, H] (ours [H, H])
# The split is row-major, as our attention reshapes [B, T, H] -> [B, T, N, D].
# ----------------------------------------------------------------------------------
def stored_shape(shape: tuple[int, ...], layout: str, heads: int) -> tuple[int, ...]:
    """The shape a tensor of ours with `shape` has when stored in `layout`."""
    shape = tuple(shape)
    if layout == "T":
        return shape[::-1]
    if layout == "heads_out":
        return (*shape[:-1], heads, shape[-1] // heads)
    if layout == "heads_in":
        return (heads, shape[0] // heads, *shape[1:])
    if layout != "=":
        raise ValueError(f"unknown layout {layout!r}")
    return shape


def from_stored(value: np.ndarray, layout: str, shape: tuple[int, ...]) -> np.ndarray:
    """A stored tensor (already checked to be `stored_shape(shape, ...)`) as ours."""
    return value.T if layout == "T" else np.reshape(value, shape)


def to_stored(value: np.ndarray, layout: str, heads: int) -> np.ndarray:
    """Our tensor as `layout` stores it."""
    return value.T if layout == "T" else np.reshape(value, stored_shape(value.shape, layout,
                                                                        heads))

# Hugging Face files may store copies of tied tensors: (copy, the tensor it must equal).
HF_TIED_COPIES = {"predictions.decoder.weight": "albert.embeddings.word_embeddings.weight",
                  "predictions.decoder.bias": "predictions.bias"}


# ----------------------------------------------------------------------------------
# Placing a source's tensors in a model.
# ----------------------------------------------------------------------------------
def _resolve(model, path: str, block):
    obj = block if path.startswith("block.") else model
    for attribute in path.split(".")[1 if path.startswith("block.") else 0:]:
        obj = getattr(obj, attribute)
    return obj


def table_rows(model, table: Iterable[tuple[str, str | None, str | None]],
               block_fields: Callable[[int, int], dict] | None = None
               ) -> Iterable[tuple[str, Any, str | None, str | None]]:
    """(our path, variable, stored name, layout) for every tensor `model` has, from one
    format's column of a name table: rows of (our path, stored name, layout).

    A "block." row is repeated for each group g and inner group i, its stored name
    filled in with `block_fields(g, i)` (default: {"g": g, "i": i}). The projection's
    rows come with variable None when E == H (the model has none; see PROJECTION).
    Rows of a head the model does not have are left out. Readers place by these rows
    (`place`), writers write by them: one table per format, read both ways.
    """
    config = model.config
    fields = block_fields or (lambda g, i: {"g": g, "i": i})
    first_layer = {}
    for layer in range(config.num_hidden_layers):
        first_layer.setdefault(config.group_of_layer(layer), layer)
    for ours, source_name, layout in table:
        if ours.startswith(PROJECTION + ".") and model.encoder.embedding_projection is None:
            yield ours, None, source_name, layout  # E == H
            continue
        root = ours.split(".")[0]
        if root not in ("block", "encoder") and getattr(model, root, None) is None:
            continue  # a head this model does not have
        if not ours.startswith("block."):
            yield ours, _resolve(model, ours, None), source_name, layout
            continue
        for g in range(config.num_hidden_groups):
            for i in range(config.inner_group_num):
                block = model.encoder.block(first_layer[g], i)
                name = source_name.format(**fields(g, i)) if source_name is not None else None
                yield ours, _resolve(model, ours, block), name, layout


def format_rows(kind: str) -> list[tuple[str, str | None, str | None]]:
    """NAME_TABLE's column for `kind` ("tf1" or "hf"): (our path, stored name, layout)."""
    return [(ours, tf1, tf1_layout) if kind == "tf1" else (ours, hf, hf_layout)
            for ours, tf1, tf1_layout, hf, hf_layout in NAME_TABLE]


def _table_rows(model, kind: str) -> Iterable[tuple[str, Any, str | None, str | None]]:
    """(our path, variable, source name, layout) for every tensor the model needs."""
    return table_rows(model, format_rows(kind))


def _optional_parts(model) -> tuple[str, ...]:
    """Parts of `model` a source may lack as a whole (then they keep their initialisation):
    its task's optional heads (the pretrainer's: an encoder-only checkpoint still loads
    into it), and the pooler of a model that never reads it."""
    parts = model.task_spec.optional_heads
    return parts if model.uses_pooled_output else (*parts, POOLER)


def place(model, source: TensorSource, config_path: str, rows=None, *,
          optional: tuple[str, ...] = (), ignored: Collection[str] = ()) -> list[str]:
    """Assigns every tensor of `source` to `model`; returns the optional parts
    (pretraining heads, an unused pooler) left initialised.

    `rows` (from `table_rows`) defaults to NAME_TABLE's column for `source.kind`.
    When E == H a stored projection is accepted only if it is the identity.
    `optional`: more parts the source may lack as a whole; `ignored`: stored names the
    source may hold that no row takes (`from_preset` into a model of another task: the
    checkpoint's own heads).

    Raises CheckpointError listing every missing, unexpected and mis-shaped tensor;
    then, as the values are read, one listing every tensor that is not floating point
    or holds a NaN or infinity (`readers.weight_problem`).
    """
    rows = list(_table_rows(model, source.kind) if rows is None else rows)
    heads = model.config.num_attention_heads
    own = _optional_parts(model)
    optional = own + tuple(p for p in optional if p not in own)

    def part(ours: str) -> str | None:
        return next((p for p in optional if ours == p or ours.startswith(p + ".")), None)

    present = {part(o) for o, _, n, _ in rows if part(o) and n in source.shapes}
    problems, used, assignments = [], set(), []
    for ours, variable, name, layout in rows:
        if part(ours) is not None and part(ours) not in present:
            continue
        if variable is None:  # E == H: no projection of ours; a stored one must be the identity
            if name in source.shapes:
                used.add(name)
                if not _is_identity(source.read(name), ours):
                    problems.append(f"not the identity: {name}: embedding_size == hidden_size, "
                                    f"where albert-tf has no embedding projection")
            continue
        if name is None:
            problems.append(f"missing: {ours} (the {source.kind} format has no such tensor)")
            continue
        if name not in source.shapes:
            problems.append(f"missing: {name}")
            continue
        used.add(name)
        expected = stored_shape(tuple(variable.shape), layout, heads)
        if tuple(source.shapes[name]) != expected:
            problems.append(f"mis-shaped: {name}: {tuple(source.shapes[name])} in the "
                            f"checkpoint, {expected} expected")
            continue
        assignments.append((variable, name, layout))
    tied = set(HF_TIED_COPIES) if source.kind == "hf" else set()
    problems += [f"unexpected: {n}" for n in sorted(set(source.shapes) - used - tied - set(ignored))]
    if source.kind == "hf" and not problems:
        problems += _check_tied_copies(source)
    if problems:
        raise CheckpointError(
            f"{source.path}: {len(problems)} tensor(s) do not fit the model of "
            f"{config_path}:\n  " + "\n  ".join(problems))
    bad = []
    for variable, name, layout in assignments:
        value = np.asarray(source.read(name))
        problem = weight_problem(value)
        if problem is not None:
            bad.append(f"{name} ({problem})")
            continue
        value = from_stored(value, layout, tuple(variable.shape))
        variable.assign(np.asarray(value, variable.dtype))
    refuse_weight_problems(bad, source.path)
    return [p for p in optional if p not in present]


def row_attribute(ours: str) -> str:
    """The model attribute a row's path starts from ("head", "encoder", "block", ...)."""
    return ours.split(".")[0]


def held_shapes(rows: list, source: TensorSource, heads: int) -> str | None:
    """None when `source` lacks a head's tensors (any of `rows`); else "" when it holds
    each in the shape the row's variable needs, or the stored names and shapes."""
    if any(name is None or name not in source.shapes for _, _, name, _ in rows):
        return None
    return ", ".join(f"{name} {tuple(source.shapes[name])}" for _, variable, name, layout in rows
                     if tuple(source.shapes[name]) != stored_shape(tuple(variable.shape), layout,
                                                                   heads))


def _is_identity(value: np.ndarray, ours: str) -> bool:
    """A stored E -> H projection's kernel that is the identity, or its bias that is zero."""
    value = np.asarray(value)
    if ours.endswith(".bias"):
        return value.ndim == 1 and not value.any()
    return value.ndim == 2 and value.shape[0] == value.shape[1] and \
        np.array_equal(value, np.eye(value.shape[0], dtype=value.dtype))


def _check_tied_copies(source: TensorSource) -> list[str]:
    problems = []
    for copy, original in HF_TIED_COPIES.items():
        if copy in source.shapes and original in source.shapes and \
                not np.array_equal(source.read(copy), source.read(original)):
            problems.append(f"tied copy differs: {copy} != {original} (albert-tf ties them)")
    return problems


# ----------------------------------------------------------------------------------
# Writing a model's tensors by a format's rows (`table_rows`): the writers' side.
# ----------------------------------------------------------------------------------
def stored_tensors(model, rows) -> dict[str, np.ndarray]:
    """Stored name -> array, in the row's layout, for every row; the projection's rows
    without a variable (E == H) get the identity kernel and a zero bias."""
    heads, tensors = model.config.num_attention_heads, {}
    for ours, variable, name, layout in rows:
        if variable is None:
            size = model.config.hidden_size
            tensors[name] = np.eye(size, dtype=np.float32) if ours.endswith(".kernel") else \
                np.zeros(size, np.float32)
            continue
        tensors[name] = np.ascontiguousarray(
            to_stored(np.asarray(variable.numpy(), np.float32), layout, heads))
    return tensors


def check_covered(model, rows, where: str, target: str, dropped: tuple[str, ...] = ()) -> None:
    """Every weight of `model` has a row with a stored name, but those of the `dropped`
    layers (path prefixes such as "encoder/pooler/", "sop_head/").

    Raises:
      CheckpointError: naming the layers the format has no place for.
    """
    covered = {id(variable) for _, variable, name, _ in rows
               if variable is not None and name is not None}
    loose = sorted({v.path.rsplit("/", 1)[0] for v in model.weights if id(v) not in covered
                    and not v.path.startswith(dropped)})
    if loose:
        raise CheckpointError(f"{where}: --to {target}: the format has no place for "
                              f"{', '.join(loose)}")


def encoder_rows(model, rows) -> tuple[list, tuple[str, ...]]:
    """The encoder's rows, and the path prefixes of the model's other layers (its
    heads), which writing the encoder alone drops."""
    heads = tuple(sorted({v.path.split("/")[0] + "/" for v in model.weights
                          if not v.path.startswith("encoder/")}))
    return [r for r in rows if r[0].startswith(("encoder.", "block."))], heads
