"""A Unigram tokenizer.json (transformers 5's ALBERT) in a .tflite file: its rules as one
SentencePiece model that LiteRT's `FastSentencepieceTokenize` kernel runs.

The SavedModel cuts the added tokens out of the raw text with a regex first
(`json_graph.AddedTokenSplit`); LiteRT has no regex op. The rules are composed into
the model instead, so the kernel alone gives `tokenizers`' ids:

* normalizers: each code point c maps to the character map's image of
  `JsonUnigramTokenizer.before_charsmap(c)` (Replace strings, NFKD, StripAccents,
  Lowercase), Unicode White_Space to " " (WhitespaceSplit's set), as
  `spm_model.compose_rules` composes ALBERT's own rules; a Replace of a longer string
  (``, '') is a rule of its own;
* added tokens (the specials and the spiece model's user-defined symbols `( ) " - .`
  ...): each is a rule of the map that rewrites it, in the raw text (longest match,
  as `tokenizers` matches them leftmost-longest), to a private-use character followed
  by a space. That character is a user-defined piece appended to the vocabulary, so
  it comes out as one piece, and the space makes the text after it a new word (which
  gets its "▁", as the text after an added token does). The space before it, if any,
  comes out as a lone "▁" piece: dropped in the graph (`LiteText`), since the text
  before an added token ends a word. A gather then maps each appended piece to its
  added token's id;
* pieces: the file's, in order (ids unchanged); a piece with an inner "▁" is unused
  (split words never hold one), as in the SavedModel's model.

Differences from `tokenizers`, each outside ordinary text: a word that begins with a
typed "▁" (json_graph's difference), a typed private-use character of plane 15
(U+F0000 + k reads as the k-th added token), the character map applied by longest match
(`tokenizers`: by grapheme), and invalid UTF-8 read as an unknown character.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from albert_tf.tokenizer.json_graph import check_graph_shape
from albert_tf.tokenizer.json_unigram import JsonUnigramTokenizer
from albert_tf.tokenizer.spm import SPIECE_UNDERLINE
from albert_tf.tokenizer.tokenizer_json import WHITE_SPACE

from .spm_model import LiteTokenizerError, compose_rules, mapped_code_points, with_character_map

# The k-th added token is read as this code point + k (plane 15, private use).
ADDED_BASE = 0xF0000


@dataclasses.dataclass(frozen=True)
class LiteJsonModel:
    """The SentencePiece model of a tokenizer.json and what the graph does after it.

    model_proto: the model (the file's pieces, then one user-defined piece per added token).
    lookup: int32 [V + A]: the model's id -> the tokenizer's id.
    space_id: the "▁" piece, dropped where an added token follows in the row.
    first_added: the model's id of the first appended piece.
    """

    model_proto: bytes
    lookup: np.ndarray
    space_id: int
    first_added: int


def _spaces(text: str) -> str:
    return "".join(" " if c in WHITE_SPACE else c for c in text)


def lite_json_model(tokenizer: JsonUnigramTokenizer) -> LiteJsonModel:
    """`tokenizer`'s rules as one SentencePiece model (see the module docstring).

    Raises LiteTokenizerError (one line naming the file) for a file it cannot compose:
    another pre-tokenizer shape (`check_graph_shape`), a Metaspace replacement other
    than SentencePiece's "▁", or added tokens with no "▁" piece to drop before them.
    """
    spec = tokenizer.spec
    check_graph_shape(spec)
    mark = tokenizer.metaspace["replacement"]
    if mark != SPIECE_UNDERLINE:
        raise LiteTokenizerError(f"{spec.path}: Metaspace replacement {mark!r}; LiteRT's "
                                 f"SentencePiece kernel writes {SPIECE_UNDERLINE!r}")
    space_id = tokenizer.ids.get(mark)
    if space_id is None and spec.added:
        raise LiteTokenizerError(f"{spec.path} has no {mark!r} piece, which LiteRT needs to "
                                 "tell the space before an added token from the text")
    charsmap = tokenizer.charsmap
    own = tokenizer.sentencepiece_proto(charsmap) if charsmap else None  # none: no map
    replaced = [s["pattern"]["String"] for s in spec.normalizers
                if s["type"] == "Replace" and "String" in s["pattern"]]
    # The code points that stand for themselves under every normalizer are not walked.
    image = {c: " " if c in WHITE_SPACE else tokenizer.before_charsmap(c)
             for c in mapped_code_points(own, "".join(replaced))}
    whole = {key: _spaces(tokenizer.before_charsmap(key)) for key in replaced if len(key) > 1}
    rules = compose_rules(own, image, after=_spaces, whole=whole)
    added = [chr(ADDED_BASE + k) for k in range(len(spec.added))]
    rules.update({token.content: piece + " " for token, piece in zip(spec.added, added)})
    vocab = len(tokenizer.pieces)
    model = tokenizer.sentencepiece_proto(extra=added)
    lookup = np.array(list(range(vocab)) + [token.id for token in spec.added], np.int32)
    return LiteJsonModel(with_character_map(model, sorted(rules.items()), user_defined=added),
                         lookup, -1 if space_id is None else space_id, vocab)
