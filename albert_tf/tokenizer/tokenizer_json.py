"""Hugging Face's tokenizer.json as a tokenizer source: the file read, checked, applied.

transformers 5's `save_pretrained` writes an ALBERT tokenizer as tokenizer.json (with
tokenizer_config.json) only: no spiece.model, no vocab.txt. Two shapes occur, and are
read component by component:

  Unigram (AlbertTokenizer)   normalizer: Sequence of Replace (a string, or the regex
                              " {2,}"), NFKD / NFD / NFKC / NFC, StripAccents, Lowercase,
                              Precompiled (SentencePiece's character map);
                              pre_tokenizer: WhitespaceSplit then Metaspace, or Metaspace;
                              model: Unigram (pieces and scores, no byte fallback);
                              added_tokens: split out of the raw text first (the spiece
                              model's user-defined symbols `( ) " - . – £ €` are such);
                              `json_unigram.JsonUnigramTokenizer`; `kinds.python_tokenizer` builds either
  WordPiece (BertTokenizer)   BertNormalizer + BertPreTokenizer + WordPiece "##": the
                              options map onto `WordPieceTokenizer` (`json_wordpiece.JsonWordPieceTokenizer`)

Both take their [CLS]/[SEP] from the post_processor, which must be the
`[CLS] $A [SEP] $B:1 [SEP]:1` template. Anything else (BPE, WordLevel, another normalizer
or pre-tokenizer, a template of another form) is refused in one line naming the
component and the file (`TokenizerJsonError`). Pure Python.
"""

from __future__ import annotations

import base64
import dataclasses
import functools
import json
import os
from collections.abc import Sequence

from albert_tf.errors import UserError
from albert_tf.infra import textio
from albert_tf.tokenizer.wordpiece import (
    MAX_WORD_CHARS,
    SPECIAL_TOKENS,
    SUFFIX,
    UNK_TOKEN,
)

__all__ = ["TokenizerJsonError", "TokenizerJson", "read_tokenizer_json", "json_kind",
           "AddedToken", "split_added", "WHITE_SPACE"]

UNIGRAM, WORDPIECE_MODEL = "Unigram", "WordPiece"
# The normalizers the Unigram shape may chain, and the regex Replace it may hold.
_UNIGRAM_NORMALIZERS = ("Replace", "NFKD", "NFD", "NFKC", "NFC", "StripAccents", "Lowercase",
                        "Precompiled")
COLLAPSE_SPACES = " {2,}"
# Unicode's White_Space (Rust's char::is_whitespace, which WhitespaceSplit uses): unlike
# str.isspace, not U+001C-U+001F.
WHITE_SPACE = frozenset("\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005"
                        "\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000")
_TEMPLATE_SINGLE = [("SpecialToken", "[CLS]", 0), ("Sequence", "A", 0), ("SpecialToken", "[SEP]", 0)]
_TEMPLATE_PAIR = _TEMPLATE_SINGLE + [("Sequence", "B", 1), ("SpecialToken", "[SEP]", 1)]


class TokenizerJsonError(UserError):
    """A tokenizer.json albert-tf cannot apply: names the file and the component."""


@dataclasses.dataclass(frozen=True)
class AddedToken:
    """One of tokenizer.json's added_tokens: matched in the raw text before anything else."""

    content: str
    id: int
    lstrip: bool = False
    rstrip: bool = False
    special: bool = False


@dataclasses.dataclass(frozen=True)
class TokenizerJson:
    """What a tokenizer.json says, checked.

    kind: "sentencepiece" (a Unigram model) or "wordpiece".
    normalizers: the Unigram shape's chain, each a dict as in the file (Precompiled's
      charsmap decoded to bytes under "charsmap").
    pre_tokenizers: the Unigram shape's, each a dict ("WhitespaceSplit" / "Metaspace").
    vocab: [(piece, score)] (Unigram) or [(token, 0.0)] in id order (WordPiece).
    bert: BertNormalizer's options (WordPiece shape): lowercase, strip_accents,
      handle_chinese_chars.
    """

    path: str
    kind: str
    vocab: tuple
    unk_id: int
    cls_id: int
    sep_id: int
    added: tuple[AddedToken, ...] = ()
    normalizers: tuple = ()
    pre_tokenizers: tuple = ()
    bert: dict = dataclasses.field(default_factory=dict)

    @property
    def do_lower_case(self) -> bool:
        """Whether the file lower-cases (the task record's field)."""
        if self.kind == "wordpiece":
            return bool(self.bert["lowercase"])
        return any(n["type"] == "Lowercase" for n in self.normalizers)

    @property
    def keep_accents(self) -> bool:
        """Whether the file keeps accents (the task record's field)."""
        if self.kind == "wordpiece":
            strip = self.bert["strip_accents"]
            return not (self.bert["lowercase"] if strip is None else strip)
        return not any(n["type"] == "StripAccents" for n in self.normalizers)


def _fail(path: str, message: str):
    raise TokenizerJsonError(f"{path}: {message}; albert-tf reads the Unigram "
                             "(AlbertTokenizer) and WordPiece (BertTokenizer) shapes that "
                             "transformers writes (pass spiece.model or vocab.txt instead)")


def _component(path: str, where: str, value) -> dict:
    if not isinstance(value, dict) or not isinstance(value.get("type"), str):
        _fail(path, f"{where} is {json.dumps(value)[:60]}, not a component with a type")
    return value


def _flatten(path: str, where: str, value, key: str) -> list[dict]:
    """A component, or a Sequence's components, as a list."""
    if value is None:
        return []
    value = _component(path, where, value)
    if value["type"] != "Sequence":
        return [value]
    parts = value.get(key)
    if not isinstance(parts, list):
        _fail(path, f"{where} Sequence has no {key} list")
    return [_component(path, where, part) for part in parts]


def _unigram_normalizers(path: str, normalizer) -> tuple:
    steps = []
    for step in _flatten(path, "normalizer", normalizer, "normalizers"):
        kind = step["type"]
        if kind not in _UNIGRAM_NORMALIZERS:
            _fail(path, f"normalizer {kind} is not one albert-tf applies with a Unigram "
                        f"model ({', '.join(_UNIGRAM_NORMALIZERS)})")
        if kind == "Replace":
            pattern = step.get("pattern") or {}
            if not isinstance(step.get("content"), str) or not (
                    isinstance(pattern.get("String"), str) or pattern.get("Regex") == COLLAPSE_SPACES):
                _fail(path, f"normalizer Replace {json.dumps(pattern)[:60]} is not a plain "
                            f"string nor the regex {COLLAPSE_SPACES!r}")
            if pattern.get("Regex") == COLLAPSE_SPACES and step["content"] != " ":
                _fail(path, f"normalizer Replace {COLLAPSE_SPACES!r} -> {step['content']!r}")
        if kind == "Precompiled":
            step = dict(step, charsmap=base64.b64decode(step.get("precompiled_charsmap") or ""))
        steps.append(step)
    seen = [s["type"] for s in steps]
    if "Precompiled" in seen:  # only whitespace runs collapsed after it (the graph's order)
        after = steps[seen.index("Precompiled") + 1:]
        if any(s["type"] != "Replace" or (s.get("pattern") or {}).get("Regex") != COLLAPSE_SPACES
               for s in after):
            _fail(path, "normalizer: steps after Precompiled other than collapsing spaces")
    return tuple(steps)


def _unigram_pre_tokenizers(path: str, pre_tokenizer) -> tuple:
    steps = _flatten(path, "pre_tokenizer", pre_tokenizer, "pretokenizers")
    names = [s["type"] for s in steps]
    if names not in (["WhitespaceSplit", "Metaspace"], ["Metaspace"]):
        _fail(path, f"pre_tokenizer {' + '.join(names) or 'none'} is not WhitespaceSplit + "
                    "Metaspace nor Metaspace")
    meta = dict(steps[-1])
    if "prepend_scheme" not in meta:  # the older files' add_prefix_space
        meta["prepend_scheme"] = "always" if meta.get("add_prefix_space", True) else "never"
    meta.setdefault("split", True)
    if meta["prepend_scheme"] not in ("always", "first", "never") or not isinstance(
            meta.get("replacement"), str) or len(meta["replacement"]) != 1:
        _fail(path, f"pre_tokenizer Metaspace {json.dumps(steps[-1])[:80]}")
    return tuple(steps[:-1]) + (meta,)


def _special_ids(path: str, processor) -> tuple[int, int]:
    """[CLS] and [SEP]'s ids from the TemplateProcessing post_processor."""
    processor = _component(path, "post_processor", processor)
    if processor["type"] != "TemplateProcessing":
        _fail(path, f"post_processor {processor['type']} is not TemplateProcessing")

    def form(items):
        out = []
        for item in items or []:
            (kind, body), = item.items()
            out.append((kind, body.get("id"), body.get("type_id")))
        return out

    if form(processor.get("single")) != _TEMPLATE_SINGLE or \
            form(processor.get("pair")) != _TEMPLATE_PAIR:
        _fail(path, "post_processor template is not [CLS] $A [SEP] (pair: $B:1 [SEP]:1)")
    special = processor.get("special_tokens") or {}
    ids = []
    for name in ("[CLS]", "[SEP]"):
        found = (special.get(name) or {}).get("ids") or []
        if len(found) != 1:
            _fail(path, f"post_processor gives {name} {found!r}, not one id")
        ids.append(int(found[0]))
    return ids[0], ids[1]


def _added_tokens(path: str, entries, vocab: tuple) -> tuple[AddedToken, ...]:
    """The added tokens, each one of the model's own (tokens added on top of the
    vocabulary, beyond its ids, are refused: the task record knows no such ids)."""
    out = []
    for entry in entries or []:
        if entry.get("single_word") or entry.get("normalized"):
            _fail(path, f"added token {entry.get('content')!r} is single_word or normalized")
        if not 0 <= int(entry["id"]) < len(vocab) or vocab[int(entry["id"])][0] != entry["content"]:
            _fail(path, f"added token {entry.get('content')!r} (id {entry['id']}) is not the "
                        f"model's own token of that id (a vocabulary of {len(vocab)})")
        out.append(AddedToken(entry["content"], int(entry["id"]), bool(entry.get("lstrip")),
                              bool(entry.get("rstrip")), bool(entry.get("special"))))
    return tuple(out)


@functools.lru_cache(maxsize=8)
def _read(path: str, mtime: float) -> TokenizerJson:
    data = json.loads(textio.read_text(path))
    if not isinstance(data, dict) or not isinstance(data.get("model"), dict):
        _fail(path, "not a tokenizer.json (no model object)")
    model = data["model"]
    kind = model.get("type")
    if kind == UNIGRAM:
        return _read_unigram(path, data, model)
    if kind == WORDPIECE_MODEL:
        return _read_wordpiece(path, data, model)
    _fail(path, f"model {kind} is not Unigram nor WordPiece")


def _read_unigram(path: str, data: dict, model: dict) -> TokenizerJson:
    if model.get("byte_fallback"):
        _fail(path, "model Unigram with byte_fallback")
    vocab = model.get("vocab")
    if not isinstance(vocab, list) or not vocab or model.get("unk_id") is None:
        _fail(path, "model Unigram without vocab or unk_id")
    vocab = tuple((str(piece), float(score)) for piece, score in vocab)
    cls_id, sep_id = _special_ids(path, data.get("post_processor"))
    return TokenizerJson(path, "sentencepiece", vocab, int(model["unk_id"]), cls_id, sep_id,
                         _added_tokens(path, data.get("added_tokens"), vocab),
                         _unigram_normalizers(path, data.get("normalizer")),
                         _unigram_pre_tokenizers(path, data.get("pre_tokenizer")))


def _read_wordpiece(path: str, data: dict, model: dict) -> TokenizerJson:
    normalizer = _component(path, "normalizer", data.get("normalizer"))
    if normalizer["type"] != "BertNormalizer":
        _fail(path, f"normalizer {normalizer['type']} with a WordPiece model (BertNormalizer only)")
    if normalizer.get("clean_text") is False:
        _fail(path, "BertNormalizer clean_text false")
    pre = _component(path, "pre_tokenizer", data.get("pre_tokenizer"))
    if pre["type"] != "BertPreTokenizer":
        _fail(path, f"pre_tokenizer {pre['type']} with a WordPiece model (BertPreTokenizer only)")
    if model.get("continuing_subword_prefix", SUFFIX) != SUFFIX or model.get(
            "max_input_chars_per_word", MAX_WORD_CHARS) != MAX_WORD_CHARS or model.get(
            "unk_token", UNK_TOKEN) != UNK_TOKEN:
        _fail(path, "model WordPiece with a prefix, word length or unk_token other than "
                    f"{SUFFIX!r}, {MAX_WORD_CHARS}, {UNK_TOKEN!r}")
    by_id = sorted((int(i), token) for token, i in (model.get("vocab") or {}).items())
    if [i for i, _ in by_id] != list(range(len(by_id))):
        _fail(path, "model WordPiece vocab ids are not 0..n-1")
    tokens = [token for _, token in by_id]
    missing = [t for t in SPECIAL_TOKENS if t not in tokens]
    if missing:
        _fail(path, f"model WordPiece vocab has no {', '.join(missing)}")
    ids = {t: i for i, t in enumerate(tokens)}
    cls_id, sep_id = _special_ids(path, data.get("post_processor"))
    bert = {"lowercase": normalizer.get("lowercase", True) is not False,
            "strip_accents": normalizer.get("strip_accents"),
            "handle_chinese_chars": normalizer.get("handle_chinese_chars", True) is not False}
    vocab = tuple((t, 0.0) for t in tokens)
    return TokenizerJson(path, "wordpiece", vocab, ids[UNK_TOKEN],
                         cls_id, sep_id, _added_tokens(path, data.get("added_tokens"), vocab),
                         bert=bert)


def read_tokenizer_json(path: str | os.PathLike) -> TokenizerJson:
    """The checked content of a tokenizer.json (read once per file version).

    Raises:
      TokenizerJsonError: a component albert-tf does not apply, naming it and the file.
      FileNotFoundError: no such file.
    """
    path = os.fspath(path)
    if not os.path.lexists(path):
        raise FileNotFoundError(f"tokenizer.json not found: {path}")
    try:
        return _read(path, os.stat(path).st_mtime)
    except json.JSONDecodeError as err:
        raise TokenizerJsonError(f"{path}: not valid JSON ({err})") from None
    except (KeyError, TypeError, ValueError) as err:
        if isinstance(err, UserError):
            raise
        raise TokenizerJsonError(f"{path}: unexpected content ({err})") from None


def json_kind(path: str | os.PathLike) -> str:
    """"sentencepiece" for a Unigram tokenizer.json, "wordpiece" for a WordPiece one."""
    return read_tokenizer_json(path).kind


def split_added(text: str, added: Sequence[AddedToken]) -> list[tuple[int, int, int | None]]:
    """`text` cut at the added tokens, as `tokenizers` does before normalizing: (start,
    end, id) stretches, id None for text to tokenize. Leftmost match, the longest
    token there; `lstrip`/`rstrip` take the White_Space beside it."""
    added = sorted(added, key=lambda t: -len(t.content))
    out, position, i = [], 0, 0
    while i < len(text):
        token = next((t for t in added if text.startswith(t.content, i)), None)
        if token is None:
            i += 1
            continue
        start, end = i, i + len(token.content)
        if token.lstrip:
            while start > position and text[start - 1] in WHITE_SPACE:
                start -= 1
        if token.rstrip:
            while end < len(text) and text[end] in WHITE_SPACE:
                end += 1
        if start > position:
            out.append((position, start, None))
        out.append((start, end, token.id))
        position = i = end
    if position < len(text):
        out.append((position, len(text), None))
    return out
