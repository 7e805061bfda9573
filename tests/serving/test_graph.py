"""The in-graph pieces the serving signatures add to AlbertPreprocessor.

Offsets are checked against the fine-tuning code's independent Python alignment
(`squad_data.align_context`), mask splicing and packing against the Python
tokenizer, span search against a NumPy brute force, and dynamic padding against
the same encoder run at full length.
"""

from __future__ import annotations

import unicodedata

import numpy as np
import pytest
import tensorflow as tf

from albert_tf import (
    AlbertConfig,
    AlbertEncoder,
    AlbertMultipleChoice,
    AlbertSequenceClassifier,
)
from albert_tf.inputs import INPUT_NAMES
from albert_tf.serving.signatures import base, span, text_graph
from albert_tf.tokenizer import offsets
from albert_tf.tokenizer.preprocessor import AlbertPreprocessor
from albert_tf.tokenizer.spm import SPIECE_UNDERLINE, truncate_seq_pair
from tests.helpers.tokenizer_cases import HARD_CASES, INVALID_UTF8, parity_lines

SEQ_LENGTH = 40


@pytest.fixture(scope="module")
def pre(spm_model_path):
    return AlbertPreprocessor(spm_model_path, SEQ_LENGTH)


def _bytes(texts) -> tf.Tensor:
    return tf.constant([t if isinstance(t, bytes) else t.encode("utf-8", "surrogatepass")
                        for t in texts])


def _ignorable(char: str, trailing: bool = False) -> bool:
    """offsets.IGNORABLE in Python (trailing: combining marks stay with their base)."""
    category = unicodedata.category(char)
    if trailing and category.startswith("M"):
        return False
    return (char.isspace() or char == "\ufffd"
            or category in ("Zs", "Zl", "Zp", "Cc", "Cf", "Mn", "Mc", "Me"))


def _words(text: str):
    start = None
    for i, char in enumerate(text + " "):
        if char.isspace() and start is not None:
            yield start, i
            start = None
        elif not char.isspace() and start is None:
            start = i


# ------------------------------------------------------------------ offsets
def test_token_offsets_agree_with_the_finetuning_alignment(pre, corpus_documents):
    """Each token's raw range, trimmed of ignorable characters, is the character span
    that squad_data.align_context (per-character normalisation in Python) gives it."""
    from albert_tf.training.finetune.squad_data import align_context

    tok = pre.tokenizer
    texts = parity_lines(corpus_documents, real=400, variants=400, long_lines=2)
    run = tf.function(lambda t: offsets.tokenize_with_offsets(pre, text_graph.sanitize(t)))
    ids, starts, ends, visible = run(_bytes(texts))
    compared = 0
    for i, context in enumerate(texts):
        reference = align_context(tok, context)
        assert ids[i].numpy().tolist() == list(reference.ids), context
        # align_context maps every piece of a word to the whole word when the pieces
        # do not spell the word's per-character normalisation; compare the others.
        exact = []
        for word_start, word_end in _words(context):
            word = context[word_start:word_end]
            pieces = tok.tokenize(word)
            spelled = "".join(p.replace(SPIECE_UNDERLINE, "") for p in pieces)
            exact += [spelled == "".join(tok.normalize(c) for c in word)] * len(pieces)
        raw = context.encode("utf-8", "surrogatepass")
        rows = zip(starts[i].numpy(), ends[i].numpy(), visible[i].numpy(), reference.starts,
                   reference.ends, exact)
        for begin, end, shown, ref_start, ref_end, is_exact in rows:
            first = len(raw[:begin].decode("utf-8", "replace"))
            last = len(raw[:end].decode("utf-8", "replace"))
            while first < last and _ignorable(context[first]):
                first += 1
            while last > first and _ignorable(context[last - 1], trailing=True):
                last -= 1
            assert shown == (last > first)
            # align_context stops before combining marks that follow a piece; ours
            # keeps them with their base character.
            while ref_start < ref_end < len(context) and unicodedata.combining(context[ref_end]):
                ref_end += 1
            if not is_exact or all(_ignorable(c) for c in context[ref_start:ref_end]):
                continue
            assert (first, last) == (ref_start, ref_end), (context, context[first:last],
                                                          context[ref_start:ref_end])
            compared += 1
    assert compared > 20000


def test_ids_with_offsets_equal_the_tokenizer_on_hard_input(digit_comma_spm_model_path):
    pre = AlbertPreprocessor(digit_comma_spm_model_path, SEQ_LENGTH)
    texts = [*HARD_CASES, *INVALID_UTF8, "costs 1,000, then x3, and 12,345,", ":::: ..... !!!!"]
    run = tf.function(lambda t: offsets.tokenize_with_offsets(pre, text_graph.sanitize(t)),
                      input_signature=[tf.TensorSpec([None], tf.string)])  # as served
    ids, starts, ends, _ = run(_bytes(texts))
    digit_comma_splits = 0
    for i, text in enumerate(texts):
        assert ids[i].numpy().tolist() == pre.tokenizer.encode(text), text
        raw = text if isinstance(text, bytes) else text.encode("utf-8", "surrogatepass")
        size = len(raw.decode("utf-8", "replace").encode("utf-8"))
        assert np.all((0 <= starts[i].numpy()) & (starts[i].numpy() <= ends[i].numpy())
                      & (ends[i].numpy() <= size))
        assert np.all(np.diff(starts[i].numpy()) >= 0)
        digit_comma_splits += sum(len(pre.tokenizer.split_piece(p)) > 1
                                  for p in pre.tokenizer.sp_model.encode_as_pieces(
                                      pre.tokenizer.normalize(text)))
    assert digit_comma_splits > 3  # the rule really was exercised
    for texts in ([b"", b" \t "], []):  # no character at all, and no row at all
        ids, starts, ends, visible = run(tf.constant(texts, tf.string))
        assert ids.to_list() == starts.to_list() == visible.to_list() == [[]] * len(texts)


# --------------------------------------------------------- masks and packing
def test_mask_written_in_text_becomes_the_mask_id(pre):
    tok = pre.tokenizer
    texts = ["The [MASK] sat on the [MASK].", "[MASK]", "[MASK][MASK] x", "no mask",
             "", "un[MASK]able", "Caf\u00e9 [MASK] \U0001F600", "[mask] is not a mask"]
    got = tf.function(lambda t: text_graph.tokenize_with_masks(pre, t))(_bytes(texts))
    for i, text in enumerate(texts):
        parts = text.split("[MASK]")
        want = [i for part in parts[:-1] for i in tok.encode(part) + [tok.mask_id]]
        want += tok.encode(parts[-1])
        assert got[i].numpy().tolist() == want, text
    assert got[0].numpy().tolist().count(tok.mask_id) == 2
    assert tok.mask_id not in got[7].numpy().tolist()


def test_pack_equals_the_preprocessor_and_the_original_truncation(pre):
    a = ["a question", "", "x " * 60, "short", "\U0001F600 \xff".encode("utf-8", "replace")]
    b = ["a context " * 30, "only b", "", "y " * 5, "z"]
    features, trimmed = tf.function(lambda x, y: text_graph.pack(
        pre, [pre.tokenize(x), pre.tokenize(y)]))(_bytes(a), _bytes(b))
    expected = pre((_bytes(a), _bytes(b)))
    for name in INPUT_NAMES:
        np.testing.assert_array_equal(features[name].numpy(), expected[name].numpy())
    for i in range(len(a)):
        ids_a, ids_b = truncate_seq_pair(pre.tokenizer.encode(a[i]), pre.tokenizer.encode(b[i]),
                                         SEQ_LENGTH - 3)
        assert trimmed[0][i].numpy().tolist() == ids_a
        assert trimmed[1][i].numpy().tolist() == ids_b


def test_keep_first_and_last_cut_each_row():
    rows = tf.ragged.constant([[1, 2, 3, 4], [5], [], [6, 7]])
    kept = text_graph.keep_first(rows, tf.constant([2, 3, 1, -1]))
    assert kept.to_list() == [[1, 2], [5], [], []]
    assert text_graph.keep_last(rows, 2).to_list() == [[3, 4], [5], [], [6, 7]]


# ----------------------------------------------------------- dynamic padding
def test_dynamic_padding_gives_the_fixed_length_outputs(pre):
    config = AlbertConfig(vocab_size=pre.tokenizer.vocab_size, embedding_size=8, hidden_size=12,
                          num_hidden_layers=2, num_attention_heads=3, intermediate_size=20,
                          max_position_embeddings=64)
    encoder = AlbertEncoder(config)
    texts = _bytes(["a short text", "a somewhat longer text with more words in it", ""])
    full = pre(texts)
    trimmed = text_graph.trim_padding(full, 16)
    longest = int(tf.reduce_max(tf.reduce_sum(full["input_mask"], 1)))
    assert trimmed["input_mask"].shape[1] == min(SEQ_LENGTH, -(-longest // 16) * 16) < SEQ_LENGTH
    assert text_graph.trim_padding(full, None)["input_mask"].shape[1] == SEQ_LENGTH
    out_full, out_trim = encoder(full), encoder(trimmed)
    length = trimmed["input_mask"].shape[1]
    np.testing.assert_allclose(out_trim["pooled_output"], out_full["pooled_output"], atol=1e-5)
    np.testing.assert_allclose(out_trim["sequence_output"],
                               out_full["sequence_output"][:, :length], atol=1e-5)
    empty = {k: v[:0] for k, v in full.items()}  # a batch of none must not fail
    assert text_graph.trim_padding(empty, 16)["input_mask"].shape == (0, 1)


def _tiny(vocab_size):
    return AlbertConfig(vocab_size=vocab_size, embedding_size=8, hidden_size=12,
                        num_hidden_layers=2, num_attention_heads=3, intermediate_size=20,
                        max_position_embeddings=64, initializer_range=0.2)


def test_length_groups_equal_one_call_on_the_whole_batch(pre, corpus_documents):
    """11 texts of shuffled lengths, 4 rows a group: each group is cut to its own longest
    row (shortest texts first), and the outputs, back in request order, equal the model
    run once on the fully padded batch."""
    model = AlbertSequenceClassifier(_tiny(pre.tokenizer.vocab_size), 3)
    sentences = [s for document in corpus_documents for s in document][:11]
    words = [9, 1, 14, 3, 30, 6, 2, 11, 5, 0, 8]
    texts = [" ".join(s.split()[:n]) for s, n in zip(sentences, words)]
    full = pre(_bytes(texts))
    lengths = full["input_mask"].numpy().sum(1)
    seen = []

    def run(group):
        seen.append((group["input_mask"].shape[1], group["input_mask"].numpy().sum(1).tolist()))
        return model(group)

    got = base.run_by_length(run, full, 1, [None, 3], rows=4)
    np.testing.assert_allclose(got, model(full), atol=1e-5)
    ranked = sorted(lengths.tolist())
    assert [rows for _, rows in seen] == [ranked[0:4], ranked[4:8], ranked[8:11]]
    assert [width for width, _ in seen] == [ranked[3], ranked[7], ranked[10]]
    empty = base.run_by_length(run, {k: v[:0] for k, v in full.items()}, 1, [None, 3])
    assert empty.shape == (0, 3)


def test_length_groups_of_multiple_choice_rows(pre):
    """[B, K, T] rows are grouped by their longest option; probabilities per question are
    those of one call on the whole batch."""
    model = AlbertMultipleChoice(_tiny(pre.tokenizer.vocab_size))
    rng = np.random.default_rng(3)
    lengths = rng.integers(3, SEQ_LENGTH, size=(5, 3))
    mask = (np.arange(SEQ_LENGTH) < lengths[..., None]).astype(np.int32)  # [5, 3, T]
    features = {"input_word_ids": tf.constant(rng.integers(5, 50, mask.shape) * mask, tf.int32),
                "input_mask": tf.constant(mask), "input_type_ids": tf.constant(mask * 0)}
    got = base.run_by_length(lambda group: model(group), features, 1, [None, None],
                             rows=2)
    np.testing.assert_allclose(got, model(features), atol=1e-5)


# --------------------------------------------------------------- span search
def _assert_best_of(got, b, candidates):
    """Row b of best_spans' (start, end, score, found) is the best (score, i, j) candidate,
    or (-1, -1, not found) when there is none."""
    if not candidates:
        assert (got[0][b], got[1][b], bool(got[3][b])) == (-1, -1, False)
        return
    score, i, j = max(candidates)
    assert (got[0][b], got[1][b], bool(got[3][b])) == (i, j, True)
    assert got[2][b] == pytest.approx(score, abs=1e-6)


def test_best_spans_match_a_brute_force_search():
    rng = np.random.default_rng(0)
    batch, length, longest = 6, 13, 4
    start = rng.normal(size=(batch, length)).astype(np.float32)
    end = rng.normal(size=(batch, length)).astype(np.float32)
    allowed = rng.random((batch, length)) < 0.6
    allowed[2] = False  # no candidate at all
    got = [t.numpy() for t in span.best_spans(start, end, allowed, longest)]
    for b in range(batch):
        candidates = [(start[b, i] + end[b, j], i, j) for i in range(length)
                      for j in range(i, min(length, i + longest)) if allowed[b, i] and allowed[b, j]]
        _assert_best_of(got, b, candidates)


def test_best_spans_with_n_best_match_fine_tuning_candidates():
    """With n_best, starts come from the n best logits of the start pool (a window's
    max-context pieces), ends from the n best of the end pool (its context pieces), as
    fine-tuning's `window_candidates`, and only allowed tokens may begin or end the span;
    a start pool smaller than n_best keeps only its own tokens."""
    rng = np.random.default_rng(1)
    batch, length, longest, n_best = 8, 15, 5, 3
    start = rng.normal(size=(batch, length)).astype(np.float32)
    end = rng.normal(size=(batch, length)).astype(np.float32)
    pool = rng.random((batch, length)) < 0.8
    start_pool = pool & (rng.random((batch, length)) < 0.5)
    start_pool[0] = False
    start_pool[0, 4] = True  # one max-context piece: fewer than n_best
    allowed = pool & (rng.random((batch, length)) < 0.8)
    allowed[0, 4] = True
    got = [t.numpy() for t in span.best_spans(start, end, allowed, longest, n_best,
                                              start_pool=start_pool, end_pool=pool)]
    assert got[0][0] == 4
    for b in range(batch):
        where = np.nonzero(start_pool[b])[0]
        starts = where[np.argsort(-start[b, where], kind="stable")[:n_best]]
        where = np.nonzero(pool[b])[0]
        ends = where[np.argsort(-end[b, where], kind="stable")[:n_best]]
        candidates = [(start[b, i] + end[b, j], i, j) for i in starts for j in ends
                      if i <= j < i + longest and allowed[b, i] and allowed[b, j]]
        _assert_best_of(got, b, candidates)


def test_answer_text_and_character_offsets_in_unicode_context():
    context = "Le caf\u00e9  M\u00fcller\U0001F600 est \u00e0 Z\u00fcrich."
    raw = context.encode("utf-8")
    begin = raw.index(" M\u00fcller".encode())  # a "▁m..." piece starts at the space
    end = raw.index(b" est")
    answer, first, last = span.answer_text_and_chars(
        tf.constant([raw, raw]), tf.constant([begin, 0], tf.int64),
        tf.constant([end, 0], tf.int64), tf.constant([True, False]))
    text = answer.numpy()[0].decode()
    assert text == "M\u00fcller\U0001F600"
    assert context[first.numpy()[0]:last.numpy()[0]] == text
    assert first.numpy()[0] == context.index(text)
    assert (answer.numpy()[1], first.numpy()[1], last.numpy()[1]) == (b"", -1, -1)


def test_fine_tuning_decoder_ignores_the_same_characters_as_the_graph():
    """SQuAD fine-tuning's `is_ignorable` and serving's IGNORABLE regex agree on every
    code point of the Basic Multilingual Plane and a sample above it (those Python's
    Unicode database assigns: RE2's tables may be a version newer)."""
    import unicodedata

    from albert_tf.tokenizer.offsets import IGNORABLE
    from albert_tf.training.finetune.squad import is_ignorable

    codes = [c for c in range(0x10000) if not 0xD800 <= c <= 0xDFFF
             and unicodedata.category(chr(c)) != "Cn"]
    codes += list(range(0x1F300, 0x1F700)) + list(range(0xE0000, 0xE0080))
    chars = [chr(c) for c in codes]
    graph = tf.strings.regex_full_match(tf.constant([c.encode() for c in chars]), IGNORABLE).numpy()
    differ = [hex(ord(c)) for c, g in zip(chars, graph) if bool(g) != is_ignorable(c)]
    assert not differ, differ[:20]
