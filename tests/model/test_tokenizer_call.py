"""`tokenizer(texts, texts_pair, padding, truncation, max_length, return_tensors)`: the
batch call Hugging Face and KerasHub users make, row by row the ids of `encode_pair`."""

from __future__ import annotations

import numpy as np
import pytest

from albert_tf.tokenizer.spm import SPIECE_UNDERLINE, AlbertTokenizer, normalize_text

TEXTS = ["A gripping, funny film.", "Dull.", "Numbers like 1,234, and accents: café!", ""]
PAIRS = ["Is it good?", "Was it long and dull, too long?", "x", "The cast is wonderful."]
NAMES = ("input_word_ids", "input_mask", "input_type_ids")


def _rows(tok, texts, pairs, length):
    rows = [tok.encode_pair(a, None if pairs is None else pairs[i], length)
            for i, a in enumerate(texts)]
    return {name: [row[name] for row in rows] for name in NAMES}


def test_padded_to_the_longest_and_to_max_length_equal_encode_pair(spm_model_path):
    tok = AlbertTokenizer(spm_model_path)
    for pairs in (None, PAIRS):
        got = tok(TEXTS, pairs)
        longest = max(sum(row) for row in got["input_mask"])
        assert all(len(row) == longest for row in got["input_word_ids"])
        assert got == _rows(tok, TEXTS, pairs, longest)
        fixed = tok(TEXTS, pairs, padding="max_length", max_length=40, return_tensors="np")
        want = _rows(tok, TEXTS, pairs, 40)
        for name in NAMES:
            assert fixed[name].dtype == np.int32 and fixed[name].shape == (4, 40)
            np.testing.assert_array_equal(fixed[name], want[name])


def test_truncation_follows_encode_pairs_rule(spm_model_path):
    tok = AlbertTokenizer(spm_model_path)
    for pairs in (None, PAIRS):
        got = tok(TEXTS, pairs, max_length=7)  # shorter than most rows
        assert got == _rows(tok, TEXTS, pairs, 7)
    with pytest.raises(ValueError, match="row 0 has .* tokens, more than max_length=7"):
        tok(TEXTS, max_length=7, truncation=False)
    # without max_length the docstring's default 512 holds for truncation=False too
    long = " ".join(["word"] * 600)
    assert len(tok(long)["input_word_ids"]) == 512
    with pytest.raises(ValueError, match="row 0 has .* tokens, more than max_length=512"):
        tok([long], truncation=False)


def test_one_text_unpadded_rows_and_tensors(spm_model_path):
    tok = AlbertTokenizer(spm_model_path)
    one = tok(TEXTS[0])
    assert one == tok.encode_pair(TEXTS[0], seq_length=len(one["input_word_ids"]))
    assert sum(one["input_mask"]) == len(one["input_mask"])  # no padding for one row
    ragged = tok(TEXTS, padding=False)
    assert [len(r) for r in ragged["input_word_ids"]] == [len(tok.encode(t)) + 2 for t in TEXTS]
    tf = pytest.importorskip("tensorflow")
    tensors = tok(TEXTS, PAIRS, return_tensors="tf")
    assert all(isinstance(v, tf.Tensor) and v.dtype == tf.int32 for v in tensors.values())
    np.testing.assert_array_equal(tensors["input_word_ids"].numpy(),
                                  tok(TEXTS, PAIRS, return_tensors="np")["input_word_ids"])


def test_bad_options_are_named(spm_model_path):
    tok = AlbertTokenizer(spm_model_path)
    with pytest.raises(ValueError, match='padding="max_length" needs max_length'):
        tok(TEXTS, padding="max_length")
    with pytest.raises(ValueError, match="return_tensors='pt' is not one of"):
        tok(TEXTS, return_tensors="pt")
    with pytest.raises(ValueError, match="texts has 4 rows and texts_pair 2"):
        tok(TEXTS, PAIRS[:2])
    with pytest.raises(TypeError, match="texts must be a string or a list of strings"):
        tok(7)


def test_offsets_point_at_each_tokens_characters(spm_model_path, digit_comma_spm_model_path):
    texts = ["  Héllo\tWORLD, it costs 1,000, ok", "Crème brûlée x3, or 12,5,", ""]
    for path in (spm_model_path, digit_comma_spm_model_path):
        tok = AlbertTokenizer(path)
        got = tok(texts, return_offsets_mapping=True)
        for text, ids, offsets, mask in zip(texts, got["input_word_ids"], got["offset_mapping"],
                                            got["input_mask"]):
            real = sum(mask)
            assert offsets[0] == (0, 0) and offsets[real - 1] == (0, 0)  # [CLS], [SEP]
            assert all(o == (0, 0) for o in offsets[real:])  # padding
            previous_end = 0
            for piece_id, (start, end) in zip(ids[1:real - 1], offsets[1:real - 1]):
                piece = tok.id_to_piece(piece_id).lstrip(SPIECE_UNDERLINE)
                assert previous_end <= start <= end <= len(text)
                previous_end = end
                if piece and piece != "<unk>":  # the characters normalize to the piece
                    assert normalize_text(text[start:end]) == piece, (text, piece, start, end)
