"""`WordPieceTokenizer`'s rules in TensorFlow ops, for `AlbertPreprocessor` on a vocab.txt.

Every step mirrors `albert_tf.tokenizer.wordpiece` on int32 code points, with tables
computed from the same Python predicates (`is_control`, `is_whitespace`,
`is_punctuation`, `is_cjk`, category Mn), so both sides agree by construction:

1. invalid UTF-8 -> U+FFFD (as Python's errors="replace"); U+0000, U+FFFD and control
   characters dropped; every whitespace character (BERT's, and what `str.split` splits
   on) -> " ";
2. CJK ideographs -> " c " (with tokenize_chinese_chars); every character with
   split_characters;
3. lower-casing with `str.lower`'s tables and its Final_Sigma rule (shared with the
   SentencePiece path, `normalize_graph.TextNormalizer`); U+0130 -> "i" U+0307 first, the
   one mapping to two characters. The original lower-cases word by word; a space is
   neither cased nor case-ignorable, so the whole text gives the same result;
4. accents: NFD with `tensorflow_text.normalize_utf8` (ICU), then category Mn dropped;
5. punctuation -> " p ", split on spaces; words over `MAX_WORD_CHARS` characters ->
   "[UNK]";
6. `tensorflow_text.FastWordpieceTokenizer` on the words (no pre-tokenization of its
   own): greedy longest-match-first with "##", a word it cannot cover -> [UNK].

Residual difference: ICU's NFD may know code points newer than Python's Unicode
database (unassigned there, so absent from real text).
"""

from __future__ import annotations

import functools
import unicodedata

import numpy as np
import tensorflow as tf
import tensorflow_text as tf_text

from albert_tf.tokenizer.normalize import range_arrays
from albert_tf.tokenizer.normalize_graph import TextNormalizer, member
from albert_tf.tokenizer.ragged_rows import keep_where, row_ids
from albert_tf.tokenizer.wordpiece import (
    MAX_WORD_CHARS,
    SUFFIX,
    UNK_TOKEN,
    WordPieceTokenizer,
    is_cjk,
    is_punctuation,
)

_SPACE, _NONE = 0x20, -1
_DOTTED_CAPITAL_I, _DOT_ABOVE = 0x130, 0x307


@functools.lru_cache(maxsize=2)
def _tables(rules: type = WordPieceTokenizer) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Range tables of BERT's character classes over every code point (cached), with the
    dropped and whitespace characters of the tokenizer class `rules`."""
    chars = [chr(cp) for cp in range(0x110000) if not 0xD800 <= cp <= 0xDFFF]
    drop = [c for c in chars if rules.dropped(c)]
    dropped = set(drop)
    return {
        "drop": range_arrays([ord(c) for c in drop]),
        # where words end (`is_word_separator`), among the characters kept
        "space": range_arrays([ord(c) for c in chars
                                if c not in dropped and rules.spacing(c)]),
        "cjk": range_arrays([ord(c) for c in chars if is_cjk(c)]),
        "punctuation": range_arrays([ord(c) for c in chars if is_punctuation(c)]),
        "mn": range_arrays([ord(c) for c in chars if unicodedata.category(c) == "Mn"]),
    }


def separator_ranges() -> tuple[np.ndarray, np.ndarray]:
    """(starts, ends) of the code points that end a WordPiece word (`is_word_separator`)."""
    return _tables()["space"]


def _expand(chars: tf.RaggedTensor, rules: list[tuple[tf.Tensor, tuple[int, int, int]]]
            ) -> tuple[tf.RaggedTensor, tf.Tensor]:
    """Replaces each code point where a rule's mask [N] holds by the rule's three code
    points (c: the code point itself, -1: nothing); the first rule that holds wins.

    Returns:
      (the new code points [B, (M)], int64 [M]: the index in `chars.flat_values` each
      one came from).
    """
    values = chars.flat_values
    triple = tf.stack([tf.fill(tf.shape(values), _NONE), values,
                       tf.fill(tf.shape(values), _NONE)], axis=1)  # [N, 3]
    for mask, pattern in reversed(rules):
        replacement = tf.stack([values if p == "c" else tf.fill(tf.shape(values), p)
                                for p in pattern], axis=1)
        triple = tf.where(mask[:, None], replacement, triple)
    flat = tf.reshape(triple, [-1])  # a row's three code points per code point, in order
    keep = flat != _NONE
    source = tf.where(keep)[:, 0] // 3
    tripled = tf.RaggedTensor.from_row_splits(flat, chars.row_splits * 3, validate=False)
    return keep_where(tripled, keep), source


class WordPieceGraph:
    """`WordPieceTokenizer.encode` on `tf.string [B]` -> int64 `[B, (tokens)]`.

    Args:
      tokenizer: the Python tokenizer: its vocabulary, special ids and options.
    """

    def __init__(self, tokenizer: WordPieceTokenizer):
        self.tokenizer = tokenizer
        self.tables = _tables(type(tokenizer))
        lower = TextNormalizer(do_lower_case=True, keep_accents=True)
        # str.lower with Final_Sigma, or code point by code point (a tokenizer.json's)
        self._lower = functools.partial(lower.lower, final_sigma=tokenizer.lowers_final_sigma)
        self._wordpiece = tf_text.FastWordpieceTokenizer(
            vocab=tokenizer.reachable_tokens, suffix_indicator=SUFFIX, unknown_token=UNK_TOKEN,
            max_bytes_per_word=4 * MAX_WORD_CHARS + 4, token_out_type=tf.int64,
            no_pretokenization=True, support_detokenization=False)

    def _member(self, values: tf.Tensor, table: str) -> tf.Tensor:
        return member(values, self.tables[table])

    def words(self, texts: tf.Tensor) -> tf.RaggedTensor:
        """The words WordPiece sees (`WordPieceTokenizer.basic_tokenize`): `tf.string [B, (W)]`."""
        return self._words(texts)[0]

    def _words(self, texts: tf.Tensor):
        """(words `tf.string [B, (W)]`, the code points they are made of [B, (M)] (spaces
        between them), int64 [M]: the index of the raw code point (the flat values of
        `unicode_decode(texts)`) each one came from)."""
        tok = self.tokenizer
        chars = tf.strings.unicode_decode(texts, "UTF-8", errors="replace",
                                          replacement_char=0xFFFD)  # int32 [B, (C)]
        origin = tf.range(tf.size(chars.flat_values, out_type=tf.int64))
        kept = ~self._member(chars.flat_values, "drop")
        chars, origin = keep_where(chars, kept), tf.boolean_mask(origin, kept)
        chars = chars.with_flat_values(tf.where(self._member(chars.flat_values, "space"),
                                                _SPACE, chars.flat_values))
        rules = []
        if tok.do_lower_case:  # str.lower's one mapping to two code points
            rules.append((chars.flat_values == _DOTTED_CAPITAL_I, (0x69, _DOT_ABOVE, _NONE)))
        if tok.split_characters:  # (U+0130 stays one word: its neighbours are spaced)
            rules.append((chars.flat_values != _SPACE, (_SPACE, "c", _SPACE)))
        if tok.tokenize_chinese_chars:
            rules.append((self._member(chars.flat_values, "cjk"), (_SPACE, "c", _SPACE)))
        if rules:
            chars, source = _expand(chars, rules)
            origin = tf.gather(origin, source)
        if tok.do_lower_case:
            chars = chars.with_flat_values(self._lower(chars.flat_values, row_ids(chars)))
        if tok.strips_accents:
            # NFD decomposes character by character (canonical reordering only permutes a
            # cluster's marks): each code point's origin repeats for its NFD's length.
            origin = tf.repeat(origin, _nfd_lengths(chars.flat_values))
            texts = tf_text.normalize_utf8(tf.strings.unicode_encode(chars, "UTF-8"), "NFD")
            chars = tf.strings.unicode_decode(texts, "UTF-8")
            kept = ~self._member(chars.flat_values, "mn")
            chars = keep_where(chars, kept)
            origin = tf.boolean_mask(origin, kept)
        chars, source = _expand(chars, [(self._member(chars.flat_values, "punctuation"),
                                         (_SPACE, "c", _SPACE))])
        origin = tf.gather(origin, source)
        words = tf.strings.split(tf.strings.unicode_encode(chars, "UTF-8"), sep=" ")
        words = keep_where(words, tf.strings.length(words.values) > 0)
        too_long = tf.strings.length(words.flat_values, unit="UTF8_CHAR") > MAX_WORD_CHARS
        return words.with_flat_values(tf.where(too_long, UNK_TOKEN, words.flat_values)), \
            chars, origin

    def tokenize(self, texts: tf.Tensor) -> tf.RaggedTensor:
        """Token ids [B, (T)] of `tf.string [B]`."""
        words = self.words(texts)
        return self._wordpiece.tokenize(words).merge_dims(1, 2)  # [B, (W), (P)] -> [B, (T)]

    def tokenize_with_offsets(self, texts: tf.Tensor):
        """`tokenize(texts)` with each token's byte range in `texts` (valid UTF-8).

        A token covers the raw characters its piece spells ("##" left out), before
        lower-casing and accent stripping; an [UNK] covers its whole word: what
        `WordPieceTokenizer.encode_with_offsets` gives in characters.

        Returns:
          (ids int64, starts int64, ends int64), each [B, (T)]: [start, end) in bytes.
        """
        words, chars, origin = self._words(texts)
        ids = self._wordpiece.tokenize(words)  # [B, (W), (P)]
        # Where each word starts among `chars`' flat values: words are the runs of
        # non-space code points, in order.
        solid = chars.flat_values != _SPACE
        position = tf.range(tf.size(solid, out_type=tf.int64))
        first_in_row = position == tf.gather(chars.row_splits, row_ids(chars))
        opens = solid & (first_in_row | ~tf.concat([[False], solid[:-1]], 0))
        closes = solid & (position_is_last(chars) | ~tf.concat([solid[1:], [False]], 0))
        word_start = tf.boolean_mask(position, opens)  # [W total]
        word_length = tf.boolean_mask(position, closes) + 1 - word_start
        flat = ids.flat_values
        token_word = row_ids(ids.values)  # [T]: the flat word of each token
        width = tf.gather(tf.constant(self._piece_widths), flat)  # code points each piece spells
        inner = row_cumsum(width, token_word, ids.values.row_starts()) - width
        unk = flat == self.tokenizer.unk_id
        first = tf.gather(word_start, token_word) + tf.where(unk, tf.zeros_like(inner), inner)
        last = first + tf.where(unk, tf.gather(word_length, token_word), width) - 1
        _, byte_start = tf.strings.unicode_decode_with_offsets(texts, "UTF-8")
        raw_start = tf.cast(byte_start.flat_values, tf.int64)
        row_end = tf.gather(tf.cast(tf.strings.length(texts), tf.int64),
                            row_ids(byte_start))
        raw_end = tf.where(position_is_last(byte_start), row_end,
                           tf.concat([raw_start[1:], [0]], 0))
        begin = tf.gather(raw_start, tf.gather(origin, first))
        end = tf.gather(raw_end, tf.gather(origin, last))
        merged = ids.merge_dims(1, 2)  # [B, (T)]
        return merged, merged.with_flat_values(begin), merged.with_flat_values(end)

    @functools.cached_property
    def _piece_widths(self) -> np.ndarray:
        """int64 [V]: the code points of the text each vocabulary piece spells (NumPy: a
        constant of whichever graph uses it)."""
        return np.array([len(t) - len(SUFFIX) if t.startswith(SUFFIX) else len(t)
                         for t in self.tokenizer.tokens], np.int64)


def position_is_last(values: tf.RaggedTensor) -> tf.Tensor:
    """bool [N]: whether each flat value is the last of its row."""
    position = tf.range(tf.size(values.flat_values, out_type=tf.int64))
    return position == tf.gather(values.row_splits[1:], row_ids(values)) - 1


def row_cumsum(values: tf.Tensor, rows: tf.Tensor, row_starts: tf.Tensor) -> tf.Tensor:
    """Inclusive running sum of flat `values` [N] that restarts at each row."""
    before = tf.cumsum(values, exclusive=True)
    return before + values - tf.gather(before, tf.gather(row_starts, rows))


def _nfd_lengths(codes: tf.Tensor) -> tf.Tensor:
    """int32 [N]: the code points of NFD of each code point [N] alone (ICU's)."""
    unique, which = tf.unique(codes)
    alone = tf_text.normalize_utf8(tf.strings.unicode_encode(unique[:, None], "UTF-8"), "NFD")
    return tf.gather(tf.strings.length(alone, unit="UTF8_CHAR"), which)
