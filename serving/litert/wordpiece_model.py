"""The WordPiece normaliser inside a .tflite file: BERT's cleaning and casing as a character map.

LiteRT tokenizes WordPiece with tensorflow-text's two kernels, `FastBertNormalize` then
`FastWordpieceTokenize` (end to end: it splits whitespace, punctuation and CJK
ideographs itself, then applies greedy longest-match-first WordPiece). The normaliser
reads a model: a character map from each code point's UTF-8 bytes to its image, kept
in a darts-clone double-array trie. tensorflow-text's own model folds compatibility
characters (NFKC), keeps control characters in cased mode and always strips accents
when lower-casing, which departs from BERT's rules on 1-16% of the WordPiece parity
lines (tools/wordpiece_litert_kernels.py). So this writes the model from the Python
tokenizer's own rules instead: each code point c maps to what `BasicTokenizer` makes of
c alone, i.e. "" for NUL, U+FFFD and control / unassigned / private-use characters,
" " for whitespace, else `c.lower()` when lower-casing, its NFD without marks (Mn) when
stripping accents. A CJK ideograph keeps itself: the tokenizer kernel splits it.

Known differences: a capital sigma ending a word lower-cases to "ς" in Python
(`str.lower`'s final-sigma rule, a context a per-character map cannot see) and to "σ"
here (it changes ids only where the vocabulary holds Greek pieces); and the kernel
bounds a word by UTF-8 bytes where BERT counts characters (100), so a word of at most
100 characters but more than 100 bytes (34+ kana or Thai, 51+ Cyrillic or accented
letters kept) is [UNK] here and WordPiece-split in Python. A model that does not
split CJK ideographs (`tokenize_chinese_chars=False`) cannot be served: the kernel
always splits them.

The model (tensorflow-text's fast_bert_normalizer_model.fbs): a flatbuffer table of
`lower_case_nfd_strip_accents` (bool, unused by the kernel), `trie_array` ([uint32]),
`data_for_codepoint_zero` (int32) and `normalized_string_pool` ([ubyte]); a code point's
value is 0x40000000 | offset << 6 | length of its image in the pool.
"""

from __future__ import annotations

import flatbuffers

from albert_tf.errors import UserError
from albert_tf.tokenizer.wordpiece import WordPieceTokenizer, is_cjk

# The value bits the kernel reads (fast_bert_normalizer.h): "the image differs", then a
# 24-bit offset into the string pool and a 6-bit length.
_DIFFERENT = 0x40000000
_LENGTH_BITS = 6
_MAX_IMAGE_BYTES = (1 << _LENGTH_BITS) - 1
_MAX_POOL_OFFSET = (1 << 24) - 1
# FastBertNormalizerModel's fields, in schema order.
_FIELD_LOWER_CASE, _FIELD_TRIE, _FIELD_ZERO, _FIELD_POOL = range(4)
# darts-clone unit bits (darts.h): a node's own label in the low byte, "has a value" at
# bit 8, the XOR offset to its children from bit 10; a value unit sets the top bit.
_HAS_LEAF = 1 << 8
_OFFSET_SHIFT = 10
_MAX_OFFSET = 1 << 21  # larger offsets need darts-clone's extended form: never built here
_VALUE_FLAG = 0x80000000
_BLOCK = 256


class LiteWordPieceError(UserError):
    """A WordPiece tokenizer whose rules a LiteRT file cannot reproduce."""


def character_image(tokenizer: WordPieceTokenizer, char: str) -> str:
    """What BERT's basic tokenizer makes of one code point alone (before splitting); a
    CJK ideograph keeps itself, unspaced: the tokenizer kernel splits it."""
    return tokenizer.fold(char if is_cjk(char) else tokenizer.clean(char))


def character_map(tokenizer: WordPieceTokenizer) -> dict[int, str]:
    """Every code point (but NUL and the surrogates) whose image is not itself."""
    out = {}
    for code in range(1, 0x110000):
        if 0xD800 <= code < 0xE000:
            continue
        char = chr(code)
        image = character_image(tokenizer, char)
        if image != char:
            out[code] = image
    return out


def normalizer_model(tokenizer: WordPieceTokenizer) -> bytes:
    """The FastBertNormalizerModel flatbuffer of `tokenizer`'s rules (see the docstring).

    Raises:
      LiteWordPieceError: the tokenizer does not split CJK ideographs, or splits every
        character.
    """
    if not tokenizer.tokenize_chinese_chars:
        raise LiteWordPieceError(
            "a WordPiece model with tokenize_chinese_chars=false cannot be a LiteRT file: "
            "LiteRT's WordPiece kernel always splits CJK ideographs; export a SavedModel")
    if tokenizer.split_characters:
        raise LiteWordPieceError(
            "a WordPiece model that reads every character as a word (split_characters) "
            "cannot be a LiteRT file: LiteRT's WordPiece kernel reads runs of letters and "
            "digits as words; export a SavedModel")
    pool, offsets, values = bytearray(), {}, {}
    for code, image in character_map(tokenizer).items():
        data = image.encode("utf-8")
        if len(data) > _MAX_IMAGE_BYTES:
            raise LiteWordPieceError(f"U+{code:04X} normalises to {len(data)} bytes; the LiteRT "
                                     f"normaliser holds at most {_MAX_IMAGE_BYTES}")
        if data not in offsets:
            found = pool.find(data) if data else 0
            offsets[data] = found if found >= 0 else len(pool)
            if found < 0:
                pool += data
        values[chr(code).encode("utf-8")] = _DIFFERENT | offsets[data] << _LENGTH_BITS | len(data)
    if len(pool) > _MAX_POOL_OFFSET:
        raise LiteWordPieceError(f"the LiteRT normaliser's strings take {len(pool)} bytes; "
                                 f"at most {_MAX_POOL_OFFSET}")
    zero = _DIFFERENT  # NUL is dropped: an empty image
    return _flatbuffer(double_array(values), zero, bytes(pool))


def _flatbuffer(units: list[int], zero: int, pool: bytes) -> bytes:
    builder = flatbuffers.Builder(4 * len(units) + len(pool) + 1024)
    pool_vector = builder.CreateByteVector(pool or b"\0")
    builder.StartVector(4, len(units), 4)
    for unit in reversed(units):
        builder.PrependUint32(unit)
    trie_vector = builder.EndVector()
    builder.StartObject(4)
    builder.PrependBoolSlot(_FIELD_LOWER_CASE, False, False)
    builder.PrependUOffsetTRelativeSlot(_FIELD_TRIE, trie_vector, 0)
    builder.PrependInt32Slot(_FIELD_ZERO, zero, 0)
    builder.PrependUOffsetTRelativeSlot(_FIELD_POOL, pool_vector, 0)
    builder.Finish(builder.EndObject())
    return bytes(builder.Output())


def double_array(values: dict[bytes, int]) -> list[int]:
    """A darts-clone double array of `values` (keys without NUL bytes, values < 2**31).

    A node at index i with children block `base` stores `i ^ base`; its child of byte c
    sits at `base ^ c` and stores c, its value at `base ^ 0`. Identical subtrees share
    one children block (darts-clone's DAWG sharing): the map's millions of removed
    unassigned code points are a few hundred blocks. Distinct blocks never share a
    base, so a byte a node lacks never lands on another node's child of that byte.
    """
    root: dict = {}
    for key, value in values.items():
        node = root
        for byte in key:
            node = node.setdefault(byte, {})
        node[None] = value
    shapes, ids = [], {}  # a unique subtree: (value or None, ((byte, child shape), ...))

    def intern(node: dict) -> int:
        shape = (node.get(None), tuple(sorted((b, intern(child)) for b, child in node.items()
                                              if b is not None)))
        if shape not in ids:
            ids[shape] = len(shapes)
            shapes.append(shape)
        return ids[shape]

    root_shape = intern(root)
    bases = _place_blocks(shapes)
    units = [0] * (max(base ^ label for shape, base in zip(shapes, bases) if base is not None
                       for label in _labels(shape)) + 1)

    def unit(index: int, shape: int, label: int) -> int:
        value, _ = shapes[shape]
        out = label | (_HAS_LEAF if value is not None else 0)
        if bases[shape] is not None:
            offset = index ^ bases[shape]
            if offset >= _MAX_OFFSET:
                raise LiteWordPieceError("the LiteRT normaliser's trie outgrew darts-clone's "
                                         "short offsets")
            out |= offset << _OFFSET_SHIFT
        return out

    units[0] = unit(0, root_shape, 0)
    for (value, children), base in zip(shapes, bases):
        if base is None:
            continue
        if value is not None:
            units[base] = value | _VALUE_FLAG
        for label, child in children:
            units[base ^ label] = unit(base ^ label, child, label)
    return units


def _labels(shape: tuple) -> list[int]:
    value, children = shape
    return ([0] if value is not None else []) + [label for label, _ in children]


def _place_blocks(shapes: list[tuple]) -> list[int | None]:
    """A distinct children base for each subtree: wide ones in fresh 256-unit blocks,
    the rest first-fit in the gaps (index 0 is the root's own unit)."""
    used = bytearray(_BLOCK * 4)
    used[0] = 1
    taken: set[int] = set()
    bases: list[int | None] = [None] * len(shapes)
    top, free = _BLOCK, 1
    for shape in sorted(range(len(shapes)), key=lambda s: -len(_labels(shapes[s]))):
        labels = _labels(shapes[shape])
        if not labels:
            continue
        if len(labels) > 4:
            base, top = top, top + _BLOCK
        else:
            while used[free] or free in taken:
                free += 1
            base = free
            while base in taken or any(used[base ^ label] for label in labels):
                base += 1
        while len(used) < max(top, base | (_BLOCK - 1)) + _BLOCK:
            used.extend(bytes(len(used)))
        taken.add(base)
        bases[shape] = base
        for label in labels:
            used[base ^ label] = 1
    return bases
