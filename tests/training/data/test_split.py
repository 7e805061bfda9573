"""The split by document and the source-labelled classification task (training/data/split.py)."""

import json
import random

import pytest

from albert_tf.training.data import corpus, embedded
from albert_tf.training.data import split as corpus_tasks
from albert_tf.training.data.split import NamedDocument


def _docs(n, groups=("a", "b", "c")):
    return [NamedDocument(f"doc-{i}", [f"Sentence {i} one.", f"Sentence {i} two."],
                          groups[i % len(groups)]) for i in range(n)]


def test_split_is_by_document_disjoint_and_order_independent():
    docs = _docs(60)
    train, held = corpus_tasks.split_documents(docs, 0.2)
    names_train, names_held = {d.name for d in train}, {d.name for d in held}
    assert not names_train & names_held
    assert names_train | names_held == {d.name for d in docs}
    assert len(held) == 12  # round(0.2 * 20) per group of 20
    for group in "abc":
        assert sum(d.group == group for d in held) == 4
    shuffled = docs[:]
    random.Random(3).shuffle(shuffled)
    _, held_again = corpus_tasks.split_documents(shuffled, 0.2)
    assert {d.name for d in held_again} == names_held
    _, held_other_seed = corpus_tasks.split_documents(docs, 0.2, seed="another")
    assert {d.name for d in held_other_seed} != names_held


def test_split_holds_out_one_of_a_small_group_and_never_all():
    docs = [NamedDocument("x", ["a b c.", "d e f."], "rare"),
            NamedDocument("y", ["a b c.", "d e f."], "rare"),
            NamedDocument("z", ["a b c.", "d e f."], "alone")]
    train, held = corpus_tasks.split_documents(docs, 0.1)
    assert sum(d.group == "rare" for d in held) == 1
    assert [d.name for d in train if d.group == "alone"] == ["z"]


@pytest.mark.parametrize("fraction", [0.0, 1.0, -0.1, 1.5])
def test_split_refuses_bad_fraction(fraction):
    with pytest.raises(ValueError, match="fraction"):
        corpus_tasks.split_documents(_docs(4), fraction)


def test_split_refuses_duplicate_names():
    docs = _docs(3) + [NamedDocument("doc-1", ["a b c.", "d e f."])]
    with pytest.raises(ValueError, match="'doc-1'"):
        corpus_tasks.split_documents(docs)


@pytest.mark.parametrize("name,label", [
    ("reference/assert", "language"),
    ("library/email/message.py", "email"),
    ("library/asyncio/events.py", "asyncio"),
    ("library/urllib/request.py", "internet"),
    ("library/http/client.py", "internet"),
    ("library/xml/dom/minidom.py", "xml"),
    ("library/importlib/abc.py", "importlib"),
    ("library/os.py", None),          # a top-level module is in no class
    ("library/json/decoder.py", None),
    ("package/numpy/lib/_function_base_impl.py", "numpy"),
    ("package/keras/src/layers/core/dense.py", "keras"),
    ("package/tensorflow/python/ops/array_ops.py", "tensorflow"),
    ("package/matplotlib/axes/_axes.py", "matplotlib"),
    ("package/absl/flags/_flag.py", None),  # a package in no class
    ("package/numpy", None),
    ("numpy/lib/utils.py", None),           # not an embedded name
    ("library/numpy/x.py", None),           # a standard-library path is never a package class
    ("corpus.txt#3", None),
])
def test_source_label_comes_from_the_name(name, label):
    assert corpus_tasks.source_label(name) == label


@pytest.fixture(scope="module")
def embedded_split(tmp_path_factory):
    out = tmp_path_factory.mktemp("split")
    return corpus_tasks.prepare_corpus_split("embedded", str(out)), out


def _read_corpus(path):
    documents, current = [], []
    for line in open(path, encoding="utf-8"):
        if line.strip():
            current.append(line.strip())
        elif current:
            documents.append(current)
            current = []
    return documents


def test_embedded_split_writes_disjoint_documents(embedded_split):
    split, out = embedded_split
    sources = dict(embedded.embedded_corpus().documents)
    train, held = _read_corpus(split.train_text), _read_corpus(split.heldout_text)
    assert len(train) + len(held) == len(sources)
    assert len(held) == len(split.heldout_documents)
    assert 0.07 < len(held) / len(sources) < 0.15
    assert held == [sources[name] for name in sorted(split.heldout_documents,
                                                     key=list(sources).index)]
    recorded = json.loads((out / "split.json").read_text())
    assert recorded["heldout_documents"] == split.heldout_documents


def test_embedded_split_records_each_source(embedded_split):
    split, out = embedded_split
    sources = json.loads((out / "split.json").read_text())["counts"]["sources"]
    assert sources == split.counts["sources"]
    documents = embedded.embedded_corpus().documents
    per_source = {}
    for name, sentences in documents:
        source = name.split("/")[1] if name.startswith(embedded.PACKAGE_PREFIX) \
            else name.split("/")[0]
        docs, count = per_source.get(source, (0, 0))
        per_source[source] = (docs + 1, count + len(sentences))
    got = {s: (v["documents"], v["sentences"]) for s, v in sources.items() if s != "total"}
    assert got == per_source  # the summary counts what the corpus holds, source by source
    assert list(got)[:2] == ["reference", "library"]
    assert {"numpy", "keras", "tensorflow"} <= set(got)
    for source, v in sources.items():
        assert v["documents"] <= v["documents_in"] and v["characters"] <= v["characters_in"]
        if source != "total":
            assert v["version"], source
    total = sources["total"]
    assert total["documents"] == split.counts["train"]["documents"] + \
        split.counts["heldout"]["documents"]
    assert total["characters"] == split.counts["train"]["characters"] + \
        split.counts["heldout"]["characters"]
    sentences = [s for _, doc in documents for s in doc]
    assert len(set(sentences)) == len(sentences)  # no sentence twice in the whole corpus


def test_classify_labels_are_where_the_sentence_was_written(embedded_split):
    split, _ = embedded_split
    sources = dict(embedded.embedded_corpus().documents)
    rows = {name: [json.loads(line) for line in open(getattr(split, f"classify_{name}"))]
            for name in ("train", "heldout")}
    held_docs = set(split.heldout_documents)
    for name, items in rows.items():
        for row in items:
            assert row["text"] in sources[row["document"]]
            assert corpus_tasks.source_label(row["document"]) == row["label"]
            assert (row["document"] in held_docs) == (name == "heldout")
    assert not {r["text"] for r in rows["train"]} & {r["text"] for r in rows["heldout"]}
    for name, items in rows.items():
        counts = corpus_tasks.label_counts(items)
        assert set(counts) == set(corpus_tasks.LABELS)
        assert min(counts.values()) > 0, (name, counts)
    train_counts = corpus_tasks.label_counts(rows["train"]).values()
    assert max(train_counts) <= 2 * min(train_counts)  # reasonably balanced


def test_classify_files_are_what_finetune_reads(embedded_split):
    from albert_tf.training.finetune.files import read_text_file

    split, _ = embedded_split
    train, names = read_text_file(split.classify_train, ["text"], "label")
    held, _ = read_text_file(split.classify_heldout, ["text"], "label", label_names=names)
    assert sorted(names) == sorted(corpus_tasks.LABELS)
    assert len(train.labels) > 1000 and len(held.labels) > 200


def test_text_file_corpus_split_has_no_task(tmp_path, corpus_documents):
    path = str(tmp_path / "docs.txt")
    corpus.write_corpus_file(path, iter(corpus_documents[:20]))
    split = corpus_tasks.prepare_corpus_split(path, str(tmp_path / "split"), fraction=0.25)
    assert split.classify_train is None and split.classify_heldout is None
    assert all(name.startswith(path + "#") for name in split.heldout_documents)
    held, train = _read_corpus(split.heldout_text), _read_corpus(split.train_text)
    assert len(held) == len(split.heldout_documents) and len(held) + len(train) == 20
    # Held out until a quarter of the sentences is reached, overshooting by < one document.
    total = sum(map(len, corpus_documents[:20]))
    share = sum(map(len, held)) / total
    assert 0.25 <= share < 0.25 + max(map(len, corpus_documents[:20])) / total


def test_majority_baseline():
    result = corpus_tasks.majority_baseline(["a", "a", "b"], ["b", "b", "a", "c"])
    assert result == {"train_majority": "a", "train_majority_accuracy": 0.25,
                      "best_constant_accuracy": 0.5}


def test_dev_rows_come_from_other_documents(embedded_split):
    split, _ = embedded_split
    rows = corpus_tasks.read_rows(split.classify_train)
    fit, dev = corpus_tasks.split_rows_by_document(rows, 0.15)
    assert len(fit) + len(dev) == len(rows)
    assert not {r["document"] for r in fit} & {r["document"] for r in dev}
    assert all(n > 0 for n in corpus_tasks.label_counts(dev).values())
