"""The tokenizer inside a .tflite file gives `AlbertTokenizer`'s ids, run in LiteRT's
interpreter: the parity lines of the tokenizer tests, five vocabularies and
normalisations, single texts and pairs; and its character map, code point by code
point, equals `normalize_text` followed by the model's own normaliser.

The documented exceptions (serving/litert/spm_model.py) are asserted as such: a
word-final capital sigma (lower-cased exports) and invalid UTF-8, which reads the same
once decoded with errors="replace"."""

from __future__ import annotations

import random

import pytest
import sentencepiece as spm
import tensorflow as tf

from albert_tf.serving.litert import runtime
from albert_tf.serving.litert.convert import convert
from albert_tf.serving.litert.spm_model import character_image, lite_model_proto
from albert_tf.serving.litert.tasks import TEXT_SPEC
from albert_tf.serving.litert.text_graph import LiteText, kept_lengths
from albert_tf.tokenizer.spm import (
    CONTROL_SYMBOLS,
    PAD_PIECE,
    UNK_PIECE,
    USER_DEFINED_SYMBOLS,
    AlbertTokenizer,
    normalize_text,
    truncate_seq_pair,
)
from albert_tf.tokenizer.spm_proto import normalizer_spec, precompiled_charsmap
from tests.helpers.tokenizer_cases import INVALID_UTF8, parity_lines

NAMES = ("input_word_ids", "input_mask", "input_type_ids")
VOCABULARIES = [  # fixture, do_lower_case, keep_accents
    ("spm_model_path", True, False), ("cased_spm_model_path", False, False),
    ("digit_comma_spm_model_path", True, False), ("spm_model_path", True, True),
    ("identity_spm_model_path", True, False)]


@pytest.fixture(scope="module")
def identity_spm_model_path(tmp_path_factory, _vocab_corpus_file) -> str:
    """A SentencePiece model trained by SentencePiece's own trainer on `spm_model_path`'s
    sentences, with its special pieces, but with normalization_rule_name=identity, as people
    train who normalise before SentencePiece: it has no character map of its own."""
    prefix = str(tmp_path_factory.mktemp("identity_spm") / "spiece")
    spm.SentencePieceTrainer.train(
        input=_vocab_corpus_file, model_prefix=prefix, model_type="unigram", vocab_size=1000,
        input_sentence_size=0, num_threads=1, minloglevel=2, pad_id=0, unk_id=1, bos_id=-1,
        eos_id=-1, pad_piece=PAD_PIECE, unk_piece=UNK_PIECE, control_symbols=list(CONTROL_SYMBOLS),
        user_defined_symbols=list(USER_DEFINED_SYMBOLS), normalization_rule_name="identity")
    with open(prefix + ".model", "rb") as f:
        assert not precompiled_charsmap(normalizer_spec(f.read()))
    return prefix + ".model"


@pytest.fixture(scope="module")
def lines(corpus_documents) -> list[str]:
    return parity_lines(corpus_documents)


class _Ids:
    """The packed ids as the outputs of a .tflite file (text and pair signatures)."""

    def __init__(self, text: LiteText):
        self.text = text

    @tf.function(input_signature=[TEXT_SPEC])
    def one(self, text):
        return self.text.features(text)

    @tf.function(input_signature=[TEXT_SPEC, TEXT_SPEC])
    def pair(self, text_a, text_b):
        return self.text.features(text_a, text_b)

    def signatures(self):
        return {"serving_default": self.one, "text_pair": self.pair}


def _encode(texts):
    return runtime.strings([t if isinstance(t, bytes) else t.encode("utf-8", "surrogatepass")
                            for t in texts])


def _differing(tok, seq_length, got, texts_a, texts_b=None) -> list[int]:
    """Rows whose ids, mask or type ids differ from `encode_pair` (cut to the file's width)."""
    width = got["input_mask"].shape[1]
    bad = []
    for i, text in enumerate(texts_a):
        want = tok.encode_pair(text, None if texts_b is None else texts_b[i], seq_length)
        if sum(want["input_mask"]) > width or any(
                got[name][i].tolist() != want[name][:width] for name in NAMES):
            bad.append(i)
    return bad


@pytest.mark.parametrize("fixture, lower, keep_accents", VOCABULARIES)
def test_ids_in_the_interpreter_equal_the_python_tokenizer(request, lines, tmp_path, fixture,
                                                           lower, keep_accents):
    tok = AlbertTokenizer(request.getfixturevalue(fixture), lower, keep_accents=keep_accents)
    seconds = random.Random(11).sample(lines, len(lines))
    for seq_length in (9, 128):
        interpreter = runtime.open_interpreter(convert(_Ids(LiteText(tok, seq_length)), "none"))
        got = runtime.call(interpreter, "serving_default", text=_encode(lines))
        assert _differing(tok, seq_length, got, lines) == []
        got = runtime.call(interpreter, "text_pair", text_a=_encode(lines),
                           text_b=_encode(seconds))
        assert _differing(tok, seq_length, got, lines, seconds) == []
    # Invalid UTF-8, the documented exception: the kernel reads a malformed byte as an
    # unknown character where Python's decoder makes U+FFFD, which the model's map drops
    # (a model without a map keeps it, and both read it as unknown). Decoded with
    # errors="replace" first, as apps pass text, the ids agree.
    raw = runtime.call(interpreter, "serving_default", text=_encode(INVALID_UTF8))
    drops = spm.SentencePieceNormalizer(model_proto=tok.model_proto).normalize("\ufffd") == ""
    assert (0 < len(_differing(tok, 128, raw, INVALID_UTF8)) <= len(INVALID_UTF8)) == drops
    decoded = [t.decode("utf-8", "replace") for t in INVALID_UTF8]
    got = runtime.call(interpreter, "serving_default", text=_encode(decoded))
    assert _differing(tok, 128, got, decoded) == []


def test_the_digit_comma_rule_is_exercised(digit_comma_spm_model_path, lines):
    tok = AlbertTokenizer(digit_comma_spm_model_path)
    hits = [t for t in lines if tok.tokenize(t) != tok.sp_model.encode_as_pieces(tok.normalize(t))]
    assert len(hits) > 100  # the test above saw these rows agree


@pytest.mark.parametrize("fixture, lower, keep_accents", VOCABULARIES[:2] + VOCABULARIES[3:])
def test_character_map_is_normalize_text_then_the_models_own(request, lines, fixture, lower,
                                                             keep_accents):
    tok = AlbertTokenizer(request.getfixturevalue(fixture), lower, keep_accents=keep_accents)
    lite = spm.SentencePieceNormalizer(model_proto=lite_model_proto(tok))
    own = spm.SentencePieceNormalizer(model_proto=tok.model_proto)
    chars = [chr(cp) for cp in range(0x110000) if not 0xD800 <= cp <= 0xDFFF]
    rng = random.Random(3)
    alphabet = ["Σ", "A", "'", " ", "\u00a0", "\u0301", "İ", "ß", "Ǆ", "ﬁ", "日", "\x1c", "\u200b",
                "ᄒ", "ᅡ", "ᆫ", "하", "한", "Å", "\u030a", "ﾒ", "ﾞ", "¨", "Ａ", "1", ","]
    combos = ["".join(rng.choices(alphabet, k=rng.randint(0, 8))) for _ in range(20000)]

    def want(text):
        return own.normalize(normalize_text(text, lower, keep_accents))

    # Every code point alone: no exception at all.
    assert [c for c in chars if lite.normalize(c) != want(c)] == []
    sigma = marks = 0
    for text in lines + combos:
        got = lite.normalize(text)
        if got == want(text):
            continue
        if lower and want(text).replace("ς", "σ") == got:
            sigma += 1  # a word-final capital sigma: str.lower's context rule
            continue
        # A mark between two characters that compose (accents stripped): without the
        # marks the map composes them as Python does.
        dropped = "".join(c for c in text if character_image(c, lower, keep_accents) != "")
        assert not keep_accents and dropped != text and lite.normalize(dropped) == want(text), (
            text, want(text), got)
        marks += 1
    assert (sigma > 0) == lower and marks < 100, (sigma, marks)


def test_kept_lengths_is_the_original_truncation():
    cases = [(a, b) for a in range(12) for b in range(12)]
    a = tf.constant([x for x, _ in cases], tf.int32)
    b = tf.constant([y for _, y in cases], tf.int32)
    for budget in range(0, 24):
        kept = [k.numpy().tolist() for k in kept_lengths([a, b], budget)]
        want = [tuple(map(len, truncate_seq_pair(range(x), range(y), budget))) for x, y in cases]
        assert list(zip(*kept)) == want, budget
    assert kept_lengths([a], 5)[0].numpy().tolist() == [min(x, 5) for x, _ in cases]


def test_fill_mask_ids_equal_the_savedmodels_split_at_mask(spm_model_path):
    tok = AlbertTokenizer(spm_model_path)
    text = LiteText(tok, 32, fill_mask=True)
    texts = ["The [MASK] sat on the [MASK].", "x[MASK]y", "[MASK]", "[MASK][MASK]", "no mask",
             "", "3,[MASK] ok", "a  \t [MASK]  b", "Crème [MASK] 1,000, [mask] ÉTÉ"]
    values, splits = (t.numpy().tolist() for t in text.mask_tokenize(tf.constant(texts)))
    for i, t in enumerate(texts):
        parts = [tok.encode(part) for part in t.split("[MASK]")]
        want = [x for part in parts for x in part + [tok.mask_id]][:-1]
        assert values[splits[i]:splits[i + 1]] == want, t
