"""`JsonUnigramTokenizer`: a Unigram tokenizer.json (transformers' AlbertTokenizer) applied
as the file says, in Python (no sentencepiece, no TensorFlow).

The steps, each the `tokenizers` library's rule:

1. added tokens (the specials and the spiece model's user-defined symbols) are cut out
   of the raw text, leftmost-longest, each its own id (`lstrip`/`rstrip` take the
   whitespace beside it); every other stretch goes through 2-4 on its own;
2. the normalizers in order: Replace (a string, or " {2,}" -> " "), NFKD / NFD / NFKC /
   NFC, StripAccents (drops every General_Category M* code point, not only the
   combining ones the original drops), Lowercase (code point by code point: a capital
   sigma is always "σ"), Precompiled (SentencePiece's character map: a grapheme of
   under 6 bytes rewritten by its shortest matching prefix, else code point by code
   point, as `tokenizers` does);
3. WhitespaceSplit (Unicode White_Space), then Metaspace: " " -> "▁", a "▁" put in
   front as prepend_scheme says ("always": every word; "first": a word that begins
   the raw text),
   split before each "▁";
4. Unigram: the Viterbi best segmentation of each word by the pieces' scores, ties to
   the earliest-starting last piece; a character no piece starts with is unknown
   (score min - 10), and a run of unknowns is one <unk>.

Unlike `AlbertTokenizer` there is no digit-comma rule and `` '' become '"': a model
fine-tuned in transformers 5 learned these pieces. Packing is `Packing`'s.
"""

from __future__ import annotations

import re
import struct
import unicodedata
from collections.abc import Sequence

from albert_tf.errors import UserError
from albert_tf.tokenizer.packing import Packing
from albert_tf.tokenizer.spm import (
    CONTROL_SYMBOLS,
    MASK_PIECE,
    PAD_PIECE,
    _to_text,
)
from albert_tf.tokenizer.spm_proto import unigram_model_proto
from albert_tf.tokenizer.tokenizer_json import (
    COLLAPSE_SPACES,
    WHITE_SPACE,
    TokenizerJson,
    TokenizerJsonError,
    split_added,
)

__all__ = ["JsonUnigramTokenizer", "Charsmap", "is_mark"]

UNK_PENALTY = 10.0  # tokenizers' K_UNK_PENALTY (and SentencePiece's kUnkPenalty)
_GRAPHEME_EXTEND = frozenset("\u200d") | frozenset(chr(c) for c in range(0xFE00, 0xFE10))


def is_mark(char: str) -> bool:
    """StripAccents' test: General_Category Mark (Mn, Mc, Me)."""
    return unicodedata.category(char).startswith("M")


class Charsmap:
    """SentencePiece's precompiled character map (a darts-clone trie + the replacements),
    as tokenizer.json's Precompiled normalizer holds it."""

    def __init__(self, blob: bytes):
        if len(blob) < 4:
            raise ValueError("precompiled_charsmap is too short")
        (trie_size,) = struct.unpack_from("<I", blob)
        self.units = struct.unpack_from(f"<{trie_size // 4}I", blob, 4)
        self.normalized = blob[4 + trie_size:]

    def shortest(self, text: str) -> str | None:
        """The replacement of the shortest key that begins `text` (None: no key does)."""
        units, pos = self.units, 0
        pos ^= (units[0] >> 10) << ((units[0] & (1 << 9)) >> 6)
        for byte in text.encode("utf-8"):
            pos ^= byte
            unit = units[pos]
            if (unit & ((1 << 31) | 0xFF)) != byte:
                return None
            pos ^= (unit >> 10) << ((unit & (1 << 9)) >> 6)
            if (unit >> 8) & 1:
                start = units[pos] & ((1 << 31) - 1)
                end = self.normalized.index(b"\0", start)
                return self.normalized[start:end].decode("utf-8")
        return None


# A normalized text: (character, start, end) per character, start/end its span in the raw text.
Aligned = list


def _graphemes(chars: Aligned) -> list[Aligned]:
    """Extended grapheme clusters, as far as the map's under-6-byte rule can see them:
    a character with the marks, joiners and variation selectors after it; CR LF."""
    clusters: list[Aligned] = []
    for item in chars:
        char = item[0]
        joins = clusters and (is_mark(char) or char in _GRAPHEME_EXTEND
                              or clusters[-1][-1][0] == "\u200d"
                              or (char == "\n" and clusters[-1][-1][0] == "\r"))
        if joins:
            clusters[-1].append(item)
        else:
            clusters.append([item])
    return clusters


def _span(items: Aligned) -> tuple[int, int]:
    return min(i[1] for i in items), max(i[2] for i in items)


def _replace(chars: Aligned, pattern: re.Pattern, content: str) -> Aligned:
    text = "".join(c for c, _, _ in chars)
    out, position = [], 0
    for match in pattern.finditer(text):
        if match.start() == match.end():
            continue
        out.extend(chars[position:match.start()])
        matched = chars[match.start():match.end()]
        # tokenizers aligns the content with the match's last characters
        out.extend((c, *matched[max(0, len(matched) - len(content) + i)][1:])
                   for i, c in enumerate(content))
        position = match.end()
    return out + chars[position:]


def _unicode_form(chars: Aligned, form: str) -> Aligned:
    """`form` with each output character kept on the span it came from: character by
    character where that equals the whole text's result, else by cluster."""
    text = "".join(c for c, _, _ in chars)
    whole = unicodedata.normalize(form, text)
    each = [(n, s, e) for c, s, e in chars for n in unicodedata.normalize(form, c)]
    if "".join(c for c, _, _ in each) == whole:
        return each
    out = []
    for cluster in _graphemes(chars):
        start, end = _span(cluster)
        out.extend((n, start, end) for n in unicodedata.normalize(
            form, "".join(c for c, _, _ in cluster)))
    if "".join(c for c, _, _ in out) != whole:  # compositions across clusters: one span
        start, end = _span(chars) if chars else (0, 0)
        out = [(n, start, end) for n in whole]
    return out


def _precompiled(chars: Aligned, charsmap: Charsmap) -> Aligned:
    out = []
    for cluster in _graphemes(chars):
        text = "".join(c for c, _, _ in cluster)
        if len(text.encode("utf-8")) < 6:
            replaced = charsmap.shortest(text)
            if replaced is not None:
                start, end = _span(cluster)
                out.extend((n, start, end) for n in replaced)
                continue
        for item in cluster:
            replaced = charsmap.shortest(item[0])
            out.extend([item] if replaced is None else [(n, item[1], item[2]) for n in replaced])
    return out


class JsonUnigramTokenizer(Packing):
    """A Unigram tokenizer.json's rules in Python (see the module docstring).

    The same surface as `AlbertTokenizer`: tokenize, encode, encode_with_offsets, decode,
    pack, encode_pair, the special ids ("<pad>", "[CLS]"/"[SEP]" as the template says,
    "[MASK]"), vocab_size.

    Args:
      spec: the file, read by `tokenizer_json.read_tokenizer_json`.
    """

    kind = "sentencepiece"

    def __init__(self, spec: TokenizerJson):
        self.spec = spec
        self.spm_model_path = spec.path
        self.pieces = [piece for piece, _ in spec.vocab]
        self.scores = [score for _, score in spec.vocab]
        self.ids = {piece: i for i, piece in enumerate(self.pieces)}  # the last of a repeat
        self.max_piece = max(len(p) for p in self.pieces)
        self.unk_id, self.cls_id, self.sep_id = spec.unk_id, spec.cls_id, spec.sep_id
        for name in (PAD_PIECE, *CONTROL_SYMBOLS):
            if name not in self.ids:
                raise UserError(f"{spec.path} has no {name!r} piece; an ALBERT vocabulary "
                                f"needs {PAD_PIECE!r} and {', '.join(CONTROL_SYMBOLS)}")
        self.pad_id, self.mask_id = self.ids[PAD_PIECE], self.ids[MASK_PIECE]
        self.unk_score = min(self.scores) - UNK_PENALTY
        self.added = spec.added
        self._steps = [self._compile(step) for step in spec.normalizers]
        self.metaspace = spec.pre_tokenizers[-1]
        self.whitespace_split = len(spec.pre_tokenizers) == 2

    def _compile(self, step: dict):
        kind = step["type"]
        if kind == "Replace":
            pattern = step["pattern"]
            regex = re.compile(COLLAPSE_SPACES if "Regex" in pattern else re.escape(pattern["String"]))
            return lambda chars: _replace(chars, regex, step["content"])
        if kind in ("NFKD", "NFD", "NFKC", "NFC"):
            return lambda chars: _unicode_form(chars, kind)
        if kind == "StripAccents":
            return lambda chars: [item for item in chars if not is_mark(item[0])]
        if kind == "Lowercase":
            return lambda chars: [(n, s, e) for c, s, e in chars for n in c.lower()]
        try:
            charsmap = Charsmap(step["charsmap"])
        except (ValueError, struct.error) as err:
            raise TokenizerJsonError(f"{self.spec.path}: normalizer Precompiled: "
                                     f"{err}") from None
        return lambda chars: _precompiled(chars, charsmap)

    # ------------------------------------------------------------ properties of the file
    @property
    def vocab_size(self) -> int:
        return len(self.pieces)

    @property
    def do_lower_case(self) -> bool:
        return self.spec.do_lower_case

    @property
    def keep_accents(self) -> bool:
        return self.spec.keep_accents

    @property
    def charsmap(self) -> bytes:
        """The file's Precompiled character map (b"": none)."""
        return next((s["charsmap"] for s in self.spec.normalizers
                     if s["type"] == "Precompiled"), b"")

    def sentencepiece_proto(self, charsmap: bytes = b"", extra: Sequence[str] = ()) -> bytes:
        """The file's Unigram model as a SentencePiece model (the graph's and LiteRT's
        kernels): its pieces and scores, then `extra` pieces (score 0); the specials as
        control pieces; pieces with an inner "▁" unused (split words never hold one);
        `charsmap` its normalizer's map."""
        mark = self.metaspace["replacement"]
        return unigram_model_proto(
            self.pieces + list(extra), self.scores + [0.0] * len(extra), self.unk_id,
            charsmap=charsmap, control=(self.pad_id, self.cls_id, self.sep_id, self.mask_id),
            unused=[i for i, p in enumerate(self.pieces) if mark in p[1:]])

    # ------------------------------------------------------------ the steps
    def split_added(self, text: str) -> list[tuple[int, int, int | None]]:
        """Step 1 (`tokenizer_json.split_added`)."""
        return split_added(text, self.added)

    def normalize_aligned(self, text: str, start: int = 0) -> Aligned:
        """Step 2 on `text` (a stretch of the raw text beginning at `start`)."""
        chars = [(c, start + i, start + i + 1) for i, c in enumerate(text)]
        for step in self._steps:
            chars = step(chars)
        return chars

    def before_charsmap(self, text: str) -> str:
        """The normalizers before Precompiled (Replace strings, Unicode forms,
        StripAccents, Lowercase) on `text`: what the character map then reads."""
        chars = [(c, i, i + 1) for i, c in enumerate(text)]
        for spec, step in zip(self.spec.normalizers, self._steps):
            if spec["type"] == "Precompiled":
                break
            chars = step(chars)
        return "".join(c for c, _, _ in chars)

    def normalize(self, text: str | bytes) -> str:
        """The normalized text of every stretch between added tokens, joined by spaces."""
        text = _to_text(text)
        return " ".join("".join(c for c, _, _ in self.normalize_aligned(text[s:e], s))
                        for s, e, token in self.split_added(text) if token is None)

    def words(self, chars: Aligned) -> list[Aligned]:
        """Step 3: WhitespaceSplit, then Metaspace."""
        if self.whitespace_split:
            groups, word = [], []
            for item in chars:
                if item[0] in WHITE_SPACE:
                    if word:
                        groups.append(word)
                    word = []
                else:
                    word.append(item)
            groups += [word] if word else []
        else:
            groups = [chars] if chars else []
        meta = self.metaspace
        mark, scheme = meta["replacement"], meta["prepend_scheme"]
        out = []
        for group in groups:
            group = [(mark if c == " " else c, s, e) for c, s, e in group]
            first = group[0][1] == 0  # "first": the word's original offset is 0
            if (scheme == "always" or (scheme == "first" and first)) and group[0][0] != mark:
                group.insert(0, (mark, group[0][1], group[0][2]))  # the first character's span
            if not meta["split"]:
                out.append(group)
                continue
            current: Aligned = []
            for item in group:  # split before each mark (MergedWithNext)
                if item[0] == mark and current:
                    out.append(current)
                    current = []
                current.append(item)
            out.append(current)
        return out

    def viterbi(self, word: str) -> list[tuple[int, int, int]]:
        """Step 4 on one word: (start, end, id) per piece, a run of unknowns fused."""
        n = len(word)
        best: list[tuple[float, int, int] | None] = [None] * (n + 1)  # (score, start, id)
        best[0] = (0.0, -1, -1)
        for start in range(n):
            if best[start] is None:
                continue
            base, single = best[start][0], False
            for end in range(start + 1, min(n, start + self.max_piece) + 1):
                piece_id = self.ids.get(word[start:end])
                if piece_id is None:
                    continue
                score = base + self.scores[piece_id]
                if best[end] is None or score > best[end][0]:
                    best[end] = (score, start, piece_id)
                single = single or end == start + 1
            if not single:
                score = base + self.unk_score
                if best[start + 1] is None or score > best[start + 1][0]:
                    best[start + 1] = (score, start, self.unk_id)
        pieces, end = [], n
        while end > 0:
            _, start, piece_id = best[end]
            if pieces and piece_id == self.unk_id == pieces[-1][2]:
                pieces[-1] = (start, pieces[-1][1], piece_id)  # fuse unknowns
            else:
                pieces.append((start, end, piece_id))
            end = start
        return pieces[::-1]

    # ------------------------------------------------------------ the surface
    def _tokens(self, text: str | bytes) -> list[tuple[str, int, tuple[int, int]]]:
        """(piece, id, (start, end) in the text as str) of every token."""
        text = _to_text(text)
        out = []
        for start, end, token in self.split_added(text):
            if token is not None:
                out.append((self.pieces[token], token, (start, end)))
                continue
            for word in self.words(self.normalize_aligned(text[start:end], start)):
                spelled = "".join(c for c, _, _ in word)
                for a, b, piece_id in self.viterbi(spelled):
                    spans = [(s, e) for _, s, e in word[a:b] if e > s] or [(word[a][1],) * 2]
                    piece = spelled[a:b] if piece_id == self.unk_id else self.pieces[piece_id]
                    out.append((piece, piece_id, (min(s for s, _ in spans),
                                                  max(e for _, e in spans))))
        return out

    def tokenize(self, text: str | bytes) -> list[str]:
        """The pieces of `text` (an unknown run as its own characters)."""
        return [piece for piece, _, _ in self._tokens(text)]

    def encode(self, text: str | bytes) -> list[int]:
        """Token ids of `text` (no [CLS]/[SEP])."""
        return [piece_id for _, piece_id, _ in self._tokens(text)]

    def encode_with_offsets(self, text: str | bytes) -> tuple[list[int], list[tuple[int, int]]]:
        """`encode(text)` and each token's (start, end) characters in `text` (as str)."""
        tokens = self._tokens(text)
        return [t[1] for t in tokens], [t[2] for t in tokens]

    def decode(self, ids: Sequence[int]) -> str:
        """The Metaspace decoder: pieces joined, "▁" as a space, specials left out."""
        special = {self.pad_id, self.cls_id, self.sep_id, self.mask_id}
        text = "".join(self.pieces[int(i)] for i in ids if int(i) not in special)
        return text.replace(self.metaspace["replacement"], " ").lstrip(" ")

    def id_to_piece(self, piece_id: int) -> str:
        return self.pieces[int(piece_id)]

    def piece_to_id(self, piece: str) -> int:
        return self.ids.get(piece, self.unk_id)

    def split_piece(self, piece: str) -> list[str]:
        """No digit-comma rule in a tokenizer.json: every piece is itself."""
        return [piece]

    def __repr__(self) -> str:
        return f"JsonUnigramTokenizer({self.spec.path!r}, vocab_size={self.vocab_size})"
