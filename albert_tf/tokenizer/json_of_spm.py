"""The tokenizer.json transformers 5 makes of an ALBERT spiece.model (plain Python).

`convert --to hf` writes it beside spiece.model, so transformers 4 (whose AutoTokenizer
reads tokenizer.json when there is one, else converts spiece.model its own way: a
Metaspace without WhitespaceSplit, tabs and newlines kept as characters) and transformers
5 tokenize alike. The content is transformers 5's `AlbertConverter` output:

* added tokens: the model's control and unknown pieces (special) and its user-defined
  symbols (not special), in id order, matched as they are in the raw text;
* normalizer: Replace "``" and "''" by '"', NFKD + StripAccents unless keep_accents,
  Lowercase when do_lower_case, then the model's own character map (Precompiled, base64)
  when it has one;
* pre-tokenizer: WhitespaceSplit, then Metaspace("▁", prepend_scheme "always", split);
* the [CLS] A [SEP] (B [SEP]) template, the Metaspace decoder, the Unigram model of
  the pieces and their scores (byte_fallback off).

Like transformers' own tokenizer, it has no digit-comma rule ("1,000," is not split as
the original ALBERT tokenizer splits it).
"""

from __future__ import annotations

import base64

from albert_tf.errors import UserError
from albert_tf.tokenizer.spm_proto import (
    CONTROL,
    SPIECE_UNDERLINE,
    UNKNOWN,
    USER_DEFINED,
    model_pieces,
    normalizer_spec,
    precompiled_charsmap,
)

__all__ = ["tokenizer_json_of_spm"]

def _special(name: str, type_id: int) -> dict:
    return {"SpecialToken": {"id": name, "type_id": type_id}}


def tokenizer_json_of_spm(model_proto: bytes, do_lower_case: bool, keep_accents: bool,
                          cls: str = "[CLS]", sep: str = "[SEP]",
                          where: str = "the SentencePiece model") -> dict:
    """The tokenizer.json (as a dict) transformers 5's AlbertTokenizer saves for this model.

    Args:
      model_proto: the spiece.model's bytes (a unigram model).
      do_lower_case, keep_accents: AlbertTokenizer's options.
      cls, sep: the template's pieces.
      where: the model's file, for the error.

    Raises:
      UserError: the model has no `cls` or `sep` piece (one line naming `where`).
    """
    pieces = model_pieces(model_proto)
    ids = {piece: i for i, (piece, _, _) in enumerate(pieces)}
    for name in (cls, sep):
        if name not in ids:
            raise UserError(f"{where} has no {name!r} piece, which the tokenizer.json's "
                            "[CLS] A [SEP] template needs")
    unk_id = next((i for i, (_, _, kind) in enumerate(pieces) if kind == UNKNOWN), 0)
    added = [{"id": i, "content": piece, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": kind != USER_DEFINED}
             for i, (piece, _, kind) in enumerate(pieces)
             if kind in (CONTROL, UNKNOWN, USER_DEFINED)]
    normalizers = [{"type": "Replace", "pattern": {"String": "``"}, "content": '"'},
                   {"type": "Replace", "pattern": {"String": "''"}, "content": '"'}]
    if not keep_accents:
        normalizers += [{"type": "NFKD"}, {"type": "StripAccents"}]
    if do_lower_case:
        normalizers.append({"type": "Lowercase"})
    charsmap = precompiled_charsmap(normalizer_spec(model_proto))
    if charsmap:
        normalizers.append({"type": "Precompiled",
                            "precompiled_charsmap": base64.b64encode(charsmap).decode("ascii")})
    metaspace = {"type": "Metaspace", "replacement": SPIECE_UNDERLINE, "prepend_scheme": "always",
                 "split": True}
    single = [_special(cls, 0), {"Sequence": {"id": "A", "type_id": 0}},
              _special(sep, 0)]
    pair = single + [{"Sequence": {"id": "B", "type_id": 1}}, _special(sep, 1)]
    return {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
        "normalizer": {"type": "Sequence", "normalizers": normalizers},
        "pre_tokenizer": {"type": "Sequence",
                          "pretokenizers": [{"type": "WhitespaceSplit"}, metaspace]},
        "post_processor": {
            "type": "TemplateProcessing", "single": single, "pair": pair,
            "special_tokens": {name: {"id": name, "ids": [ids[name]], "tokens": [name]}
                               for name in (cls, sep)}},
        "decoder": dict(metaspace),
        "model": {"type": "Unigram", "unk_id": unk_id,
                  "vocab": [[piece, score] for piece, score, _ in pieces],
                  "byte_fallback": False},
    }
