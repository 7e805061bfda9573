"""`albert-tf vocab` / `train_vocab`: ALBERT's spm_train conventions, input handling, errors."""

from __future__ import annotations

import gzip
import logging
import os

import pytest
import sentencepiece as spm

from albert_tf.infra import cli
from albert_tf.tokenizer.spm import (
    CONTROL_SYMBOLS,
    USER_DEFINED_SYMBOLS,
    AlbertTokenizer,
    normalize_text,
)
from albert_tf.training.data.vocab import VocabError, main, train_vocab


@pytest.fixture(scope="module")
def sentences(corpus_documents) -> list[str]:
    """600 real sentences, with case and accents added to some."""
    flat = [s for doc in corpus_documents for s in doc][:600]
    return [s.upper() if i % 5 == 0 else s.replace("e", "é") if i % 7 == 0 else s
            for i, s in enumerate(flat)]


def _pieces(model_path: str) -> list[str]:
    sp = spm.SentencePieceProcessor(model_file=model_path)
    return [sp.id_to_piece(i) for i in range(sp.get_piece_size())]


def _leftovers(directory) -> list[str]:
    return sorted(name for name in os.listdir(directory) if ".tmp-" in name)


def test_session_model_follows_the_original_spm_train_flags(spm_model_path):
    pieces = _pieces(spm_model_path)
    assert pieces[:13] == ["<pad>", "<unk>", *CONTROL_SYMBOLS, *USER_DEFINED_SYMBOLS]
    sp = spm.SentencePieceProcessor(model_file=spm_model_path)
    assert (sp.bos_id(), sp.eos_id(), sp.pad_id(), sp.unk_id()) == (-1, -1, 0, 1)
    assert all(sp.is_control(i) for i in range(2, 5)) and len(pieces) == 1000
    # Trained on lowercased input: no piece has an upper-case letter.
    assert not [p for p in pieces[13:] if p != p.lower()]
    with open(spm_model_path[:-len(".model")] + ".vocab", encoding="utf-8") as f:
        vocab_lines = f.read().splitlines()
    assert len(vocab_lines) == 1000 and vocab_lines[2] == "[CLS]\t0"


def test_cased_model_keeps_case(cased_spm_model_path):
    assert [p for p in _pieces(cased_spm_model_path) if p != p.lower()]


def test_globs_gzip_and_normalised_input(tmp_path, sentences, caplog):
    data = tmp_path / "data"
    data.mkdir()
    (data / "a.txt").write_text("\n".join(sentences[:300]) + "\n\n", encoding="utf-8")
    with gzip.open(data / "b.txt.gz", "wt", encoding="utf-8") as f:
        f.write("\n".join(sentences[300:]) + "\n")
    (data / "ignored.csv").write_text("NOT,PART,OF,THE,GLOB\n")
    with caplog.at_level(logging.INFO, logger="albert_tf.training.data.vocab"):
        model, vocab = train_vocab([str(data / "*.txt*"), str(data / "a.txt")],
                                   str(tmp_path / "out" / "v"), 120)
    assert (model, vocab) == (str(tmp_path / "out" / "v.model"), str(tmp_path / "out" / "v.vocab"))
    assert sorted(os.listdir(tmp_path / "out")) == ["v.model", "v.vocab"]
    pieces = "".join(_pieces(model)[13:])
    assert pieces == pieces.lower() and "é" not in pieces
    # Both files were read once (the glob and the explicit path both name a.txt),
    # the .csv not at all.
    assert "on 600 lines" in caplog.text and "from 2 file(s)" in caplog.text
    # The tokenizer and the trainer agree on what text looks like.
    tok = AlbertTokenizer(model)
    assert tok.tokenize(sentences[0]) == tok.sp_model.encode_as_pieces(normalize_text(sentences[0]))


def test_keep_accents_and_cased_options(tmp_path, sentences):
    (tmp_path / "t.txt").write_text("\n".join(sentences), encoding="utf-8")
    model, _ = train_vocab([str(tmp_path / "t.txt")], str(tmp_path / "k"), 150,
                           do_lower_case=False, keep_accents=True, input_sentence_size=400)
    pieces = "".join(_pieces(model))
    assert "é" in pieces and "T" in pieces


def test_missing_inputs_and_empty_corpus(tmp_path):
    with pytest.raises(VocabError, match="nope.txt: no such file"):
        train_vocab([str(tmp_path / "nope.txt")], str(tmp_path / "v"), 100)
    with pytest.raises(VocabError, match=r"input '.*\*.txt' matches no file"):
        train_vocab([str(tmp_path / "*.txt")], str(tmp_path / "v"), 100)
    with pytest.raises(VocabError, match="is a directory"):
        train_vocab([str(tmp_path)], str(tmp_path / "v"), 100)
    (tmp_path / "blank.txt").write_text("\n \n\t\n\u3000\n")
    with pytest.raises(VocabError, match="the corpus is empty: no non-blank line in .*blank.txt"):
        train_vocab([str(tmp_path / "blank.txt")], str(tmp_path / "v"), 100)
    (tmp_path / "bad.gz").write_bytes(b"this is not gzip data")
    with pytest.raises(VocabError, match="cannot read .*bad.gz"):
        train_vocab([str(tmp_path / "bad.gz")], str(tmp_path / "v"), 100)
    assert not [p for p in os.listdir(tmp_path) if p.startswith("v") or ".tmp-" in p]


def test_failed_training_leaves_previous_output_untouched(tmp_path, sentences):
    (tmp_path / "t.txt").write_text("\n".join(sentences[:50]), encoding="utf-8")
    (tmp_path / "v.model").write_bytes(b"previous model")
    with pytest.raises(VocabError, match=r"Vocabulary size too high \(5000\)"):
        train_vocab([str(tmp_path / "t.txt")], str(tmp_path / "v"), 5000, overwrite=True)
    assert (tmp_path / "v.model").read_bytes() == b"previous model"
    assert not (tmp_path / "v.vocab").exists() and not _leftovers(tmp_path)
    with pytest.raises(VocabError, match="vocab_size=13 must exceed"):
        train_vocab([str(tmp_path / "t.txt")], str(tmp_path / "v"), 13)
    with pytest.raises(VocabError, match="character_coverage=1.5"):
        train_vocab([str(tmp_path / "t.txt")], str(tmp_path / "v"), 100, character_coverage=1.5)


def test_cli(tmp_path, sentences, capsys):
    (tmp_path / "t.txt").write_text("\n".join(sentences), encoding="utf-8")
    argv = ["--input", str(tmp_path / "t.txt"), "--output", str(tmp_path / "cli"),
            "--vocab-size", "100", "--input-sentence-size", "300", "--character-coverage", "0.9999"]
    assert cli.main(["vocab", *argv]) == 0
    assert AlbertTokenizer(tmp_path / "cli.model").vocab_size == 100
    capsys.readouterr()
    assert main(["--input", str(tmp_path / "missing*.txt"), "--output", "x", "--vocab-size", "99"]) == 2
    assert main(["--input", str(tmp_path / "t.txt"), "--output", "x"]) == 2
    assert main(["--input", str(tmp_path / "t.txt"), "--output", "x", "--vocab-size", "ten"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 3 and all(line.startswith("albert-tf vocab: ") for line in err), err
    assert "matches no file" in err[0] and "--vocab-size" in err[1] and "ten" in err[2]
    assert main(["--help"]) == 0 and "--no-lower-case" in capsys.readouterr().out
