"""Directories as transformers 5 saves them (tokenizer.json, no spiece.model or vocab.txt)
exported to SavedModels answer raw text with transformers' probabilities, in a
process that imports only TensorFlow and tensorflow-text (tests/fixtures/tokenizer_json);
as .tflite files too (WordPiece and Unigram); what a Unigram one cannot serve is refused."""

from __future__ import annotations

import gzip
import json
import os

import numpy as np
import pytest

from albert_tf.serving import export
from tests.helpers.fresh_process import call_signatures

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(__file__)), "fixtures", "tokenizer_json")
ATOL = 1e-4  # float64 transformers -> float32 SavedModel


def _reference() -> dict:
    with gzip.open(os.path.join(FIXTURES, "reference.json.gz"), "rt", encoding="utf-8") as f:
        return json.load(f)


@pytest.mark.slow
def test_savedmodels_of_tokenizer_json_directories_equal_transformers(tmp_path):
    with gzip.open(os.path.join(FIXTURES, "reference.json.gz"), "rt", encoding="utf-8") as f:
        ref = json.load(f)
    texts = np.array([t.encode() for t in ref["lines"][:ref["ordinary"]]], dtype=object)
    calls = {}
    for name in ("albert", "bert"):
        output = str(tmp_path / "served" / name)
        assert export.main(["--checkpoint", os.path.join(FIXTURES, name), "--output", output,
                            "--seq-length", str(ref[name]["seq_length"])]) == 0
        calls[name] = (os.path.join(output, "1"), "serving_default", {"text": texts})
    (tmp_path / "fresh").mkdir()
    got = call_signatures(calls, tmp_path / "fresh")
    for name in ("albert", "bert"):
        want = np.array(ref[name]["probabilities"])
        np.testing.assert_allclose(got[name]["probabilities"], want, atol=ATOL, rtol=0)
        worst = float(np.abs(got[name]["probabilities"] - want).max())
        print(f"{name}: {len(texts)} lines, largest difference {worst:.2e}")


@pytest.mark.slow
def test_a_wordpiece_tokenizer_json_litert_file_equals_transformers(tmp_path):
    from albert_tf.serving.litert import runtime

    with gzip.open(os.path.join(FIXTURES, "reference.json.gz"), "rt", encoding="utf-8") as f:
        ref = json.load(f)
    output = str(tmp_path / "bert.tflite")
    assert export.main(["--checkpoint", os.path.join(FIXTURES, "bert"), "--output", output,
                        "--format", "litert", "--seq-length",
                        str(ref["bert"]["seq_length"])]) == 0
    interpreter = runtime.open_interpreter(output)
    texts = ref["lines"][:ref["ordinary"]]
    got = np.concatenate([runtime.call(interpreter, "serving_default",
                                       text=runtime.strings([t]))["probabilities"]
                          for t in texts])
    want = np.array(ref["bert"]["probabilities"])
    # "[MASK]" typed in the text is the [MASK] token for transformers and the SavedModel;
    # LiteRT's WordPiece kernel splits it as punctuation (docs/tokenization.md)
    text_is_text = [i for i, t in enumerate(texts) if "[MASK]" not in t]
    assert len(text_is_text) == len(texts) - 1
    np.testing.assert_allclose(got[text_is_text], want[text_is_text], atol=ATOL, rtol=0)


@pytest.mark.slow
def test_a_unigram_tokenizer_json_litert_file_equals_transformers(tmp_path):
    """Probabilities of every ordinary line ("[MASK]" and the user-defined symbols
    `( ) " - .` typed in it are added tokens, cut out as transformers cuts them)."""
    from albert_tf.serving.litert import runtime

    ref = _reference()
    output = str(tmp_path / "albert.tflite")
    assert export.main(["--checkpoint", os.path.join(FIXTURES, "albert"), "--output", output,
                        "--format", "litert", "--seq-length",
                        str(ref["albert"]["seq_length"])]) == 0
    interpreter = runtime.open_interpreter(output)
    texts = ref["lines"][:ref["ordinary"]]
    assert any("[MASK]" in t for t in texts) and any("(" in t for t in texts)
    got = np.concatenate([runtime.call(interpreter, "serving_default",
                                       text=runtime.strings([t]))["probabilities"]
                          for t in texts])
    want = np.array(ref["albert"]["probabilities"])
    np.testing.assert_allclose(got, want, atol=ATOL, rtol=0)
    print(f"albert.tflite: {len(texts)} lines, largest difference "
          f"{float(np.abs(got - want).max()):.2e}")


class _TokenizeOnly:
    """`LiteText.tokenize` alone as a .tflite signature: the ids the kernel gives."""

    def __init__(self, text):
        self.text = text

    def signatures(self):
        import tensorflow as tf

        @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
        def tokenize(text):
            ids, splits = self.text.tokenize(text)
            return {"ids": ids, "splits": splits}
        return {"tokenize": tokenize}


@pytest.mark.slow
def test_unigram_tokenizer_json_ids_in_litert_equal_transformers(tmp_path):
    """Every line's ids from LiteRT's kernel equal transformers', the hard cases too
    (typed added tokens, whitespace of every kind, accents, CJK), but for the documented
    difference: a word that begins with a typed "▁" gets one more "▁" piece."""
    from albert_tf.serving.litert import convert, runtime
    from albert_tf.serving.litert.text_graph import LiteText
    from albert_tf.tokenizer.kinds import python_tokenizer

    ref = _reference()
    tokenizer = python_tokenizer(os.path.join(FIXTURES, "albert", "tokenizer.json"))
    interpreter = runtime.open_interpreter(convert.convert(
        _TokenizeOnly(LiteText(tokenizer, ref["albert"]["seq_length"])), "none"))
    differ = []
    for line, want in zip(ref["lines"], ref["albert"]["ids"]):
        got = runtime.call(interpreter, "tokenize", text=runtime.strings([line]))["ids"]
        if got.tolist() != want:
            differ.append((line, got.tolist(), want))
    typed = [line for line in ref["lines"] if any(
        w.startswith("\u2581") for w in line.split())]
    assert [line for line, _, _ in differ] == typed and len(typed) == 1, differ
    _, got, want = differ[0]
    space = tokenizer.piece_to_id("\u2581")
    assert [i for i in got if i != space] == [i for i in want if i != space]
    assert len(got) > len(want)


def test_export_refuses_offset_signatures_for_a_unigram_tokenizer_json():
    from albert_tf import tasks
    from albert_tf.checkpoint.tokenizer_files import tokenizer_json_files
    from albert_tf.serving.export_plan import ExportError, _check_tokenizer_json

    class Record:
        spec, task = tasks.ALL_TASKS["span"], "span"

    files = tokenizer_json_files(os.path.join(FIXTURES, "albert", "tokenizer.json"))
    with pytest.raises(ExportError, match="character offsets.*--token-ids-only"):
        _check_tokenizer_json(files, Record, token_ids_only=False)
    _check_tokenizer_json(files, Record, token_ids_only=True)


def test_export_of_weights_without_a_tokenizer_file_is_one_line(tmp_path, capsys):
    import shutil

    bare = tmp_path / "bare"
    bare.mkdir()
    for name in ("config.json", "model.safetensors"):
        shutil.copyfile(os.path.join(FIXTURES, "albert", name), bare / name)
    assert export.main(["--checkpoint", str(bare), "--output", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "tokenizer.json" in err and "--spm-model" in err
    assert not (tmp_path / "out").exists()


# A real 30k ALBERT-convention SentencePiece model (nmt_nfkc character map), as the
# tokenizer.json transformers 5 makes of it (tools/make_real_spm_json_fixtures.py).
REAL_SPM = os.path.join(os.path.dirname(os.path.dirname(__file__)), "data", "real",
                        "google_albert", "albertvi_30k-clean.model")
REAL_IDS = os.path.join(os.path.dirname(FIXTURES), "real_spm_json", "ids.json.gz")


def _real_tokenizer_json(tmp_path) -> tuple[str, dict]:
    import hashlib

    from albert_tf.tokenizer.json_of_spm import tokenizer_json_of_spm

    with gzip.open(REAL_IDS, "rt", encoding="utf-8") as f:
        record = json.load(f)
    with open(REAL_SPM, "rb") as f:
        made = tokenizer_json_of_spm(f.read(), record["do_lower_case"], record["keep_accents"])
    text = json.dumps(made, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    assert hashlib.sha256(text.encode("utf-8")).hexdigest() == record["tokenizer_json_sha256"]
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(made, ensure_ascii=False), encoding="utf-8")
    return str(path), record


def test_json_of_spm_makes_transformers_file_of_a_real_model(tmp_path):
    _real_tokenizer_json(tmp_path)


@pytest.mark.slow
def test_litert_ids_of_a_real_unigram_tokenizer_json_equal_transformers(tmp_path):
    """Every line, the typed added tokens and "▁" included, on a 30k vocabulary."""
    from albert_tf.serving.litert import convert, runtime
    from albert_tf.serving.litert.text_graph import LiteText
    from albert_tf.tokenizer.kinds import python_tokenizer

    path, record = _real_tokenizer_json(tmp_path)
    tokenizer = python_tokenizer(path)
    interpreter = runtime.open_interpreter(convert.convert(
        _TokenizeOnly(LiteText(tokenizer, 128)), "none"))
    assert len(record["lines"]) > 100
    for line, want in zip(record["lines"], record["ids"]):
        assert tokenizer.encode(line) == want, line
        got = runtime.call(interpreter, "tokenize", text=runtime.strings([line]))["ids"]
        assert got.tolist() == want, line


def test_a_tokenizer_json_without_a_character_map_composes_too(tmp_path):
    """A spiece.model trained with the identity normaliser gives a tokenizer.json with no
    Precompiled step; the kernel's ids (in TensorFlow) equal transformers 5's, recorded
    on that spiece.model by tools/make_hf_reader_fixtures.py."""
    import tensorflow as tf

    from albert_tf.serving.litert.text_graph import LiteText
    from albert_tf.tokenizer.json_of_spm import tokenizer_json_of_spm
    from albert_tf.tokenizer.kinds import python_tokenizer

    with gzip.open(os.path.join(os.path.dirname(FIXTURES), "hf_readers", "record.json.gz"),
                   "rt", encoding="utf-8") as f:
        record = json.load(f)
    source = os.path.join(os.path.dirname(FIXTURES), record["sources"]["sentencepiece"])
    with open(os.path.join(source, "spiece.model"), "rb") as f:
        made = tokenizer_json_of_spm(f.read(), do_lower_case=True, keep_accents=False)
    assert "Precompiled" not in [n["type"] for n in made["normalizer"]["normalizers"]]
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(made), encoding="utf-8")
    text = LiteText(python_tokenizer(str(path)), 32)
    want = record["reference"]["tokenizers"]["sentencepiece"]["ids"]
    differ = [line for line, ids in zip(record["lines"], want)
              if text.tokenize(tf.constant([line]))[0].numpy().tolist() != ids]
    assert differ == [line for line in record["lines"] if "\u2581" in line], differ


def test_a_unigram_tokenizer_json_without_a_space_piece_is_refused_for_litert(tmp_path):
    """The "▁" before an added token is dropped by its id; with none, one line."""
    from albert_tf.serving.litert.json_spm_model import LiteTokenizerError, lite_json_model
    from albert_tf.tokenizer.kinds import python_tokenizer

    with open(os.path.join(FIXTURES, "albert", "tokenizer.json"), encoding="utf-8") as f:
        data = json.load(f)
    data["model"]["vocab"] = [["\u2581\u2581" if piece == "\u2581" else piece, score]
                              for piece, score in data["model"]["vocab"]]
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    with pytest.raises(LiteTokenizerError, match=f"^{path} has no '\u2581' piece"):
        lite_json_model(python_tokenizer(str(path)))
