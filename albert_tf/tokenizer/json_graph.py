"""A tokenizer.json's rules in TensorFlow ops (`AlbertPreprocessor` on a tokenizer.json).

* added tokens: `AddedTokenSplit` cuts them out of the raw text with one RE2 alternation
  (longest first, so the leftmost match is the longest there; `lstrip`/`rstrip` take the
  White_Space beside it) and gives each its id; the text between goes to the tokenizer;
* Unigram (`UnigramGraph`): Replace, NFKD / NFD / NFKC / NFC (ICU), StripAccents (M*
  code points dropped), Lowercase (code point by code point, no Final_Sigma) and
  White_Space -> " " in TF ops (the WhitespaceSplit + Metaspace "always" shape only:
  `check_graph_shape`), then `FastSentencepieceTokenizer` on a SentencePiece
  model rebuilt from the file's pieces and scores (`JsonUnigramTokenizer.sentencepiece_proto`)
  whose normalizer is the file's Precompiled character map followed by SentencePiece's
  whitespace rules: runs collapsed, ends stripped, "▁" in front of every word. That is
  WhitespaceSplit + Metaspace(prepend_scheme "always", split) when no piece holds an
  inner "▁" (the rebuilt model leaves such pieces out, as split words never hold one);
* WordPiece: `wordpiece_graph.WordPieceGraph` on `JsonWordPieceTokenizer`.

Differences from the Python tokenizer, each a context these ops do not see: SentencePiece
rewrites with the character map by longest match over the text, `tokenizers` by grapheme
(under 6 bytes: the shortest match rewrites the whole grapheme); U+0000 is read as
U+FFFD when the file has added tokens (tensorflow-text's regex_split ends a text there),
the same ids unless the vocabulary or the character map tells the two apart; a word
that is one "▁" typed in the text is two "▁" pieces here, one in Python.
"""

from __future__ import annotations

import re
import unicodedata

import tensorflow as tf
import tensorflow_text as tf_text

from albert_tf.tokenizer.normalize import range_arrays
from albert_tf.tokenizer.normalize_graph import TextNormalizer, member
from albert_tf.tokenizer.ragged_rows import keep_where, row_ids
from albert_tf.tokenizer.tokenizer_json import WHITE_SPACE, TokenizerJsonError

__all__ = ["AddedTokenSplit", "UnigramGraph", "check_graph_shape"]

_WHITE_SPACE_CLASS = "[" + "".join(f"\\x{{{ord(c):x}}}" for c in sorted(WHITE_SPACE)) + "]"


def _mark_ranges():
    return range_arrays([cp for cp in range(0x110000) if not 0xD800 <= cp <= 0xDFFF
                          and unicodedata.category(chr(cp)).startswith("M")])


def check_graph_shape(spec) -> None:
    """Refuses, in one line naming the file, a Unigram tokenizer.json (`TokenizerJson`)
    whose pre-tokenizer the graph does not apply as Python does: SentencePiece's own
    whitespace rules stand for WhitespaceSplit + Metaspace("always", split) only (a
    Metaspace alone keeps tabs as characters and a trailing space as a "▁")."""
    if spec.kind != "sentencepiece":
        return
    meta = spec.pre_tokenizers[-1]
    if len(spec.pre_tokenizers) != 2 or meta["prepend_scheme"] != "always" or not meta["split"]:
        names = " + ".join(p["type"] for p in spec.pre_tokenizers)
        raise TokenizerJsonError(
            f"{spec.path}: pre_tokenizer {names} (prepend_scheme={meta['prepend_scheme']!r}, "
            f"split={meta['split']}): the in-graph tokenizer applies WhitespaceSplit + "
            "Metaspace(prepend_scheme 'always', split) only, as transformers 5 writes it; "
            "the Python tokenizer applies this one (or pass the original spiece.model)")


class AddedTokenSplit:
    """tokenizer.json's added tokens cut out of `tf.string [B]` texts, in the graph."""

    def __init__(self, added):
        added = sorted(added, key=lambda t: -len(t.content))
        self.ids = {t.content: t.id for t in added}
        alternatives = []
        for token in added:
            left = _WHITE_SPACE_CLASS + "*" if token.lstrip else ""
            right = _WHITE_SPACE_CLASS + "*" if token.rstrip else ""
            alternatives.append(left + re.escape(token.content) + right)
        self.pattern = "|".join(alternatives)

    def __call__(self, texts: tf.Tensor, tokenize) -> tf.RaggedTensor:
        """`tokenize` (tf.string [N] -> int [N, (P)]) on the text between the added tokens,
        each added token its id: int64 [B, (T)]."""
        if not self.ids:
            return tf.cast(tokenize(texts), tf.int64)
        # tensorflow-text's regex_split ends a text at U+0000: read as U+FFFD, which both
        # shapes treat alike (dropped by BertNormalizer, unknown to a Unigram vocabulary)
        texts = tf.strings.regex_replace(texts, "\x00", "\ufffd")
        parts = tf_text.regex_split(texts, self.pattern, keep_delim_regex_pattern=self.pattern)
        flat = parts.flat_values  # [N]
        bare = tf.strings.regex_replace(flat, f"^{_WHITE_SPACE_CLASS}+|{_WHITE_SPACE_CLASS}+$", "")
        token = tf.fill(tf.shape(flat), tf.constant(-1, tf.int64))
        for content, token_id in self.ids.items():  # a few tokens: no table resource to track
            token = tf.where(bare == content, tf.constant(token_id, tf.int64), token)
        is_added = tf.strings.regex_full_match(flat, self.pattern) & (token >= 0)
        ids = tf.cast(tokenize(flat), tf.int64)  # [N, (P)]
        part = row_ids(ids)
        keep = tf.gather(~is_added, part)
        rows = tf.concat([tf.boolean_mask(part, keep),
                          tf.where(is_added)[:, 0]], 0)
        values = tf.concat([tf.boolean_mask(ids.flat_values, keep),
                            tf.boolean_mask(token, is_added)], 0)
        order = tf.argsort(rows, stable=True)  # each part's own ids stay in order
        merged = tf.RaggedTensor.from_value_rowids(tf.gather(values, order),
                                                   tf.gather(rows, order), nrows=tf.size(flat,
                                                   out_type=tf.int64))
        return parts.with_flat_values(merged).merge_dims(1, 2)


class UnigramGraph:
    """A Unigram tokenizer.json's `JsonUnigramTokenizer.encode` on `tf.string [B]` ->
    int64 `[B, (T)]` (see the module docstring)."""

    def __init__(self, tokenizer):
        check_graph_shape(tokenizer.spec)
        spec = tokenizer.spec
        self.steps = [s for s in spec.normalizers if s["type"] not in ("Precompiled",)
                      and not (s["type"] == "Replace" and "Regex" in s["pattern"])]
        self.mark = spec.pre_tokenizers[-1]["replacement"]
        self.model_proto = tokenizer.sentencepiece_proto(tokenizer.charsmap)
        self.sentencepiece = tf_text.FastSentencepieceTokenizer(self.model_proto)
        self.added = AddedTokenSplit(spec.added)
        self._lower = TextNormalizer(do_lower_case=True, keep_accents=True)
        self._marks = _mark_ranges() if any(s["type"] == "StripAccents" for s in self.steps) \
            else None

    def normalize(self, texts: tf.Tensor) -> tf.Tensor:
        """The normalizers before Precompiled, and White_Space -> " ": tf.string [N]."""
        for step in self.steps:
            kind = step["type"]
            if kind == "Replace":
                texts = tf.strings.regex_replace(texts, re.escape(step["pattern"]["String"]),
                                                 step["content"].replace("\\", "\\\\"))
            elif kind in ("NFKD", "NFD", "NFKC", "NFC"):
                texts = tf_text.normalize_utf8(texts, kind)
            elif kind == "StripAccents":
                chars = tf.strings.unicode_decode(texts, "UTF-8")
                texts = tf.strings.unicode_encode(
                    keep_where(chars, ~member(chars.flat_values, self._marks)), "UTF-8")
            elif kind == "Lowercase":
                texts = tf.strings.regex_replace(texts, "\u0130", "i\u0307")  # one to two
                chars = tf.strings.unicode_decode(texts, "UTF-8")
                texts = tf.strings.unicode_encode(chars.with_flat_values(
                    self._lower_each(chars.flat_values)), "UTF-8")
        return tf.strings.regex_replace(texts, _WHITE_SPACE_CLASS, " ")

    def _lower_each(self, chars: tf.Tensor) -> tf.Tensor:
        return self._lower.lower(chars, None, final_sigma=False)  # code point by code point

    def tokenize(self, texts: tf.Tensor) -> tf.RaggedTensor:
        """int64 [B, (T)] ids of `tf.string [B]` (invalid UTF-8 read as U+FFFD)."""
        texts = tf.strings.unicode_encode(tf.strings.unicode_decode(
            texts, "UTF-8", errors="replace", replacement_char=0xFFFD), "UTF-8")
        return self.added(texts, lambda parts: self.sentencepiece.tokenize(
            self._metaspace(self.normalize(parts))).with_row_splits_dtype(tf.int64))

    def _metaspace(self, texts: tf.Tensor) -> tf.Tensor:
        """A word that already begins with "▁" gets none in front (Metaspace's rule; the
        SentencePiece model puts one before every word). A word that is one "▁" keeps
        it (emptied, it would vanish): two pieces here, one in Python."""
        mark = re.escape(self.mark)
        return tf.strings.regex_replace(texts, f"(^| ){mark}([^ ])", "\\1\\2")


def wordpiece_with_added(wordpiece, added) -> callable:
    """`WordPieceGraph.tokenize` with the file's added tokens cut out first."""
    split = AddedTokenSplit(added)

    def tokenize(texts: tf.Tensor) -> tf.RaggedTensor:
        texts = tf.strings.unicode_encode(tf.strings.unicode_decode(
            texts, "UTF-8", errors="replace", replacement_char=0xFFFD), "UTF-8")
        return split(texts, lambda parts: wordpiece.tokenize(parts).with_row_splits_dtype(
            tf.int64))
    return tokenize

