"""The SentencePiece model file's wire format (albert_tf.tokenizer.spm_proto), read and
written in plain Python, checked against the sentencepiece library reading the same bytes:
a real model's pieces, a model given another normaliser, and the whitespace setting the
LiteRT export refuses."""

from __future__ import annotations

import io
import os

import numpy as np
import pytest
import sentencepiece as spm

from albert_tf.tokenizer.spm_proto import (
    CONTROL,
    NORMAL,
    UNKNOWN,
    USER_DEFINED,
    model_pieces,
    normalizer_spec,
    precompiled_charsmap,
    removes_extra_whitespaces,
    spm_model_type,
    with_normalizer,
)
from tests.helpers.paths import REAL

REAL_MODEL = os.path.join(REAL, "google_albert", "albertvi_30k-clean.model")


def _processor(model_proto: bytes) -> spm.SentencePieceProcessor:
    sp = spm.SentencePieceProcessor()
    sp.LoadFromSerializedProto(model_proto)
    return sp


def _trained(**options) -> bytes:
    """A small unigram model with ALBERT's special pieces, trained by the sentencepiece
    library itself."""
    lines = ["the cat sat on the mat", "a dog ran in the park", "one two three four five"] * 30
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(lines), model_writer=model,
                                   vocab_size=30, pad_id=0, unk_id=1, bos_id=-1, eos_id=-1,
                                   control_symbols=["[CLS]", "[SEP]", "[MASK]"], minloglevel=2,
                                   **options)
    return model.getvalue()


def test_a_real_models_pieces_scores_and_types_are_the_librarys():
    with open(REAL_MODEL, "rb") as f:
        proto = f.read()
    sp = _processor(proto)
    pieces = model_pieces(proto)
    assert len(pieces) == sp.get_piece_size() == 30000
    assert [p for p, _, _ in pieces] == [sp.id_to_piece(i) for i in range(len(pieces))]
    scores = np.array([s for _, s, _ in pieces], np.float32)
    assert np.array_equal(scores, np.array([sp.get_score(i) for i in range(len(pieces))], np.float32))
    kinds = [k for _, _, k in pieces]
    assert [i for i, k in enumerate(kinds) if k == UNKNOWN] == [sp.unk_id()]
    assert {i for i, k in enumerate(kinds) if k == CONTROL} == {
        i for i in range(len(pieces)) if sp.is_control(i)}
    assert kinds.count(NORMAL) > 29_000
    assert spm_model_type(proto) == "unigram" and removes_extra_whitespaces(proto)
    assert len(precompiled_charsmap(normalizer_spec(proto))) > 100_000  # nmt_nfkc's map


def test_another_normaliser_is_what_the_library_applies():
    proto = _trained()
    rules = [("x", "y"), ("Q", "k")]
    compiled = spm.SentencePieceNormalizer(norm_map=rules).serialized_normalizer_spec()
    out = with_normalizer(proto, b"mine", precompiled_charsmap(compiled), user_defined={b"[MASK]"})
    before, after = _processor(proto), _processor(out)
    # The pieces, scores and ids are kept; the control piece [MASK] is now a user-defined
    # symbol, matched where the text holds it.
    mask = before.piece_to_id("[MASK]")
    assert before.is_control(mask) and [k for p, _, k in model_pieces(proto)][mask] == CONTROL
    assert [(p, s) for p, s, _ in model_pieces(out)] == [(p, s) for p, s, _ in model_pieces(proto)]
    assert [k for _, _, k in model_pieces(out)][mask] == USER_DEFINED
    assert mask not in before.encode("a[MASK]b") and after.encode("a[MASK]b", out_type=str)[2] == "[MASK]"
    assert after.encode("a[MASK]b")[2] == mask
    # The map rewrites as the compiled rules say, before the model's whitespace rules.
    assert after.normalize("xQx  x") == "▁yky▁y" and before.normalize("xQx  x") == "▁xQx▁x"
    assert removes_extra_whitespaces(out) and spm_model_type(out) == "unigram"


def test_kept_extra_whitespace_is_read_and_refused_by_the_litert_export(tmp_path):
    from albert_tf.serving.litert.spm_model import LiteTokenizerError, check_convertible
    from albert_tf.tokenizer.spm import AlbertTokenizer

    proto = _trained(remove_extra_whitespaces=False)
    assert _processor(proto).normalize("a  b") == "▁a▁▁b"  # the library keeps the run
    assert not removes_extra_whitespaces(proto) and removes_extra_whitespaces(_trained())
    path = tmp_path / "spaces.model"
    path.write_bytes(proto)
    with pytest.raises(LiteTokenizerError, match=f"^{path} keeps extra whitespace"):
        check_convertible(AlbertTokenizer(str(path)))
