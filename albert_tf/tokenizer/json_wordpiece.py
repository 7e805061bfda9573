"""A WordPiece tokenizer.json applied: `WordPieceTokenizer` with the file's vocabulary and
its BertNormalizer's options (`tokenizer_json` reads and checks the file). Pure Python."""

from __future__ import annotations

import unicodedata

from albert_tf.tokenizer.tokenizer_json import WHITE_SPACE, TokenizerJson, split_added
from albert_tf.tokenizer.wordpiece import SPECIAL_TOKENS, WordPieceTokenizer, _to_text

__all__ = ["JsonWordPieceTokenizer"]


class JsonWordPieceTokenizer(WordPieceTokenizer):
    """`WordPieceTokenizer` with the vocabulary and options of a WordPiece tokenizer.json.

    BertNormalizer's lowercase, strip_accents and handle_chinese_chars are
    do_lower_case, strip_accents and tokenize_chinese_chars; BertPreTokenizer is the
    basic tokenizer's whitespace and punctuation split; the WordPiece model is the
    same greedy "##" longest match; the added tokens (the specials) are cut out of the
    text first. Where `tokenizers`' BertNormalizer departs from the original rules, its
    own apply: unassigned code points are kept (only Cc, Cf, Co and Cs are dropped as
    control), U+2028 and U+2029 are whitespace, and lower-casing goes code point by code
    point (a capital sigma is always "σ").
    """

    lowers_final_sigma = False

    @staticmethod
    def dropped(char: str) -> bool:
        return char in "\x00\ufffd" or (char not in "\t\n\r" and unicodedata.category(
            char) in ("Cc", "Cf", "Co", "Cs"))

    @staticmethod
    def spacing(char: str) -> bool:
        return char in WHITE_SPACE

    @staticmethod
    def lower(word: str) -> str:
        return "".join(c.lower() for c in word)

    def __init__(self, spec: TokenizerJson):
        bert = spec.bert
        self.spec = spec
        super(WordPieceTokenizer, self).__init__(  # BasicTokenizer: nothing read from a file
            bert["lowercase"], strip_accents=bert["strip_accents"],
            tokenize_chinese_chars=bert["handle_chinese_chars"])
        self.vocab_path = spec.path
        self.tokens = [token for token, _ in spec.vocab]
        self.vocab = {token: i for i, token in enumerate(self.tokens)}
        self.pad_id, self.unk_id, _, _, self.mask_id = (self.vocab[t] for t in SPECIAL_TOKENS)
        self.cls_id, self.sep_id = spec.cls_id, spec.sep_id

    def token_place(self, token_id: int) -> str:
        return f"{self.vocab_path} (model.vocab, id {token_id})"

    def _stretches(self, text):
        text = _to_text(text)
        return text, split_added(text, self.spec.added)

    def tokenize(self, text: str | bytes) -> list[str]:
        """The tokens of `text`, the added tokens (the specials) matched in it first."""
        text, stretches = self._stretches(text)
        pieces = []
        for s, e, token in stretches:
            pieces += WordPieceTokenizer.tokenize(self, text[s:e]) if token is None else [
                self.tokens[token]]
        return pieces

    def encode(self, text: str | bytes) -> list[int]:
        return [self.vocab[piece] for piece in self.tokenize(text)]

    def encode_with_offsets(self, text: str | bytes) -> tuple[list[int], list[tuple[int, int]]]:
        text, stretches = self._stretches(text)
        ids, offsets = [], []
        for s, e, token in stretches:
            if token is not None:
                ids.append(token)
                offsets.append((s, e))
                continue
            part_ids, part_offsets = super().encode_with_offsets(text[s:e])
            ids += part_ids
            offsets += [(a + s, b + s) for a, b in part_offsets]
        return ids, offsets
