"""AlbertEncoder: factorized embedding -> a depth schedule over shared blocks -> pooler."""

from __future__ import annotations

from typing import Any

import keras
from keras import ops

from albert_tf import tasks
from albert_tf.api_inputs import strict_bool
from albert_tf.config import AlbertConfig
from albert_tf.embedding import AlbertEmbedding, truncated_normal
from albert_tf.inputs import INPUT_NAMES, MASKED_LM_POSITIONS
from albert_tf.pipeline_answers import TextEmbeddings
from albert_tf.transformer import (
    AttentionSublayer,
    FeedForwardSublayer,
    TransformerBlock,
    attention_bias_from_mask,
)


def as_config(config: AlbertConfig | dict[str, Any]) -> AlbertConfig:
    return config if isinstance(config, AlbertConfig) else AlbertConfig.from_dict(config)


def sharing_schedule(config: AlbertConfig) -> list[list[tuple[tuple, tuple]]]:
    """For each depth position and inner index, the keys of its attention and FFN weights.

    A key names one distinct weight set: `("group", g, i)` for weights shared by all
    layers of group g (g = layer * G // L, as the original), `("layer", l, i)` for
    weights private to layer l. Blocks with equal key pairs are one block.
    """
    shared_attention = config.sharing in ("all", "attention")
    shared_ffn = config.sharing in ("all", "ffn")
    schedule = []
    for layer in range(config.num_hidden_layers):
        group = config.group_of_layer(layer)
        row = []
        for inner in range(config.inner_group_num):
            attention_key = ("group", group, inner) if shared_attention else ("layer", layer, inner)
            ffn_key = ("group", group, inner) if shared_ffn else ("layer", layer, inner)
            row.append((attention_key, ffn_key))
        schedule.append(row)
    return schedule


def input_specs(spec: tasks.Task) -> dict[str, keras.InputSpec]:
    """The inputs of the model of task `spec`: int32 [B,T] ([B,K,T] with choices), plus
    `masked_lm_positions` [B,P] for the masked-LM heads. Any batch and length."""
    shape = (None, None, None) if spec.choices else (None, None)
    specs = {name: keras.InputSpec(shape=shape, dtype="int32", name=name)
             for name in INPUT_NAMES}
    if spec.masked_positions:
        specs[MASKED_LM_POSITIONS] = keras.InputSpec(shape=(None, None), dtype="int32",
                                                     name=MASKED_LM_POSITIONS)
    return specs


class ExportMixin:
    """Keras' `model.export(...)` without calling the model first: the signature is the
    task's inputs (`input_specs`), so any batch and length are served."""

    def export(self, filepath, format="tf_saved_model", verbose=None, input_signature=None,
               **kwargs):
        """`keras.Model.export`; `input_signature` defaults to the model's own inputs."""
        if input_signature is None:
            input_signature = [input_specs(self.task_spec)]
        return super().export(filepath, format=format, verbose=verbose,
                              input_signature=input_signature, **kwargs)


    def save(self, filepath, overwrite=None, zipped=None, **kwargs):
        """`keras.Model.save`, written whole or not at all (`albert_tf.infra.keras_files.save`).

        A local `.keras` file is written under a hidden temporary name and renamed when
        complete (Keras' own `save` writes in place: a killed save leaves a broken file
        under the final name). `overwrite`: None (default) replaces an earlier Keras
        archive only, and refuses any other existing file, naming it; True replaces a
        file whatever it holds; False refuses any existing file (Keras would prompt).
        """
        from albert_tf.infra import keras_files  # deferred: the layers do no I/O at import
        return keras_files.save(super().save, filepath, overwrite, zipped, **kwargs)


def _key_name(key: tuple) -> str:
    kind, index, inner = key
    return f"{kind}_{index}_inner_group_{inner}"


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertEncoder(TextEmbeddings, ExportMixin, keras.Model):
    """The ALBERT encoder.

    Args:
      config: an `AlbertConfig` (or its dict).
      remat: rematerialize each block in training: keep only its input for the
        backward pass and recompute the rest (attention probabilities, the FFN's
        intermediate activations), trading compute for memory
        (`benchmarks/bench_remat.py`). Needs dropout 0 (ALBERT's default): a
        recomputed dropout would draw other masks.
      branches: for inference, each sublayer as this many independent branches
        (`albert_tf.transformer.Branches`; `export --branches`); with more than one the
        encoder runs once `cut_branches()` has cut its loaded weights.

    Call: a dict of int32 [B,T] tensors `input_word_ids`, `input_mask`,
    `input_type_ids` -> `{"sequence_output": [B,T,H], "pooled_output": [B,H],
    "encoder_outputs": [L,B,T,H]}` (`encoder_outputs[l]`: the output of depth
    position l, after its inner groups; one tensor, so the outputs are a flat dict
    that `model.export` and SavedModel signatures take).

    Raw text: `embed(texts, pooling="mean")` (`albert_tf.pipeline_answers`), the
    export's `mean_pooled`, when the encoder has a tokenizer (`from_preset` on a
    directory with spiece.model / vocab.txt, or `use_preprocessor`).

    Example:
        >>> enc = AlbertEncoder(AlbertConfig.from_size("albert-base"))
        >>> out = enc({"input_word_ids": ids, "input_mask": mask, "input_type_ids": types})
    """

    task_spec = tasks.ENCODER

    def __init__(self, config: AlbertConfig | dict, remat: bool = False, branches: int = 1,
                 **kwargs):
        super().__init__(**kwargs)
        self.config = config = as_config(config)
        self.remat = strict_bool("remat", remat)  # bool("no") would turn it on
        self.branches = branches
        if self.remat and (config.hidden_dropout_prob or config.attention_probs_dropout_prob):
            raise ValueError(
                f"remat=True needs hidden_dropout_prob=0 and attention_probs_dropout_prob=0 "
                f"(got {config.hidden_dropout_prob} and {config.attention_probs_dropout_prob}): "
                "a recomputed block would draw other dropout masks")
        dtype = self.dtype_policy
        before_sum = config.embedding_projection_position == "before_sum"
        self.embeddings = AlbertEmbedding(
            config.vocab_size, config.embedding_size, config.max_position_embeddings,
            config.type_vocab_size, config.initializer_range, config.hidden_dropout_prob,
            # brightmart's layout: E -> H inside the embedding, even when E == H (its
            # word_embeddings_2 is always there)
            word_projection_size=config.hidden_size if before_sum else None,
            name="embeddings", dtype=dtype)
        self.embedding_projection = None
        # as the original: no E -> H when E == H
        if config.embedding_size != config.hidden_size and not before_sum:
            self.embedding_projection = keras.layers.Dense(
                config.hidden_size, kernel_initializer=truncated_normal(config.initializer_range),
                name="embedding_projection", dtype=dtype)

        self._schedule = sharing_schedule(config)
        attentions: dict[tuple, AttentionSublayer] = {}
        ffns: dict[tuple, FeedForwardSublayer] = {}
        blocks: dict[tuple, TransformerBlock] = {}
        for row in self._schedule:
            for attention_key, ffn_key in row:
                if attention_key not in attentions:
                    attentions[attention_key] = AttentionSublayer(
                        config.hidden_size, config.num_attention_heads, config.initializer_range,
                        config.attention_probs_dropout_prob, config.hidden_dropout_prob,
                        branches, name=f"attention_{_key_name(attention_key)}", dtype=dtype)
                if ffn_key not in ffns:
                    ffns[ffn_key] = FeedForwardSublayer(
                        config.hidden_size, config.intermediate_size, config.hidden_act,
                        config.initializer_range, config.hidden_dropout_prob, branches,
                        name=f"ffn_{_key_name(ffn_key)}", dtype=dtype)
                if (attention_key, ffn_key) not in blocks:
                    blocks[(attention_key, ffn_key)] = TransformerBlock(
                        attentions[attention_key], ffns[ffn_key],
                        name=f"block_{len(blocks)}", dtype=dtype)
        # Lists (not dicts with tuple keys) so that Keras tracks and saves them in order.
        self._block_keys = list(blocks)
        self.blocks = list(blocks.values())
        self.pooler = keras.layers.Dense(
            config.hidden_size, activation="tanh",
            kernel_initializer=truncated_normal(config.initializer_range),
            name="pooler", dtype=dtype)
        self.build()

    def build(self, input_shape=None):
        if self.built:
            return
        cfg = self.config
        self.embeddings.build()
        if self.embedding_projection is not None:
            self.embedding_projection.build((None, None, cfg.embedding_size))
        for block in self.blocks:
            block.build((None, None, cfg.hidden_size))
        self.pooler.build((None, cfg.hidden_size))
        self.built = True

    # ------------------------------------------------------------ structure
    def block(self, layer_index: int, inner_index: int = 0) -> TransformerBlock:
        """The block applied at depth `layer_index`, inner group `inner_index`."""
        key = self._schedule[layer_index][inner_index]
        return self.blocks[self._block_keys.index(key)]

    def distinct_blocks(self) -> list[TransformerBlock]:
        return list(self.blocks)

    def cut_branches(self) -> None:
        """Each distinct sublayer's `cut_branches()`: its weights as they stand now cut
        into the encoder's `branches` (once loaded; nothing with one branch)."""
        sublayers = {id(s): s for block in self.blocks for s in (block.attention, block.ffn)}
        for sublayer in sublayers.values():  # a shared sublayer is cut once
            sublayer.cut_branches()

    def tied_decoder(self) -> tuple:
        """What a masked-LM head decodes with (`MaskedLMHead`'s call): the word table
        [V,E] and the embedding's word projection [E,H] ("before_sum"; else None)."""
        projection = self.embeddings.word_projection
        return (self.embeddings.word_embeddings.embeddings,
                None if projection is None else projection.kernel)

    # ------------------------------------------------------------- forward
    def call(self, inputs, training=None, pooled_only=False):
        """`pooled_only`: return `{"pooled_output"}` alone, computing the last block for
        the first position only (what the pooler reads; equal to the full call's)."""
        missing = [name for name in INPUT_NAMES if name not in inputs]
        if missing:
            raise ValueError(f"AlbertEncoder inputs lack {missing}; got {sorted(inputs)}")
        word_ids = ops.cast(inputs["input_word_ids"], "int32")
        type_ids = ops.cast(inputs["input_type_ids"], "int32")
        x = self.embeddings(word_ids, type_ids, training=training)  # [B,T,E] ([B,T,H] before_sum)
        if self.embedding_projection is not None:
            x = self.embedding_projection(x)  # [B,T,H]
        bias = attention_bias_from_mask(inputs["input_mask"], self.compute_dtype)  # [B,1,1,T]
        outputs = []
        last = (len(self._schedule) - 1, len(self._schedule[-1]) - 1)
        for layer_index, row in enumerate(self._schedule):
            for inner_index in range(len(row)):
                block = self.block(layer_index, inner_index)
                first_only = pooled_only and (layer_index, inner_index) == last
                if self.remat and training:  # keep x, recompute the block for its gradient
                    x = keras.remat(lambda h, b, block=block, first_only=first_only: block(
                        h, b, training=True, first_token_only=first_only))(x, bias)
                else:
                    x = block(x, bias, training=training, first_token_only=first_only)
            outputs.append(x)
        pooled = self.pooler(x[:, 0, :])  # [B,H]
        if pooled_only:
            return {"pooled_output": pooled}
        return {"sequence_output": x, "pooled_output": pooled,
                "encoder_outputs": ops.stack(outputs, axis=0)}  # [L,B,T,H]

    @classmethod
    def from_preset(cls, path, load_weights: bool = True, **kwargs) -> AlbertEncoder:
        """The encoder of a checkpoint of any format `open_checkpoint` reads, with its
        tokenizer for `embed` when the checkpoint ships one (`seq_length`, `spm_model`
        as for the task models' from_preset).

        Example:
            >>> encoder = AlbertEncoder.from_preset("albert_base_v2/")
            >>> encoder.export("exported/encoder")  # a SavedModel, any batch and length
            >>> encoder.embed(["a sentence"])  # [1, H], the export's mean_pooled
        """
        from albert_tf.checkpoint import presets  # deferred: it imports the layers
        return presets.encoder_from_preset(cls, path, load_weights, **kwargs)

    def options(self) -> dict[str, Any]:
        """The options it was built with that are not their defaults (a task model's
        config records them): none unless `remat` or `branches` was given."""
        return {**({"remat": True} if self.remat else {}),
                **({"branches": self.branches} if self.branches != 1 else {})}

    def get_config(self):
        return {"config": self.config.to_dict(), "remat": self.remat, **self.options(),
                **keras.layers.Layer.get_config(self)}

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        return cls(AlbertConfig.from_dict(config.pop("config")), **config)
