"""Raw text -> ALBERT's inputs in a LiteRT graph: TF-Text's tokenizer kernels, then builtins.

`LiteText` tokenizes a SentencePiece model with tensorflow-text's
`FastSentencepieceTokenizer` on the model of `spm_model.lite_model_proto` (ALBERT's
normalisation is its character map), then applies the digit-comma rule as a table
gather (the Python tokenizer's own table, `digit_comma_table`); a Unigram tokenizer.json
with the same kernel on `json_spm_model.lite_json_model`'s model (its added tokens are
pieces of their own, the "▁" before one dropped, then a gather to their ids); a WordPiece
vocab.txt with `FastBertTokenizer` (`FastBertNormalize` on the character map of
`wordpiece_model.normalizer_model`, then `FastWordpieceTokenize`). It packs
`[CLS] A [SEP] (B [SEP])` with plain tensor ops, to the longest row of the request (at
most `seq_length`). Ragged values travel as (values [N], row_splits [B+1]) pairs of
int32: LiteRT has no ragged type, and these ops all lower to builtins (GATHER, WHERE,
CUMSUM, SELECT_V2, ...).
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf
import tensorflow_text as tf_text

from albert_tf.inputs import INPUT_NAMES
from albert_tf.tokenizer.json_unigram import JsonUnigramTokenizer
from albert_tf.tokenizer.ragged_rows import digit_comma_table
from albert_tf.tokenizer.spm import SPIECE_UNDERLINE, AlbertTokenizer
from albert_tf.tokenizer.wordpiece import MAX_WORD_CHARS, SUFFIX, UNK_TOKEN, WordPieceTokenizer

from .json_spm_model import lite_json_model
from .spm_model import lite_model_proto
from .wordpiece_model import LiteWordPieceError, normalizer_model


def filter_ragged(values: tf.Tensor, splits: tf.Tensor, keep: tf.Tensor):
    """(values[keep], the row splits that follow): a ragged boolean mask, [N] -> [N']."""
    counts = tf.concat([[0], tf.cumsum(tf.cast(keep, tf.int32))], 0)  # [N+1]
    return tf.boolean_mask(values, keep), tf.gather(counts, splits)


def drop_before(values: tf.Tensor, splits: tf.Tensor, drop_id: int, marked: tf.Tensor):
    """(values, splits) without each `drop_id` followed, in its row, by a value that
    `marked` (bool [N]) marks: [N] -> [N']."""
    position = tf.range(tf.size(values))
    last_in_row = tf.reduce_any(position[:, None] + 1 == splits[None, 1:], axis=1)
    drop = (values == drop_id) & tf.concat([marked[1:], [False]], 0) & ~last_in_row
    return filter_ragged(values, splits, ~drop)


def expand_ragged(values: tf.Tensor, splits: tf.Tensor, table: tf.Tensor, lengths: tf.Tensor):
    """Each value v becomes the row `table[v, :lengths[v]]`: [N] -> [N'], with the splits."""
    counts = tf.gather(lengths, values)  # [N]
    rows = tf.gather(table, values)  # [N, K]
    keep = tf.range(tf.shape(table)[1])[None, :] < counts[:, None]
    ends = tf.concat([[0], tf.cumsum(counts)], 0)  # [N+1]
    return tf.boolean_mask(rows, keep), tf.gather(ends, splits)


def kept_lengths(lengths: list[tf.Tensor], budget: int) -> list[tf.Tensor]:
    """Tokens each segment keeps: the first `budget`, or for a pair the original
    `_truncate_seq_pair` (the longer loses first, B on ties) in closed form."""
    if len(lengths) == 1:
        return [tf.minimum(lengths[0], budget)]
    a, b = lengths
    kept_a = tf.minimum(a, tf.maximum(budget - b, (budget + 1) // 2))
    return [kept_a, tf.minimum(b, budget - kept_a)]


def request_rank(x: tf.Tensor) -> tf.Tensor:
    """The rank the request has (the length of its runtime shape): LiteRT resizes an input
    to whatever shape it is given, and the converter would fold tf.rank to the spec's."""
    return tf.reduce_sum(tf.cast(tf.shape(x) >= 0, tf.int32))


def guard(ok: tf.Tensor) -> tf.Tensor:
    """int32 0 when `ok`, else the invoke fails: a GATHER one past a one-row table is
    LiteRT's "gather index out of bounds" (LiteRT has no Assert; `runtime.call` names
    the cause). Added to an input, so every output depends on it."""
    return tf.gather(tf.zeros([1], tf.int32), tf.cast(tf.logical_not(ok), tf.int32))


def guarded(features: dict[str, tf.Tensor], ok: tf.Tensor) -> dict[str, tf.Tensor]:
    """`features` whose word ids depend on `guard(ok)`."""
    return {**features, "input_word_ids": features["input_word_ids"] + guard(ok)}


def ids_fit(features: dict[str, tf.Tensor], vocab_size: int, type_vocab_size: int) -> tf.Tensor:
    """Whether the token_ids inputs agree in shape and hold ids of the vocabulary,
    type ids of the type vocabulary and a 0/1 mask: the SavedModel's token_ids checks."""
    ids, mask, types = (features[name] for name in INPUT_NAMES)
    shape = tf.shape(ids)
    same = tf.reduce_all([tf.reduce_all(tf.equal(tf.shape(shape), tf.shape(tf.shape(x))))
                          for x in (mask, types)])
    same = same & tf.reduce_all(tf.equal(shape, tf.shape(mask))) & tf.reduce_all(
        tf.equal(shape, tf.shape(types)))
    return (same & tf.reduce_all((ids >= 0) & (ids < vocab_size))
            & tf.reduce_all((types >= 0) & (types < type_vocab_size))
            & tf.reduce_all((mask == 0) | (mask == 1)))


class LiteText:
    """ALBERT's tokenizer and packing for a LiteRT graph; ids equal the Python tokenizer's
    (`AlbertTokenizer`, or `WordPieceTokenizer` but for `wordpiece_model`'s difference).

    Args:
      tokenizer: the checkpoint's Python tokenizer (lower-casing, accents, special ids).
      seq_length: the most tokens a packed row has.
      fill_mask: also build the tokenizer that reads "[MASK]" in text (`mask_tokenize`;
        SentencePiece only).
    """

    def __init__(self, tokenizer: AlbertTokenizer | WordPieceTokenizer, seq_length: int,
                 fill_mask: bool = False):
        self.tokenizer = tokenizer
        self.seq_length = seq_length
        if isinstance(tokenizer, WordPieceTokenizer):
            if fill_mask:
                raise LiteWordPieceError(
                    "fill_mask reads \"[MASK]\" in raw text, which LiteRT's WordPiece kernel "
                    "splits as punctuation; export the encoder (--task encoder) or a SavedModel")
            self._wordpiece = tf_text.FastBertTokenizer(
                vocab=tokenizer.reachable_tokens, suffix_indicator=SUFFIX, unknown_token=UNK_TOKEN,
                max_bytes_per_word=MAX_WORD_CHARS, token_out_type=tf.int64,
                fast_bert_normalizer_model_buffer=normalizer_model(tokenizer))
            self._digit_comma = None
            return
        self._wordpiece = self._json = None
        if isinstance(tokenizer, JsonUnigramTokenizer):
            # "[MASK]" in the text is one of its added tokens: `tokenize` reads it already
            self._json = lite_json_model(tokenizer)
            self._sentencepiece = tf_text.FastSentencepieceTokenizer(self._json.model_proto)
            self._mask_sentencepiece = self._digit_comma = None
            return
        self._sentencepiece = tf_text.FastSentencepieceTokenizer(lite_model_proto(tokenizer))
        if fill_mask and tokenizer.piece_to_id(SPIECE_UNDERLINE) == tokenizer.unk_id:
            raise ValueError(f"{tokenizer.spm_model_path} has no {SPIECE_UNDERLINE!r} piece, which "
                             "fill_mask needs to tell the space before a [MASK] from the text")
        self._mask_sentencepiece = (tf_text.FastSentencepieceTokenizer(
            lite_model_proto(tokenizer, fill_mask=True)) if fill_mask else None)
        values, lengths = digit_comma_table(tokenizer)
        table = np.zeros([len(lengths), max(1, int(lengths.max()))], np.int32)
        starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
        for row, (start, length) in enumerate(zip(starts, lengths)):
            table[row, :length] = values[start:start + length]
        # Only a vocabulary with "digit," pieces needs the gather.
        self._digit_comma = (table, lengths.astype(np.int32)) if table.shape[1] > 1 else None

    def tokenize(self, texts: tf.Tensor):
        """The Python tokenizer's `encode` of each text [B] -> (ids [N], row_splits [B+1]) int32."""
        if self._wordpiece is not None:
            return self._finish(self._wordpiece.tokenize(texts))
        if self._json is not None:
            return self._json_tokenize(texts)
        return self._finish(self._sentencepiece.tokenize(texts))

    def _json_tokenize(self, texts: tf.Tensor):
        """A tokenizer.json's ids: the lone "▁" before an added token dropped, then each
        appended piece read as its added token (`json_spm_model`)."""
        ids = self._sentencepiece.tokenize(texts)
        values, splits = tf.cast(ids.flat_values, tf.int32), tf.cast(ids.row_splits, tf.int32)
        model = self._json
        values, splits = drop_before(values, splits, model.space_id,
                                     values >= model.first_added)
        return tf.gather(tf.constant(model.lookup), values), splits

    def mask_tokenize(self, texts: tf.Tensor):
        """`tokenize` where each "[MASK]" in the text is the [MASK] id and starts a new
        word after it, as the SavedModel's fill_mask splits the text there."""
        if self._json is not None:
            return self._json_tokenize(texts)
        ids = self._mask_sentencepiece.tokenize(texts)
        values, splits = tf.cast(ids.flat_values, tf.int32), tf.cast(ids.row_splits, tf.int32)
        # The space before a [MASK] is a lone "▁" piece here; split text has none.
        space = self.tokenizer.piece_to_id(SPIECE_UNDERLINE)
        values, splits = drop_before(values, splits, space, values == self.tokenizer.mask_id)
        return self._apply_digit_comma(values, splits)

    def _finish(self, ids: tf.RaggedTensor):
        values, splits = tf.cast(ids.flat_values, tf.int32), tf.cast(ids.row_splits, tf.int32)
        return self._apply_digit_comma(values, splits)

    def _apply_digit_comma(self, values, splits):
        if self._digit_comma is None:
            return values, splits
        table, lengths = self._digit_comma
        return expand_ragged(values, splits, tf.constant(table), tf.constant(lengths))

    def pack(self, segments: list[tuple[tf.Tensor, tf.Tensor]]) -> dict[str, tf.Tensor]:
        """`[CLS] A [SEP] (B [SEP])` of one or two (ids, row_splits) segments.

        Returns the three int32 [B, T] inputs, T the longest packed row (1 to
        seq_length), truncated as `AlbertTokenizer.pack` does; padding is <pad>, mask 0.
        """
        lengths = [splits[1:] - splits[:-1] for _, splits in segments]
        kept = kept_lengths(lengths, self.seq_length - 1 - len(segments))
        return self.place([(values, splits[:-1], count)
                           for (values, splits), count in zip(segments, kept)])

    def place(self, segments: list[tuple]) -> dict[str, tf.Tensor]:
        """Packs segments already cut: each (ids [N], first [B], count [B]) puts
        ids[first[b]:first[b] + count[b]] in row b; the counts must fit seq_length."""
        tok = self.tokenizer
        total = 1 + sum(count + 1 for _, _, count in segments)  # [B]
        width = tf.clip_by_value(tf.reduce_max(tf.concat([total, [1]], 0)), 1, self.seq_length)
        position = tf.range(width)[None, :]  # [1, T]
        word = tf.where(position == 0, tok.cls_id, tok.pad_id) + tf.zeros_like(total)[:, None]
        types = tf.zeros_like(word)
        begin = tf.ones_like(total)  # [B]: where the segment starts in the row
        for index, (values, first, count) in enumerate(segments):
            inside = (position >= begin[:, None]) & (position < (begin + count)[:, None])
            source = first[:, None] + position - begin[:, None]  # [B, T] into values
            padded = tf.concat([values, [tok.pad_id]], 0)  # index N: a valid dummy
            tokens = tf.gather(padded, tf.where(inside, source, tf.size(values)))
            word = tf.where(inside, tokens, word)
            separator = (begin + count)[:, None]
            word = tf.where(position == separator, tok.sep_id, word)
            if index == 1:
                types = tf.where((position >= begin[:, None]) & (position <= separator), 1, types)
            begin = begin + count + 1
        mask = tf.cast(position < total[:, None], tf.int32)
        return dict(zip(INPUT_NAMES, (word, mask, types)))

    def features(self, *texts: tf.Tensor) -> dict[str, tf.Tensor]:
        """Raw text [B] (or two, a pair) -> the model's inputs, as `pack` gives them."""
        return self.pack([self.tokenize(text) for text in texts])


def trim_ids(features: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
    """Token-id inputs [..., T] cut to their longest row (at least 1): outputs are unchanged."""
    longest = tf.reduce_max(tf.concat([tf.reshape(tf.reduce_sum(features["input_mask"], -1), [-1]),
                                       [1]], 0))
    return {name: value[..., :longest] for name, value in features.items()}
