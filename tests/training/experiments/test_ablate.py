"""The ablation: NSP/none pretraining data, the grids, and `albert-tf ablate` end to end.

Text is the embedded corpus (`corpus_documents`) with the session's SentencePiece
model (`spm_model_path`); nothing is downloaded.
"""

from __future__ import annotations

import glob
import json
import math
import os

import numpy as np
import pytest

from albert_tf.tokenizer.spm import AlbertTokenizer
from albert_tf.training.data import (
    create_data,
    records,
)
from albert_tf.training.data import (
    pairs as sop,
)
from albert_tf.training.data.corpus import write_corpus_file
from albert_tf.training.experiments.ablate import grid as ablate_grid

MIN_TOKENS = 10  # shorter segments could occur in two documents by chance


@pytest.fixture(scope="module")
def tokenizer(spm_model_path):
    return AlbertTokenizer(spm_model_path)


@pytest.fixture(scope="module")
def text_documents(corpus_documents):
    """30 documents of the corpus without the sentences that occur in more than one of
    them (docstrings repeat across modules), so a segment's text names its document."""
    import collections

    docs = corpus_documents[:40]
    seen = collections.Counter(s for d in docs for s in set(d))
    unique = [[s for s in d if seen[s] == 1] for d in docs]
    return [d for d in unique if len(d) >= 2][:30]


@pytest.fixture(scope="module")
def documents(text_documents, tokenizer):
    """`text_documents`, each as its sentences' token arrays."""
    return [create_data.tokenize_sentences(tokenizer, d) for d in text_documents]


def _text(ids) -> str:
    return " " + " ".join(map(str, ids)) + " "


def _holders(segment, doc_texts: list[str]) -> set[int]:
    """Indices of the documents whose token stream contains `segment` contiguously."""
    needle = _text(segment)
    return {k for k, text in enumerate(doc_texts) if needle in text}


def _originals(record: dict) -> tuple[np.ndarray, np.ndarray]:
    """Segments A and B of a record with the masked positions restored to their ids."""
    ids = record["input_ids"].copy()
    weights = record["masked_lm_weights"] > 0
    ids[record["masked_lm_positions"][weights]] = record["masked_lm_ids"][weights]
    length = int(record["input_mask"].sum())
    seg = record["segment_ids"][:length]
    a = ids[1:int((seg == 0).sum()) - 1]  # [CLS] A [SEP]
    b = ids[int((seg == 0).sum()):length - 1]  # B [SEP]
    return a, b


def test_nsp_negatives_come_from_another_document_and_positives_from_the_same(documents):
    doc_texts = [_text(np.concatenate(d)) for d in documents]
    counts, coincidences = {0: 0, 1: 0}, 0
    for own, sentences in enumerate(documents):
        rng = np.random.default_rng([7, own])
        for a, b, label in filter(None, sop.next_sentence_pairs(sentences, documents, own, 61,
                                                                0.1, rng)):
            counts[label] += 1
            assert own in _holders(a, doc_texts)
            if len(b) < MIN_TOKENS:
                continue
            holders = _holders(b, doc_texts)
            if label:  # random next: B is a run of another document's text
                assert holders - {own}
                coincidences += own in holders  # a phrase that also occurs here
            else:  # actual next: B continues this document
                assert own in holders
    assert counts[0] > 50 and counts[1] > 50
    assert coincidences <= 0.05 * counts[1]
    # One-sentence chunks always take a random next, so negatives are a bit over half.
    assert 0.45 < counts[1] / (counts[0] + counts[1]) < 0.7


def test_nsp_without_another_document_skips_instead_of_pairing_with_itself(documents):
    pairs = list(sop.next_sentence_pairs(documents[0], [documents[0]], 0, 61, 0.0,
                                         np.random.default_rng(0)))
    assert None in pairs  # the negatives that had no other document
    assert all(p[2] == 0 for p in pairs if p is not None)


def test_sop_and_none_pairs_never_leave_their_document(documents):
    doc_texts = [_text(np.concatenate(d)) for d in documents]
    for swap in (True, False):
        labels = []
        for own, sentences in enumerate(documents):
            rng = np.random.default_rng([8, own])
            for a, b, label in filter(None, sop.sentence_pairs(sentences, np.ones(10**4, bool), 61,
                                                               0.1, rng, swap=swap)):
                labels.append(label)
                assert own in _holders(a, doc_texts) and own in _holders(b, doc_texts)
        assert (0.4 < np.mean(labels) < 0.6) if swap else not any(labels)


def _create_data(corpus_path: str, spm_model: str, out: str, objective: str) -> dict:
    """`albert-tf create-data ... --objective OBJECTIVE`, in this process."""
    code = create_data.main(
        ["--input", corpus_path, "--output-dir", out, "--spm-model", spm_model,
         "--max-seq-length", "64", "--max-predictions-per-seq", "10", "--dupe-factor", "2",
         "--objective", objective, "--documents-per-shard", "12", "--processes", "1"])
    assert code == 0
    with open(os.path.join(out, create_data.SUMMARY_FILE), encoding="utf-8") as f:
        return json.load(f)


@pytest.mark.parametrize("objective", ["nsp", "sop"])
def test_create_data_objective_records(objective, tmp_path, text_documents, spm_model_path,
                                       documents):
    """Through the CLI: NSP negatives pair text of two documents; SOP pairs never do."""
    corpus_path = str(tmp_path / "corpus.txt")
    write_corpus_file(corpus_path, iter(text_documents))
    out = str(tmp_path / "data")
    summary = _create_data(corpus_path, spm_model_path, out, objective)
    assert summary["objective"] == objective
    assert summary["options"]["objective"] == objective
    doc_texts = [_text(np.concatenate(d)) for d in documents]
    labels, checked, coincidences = [], 0, 0
    for path in sorted(glob.glob(os.path.join(out, create_data.SHARD_GLOB))):
        for raw in records.read_records(path):
            record = records.parse_record(raw)
            label = int(record["next_sentence_labels"][0])
            labels.append(label)
            a, b = _originals(record)
            if min(len(a), len(b)) < MIN_TOKENS:
                continue
            checked += 1
            holders_a, holders_b = _holders(a, doc_texts), _holders(b, doc_texts)
            if objective == "nsp" and label:  # from a document that does not hold A
                assert holders_b - holders_a
                coincidences += bool(holders_a & holders_b)
            else:
                assert holders_a & holders_b
    assert checked > 100
    # A random-next B may repeat a phrase of A's document, but only rarely.
    assert coincidences <= 0.05 * sum(labels)
    assert summary["negative_fraction"] == pytest.approx(np.mean(labels), abs=1e-4)
    assert 0.4 < summary["negative_fraction"] < 0.7


def test_none_objective_has_no_negatives_and_skips_the_loss(tmp_path, corpus_documents,
                                                            spm_model_path):
    from albert_tf.training.pretrain.config import PretrainConfig
    from albert_tf.training.pretrain.run import sentence_pair_loss

    corpus_path = str(tmp_path / "corpus.txt")
    write_corpus_file(corpus_path, iter(corpus_documents[:10]))
    out = str(tmp_path / "none")
    summary = _create_data(corpus_path, spm_model_path, out, "none")
    assert summary["objective"] == "none" and summary["negative_fraction"] == 0.0
    data = os.path.join(out, create_data.SHARD_GLOB)
    assert sentence_pair_loss(PretrainConfig(train_data=data, output_dir="x")) is False
    assert sentence_pair_loss(PretrainConfig(train_data=data, output_dir="x",
                                             sentence_pair_loss=True)) is True


def test_pretrainer_loss_without_sentence_pair_term_is_the_mlm_loss():
    """The loss of `sentence_pair_loss=False` is exactly the MLM part of the full loss."""
    import keras

    from albert_tf import AlbertConfig, AlbertPretrainer

    config = AlbertConfig(vocab_size=37, embedding_size=8, hidden_size=12, num_hidden_layers=2,
                          num_attention_heads=3, intermediate_size=20, max_position_embeddings=16)
    rng = np.random.default_rng(0)
    x = {"input_word_ids": rng.integers(5, 37, (2, 7)).astype("int32"),
         "input_mask": np.ones((2, 7), "int32"), "input_type_ids": np.zeros((2, 7), "int32"),
         "masked_lm_positions": np.array([[1, 3], [2, 5]], "int32")}
    y = {"masked_lm_ids": np.array([[6, 9], [11, 30]], "int32"),
         "masked_lm_weights": np.array([[1, 1], [1, 0]], "float32"),
         "sentence_order_label": np.array([0, 1], "int32")}
    keras.utils.set_random_seed(1)
    full = AlbertPretrainer(config)
    mlm_only = AlbertPretrainer(config, sentence_pair_loss=False)
    mlm_only.set_weights(full.get_weights())
    losses = {}
    for name, model in (("full", full), ("mlm", mlm_only)):
        out = model(x)
        losses[name] = float(model.compute_loss(x, y, out))
        losses[name + "_sop"] = float(model.sop_loss_tracker.result())
        losses[name + "_mlm"] = float(model.mlm_loss_tracker.result())
    assert losses["mlm"] == pytest.approx(losses["mlm_mlm"], rel=1e-6)
    assert losses["full"] == pytest.approx(losses["full_mlm"] + losses["full_sop"], rel=1e-6)
    assert losses["full_sop"] > 0.1
    assert AlbertPretrainer.from_config(mlm_only.get_config()).sentence_pair_loss is False


def test_beam_pipeline_refuses_nsp():
    pytest.importorskip("apache_beam")
    from albert_tf.training.data import beam

    with pytest.raises(ValueError, match="nsp"):
        beam.build_pipeline(None, None, "out", "spm.model",
                                     sop.GenerationOptions(objective="nsp"))


def test_generation_options_validate_the_objective():
    with pytest.raises(ValueError, match="objective='mlm'"):
        sop.GenerationOptions(objective="mlm")


# ---------------------------------------------------------------------------
# Grids

def test_paper_grid_trains_each_configuration_once_and_covers_every_table():
    base = ablate_grid.Setting()
    settings = ablate_grid.grid_settings("paper", base)
    names = [s.name for s in settings]
    assert len(names) == len(set(names)) == 11 and settings[0] == base
    tables = ablate_grid.table_settings(base)
    for table in tables.values():
        assert set(table) <= set(settings)
    assert {s.sharing for s in tables["sharing"]} == {"all", "attention", "ffn", "none"}
    assert {(s.sharing, s.embedding_size) for s in tables["embedding"]} == {
        (sh, e) for sh in ("all", "none") for e in (64, 128, 256)}
    assert [s.objective for s in tables["objective"]] == ["none", "nsp", "sop"]
    assert {s.dropout for s in tables["dropout"]} == {0.0, ablate_grid.DROPOUT_ON}
    assert len(ablate_grid.grid_settings("objective", base)) == 3
    with pytest.raises(ValueError, match="grid="):
        ablate_grid.grid_settings("everything", base)


def _independent_parameter_count(c: dict) -> int:
    """The encoder's parameters by the paper's arithmetic, written out for each sharing mode."""
    v, e, h, i, layers = (c["vocab_size"], c["embedding_size"], c["hidden_size"],
                          c["intermediate_size"], c["num_hidden_layers"])
    embeddings = (v + c["max_position_embeddings"] + c["type_vocab_size"]) * e + 2 * e
    projection = (e * h + h) if e != h else 0
    attention = 4 * (h * h + h) + 2 * h  # Q, K, V, output dense + LayerNorm
    ffn = (h * i + i) + (i * h + h) + 2 * h  # two dense + LayerNorm
    blocks = {"all": (1, 1), "attention": (1, layers), "ffn": (layers, 1),
              "none": (layers, layers)}[c["sharing"]]
    return embeddings + projection + blocks[0] * attention + blocks[1] * ffn + (h * h + h)


def test_every_paper_configuration_has_the_formula_parameter_count():
    """Each configuration's encoder, built in Keras, against the count written out above
    (and `params.encoder_parameters`, which the ablation reports beside the built count)."""
    from albert_tf import AlbertEncoder
    from albert_tf.params import encoder_parameters
    from albert_tf.training.experiments.ablate import run as ablate

    opts = ablate.AblateOptions(output="unused")
    for setting in ablate_grid.grid_settings("paper", ablate.base_setting(opts),
                                             ablate.embedding_sizes(opts)):
        config = ablate.model_config(opts, setting, vocab_size=3000)
        built = sum(math.prod(w.shape) for w in AlbertEncoder(config).weights)
        expected = _independent_parameter_count(config.to_dict())
        assert built == expected == encoder_parameters(config), setting.name
        assert config.sharing == setting.sharing
        assert config.embedding_size == setting.embedding_size
        assert config.hidden_dropout_prob == config.attention_probs_dropout_prob == setting.dropout


# ---------------------------------------------------------------------------
# End to end through the command line, on a labelled slice of the embedded corpus.

TINY_MODEL = {"hidden_size": 24, "num_hidden_layers": 3, "num_attention_heads": 2,
              "intermediate_size": 48, "embedding_size": 16, "max_position_embeddings": 32,
              "vocab_size": 400}


@pytest.fixture(scope="module")
def labelled_slice():
    """About 8 documents of each downstream class and a few unlabelled ones, with names."""
    from albert_tf.training.data import split

    everything = split.corpus_documents(None)
    taken, per_group = [], {}
    for doc in everything:
        if per_group.get(doc.group, 0) < (8 if doc.group != "other" else 4):
            per_group[doc.group] = per_group.get(doc.group, 0) + 1
            taken.append(doc)
    return taken


@pytest.mark.slow
def test_ablate_command_end_to_end_and_resume(tmp_path, monkeypatch, labelled_slice, capsys):
    from albert_tf.training.data import embedded
    from albert_tf.training.experiments.ablate import run as ablate

    # The run reads the embedded corpus through `embedded.embedded_corpus`: the slice
    # stands in for it there (the summary is the real one's, for split.json).
    whole = embedded.embedded_corpus()
    monkeypatch.setattr(embedded, "embedded_corpus", lambda: embedded.EmbeddedCorpus(
        [(d.name, d.sentences) for d in labelled_slice], whole.summary))
    config = tmp_path / "tiny.json"
    config.write_text(json.dumps(TINY_MODEL))
    out = tmp_path / "ablation"
    argv = ["--output", str(out), "--grid", "objective", "--preset", str(config), "--steps", "3",
            "--batch-size", "8", "--seq-length", "32", "--vocab-size", "400",
            "--dupe-factor", "1", "--finetune-steps", "2"]
    assert ablate.main(argv) == 0
    printed = capsys.readouterr().out
    results = json.loads((out / "results.json").read_text())
    assert results["finished"] == [s.name for s in ablate_grid.grid_settings(
        "objective", ablate_grid.Setting(sharing="all", embedding_size=16))]
    assert not results["pending"]
    for name, result in results["results"].items():
        assert result["parameters"] == result["parameters_formula"] == \
            _independent_parameter_count({**TINY_MODEL, "sharing": "all", "type_vocab_size": 2})
        for key in ("mlm_accuracy", "nsp_accuracy", "sop_accuracy", "downstream_accuracy"):
            assert 0.0 <= result[key] <= 1.0, (name, key)
        assert result["examples_per_sec"] > 0
        assert result["heldout_examples"]["sop"] > 0 and result["heldout_examples"]["nsp"] > 0
    trained = {r["setting"]["objective"]: r for r in results["results"].values()}
    # "none" trains no sentence head: its loss is the MLM loss alone.
    assert trained["none"]["final_train_metrics"]["loss"] == pytest.approx(
        trained["none"]["final_train_metrics"]["mlm_loss"], rel=1e-5)
    assert trained["sop"]["final_train_metrics"]["loss"] > \
        trained["sop"]["final_train_metrics"]["mlm_loss"]
    summaries = results["data"]
    # The run split the slice, not the whole corpus.
    assert summaries["train-sop"]["documents"] + summaries["heldout-sop"]["documents"] <= \
        len(labelled_slice), summaries
    assert summaries["train-nsp"]["objective"] == "nsp"
    assert summaries["heldout-nsp"]["negative_fraction"] > 0.3
    assert summaries["train-none"]["negative_fraction"] == 0.0
    md = (out / "results.md").read_text()
    assert "Table 5" in md and "| NSP |" in md and "not run" not in md
    for png in ("objective_cross_task.png", "mlm_vs_parameters.png"):
        assert (out / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert str(out / png) in printed

    # Resume: a rerun trains nothing and leaves every result as it was.
    stamps = {p: p.stat().st_mtime_ns for p in out.glob("runs/*/result.json")}
    assert len(stamps) == 3
    assert ablate.main(argv) == 0
    assert {p: p.stat().st_mtime_ns for p in out.glob("runs/*/result.json")} == stamps
    # --report-only trains nothing and marks what has not finished.
    removed = next(iter(stamps))
    removed.unlink()
    assert ablate.main(argv + ["--report-only"]) == 0
    assert removed.parent.name in json.loads((out / "results.json").read_text())["pending"]
    assert "(not run yet)" in (out / "results.md").read_text()
    assert not removed.exists()
    assert ablate.main(["--output", str(tmp_path / "empty"), "--report-only"]) == 2
    # Other settings in the same directory are refused, naming what differs.
    assert ablate.main(argv[:-1] + ["3"]) == 2
    assert "finetune_steps" in capsys.readouterr().err
