"""Writes the Hugging Face reference fixtures that tests/test_checkpoint.py checks against.

The numbers our tests compare with come from an independent implementation:
Hugging Face `transformers.AlbertForPreTraining` (PyTorch), randomly initialised
with fixed seeds on tiny configs where every axis has its own size. For each
config this script writes, under tests/fixtures/<name>/:

  hf/config.json, hf/model.safetensors   the HF model, as `save_pretrained` writes it
  tf1/albert_config.json, tf1/model.ckpt-<step>.{index,data-00000-of-00001}, tf1/checkpoint
                                          the same weights under the original google-research
                                          ALBERT variable names, written from the HF tensors
                                          through TF1_FROM_HF below (not through albert_tf)
  reference.npz                           inputs (with padding) and HF's outputs

The two configs:
  grouped  V=37 E=8 H=12 A=3 I=20 L=5, 2 groups x 2 inner groups, HF hidden_act "gelu_new"
           (tanh GELU); its TF1 checkpoint also holds adam_m/adam_v slots and global_step.
  shared   V=41 E=6 H=16 A=2 I=24 L=3, everything shared, HF hidden_act "gelu" (exact erf
           GELU); its TF1 variables carry a TF-Hub style "module/" prefix.

Every parameter (LayerNorm gains and all biases included) is drawn at random so that a
mis-wired tensor changes the outputs; references are computed in float64 and stored as
float32.

How to run (needs torch, transformers and TensorFlow; the tests need none of torch):

    python3 -m venv /work/refvenv
    /work/refvenv/bin/pip install torch==2.13.0 transformers safetensors numpy "tensorflow==2.21.*"
    /work/refvenv/bin/python tools/make_reference_fixtures.py            # -> tests/fixtures
    /work/refvenv/bin/python tools/make_reference_fixtures.py --out DIR

The script is deterministic: the same library versions give the same bytes.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys

import numpy as np
import torch
import transformers

CONFIGS = {
    "grouped": dict(vocab_size=37, embedding_size=8, hidden_size=12, num_hidden_layers=5,
                    num_hidden_groups=2, inner_group_num=2, num_attention_heads=3,
                    intermediate_size=20, max_position_embeddings=11, type_vocab_size=3,
                    hidden_act="gelu_new"),
    "shared": dict(vocab_size=41, embedding_size=6, hidden_size=16, num_hidden_layers=3,
                   num_hidden_groups=1, inner_group_num=1, num_attention_heads=2,
                   intermediate_size=24, max_position_embeddings=13, type_vocab_size=3,
                   hidden_act="gelu"),
}

# The HF hidden_act -> the name albert_config.json uses for it. The original code's "gelu"
# is the tanh approximation (HF "gelu_new"); the erf form has no original name, and
# albert-tf's config calls it "gelu_exact".
TF1_ACTIVATION = {"gelu_new": "gelu", "gelu": "gelu_exact"}

# How each fixture's TF1 checkpoint is written: (variable-name prefix, optimizer slots?, step).
TF1_VARIANTS = {"grouped": ("", True, 250), "shared": ("module/", False, 0)}

# Inputs: (batch, seq, masked positions, real lengths per row). Rows are padded after
# their real length (input_mask 0, word id 0).
INPUTS = {"grouped": (2, 7, 3, (7, 4)), "shared": (3, 9, 4, (9, 5, 2))}

SEED = 20240531

# --------------------------------------------------------------------------------------
# The documented correspondence between the original TF1 variable names and HF keys.
# Each row: (TF1 name, HF key, transform from the HF tensor to the TF1 tensor).
# "T": nn.Linear weights are [out, in]; TF1 dense kernels are [in, out].
# "=": same layout. SOP output_weights is [2, H] in both (TF1 multiplies by its transpose).
# --------------------------------------------------------------------------------------

def tf1_from_hf_table(num_groups: int, inner_group_num: int) -> list[tuple[str, str, str]]:
    table = [
        ("bert/embeddings/word_embeddings", "albert.embeddings.word_embeddings.weight", "="),
        ("bert/embeddings/position_embeddings",
         "albert.embeddings.position_embeddings.weight", "="),
        ("bert/embeddings/token_type_embeddings",
         "albert.embeddings.token_type_embeddings.weight", "="),
        ("bert/embeddings/LayerNorm/gamma", "albert.embeddings.LayerNorm.weight", "="),
        ("bert/embeddings/LayerNorm/beta", "albert.embeddings.LayerNorm.bias", "="),
        ("bert/encoder/embedding_hidden_mapping_in/kernel",
         "albert.encoder.embedding_hidden_mapping_in.weight", "T"),
        ("bert/encoder/embedding_hidden_mapping_in/bias",
         "albert.encoder.embedding_hidden_mapping_in.bias", "="),
        ("bert/pooler/dense/kernel", "albert.pooler.weight", "T"),
        ("bert/pooler/dense/bias", "albert.pooler.bias", "="),
        ("cls/predictions/transform/dense/kernel", "predictions.dense.weight", "T"),
        ("cls/predictions/transform/dense/bias", "predictions.dense.bias", "="),
        ("cls/predictions/transform/LayerNorm/gamma", "predictions.LayerNorm.weight", "="),
        ("cls/predictions/transform/LayerNorm/beta", "predictions.LayerNorm.bias", "="),
        ("cls/predictions/output_bias", "predictions.bias", "="),
        ("cls/seq_relationship/output_weights", "sop_classifier.classifier.weight", "="),
        ("cls/seq_relationship/output_bias", "sop_classifier.classifier.bias", "="),
    ]
    block = [  # (TF1 suffix, HF suffix, transform) within one inner group / albert layer
        ("attention_1/self/query/kernel", "attention.query.weight", "T"),
        ("attention_1/self/query/bias", "attention.query.bias", "="),
        ("attention_1/self/key/kernel", "attention.key.weight", "T"),
        ("attention_1/self/key/bias", "attention.key.bias", "="),
        ("attention_1/self/value/kernel", "attention.value.weight", "T"),
        ("attention_1/self/value/bias", "attention.value.bias", "="),
        ("attention_1/output/dense/kernel", "attention.dense.weight", "T"),
        ("attention_1/output/dense/bias", "attention.dense.bias", "="),
        ("LayerNorm/gamma", "attention.LayerNorm.weight", "="),
        ("LayerNorm/beta", "attention.LayerNorm.bias", "="),
        ("ffn_1/intermediate/dense/kernel", "ffn.weight", "T"),
        ("ffn_1/intermediate/dense/bias", "ffn.bias", "="),
        ("ffn_1/intermediate/output/dense/kernel", "ffn_output.weight", "T"),
        ("ffn_1/intermediate/output/dense/bias", "ffn_output.bias", "="),
        ("LayerNorm_1/gamma", "full_layer_layer_norm.weight", "="),
        ("LayerNorm_1/beta", "full_layer_layer_norm.bias", "="),
    ]
    for g in range(num_groups):
        for i in range(inner_group_num):
            tf1 = f"bert/encoder/transformer/group_{g}/inner_group_{i}/"
            hf = f"albert.encoder.albert_layer_groups.{g}.albert_layers.{i}."
            table += [(tf1 + a, hf + b, t) for a, b, t in block]
    return table


def randomize(model: torch.nn.Module, generator: torch.Generator) -> None:
    """Draws every parameter at random, so that LayerNorm gains and biases matter too."""
    with torch.no_grad():
        for name, p in model.named_parameters():  # tied parameters are listed once
            noise = torch.randn(p.shape, generator=generator, dtype=torch.float64)
            if "LayerNorm" in name or "layer_norm" in name:
                value = (1.0 if name.endswith("weight") else 0.0) + 0.2 * noise
            elif name.endswith("bias"):
                value = 0.2 * noise
            else:
                value = 0.3 * noise
            p.copy_(value.to(p.dtype))


def make_inputs(name: str, vocab_size: int, type_vocab_size: int, rng: np.random.Generator):
    batch, seq, num_masked, lengths = INPUTS[name]
    mask = np.zeros((batch, seq), np.int32)
    for row, n in enumerate(lengths):
        mask[row, :n] = 1
    ids = rng.integers(1, vocab_size, size=(batch, seq)).astype(np.int32) * mask
    types = rng.integers(0, type_vocab_size, size=(batch, seq)).astype(np.int32) * mask
    # Masked positions lie among the real tokens; short rows are padded with position 0,
    # as the original pretraining data pads them.
    positions = np.zeros((batch, num_masked), np.int32)
    for row, n in enumerate(lengths):
        chosen = np.sort(rng.choice(n, size=min(n, num_masked), replace=False))
        positions[row, :len(chosen)] = chosen
    return {"input_word_ids": ids, "input_mask": mask, "input_type_ids": types,
            "masked_lm_positions": positions}


def reference_outputs(model, inputs) -> dict[str, np.ndarray]:
    """HF outputs in float64, under albert-tf's output names."""
    model = model.double().eval()
    with torch.no_grad():
        kw = dict(input_ids=torch.from_numpy(inputs["input_word_ids"]).long(),
                  attention_mask=torch.from_numpy(inputs["input_mask"]).long(),
                  token_type_ids=torch.from_numpy(inputs["input_type_ids"]).long())
        base = model.albert(**kw)
        out = model(**kw)
    positions = torch.from_numpy(inputs["masked_lm_positions"]).long()  # [B,P]
    logits = out.prediction_logits  # [B,T,V]
    gathered = torch.gather(logits, 1, positions[:, :, None].expand(-1, -1, logits.shape[-1]))
    result = {"sequence_output": base.last_hidden_state, "pooled_output": base.pooler_output,
              "mlm_logits": gathered, "sop_logits": out.sop_logits}
    model.float()
    return {k: v.numpy().astype(np.float32) for k, v in result.items()}


def write_tf1(directory: str, hf_config: dict, state: dict[str, torch.Tensor],
              prefix: str, with_slots: bool, step: int) -> None:
    """Writes an original-format TF1 checkpoint whose keys are the original variable names."""
    import tensorflow as tf

    table = tf1_from_hf_table(hf_config["num_hidden_groups"], hf_config["inner_group_num"])
    names, tensors = [], []
    rng = np.random.default_rng(SEED + 7)
    for tf1_name, hf_key, transform in table:
        value = state[hf_key].detach().numpy()
        value = value.T if transform == "T" else value
        names.append(prefix + tf1_name)
        tensors.append(np.ascontiguousarray(value, np.float32))
        if with_slots:  # what the original optimizer leaves next to each variable
            for slot in ("adam_m", "adam_v"):
                names.append(f"{prefix}{tf1_name}/{slot}")
                tensors.append(rng.standard_normal(value.shape).astype(np.float32))
    if with_slots:
        names.append(prefix + "global_step")
        tensors.append(np.array(step, np.int64))
    ckpt = os.path.join(directory, f"model.ckpt-{step}")
    tf.raw_ops.SaveV2(prefix=ckpt, tensor_names=names, shape_and_slices=[""] * len(names),
                      tensors=[tf.constant(t) for t in tensors])
    with open(os.path.join(directory, "checkpoint"), "w", encoding="utf-8") as f:
        f.write(f'model_checkpoint_path: "model.ckpt-{step}"\n'
                f'all_model_checkpoint_paths: "model.ckpt-{step}"\n')
    original = {k: hf_config[k] for k in (
        "vocab_size", "embedding_size", "hidden_size", "num_hidden_layers", "num_hidden_groups",
        "inner_group_num", "num_attention_heads", "intermediate_size", "hidden_dropout_prob",
        "attention_probs_dropout_prob", "max_position_embeddings", "type_vocab_size",
        "initializer_range")}
    original["hidden_act"] = TF1_ACTIVATION[hf_config["hidden_act"]]
    with open(os.path.join(directory, "albert_config.json"), "w", encoding="utf-8") as f:
        json.dump(original, f, indent=2, sort_keys=True)
        f.write("\n")
    # The check the issue asks for: the checkpoint keys are the original names.
    stored = tf.train.load_checkpoint(ckpt).get_variable_to_shape_map()
    if sorted(stored) != sorted(names):
        raise RuntimeError(f"{ckpt}: stored names differ from the table")


def make_fixture(name: str, root: str) -> None:
    torch.manual_seed(SEED)
    generator = torch.Generator().manual_seed(SEED + len(name))
    config = transformers.AlbertConfig(**CONFIGS[name], hidden_dropout_prob=0.0,
                                       attention_probs_dropout_prob=0.0,
                                       classifier_dropout_prob=0.0, layer_norm_eps=1e-12)
    model = transformers.AlbertForPreTraining(config).eval()
    model.set_attn_implementation("eager")  # the plain softmax path
    randomize(model, generator)
    # The MLM decoder is tied to the word table and its bias to predictions.bias.
    assert model.predictions.decoder.weight.data_ptr() == \
        model.albert.embeddings.word_embeddings.weight.data_ptr()

    out_dir = os.path.join(root, name)
    shutil.rmtree(out_dir, ignore_errors=True)
    hf_dir, tf1_dir = os.path.join(out_dir, "hf"), os.path.join(out_dir, "tf1")
    os.makedirs(tf1_dir)
    model.save_pretrained(hf_dir, safe_serialization=True)
    hf_config = json.load(open(os.path.join(hf_dir, "config.json"), encoding="utf-8"))
    write_tf1(tf1_dir, hf_config, model.state_dict(), *TF1_VARIANTS[name])

    rng = np.random.default_rng(SEED + 3 + len(name))
    inputs = make_inputs(name, config.vocab_size, config.type_vocab_size, rng)
    outputs = reference_outputs(model, inputs)
    np.savez(os.path.join(out_dir, "reference.npz"), **inputs, **outputs)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                           "tests", "fixtures")
    parser.add_argument("--out", default=default, help="fixture root (default: tests/fixtures)")
    args = parser.parse_args(argv)
    torch.use_deterministic_algorithms(True)
    for name in CONFIGS:
        make_fixture(name, args.out)
        print(f"wrote {os.path.join(args.out, name)}")
    print(f"torch {torch.__version__}, transformers {transformers.__version__}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
