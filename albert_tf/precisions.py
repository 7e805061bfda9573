"""The precision words: one word per meaning, for every command and file (no Keras, no TF).

Three vocabularies, each word meaning one thing:

  The task record's `precision` (and KerasHub presets'): the Keras dtype policy the
    model was trained under, `POLICIES`, Keras' own names (`bfloat16` computes and
    stores in bfloat16; `mixed_bfloat16` computes in it and keeps float32 variables).
  Training `--precision` (pretrain, finetune, demo, ablate): `auto`, chosen for the
    device (TPU mixed_bfloat16, GPU mixed_float16, CPU float32, or timed on one CPU:
    training/pretrain/precision.py); `float32`, `mixed_float16`, `mixed_bfloat16`, that
    Keras policy (`TRAINING_PRECISIONS`).
  `export --precision`: `as-trained`, bfloat16 when the record's policy computes in
    bfloat16, else float32; `float32`, `bfloat16`, the SavedModel's weights and matmuls
    cast whole (`EXPORT_PRECISIONS`).

Older spellings stay accepted, printed nowhere as a choice: training's `fp32`, `float16`,
`fp16`, `bfloat16`, `bf16` (the mixed policies: `TRAINING_ALIASES`), export's `auto`
(`as-trained`: `EXPORT_ALIASES`). Three of them mean another thing in another vocabulary
(`AMBIGUOUS`): training's `bfloat16` and `float16` are the mixed policies, not Keras'
pure ones nor export's whole cast; export's `auto` is "as trained", not training's "chosen
for the device". Each of those warns (once a process), naming the word to write instead.
"""

from __future__ import annotations

import logging
import types
from collections.abc import Mapping

__all__ = ["POLICIES", "AUTO", "TRAINING_PRECISIONS", "TRAINING_WORDS", "TRAINING_ALIASES",
           "AS_TRAINED", "EXPORT_PRECISIONS", "EXPORT_WORDS", "EXPORT_ALIASES",
           "training_precision", "export_precision", "served_dtype", "listed"]

# The Keras floating-point dtype policies a model may carry (the task record's field).
POLICIES = ("float32", "float16", "bfloat16", "mixed_float16", "mixed_bfloat16")

# Training: the policy chosen for the device (or timed), else the one named.
AUTO = "auto"
TRAINING_PRECISIONS = ("float32", "mixed_float16", "mixed_bfloat16")
TRAINING_WORDS = (AUTO, *TRAINING_PRECISIONS)
TRAINING_ALIASES: Mapping[str, str] = types.MappingProxyType({
    "fp32": "float32", "float16": "mixed_float16", "fp16": "mixed_float16",
    "bfloat16": "mixed_bfloat16", "bf16": "mixed_bfloat16"})

# Export: the served dtype read from the record, else the one named.
AS_TRAINED = "as-trained"
EXPORT_PRECISIONS = ("float32", "bfloat16")
EXPORT_WORDS = (AS_TRAINED, *EXPORT_PRECISIONS)
EXPORT_ALIASES: Mapping[str, str] = types.MappingProxyType({"auto": AS_TRAINED})
# Aliases whose word means something else in another vocabulary: (vocabulary, word) ->
# what it means elsewhere.
AMBIGUOUS: Mapping[tuple[str, str], str] = types.MappingProxyType({
    ("training", "bfloat16"): "Keras' pure bfloat16 policy, and export's whole bfloat16 cast",
    ("training", "float16"): "Keras' pure float16 policy",
    ("export", "auto"): "training's precision chosen for the device"})


def listed(words: tuple[str, ...]) -> str:
    """"a, b or c": how help and messages list a vocabulary (aliases never)."""
    return f"{', '.join(words[:-1])} or {words[-1]}"


_WARNED: set[tuple[str, str]] = set()


def _resolve(word: str, words: tuple[str, ...], aliases: Mapping[str, str], option: str,
             vocabulary: str) -> str:
    found = aliases.get(word, word)
    if found not in words:
        raise ValueError(f"{option}{word!r}: expected one of {listed(words)}")
    elsewhere = AMBIGUOUS.get((vocabulary, word))
    if elsewhere and (vocabulary, word) not in _WARNED:  # once a process: a word is
        _WARNED.add((vocabulary, word))                   # resolved at several stages
        logging.getLogger("albert_tf").warning(
            "%s%s means %s here (not %s); write %s", option, word, found, elsewhere, found)
    return found


def training_precision(word: str, option: str = "precision=") -> str:
    """A training `--precision` word, its alias resolved: "auto" or a TRAINING_PRECISIONS
    policy. Raises ValueError naming `option` (its prefix) and the words."""
    return _resolve(word, TRAINING_WORDS, TRAINING_ALIASES, option, "training")


def export_precision(word: str, option: str = "--precision ") -> str:
    """An `export --precision` word, its alias resolved: "as-trained", "float32" or
    "bfloat16". Raises ValueError naming `option` (its prefix) and the words."""
    return _resolve(word, EXPORT_WORDS, EXPORT_ALIASES, option, "export")


def served_dtype(word: str, trained: str | None) -> str:
    """The dtype an export computes in ("float32" or "bfloat16") for an `export
    --precision` word (resolved) and the task record's policy (`trained`; None: not
    recorded). "as-trained": bfloat16 when `trained` computes in it (bfloat16 or
    mixed_bfloat16), else float32."""
    word = export_precision(word)
    if word == AS_TRAINED:
        return "bfloat16" if trained in ("bfloat16", "mixed_bfloat16") else "float32"
    return word
