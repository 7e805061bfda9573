"""WordPiece (Chinese ALBERT) data: `vocab --model-type wordpiece` and `create-data` on a vocab.txt.

The corpus is written here: English sentences of the embedded corpus interleaved with
Chinese sentences drawn (seeded) from a pool of common characters.
"""

from __future__ import annotations

import glob
import json
import os
import random

import numpy as np
import pytest

from albert_tf.tokenizer.wordpiece import SUFFIX, WordPieceTokenizer, is_cjk
from albert_tf.training.data import create_data, masking
from albert_tf.training.data import pairs as sop
from albert_tf.training.data import records as tfrecords
from albert_tf.training.data.corpus import open_corpus, write_corpus_file
from albert_tf.training.data.vocab import main as vocab_main

CHINESE = ("的一是不了人我在有他这中大来上国个到说们为子和你地出道也时年得就那要下以生会自着去之"
           "过家学对可她里后小么心多天而能好都然没日于起还发成事只作当想看文无开手十用主行方又如前"
           "所本见经头面公同三已老从动两长知民样现分将外但身些与高意进把法此实回二理美点月明其种声")
VOCAB_SIZE = 1200


def _chinese_sentence(rng: random.Random) -> str:
    return "".join(rng.choice(CHINESE) for _ in range(rng.randint(8, 30))) + "。"


@pytest.fixture(scope="module")
def documents(corpus_documents) -> list[list[str]]:
    """60 documents, each English sentences and Chinese ones alternating."""
    rng = random.Random(0)
    return [[s if i % 2 else _chinese_sentence(rng) + " " + s for i, s in enumerate(doc)]
            for doc in corpus_documents[:60]]


@pytest.fixture(scope="module")
def corpus_path(tmp_path_factory, documents) -> str:
    path = tmp_path_factory.mktemp("mixed") / "mixed.txt"
    write_corpus_file(str(path), iter(documents))
    return str(path)


@pytest.fixture(scope="module")
def vocab_path(tmp_path_factory, corpus_path) -> str:
    out = tmp_path_factory.mktemp("wp") / "vocab"
    assert vocab_main(["--model-type", "wordpiece", "--input", corpus_path, "--output", str(out),
                       "--vocab-size", str(VOCAB_SIZE)]) == 0
    return str(out) + ".txt"


def test_trained_vocab_loads_and_splits_words(vocab_path, documents):
    tokenizer = WordPieceTokenizer(vocab_path)  # read_vocab's rules: specials, no repeats
    assert tokenizer.tokens[:5] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    assert 0.9 * VOCAB_SIZE <= tokenizer.vocab_size <= VOCAB_SIZE + 2 * len(set(CHINESE))
    assert all(c in tokenizer.vocab for c in CHINESE)  # every character seen is a token
    text = " ".join(documents[0][:6])
    tokens = tokenizer.tokenize(text)
    assert "[UNK]" not in tokens
    chinese = [t for t in tokens if any(is_cjk(c) for c in t)]
    assert chinese and all(len(t) == 1 for t in chinese)  # one token per character
    continued = [t for t in tokenizer.tokens if t.startswith(SUFFIX) and len(t) > len(SUFFIX) + 1]
    assert continued  # multi-character continuations were learned
    assert any(t.startswith(SUFFIX) for t in tokens)  # and are used on the corpus
    assert tokenizer.decode(tokenizer.encode(text)) == tokenizer.normalize(text)


def test_wordpiece_vocab_errors(tmp_path, corpus_path, vocab_path, capsys):
    prefix = vocab_path[:-len(".txt")]
    before = open(vocab_path, "rb").read()
    argv = ["--model-type", "wordpiece", "--input", corpus_path, "--vocab-size", "300"]
    assert vocab_main(argv + ["--output", prefix]) == 2  # exists: kept
    assert open(vocab_path, "rb").read() == before
    assert vocab_main(argv + ["--output", prefix, "--keep-accents", "--overwrite"]) == 2
    assert vocab_main(["--model-type", "wordpiece", "--input", corpus_path, "--vocab-size", "5",
                       "--output", str(tmp_path / "v")]) == 2
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n")
    assert vocab_main(["--model-type", "wordpiece", "--input", str(empty), "--vocab-size", "50",
                       "--output", str(tmp_path / "v")]) == 2
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(lines) == 4 and all("Traceback" not in line for line in lines), lines
    assert "exist" in lines[0] and "--keep-accents" in lines[1] and "vocab_size=5" in lines[2]
    assert "empty" in lines[3]
    assert not os.path.exists(tmp_path / "v.txt")
    assert not [n for n in os.listdir(os.path.dirname(vocab_path)) if ".tmp" in n]


def test_word_start_rule_for_wordpiece():
    table = masking.word_start_table(["[CLS]", "play", "##ing", "我", "##s", "#", ","], "wordpiece")
    assert table.tolist() == [True, True, False, True, False, True, True]


@pytest.fixture(scope="module")
def records(tmp_path_factory, corpus_path, vocab_path):
    out = str(tmp_path_factory.mktemp("records"))
    assert create_data.main(["--input", corpus_path, "--spm-model", vocab_path, "--output-dir", out,
                             "--seq-length", "64", "--max-predictions-per-seq", "12",
                             "--dupe-factor", "2", "--processes", "1"]) == 0
    return [tfrecords.parse_record(r) for f in sorted(glob.glob(os.path.join(out, "*.tfrecord")))
            for r in tfrecords.read_records(f)]


def test_create_data_masks_whole_wordpiece_words(records, vocab_path):
    tokenizer = WordPieceTokenizer(vocab_path)
    special = {tokenizer.cls_id, tokenizer.sep_id}
    masked_continuations = masked_chinese = 0
    assert len(records) > 50
    for record in records:
        length = int(record["input_mask"].sum())
        count = int(record["masked_lm_weights"].sum())
        positions = record["masked_lm_positions"][:count].tolist()
        ids = record["input_ids"][:length].copy()
        ids[positions] = record["masked_lm_ids"][:count]  # the text before masking
        pieces = [tokenizer.tokens[i] for i in ids]
        starts = np.array([not p.startswith(SUFFIX) or i == 0 or ids[i - 1] in special
                           for i, p in enumerate(pieces)])
        np.testing.assert_array_equal(record["token_boundary"][:length], starts)
        chosen = set(positions)
        for p in positions:
            if not starts[p]:  # a continuation: its word's head is masked with it
                assert p - 1 in chosen, (pieces, positions)
                masked_continuations += 1
            following = p + 1
            while following < length and not starts[following]:
                assert following in chosen, (pieces, positions)  # and the word's tail
                following += 1
            masked_chinese += any(is_cjk(c) for c in pieces[p])
    assert masked_continuations > 0 and masked_chinese > 0  # both kinds were masked


def test_vocabulary_reads_either_kind(vocab_path, spm_model_path):
    wp_tokenizer, wp_vocab = create_data.load_vocabulary(vocab_path, True)
    assert wp_tokenizer.kind == "wordpiece" and wp_vocab.size == wp_tokenizer.vocab_size
    assert not wp_vocab.word_starts[wp_tokenizer.vocab["##" + CHINESE[0]]]
    spm_tokenizer, spm_vocab = create_data.load_vocabulary(spm_model_path, True)
    assert spm_tokenizer.kind == "sentencepiece"
    assert isinstance(spm_vocab, sop.Vocabulary)


@pytest.mark.slow
def test_pretrain_on_wordpiece_records(tmp_path, corpus_path, vocab_path):
    """create-data, then a tiny pretrain run with dynamic masking, on the vocab.txt: the
    model written ships that vocab.txt and loads as a WordPiece model."""
    import keras

    from albert_tf import load_checkpoint
    from albert_tf.training.pretrain.config import load_config
    from albert_tf.training.pretrain.run import run

    data = tmp_path / "records"
    assert create_data.main(["--input", corpus_path, "--spm-model", vocab_path, "--output-dir",
                             str(data), "--seq-length", "64", "--max-predictions-per-seq", "10",
                             "--dupe-factor", "1", "--processes", "1"]) == 0
    tiny = ["albert.embedding_size=32", "albert.hidden_size=64", "albert.num_hidden_layers=2",
            "albert.num_attention_heads=2", "albert.intermediate_size=128"]
    cfg = load_config(None, [*tiny, "train_steps=20", "global_batch_size=16", "warmup_steps=4",
                             "learning_rate=0.02", "checkpoint_every=10", "dynamic_masking=true"],
                      train_data=str(data / "*.tfrecord"), spm_model=vocab_path,
                      output_dir=str(tmp_path / "run"))
    summary = run(cfg)
    keras.config.set_dtype_policy("float32")
    assert summary["step"] == 20 and np.all(np.isfinite(summary["history"]["mlm_loss"]))
    model_dir = tmp_path / "run" / "model"
    assert (model_dir / "vocab.txt").read_bytes() == open(vocab_path, "rb").read()
    record = json.loads((model_dir / "albert_task.json").read_text())
    assert record["tokenizer"] == "wordpiece"
    model = load_checkpoint(str(model_dir))
    assert model.config.vocab_size == WordPieceTokenizer(vocab_path).vocab_size


@pytest.mark.slow
def test_beam_writes_the_local_records_with_a_vocab_txt(tmp_path, corpus_path, vocab_path):
    import apache_beam as beam
    from apache_beam.options.pipeline_options import PipelineOptions

    from albert_tf.training.data import beam as beam_pipeline

    options = sop.GenerationOptions(max_seq_length=64, max_predictions_per_seq=10, dupe_factor=1)
    local = create_data.create_pretraining_data(open_corpus(corpus_path), str(tmp_path / "local"),
                                                vocab_path, options, processes=1)
    with beam.Pipeline(options=PipelineOptions(["--runner", "DirectRunner"])) as pipeline:
        beam_pipeline.build_pipeline(pipeline, corpus_path, str(tmp_path / "beam"), vocab_path,
                                     options, num_shards=2)
    read = lambda d: sorted(r for f in glob.glob(str(tmp_path / d / "*.tfrecord"))  # noqa: E731
                            for r in tfrecords.read_records(f))
    assert len(read("local")) == local["instances"] > 50
    assert read("local") == read("beam")


def test_create_data_refuses_a_bad_vocab_txt(tmp_path, corpus_path, vocab_path, capsys):
    tokens = open(vocab_path, encoding="utf-8").read().splitlines()
    (tmp_path / "no_unk.txt").write_text("\n".join(t for t in tokens if t != "[UNK]") + "\n")
    (tmp_path / "bom.txt").write_bytes(b"\xef\xbb\xbf" + "\n".join(tokens).encode() + b"\n")
    for name in ("no_unk.txt", "bom.txt"):
        out = tmp_path / ("out_" + name)
        assert create_data.main(["--input", corpus_path, "--spm-model", str(tmp_path / name),
                                 "--output-dir", str(out), "--processes", "1"]) == 2
        assert not out.exists()
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(lines) == 2 and "Traceback" not in "".join(lines), lines
    assert "no_unk.txt: has no [UNK] line" in lines[0]
    assert "bom.txt:1: starts with a UTF-8 byte-order mark" in lines[1]
