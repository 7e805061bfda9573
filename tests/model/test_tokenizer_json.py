"""tokenizer.json as a tokenizer source: parity with transformers 5, discovery, refusals.

The reference ids, offsets and probabilities are transformers' own, recorded by
tools/make_tokenizer_json_fixtures.py from directories transformers 5 saved.
"""

from __future__ import annotations

import gzip
import json
import logging
import os
import shutil

import pytest

from albert_tf.checkpoint import open_checkpoint
from albert_tf.tokenizer.json_unigram import JsonUnigramTokenizer
from albert_tf.tokenizer.json_wordpiece import JsonWordPieceTokenizer
from albert_tf.tokenizer.kinds import kind_of_file, python_tokenizer
from albert_tf.tokenizer.tokenizer_json import TokenizerJsonError, read_tokenizer_json

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(__file__)), "fixtures", "tokenizer_json")
ALBERT, BERT = os.path.join(FIXTURES, "albert"), os.path.join(FIXTURES, "bert")


@pytest.fixture(scope="module")
def reference():
    with gzip.open(os.path.join(FIXTURES, "reference.json.gz"), "rt", encoding="utf-8") as f:
        return json.load(f)


def test_the_fixtures_are_what_transformers_5_saves():
    for directory in (ALBERT, BERT):
        assert sorted(os.listdir(directory)) == ["config.json", "model.safetensors",
                                                 "tokenizer.json", "tokenizer_config.json"]
    albert = read_tokenizer_json(os.path.join(ALBERT, "tokenizer.json"))
    assert albert.kind == "sentencepiece"
    assert [n["type"] for n in albert.normalizers] == [
        "Replace", "Replace", "NFKD", "StripAccents", "Lowercase", "Precompiled"]
    assert [t.content for t in albert.added if not t.special] == list('()"-.–£€')
    assert read_tokenizer_json(os.path.join(BERT, "tokenizer.json")).kind == "wordpiece"


@pytest.mark.parametrize("shape, kind", [("albert", JsonUnigramTokenizer),
                                         ("bert", JsonWordPieceTokenizer)])
def test_ids_and_offsets_equal_transformers_on_every_line(reference, shape, kind):
    # WordPiece: tokenizers' BertNormalizer rules, where they depart from the original's (a
    # capital sigma, unassigned code points kept, U+2028/U+2029 as whitespace), included
    tok = python_tokenizer(os.path.join(ALBERT if shape == "albert" else BERT, "tokenizer.json"))
    assert isinstance(tok, kind)
    expected = reference[shape]
    for line, ids, offsets in zip(reference["lines"], expected["ids"], expected["offsets"]):
        got_ids, got_offsets = tok.encode_with_offsets(line)
        assert got_ids == ids, line
        assert [list(o) for o in got_offsets] == offsets, line
    assert len(reference["lines"]) > 100


def test_a_wordpiece_tokenizer_json_lower_cases_sigma_as_tokenizers_does():
    tok = python_tokenizer(os.path.join(BERT, "tokenizer.json"))
    original = python_tokenizer(os.path.join(os.path.dirname(FIXTURES), "wordpiece", "vocab.txt"))
    assert original.encode("ΟΔΟΣ") != tok.encode("ΟΔΟΣ")  # the original: a final "ς"


@pytest.mark.parametrize("name", ["albert", "bert"])
def test_packed_rows_equal_transformers(reference, name):
    tok = python_tokenizer(os.path.join(FIXTURES, name, "tokenizer.json"))
    expected = reference[name]
    for line, row in zip(reference["lines"], expected["packed"]):
        assert tok.encode_pair(line, seq_length=expected["seq_length"])["input_word_ids"] == row


def test_the_transformers_pieces_are_not_the_original_ones():
    # user-defined symbols are cut out of the text first, so the word after one gets "▁"
    tok = python_tokenizer(os.path.join(ALBERT, "tokenizer.json"))
    pieces = tok.tokenize("lower-cased")
    assert pieces[pieces.index("-") + 1].startswith("▁")  # SentencePiece itself: no "▁"
    assert tok.tokenize("``a''") == ["▁", '"', "a", '"']  # `` and '' normalized to "


def test_a_directory_with_tokenizer_json_only_reads_it():
    opened = open_checkpoint(ALBERT)
    files = opened.tokenizer
    assert files.spm_model == os.path.join(ALBERT, "tokenizer.json")
    assert (files.kind, files.do_lower_case, files.keep_accents) == ("sentencepiece", True, False)
    assert isinstance(files.load(), JsonUnigramTokenizer)
    wordpiece = open_checkpoint(BERT).tokenizer
    assert wordpiece.kind == "wordpiece" and isinstance(wordpiece.load(), JsonWordPieceTokenizer)


def test_the_original_file_wins_and_says_so(tmp_path, caplog):
    directory = tmp_path / "both"
    shutil.copytree(ALBERT, directory)
    # a SentencePiece model of the same size beside it: the albert-tf tokenizer's file
    tok = python_tokenizer(os.path.join(ALBERT, "tokenizer.json"))
    _write_spm(directory / "spiece.model", tok)
    with caplog.at_level(logging.INFO):
        files = open_checkpoint(str(directory)).tokenizer
    assert files.spm_model == str(directory / "spiece.model")
    said = [r for r in caplog.records if "tokenizer.json" in r.getMessage()]
    assert len(said) == 1 and said[0].levelno == logging.INFO
    assert "--spm-model" in said[0].getMessage()
    chosen = open_checkpoint(str(directory)).tokenizer_files(str(directory / "tokenizer.json"))
    assert chosen.spm_model.endswith("tokenizer.json") and chosen.kind == "sentencepiece"


def _write_spm(path, tok) -> None:
    """A unigram SentencePiece model with `tok`'s pieces and scores (spm_proto's writer)."""
    from albert_tf.tokenizer.spm_proto import unigram_model_proto

    path.write_bytes(unigram_model_proto(tok.pieces, tok.scores, tok.unk_id,
                                         control=(tok.pad_id, tok.cls_id, tok.sep_id,
                                                  tok.mask_id)))


def test_from_preset_without_a_tokenizer_warns_once(tmp_path, caplog):
    from albert_tf import AlbertSequenceClassifier

    directory = tmp_path / "bare"
    directory.mkdir()
    for name in ("config.json", "model.safetensors"):
        shutil.copyfile(os.path.join(ALBERT, name), directory / name)
    with caplog.at_level(logging.WARNING):
        model = AlbertSequenceClassifier.from_preset(str(directory))
    assert model.preprocessor is None
    said = [r.getMessage() for r in caplog.records if "tokenizer file" in r.getMessage()]
    assert len(said) == 1
    assert "tokenizer.json" in said[0] and "spm_model=" in said[0]


@pytest.mark.parametrize("change, named", [
    (lambda j: j["model"].update(type="BPE"), "model BPE"),
    (lambda j: j["model"].update(type="WordLevel"), "model WordLevel"),
    (lambda j: j["normalizer"]["normalizers"].append({"type": "Strip"}), "normalizer Strip"),
    (lambda j: j.update(pre_tokenizer={"type": "ByteLevel"}), "pre_tokenizer ByteLevel"),
    (lambda j: j["model"].update(byte_fallback=True), "byte_fallback"),
    (lambda j: j.update(post_processor={"type": "RobertaProcessing"}), "RobertaProcessing"),
    (lambda j: j["added_tokens"].append(dict(j["added_tokens"][0], id=len(j["model"]["vocab"]),
                                             content="<new>")), "'<new>'"),
])
def test_a_component_albert_tf_does_not_apply_is_one_line(tmp_path, change, named):
    data = json.load(open(os.path.join(ALBERT, "tokenizer.json"), encoding="utf-8"))
    change(data)
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(TokenizerJsonError) as caught:
        kind_of_file(path)
    message = str(caught.value)
    assert "\n" not in message and str(path) in message and named in message
    assert caught.value.exit_status == 2


def test_wordpiece_options_map_onto_the_wordpiece_tokenizer(tmp_path):
    data = json.load(open(os.path.join(BERT, "tokenizer.json"), encoding="utf-8"))
    data["normalizer"].update(lowercase=False, handle_chinese_chars=False)
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    tok = python_tokenizer(path)
    assert (tok.do_lower_case, tok.strips_accents, tok.tokenize_chinese_chars) == (
        False, False, False)
    spec = read_tokenizer_json(path)
    assert (spec.do_lower_case, spec.keep_accents) == (False, True)


def test_an_unknown_tokenizer_class_beside_tokenizer_json_alone_is_the_files(tmp_path):
    directory = tmp_path / "fast"
    shutil.copytree(ALBERT, directory)
    config = json.loads((directory / "tokenizer_config.json").read_text(encoding="utf-8"))
    config["tokenizer_class"] = "PreTrainedTokenizerFast"
    (directory / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    files = open_checkpoint(str(directory)).tokenizer
    assert files.spm_model.endswith("tokenizer.json") and files.kind == "sentencepiece"


def test_convert_to_kerashub_refuses_a_tokenizer_json_in_one_line(tmp_path, capsys):
    from albert_tf.checkpoint import convert

    assert convert.main([ALBERT, str(tmp_path / "kh"), "--to", "kerashub"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "tokenizer.json" in err and "--spm-model" in err
    assert not (tmp_path / "kh").exists()


@pytest.mark.parametrize("name", ["cased_accents", "v4", "first"])
def test_other_unigram_forms_equal_transformers_on_every_line(reference, name):
    # cased with accents kept (no NFKD, StripAccents, Lowercase); transformers 4's form
    # (Metaspace alone, " {2,}" collapsed, [MASK] with lstrip); prepend_scheme "first"
    tok = python_tokenizer(os.path.join(FIXTURES, "variants", name + ".json"))
    for line, ids in zip(reference["lines"], reference["variants"][name]):
        assert tok.encode(line) == ids, line
