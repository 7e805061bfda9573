"""In-graph entities from per-piece labels: windows, words of the raw text, conlleval's rule.

The one implementation of a token classifier's answers on raw text: the served
`serving_default(text)` (`serving/signatures/token_labels.py`) and the Python
`AlbertTokenClassifier.predict_entities` (`text_answers`) both run these functions.

A text longer than one window (seq_length - 2 pieces) is labelled window by window,
as `finetune --task ner` evaluates it (`albert_tf.tagging.windows`, each half a window
after the last): `window_spans` / `window_pieces` cut the windows, and each piece takes
its outputs from the window that gives it the most context (`piece_outputs`,
`tagging.best_window`).

A word is a maximal run of characters that do not end a word by the tokenizer's rule
(SentencePiece: `str.isspace`; WordPiece: BERT's, `is_word_separator`, which reads the
control characters \\v \\f \\x1c-\\x1f \\x85 as part of a word), the rule `finetune --task
ner` reads its files by, and its label is the label of its first piece, as fine-tuning
trains it. Entities are read from the words' tags by
conlleval's rule (`albert_tf.tagging.entities`, the same for IOB1, IOB2 and BIOES),
and each one is reported with its type, its text (exactly the raw text's characters
from `start_char` to `end_char`), and a score: the mean over its words of the
probability of the word's label.

A word with no piece (made only of characters the tokenizer drops) is read as O.

Everything works on the flat values of ragged tensors, keyed `row * ROW_STRIDE +
position` for per-row searches (as `offsets.py`). Part of the in-graph tokenizer
(TensorFlow at module level).
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from albert_tf import tagging
from albert_tf.tokenizer.normalize import unicode_tables
from albert_tf.tokenizer.offsets import ROW_STRIDE, substrings
from albert_tf.tokenizer.ragged_rows import positions, row_ids
from albert_tf.tokenizer.wordpiece import CJK_RANGES
from albert_tf.tokenizer.wordpiece_graph import separator_ranges

# Prefix codes of the per-class tables; O is 0.
_CODES = {prefix: code for code, prefix in enumerate(tagging.CHUNK_PREFIXES)}
ENTITY_OUTPUTS = ("entity_type", "entity_text", "entity_start_char", "entity_end_char",
                  "entity_score", "entity_count")


def label_tables(label_names) -> tuple[list[int], list[int], list[str]]:
    """(prefix code per class, entity type index per class (-1 for O), the type names).

    Label names that are not O or PREFIX-TYPE tags give no entities (they read as O);
    `tagging.split_tag` decides.
    """
    prefixes, kinds, tags = [], [], []
    for name in label_names:
        try:
            tags.append(tagging.split_tag(name))
        except ValueError:
            tags.append((tagging.OUTSIDE, ""))
    names = sorted({kind for _, kind in tags if kind})
    for prefix, kind in tags:
        prefixes.append(_CODES[prefix])
        kinds.append(names.index(kind) if kind else -1)
    return prefixes, kinds, names


def tags_entity_ready(label_names) -> bool:
    """Whether every label name is a tag (O or PREFIX-TYPE), so entities can be read."""
    try:
        for name in label_names:
            tagging.split_tag(name)
    except ValueError:
        return False
    return True


def window_spans(lengths: tf.Tensor, width: int) -> dict[str, tf.Tensor]:
    """The windows of rows of `lengths` [B] pieces, `width` pieces each, half a window
    apart (`tagging.windows`, one window for a row that fits, an empty row included).

    Returns:
      {"start", "size": int64 [W] (in its row), "row": int64 [W], "count": int64 [B]
      (windows per row), "first": int64 [B] (each row's first window), "step": the
      pieces between two windows' starts}.
    """
    step = tagging.window_step(width)
    lengths = tf.cast(lengths, tf.int64)
    count = 1 + (tf.maximum(lengths - width, 0) + step - 1) // step  # windows per row
    row = tf.repeat(tf.range(tf.size(lengths, out_type=tf.int64)), count)  # [W]
    first = tf.cumsum(count, exclusive=True)  # [B]
    start = (tf.range(tf.size(row, out_type=tf.int64)) - tf.gather(first, row)) * step
    size = tf.minimum(tf.gather(lengths, row) - start, width)
    return {"start": start, "size": size, "row": row, "count": count, "first": first,
            "step": tf.constant(step, tf.int64)}


def window_pieces(ids: tf.RaggedTensor, spans: dict[str, tf.Tensor]) -> tf.RaggedTensor:
    """The pieces of each window [W, (size)] of `ids` [B, (n)] (`window_spans`)."""
    offset = tf.gather(ids.row_starts(), spans["row"]) + spans["start"]
    flat = tf.ragged.range(offset, offset + spans["size"])  # [W, (size)] into ids' flat values
    return flat.with_flat_values(tf.gather(ids.flat_values, flat.flat_values))


def piece_outputs(pieces: tf.RaggedTensor, spans: dict[str, tf.Tensor],
                  windows: tf.Tensor) -> tf.Tensor:
    """Each piece's outputs [B, N, C] (N = most pieces in a row; 0 past a row's end),
    from the window that gives the piece the most context on its shorter side, the first
    on ties (`tagging.best_window`).

    Args:
      pieces: any [B, (n)] ragged tensor with a value per piece (its rows are read).
      spans: `window_spans(pieces.row_lengths(), width)`.
      windows: [W, T, C] the packed windows' outputs, position 0 [CLS].
    """
    rows, piece = positions(pieces)
    start, size, first, step = spans["start"], spans["size"], spans["first"], spans["step"]
    last = tf.gather(spans["count"], rows) - 1
    best = tf.zeros_like(piece)
    best_context = tf.fill(tf.shape(piece), tf.constant(-1, tf.int64))
    for back in (2, 1, 0):  # candidates in increasing order (at most three hold a piece)
        j = tf.minimum(piece // step, last) - back
        window = tf.gather(first, rows) + tf.maximum(j, 0)
        begin = tf.gather(start, window)
        end = begin + tf.gather(size, window)
        context = tf.minimum(piece - begin, end - 1 - piece)
        better = (j >= 0) & (piece >= begin) & (piece < end) & (context > best_context)
        best = tf.where(better, window, best)
        best_context = tf.where(better, context, best_context)
    position = piece - tf.gather(start, best) + 1  # after [CLS]
    chosen = tf.gather_nd(windows, tf.stack([best, position], 1))  # [P, C]
    return pieces.with_flat_values(chosen).to_tensor(
        0.0, shape=[None, None, windows.shape[-1]])


def piece_labels(probabilities: tf.Tensor, lengths: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """(label id int32 [B,N], -1 past a row's `lengths`; is a piece bool [B,N]) of the
    pieces' class probabilities [B,N,C] (`piece_outputs`): the most probable class."""
    is_token = tf.sequence_mask(lengths, tf.shape(probabilities)[1])  # [B,N]
    label_id = tf.where(is_token, tf.argmax(probabilities, -1, output_type=tf.int32), -1)
    return label_id, is_token


def text_entities(pre, texts: tf.Tensor, piece_ends: tf.RaggedTensor, label_id: tf.Tensor,
                  probabilities: tf.Tensor, tables) -> dict[str, tf.Tensor]:
    """ENTITY_OUTPUTS of `texts` [B] (sanitized) from its pieces' labels: the words as
    `pre`'s tokenizer separates them (`words`: WordPiece's separators, its
    tokenize_chinese_chars and split_characters), each labelled by its first piece
    (`word_labels`), grouped by conlleval's rule (`entities`).

    Args:
      pre: the `AlbertPreprocessor` that tokenized the texts.
      piece_ends: [B, (n)] byte offsets just past each piece (`offsets.tokenize_with_offsets`).
      label_id, probabilities: [B,N] and [B,N,C] (`piece_labels`, `piece_outputs`).
      tables: `label_tables(label_names)`.
    """
    wordpiece = pre.wordpiece is not None
    found = words(texts, wordpiece and pre.tokenizer.tokenize_chinese_chars,
                  split_all=wordpiece and pre.tokenizer.split_characters, wordpiece=wordpiece)
    word_label, word_score = word_labels(found, piece_ends, label_id,
                                         tf.reduce_max(probabilities, -1))
    return entities(texts, found, word_label, word_score, tables)


def words(texts: tf.Tensor, split_cjk: bool = False, split_all: bool = False,
          wordpiece: bool = False) -> dict[str, tf.RaggedTensor]:
    """The whitespace-separated words of `texts` [B] (valid UTF-8; `wordpiece`: separated
    as BERT separates them, `is_word_separator`); with `split_cjk`, every
    CJK ideograph is a word of its own, as BERT's WordPiece splits Chinese (and Chinese
    NER data tags character by character); with `split_all`, every character is (a model
    trained on one-character-a-line files, `split_characters`).

    Returns:
      {"start_char", "end_char", "start_byte", "end_byte"}: int64 [B, (W)] ranges
      ([start, end)) of each word in characters and in bytes.
    """
    codes, byte_start = tf.strings.unicode_decode_with_offsets(texts, "UTF-8")  # [B, (C)]
    flat = codes.flat_values
    separators = separator_ranges() if wordpiece else unicode_tables().whitespace
    starts, ends = (tf.constant(np.asarray(r, np.int32)) for r in separators)
    index = tf.searchsorted(starts, flat, side="right") - 1
    space = (index >= 0) & (flat <= tf.gather(ends, tf.maximum(index, 0)))
    rows, position = positions(codes)
    last = position == tf.gather(codes.row_lengths(), rows) - 1
    before = tf.concat([[True], space[:-1]], 0) | (position == 0)
    after = tf.concat([space[1:], [True]], 0) | last
    if split_all:
        before = after = tf.ones_like(space)
    elif split_cjk:
        cjk = tf.reduce_any([(flat >= lo) & (flat <= hi) for lo, hi in CJK_RANGES], axis=0)
        before |= cjk | tf.concat([[True], cjk[:-1]], 0)
        after |= cjk | tf.concat([cjk[1:], [True]], 0)
    opens, closes = ~space & before, ~space & after
    # Bytes of each character in UTF-8, for the byte just past it.
    width = 1 + tf.cast(flat >= 0x80, tf.int64) + tf.cast(flat >= 0x800, tf.int64) + \
        tf.cast(flat >= 0x10000, tf.int64)
    word_rows = tf.boolean_mask(rows, opens)
    ragged = lambda v: tf.RaggedTensor.from_value_rowids(  # noqa: E731
        v, word_rows, nrows=tf.shape(texts, out_type=tf.int64)[0])
    return {"start_char": ragged(tf.boolean_mask(position, opens)),
            "end_char": ragged(tf.boolean_mask(position + 1, closes)),
            "start_byte": ragged(tf.boolean_mask(byte_start.flat_values, opens)),
            "end_byte": ragged(tf.boolean_mask(byte_start.flat_values + width, closes))}


def word_labels(found: dict[str, tf.RaggedTensor], piece_ends: tf.RaggedTensor,
                label_id: tf.Tensor, probability: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """Each word's label and its probability: those of the word's first piece.

    Args:
      found: `words(texts)`.
      piece_ends: [B, (n)] byte offsets just past each piece the model labelled.
      label_id, probability: [B, N] per piece, N >= n.

    Returns:
      (label id int32 [W], probability float32 [W]) over the flat words; -1 and 0 for
      a word without a piece.
    """
    word_rows = row_ids(found["end_byte"])
    word_end = word_rows * ROW_STRIDE + found["end_byte"].flat_values  # sorted
    piece_rows, piece = positions(piece_ends)
    # A piece belongs to the first word of its row that ends after the piece's last byte:
    # the word it ends in, or for a lone "▁" (the space before a word) the next word.
    # (Its start would not do: "▁alone" of "and \u200b alone" starts at the space after
    # "and", before the word "\u200b", which SentencePiece drops.)
    word = tf.searchsorted(word_end, piece_rows * ROW_STRIDE + piece_ends.flat_values - 1,
                           side="right", out_type=tf.int64)
    words_total = tf.size(word_end, out_type=tf.int64)
    in_row = (word < words_total) & (tf.gather(tf.concat([word_rows, [-1]], 0),
                                               tf.minimum(word, words_total)) == piece_rows)
    index = tf.stack([piece_rows, piece], 1)
    piece_label = tf.gather_nd(label_id, index)
    piece_probability = tf.gather_nd(probability, index)
    # The first piece of each word: the smallest flat piece index mapped to it.
    flat_piece = tf.range(tf.size(piece_rows, out_type=tf.int64))
    big = tf.int64.max
    first = tf.math.unsorted_segment_min(tf.where(in_row, flat_piece, big),
                                         tf.where(in_row, word, words_total), words_total + 1)
    first = first[:words_total]
    has_piece = first < tf.size(piece_rows, out_type=tf.int64)
    safe = tf.where(has_piece, first, 0)
    labels = tf.where(has_piece, tf.gather(tf.concat([piece_label, [-1]], 0), safe), -1)
    scores = tf.where(has_piece, tf.gather(tf.concat([piece_probability, [0.0]], 0), safe), 0.0)
    return labels, scores


def entities(texts: tf.Tensor, found: dict[str, tf.RaggedTensor], labels: tf.Tensor,
             scores: tf.Tensor, tables) -> dict[str, tf.Tensor]:
    """The entities of each row by conlleval's rule over its words' labels.

    Args:
      texts: tf.string [B], the (sanitized) texts the offsets refer to.
      found: `words(texts)`; labels, scores: `word_labels(...)` over its flat words.
      tables: `label_tables(label_names)`.

    Returns:
      ENTITY_OUTPUTS: entity_type, entity_text string [B,E] (""), entity_start_char,
      entity_end_char int32 [B,E] (-1), entity_score float32 [B,E] (0), entity_count
      int32 [B].
    """
    prefix_table, kind_table, kind_names = tables
    safe = tf.maximum(labels, 0)
    prefix = tf.where(labels >= 0, tf.gather(tf.constant(prefix_table, tf.int32), safe), 0)
    kind = tf.where(prefix > 0, tf.gather(tf.constant(kind_table, tf.int32), safe), -1)
    rows, position = positions(found["start_char"])
    first = position == 0
    prev = tf.where(first, 0, tf.roll(prefix, 1, 0))
    prev_kind = tf.where(first, -1, tf.roll(kind, 1, 0))
    # conlleval's rule (`tagging.chunk_table`), word by word: (ends, starts).
    index = (prev * len(_CODES) + prefix) * 2 + tf.cast(prev_kind == kind, tf.int32)
    ends, starts = tf.unstack(tf.gather(tf.constant(tagging.chunk_table()), index), axis=1)
    # Entity ends: the words where an open entity ends, and each row's end.
    row_lengths = found["start_char"].row_lengths()
    sentinels = tf.range(tf.size(row_lengths, out_type=tf.int64)) * ROW_STRIDE + row_lengths
    end_keys = tf.sort(tf.concat([tf.boolean_mask(rows * ROW_STRIDE + position, ends & ~first),
                                  sentinels], 0))
    start_flat = tf.boolean_mask(tf.range(tf.size(rows, out_type=tf.int64)), starts)
    start_row = tf.gather(rows, start_flat)
    start_key = start_row * ROW_STRIDE + tf.gather(position, start_flat)
    end_key = tf.gather(end_keys, tf.searchsorted(end_keys, start_key, side="right"))
    last_flat = start_flat + (end_key - start_key) - 1  # the entity's last word
    # Mean label probability over the entity's words.
    running = tf.cumsum(scores)
    total = tf.gather(running, last_flat) - tf.gather(running, start_flat) + \
        tf.gather(scores, start_flat)
    score = total / tf.cast(end_key - start_key, tf.float32)
    start_byte = tf.gather(found["start_byte"].flat_values, start_flat)
    end_byte = tf.gather(found["end_byte"].flat_values, last_flat)
    text = substrings(texts, start_row, start_byte, end_byte)
    kind_names = tf.constant(kind_names or [""], tf.string)
    per_row = lambda v, default: tf.RaggedTensor.from_value_rowids(  # noqa: E731
        v, start_row, nrows=tf.shape(texts, out_type=tf.int64)[0]).to_tensor(default)
    chars = lambda v: tf.cast(per_row(v, -1), tf.int32)  # noqa: E731
    return {
        "entity_type": per_row(tf.gather(kind_names, tf.maximum(
            tf.gather(kind, start_flat), 0)), ""),
        "entity_text": per_row(text, ""),
        "entity_start_char": chars(tf.gather(found["start_char"].flat_values, start_flat)),
        "entity_end_char": chars(tf.gather(found["end_char"].flat_values, last_flat)),
        "entity_score": per_row(score, 0.0),
        "entity_count": tf.cast(tf.math.bincount(tf.cast(start_row, tf.int32),
                                                 minlength=tf.shape(texts)[0],
                                                 maxlength=tf.shape(texts)[0]), tf.int32),
    }
