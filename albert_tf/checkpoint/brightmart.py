"""brightmart/albert_zh's own checkpoints: a TF1 layout of its own (albert_tiny_zh ... xlarge).

brightmart/albert_zh released Chinese ALBERT checkpoints before its `*_google` ones (which
are in google-research's layout, read by `foreign.Tf1Checkpoint`). Its modeling.py
differs from google-research's in three ways that show in the variable names:

  bert/embeddings/word_embeddings     [V, E]  the word table
  bert/embeddings/word_embeddings_2   [E, H]  applied right after the lookup, no bias; the
                                              position [P, H] and token-type [T, H] tables
                                              and the embedding LayerNorm are at width H
                                              (config: embedding_projection_position="before_sum")
  bert/encoder/layer_shared/...               one block for every layer, BERT's sublayer
                                              names (attention/self/query, intermediate/dense,
                                              output/dense, output/LayerNorm)
  cls/predictions/transform/dense     [H, H]  the masked-LM transform at width H; the logits
                                              go back to E through word_embeddings_2's
                                              transpose, then the tied word table

Its GELU is the tanh approximation ("gelu") and its LayerNorm TensorFlow contrib's
(epsilon 1e-12), as ours. The reader:

* detects it by those names in the TF1 index (TensorFlow reads it: the files are
  named as TF1's, `albert_model.ckpt.*`), before TF1's rule;
* reads its config: albert_config.json or the one albert_config*.json beside the
  checkpoint (the releases ship albert_config_tiny.json ...), with brightmart's own
  keys (`config.IGNORED_BRIGHTMART_KEYS`; `ln_type` must be "postln"); its
  modeling.py always shares one block across depth, so num_hidden_groups and
  inner_group_num must be 1;
* places the tensors through BRIGHTMART_TABLE; the fine-tuning heads of its
  run_classifier (`output_weights` [C, H]) are NAME_TABLE's TF1 rows;
* the tokenizer: the vocab.txt beside it, WordPiece, lower-cased.
"""

from __future__ import annotations

from albert_tf.checkpoint.foreign import Tf1Checkpoint
from albert_tf.checkpoint.names import format_rows, row_attribute
from albert_tf.checkpoint.readers import (
    CheckpointError,
    TensorSource,
    tf1_prefix,
)
from albert_tf.config import AlbertConfig

__all__ = ["BRIGHTMART_TABLE", "BrightmartCheckpoint", "is_brightmart"]

# Names only brightmart's layout has; one of them is enough to tell it apart (a
# checkpoint missing the other is then refused by the tensor check, naming it).
_SHARED_BLOCK = "bert/encoder/layer_shared/"
_WORD_PROJECTION = "bert/embeddings/word_embeddings_2"

# Our variable, brightmart's TF1 name, its layout ("=": as ours; "T": the transpose).
BRIGHTMART_TABLE: tuple[tuple[str, str, str], ...] = (
    ("encoder.embeddings.word_embeddings.embeddings", "bert/embeddings/word_embeddings", "="),
    ("encoder.embeddings.word_projection.kernel", _WORD_PROJECTION, "="),
    ("encoder.embeddings.position_embeddings.embeddings",
     "bert/embeddings/position_embeddings", "="),
    ("encoder.embeddings.token_type_embeddings.embeddings",
     "bert/embeddings/token_type_embeddings", "="),
    ("encoder.embeddings.layer_norm.gamma", "bert/embeddings/LayerNorm/gamma", "="),
    ("encoder.embeddings.layer_norm.beta", "bert/embeddings/LayerNorm/beta", "="),
    ("block.attention.query.kernel", _SHARED_BLOCK + "attention/self/query/kernel", "="),
    ("block.attention.query.bias", _SHARED_BLOCK + "attention/self/query/bias", "="),
    ("block.attention.key.kernel", _SHARED_BLOCK + "attention/self/key/kernel", "="),
    ("block.attention.key.bias", _SHARED_BLOCK + "attention/self/key/bias", "="),
    ("block.attention.value.kernel", _SHARED_BLOCK + "attention/self/value/kernel", "="),
    ("block.attention.value.bias", _SHARED_BLOCK + "attention/self/value/bias", "="),
    ("block.attention.output_dense.kernel", _SHARED_BLOCK + "attention/output/dense/kernel",
     "="),
    ("block.attention.output_dense.bias", _SHARED_BLOCK + "attention/output/dense/bias", "="),
    ("block.attention.layer_norm.gamma", _SHARED_BLOCK + "attention/output/LayerNorm/gamma",
     "="),
    ("block.attention.layer_norm.beta", _SHARED_BLOCK + "attention/output/LayerNorm/beta", "="),
    ("block.ffn.intermediate.kernel", _SHARED_BLOCK + "intermediate/dense/kernel", "="),
    ("block.ffn.intermediate.bias", _SHARED_BLOCK + "intermediate/dense/bias", "="),
    ("block.ffn.output_dense.kernel", _SHARED_BLOCK + "output/dense/kernel", "="),
    ("block.ffn.output_dense.bias", _SHARED_BLOCK + "output/dense/bias", "="),
    ("block.ffn.layer_norm.gamma", _SHARED_BLOCK + "output/LayerNorm/gamma", "="),
    ("block.ffn.layer_norm.beta", _SHARED_BLOCK + "output/LayerNorm/beta", "="),
    ("encoder.pooler.kernel", "bert/pooler/dense/kernel", "="),
    ("encoder.pooler.bias", "bert/pooler/dense/bias", "="),
    ("mlm_head.dense.kernel", "cls/predictions/transform/dense/kernel", "="),
    ("mlm_head.dense.bias", "cls/predictions/transform/dense/bias", "="),
    ("mlm_head.layer_norm.gamma", "cls/predictions/transform/LayerNorm/gamma", "="),
    ("mlm_head.layer_norm.beta", "cls/predictions/transform/LayerNorm/beta", "="),
    ("mlm_head.output_bias", "cls/predictions/output_bias", "="),
    # run_pretraining's [2, H] matrix, multiplied by its transpose (ours is [H, 2]).
    ("sop_head.dense.kernel", "cls/seq_relationship/output_weights", "T"),
    ("sop_head.dense.bias", "cls/seq_relationship/output_bias", "="),
)
# The parts whose rows are above; every other row (the fine-tuning heads) is TF1's.
_OWN_PARTS = {row_attribute(ours) for ours, _, _ in BRIGHTMART_TABLE}


def is_brightmart(names) -> bool:
    """Whether a TF1 checkpoint's variable `names` are brightmart/albert_zh's own layout."""
    return any(n.startswith(_SHARED_BLOCK) or n == _WORD_PROJECTION for n in names)


def _list_variables(prefix: str) -> list[str]:
    """The variable names of the TF1 index at `prefix`; none when TensorFlow is missing
    or the index is unreadable (the TF1 reader then says why)."""
    try:
        import tensorflow as tf  # deferred: the index is TensorFlow's format
    except ImportError:
        return []
    try:
        return [name for name, _ in tf.train.list_variables(prefix)]
    except (tf.errors.OpError, ValueError):
        return []


class BrightmartCheckpoint(Tf1Checkpoint):
    """A brightmart/albert_zh checkpoint (see the module docstring): a directory with
    albert_model.ckpt.* (or model.ckpt-*), its albert_config*.json and vocab.txt, a
    prefix, or a prefix's .index file. Reading it needs TensorFlow."""

    format = "brightmart"
    expects = "bert/encoder/layer_shared/* in a TF1 index (brightmart/albert_zh)"
    kind_name = "brightmart/albert_zh TF1"

    @classmethod
    def detect(cls, path: str) -> bool:
        prefix = tf1_prefix(path)
        return prefix is not None and is_brightmart(_list_variables(prefix))

    def _read_config(self) -> AlbertConfig:
        path = self.config_path
        config = AlbertConfig.from_json_file(path)  # refuses ln_type "preln", naming it
        if (config.num_hidden_groups, config.inner_group_num, config.sharing) != (1, 1, "all"):
            raise CheckpointError(
                f"{path}: num_hidden_groups={config.num_hidden_groups}, inner_group_num="
                f"{config.inner_group_num}, sharing={config.sharing!r}, but brightmart/albert_zh's "
                "modeling.py shares one block (layer_shared) across all layers (1, 1, 'all')")
        return config.replace(embedding_projection_position="before_sum")

    def _table(self, source: TensorSource):
        heads = [row for row in format_rows("tf1") if row_attribute(row[0]) not in _OWN_PARTS]
        return [*BRIGHTMART_TABLE, *heads]
