"""Reading a SentencePiece model file's protocol buffer without the protobuf package:
its fields (`proto_fields`) and the model type (`spm_model_type`). Plain Python; the
in-graph preprocessor and the LiteRT export read the vocabulary through it."""

from __future__ import annotations


def _read_varint(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7


def proto_fields(data: bytes):
    """Yields (field number, wire type, value) of a serialized protobuf message."""
    pos = 0
    while pos < len(data):
        key, pos = _read_varint(data, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _read_varint(data, pos)
        elif wire == 2:
            length, pos = _read_varint(data, pos)
            value, pos = data[pos:pos + length], pos + length
        elif wire in (1, 5):
            size = 8 if wire == 1 else 4
            value, pos = data[pos:pos + size], pos + size
        else:
            raise ValueError(f"unexpected protobuf wire type {wire}")
        yield number, wire, value


def spm_model_type(model_proto: bytes) -> str:
    """"unigram", "bpe", "word" or "char": ModelProto.trainer_spec (2) .model_type (3)."""
    for number, wire, value in proto_fields(model_proto):
        if number == 2 and wire == 2:
            for field, field_wire, field_value in proto_fields(value):
                if field == 3 and field_wire == 0:
                    return {1: "unigram", 2: "bpe", 3: "word", 4: "char"}.get(field_value, "?")
    return "unigram"  # the field's default


# The word-start mark of SentencePiece pieces (and of a tokenizer.json's Metaspace).
SPIECE_UNDERLINE = "\u2581"


# ---------------------------------------------------------------- writing
# SentencePiece.Type (sentencepiece_model.proto)
NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED = 1, 2, 3, 4, 5


def _varint(value: int) -> bytes:
    value &= (1 << 64) - 1  # a negative int32 is written as its 64-bit two's complement
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _field(number: int, value) -> bytes:
    """One field: bytes/str as length-delimited, float as fixed32, int/bool as varint."""
    import struct

    if isinstance(value, str):
        value = value.encode("utf-8")
    if isinstance(value, bytes):
        return _varint(number << 3 | 2) + _varint(len(value)) + value
    if isinstance(value, float):
        return _varint(number << 3 | 5) + struct.pack("<f", value)
    return _varint(number << 3) + _varint(int(value))


def unigram_model_proto(pieces, scores, unk_id: int, control=(), charsmap: bytes = b"",
                        add_dummy_prefix: bool = True, unused=()) -> bytes:
    """A unigram SentencePiece ModelProto of `pieces` and their `scores` (plain Python):
    `unk_id` the UNKNOWN piece, `control` the ids of CONTROL pieces, `unused` of UNUSED
    ones (never produced), the rest NORMAL.
    Its normalizer is `charsmap` (SentencePiece's precompiled map; empty: none), then
    SentencePiece's whitespace rules (runs collapsed, ends stripped, " " -> "▁", a "▁"
    in front when `add_dummy_prefix`)."""
    control, unused = set(control), set(unused)
    body = b"".join(
        _field(1, _field(1, piece) + _field(2, float(score)) + _field(
            3, UNKNOWN if i == unk_id else CONTROL if i in control else
            UNUSED if i in unused else NORMAL))
        for i, (piece, score) in enumerate(zip(pieces, scores)))
    trainer = (_field(3, 1) + _field(4, len(pieces)) + _field(40, unk_id) + _field(41, -1)
               + _field(42, -1) + _field(43, -1))  # unigram; no bos, eos, pad ids of its own
    normalizer = (_field(1, "identity" if not charsmap else "albert_tf_json")
                  + (_field(2, charsmap) if charsmap else b"") + _field(3, add_dummy_prefix)
                  + _field(4, True) + _field(5, True))
    return body + _field(2, trainer) + _field(3, normalizer)
