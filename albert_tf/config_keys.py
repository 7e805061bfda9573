"""The keys of other implementations' config files, and what each means to AlbertConfig.

`AlbertConfig.from_dict` / `from_hf_dict` (`config.py`) read them: the keys ignored
because no released model uses what they describe, `ln_type`'s one accepted value, and
Hugging Face's activation names. No Keras, no TensorFlow.
"""

# Keys present in the released albert_config.json files (v1/v2) for experimental
# architectures that the released models never use. Accepted and ignored.
IGNORED_ORIGINAL_KEYS = frozenset(
    {"net_structure_type", "gap_size", "num_memory_blocks", "down_scale_factor",
     "layers_to_keep"}
)
# Keys of brightmart/albert_zh's configs that its modeling.py never reads (its pooler is
# the first token's dense + tanh, whatever pooler_* say). Accepted and ignored.
IGNORED_BRIGHTMART_KEYS = frozenset(
    {"directionality", "pooler_fc_size", "pooler_num_attention_heads", "pooler_num_fc_layers",
     "pooler_size_per_head", "pooler_type"}
)
# `ln_type` (the original's experimental key, and brightmart's): where each block's
# LayerNorms sit. Only "postln" (after each residual sum) is built; brightmart's
# xxlarge says "preln", which is refused, naming the file.
LN_TYPES = ("postln",)
# Every key of an original or brightmart config that is not an AlbertConfig field.
IGNORED_KEYS = IGNORED_ORIGINAL_KEYS | IGNORED_BRIGHTMART_KEYS | {"ln_type"}


def check_ln_type(value, where: str, error: type[Exception]) -> None:
    """Refuses an `ln_type` other than LN_TYPES' (absent or null: post-LN, as brightmart
    reads it), naming the value and `where` (" in FILE")."""
    if value is not None and value not in LN_TYPES:  # brightmart's xxlarge: pre-LN blocks
        raise error(f"ln_type={value!r}{where} is not supported: albert-tf builds the "
                    f"post-LayerNorm blocks of {', '.join(map(repr, LN_TYPES))} only")


# Keys of a Hugging Face AlbertConfig that describe HF's runtime, not the architecture.
IGNORED_HF_KEYS = frozenset(
    {"architectures", "model_type", "transformers_version", "torch_dtype", "dtype",
     "bos_token_id", "eos_token_id", "pad_token_id", "classifier_dropout_prob",
     "layer_norm_eps", "position_embedding_type", "id2label", "label2id", "output_past",
     "_name_or_path", "finetuning_task", "problem_type", "tie_word_embeddings",
     "use_cache", "return_dict", "output_hidden_states", "output_attentions",
     "is_decoder", "add_cross_attention", "chunk_size_feed_forward", "pruned_heads",
     "torchscript", "tokenizer_class", "prefix", "sep_token_id", "decoder_start_token_id",
     "task_specific_params", "num_labels", "gradient_checkpointing"}
)

# Hugging Face `hidden_act` names -> ours (numerics.ACTIVATIONS).
HF_ACTIVATIONS = {"gelu_new": "gelu", "gelu": "gelu_exact", "gelu_pytorch_tanh": "gelu",
                  "relu": "relu", "silu": "silu", "swish": "silu", "tanh": "tanh",
                  "linear": "linear"}
