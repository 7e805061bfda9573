"""The one name table: albert-tf's variables <-> original TF1 names <-> Hugging Face keys.

`place(model, source, config_path)` puts every tensor of a checkpoint
(`readers.TensorSource`) into a model of `albert_tf.models` through
NAME_TABLE, or raises one `CheckpointError` listing every missing, unexpected and
mis-shaped tensor. `albert_tf.checkpoint.open_checkpoint` is the entry point.
"""

from __future__ import annotations

from typing import Any, Iterable

import numpy as np

from albert_tf.checkpoint.readers import CheckpointError, TensorSource

__all__ = ["NAME_TABLE", "HEADS", "POOLER", "HF_TIED_COPIES", "place"]


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

# Pretraining heads: a source holding none of a head's tensors leaves that head
# initialised (an encoder-only checkpoint still loads into the pretrainer).
HEADS = ("mlm_head", "sop_head")
# The pooler, for models that never read it: loaded when present, else left initialised
# (Hugging Face builds those models without one).
POOLER = "encoder.pooler"

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
        root = ours.split(".")[0]
        if root not in ("block", "encoder") and getattr(model, root, None) is None:
            continue  # a head this model does not have
        if not ours.startswith("block."):
            yield ours, _resolve(model, ours, None), source_name, layout
            continue
        for g in range(config.num_hidden_groups):
            for i in range(config.inner_group_num):
                block = model.encoder.block(first_layer[g], i)
                yield ours, _resolve(model, ours, block), source_name.format(g=g, i=i), layout


def _optional_parts(model) -> tuple[str, ...]:
    """Parts of `model` a source may lack as a whole (then they keep their initialisation)."""
    parts = HEADS if model.task == "pretraining" else ()
    return parts if model.uses_pooled_output else (*parts, POOLER)


def place(model, source: TensorSource, config_path: str) -> list[str]:
    """Assigns every tensor of `source` to `model`; returns the optional parts
    (pretraining heads, an unused pooler) left initialised.

    Raises CheckpointError listing every missing, unexpected and mis-shaped tensor.
    """
    rows = list(_table_rows(model, source.kind))
    optional = _optional_parts(model)

    def part(ours: str) -> str | None:
        return next((p for p in optional if ours == p or ours.startswith(p + ".")), None)

    present = {part(o) for o, _, n, _ in rows if part(o) and n in source.shapes}
    problems, used, assignments = [], set(), []
    for ours, variable, name, layout in rows:
        if part(ours) is not None and part(ours) not in present:
            continue
        if name is None:
            problems.append(f"missing: {ours} (the {source.kind} format has no such tensor)")
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
    return [p for p in optional if p not in present]


def _check_tied_copies(source: TensorSource) -> list[str]:
    problems = []
    for copy, original in HF_TIED_COPIES.items():
        if copy in source.shapes and original in source.shapes and \
                not np.array_equal(source.read(copy), source.read(original)):
            problems.append(f"tied copy differs: {copy} != {original} (albert-tf ties them)")
    return problems
