"""brightmart/albert_zh checkpoints written in the tests, and an independent NumPy
reference of its modeling.py / run_pretraining.py math.

The variable names and shapes are the real albert_tiny's
(tests/data/real/brightmart_albert_zh/albert_tiny_variables.tsv); `write_checkpoint`
writes them as a TF1 bundle (`albert_model.ckpt`, as its releases name it) with
small random weights, each real size replaced by a small one (`TINY_SIZES`) unless
the real shapes are asked for. The reference is written from the math of brightmart's
modeling.py (factorized lookup, then positions and token types at width H, contrib
LayerNorm with epsilon 1e-12, tanh GELU, the -10000 attention adder, one shared
block) and its run_pretraining.py heads, not from albert-tf's layers.
"""

from __future__ import annotations

import json
import math
import os
import shutil

import numpy as np

from tests.helpers.paths import REPO

REAL = os.path.join(REPO, "tests", "data", "real", "brightmart_albert_zh")
VARIABLES = os.path.join(REAL, "albert_tiny_variables.tsv")
TINY_CONFIG = os.path.join(REAL, "albert_config_tiny.json")
CONFIG_NAME = "albert_config_tiny.json"  # what the albert_tiny_zh release ships
PREFIX_NAME = "albert_model.ckpt"

# A small vocabulary of our own (the real one, 21,128 lines: paths.REAL_CHINESE_VOCAB):
# BERT's special tokens, Chinese characters, ## pieces, a few Latin words.
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "，", "。", "？",
         "我", "你", "他", "是", "的", "好", "中", "国", "人", "学", "生", "天", "气",
         "很", "今", "明", "北", "京", "上", "海", "喜", "欢", "读", "书",
         "a", "##b", "the", "cat", "##s"]
# The real albert_tiny's sizes -> small ones, each axis a different size.
REAL_SIZES = {"vocab_size": 21128, "embedding_size": 128, "hidden_size": 312,
              "intermediate_size": 1248, "max_position_embeddings": 512}
TINY_SIZES = {"vocab_size": len(VOCAB), "embedding_size": 8, "hidden_size": 12,
              "intermediate_size": 20, "max_position_embeddings": 40}
TINY_HEADS, TINY_LAYERS = 3, 5


def real_shapes() -> dict[str, tuple[int, ...]]:
    """The real albert_tiny variable list: name -> shape."""
    shapes = {}
    with open(VARIABLES, encoding="utf-8") as f:
        for line in f:
            if line.startswith("#") or not line.strip():
                continue
            name, _, shape = line.rstrip("\n").split("\t")
            shapes[name] = tuple(int(n) for n in shape.split(","))
    return shapes


def config_dict(real: bool = False) -> dict:
    """brightmart's albert_config_tiny.json, its sizes shrunk unless `real`."""
    with open(TINY_CONFIG, encoding="utf-8") as f:
        values = json.load(f)
    if not real:
        values.update(TINY_SIZES, num_attention_heads=TINY_HEADS, num_hidden_layers=TINY_LAYERS)
    return values


def shapes_for(config: dict) -> dict[str, tuple[int, ...]]:
    """The real variable list with each real size replaced by `config`'s."""
    sizes = {REAL_SIZES[k]: config[k] for k in REAL_SIZES}
    return {name: tuple(sizes.get(n, n) for n in shape) for name, shape in real_shapes().items()}


def random_weights(shapes: dict, seed: int = 0, stddev: float = 0.2) -> dict[str, np.ndarray]:
    """Non-uniform float32 weights: LayerNorm gammas near 1, everything else
    ~N(0, stddev) (the real sizes take brightmart's initializer_range, 0.02: wider
    weights over 312 dimensions saturate the softmaxes and the tanh)."""
    rng = np.random.default_rng(seed)
    weights = {}
    for name, shape in sorted(shapes.items()):
        value = rng.normal(0.0, stddev, shape)
        if name.endswith("/gamma"):
            value = 1.0 + 0.1 * value
        weights[name] = value.astype(np.float32)
    return weights


def write_bundle(prefix: str, weights: dict[str, np.ndarray]) -> None:
    """A TF1 tensor bundle holding exactly `weights` under their names."""
    import tensorflow as tf  # deferred: only the tests that write TF1 files need it

    names = sorted(weights)
    tf.raw_ops.SaveV2(prefix=prefix, tensor_names=names, shape_and_slices=[""] * len(names),
                      tensors=[tf.constant(weights[n]) for n in names])


def write_checkpoint(directory, weights: dict | None = None, config: dict | None = None,
                     vocab: list[str] | str | None = None, seed: int = 0) -> dict[str, np.ndarray]:
    """A brightmart/albert_zh release's directory: albert_config_tiny.json,
    albert_model.ckpt.{index,data-*}, its `checkpoint` file and vocab.txt (`vocab`: its
    tokens, or a vocab.txt to copy; default VOCAB). Returns the weights written (random
    for `config`'s shapes unless given)."""
    directory = str(directory)
    os.makedirs(directory, exist_ok=True)
    config = config_dict() if config is None else config
    if weights is None:
        real = config["hidden_size"] == REAL_SIZES["hidden_size"]
        weights = random_weights(shapes_for(config), seed, config["initializer_range"] if real
                                 else 0.2)
    write_bundle(os.path.join(directory, PREFIX_NAME), weights)
    with open(os.path.join(directory, "checkpoint"), "w", encoding="utf-8") as f:
        f.write(f'model_checkpoint_path: "{PREFIX_NAME}"\n'
                f'all_model_checkpoint_paths: "{PREFIX_NAME}"\n')
    with open(os.path.join(directory, CONFIG_NAME), "w", encoding="utf-8") as f:
        json.dump(config, f, indent=2)
    if isinstance(vocab, str):
        shutil.copyfile(vocab, os.path.join(directory, "vocab.txt"))
    else:
        with open(os.path.join(directory, "vocab.txt"), "w", encoding="utf-8") as f:
            f.write("".join(token + "\n" for token in (VOCAB if vocab is None else vocab)))
    return weights


# ------------------------------------------------------------------ the reference
def _layer_norm(x, prefix, w):
    mean = x.mean(-1, keepdims=True)
    variance = ((x - mean) ** 2).mean(-1, keepdims=True)  # tf.nn.moments: biased
    return (x - mean) / np.sqrt(variance + 1e-12) * w[prefix + "/gamma"] + w[prefix + "/beta"]


def _gelu(x):  # modeling.py's: the tanh approximation
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def _dense(x, prefix, w):
    return x @ w[prefix + "/kernel"] + w[prefix + "/bias"]


def reference(weights: dict, config: dict, ids, mask, types, positions=None) -> dict:
    """brightmart's BertModel (post-LN) and pretraining heads, in float64 NumPy.

    Returns sequence_output [B,T,H], pooled_output [B,H], and with `positions` [B,P]
    mlm_logits [B,P,V] and sop_logits [B,2].
    """
    w = {k: np.asarray(v, np.float64) for k, v in weights.items()}
    ids, mask, types = (np.asarray(a) for a in (ids, mask, types))
    batch, length = ids.shape
    heads = config["num_attention_heads"]
    size = config["hidden_size"] // heads
    # embedding_lookup_factorized: [B,T,E] @ [E,H]; embedding_postprocessor at width H
    x = w["bert/embeddings/word_embeddings"][ids] @ w["bert/embeddings/word_embeddings_2"]
    x = x + w["bert/embeddings/token_type_embeddings"][types]
    x = x + w["bert/embeddings/position_embeddings"][:length][None]
    x = _layer_norm(x, "bert/embeddings/LayerNorm", w)
    adder = (1.0 - mask[:, None, None, :].astype(np.float64)) * -10000.0  # [B,1,1,T]
    block = "bert/encoder/layer_shared/"

    def split(t):  # [B,T,H] -> [B,N,T,D]
        return t.reshape(batch, length, heads, size).transpose(0, 2, 1, 3)

    for _ in range(config["num_hidden_layers"]):
        q, k, v = (split(_dense(x, block + f"attention/self/{n}", w))
                   for n in ("query", "key", "value"))
        scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(size) + adder
        probs = np.exp(scores - scores.max(-1, keepdims=True))
        probs /= probs.sum(-1, keepdims=True)
        context = (probs @ v).transpose(0, 2, 1, 3).reshape(batch, length, heads * size)
        attended = _layer_norm(_dense(context, block + "attention/output/dense", w) + x,
                               block + "attention/output/LayerNorm", w)
        inner = _gelu(_dense(attended, block + "intermediate/dense", w))
        x = _layer_norm(_dense(inner, block + "output/dense", w) + attended,
                        block + "output/LayerNorm", w)
    pooled = np.tanh(_dense(x[:, 0], "bert/pooler/dense", w))
    out = {"sequence_output": x, "pooled_output": pooled}
    if positions is not None:
        picked = np.take_along_axis(x, np.asarray(positions)[..., None], axis=1)  # [B,P,H]
        t = _layer_norm(_gelu(_dense(picked, "cls/predictions/transform/dense", w)),
                        "cls/predictions/transform/LayerNorm", w)
        projected = t @ w["bert/embeddings/word_embeddings_2"].T  # [B,P,E]
        out["mlm_logits"] = (projected @ w["bert/embeddings/word_embeddings"].T
                             + w["cls/predictions/output_bias"])
        out["sop_logits"] = (pooled @ w["cls/seq_relationship/output_weights"].T
                             + w["cls/seq_relationship/output_bias"])
    return out
