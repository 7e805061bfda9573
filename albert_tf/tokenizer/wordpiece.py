"""WordPiece tokenization on a BERT-style vocab.txt: what every Chinese ALBERT uses.

The original google-research/albert `tokenization.FullTokenizer` without an
`spm_model_file` (BERT's `BasicTokenizer` + `WordpieceTokenizer`), rule for rule:

1. clean: drop U+0000, U+FFFD and controls (C*, but tab, newline, carriage return);
   what ends a word (`is_word_separator`: Zs, those three, U+2028, U+2029) -> " ";
2. with `tokenize_chinese_chars`, a space around every CJK ideograph (`CJK_RANGES`);
3. split at the spaces; each word lower-cased when `do_lower_case`, and accents stripped
   (NFD, then category Mn dropped) when `strip_accents` says so: None (the original's
   rule) strips exactly when lower-casing;
4. split off every punctuation character (Unicode P*, plus every ASCII character that
   is not a letter, digit or space: BERT's definition, `is_punctuation`);
5. greedy longest-match-first WordPiece, continuations prefixed "##"; a word of more
   than `MAX_WORD_CHARS` characters, or one with a part no piece matches, is [UNK].

Text is text: "[CLS]" typed in the input is split like any word, as the original does (Hugging
Face matches special tokens in text unless `split_special_tokens`). Hugging Face's Python
`BertTokenizerLegacy` adds an NFC pass the original and its Rust `BertTokenizer` lack; only
cased text with decomposed characters tells them apart (tests/model/test_wordpiece.py).

`vocab_txt.read_vocab` is the one reader of vocab.txt. Pure Python, no TensorFlow.
"""

from __future__ import annotations

import os
import unicodedata
from collections.abc import Sequence

from albert_tf.errors import shown
from albert_tf.tokenizer.packing import Packing
from albert_tf.tokenizer.vocab_txt import (  # the vocab.txt reader's names, re-exported
    SPECIAL_TOKENS,
    UNK_TOKEN,
    VocabFileError,
    read_vocab,
)

__all__ = ["WordPieceTokenizer", "BasicTokenizer", "VocabFileError", "read_vocab", "SPECIAL_TOKENS",
           "CJK_RANGES", "MAX_WORD_CHARS", "SUFFIX", "is_punctuation", "is_control",
           "is_whitespace", "is_cjk", "is_word_separator"]

SUFFIX = "##"  # a piece that continues a word
MAX_WORD_CHARS = 100  # the original's max_input_chars_per_word: longer words are [UNK]
# tensorflow-text's FastWordpieceTokenizer refuses a vocabulary token (without the
# suffix indicator) over this many bytes of UTF-8.
GRAPH_TOKEN_BYTES = 256
# BERT's "Chinese character" ranges (CJK Unified Ideographs and extensions A-E,
# compatibility ideographs): inclusive (first, last) code points.
CJK_RANGES = ((0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F),
              (0x2B740, 0x2B81F), (0x2B820, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F))
_ASCII_PUNCTUATION = ((33, 47), (58, 64), (91, 96), (123, 126))


def is_whitespace(char: str) -> bool:
    """BERT's whitespace: space, tab, newline, carriage return, category Zs."""
    return char in " \t\n\r" or unicodedata.category(char) == "Zs"


def is_control(char: str) -> bool:
    """BERT's control characters: category C* except tab, newline, carriage return."""
    return char not in "\t\n\r" and unicodedata.category(char).startswith("C")


def is_word_separator(char: str) -> bool:
    """Whether `char` ends a word of raw text, as BERT splits it: its whitespace and U+2028,
    U+2029 (`str.split`); the controls it drops (\\v \\f \\x1c-\\x1f \\x85) join a word.
    The one rule for both tokenizers, the served entities and fine-tuning's NER files."""
    return (char.isspace() or is_whitespace(char)) and not is_control(char)


def is_punctuation(char: str) -> bool:
    """BERT's punctuation: category P*, or ASCII that is no letter, digit or space."""
    cp = ord(char)
    return (any(lo <= cp <= hi for lo, hi in _ASCII_PUNCTUATION)
            or unicodedata.category(char).startswith("P"))


def is_cjk(char: str) -> bool:
    """Whether `char` is in one of BERT's CJK ideograph ranges (`CJK_RANGES`)."""
    cp = ord(char)
    return any(lo <= cp <= hi for lo, hi in CJK_RANGES)


def _to_text(text: str | bytes) -> str:
    if isinstance(text, bytes):
        # U+FFFD is dropped by cleaning: the same as the original's errors="ignore".
        return text.decode("utf-8", errors="replace")
    if not isinstance(text, str):
        raise TypeError(f"text must be str or bytes, got {type(text).__name__}: {text!r:.80}")
    return text


class BasicTokenizer:
    """BERT's basic tokenizer (steps 1-4): the words WordPiece is applied to.

    Needs no vocabulary: `albert-tf vocab --model-type wordpiece` counts its words to
    learn one, so a trained vocab.txt holds exactly the words this tokenizer makes.

    Args:
      do_lower_case, strip_accents, tokenize_chinese_chars: see `WordPieceTokenizer`.
    """

    def __init__(self, do_lower_case: bool = True, *, strip_accents: bool | None = None,
                 tokenize_chinese_chars: bool = True, split_characters: bool = False):
        self.do_lower_case = bool(do_lower_case)
        self.strip_accents = None if strip_accents is None else bool(strip_accents)
        self.tokenize_chinese_chars = bool(tokenize_chinese_chars)
        self.split_characters = bool(split_characters)

    @property
    def strips_accents(self) -> bool:
        """Whether accents are stripped: `strip_accents`, or lower-casing when it is None."""
        return self.do_lower_case if self.strip_accents is None else self.strip_accents

    @property
    def keep_accents(self) -> bool:
        """The task record's name for not stripping accents (`not strips_accents`)."""
        return not self.strips_accents

    def clean(self, text: str | bytes) -> str:
        """Steps 1 and 2: control characters dropped, whitespace -> " ", CJK spaced
        (every character, with `split_characters`)."""
        out = []
        for char in _to_text(text):
            if self.dropped(char):
                continue
            if self.spacing(char):
                out.append(" ")
            elif self.split_characters or (self.tokenize_chinese_chars and is_cjk(char)):
                out.append(f" {char} ")
            else:
                out.append(char)
        return "".join(out)

    # The character rules, one method each (a tokenizer.json's BertNormalizer has its own).
    lowers_final_sigma = True  # `lower` is str.lower (Final_Sigma); the graph follows it

    @staticmethod
    def dropped(char: str) -> bool:
        """Step 1's dropped characters: U+0000, U+FFFD, control (`is_control`)."""
        return char in "\x00\ufffd" or is_control(char)

    @staticmethod
    def spacing(char: str) -> bool:
        """Step 1's whitespace, made a space: where a word ends (`is_word_separator`)."""
        return is_word_separator(char)

    @classmethod
    def is_word_separator(cls, char: str) -> bool:
        """Where this tokenizer ends a word of raw text (fine-tuning's NER files read it)."""
        return cls.spacing(char)

    @staticmethod
    def lower(word: str) -> str:
        """Step 3's lower-casing: `str.lower`."""
        return word.lower()

    def basic_tokenize(self, text: str | bytes) -> list[str]:
        """Words before WordPiece: cleaned, cased, accents and punctuation split off."""
        words = []
        for word in self.clean(text).split():
            words.extend(_split_punctuation(self.fold(word)))
        return words

    def fold(self, word: str) -> str:
        """Step 3 on a cleaned word: lower-cased, then NFD without marks (Mn), as the
        options say."""
        if self.do_lower_case:
            word = self.lower(word)
        if self.strips_accents:
            word = "".join(c for c in unicodedata.normalize("NFD", word)
                           if unicodedata.category(c) != "Mn")
        return word

    def normalize(self, text: str | bytes) -> str:
        """The words WordPiece sees, joined by single spaces."""
        return " ".join(self.basic_tokenize(text))

    def words_with_origins(self, text: str | bytes) -> list[tuple[str, list[int]]]:
        """`basic_tokenize(text)`'s words, each with the index in `text` (as str) of the
        character every one of its characters came from.

        Every step but splitting maps one character to a known number of characters
        (lower-casing: `len(c.lower())`; NFD: `len(NFD(c))`), so the origins follow the
        words character by character. Only canonical reordering of stacked combining
        marks could move a character inside its cluster (its origin stays in it).
        """
        text = _to_text(text)
        words, word, origin = [], [], []
        for char, source in self.clean_with_origins(text):
            if char.isspace():  # str.split's whitespace
                if word:
                    words.append(("".join(word), origin))
                word, origin = [], []
            else:
                word.append(char)
                origin.append(source)
        if word:
            words.append(("".join(word), origin))
        out = []
        for word, origin in words:
            if self.do_lower_case:
                origin = [o for c, o in zip(word, origin) for _ in c.lower()]
                word = self.lower(word)
            if self.strips_accents:
                origin = [o for c, o in zip(word, origin)
                          for _ in unicodedata.normalize("NFD", c)]
                kept = [(c, o) for c, o in zip(unicodedata.normalize("NFD", word), origin)
                        if unicodedata.category(c) != "Mn"]
                word, origin = "".join(c for c, _ in kept), [o for _, o in kept]
            position = 0
            for part in _split_punctuation(word):
                out.append((part, origin[position:position + len(part)]))
                position += len(part)
        return out

    def clean_with_origins(self, text: str) -> list[tuple[str, int]]:
        """`clean(text)` as (character, index in `text` it came from) pairs."""
        out = []
        for index, char in enumerate(self.clean(char) for char in text):
            out.extend((c, index) for c in char)
        return out


class WordPieceTokenizer(BasicTokenizer, Packing):
    """BERT-style WordPiece on a vocab.txt, the original ALBERT rules (pure Python).

    The same surface as `AlbertTokenizer` (tokenize, encode, decode, pack,
    encode_pair, the special ids, vocab_size), so every stage takes either.

    Args:
      vocab_path: the vocab.txt (one token a line; `read_vocab`).
      do_lower_case: lower-case each word (True for the Chinese ALBERT models).
      strip_accents: strip accents (NFD, drop Mn); None: when `do_lower_case`
        (the original; tokenizer_config.json's `strip_accents`).
      tokenize_chinese_chars: make every CJK ideograph a word of its own (True;
        tokenizer_config.json's `tokenize_chinese_chars`).
      split_characters: make every character a word of its own: what a model
        fine-tuned on one-character-a-line files (Chinese NER) saw (False).

    Example:
      >>> tok = WordPieceTokenizer("vocab.txt")
      >>> tok.tokenize("我爱Tokyo!")   # ['我', '爱', 'tokyo', '!'] with such a vocabulary
    """

    kind = "wordpiece"

    def __init__(self, vocab_path: str | os.PathLike, do_lower_case: bool = True, *,
                 strip_accents: bool | None = None, tokenize_chinese_chars: bool = True,
                 split_characters: bool = False):
        super().__init__(do_lower_case, strip_accents=strip_accents,
                         tokenize_chinese_chars=tokenize_chinese_chars,
                         split_characters=split_characters)
        self.vocab_path = os.fspath(vocab_path)
        self.tokens = read_vocab(self.vocab_path)
        self.vocab = {token: i for i, token in enumerate(self.tokens)}
        self.pad_id, self.unk_id, self.cls_id, self.sep_id, self.mask_id = (
            self.vocab[t] for t in SPECIAL_TOKENS)

    @property
    def vocab_size(self) -> int:
        """Number of tokens, special ones included."""
        return len(self.tokens)

    @property
    def reachable_tokens(self) -> list[str]:
        """`tokens` with each row no text can produce (an empty line, the earlier line of
        a repeated token, a token longer than `MAX_WORD_CHARS`, which only a word read as
        [UNK] could hold) spelled as a string no word can match: one distinct token per
        id, what the graph's WordPiece op is built on. Words never hold a space.

        Raises:
          VocabFileError: a reachable token over the graph op's `GRAPH_TOKEN_BYTES`
            (UTF-8), naming the file and line.
        """
        reachable = []
        for i, t in enumerate(self.tokens):
            if not t or self.vocab[t] != i or len(t.removeprefix(SUFFIX)) > MAX_WORD_CHARS:
                t = f" unreachable row {i} "
            elif len(t.removeprefix(SUFFIX).encode("utf-8")) > GRAPH_TOKEN_BYTES:
                raise VocabFileError(
                    f"{self.token_place(i)}: token {shown(t)!r} is "
                    f"{len(t.encode('utf-8')):,} bytes of UTF-8; the in-graph WordPiece op "
                    f"takes tokens of at most {GRAPH_TOKEN_BYTES} (the Python tokenizer "
                    "reads it)")
            reachable.append(t)
        return reachable

    def token_place(self, token_id: int) -> str:
        """Where the vocabulary holds `token_id`, for a message: FILE:LINE of a vocab.txt."""
        return f"{self.vocab_path}:{token_id + 1}"

    # ---------------------------------------------------------------- wordpiece
    def wordpiece(self, word: str) -> list[str]:
        """Greedy longest-match-first pieces of one word; [UNK] when any part fails."""
        if len(word) > MAX_WORD_CHARS:
            return [UNK_TOKEN]
        pieces, start = [], 0
        while start < len(word):
            end = len(word)
            while end > start:
                piece = word[start:end] if start == 0 else SUFFIX + word[start:end]
                if piece in self.vocab:
                    break
                end -= 1
            if end == start:
                return [UNK_TOKEN]
            pieces.append(piece)
            start = end
        return pieces

    def tokenize(self, text: str | bytes) -> list[str]:
        """The WordPiece tokens of `text` (no [CLS]/[SEP])."""
        return [p for word in self.basic_tokenize(text) for p in self.wordpiece(word)]

    def encode(self, text: str | bytes) -> list[int]:
        """Token ids of `text` (no [CLS]/[SEP])."""
        return [self.vocab[p] for p in self.tokenize(text)]

    def encode_with_offsets(self, text: str | bytes) -> tuple[list[int], list[tuple[int, int]]]:
        """`encode(text)` and each token's (start, end) characters in `text` (as str): the
        characters its piece spells ("##" left out), before lower-casing and accent
        stripping; an [UNK] covers its whole word (as BertTokenizerFast's offsets)."""
        ids, offsets = [], []
        for word, origin in self.words_with_origins(text):
            position = 0
            for piece in self.wordpiece(word):
                ids.append(self.vocab[piece])
                if piece == UNK_TOKEN:
                    offsets.append((origin[0], origin[-1] + 1))
                    continue
                width = len(piece) - (len(SUFFIX) if position else 0)
                offsets.append((origin[position], origin[position + width - 1] + 1))
                position += width
        return ids, offsets

    def decode(self, ids: Sequence[int]) -> str:
        """Text of `ids`: pieces joined by spaces, "##" continuations glued on;
        [PAD], [CLS], [SEP] and [MASK] decode to nothing."""
        skip = {self.pad_id, self.cls_id, self.sep_id, self.mask_id}
        text = " ".join(self.tokens[int(i)] for i in ids if int(i) not in skip)
        return text.replace(" " + SUFFIX, "")

    def id_to_piece(self, piece_id: int) -> str:
        return self.tokens[int(piece_id)]

    def piece_to_id(self, piece: str) -> int:
        return self.vocab.get(piece, self.unk_id)

    def __repr__(self) -> str:
        return (f"WordPieceTokenizer({self.vocab_path!r}, do_lower_case={self.do_lower_case}, "
                f"strip_accents={self.strip_accents}, tokenize_chinese_chars="
                f"{self.tokenize_chinese_chars}, split_characters={self.split_characters}, "
                f"vocab_size={self.vocab_size})")


def _split_punctuation(word: str) -> list[str]:
    """`word` cut before and after every punctuation character (each one a word)."""
    out: list[str] = []
    start_new = True
    for char in word:
        if is_punctuation(char):
            out.append(char)
            start_new = True
        else:
            if start_new:
                out.append("")
            start_new = False
            out[-1] += char
    return out
