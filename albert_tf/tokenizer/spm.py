"""ALBERT tokenization: one definition, the same ids in Python, in tf.data and in a SavedModel.

`AlbertTokenizer` (this module, sentencepiece only, no TensorFlow) reproduces the
original google-research/albert `tokenization.py` on a SentencePiece model:

1. `normalize`: the original `preprocess_text` -- collapse every run of
   whitespace (`str.split()`) to one space and strip the ends; NFKD and drop
   every code point whose canonical combining class is non-zero (unless
   `keep_accents`, Hugging Face's option); `str.lower()` when `do_lower_case`.
   Unlike Hugging Face's port, `` and '' are NOT rewritten to '"': the
   original never did, and the released vocabularies were built without it.
2. SentencePiece segmentation, then the original `encode_pieces` digit-comma
   rule: a piece longer than one character that ends in "," after a digit
   ("▁1,000," or "3,") is re-segmented without the comma and "," is appended;
   when the piece had no leading "▁", a leading "▁" that re-segmentation adds
   is removed. (The original wrote that test as a bytes/str comparison that is
   never true on Python 3; we apply the rule it describes, as Hugging Face does.)
3. Ids are `piece_to_id` of the pieces; packing is `[CLS] A [SEP] (B [SEP])`
   with type ids 0 / 1, mask 1 on real tokens and `<pad>` after them;
   over-long pairs lose one token at a time from the longer segment, the second
   on ties (the original `_truncate_seq_pair`; in the graph
   `ragged_rows.trim_segments`, equal to tensorflow-text's `RoundRobinTrimmer`).

Bytes input is decoded as UTF-8 with each invalid sequence replaced by U+FFFD
(Python's `errors="replace"`), which is what the graph does with invalid bytes.

`AlbertPreprocessor`, the in-graph Keras layer, lives in
`albert_tf.tokenizer.preprocessor` (TensorFlow + tensorflow-text); it imports this
module, never the reverse.
"""

from __future__ import annotations

import os
import re
import unicodedata
from collections.abc import Sequence

import sentencepiece as spm

from albert_tf.errors import UserError
from albert_tf.infra import textio
from albert_tf.tokenizer.packing import Packing, cut_text, text_byte_cap, truncate_seq_pair
from albert_tf.tokenizer.spm_proto import SPIECE_UNDERLINE

__all__ = ["AlbertTokenizer", "normalize_text", "truncate_seq_pair", "choice_qa_length",
           "cut_choice", "load_spm_model", "cut_text", "text_byte_cap"]

PAD_PIECE = "<pad>"
UNK_PIECE = "<unk>"
CLS_PIECE, SEP_PIECE, MASK_PIECE = "[CLS]", "[SEP]", "[MASK]"
CONTROL_SYMBOLS = (CLS_PIECE, SEP_PIECE, MASK_PIECE)
# `--user_defined_symbols` of the original spm_train command (ALBERT README):
# always segmented as pieces of their own.
USER_DEFINED_SYMBOLS = ("(", ")", '"', "-", ".", "\u2013", "\u00a3", "\u20ac")

_SURROGATE = re.compile("[\ud800-\udfff]")


def _to_text(text: str | bytes) -> str:
    """Returns `text` as a str of Unicode scalar values (invalid UTF-8 -> U+FFFD)."""
    if isinstance(text, bytes):
        return text.decode("utf-8", errors="replace")
    if not isinstance(text, str):
        raise TypeError(f"text must be str or bytes, got {type(text).__name__}: {text!r:.80}")
    if _SURROGATE.search(text):
        # Lone surrogates cannot be UTF-8 encoded; treat them as the invalid
        # bytes they would be, as the graph would.
        return text.encode("utf-8", errors="surrogatepass").decode("utf-8", errors="replace")
    return text


def normalize_text(text: str | bytes, do_lower_case: bool = True,
                   keep_accents: bool = False) -> str:
    """The original `preprocess_text`: whitespace, NFKD without combining marks, lowercase.

    Example: `normalize_text("  Héllo\\tWORLD ")` -> `"hello world"`.
    """
    text = " ".join(_to_text(text).split())
    if not keep_accents:
        text = unicodedata.normalize("NFKD", text)
        text = "".join(c for c in text if not unicodedata.combining(c))
    if do_lower_case:
        text = text.lower()
    return text


def normalize_with_offsets(text: str | bytes, do_lower_case: bool = True,
                           keep_accents: bool = False) -> tuple[str, list[int]]:
    """`normalize_text(text)` and, per character of it, the index of the character of
    `text` (as str) it comes from: each character is normalized on its own, a run of
    whitespace becomes one space (owned by its first character).

    Raises:
      ValueError: the per-character result differs from `normalize_text`'s (a rule that
        looks across characters changed it; no such text is known for the released rules).
    """
    source = _to_text(text)
    pieces, owners = [], []
    pending_space = None
    for i, char in enumerate(source):
        if char.isspace():  # what str.split() splits on
            if pieces and pending_space is None:
                pending_space = i
            continue
        if pending_space is not None:
            pieces.append(" ")
            owners.append(pending_space)
            pending_space = None
        part = char if keep_accents else "".join(
            c for c in unicodedata.normalize("NFKD", char) if not unicodedata.combining(c))
        part = part.lower() if do_lower_case else part
        pieces.append(part)
        owners.extend([i] * len(part))
    normalized = "".join(pieces)
    if normalized != normalize_text(source, do_lower_case, keep_accents):
        raise ValueError(f"no character offsets for {source!r:.80}: its normalization is not "
                         "character by character")
    return normalized, owners


def _ends_with_digit_comma(piece: str) -> bool:
    return len(piece) > 1 and piece[-1] == "," and piece[-2].isdigit()


def choice_qa_length(max_qa_length: int, seq_length: int) -> int:
    """The pieces a multiple-choice option keeps: `max_qa_length`, at most what a row of
    `seq_length` holds beside [CLS] and two [SEP]s."""
    return min(int(max_qa_length), seq_length - 3)


def cut_choice(context_ids: Sequence, option_ids: Sequence, seq_length: int,
               max_qa_length: int) -> tuple[list, list]:
    """A multiple-choice row's two segments as RACE packs them (the original `race_utils`):
    the option keeps its last `choice_qa_length` pieces, the context is cut to fill the
    rest. The in-graph packings (`AlbertPreprocessor.pack_choices`, the LiteRT file's)
    follow this rule."""
    keep = choice_qa_length(max_qa_length, seq_length)
    option = list(option_ids)[max(0, len(option_ids) - keep):]
    return list(context_ids[:max(0, seq_length - 3 - len(option))]), option


def load_spm_model(spm_model_path: str | os.PathLike) -> tuple[bytes, spm.SentencePieceProcessor]:
    """Reads and parses a SentencePiece .model file; clear errors for missing or corrupt files."""
    path = os.fspath(spm_model_path)
    if not os.path.lexists(path):
        raise FileNotFoundError(f"SentencePiece model not found: {path}")
    proto = textio.read_bytes(path)  # a regular file of bounded size: FileSizeError names it
    processor = spm.SentencePieceProcessor()
    try:
        if not proto:
            raise RuntimeError("the file is empty")
        processor.LoadFromSerializedProto(proto)
    except (RuntimeError, OSError) as err:
        raise UserError(f"{path} is not a valid SentencePiece model: {err}") from None
    return proto, processor


class AlbertTokenizer(Packing):
    """SentencePiece tokenization with the original ALBERT rules (needs only sentencepiece).

    Loads any ALBERT-style model as released (30k-clean.model, Hugging Face's
    spiece.model, or one from `albert-tf vocab`): the special ids are looked up
    by piece name, so "<pad>", "[CLS]", "[SEP]" and "[MASK]" must be pieces.

    Args:
      spm_model_path: the SentencePiece `.model` file.
      do_lower_case: lowercase before segmentation (True for the released models).
      keep_accents: keep combining marks and skip NFKD (Hugging Face's
        `keep_accents`; the original always strips them).

    Example:
      >>> tok = AlbertTokenizer("30k-clean.model")
      >>> tok.tokenize("It costs 1,000,")   # ['▁it', '▁costs', '▁1,000', ',']
      >>> tok.encode_pair("a question", "a passage", seq_length=16)["input_word_ids"]
      >>> tok(["a question", "another"], ["a passage", "its passage"], return_tensors="np")
    """

    kind = "sentencepiece"
    # What ends a word of raw text: every str.isspace character becomes a space (`normalize`).
    is_word_separator = staticmethod(str.isspace)

    def __init__(self, spm_model_path: str | os.PathLike, do_lower_case: bool = True, *,
                 keep_accents: bool = False):
        self.spm_model_path = os.fspath(spm_model_path)
        self.do_lower_case = bool(do_lower_case)
        self.keep_accents = bool(keep_accents)
        self.model_proto, self.sp_model = load_spm_model(self.spm_model_path)
        self.unk_id = self.sp_model.unk_id()
        self.pad_id = self._special_id(PAD_PIECE)
        self.cls_id, self.sep_id, self.mask_id = (self._special_id(p) for p in CONTROL_SYMBOLS)

    def _special_id(self, piece: str) -> int:
        piece_id = self.sp_model.piece_to_id(piece)
        if piece_id == self.unk_id and piece != UNK_PIECE:
            raise UserError(f"{self.spm_model_path} has no {piece!r} piece; an ALBERT "
                             f"vocabulary needs {PAD_PIECE!r} and {', '.join(CONTROL_SYMBOLS)} "
                             f"(train one with `albert-tf vocab`)")
        return piece_id

    @property
    def vocab_size(self) -> int:
        """Number of pieces, special ones included."""
        return self.sp_model.get_piece_size()

    def normalize(self, text: str | bytes) -> str:
        """The text the SentencePiece model sees (see `normalize_text`)."""
        return normalize_text(text, self.do_lower_case, self.keep_accents)

    def tokenize(self, text: str | bytes) -> list[str]:
        """Normalizes and segments `text` into pieces, with the digit-comma rule."""
        pieces = []
        for piece in self.sp_model.encode_as_pieces(self.normalize(text)):
            if _ends_with_digit_comma(piece):
                pieces.extend(self._split_digit_comma(piece))
            else:
                pieces.append(piece)
        return pieces

    def split_piece(self, piece: str) -> list[str]:
        """The digit-comma rule on one piece: `"▁1,000,"` -> `["▁1,000", ","]` (the
        re-segmentation depends on the vocabulary); `[piece]` where it does not apply."""
        return self._split_digit_comma(piece) if _ends_with_digit_comma(piece) else [piece]

    def _split_digit_comma(self, piece: str) -> list[str]:
        # Segment the piece afresh without its comma, then a separate ",". A piece
        # that continued a word ("x3,") must not gain the "▁" that segmenting "3" adds.
        sub = self.sp_model.encode_as_pieces(piece[:-1].replace(SPIECE_UNDERLINE, ""))
        if sub and not piece.startswith(SPIECE_UNDERLINE) and sub[0].startswith(SPIECE_UNDERLINE):
            sub = sub[1:] if sub[0] == SPIECE_UNDERLINE else [sub[0][1:]] + sub[1:]
        return sub + [","]

    def encode(self, text: str | bytes) -> list[int]:
        """Token ids of `text` (no [CLS]/[SEP]): `piece_to_id` of `tokenize(text)`."""
        pieces = self.tokenize(text)
        return list(self.sp_model.piece_to_id(pieces)) if pieces else []

    def encode_with_offsets(self, text: str | bytes) -> tuple[list[int], list[tuple[int, int]]]:
        """`encode(text)` and each token's (start, end) characters in `text` (as str): the
        characters the piece stands for, its leading space left out (a lone "▁" piece:
        an empty span where the space was)."""
        normalized, owners = normalize_with_offsets(text, self.do_lower_case, self.keep_accents)
        byte_to_char = {}  # sentencepiece's offsets are bytes of the UTF-8 text
        position = 0
        for index, char in enumerate(normalized):
            byte_to_char[position] = index
            position += len(char.encode("utf-8"))
        byte_to_char[position] = len(normalized)
        owners = owners + [len(_to_text(text))]  # the end of the text

        def span(start: int, end: int) -> tuple[int, int]:  # normalized chars -> text chars
            while start < end and normalized[start] == " ":
                start += 1
            if start >= end:
                return (owners[start], owners[start]) if start < len(owners) else (0, 0)
            return owners[start], owners[end - 1] + 1

        ids, offsets = [], []
        for piece in self.sp_model.encode(normalized, out_type="proto").pieces:
            start, end = byte_to_char[piece.begin], byte_to_char[piece.end]
            parts = self.split_piece(piece.piece)
            if len(parts) > 1:  # the digit-comma rule: the comma is the span's last character
                cursor = start
                while cursor < end and normalized[cursor] == " ":
                    cursor += 1
                for part in parts[:-1]:
                    width = len(part.replace(SPIECE_UNDERLINE, ""))
                    offsets.append(span(min(cursor, end - 1), min(cursor + width, end - 1)))
                    cursor += width
                offsets.append(span(end - 1, end))
            else:
                offsets.append(span(start, end))
            ids.extend(self.sp_model.piece_to_id(parts))
        return ids, offsets

    def decode(self, ids: Sequence[int]) -> str:
        """Text of `ids`; <pad>, [CLS], [SEP] and [MASK] decode to nothing."""
        return self.sp_model.decode_ids([int(i) for i in ids])

    def id_to_piece(self, piece_id: int) -> str:
        return self.sp_model.id_to_piece(int(piece_id))

    def piece_to_id(self, piece: str) -> int:
        return self.sp_model.piece_to_id(piece)

    def __repr__(self) -> str:
        return (f"AlbertTokenizer({self.spm_model_path!r}, do_lower_case={self.do_lower_case}, "
                f"keep_accents={self.keep_accents}, vocab_size={self.vocab_size})")
