"""Writes tests/fixtures/embeddings/: sentence embeddings by Hugging Face, the reference
of the served `mean_pooled` output (SavedModel and .tflite).

  hf/                 a randomly initialised `transformers.AlbertModel` (every parameter
                      drawn at random, make_reference_fixtures.randomize; its TASK_CONFIG
                      sizes) with spiece.model and tokenizer_config.json
  mean_pooled.npz     texts, text pairs, HF's AlbertTokenizer ids (padded to the longest)
                      and their mean-pooled last_hidden_state [B,H]

The SentencePiece model is trained here on make_reference_fixtures' corpus with
SentencePiece's default normalisation (nmt_nfkc, as `albert-tf vocab` trains it): its
precompiled character map is what the LiteRT tokenizer composes with ALBERT's own
normalisation (the task fixtures' identity-normalisation models have none).

The embedding is sentence-transformers' mean pooling: the mean of `last_hidden_state`
over the positions `attention_mask` marks, computed in float64, stored as float32.

How to run (the venv of make_reference_fixtures.py: torch, transformers, sentencepiece):

    /work/refvenv/bin/python tools/make_embedding_fixtures.py
"""

from __future__ import annotations

import io
import os
import shutil
import sys

import numpy as np
import sentencepiece as spm
import torch
import transformers

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_reference_fixtures as reference  # noqa: E402 (beside this script)

ROOT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests",
                    "fixtures", "embeddings")
TEXTS = ["The cat sat on the mat.", "Paris is the capital of France!", "",
         "Rain fell on the quiet town, and the river rose over the old stone bridge."]
PAIRS = [("The cat sat on the mat.", "A cat was sitting."),
         ("Paris is the capital of France!", ""),
         ("Rain fell.", "The river rose over the old stone bridge by the town.")]


# Digits and commas: the LiteRT export's parity gate reads "1,000,000" (the digit-comma
# rule needs a "," piece to agree with the Python tokenizer).
NUMBERS = ["it costs 1,000,000, then 2,500, ok?", "in 1996, 42 of 3,150 people came."]


def train_spm(path: str) -> None:
    model = io.BytesIO()  # written from memory: no temporary path recorded in the model
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter((reference.SPM_CORPUS + NUMBERS) * 4), model_writer=model,
        model_type="unigram", vocab_size=reference.SPM_VOCAB_SIZE, character_coverage=1.0,
        hard_vocab_limit=False, pad_id=0, unk_id=1, bos_id=-1, eos_id=-1, pad_piece="<pad>",
        unk_piece="<unk>", control_symbols=["[CLS]", "[SEP]", "[MASK]"], num_threads=1,
        minloglevel=2, shuffle_input_sentence=False)
    with open(path, "wb") as f:
        f.write(model.getvalue())


def mean_pooled(model, tokenizer, first, second=None) -> dict[str, np.ndarray]:
    """The HF inputs and their mean-pooled last hidden states [B,H]."""
    out = tokenizer(first, second, padding="longest", return_token_type_ids=True,
                    return_tensors="pt")
    with torch.no_grad():
        hidden = model(input_ids=out["input_ids"], attention_mask=out["attention_mask"],
                       token_type_ids=out["token_type_ids"]).last_hidden_state
    mask = out["attention_mask"].unsqueeze(-1).double()
    pooled = (hidden * mask).sum(1) / torch.clamp(mask.sum(1), min=1e-9)
    return {"input_word_ids": out["input_ids"].numpy().astype(np.int32),
            "input_mask": out["attention_mask"].numpy().astype(np.int32),
            "input_type_ids": out["token_type_ids"].numpy().astype(np.int32),
            "mean_pooled": pooled.numpy().astype(np.float32)}


def main() -> int:
    shutil.rmtree(ROOT, ignore_errors=True)
    hf_dir = os.path.join(ROOT, "hf")
    os.makedirs(hf_dir)
    spm_path = os.path.join(ROOT, "spm.model")
    train_spm(spm_path)
    seed = reference.SEED + 7
    torch.manual_seed(seed)
    vocab_size = reference.sentencepiece_size(spm_path)
    config = transformers.AlbertConfig(vocab_size=vocab_size, **reference.TASK_CONFIG,
                                       hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                                       layer_norm_eps=1e-12)
    model = transformers.AlbertModel(config).eval()
    model.set_attn_implementation("eager")
    reference.randomize(model, torch.Generator().manual_seed(seed))
    model.save_pretrained(hf_dir, safe_serialization=True)
    tokenizer = reference.hf_tokenizer(spm_path, hf_dir)
    os.remove(spm_path)  # the copy in hf/ is the one
    model = model.double()
    single = mean_pooled(model, tokenizer, TEXTS)
    pairs = mean_pooled(model, tokenizer, [a for a, _ in PAIRS], [b for _, b in PAIRS])
    arrays = {"texts": np.array(TEXTS), "texts_a": np.array([a for a, _ in PAIRS]),
              "texts_b": np.array([b for _, b in PAIRS]),
              **single, **{f"pair_{k}": v for k, v in pairs.items()}}
    path = os.path.join(ROOT, "mean_pooled.npz")
    np.savez(path, **arrays)
    print(f"wrote {path}: {sorted(arrays)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
