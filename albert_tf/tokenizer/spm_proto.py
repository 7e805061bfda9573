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
