"""A SentencePiece model file's protocol buffer, read and written without the protobuf
package (plain Python): the one home of its wire format and field numbers.

Reading: its fields (`proto_fields`), the model type, the pieces, the normaliser's
spec and character map. Writing: a unigram model of given pieces
(`unigram_model_proto`), and a model with another normaliser (`with_normalizer`).
The in-graph preprocessor, the tokenizer.json writer and the LiteRT export read
the file through it.
"""

from __future__ import annotations

import struct

# Field numbers (sentencepiece_model.proto).
# ModelProto: pieces (1), trainer_spec (2), normalizer_spec (3).
MODEL_PIECES, MODEL_TRAINER, MODEL_NORMALIZER = 1, 2, 3
# ModelProto.SentencePiece: piece (1), score (2), type (3).
PIECE_NAME, PIECE_SCORE, PIECE_TYPE = 1, 2, 3
# TrainerSpec: model_type (3), vocab_size (4), unk/bos/eos/pad ids (40-43).
TRAINER_MODEL_TYPE, TRAINER_VOCAB_SIZE = 3, 4
TRAINER_UNK_ID, TRAINER_BOS_ID, TRAINER_EOS_ID, TRAINER_PAD_ID = 40, 41, 42, 43
# NormalizerSpec: name (1), precompiled_charsmap (2), add_dummy_prefix (3),
# remove_extra_whitespaces (4), escape_whitespaces (5).
SPEC_NAME, SPEC_CHARSMAP, SPEC_ADD_DUMMY_PREFIX = 1, 2, 3
SPEC_REMOVE_EXTRA_WHITESPACES, SPEC_ESCAPE_WHITESPACES = 4, 5

# SentencePiece.Type
NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED = 1, 2, 3, 4, 5
# TrainerSpec.ModelType
_MODEL_TYPES = {1: "unigram", 2: "bpe", 3: "word", 4: "char"}

# Wire types: varint, 64-bit, length-delimited, 32-bit.
_VARINT, _FIXED64, _BYTES, _FIXED32 = 0, 1, 2, 5

# The word-start mark of SentencePiece pieces (and of a tokenizer.json's Metaspace).
SPIECE_UNDERLINE = "\u2581"


# ---------------------------------------------------------------- reading
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
    """Yields (field number, wire type, value) of a serialized protobuf message: an int
    (varint), bytes (length-delimited, or the 4 or 8 bytes of a fixed-width field)."""
    pos = 0
    while pos < len(data):
        key, pos = _read_varint(data, pos)
        number, wire = key >> 3, key & 7
        if wire == _VARINT:
            value, pos = _read_varint(data, pos)
        elif wire == _BYTES:
            length, pos = _read_varint(data, pos)
            value, pos = data[pos:pos + length], pos + length
        elif wire in (_FIXED64, _FIXED32):
            size = 8 if wire == _FIXED64 else 4
            value, pos = data[pos:pos + size], pos + size
        else:
            raise ValueError(f"unexpected protobuf wire type {wire}")
        yield number, wire, value


def _messages(data: bytes, number: int) -> list[bytes]:
    return [value for field, wire, value in proto_fields(data) if field == number and wire == _BYTES]


def spm_model_type(model_proto: bytes) -> str:
    """"unigram", "bpe", "word" or "char" (TrainerSpec.model_type)."""
    for spec in _messages(model_proto, MODEL_TRAINER):
        for field, wire, value in proto_fields(spec):
            if field == TRAINER_MODEL_TYPE and wire == _VARINT:
                return _MODEL_TYPES.get(value, "?")
    return "unigram"  # the field's default


def model_pieces(model_proto: bytes) -> list[tuple[str, float, int]]:
    """(piece, score, type) of every piece, in id order (a field left out: its default)."""
    out = []
    for message in _messages(model_proto, MODEL_PIECES):
        piece, score, kind = "", 0.0, NORMAL
        for field, _, value in proto_fields(message):
            if field == PIECE_NAME:
                piece = value.decode("utf-8")
            elif field == PIECE_SCORE:
                (score,) = struct.unpack("<f", value)
            elif field == PIECE_TYPE:
                kind = value
        out.append((piece, score, kind))
    return out


def normalizer_spec(model_proto: bytes) -> bytes:
    """The model's NormalizerSpec message (its parts joined, as protobuf merges them)."""
    return b"".join(_messages(model_proto, MODEL_NORMALIZER))


def precompiled_charsmap(spec: bytes) -> bytes:
    """A NormalizerSpec's character map (b"": none)."""
    return b"".join(_messages(spec, SPEC_CHARSMAP))


def removes_extra_whitespaces(model_proto: bytes) -> bool:
    """NormalizerSpec.remove_extra_whitespaces (default true)."""
    values = [value for field, wire, value in proto_fields(normalizer_spec(model_proto))
              if field == SPEC_REMOVE_EXTRA_WHITESPACES and wire == _VARINT]
    return bool(values[-1]) if values else True


# ---------------------------------------------------------------- writing
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


def _encoded(number: int, wire: int, value) -> bytes:
    """One field as `proto_fields` reads it: an int for a varint, bytes otherwise."""
    key = _varint(number << 3 | wire)
    if wire == _VARINT:
        return key + _varint(value)
    if wire == _BYTES:
        return key + _varint(len(value)) + value
    return key + value


def _field(number: int, value) -> bytes:
    """One field: bytes/str as length-delimited, float as fixed32, int/bool as varint."""
    if isinstance(value, str):
        value = value.encode("utf-8")
    if isinstance(value, bytes):
        return _encoded(number, _BYTES, value)
    if isinstance(value, float):
        return _encoded(number, _FIXED32, struct.pack("<f", value))
    return _encoded(number, _VARINT, int(value))


def _set_fields(message: bytes, values: dict[int, object]) -> bytes:
    """`message` with each field number of `values` set to its value (`_field`), once."""
    kept = b"".join(_encoded(number, wire, value) for number, wire, value in proto_fields(message)
                    if number not in values)
    return kept + b"".join(_field(number, value) for number, value in values.items())


def unigram_model_proto(pieces, scores, unk_id: int, control=(), charsmap: bytes = b"",
                        add_dummy_prefix: bool = True, unused=()) -> bytes:
    """A unigram SentencePiece ModelProto of `pieces` and their `scores`:
    `unk_id` the UNKNOWN piece, `control` the ids of CONTROL pieces, `unused` of UNUSED
    ones (never produced), the rest NORMAL.
    Its normalizer is `charsmap` (SentencePiece's precompiled map; empty: none), then
    SentencePiece's whitespace rules (runs collapsed, ends stripped, " " -> "▁", a "▁"
    in front when `add_dummy_prefix`)."""
    control, unused = set(control), set(unused)
    body = b"".join(
        _field(MODEL_PIECES, _field(PIECE_NAME, piece) + _field(PIECE_SCORE, float(score)) + _field(
            PIECE_TYPE, UNKNOWN if i == unk_id else CONTROL if i in control else
            UNUSED if i in unused else NORMAL))
        for i, (piece, score) in enumerate(zip(pieces, scores)))
    trainer = (_field(TRAINER_MODEL_TYPE, 1) + _field(TRAINER_VOCAB_SIZE, len(pieces))
               + _field(TRAINER_UNK_ID, unk_id) + _field(TRAINER_BOS_ID, -1)
               + _field(TRAINER_EOS_ID, -1) + _field(TRAINER_PAD_ID, -1))  # no ids of their own
    normalizer = (_field(SPEC_NAME, "identity" if not charsmap else "albert_tf_json")
                  + (_field(SPEC_CHARSMAP, charsmap) if charsmap else b"")
                  + _field(SPEC_ADD_DUMMY_PREFIX, add_dummy_prefix)
                  + _field(SPEC_REMOVE_EXTRA_WHITESPACES, True) + _field(SPEC_ESCAPE_WHITESPACES, True))
    return body + _field(MODEL_TRAINER, trainer) + _field(MODEL_NORMALIZER, normalizer)


def with_normalizer(model_proto: bytes, name: bytes, charsmap: bytes, user_defined=()) -> bytes:
    """`model_proto` whose normaliser is named `name` and maps characters by `charsmap`
    (its other settings kept), the pieces named in `user_defined` (bytes) made
    user-defined symbols (matched in the normalised text as they are)."""
    spec = _set_fields(normalizer_spec(model_proto), {SPEC_NAME: name, SPEC_CHARSMAP: charsmap})
    names = set(user_defined)
    out = bytearray()
    for number, wire, value in proto_fields(model_proto):
        if number == MODEL_PIECES and names:
            value = _user_defined(value, names)
        if number != MODEL_NORMALIZER:
            out += _encoded(number, wire, value)
    return bytes(out + _field(MODEL_NORMALIZER, spec))


def _user_defined(piece: bytes, names: set[bytes]) -> bytes:
    """The piece as a user-defined symbol when named; else as it is."""
    found = [value for number, _, value in proto_fields(piece) if number == PIECE_NAME]
    if len(found) != 1 or found[0] not in names:
        return piece
    return _set_fields(piece, {PIECE_TYPE: USER_DEFINED})
