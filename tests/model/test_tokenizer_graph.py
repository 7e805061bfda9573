"""AlbertPreprocessor (in-graph) gives exactly AlbertTokenizer's ids: eagerly, in tf.data,
in a tf.function and in a SavedModel reloaded by a fresh process."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import unicodedata

import keras
import numpy as np
import pytest
import sentencepiece as spm
import tensorflow as tf
import tensorflow_text as tf_text

from albert_tf.tokenizer.preprocessor import AlbertPreprocessor, trim_segments
from albert_tf.tokenizer.ragged_rows import keep_first, keep_where, pack_rows, row_ids
from albert_tf.tokenizer.spm import AlbertTokenizer, normalize_text, truncate_seq_pair
from tests.helpers.fresh_process import SAFETY_NET_S
from tests.helpers.tokenizer_cases import HARD_CASES, INVALID_UTF8, parity_lines

SEQ_LENGTHS = (3, 8, 29, 128)
NAMES = ("input_word_ids", "input_mask", "input_type_ids")


def _strings(texts) -> tf.Tensor:
    return tf.constant([t if isinstance(t, bytes) else t.encode("utf-8", "surrogatepass")
                        for t in texts], tf.string)


def _graph_normalize(texts, do_lower_case=True, keep_accents=False) -> list[str]:
    from albert_tf.tokenizer.normalize_graph import TextNormalizer

    normalizer = tf.function(TextNormalizer(do_lower_case, keep_accents).__call__)
    return [s.decode("utf-8") for s in normalizer(_strings(texts)).numpy().tolist()]


def _mismatches(pre: AlbertPreprocessor, texts_a, texts_b=None) -> list:
    """Rows where the preprocessor and the Python tokenizer disagree (any of the three inputs)."""
    got = pre(_strings(texts_a) if texts_b is None else (_strings(texts_a), _strings(texts_b)))
    got = {k: v.numpy() for k, v in got.items()}
    assert all(got[k].shape == (len(texts_a), pre.seq_length) and got[k].dtype == np.int32
               for k in NAMES)
    bad = []
    for i, text_a in enumerate(texts_a):
        want = pre.tokenizer.encode_pair(text_a, None if texts_b is None else texts_b[i],
                                         pre.seq_length)
        if any(want[k] != got[k][i].tolist() for k in NAMES):
            bad.append((text_a, None if texts_b is None else texts_b[i]))
    return bad


# ---- normalisation -----------------------------------------------------------------------------

@pytest.mark.parametrize("lower, keep_accents", [(True, False), (True, True)])
def test_normalize_every_code_point(lower, keep_accents):
    chars = [chr(cp) for cp in range(0x110000) if not 0xD800 <= cp <= 0xDFFF]
    got = _graph_normalize(chars, lower, keep_accents)
    differ = [c for c, g in zip(chars, got) if g != normalize_text(c, lower, keep_accents)]
    # ICU's NFKD knows a newer Unicode than Python 3.11's unicodedata: only code
    # points that this Python calls unassigned may differ (documented).
    assert all(unicodedata.category(c) == "Cn" for c in differ), [hex(ord(c)) for c in differ
                                                                 if unicodedata.category(c) != "Cn"]
    assert len(differ) < 200


def test_normalize_context_rules():
    # Final sigma, whitespace runs, combining marks and NUL in random combinations.
    alphabet = ["Σ", "σ", "A", "a", "'", ".", " ", "\t", "\u00a0", "\u0301", "\u0345", "\U0001d165",
                "İ", "1", ",", "\x00", "\u200b", "ß", "Ǆ", "ﬁ", "日", "😀", "\ufffd", "\x1c"]
    rng = random.Random(3)
    texts = ["".join(rng.choices(alphabet, k=rng.randint(0, 9))) for _ in range(20000)]
    for lower, keep in [(True, False), (False, False), (True, True), (False, True)]:
        got = _graph_normalize(texts, lower, keep)
        assert got == [normalize_text(t, lower, keep) for t in texts], (lower, keep)


def test_invalid_utf8_is_replaced_as_in_python():
    rng = random.Random(5)
    noise = [bytes(rng.randrange(256) for _ in range(rng.randint(1, 12))) for _ in range(3000)]
    texts = INVALID_UTF8 + noise
    assert _graph_normalize(texts) == [normalize_text(t) for t in texts]


# ---- ids: the parity corpus -------------------------------------------------------------------

@pytest.fixture(scope="module")
def lines(corpus_documents) -> list[str]:
    return parity_lines(corpus_documents)


@pytest.mark.parametrize("model, lower, seq_lengths", [
    ("spm_model_path", True, (3, 8, 29, 512)),
    ("cased_spm_model_path", False, (9, 128)),
    ("digit_comma_spm_model_path", True, (7, 128)),
])
def test_parity_single_segments_and_pairs(request, lines, model, lower, seq_lengths):
    path = request.getfixturevalue(model)
    seconds = random.Random(11).sample(lines, len(lines))
    for seq_length in seq_lengths:
        pre = AlbertPreprocessor(path, seq_length, do_lower_case=lower)
        bad = _mismatches(pre, lines)
        assert not bad, f"seq_length={seq_length}: {len(bad)} of {len(lines)} lines differ: {bad[:3]}"
        bad = _mismatches(pre, lines, seconds)
        assert not bad, f"seq_length={seq_length}: {len(bad)} of {len(lines)} pairs differ: {bad[:3]}"


def test_parity_keep_accents(spm_model_path, lines):
    pre = AlbertPreprocessor(spm_model_path, 64, keep_accents=True)
    assert not _mismatches(pre, lines, lines[::-1])


def test_digit_comma_rule_is_exercised(digit_comma_spm_model_path, lines):
    tok = AlbertTokenizer(digit_comma_spm_model_path)
    pre = AlbertPreprocessor(digit_comma_spm_model_path, 16)
    hits = [t for t in lines if tok.tokenize(t) != tok.sp_model.encode_as_pieces(tok.normalize(t))]
    assert len(hits) > 100
    got = pre.tokenize(_strings(hits)).to_list()
    assert got == [tok.encode(t) for t in hits]


def test_viterbi_ties_break_as_in_sentencepiece(spm_model_path):
    # "xxx" with pieces "x" and "xx" has two segmentations of equal score; the
    # sentencepiece package gives "x" "xx". (tensorflow-text's SentencepieceTokenizer
    # gives "xx" "x", which is why the ids come from FastSentencepieceTokenizer.)
    tok = AlbertTokenizer(spm_model_path)
    pieces = {tok.id_to_piece(i) for i in range(tok.vocab_size)}
    runs = [c * n for c in sorted(p for p in pieces if len(p) == 1 and p * 2 in pieces)
            if c * 3 not in pieces for n in (3, 5, 7)]
    assert len(runs) >= 6, runs
    texts = runs + [f"see {r}, then" for r in runs]
    pre = AlbertPreprocessor(spm_model_path, 16)
    assert pre.tokenize(_strings(texts)).to_list() == [tok.encode(t) for t in texts]


def test_round_robin_trimmer_is_the_original_truncation():
    cases = [(a, b, m) for a in range(10) for b in range(10) for m in range(21)]
    for budget in range(21):
        rows = [(a, b) for a, b, m in cases if m == budget]
        seg_a = tf.ragged.constant([list(range(a)) for a, _ in rows], dtype=tf.int32)
        seg_b = tf.ragged.constant([list(range(b)) for _, b in rows], dtype=tf.int32)
        want = [truncate_seq_pair(range(a), range(b), budget) for a, b in rows]
        trimmed = tf_text.RoundRobinTrimmer(budget).trim([seg_a, seg_b])
        got = list(zip(*(t.row_lengths().numpy().tolist() for t in trimmed)))
        assert got == [tuple(map(len, pair)) for pair in want], budget
        # The graph's own trim (core ops only), in a tf.function as served: the same rows.
        ours = tf.function(lambda a, b, m=budget: trim_segments([a, b], m))(seg_a, seg_b)
        got = list(zip(*(t.to_list() for t in ours)))
        assert got == [tuple(map(list, pair)) for pair in want], budget
        single = trim_segments([seg_a], budget)[0].to_list()
        assert single == [list(range(a))[:budget] for a, _ in rows], budget
    # ShrinkLongestTrimmer cuts A on ties, the original cuts B: it is not the one.
    shrunk = tf_text.ShrinkLongestTrimmer(7).trim([tf.ragged.constant([[1] * 5]),
                                                  tf.ragged.constant([[1] * 5])])
    assert [int(t.row_lengths()[0]) for t in shrunk] == [3, 4] != list(
        map(len, truncate_seq_pair([1] * 5, [1] * 5, 7)))



def _ragged_rows(lengths, splits_dtype=tf.int64):
    values = tf.range(sum(lengths), dtype=tf.int32) + 5
    return tf.RaggedTensor.from_row_lengths(values, tf.constant(lengths, splits_dtype))


def test_pack_rows_is_combine_segments_then_pad_model_inputs():
    """The packing in core ops against tensorflow-text's two ops, for one and two segments,
    empty rows and batches, rows that fill the sequence, and each pad id."""
    rng = random.Random(3)
    for trial in range(40):
        batch, seq_length, count = rng.choice([0, 1, 4]), rng.choice([3, 4, 9]), rng.choice([1, 2])
        dtype = rng.choice([tf.int32, tf.int64])
        segments = [_ragged_rows([rng.randint(0, 12) for _ in range(batch)], dtype)
                    for _ in range(count)]
        trimmed = trim_segments(segments, seq_length - 1 - count)
        pad = rng.choice([0, 1])
        ours = tf.function(lambda *s, m=seq_length, p=pad: pack_rows(list(s), m, 2, 3, p))(*trimmed)
        word_ids, type_ids = tf_text.combine_segments(trimmed, start_of_sequence_id=2,
                                                      end_of_segment_id=3)
        word_ids, mask = tf_text.pad_model_inputs(word_ids, seq_length, pad_value=pad)
        type_ids, _ = tf_text.pad_model_inputs(type_ids, seq_length, pad_value=0)
        for got, want in zip(ours, (word_ids, mask, type_ids)):
            assert got.dtype == tf.int32 and got.shape == (batch, seq_length), trial
            np.testing.assert_array_equal(got.numpy(), want.numpy(), err_msg=str(trial))


def test_row_cuts_are_the_ragged_library_s():
    """`row_ids`, `keep_where` and `keep_first` (a few ops each) against TensorFlow's
    `value_rowids`, `tf.ragged.boolean_mask` and a Python cut, empty rows included."""
    rng = random.Random(4)
    for lengths in ([], [0], [3, 0, 0, 5, 1], [0, 0], [7]):
        for dtype in (tf.int32, tf.int64):
            rows = _ragged_rows(lengths, dtype)
            assert row_ids(rows).numpy().tolist() == rows.value_rowids().numpy().tolist()
            keep = tf.constant([rng.random() < 0.5 for _ in range(sum(lengths))], tf.bool)
            kept = keep_where(rows, keep)
            assert kept.row_splits.dtype == dtype
            assert kept.to_list() == tf.ragged.boolean_mask(rows, rows.with_values(keep)).to_list()
            counts = [rng.randint(-2, 8) for _ in lengths]
            assert keep_first(rows, tf.constant(counts)).to_list() == [
                row[:max(c, 0)] for row, c in zip(rows.to_list(), counts)]
    nested = tf.RaggedTensor.from_row_lengths(_ragged_rows([2, 0, 3]), tf.constant([2, 1], tf.int64))
    assert row_ids(nested).numpy().tolist() == nested.value_rowids().numpy().tolist() == [0, 0, 1]

# ---- tf.data, Keras, SavedModel ---------------------------------------------------------------

def test_dataset_map_and_keras_model(spm_model_path, lines):
    pre = AlbertPreprocessor(spm_model_path, 32)
    texts_a, texts_b = lines[:96], lines[100:196]
    eager = pre((_strings(texts_a), _strings(texts_b)))
    dataset = tf.data.Dataset.from_tensor_slices((_strings(texts_a), _strings(texts_b)))
    mapped = [b for b in dataset.batch(40).map(lambda a, b: pre((a, b)))]
    for name in NAMES:
        assert np.array_equal(np.concatenate([b[name].numpy() for b in mapped]), eager[name].numpy())
    inputs = (keras.Input(shape=(), dtype="string"), keras.Input(shape=(), dtype="string"))
    model = keras.Model(inputs, AlbertPreprocessor.from_config(pre.get_config())(inputs))
    out = model((_strings(texts_a), _strings(texts_b)))
    assert all(np.array_equal(out[n].numpy(), eager[n].numpy()) for n in NAMES)


_LOAD_SCRIPT = r"""
import json, sys
import tensorflow as tf
import tensorflow_text  # registers the SentencePiece ops; nothing else is needed
texts = [bytes.fromhex(t) for t in json.loads(sys.stdin.read())]
out = {}
for path in sys.argv[1:]:
    loaded = tf.saved_model.load(path)
    fn = loaded.signatures["serving_default"]
    result = fn(text_a=tf.constant(texts), text_b=tf.constant(texts[::-1]))
    out[path] = {k: v.numpy().tolist() for k, v in result.items()}
out["albert_tf_imported"] = any(m.startswith("albert_tf") for m in sys.modules)
print(json.dumps(out))
"""


@pytest.mark.slow
def test_savedmodel_runs_in_a_fresh_process(spm_model_path, tmp_path, lines):
    pre = AlbertPreprocessor(spm_model_path, 24)

    class Exported(tf.Module):
        def __init__(self):
            super().__init__()
            self.pre = pre

        @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text_a"),
                                      tf.TensorSpec([None], tf.string, name="text_b")])
        def serve(self, text_a, text_b):
            return self.pre((text_a, text_b))

    module = Exported()
    tf.saved_model.save(module, str(tmp_path / "module"), signatures={"serving_default": module.serve})
    a = keras.Input(shape=(), dtype="string", name="text_a")
    b = keras.Input(shape=(), dtype="string", name="text_b")
    keras_model = keras.Model({"text_a": a, "text_b": b},
                              AlbertPreprocessor(spm_model_path, 24)((a, b)))
    keras_model.export(str(tmp_path / "keras"), format="tf_saved_model")
    texts = [t.encode("utf-8", "surrogatepass") for t in HARD_CASES] + INVALID_UTF8 + [
        t.encode() for t in lines[200:400]]
    result = subprocess.run(
        [sys.executable, "-c", _LOAD_SCRIPT, str(tmp_path / "module"), str(tmp_path / "keras")],
        input=json.dumps([t.hex() for t in texts]), capture_output=True, text=True, timeout=SAFETY_NET_S)
    assert result.returncode == 0, result.stderr[-3000:]
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert out.pop("albert_tf_imported") is False
    want = [pre.tokenizer.encode_pair(a, b, 24) for a, b in zip(texts, texts[::-1])]
    for got in out.values():
        for name in NAMES:
            assert got[name] == [w[name] for w in want], name


# ---- bad input --------------------------------------------------------------------------------

def test_bad_arguments_and_inputs(spm_model_path, tmp_path):
    with pytest.raises(ValueError, match="seq_length=2 must be an integer from 3 "):
        AlbertPreprocessor(spm_model_path, 2)
    with pytest.raises(FileNotFoundError, match="missing.model"):
        AlbertPreprocessor(tmp_path / "missing.model", 16)
    (tmp_path / "bad.model").write_bytes(b"not a model")
    with pytest.raises(ValueError, match=r"bad\.model is not a valid SentencePiece model"):
        AlbertPreprocessor(tmp_path / "bad.model", 16)
    (tmp_path / "t.txt").write_text("\n".join(f"some text {i} for a bpe model" for i in range(99)))
    spm.SentencePieceTrainer.train(input=str(tmp_path / "t.txt"), model_prefix=str(tmp_path / "bpe"),
                                   vocab_size=60, model_type="bpe", pad_id=0, unk_id=1, bos_id=-1,
                                   eos_id=-1, control_symbols=["[CLS]", "[SEP]", "[MASK]"],
                                   minloglevel=2)
    with pytest.raises(ValueError, match=r"bpe\.model is a bpe SentencePiece model"):
        AlbertPreprocessor(tmp_path / "bpe.model", 16)
    pre = AlbertPreprocessor(spm_model_path, 16)
    with pytest.raises(TypeError, match="tf.string"):
        pre(tf.constant([1, 2]))
    with pytest.raises(ValueError, match="takes 1 or 2 text segments, not 3"):
        pre((_strings(["a"]), _strings(["b"]), _strings(["c"])))
    with pytest.raises(ValueError, match=r"shape \[batch\]"):
        pre(tf.constant([["a", "b"]]))
    column = pre(tf.constant([["one"], ["two"]]))["input_word_ids"]  # [B, 1] is accepted
    assert np.array_equal(column.numpy(), pre(_strings(["one", "two"]))["input_word_ids"].numpy())


def test_seq_length_three_packs_only_special_tokens(spm_model_path):
    pre = AlbertPreprocessor(spm_model_path, 3)
    out = pre((_strings(["long text here", ""]), _strings(["more", "x"])))
    assert out["input_word_ids"].numpy().tolist() == [[2, 3, 3], [2, 3, 3]]
    assert out["input_type_ids"].numpy().tolist() == [[0, 0, 1], [0, 0, 1]]
