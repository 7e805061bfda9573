"""NER: tagged files as distributed, conlleval's entities checked against seqeval, windows
of long sentences, one-line refusals naming file:line, and `finetune --task ner` end to
end (its reported F1 equals seqeval's rescoring of its predictions file)."""

import json
import os
import random
from collections.abc import Sequence

import numpy as np
import pytest
from seqeval.metrics import classification_report, f1_score, precision_score, recall_score
from seqeval.metrics.sequence_labeling import get_entities

from albert_tf import tagging
from albert_tf.checkpoint import open_checkpoint
from albert_tf.tasks import IGNORED_LABEL
from albert_tf.tokenizer.spm import AlbertTokenizer
from albert_tf.training.finetune import conll, metrics
from albert_tf.training.finetune.examples import DataError
from albert_tf.training.finetune.ner import NerTask, encode_sentences
from albert_tf.training.finetune.run import main

CONLL_2003 = """-DOCSTART- -X- -X- O

EU NNP B-NP I-ORG
rejects VBZ B-VP O
German JJ B-NP I-MISC
call NN I-NP O
. . O O

Peter NNP B-NP I-PER
Blackburn NNP I-NP I-PER

-DOCSTART- -X- -X- O

BRUSSELS NNP B-NP I-LOC
1996-08-22 CD I-NP O
"""


def _write(path, text):
    path.write_text(text, encoding="utf-8")
    return str(path)


def _random_tags(rng, prefixes, length):
    tags = ["O"] + [f"{p}-{k}" for p in prefixes for k in ("PER", "LOC", "ORG")]
    return [rng.choice(tags) for _ in range(length)]


@pytest.mark.parametrize("prefixes", ["BI", "BIES"])
def test_entities_and_scores_equal_seqeval(prefixes):
    """conlleval's rule, on well- and ill-formed sequences of every scheme's prefixes."""
    rng = random.Random(len(prefixes))
    for _ in range(2000):
        tags = _random_tags(rng, prefixes, rng.randint(0, 12))
        assert sorted(tagging.entities(tags)) == sorted(
            (kind, start, end + 1) for kind, start, end in get_entities(tags))
    for _ in range(50):
        gold = [_random_tags(rng, prefixes, rng.randint(1, 10)) for _ in range(20)]
        # Predictions: gold with some tags changed, so scores are neither 0 nor 1.
        predicted = [[rng.choice([t, *_random_tags(rng, prefixes, 1)]) for t in s] for s in gold]
        ours = metrics.entity_scores(gold, predicted)
        assert ours["precision"] == pytest.approx(precision_score(gold, predicted), abs=1e-12)
        assert ours["recall"] == pytest.approx(recall_score(gold, predicted), abs=1e-12)
        assert ours["f1"] == pytest.approx(f1_score(gold, predicted), abs=1e-12)
        _assert_report_equals_seqeval(metrics.entity_report(gold, predicted), gold, predicted)


PER_TYPE = (("precision", "precision"), ("recall", "recall"), ("f1", "f1-score"),
            ("support", "support"))  # ours, seqeval's


def _assert_report_equals_seqeval(report, gold, predicted):
    """Our per-type scores (type -> score -> value) equal seqeval's classification_report,
    support included."""
    expected = classification_report(gold, predicted, output_dict=True, zero_division=0)
    assert sorted(report) == sorted(k for k in expected if not k.endswith(" avg"))
    for kind, scores in report.items():
        for score, theirs in PER_TYPE:
            assert scores[score] == pytest.approx(expected[kind][theirs], abs=1e-12), (kind, score)


def test_reads_conll_2003_as_distributed(tmp_path):
    data = conll.read_tagged(_write(tmp_path / "eng.train", CONLL_2003))
    assert [s.words for s in data.sentences] == [
        ["EU", "rejects", "German", "call", "."], ["Peter", "Blackburn"], ["BRUSSELS", "1996-08-22"]]
    assert data.sentences[1].tags == ["I-PER", "I-PER"]
    assert data.places[2] == [f"{tmp_path / 'eng.train'}:14", f"{tmp_path / 'eng.train'}:15"]
    assert tagging.detect_scheme(s.tags for s in data.sentences) == "iob1"


def test_reads_the_variants(tmp_path):
    tabbed = _write(tmp_path / "t.tsv", "Jan\tB-PER\nSmith\tI-PER\nsat\tO\n\n\nParis\tS-LOC\n")
    data = conll.read_tagged(tabbed)
    assert [s.tags for s in data.sentences] == [["B-PER", "I-PER", "O"], ["S-LOC"]]
    assert tagging.detect_scheme(s.tags for s in data.sentences) == "bioes"
    lines = [{"tokens": ["Jan", "Smith", "sat"], "tags": ["B-PER", "I-PER", "O"]}]
    jsonl = _write(tmp_path / "t.jsonl", "\n".join(json.dumps(x) for x in lines) + "\n")
    data = conll.read_tagged(jsonl)
    assert data.sentences[0].words == ["Jan", "Smith", "sat"]
    assert tagging.detect_scheme(s.tags for s in data.sentences) == "iob2"
    # IOB1's labels hold B- for every type too: the model may need it on other data.
    assert tagging.scheme_label_names({"PER", "LOC"}, "iob1") == [
        "O", "B-LOC", "I-LOC", "B-PER", "I-PER"]


BAD_FILES = [
    ("ragged.txt", "EU NNP B-NP I-ORG\nrejects VBZ O\n", 2,
     "3 columns ('rejects VBZ O'), but the file's word lines have 4"),
    ("bare.txt", "EU NNP B-NP ORG\n", 1, "tag 'ORG' is not O or B-/I-/E-/S-TYPE"),
    ("empty.jsonl", '{"tokens": ["a"], "tags": ["O"]}\n{"tokens": [], "tags": []}\n', 2,
     "an empty sentence (no tokens)"),
    ("counts.jsonl", '{"tokens": ["a", "b"], "tags": ["O"]}\n', 1, "2 tokens but 1 tags"),
    ("spaced.jsonl", '{"tokens": ["New York"], "tags": ["B-LOC"]}\n', 1,
     "token 0 'New York' is not a word"),
    ("one.txt", "EU\n", 1, "1 column ('EU')"),
]


@pytest.mark.parametrize("name,text,line,message", BAD_FILES)
def test_bad_files_are_refused_naming_file_and_line(tmp_path, name, text, line, message):
    path = _write(tmp_path / name, text)
    with pytest.raises(DataError) as e:
        conll.read_tagged(path)
    assert str(e.value).startswith(f"{path}:{line}: {message}")


def _task(tmp_path, spm_model_path, train, dev, **kwargs):
    files = [conll.read_tagged(_write(tmp_path / n, t)) for n, t in (("train", train),
                                                                       ("dev", dev))]
    return NerTask(files[0], {"dev": files[1]}, AlbertTokenizer(spm_model_path), 16, **kwargs)


IOB2 = "Jan B-PER\nSmith I-PER\nsat O\nin O\nParis B-LOC\n"


@pytest.mark.parametrize("dev,line,message", [
    ("Anna B-PER\nwent O\nto O\nRome I-LOC\n", 4,
     "tag 'I-LOC' after O starts an entity, which iob2 data marks with B-LOC"),
    ("Rome I-LOC\n", 1, "tag 'I-LOC' at the sentence start starts an entity"),
    ("Anna E-PER\n", 1, "tag 'E-PER' is not of the iob2 scheme"),
    ("Anna B-ORG\n", 1, "tag 'B-ORG' is not one of the labels (O, B-LOC, I-LOC, B-PER, I-PER)"),
])
def test_tags_outside_the_training_scheme_are_refused(tmp_path, spm_model_path, dev, line,
                                                     message):
    with pytest.raises(DataError) as e:
        _task(tmp_path, spm_model_path, IOB2, dev)
    assert str(e.value).startswith(f"{tmp_path / 'dev'}:{line}: {message}")


def test_a_stray_bioes_tag_in_iob2_data_is_named_not_followed(tmp_path, spm_model_path):
    """One S-LOC in IOB2 data would make the whole run BIOES: refused naming the S- tag's
    line and the first entity IOB2 leaves unended; BIOES data, or the scheme given, reads."""
    train = IOB2 + "\nRome S-LOC\n"
    with pytest.raises(DataError) as e:
        _task(tmp_path, spm_model_path, train, IOB2)
    assert str(e.value).startswith(
        f"{tmp_path / 'train'}:7: tag 'S-LOC' makes the tags BIOES, but {tmp_path / 'train'}:2: "
        "the entity of 'I-PER' is not ended by an E- tag")
    bioes = "Jan B-PER\nSmith E-PER\nsat O\nin O\nParis S-LOC\n"
    assert _task(tmp_path, spm_model_path, bioes, bioes).tag_scheme == "bioes"
    assert _task(tmp_path, spm_model_path, train, IOB2, tag_scheme="bioes").tag_scheme == "bioes"


def test_iob1_declared_reads_what_iob2_refuses(tmp_path, spm_model_path):
    task = _task(tmp_path, spm_model_path, IOB2, "Anna B-PER\nwent O\nto O\nRome I-LOC\n",
                 tag_scheme="iob1")
    assert task.tag_scheme == "iob1" and task.checkpoint_info() == {"tag_scheme": "iob1",
                                                                "split_characters": False}


def test_first_pieces_carry_labels_and_long_sentences_are_windowed(tmp_path, spm_model_path):
    tokenizer = AlbertTokenizer(spm_model_path)
    words = ("Internationalization of the documentation happens " * 6).split()
    tags = ["B-MISC" if i % 5 == 0 else "O" for i in range(len(words))]
    words[3] = "\u200b"  # nothing the vocabulary keeps: one <unk>
    path = _write(tmp_path / "long.txt", "".join(f"{w} {t}\n" for w, t in zip(words, tags)))
    data = conll.read_tagged(path)
    names = ["O", "B-MISC", "I-MISC"]
    seq_length = 16
    windows = encode_sentences(tokenizer, data, names, seq_length)
    encoded = windows.encoded
    pieces = [tokenizer.encode(w) or [tokenizer.unk_id] for w in words]
    assert pieces[3] == [tokenizer.unk_id]
    assert sum(map(len, pieces)) > seq_length - 2 and len(encoded) > 2  # windowed
    for i, ids in enumerate(encoded.features["input_word_ids"]):
        labels = encoded.labels["logits"][i]
        assert len(ids) == len(labels) <= seq_length
        assert labels[0] == labels[-1] == IGNORED_LABEL  # [CLS], [SEP]
    # Each word is read at its first piece, in the window that gives it most context.
    flat = [p for ids in pieces for p in ids]
    firsts = np.cumsum([0] + [len(p) for p in pieces])[:-1]
    spans = tagging.windows(len(flat), seq_length - 2)
    for word, (example, position) in enumerate(windows.reads[0]):
        start, _ = spans[tagging.best_window(firsts[word], spans)]
        assert position == firsts[word] - start + 1
        assert encoded.features["input_word_ids"][example][position] == pieces[word][0]
        assert encoded.labels["logits"][example][position] == names.index(tags[word])
    # Every piece that is not a word's first carries no label.
    labelled = sum(int(np.sum(labels != IGNORED_LABEL)) for labels in encoded.labels["logits"])
    assert labelled == sum(sum(s <= f < e for f in firsts) for s, e in spans)


def test_windows_cover_every_position():
    assert tagging.windows(5, 8) == [(0, 5)]
    spans = tagging.windows(21, 8)
    assert spans[0] == (0, 8) and spans[-1][1] == 21
    assert all(b[0] - a[0] == 4 for a, b in zip(spans, spans[1:]))
    assert tagging.best_window(6, spans) == 1  # (4, 12): 2 on the short side, not 1


class _CountedSpans(Sequence):
    """Windows that count how often one is read."""

    def __init__(self, spans):
        self.spans, self.reads = spans, 0

    def __len__(self):
        return len(self.spans)

    def __getitem__(self, i):
        self.reads += 1
        return self.spans[i]


def _best_window_oracle(position, spans):
    """The most context on the shorter side, the first window on ties: every window read."""
    held = [(min(position - s, e - 1 - position), -i) for i, (s, e) in enumerate(spans)
            if s <= position < e]
    return -max(held)[1]


def test_best_window_reads_only_the_windows_near_a_position():
    """A 50,000-piece sentence in 12,499 windows: each position reads a few of them (a
    search and its neighbours), not all 12,499 (quadratic over the sentence)."""
    spans = _CountedSpans(tagging.windows(50_000, 8))
    positions = list(range(0, 50_000, 37)) + [49_999]
    assert [tagging.best_window(p, spans) for p in positions] == \
        [_best_window_oracle(p, spans.spans) for p in positions]
    assert spans.reads < 40 * len(positions)


def test_a_50000_word_sentence_is_windowed_word_by_word(tmp_path, spm_model_path):
    tokenizer = AlbertTokenizer(spm_model_path)
    words = ("the cat sat on a mat " * 8_334).split()[:50_000]
    tags = ["B-MISC" if i % 7 == 0 else "O" for i in range(len(words))]
    path = _write(tmp_path / "long.txt", "".join(f"{w} {t}\n" for w, t in zip(words, tags)))
    windows = encode_sentences(tokenizer, conll.read_tagged(path), ["O", "B-MISC"], 64)
    pieces = [tokenizer.encode(w) for w in words]
    firsts = np.cumsum([0] + [len(p) for p in pieces])[:-1]
    spans = tagging.windows(int(firsts[-1]) + len(pieces[-1]), 62)
    labels = windows.encoded.labels["logits"]
    for word in range(0, len(words), 97):  # each read where the oracle puts it, its tag there
        example, position = windows.reads[0][word]
        best = _best_window_oracle(int(firsts[word]), spans)
        assert (example, position) == (best, firsts[word] - spans[best][0] + 1)
        assert labels[example][position] == (1 if word % 7 == 0 else 0)
    assert len(windows.reads[0]) == 50_000 and len(labels) == len(spans)


def _whole_words(tokenizer, count):
    """Words the vocabulary holds as one piece (so a word's first piece names it)."""
    words = []
    for i in range(tokenizer.vocab_size):
        piece = tokenizer.id_to_piece(i)
        if piece.startswith("\u2581") and piece[1:].isalpha() and len(piece) > 4:
            words.append(piece[1:])
    return words[:count]


def _sentences(rng, n, words):
    """IOB1 sentences (CoNLL-2003's scheme): names and places among filler words."""
    names = {"PER": words[:6], "LOC": words[6:10]}
    fillers = words[10:]
    out = []
    for _ in range(n):
        sentence, tags = [], []
        for _ in range(rng.randint(3, 9)):
            kind = rng.choice(["PER", "LOC", None, None, None])
            if kind is None:
                sentence.append(rng.choice(fillers))
                tags.append("O")
                continue
            for i in range(rng.randint(1, 2)):
                after_same = i == 0 and tags and tags[-1].endswith(kind)
                sentence.append(rng.choice(names[kind]).capitalize())
                tags.append(f"{'B' if after_same else 'I'}-{kind}")
        out.append((sentence, tags))
    return out


def _conll(sentences):
    return "-DOCSTART- -X- -X- O\n\n" + "".join(
        "".join(f"{w} NN I-NP {t}\n" for w, t in zip(words, tags)) + "\n"
        for words, tags in sentences)


def _read_predictions(path):
    gold, predicted, words = [[]], [[]], [[]]
    for line in open(path, encoding="utf-8"):
        if not line.strip():
            gold.append([]), predicted.append([]), words.append([])
            continue
        word, g, p = line.split(" ")
        words[-1].append(word), gold[-1].append(g), predicted[-1].append(p.strip())
    keep = [i for i, s in enumerate(words) if s]
    return [words[i] for i in keep], [gold[i] for i in keep], [predicted[i] for i in keep]


@pytest.mark.slow
def test_finetune_ner_reports_seqeval_f1_of_its_predictions_file(tmp_path, tiny_checkpoint):
    rng = random.Random(0)
    words = _whole_words(AlbertTokenizer(os.path.join(tiny_checkpoint, "spiece.model")), 18)
    train, dev, test = (_sentences(rng, n, words) for n in (300, 60, 40))
    paths = [_write(tmp_path / n, _conll(s)) for n, s in
             (("eng.train", train), ("eng.testa", dev), ("eng.testb", test))]
    out = str(tmp_path / "out")
    assert main(["--task", "ner", "--checkpoint", tiny_checkpoint, "--output", out,
                 "--data", *paths, "--epochs", "10", "--batch-size", "16",
                 "--learning-rate", "5e-3", "--seq-length", "32",
                 "--set", "jit_compile=false"]) == 0
    with open(os.path.join(out, "eval_results.json")) as f:
        best = json.load(f)["best"]
    for name, sentences in (("dev", dev), ("test", test)):
        words, gold, predicted = _read_predictions(os.path.join(out, f"predictions_{name}.txt"))
        assert words == [w for w, _ in sentences] and gold == [t for _, t in sentences]
        assert best[f"f1_{name}"] == pytest.approx(f1_score(gold, predicted), abs=1e-9)
        assert best[f"precision_{name}"] == pytest.approx(precision_score(gold, predicted),
                                                          abs=1e-9)
        assert best[f"recall_{name}"] == pytest.approx(recall_score(gold, predicted), abs=1e-9)
        report = {kind: {score: best[f"{kind}_{score}_{name}"] for score, _ in PER_TYPE}
                  for kind in ("LOC", "PER")}
        _assert_report_equals_seqeval(report, gold, predicted)
    assert best["f1_dev"] > 0.5  # learnt: the names are the entities
    record = open_checkpoint(out).task_record
    assert record.task == "token_classification" and record.tag_scheme == "iob1"
    assert record.label_names == ("O", "B-LOC", "I-LOC", "B-PER", "I-PER")


TFDS_ROWS = [{"tokens": [b"EU", b"rejects", b"German", b"call"], "ner": [3, 0, 7, 0]},
             {"tokens": [b"Peter", b"Blackburn"], "ner": [1, 2]}]


def _conll_rows(self, *args, **kwargs):
    import tensorflow as tf

    keys = set(self.info.features.keys())
    rows = [{k: r.get(k, [0] * len(r["tokens"])) for k in keys} for r in TFDS_ROWS]
    return tf.data.Dataset.from_generator(lambda: iter(rows),
                                          output_signature=self.info.features.get_tensor_spec())


def test_tfds_conll2003_reads_tokens_and_tag_names(tmp_path):
    import tensorflow_datasets as tfds

    with tfds.testing.mock_data(as_dataset_fn=_conll_rows, data_dir=str(tmp_path)):
        files = [conll.tfds_tagged(split) for split in conll.TFDS_SPLITS]
    assert [f.path for f in files] == ["tfds:conll2003/train", "tfds:conll2003/dev",
                                       "tfds:conll2003/test"]
    first = files[0].sentences
    assert first[0].words == ["EU", "rejects", "German", "call"]
    # TFDS' declared names: O, B-PER, I-PER, B-ORG, I-ORG, B-LOC, I-LOC, B-MISC, I-MISC
    assert first[0].tags == ["B-ORG", "O", "B-MISC", "O"] and first[1].tags == ["B-PER", "I-PER"]
    assert first[1].where == "tfds:conll2003/train:1"
