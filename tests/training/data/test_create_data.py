"""Pretraining data: SOP pairs, whole-word n-gram masking, shards, resume and bad input.

Text is the embedded corpus (`corpus_documents`), tokenized with the project's
tokenizer and the session's SentencePiece model (`spm_model_path`).
"""

from __future__ import annotations

import collections
import glob
import json
import os
import random
import signal
import string
import subprocess
import time

import numpy as np
import pytest

from albert_tf.tokenizer.spm import AlbertTokenizer
from albert_tf.training.data import (
    create_data,
    masking,
)
from albert_tf.training.data import (
    pairs as sop,
)
from albert_tf.training.data import (
    records as tfrecords,
)
from albert_tf.training.data.corpus import open_corpus, write_corpus_file
from tests.helpers.cli import CLI

SEQ = 128
PRED = 20


@pytest.fixture(scope="module")
def tokenizer(spm_model_path):
    return AlbertTokenizer(spm_model_path)


@pytest.fixture(scope="module")
def vocab(tokenizer):
    return sop.Vocabulary.from_tokenizer(tokenizer)


@pytest.fixture(scope="module")
def token_documents(corpus_documents, tokenizer):
    """80 documents as lists of int32 arrays (one per sentence with tokens)."""
    return [create_data.tokenize_sentences(tokenizer, d) for d in corpus_documents[:80]]


@pytest.fixture(scope="module")
def small_corpus(tmp_path_factory, corpus_documents):
    path = tmp_path_factory.mktemp("small") / "small.txt"
    write_corpus_file(str(path), iter(corpus_documents[:40]))
    return str(path)


@pytest.fixture(scope="module")
def generated(tmp_path_factory, small_corpus, spm_model_path):
    """One local run on 40 documents: (output dir, summary, records)."""
    out = str(tmp_path_factory.mktemp("generated"))
    options = sop.GenerationOptions(max_seq_length=SEQ, max_predictions_per_seq=PRED, dupe_factor=4)
    summary = create_data.create_pretraining_data(
        open_corpus(small_corpus), out, spm_model_path, options, documents_per_shard=7, processes=1)
    records = [r for f in sorted(glob.glob(os.path.join(out, "pretrain-*.tfrecord")))
               for r in tfrecords.read_records(f)]
    return out, summary, records


# ---------------------------------------------------------------------------
# An independent re-derivation of the paper's masking, in plain Python with
# `random.Random`, on piece strings (not ids): the distributions must agree.

def _reference_is_start(piece: str) -> bool:
    plain = set(string.ascii_lowercase) | set(string.ascii_uppercase) | set(string.punctuation)
    return (piece[0] in "\u2581<[" or (len(piece) == 1 and piece in string.punctuation)
            or any(c not in plain for c in piece))


def _reference_mask(pieces: list[str], rnd: random.Random, budget: int) -> list[int]:
    """Returns the n of each chosen n-gram; budget in pieces."""
    words, segment = [], []
    seg = 0
    for i, p in enumerate(pieces):
        if p in ("[CLS]", "[SEP]"):
            seg += p == "[SEP]"
            continue
        if words and not _reference_is_start(p) and pieces[i - 1] not in ("[CLS]", "[SEP]"):
            words[-1].append(i)
        else:
            words.append([i])
            segment.append(seg)
    order = list(range(len(words)))
    rnd.shuffle(order)
    masked: set[int] = set()
    ngrams = []
    for w in order:
        if len(masked) >= budget:
            break
        avail = sum(1 for j in range(w, min(w + 3, len(words))) if segment[j] == segment[w])
        n = rnd.choices(range(1, avail + 1), weights=[1 / k for k in range(1, avail + 1)])[0]
        while n and len(masked) + sum(len(words[w + j]) for j in range(n)) > budget:
            n -= 1
        span = [i for j in range(n) for i in words[w + j]]
        if n == 0 or masked.intersection(span):
            continue
        masked.update(span)
        ngrams.append(n)
    return ngrams


def _pairs(token_documents, vocab, rng, max_num_tokens=SEQ - 3):
    for doc in token_documents:
        for pair in sop.sentence_pairs(doc, vocab.word_starts, max_num_tokens, 0.1, rng):
            if pair is not None:
                yield pair


def test_word_start_rule():
    starts = {"\u2581the": True, "ing": False, ".": True, "),": False, "[CLS]": True, "<unk>": True,
              "7": True, "\u00e9t\u00e9": True, "\u2581": True, "ABC": False}
    assert {p: masking.is_word_start(p) for p in starts} == starts


def test_word_groups_respect_segments():
    # [CLS] ▁a b ▁c [SEP] d ▁e [SEP]: "d" starts a word because it opens segment B
    starts = np.array([1, 1, 0, 1, 1, 0, 1, 1], bool)
    maskable = np.array([0, 1, 1, 1, 0, 1, 1, 0], bool)
    first, lengths, reach = masking.word_groups(starts, maskable)
    assert first.tolist() == [1, 3, 5, 6]
    assert lengths.tolist() == [2, 1, 1, 1]
    assert reach.tolist() == [2, 1, 2, 1]


def test_drawn_ngram_lengths_follow_inverse_n():
    rng = np.random.default_rng(0)
    lengths, reach = np.ones(50, int), np.minimum(3, 50 - np.arange(50))
    picks = [masking.select_ngrams(lengths, reach, 40, rng)[0] for _ in range(12000)]
    first = [n for w, n in picks if reach[w] == 3]  # the first pick: nothing covered yet
    freq = np.bincount(first, minlength=4)[1:] / len(first)
    np.testing.assert_allclose(freq, [6 / 11, 3 / 11, 2 / 11], atol=0.015)


def test_masking_matches_an_independent_rederivation(token_documents, tokenizer, vocab):
    rng, rnd = np.random.default_rng(1), random.Random(1)
    ours, ref, budgets, masked = collections.Counter(), collections.Counter(), 0, 0
    for a, b, _ in _pairs(token_documents, vocab, np.random.default_rng(2)):
        ids = np.concatenate([[vocab.cls_id], a, [vocab.sep_id], b, [vocab.sep_id]])
        maskable = ~np.isin(ids, [vocab.cls_id, vocab.sep_id])
        budget = masking.num_to_predict(len(ids), 0.15, PRED)
        result = masking.mask_sequence(ids, vocab.word_starts[ids], maskable, rng, masked_lm_prob=0.15,
                                       max_predictions=PRED, vocab_size=vocab.size, mask_id=vocab.mask_id)
        ours.update(result.ngrams)
        masked += len(result.positions)
        budgets += budget
        ref.update(_reference_mask([tokenizer.id_to_piece(i) for i in ids], rnd, budget))
    assert sum(ours.values()) > 2000
    for n in (1, 2, 3):
        assert ours[n] / sum(ours.values()) == pytest.approx(ref[n] / sum(ref.values()), abs=0.02)
    assert masked / budgets > 0.97  # the budget is (almost) always filled


def test_masked_positions_are_whole_words_and_replaced_80_10_10(token_documents, vocab):
    rng = np.random.default_rng(3)
    kinds = np.zeros(3)
    for a, b, _ in _pairs(token_documents[:40], vocab, np.random.default_rng(4)):
        inst = sop.assemble(a, b, 0, vocab, sop.GenerationOptions(max_seq_length=SEQ), rng)
        original = inst.input_ids.copy()
        original[inst.masked.positions] = inst.masked.labels
        chosen = np.zeros(len(original), bool)
        chosen[inst.masked.positions] = True
        word = np.cumsum(inst.token_boundary) - 1
        for w in np.unique(word[chosen]):  # a word is masked entirely or not at all
            assert chosen[word == w].all()
        assert not chosen[np.isin(original, [vocab.cls_id, vocab.sep_id])].any()
        assert len(inst.masked.positions) <= masking.num_to_predict(len(original), 0.15, PRED)
        out = inst.input_ids[inst.masked.positions]
        kinds += [np.sum(out == vocab.mask_id), np.sum((out != vocab.mask_id) & (out != inst.masked.labels)),
                  np.sum(out == inst.masked.labels)]
    assert kinds.sum() > 5000
    np.testing.assert_allclose(kinds / kinds.sum(), [0.8, 0.1, 0.1], atol=0.015)


def _text(ids) -> str:
    """Ids as ",1,2,3,": a substring test on these is a test for a contiguous id subsequence."""
    return "," + ",".join(map(str, ids)) + ","


def test_sop_pairs_are_adjacent_spans_of_one_document(token_documents, vocab):
    labels = []
    for dupe in range(10):
        rng = np.random.default_rng(dupe)
        for doc in token_documents:
            stream = _text(np.concatenate(doc))
            # no length limit: the whole document is one chunk, A + B is all of it
            for a, b, label in sop.sentence_pairs(doc, vocab.word_starts, 10**6, 0.0, rng):
                first, second = (b, a) if label else (a, b)  # undo the swap
                assert _text(np.concatenate([first, second])) == stream
                assert len(a) and len(b)
                labels.append(label)
            for a, b, _label in sop.sentence_pairs(doc, vocab.word_starts, 60, 0.1, rng):
                assert _text(a) in stream and _text(b) in stream and len(a) + len(b) <= 60
    assert len(labels) == 800
    assert np.mean(labels) == pytest.approx(0.5, abs=0.05)


def test_a_one_sentence_chunk_is_split_never_paired_with_another_document(vocab, tokenizer):
    long = np.array(tokenizer.encode("the quick brown fox jumps over the lazy dog " * 8), np.int32)
    short = np.array(tokenizer.encode("a second sentence follows"), np.int32)
    for seed in range(20):  # the long sentence alone fills the chunk: it is split in two
        rng = np.random.default_rng(seed)
        a, b, label = next(sop.sentence_pairs([long, short], vocab.word_starts, len(long), 0.0, rng))
        first, second = (b, a) if label else (a, b)
        assert _text(np.concatenate([first, second])) == _text(long)
        assert vocab.word_starts[second[0]]  # cut at a word boundary
    one_word = np.array(tokenizer.encode("x"), np.int32)[:1]
    result = list(sop.sentence_pairs([one_word, one_word], vocab.word_starts, 1, 0.0, np.random.default_rng(0)))
    assert result == [None, None]  # single-word chunks are skipped


def test_short_target_lengths():
    rng = np.random.default_rng(6)
    targets = np.array([sop.target_length(509, 0.1, rng) for _ in range(20000)])
    short = targets[targets < 509]
    assert len(short) / len(targets) == pytest.approx(0.1, abs=0.01)
    assert short.min() >= 2 and short.mean() == pytest.approx(255, rel=0.05)


def test_options_are_validated():
    with pytest.raises(ValueError, match="masked_lm_prob=1.5"):
        sop.GenerationOptions(masked_lm_prob=1.5)
    assert sop.GenerationOptions() == sop.GenerationOptions(512, 20, 0.15, 0.1, 40, 3, 12345)


def test_records_have_the_original_features(generated):
    _, summary, records = generated
    assert len(records) == summary["instances"] > 500
    spec = {"input_ids": SEQ, "input_mask": SEQ, "segment_ids": SEQ, "token_boundary": SEQ,
            "masked_lm_positions": PRED, "masked_lm_ids": PRED, "masked_lm_weights": PRED,
            "next_sentence_labels": 1}
    for record in records[:200]:
        f = tfrecords.parse_record(record)
        assert {k: len(v) for k, v in f.items()} == spec
        assert f["masked_lm_weights"].dtype == np.float32 and f["input_ids"].dtype == np.int64
        n = int(f["input_mask"].sum())
        assert (f["input_mask"][:n] == 1).all() and (f["input_ids"][n:] == 0).all()
        k = int(f["masked_lm_weights"].sum())
        assert (np.diff(f["masked_lm_positions"][:k]) > 0).all() and (f["masked_lm_positions"][k:] == 0).all()
        sep = np.flatnonzero(f["segment_ids"][:n])[0]  # first token of segment B
        assert (f["segment_ids"][sep:n] == 1).all() and f["next_sentence_labels"][0] in (0, 1)


def test_summary_statistics(generated):
    out, summary, _ = generated
    assert summary == json.load(open(os.path.join(out, "summary.json")))
    assert summary["documents"] == 40 and summary["shards"] == 6
    assert summary["masked_fraction"] == pytest.approx(0.15, abs=0.01)
    assert summary["masked_of_budget"] > 0.97
    fractions = summary["ngram_fractions"]
    assert fractions["1"] > fractions["2"] > fractions["3"] > 0.05
    assert summary["sop"]["swapped_fraction"] == pytest.approx(0.5, abs=0.05)
    assert summary["replacement_fractions"]["mask"] == pytest.approx(0.8, abs=0.02)


def test_records_unmask_to_one_documents_text(generated, corpus_documents, tokenizer):
    _, _, records = generated
    streams = [_text(np.concatenate(create_data.tokenize_sentences(tokenizer, d)))
               for d in corpus_documents[:40]]
    for record in records[::7]:
        f = tfrecords.parse_record(record)
        ids = f["input_ids"].copy()
        k = int(f["masked_lm_weights"].sum())
        ids[f["masked_lm_positions"][:k]] = f["masked_lm_ids"][:k]
        n = int(f["input_mask"].sum())
        a_end = int(np.flatnonzero(f["segment_ids"][:n])[0]) - 1
        a, b = ids[1:a_end], ids[a_end + 1:n - 1]
        if f["next_sentence_labels"][0]:
            a, b = b, a
        text_a, text_b = _text(a), _text(b)
        owners = [s for s in streams if text_a in s and text_b in s]
        assert owners, "segments A and B must come from one document"
        if min(len(a), len(b)) >= 8:  # once unswapped, B follows A in the document
            assert any(s.find(text_b, s.index(text_a) + len(text_a) - 1) >= 0 for s in owners)


def _run(small_corpus, spm_model_path, out, processes, seed=12345):
    options = sop.GenerationOptions(max_seq_length=64, max_predictions_per_seq=10, dupe_factor=2, seed=seed)
    create_data.create_pretraining_data(open_corpus(small_corpus), str(out), spm_model_path, options,
                                             documents_per_shard=9, processes=processes)
    return {os.path.basename(f): open(f, "rb").read() for f in sorted(glob.glob(f"{out}/pretrain-*"))}


@pytest.mark.slow
def test_output_does_not_depend_on_process_count(small_corpus, spm_model_path, tmp_path):
    one = _run(small_corpus, spm_model_path, tmp_path / "one", 1)
    two = _run(small_corpus, spm_model_path, tmp_path / "two", 2)
    assert len(one) == 5 and one == two
    other = _run(small_corpus, spm_model_path, tmp_path / "other", 1, seed=7)
    assert other.keys() == one.keys() and all(other[k] != one[k] for k in one)


@pytest.mark.slow
def test_resume_after_kill(corpus_documents, spm_model_path, tmp_path):
    corpus = str(tmp_path / "twenty.txt")
    write_corpus_file(corpus, iter(corpus_documents[:20]))
    out = tmp_path / "killed"
    args = ["create-data", "--input", corpus, "--output-dir", str(out), "--spm-model", spm_model_path,
            "--max-seq-length", "64", "--max-predictions-per-seq", "10", "--dupe-factor", "10",
            "--documents-per-shard", "1", "--processes", "1"]
    proc = subprocess.Popen([*CLI, *args],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while len(glob.glob(f"{out}/pretrain-*.tfrecord")) < 3 and time.time() < deadline:
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    done = {f: os.stat(f).st_mtime_ns for f in glob.glob(f"{out}/pretrain-*.tfrecord")}
    assert 3 <= len(done) < 20, "the run must be killed part-way"
    assert create_data.main(args[1:]) == 0
    for f, mtime in done.items():  # finished shards were kept, not rewritten
        assert os.stat(f).st_mtime_ns == mtime
    assert not glob.glob(f"{out}/.*tmp-*") and not glob.glob(f"{out}/stats/.*tmp-*")
    summary = json.load(open(out / "summary.json"))
    assert summary["shards"] == 20 and summary["shards_resumed"] >= len(done)
    ref = tmp_path / "ref"
    assert create_data.main([a if a != str(out) else str(ref) for a in args[1:]]) == 0
    for name in os.listdir(ref):
        if name.endswith(".tfrecord"):
            assert open(ref / name, "rb").read() == open(out / name, "rb").read()


def test_bad_input_is_counted_with_file_names(tmp_path, corpus_documents, spm_model_path):
    good = tmp_path / "good.txt"
    write_corpus_file(str(good), iter(corpus_documents[:3]))
    (tmp_path / "latin1.txt").write_bytes(b"Caf\xe9 au lait is nice.\nA second line.\n\nFine one here.\nAnd two.\n")
    (tmp_path / "short.txt").write_text("Only one line here.\n\n\n\nTwo lines now.\nYes two.\n")
    (tmp_path / "broken.gz").write_bytes(b"\x1f\x8b\x08\x00garbage that is not deflate")
    out = tmp_path / "out"
    argv = ["--input", f"{good},{tmp_path}/latin1.txt,{tmp_path}/short.txt,{tmp_path}/broken.gz",
            "--output-dir", str(out), "--spm-model", spm_model_path,
            "--max-seq-length", "64", "--dupe-factor", "1", "--processes", "1"]
    # A file named explicitly that does not exist is refused before any work.
    missing = [a if a != argv[1] else f"{argv[1]},{tmp_path}/missing.txt" for a in argv]
    assert create_data.main(missing) == 2 and not out.exists()
    assert create_data.main(argv) == 0
    skipped = json.load(open(out / "summary.json"))["skipped"]
    assert skipped["invalid_utf8"]["files"] == {f"{tmp_path}/latin1.txt": 1}
    assert skipped["invalid_utf8"]["examples"] == [
        f"{tmp_path}/latin1.txt: line 1: byte 0xe9 at byte offset 3 is not UTF-8 "
        "(invalid continuation byte)"]
    assert skipped["one_sentence_document"]["files"] == {f"{tmp_path}/short.txt": 1}
    assert set(skipped["unreadable_file"]["files"]) == {f"{tmp_path}/broken.gz"}
    summary = json.load(open(out / "summary.json"))
    assert summary["documents"] == 5  # 3 good + latin1's second + short's second


def test_command_line_errors(tmp_path, spm_model_path, small_corpus, capsys):
    assert create_data.main(["--output-dir", str(tmp_path)]) == 2
    assert create_data.main(["--output-dir", str(tmp_path), "--spm-model", spm_model_path,
                                  "--input", f"{tmp_path}/nothing-*.txt"]) == 2
    assert create_data.main(["--output-dir", str(tmp_path), "--spm-model", spm_model_path,
                                  "--masked-lm-prob", "2"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 3 and "--spm-model" in err[0] and "matches no files" in err[1] and "masked_lm_prob" in err[2]
    common = ["--input", small_corpus, "--spm-model", spm_model_path, "--output-dir", str(tmp_path / "o"),
              "--max-seq-length", "64", "--dupe-factor", "1", "--processes", "1"]
    assert create_data.main(common) == 0
    assert create_data.main(common + ["--seed", "3"]) == 2
    assert "seed" in capsys.readouterr().err
