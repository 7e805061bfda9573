"""Writes the Hugging Face reference fixtures that tests/checkpoint/test_checkpoint.py checks against.

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

It also writes tests/fixtures/tasks/<head>/ for the fine-tuned heads (HF sequence
classification single-/multi-label/regression, token classification, QA, multiple choice,
masked LM; the original run_classifier, run_squad_v1, run_squad_v2 and run_race
checkpoints): see the "Task heads" section below and tests/fixtures/README.md. Those need
sentencepiece too (a tiny SentencePiece model is trained here, and HF's AlbertTokenizer
tokenizes the fixed texts with it).

How to run (needs torch, transformers and TensorFlow; the tests need none of torch):

    python3 -m venv /work/refvenv
    /work/refvenv/bin/pip install torch==2.13.0 transformers safetensors numpy "tensorflow==2.21.*" \
        sentencepiece protobuf
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
import tempfile

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
    write_tf1_files(directory, hf_config, names, tensors, step)


def write_tf1_files(directory: str, hf_config: dict, names: list[str], tensors: list,
                    step: int) -> None:
    """model.ckpt-STEP (the tensors under the names), its `checkpoint` state file and
    albert_config.json; checks that the stored keys are exactly `names`."""
    import tensorflow as tf

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


# ======================================================================================
# Task heads: fine-tuned checkpoints with their heads (tests/checkpoint/test_checkpoint_tasks.py,
# tests/serving/test_foreign.py). Written under tests/fixtures/tasks/<name>/:
#
#   hf/      config.json (architectures, id2label, problem_type), model.safetensors,
#            spiece.model, tokenizer_config.json                (not for squad_v2_beam)
#   tf1/     the original script's fine-tuned checkpoint of the same weights: encoder
#            under the original names, head under the script's variable names (see
#            TF1_HEADS), written through the tables here (not through albert_tf)
#   reference.npz   texts, HF-tokenizer ids (AlbertTokenizer on spiece.model), and the
#            reference outputs in float64 (stored as float32)
#
# The run_squad_v2 head has no HF counterpart: its reference is `beam_head_reference`,
# a NumPy transcription of the original's equations (XLNet's SQuAD head).
# ======================================================================================
TASK_CONFIG = dict(embedding_size=6, hidden_size=10, num_hidden_layers=3, num_hidden_groups=1,
                   inner_group_num=1, num_attention_heads=2, intermediate_size=14,
                   max_position_embeddings=64, type_vocab_size=2, hidden_act="gelu_new")
SPM_VOCAB_SIZE = 100
SPM_CORPUS = [
    "the cat sat on the mat.", "a dog ran in the park.", "paris is the capital of france.",
    "who wrote the book about the old sea?", "the river flows to the sea in spring.",
    "she bought three red apples and a green pear.", "what is the capital of france?",
    "rain fell on the quiet town all night.", "the king and the queen ate bread.",
    "music plays in the hall after dinner.", "birds sing when the sun rises.",
    "he reads a long letter from his sister.", "the train leaves at nine in the morning.",
    "children play games in the garden.", "where does the river go?",
]
TEXTS = ["The cat sat on the mat.", "Paris is the capital of France!",
         "Rain fell on the quiet town."]
QUESTIONS = ["Where did the cat sit?", "What is the capital of France?",
             "Who ate bread?"]
CONTEXTS = ["The cat sat on the mat in the garden.",
            "Paris is the capital of France and the river flows to the sea.",
            "The king and the queen ate bread after dinner."]
CHOICE_CONTEXTS = ["The cat sat on the mat.", "The train leaves at nine."]
CHOICE_OPTIONS = [["a dog", "the mat", "a park"], ["in the morning", "at night", "after dinner"]]
MASK_TEXTS = ["the cat sat on the [MASK].", "paris is the [MASK] of france."]

# (name, HF class, extra HF config, TF1 head variables (TF1 name, HF key) or None)
TASK_HEADS = {
    "seq_single": ("AlbertForSequenceClassification",
                   dict(id2label={0: "negative", 1: "neutral", 2: "positive"}),
                   (("output_weights", "classifier.weight"), ("output_bias", "classifier.bias"))),
    "seq_multi": ("AlbertForSequenceClassification",
                  dict(id2label={0: "sports", 1: "politics", 2: "science", 3: "art"},
                       problem_type="multi_label_classification"), None),
    "seq_regression": ("AlbertForSequenceClassification", dict(num_labels=1),
                       (("output_weights", "classifier.weight"),
                        ("output_bias", "classifier.bias"))),
    "token": ("AlbertForTokenClassification",
              dict(id2label={0: "O", 1: "B-PER", 2: "I-PER", 3: "B-LOC", 4: "I-LOC"}), None),
    "qa": ("AlbertForQuestionAnswering", dict(),
           (("cls/squad/output_weights", "qa_outputs.weight"),
            ("cls/squad/output_bias", "qa_outputs.bias"))),
    "choice": ("AlbertForMultipleChoice", dict(),
               (("output_weights", "classifier.weight"), ("output_bias", "classifier.bias"))),
    "mlm": ("AlbertForMaskedLM", dict(), None),
    "squad_v2_beam": ("AlbertForQuestionAnswering", dict(), "beam"),
}
# run_squad_v2's head: (TF1 name, shape as a function of H); tf.layers.dense kernels [in, out].
BEAM_VARIABLES = (("start_logits/dense/kernel", lambda h: (h, 1)),
                  ("start_logits/dense/bias", lambda h: (1,)),
                  ("end_logits/dense_0/kernel", lambda h: (2 * h, h)),
                  ("end_logits/dense_0/bias", lambda h: (h,)),
                  ("end_logits/LayerNorm/gamma", lambda h: (h,)),
                  ("end_logits/LayerNorm/beta", lambda h: (h,)),
                  ("end_logits/dense_1/kernel", lambda h: (h, 1)),
                  ("end_logits/dense_1/bias", lambda h: (1,)),
                  ("answer_class/dense_0/kernel", lambda h: (2 * h, h)),
                  ("answer_class/dense_0/bias", lambda h: (h,)),
                  ("answer_class/dense_1/kernel", lambda h: (h, 1)))
BEAM_N_TOP = (5, 5)  # run_squad_v2's start_n_top, end_n_top defaults
MAX_ANSWER_LENGTH = 30  # run_squad's max_answer_length


def train_spm(directory: str) -> str:
    import io

    import sentencepiece as spm

    os.makedirs(directory, exist_ok=True)
    model = io.BytesIO()  # written from memory: no temporary path recorded in the model
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(SPM_CORPUS * 4), model_writer=model, model_type="unigram",
        vocab_size=SPM_VOCAB_SIZE, character_coverage=1.0, hard_vocab_limit=False,
        pad_id=0, unk_id=1, bos_id=-1, eos_id=-1, pad_piece="<pad>", unk_piece="<unk>",
        control_symbols=["[CLS]", "[SEP]", "[MASK]"], num_threads=1, minloglevel=2,
        shuffle_input_sentence=False,
        # Text is normalised before SentencePiece (NFKD, lowercase) by both tokenizers;
        # no precompiled normalisation table keeps the model a few kB.
        normalization_rule_name="identity")
    path = os.path.join(directory, "spm.model")
    with open(path, "wb") as f:
        f.write(model.getvalue())
    return path


TOKENIZER_CONFIG = {"do_lower_case": True, "keep_accents": False, "remove_space": True,
                    "tokenizer_class": "AlbertTokenizer"}


def hf_tokenizer(spm_path: str, directory: str):
    """HF's AlbertTokenizer as a hub directory gives it: spiece.model + tokenizer_config.json."""
    os.makedirs(directory, exist_ok=True)
    shutil.copyfile(spm_path, os.path.join(directory, "spiece.model"))
    with open(os.path.join(directory, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(TOKENIZER_CONFIG, f, indent=2)
        f.write("\n")
    return transformers.AlbertTokenizer.from_pretrained(directory)


def encode(tokenizer, first, second=None, length=None):
    out = tokenizer(first, second, padding="max_length" if length else "longest",
                    max_length=length, return_offsets_mapping=second is not None,
                    return_token_type_ids=True,
                    return_tensors="np")
    ids = {"input_word_ids": out["input_ids"].astype(np.int32),
           "input_mask": out["attention_mask"].astype(np.int32),
           "input_type_ids": out["token_type_ids"].astype(np.int32)}
    if second is not None:
        ids["offsets"] = out["offset_mapping"].astype(np.int32)
    return ids


def layer_norm(x, gamma, beta, eps=1e-12):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * gamma + beta


def log_softmax(x, axis=-1):
    m = x.max(axis, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis, keepdims=True))


def beam_head_reference(seq, p_mask, w, n_top=BEAM_N_TOP):
    """run_squad_v2's inference graph in NumPy (float64): seq [B,T,H], p_mask [B,T]."""
    k1, k2 = n_top
    start = (seq @ w["start_logits/dense/kernel"])[..., 0] + w["start_logits/dense/bias"][0]
    start_masked = start * (1 - p_mask) - 1e30 * p_mask
    start_lp = log_softmax(start_masked)
    start_index = np.argsort(-start_lp, axis=-1, kind="stable")[:, :k1]  # [B,k1]
    start_top = np.take_along_axis(start_lp, start_index, -1)
    start_features = np.take_along_axis(seq, start_index[..., None], 1)  # [B,k1,H]
    b, t, h = seq.shape
    end_input = np.concatenate([np.broadcast_to(seq[:, None], (b, k1, t, h)),
                                np.broadcast_to(start_features[:, :, None], (b, k1, t, h))], -1)
    x = np.tanh(end_input @ w["end_logits/dense_0/kernel"] + w["end_logits/dense_0/bias"])
    x = layer_norm(x, w["end_logits/LayerNorm/gamma"], w["end_logits/LayerNorm/beta"])
    end = (x @ w["end_logits/dense_1/kernel"])[..., 0] + w["end_logits/dense_1/bias"][0]
    end_masked = end * (1 - p_mask[:, None]) - 1e30 * p_mask[:, None]  # [B,k1,T]
    end_lp = log_softmax(end_masked)
    end_index = np.argsort(-end_lp, axis=-1, kind="stable")[..., :k2]  # [B,k1,k2]
    end_top = np.take_along_axis(end_lp, end_index, -1)
    start_p = np.exp(log_softmax(start_masked))
    start_feature = np.einsum("bt,bth->bh", start_p, seq)
    answer = np.concatenate([start_feature, seq[:, 0]], -1)
    answer = np.tanh(answer @ w["answer_class/dense_0/kernel"] + w["answer_class/dense_0/bias"])
    cls_logits = (answer @ w["answer_class/dense_1/kernel"])[:, 0]
    return {"start_top_log_probs": start_top, "start_top_index": start_index.astype(np.int32),
            "end_top_log_probs": end_top.reshape(b, k1 * k2),
            "end_top_index": end_index.reshape(b, k1 * k2).astype(np.int32),
            "cls_logits": cls_logits}


def squad_p_mask(inputs):
    """The original's p_mask for `[CLS] question [SEP] context [SEP] pad`: 0 on [CLS]
    and the context, 1 elsewhere."""
    p_mask = np.ones(inputs["input_mask"].shape)
    for row, (types, mask) in enumerate(zip(inputs["input_type_ids"], inputs["input_mask"])):
        length = int(mask.sum())
        p_mask[row, 0] = 0
        p_mask[row, :length - 1][types[:length - 1] == 1] = 0
    return p_mask


def beam_decode(out, inputs, max_answer_length=MAX_ANSWER_LENGTH):
    """The original's prediction for one window: the best start+end log-prob pair
    inside the context, as accumulate_predictions_v2 / write_predictions_v2."""
    k1, k2 = BEAM_N_TOP
    spans = []
    for row in range(len(out["cls_logits"])):
        types, length = inputs["input_type_ids"][row], int(inputs["input_mask"][row].sum())
        doc_start = int(np.argmax(types == 1))
        doc_end = length - 2  # the last context token
        best, span = -np.inf, (-1, -1)
        for i in range(k1):
            for j in range(k2):
                s = out["start_top_index"][row, i]
                e = out["end_top_index"][row, i * k2 + j]
                if s < doc_start or e > doc_end or e < s or e - s + 1 > max_answer_length:
                    continue
                score = out["start_top_log_probs"][row, i] + out["end_top_log_probs"][row,
                                                                                     i * k2 + j]
                if score > best:
                    best, span = score, (int(s), int(e))
        spans.append(span)
    return np.array(spans, np.int32)


def answer_text(context, offsets, span):
    s, e = span
    return context[offsets[s][0]:offsets[e][1]].strip() if s >= 0 else ""


def tf1_task_table(hf_config, state, heads):
    """(TF1 name, value) of a fine-tuned original checkpoint: encoder + pooler + head."""
    table = [(n, k, t) for n, k, t in tf1_from_hf_table(hf_config["num_hidden_groups"],
                                                        hf_config["inner_group_num"])
             if not n.startswith("cls/")]
    out = []
    for tf1_name, hf_key, transform in table:
        value = state[hf_key].detach().double().numpy()
        out.append((tf1_name, value.T if transform == "T" else value))
    # Head variables: the original stores output_weights [C, H] as HF's Linear does.
    out += [(tf1_name, state[hf_key].detach().double().numpy()) for tf1_name, hf_key in heads]
    return out


def save_tf1(directory, hf_config, variables, step=1000):
    os.makedirs(directory, exist_ok=True)
    names = [n for n, _ in variables] + ["global_step"]
    tensors = [np.asarray(v, np.float32) for _, v in variables] + [np.array(step, np.int64)]
    write_tf1_files(directory, hf_config, names, tensors, step)


def torch_inputs(inputs):
    return dict(input_ids=torch.from_numpy(inputs["input_word_ids"]).long(),
                attention_mask=torch.from_numpy(inputs["input_mask"]).long(),
                token_type_ids=torch.from_numpy(inputs["input_type_ids"]).long())


def task_reference(name, model, tokenizer):
    """Inputs (HF-tokenized) and HF's float64 outputs for one head."""
    model = model.double().eval()
    if name.startswith("seq") or name == "token":
        inputs = encode(tokenizer, TEXTS)
        with torch.no_grad():
            logits = model(**torch_inputs(inputs)).logits.numpy()
        return inputs, {"logits": logits}
    if name in ("qa", "squad_v2_beam"):
        inputs = encode(tokenizer, QUESTIONS, CONTEXTS)
        with torch.no_grad():
            if name == "qa":
                out = model(**torch_inputs(inputs))
                return inputs, {"start_logits": out.start_logits.numpy(),
                                "end_logits": out.end_logits.numpy()}
            seq = model.albert(**torch_inputs(inputs)).last_hidden_state.numpy()
        return inputs, {"sequence_output": seq}
    if name == "choice":
        flat = encode(tokenizer, [c for c, opts in zip(CHOICE_CONTEXTS, CHOICE_OPTIONS)
                                  for _ in opts], [o for opts in CHOICE_OPTIONS for o in opts])
        k = len(CHOICE_OPTIONS[0])
        inputs = {n: v.reshape(len(CHOICE_CONTEXTS), k, -1) for n, v in flat.items()
                  if n != "offsets"}
        with torch.no_grad():
            logits = model(**{n: v.reshape(len(CHOICE_CONTEXTS), k, -1) for n, v in
                              torch_inputs(flat).items()}).logits.numpy()
        return inputs, {"logits": logits}
    inputs = encode(tokenizer, MASK_TEXTS)  # mlm
    positions = np.stack([np.flatnonzero(row == tokenizer.mask_token_id)[:1]
                          for row in inputs["input_word_ids"]]).astype(np.int32)
    with torch.no_grad():
        logits = model(**torch_inputs(inputs)).logits.numpy()
    inputs["masked_lm_positions"] = positions
    return inputs, {"mlm_logits": np.take_along_axis(logits, positions[..., None], 1)}


def make_task_fixture(name, root, spm_path):
    arch, extra, heads = TASK_HEADS[name]
    seed = SEED + sum(map(ord, name))
    torch.manual_seed(seed)
    generator = torch.Generator().manual_seed(seed)
    config = transformers.AlbertConfig(vocab_size=sentencepiece_size(spm_path), **TASK_CONFIG,
                                       hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                                       classifier_dropout_prob=0.0, layer_norm_eps=1e-12,
                                       **extra)
    model = getattr(transformers, arch)(config).eval()
    model.set_attn_implementation("eager")
    randomize(model, generator)
    out_dir = os.path.join(root, "tasks", name)
    shutil.rmtree(out_dir, ignore_errors=True)
    os.makedirs(out_dir)
    hf_dir = os.path.join(out_dir, "hf")
    model.save_pretrained(hf_dir, safe_serialization=True)
    tokenizer = hf_tokenizer(spm_path, hf_dir)
    hf_config = json.load(open(os.path.join(hf_dir, "config.json"), encoding="utf-8"))
    state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    inputs, outputs = task_reference(name, model, tokenizer)
    if heads == "beam":  # no HF counterpart: TF1 only, NumPy reference
        shutil.rmtree(hf_dir)
        rng = np.random.default_rng(seed)
        h = config.hidden_size
        beam = {n: (1.0 if n.endswith("gamma") else 0.0) + 0.3 * rng.standard_normal(shape(h))
                for n, shape in BEAM_VARIABLES}
        pooler = {"albert.pooler.weight": torch.from_numpy(rng.standard_normal((h, h)) * 0.3),
                  "albert.pooler.bias": torch.from_numpy(rng.standard_normal(h) * 0.2)}
        variables = tf1_task_table(hf_config, {**state, **pooler}, ())
        save_tf1(os.path.join(out_dir, "tf1"), hf_config, variables + list(beam.items()))
        # As the released checkpoints ship it: the SentencePiece model beside the weights.
        shutil.copyfile(spm_path, os.path.join(out_dir, "tf1", "30k-clean.model"))
        seq = outputs.pop("sequence_output")
        outputs.update(beam_head_reference(seq, squad_p_mask(inputs), beam))
        inputs["spans"] = beam_decode(outputs, inputs)
        inputs["answers"] = np.array([answer_text(c, o, s) for c, o, s in zip(
            CONTEXTS, inputs["offsets"], inputs["spans"])])
    else:
        if heads is not None:
            if "albert.pooler.weight" not in state:  # run_squad_v1's graph has a pooler
                rng = np.random.default_rng(seed)
                h = config.hidden_size
                state["albert.pooler.weight"] = torch.from_numpy(rng.standard_normal((h, h)))
                state["albert.pooler.bias"] = torch.from_numpy(rng.standard_normal(h))
            save_tf1(os.path.join(out_dir, "tf1"), hf_config,
                     tf1_task_table(hf_config, state, heads))
    texts = {"seq_single": TEXTS, "seq_multi": TEXTS, "seq_regression": TEXTS, "token": TEXTS,
             "mlm": MASK_TEXTS}.get(name)
    extra_arrays = {"texts": np.array(texts)} if texts else {}
    if name in ("qa", "squad_v2_beam"):
        extra_arrays.update(questions=np.array(QUESTIONS), contexts=np.array(CONTEXTS))
    if name == "choice":
        extra_arrays.update(contexts=np.array(CHOICE_CONTEXTS), options=np.array(CHOICE_OPTIONS))
    np.savez(os.path.join(out_dir, "reference.npz"), **inputs, **extra_arrays,
             **{k: (v.astype(np.float32) if v.dtype == np.float64 else v)
                for k, v in outputs.items()})


def sentencepiece_size(spm_path):
    import sentencepiece as spm

    return spm.SentencePieceProcessor(model_file=spm_path).get_piece_size()


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
    with tempfile.TemporaryDirectory() as tmp:
        spm_path = train_spm(tmp)
        for name in TASK_HEADS:
            make_task_fixture(name, args.out, spm_path)
            print(f"wrote {os.path.join(args.out, 'tasks', name)}")
    print(f"torch {torch.__version__}, transformers {transformers.__version__}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
