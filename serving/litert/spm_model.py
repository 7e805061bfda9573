"""The SentencePiece model inside a .tflite file: ALBERT's normalisation as SentencePiece's own.

LiteRT has no kernel for the ops the SavedModel's normaliser uses (UnicodeDecode,
NormalizeUTF8, ...), but tensorflow-text's `FastSentencepieceTokenize` has one, and it
applies the model's normaliser: a character map, rewritten by longest match, then
SentencePiece's whitespace rules (ends stripped, runs collapsed). So the rules of
`albert_tf.tokenizer.spm.normalize_text` are composed into that map once, at export:

* each code point c maps to the model's own normalisation of `normalize_text(c)` (a
  space for Python's whitespace: SentencePiece collapses and strips it as `str.split`
  does); NFKD, the dropped combining marks and `str.lower` come from the Python
  tokenizer itself, so every code point alone gives exactly its ids;
* every sequence the model's map rewrites as a whole (compositions: Hangul jamo,
  base + mark) keeps its rule, applied to the composed images;
* two code points whose images meet inside such a sequence (a syllable "하" then the
  jamo "ᆫ": NFKD, then composition, makes "한") get a rule of their own.

Known differences, each from a context a longest-match map cannot see:
* a capital sigma ending a word: `str.lower` gives "ς", the map "σ" (lower-cased
  exports; it changes ids only where the vocabulary has Greek pieces);
* a combining mark between two characters that compose (Hangul jamo, some Indic vowel
  signs) when accents are stripped: Python drops the mark, then composes; the map
  drops it in the same pass, so they stay apart;
* invalid UTF-8: the Python tokenizer reads it as U+FFFD, which the model's map
  removes; the LiteRT kernel reads it as an unknown character (apps on Android and
  iOS pass valid UTF-8).

`lite_model_proto(tokenizer, fill_mask=True)` also makes "[MASK]" written in the text
the [MASK] piece (a user-defined symbol) followed by a space, as the SavedModel's
fill_mask splits the text there.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable

import sentencepiece as spm

from albert_tf.errors import UserError
from albert_tf.tokenizer.normalize import assigned_characters
from albert_tf.tokenizer.spm import MASK_PIECE, AlbertTokenizer, normalize_text
from albert_tf.tokenizer.spm_proto import (
    normalizer_spec,
    precompiled_charsmap,
    removes_extra_whitespaces,
    spm_model_type,
    with_normalizer,
)

# The name of the normaliser the LiteRT model carries (its map is ALBERT's, composed here).
_LITE_NORMALIZER_NAME = b"albert_tf"


class LiteTokenizerError(UserError):
    """A SentencePiece model whose ALBERT tokenization a LiteRT file cannot reproduce."""


def character_image(char: str, do_lower_case: bool, keep_accents: bool) -> str:
    """What ALBERT's normalisation makes of one code point: a space for whitespace
    (`str.split`'s set), else `normalize_text(char)`."""
    return " " if char.isspace() else normalize_text(char, do_lower_case, keep_accents)


def _code_points() -> list[str]:
    return [chr(cp) for cp in range(0x110000) if not 0xD800 <= cp <= 0xDFFF]


def _own_map(model_proto: bytes) -> spm.SentencePieceNormalizer:
    """The model's own normaliser: its character map alone."""
    return spm.SentencePieceNormalizer(
        model_proto=model_proto, add_dummy_prefix=False, escape_whitespaces=False,
        remove_extra_whitespaces=False)


@functools.lru_cache(maxsize=4)
def _own_keys(model_proto: bytes) -> tuple[str, ...]:
    """What the model's own map rewrites: its keys (code points and sequences); none for a
    model without one (trained with normalization_rule_name=identity)."""
    if not precompiled_charsmap(normalizer_spec(model_proto)):
        return ()
    return tuple(key for key, _ in _own_map(model_proto).decompile())


def mapped_code_points(model_proto: bytes | None, named: Iterable[str] = ()) -> list[str]:
    """The code points a rule may rewrite: the assigned ones (`normalize.assigned_characters`;
    `normalize_text`, Unicode forms, accent stripping and lower-casing leave each of the
    others as it is), every one the model's own map names (None: no map) and `named` (the
    characters of other rules), assigned or not."""
    named = {*named, *(c for key in (_own_keys(model_proto) if model_proto else ()) for c in key)}
    assigned = assigned_characters()
    return assigned + sorted(named.difference(assigned))


@functools.lru_cache(maxsize=4)
def composed_rules(model_proto: bytes, do_lower_case: bool,
                   keep_accents: bool) -> tuple[tuple[str, str], ...]:
    """The character map: ALBERT's normalisation, then the model's own (sorted pairs).

    Applied by longest match and followed by SentencePiece's whitespace rules, it
    gives `model.normalize(normalize_text(text))` (see the module docstring for
    the exceptions). About 250,000 rules; 2-3 seconds. A code point no rule names
    stands for itself, so the code points that stand for themselves under both
    normalisations are not walked (`mapped_code_points`).
    """
    image = {c: character_image(c, do_lower_case, keep_accents)
             for c in mapped_code_points(model_proto)}
    return tuple(sorted(compose_rules(model_proto, image).items()))


def compose_rules(model_proto: bytes | None, image: dict[str, str], after=lambda text: text,
                  whole: dict[str, str] | None = None) -> dict[str, str]:
    """Rules that rewrite each code point c as `after(own(image[c]))`, `own` the
    SentencePiece model's own normaliser (its character map alone; None: no map), with the model's
    multi-character rules and the bridging pairs (`_bridging_rules`) kept; each key
    of `whole` (a string rewritten as a whole first) becomes `after(own(whole[key]))`."""
    model = None if model_proto is None else _own_map(model_proto)

    def own(text: str) -> str:
        return after(model.normalize(text) if model is not None else text) if text else ""

    chars = list(image)
    rules = {}
    for c in chars:
        out = own(image[c])
        if out != c:
            rules[c] = out
    sequences = [] if model is None else [key for key in _own_keys(model_proto) if len(key) > 1]
    for key in sequences:
        rules[key] = own("".join(image[c] for c in key))
    rules.update(_bridging_rules(sequences, chars, image, rules, own))
    rules.update({key: own(value) for key, value in (whole or {}).items()})
    return rules


def _bridging_rules(sequences, chars, image, rules, own) -> dict[str, str]:
    """Rules for pairs of code points whose images meet inside one of the model's
    multi-character rules (e.g. "하" + "ᆫ": NFKD gives jamo that compose to "한")."""
    splits = {(key[:i], key[i:]) for key in sequences for i in range(1, len(key))}
    heads, tails = {u for u, _ in splits}, {v for _, v in splits}
    ending, starting = {}, {}
    for c in chars:
        text = image[c]
        for i in range(1, min(len(text), 3) + 1):
            if text[-i:] in heads:
                ending.setdefault(text[-i:], []).append(c)
            if text[:i] in tails:
                starting.setdefault(text[:i], []).append(c)
    bridges = {}
    for head, tail in splits:
        for a in ending.get(head, ()):
            for b in starting.get(tail, ()):
                if a + b in rules:
                    continue
                out = own(image[a] + image[b])
                if out != rules.get(a, a) + rules.get(b, b):
                    bridges[a + b] = out
    return bridges


def check_convertible(tokenizer: AlbertTokenizer) -> None:
    """Raises LiteTokenizerError, one line naming the file, for models the map cannot serve."""
    path = tokenizer.spm_model_path
    kind = spm_model_type(tokenizer.model_proto)
    if kind != "unigram":
        raise LiteTokenizerError(f"{path} is a {kind} SentencePiece model; LiteRT's "
                                 "FastSentencepieceTokenize runs unigram models (ALBERT's) only")
    if not removes_extra_whitespaces(tokenizer.model_proto):
        raise LiteTokenizerError(f"{path} keeps extra whitespace (remove_extra_whitespaces="
                                 "false): its character map cannot collapse whitespace runs as "
                                 "the tokenizer does")


def lite_model_proto(tokenizer: AlbertTokenizer, fill_mask: bool = False) -> bytes:
    """`tokenizer`'s SentencePiece model with ALBERT's normalisation as its character map.

    Args:
      tokenizer: the checkpoint's tokenizer (its lower-casing and accents decide the map).
      fill_mask: also make "[MASK]" in the text the [MASK] piece, followed by a space.
    """
    check_convertible(tokenizer)
    rules = composed_rules(tokenizer.model_proto, tokenizer.do_lower_case, tokenizer.keep_accents)
    if fill_mask:
        rules = (*rules, (MASK_PIECE, MASK_PIECE + " "))
    return with_character_map(tokenizer.model_proto, rules,
                              user_defined={MASK_PIECE} if fill_mask else ())


def with_character_map(model_proto: bytes, rules, user_defined=()) -> bytes:
    """`model_proto` whose normaliser is the character map of `rules` ((key, value)
    pairs, applied by longest match), the pieces named in `user_defined` made
    user-defined symbols (matched in the normalised text as they are)."""
    compiled = spm.SentencePieceNormalizer(norm_map=list(rules)).serialized_normalizer_spec()
    return with_normalizer(model_proto, _LITE_NORMALIZER_NAME, precompiled_charsmap(compiled),
                           user_defined={name.encode() for name in user_defined})
