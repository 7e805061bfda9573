"""Calling a tokenizer on a batch, as Hugging Face and KerasHub tokenizers are called.

`BatchTokenizerMixin.__call__(texts, texts_pair=None, padding=True, truncation=True,
max_length=None, return_tensors=None, return_offsets_mapping=False, names="albert")` gives
the model's inputs (`input_word_ids`, `input_mask`, `input_type_ids`; with names="hf",
Hugging Face's `input_ids`, `attention_mask`, `token_type_ids`) for one text, a batch, or
a batch of pairs. Each row holds the ids `encode_pair` gives it: the tokenizer's own
`encode` and `pack` do the work (one home for packing and the truncation rule), this
module only batches, pads and converts.

A tokenizer class gets it by inheriting the mixin and providing `encode(text) -> ids`,
`pack(ids_a, ids_b, seq_length) -> {input name: [ints]}` and `pad_id`; for offsets,
`encode_with_offsets(text) -> (ids, [(start, end)] character offsets into text)`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from albert_tf.config import DEFAULT_SEQ_LENGTH, MIN_SEQ_LENGTH
from albert_tf.inputs import HF_INPUT_NAMES, INPUT_NAMES, INPUT_WORD_IDS

__all__ = ["BatchTokenizerMixin", "OFFSET_MAPPING", "PADDING_CHOICES", "RETURN_TENSORS", "NAMES"]

# The name Hugging Face gives a row's character offsets: (start, end) per token, (0, 0)
# for [CLS], [SEP] and padding.
OFFSET_MAPPING = "offset_mapping"
PADDING_CHOICES = (True, False, "longest", "max_length", "do_not_pad")
RETURN_TENSORS = (None, "np", "tf")
# The key names a call returns: ours (the models' inputs) or Hugging Face's.
NAMES = ("albert", "hf")
_NO_OFFSET = (0, 0)


def _column(texts, name: str) -> tuple[list, bool]:
    """(texts as a list, whether one text was given rather than a batch)."""
    if isinstance(texts, (str, bytes)):
        return [texts], True
    if isinstance(texts, np.ndarray):
        texts = texts.tolist()
    if not isinstance(texts, (list, tuple)):
        raise TypeError(f"{name} must be a string or a list of strings, not "
                        f"{type(texts).__name__}")
    return list(texts), False


def _check_options(padding, truncation, max_length, return_tensors, names) -> None:
    if names not in NAMES:
        raise ValueError(f"names={names!r} is not one of {NAMES}")
    if padding not in PADDING_CHOICES:
        raise ValueError(f"padding={padding!r} is not one of {PADDING_CHOICES}")
    if return_tensors not in RETURN_TENSORS:
        raise ValueError(f"return_tensors={return_tensors!r} is not one of {RETURN_TENSORS}")
    if max_length is not None and (isinstance(max_length, bool) or not isinstance(
            max_length, int) or max_length < MIN_SEQ_LENGTH):
        raise ValueError(f"max_length={max_length!r} must be an integer >= {MIN_SEQ_LENGTH} "
                         "([CLS] [SEP] [SEP])")
    if padding == "max_length" and max_length is None:
        raise ValueError('padding="max_length" needs max_length')
    if padding in (False, "do_not_pad") and return_tensors is not None:
        raise ValueError(f"return_tensors={return_tensors!r} needs rows of one length: "
                         "padding=True or \"max_length\"")
    if not isinstance(truncation, bool):
        raise ValueError(f"truncation={truncation!r} must be True or False")


class BatchTokenizerMixin:
    """`tokenizer(texts, ...)`: a batch of model inputs (see the module docstring)."""

    def __call__(self, texts: str | Sequence[str], texts_pair: str | Sequence[str] | None = None,
                 padding: bool | str = True, truncation: bool = True,
                 max_length: int | None = None, return_tensors: str | None = None,
                 return_offsets_mapping: bool = False, names: str = "albert") -> dict[str, Any]:
        """The model inputs of `texts` (and `texts_pair`), one row per text.

        Args:
          texts: a string or a list of B strings.
          texts_pair: the second segments (as many), or None.
          padding: True / "longest": rows padded to the longest (at least 3);
            "max_length": to `max_length`; False / "do_not_pad": each row its length.
          truncation: cut rows longer than `max_length` (default 512, the released
            models' position table) as `encode_pair` does: a single segment keeps its
            first pieces, a pair loses pieces from the longer segment first, the second
            on ties. False: a longer row is a ValueError naming it (rows longer than
            the position table would fail in the model).
          max_length: the longest row, [CLS] and [SEP]s included.
          return_tensors: None (lists of ints), "np" (int32 [B, T]) or "tf".
          return_offsets_mapping: add `offset_mapping`: per token its (start, end)
            characters in its own text, (0, 0) for [CLS], [SEP] and padding.
          names: "albert" (the models' input names) or "hf" (Hugging Face's, for code
            written against its tokenizers; the same values).

        Returns:
          {"input_word_ids", "input_mask", "input_type_ids"[, "offset_mapping"]} (names="hf":
          {"input_ids", "attention_mask", "token_type_ids"[, ...]}): [B, T] rows (for one
          string without return_tensors: one row, unbatched).

        Example:
            >>> tok(["a question", "another"], ["its passage", "and its"], max_length=16)
        """
        _check_options(padding, truncation, max_length, return_tensors, names)
        column_a, single = _column(texts, "texts")
        column_b = None
        if texts_pair is not None:
            column_b, single_b = _column(texts_pair, "texts_pair")
            if single_b != single or len(column_b) != len(column_a):
                raise ValueError(f"texts has {len(column_a)} rows and texts_pair "
                                 f"{len(column_b)}: one second segment per text")
        # truncation=False refuses what truncation would cut: the limit is the same
        limit = max_length if max_length is not None else DEFAULT_SEQ_LENGTH
        rows = [self._row(a, None if column_b is None else column_b[i], limit, truncation,
                          return_offsets_mapping, i)
                for i, a in enumerate(column_a)]
        lengths = [row["length"] for row in rows]
        width = (max_length if padding == "max_length" else
                 max([MIN_SEQ_LENGTH, *lengths]) if padding in (True, "longest") else None)
        batch = {name: [] for name in INPUT_NAMES}
        if return_offsets_mapping:
            batch[OFFSET_MAPPING] = []
        for row, length in zip(rows, lengths):
            packed = self.pack(row["a"], row["b"], width or max(length, MIN_SEQ_LENGTH))
            for name in INPUT_NAMES:
                batch[name].append(packed[name] if width else packed[name][:length])
            if return_offsets_mapping:
                offsets = [_NO_OFFSET, *row["offsets_a"], _NO_OFFSET]
                if row["b"] is not None:
                    offsets += [*row["offsets_b"], _NO_OFFSET]
                pad = (width or length) - len(offsets)
                batch[OFFSET_MAPPING].append(offsets + [_NO_OFFSET] * pad)
        if names == "hf":
            batch = {HF_INPUT_NAMES.get(name, name): rows for name, rows in batch.items()}
        return _converted(batch, return_tensors, single)

    def _row(self, text_a, text_b, limit: int, truncation: bool, offsets: bool,
             index: int) -> dict[str, Any]:
        """One row's segments, cut to `limit` by the packing rule, and its length."""
        ids_a, offsets_a = self._ids(text_a, offsets)
        ids_b, offsets_b = self._ids(text_b, offsets) if text_b is not None else (None, None)
        specials = 2 if ids_b is None else 3
        length = len(ids_a) + len(ids_b or ()) + specials
        if length > limit:
            if not truncation:
                raise ValueError(f"row {index} has {length} tokens, more than max_length="
                                 f"{limit} (truncation=False)")
            # The tokenizer's own packing cuts it (the original rule): a row of exactly
            # `limit` tokens, no padding, whose type ids count [CLS] A [SEP] as 0.
            packed = self.pack(ids_a, ids_b, limit)
            if ids_b is None:
                keep_a, keep_b = limit - 2, 0
            else:
                keep_a = packed["input_type_ids"].count(0) - 2
                keep_b = limit - 3 - keep_a
            words = packed[INPUT_WORD_IDS]
            ids_a = words[1:1 + keep_a]
            ids_b = None if ids_b is None else words[2 + keep_a:2 + keep_a + keep_b]
            offsets_a = offsets_a[:keep_a] if offsets else None
            offsets_b = offsets_b[:keep_b] if offsets and ids_b is not None else None
            length = limit
        return {"a": ids_a, "b": ids_b, "offsets_a": offsets_a, "offsets_b": offsets_b,
                "length": length}

    def _ids(self, text, offsets: bool):
        if not offsets:
            return self.encode(text), None
        return self.encode_with_offsets(text)


def _converted(batch: dict[str, list], return_tensors: str | None, single: bool) -> dict:
    if return_tensors is None:
        return {name: rows[0] for name, rows in batch.items()} if single else batch
    arrays = {name: np.asarray(rows, np.int32) for name, rows in batch.items()}
    if return_tensors == "np":
        return arrays
    # Deferred on purpose: TensorFlow only when its tensors are asked for.
    import tensorflow as tf

    return {name: tf.constant(value) for name, value in arrays.items()}
