"""Corpus readers: the embedded corpus, text files (plain, .gz, globs), tfds, and the error report."""

from __future__ import annotations

import gzip
import os

import pytest

from albert_tf.training.data import corpus, embedded


def test_embedded_corpus_is_real_prose_in_a_fixed_order(corpus_documents):
    assert len(corpus_documents) == 300
    assert all(len(doc) >= 2 for doc in corpus_documents)
    words = [w for doc in corpus_documents for s in doc for w in s.split()]
    assert len(words) > 150_000
    common = sum(w.lower() in {"the", "a", "of", "is", "to", "and"} for w in words) / len(words)
    assert common > 0.08  # English function words: prose, not code or tables
    assert list(embedded.embedded_documents(max_documents=5)) == corpus_documents[:5]


def _layout(documents):
    return "".join("".join(s + "\n" for s in doc) + "\n" for doc in documents)


def test_text_files_in_the_original_layout(tmp_path, corpus_documents):
    docs = corpus_documents[:6]
    (tmp_path / "b.txt").write_text(_layout(docs[3:]), encoding="utf-8")
    with gzip.open(tmp_path / "a.txt.gz", "wt", encoding="utf-8") as f:
        f.write("\n\n" + _layout(docs[:3]).replace("\n\n", "\n   \n\n"))  # extra blank lines
    report = corpus.CorpusReport()
    paths = corpus.expand_patterns(f"{tmp_path}/*.txt*")
    assert paths == [f"{tmp_path}/a.txt.gz", f"{tmp_path}/b.txt"]
    got = list(corpus.text_file_documents(paths, report))
    assert [d.sentences for d in got] == [[s.strip() for s in doc] for doc in docs]
    assert [(d.source, d.index) for d in got] == [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2)]
    assert got[3].where == f"{tmp_path}/b.txt:1"
    assert report.count() == 0
    assert corpus.count_text_documents(paths) == 6


def test_bad_input_is_counted_per_file(tmp_path):
    path = tmp_path / "mixed.txt"
    path.write_bytes(b"Good first.\nGood second.\n\n"
                     b"Alone here.\n\n"
                     b"Bad \xff byte.\nStill the same document.\n\n"
                     b"Last one.\nReally last.")  # no final newline
    report = corpus.CorpusReport()
    got = list(corpus.read_text_file(str(path), report))
    assert got == [(1, ["Good first.", "Good second."]), (9, ["Last one.", "Really last."])]
    d = report.to_dict()
    assert d["one_sentence_document"] == {"count": 1, "files": {str(path): 1},
                                          "examples": [f"{path}: line 4"]}
    assert d["invalid_utf8"]["examples"] == [  # where: the line and the byte in the file
        f"{path}: line 6: byte 0xff at byte offset 43 is not UTF-8 (invalid start byte)"]
    list(corpus.read_text_file(str(tmp_path / "absent.txt"), report))
    assert report.count("unreadable_file") == 1


def test_a_truncated_gzip_keeps_the_documents_before_the_damage(tmp_path, corpus_documents):
    data = gzip.compress(_layout(corpus_documents[:40]).encode())
    path = tmp_path / "cut.txt.gz"
    path.write_bytes(data[: len(data) * 2 // 3])
    report = corpus.CorpusReport()
    got = list(corpus.read_text_file(str(path), report))
    assert 5 < len(got) < 40
    assert [s for _, s in got] == [[s.strip() for s in d] for d in corpus_documents[:len(got)]]
    assert report.to_dict()["unreadable_file"]["files"] == {str(path): 1}


def test_report_merges_and_caps_examples():
    a, b = corpus.CorpusReport(), corpus.CorpusReport()
    for i in range(15):
        a.skip("invalid_utf8", "x.txt", f"line {i}")
        b.skip("invalid_utf8", "y.txt", f"line {i}")
    b.skip("unreadable_file", "z.txt", count=2)
    a.merge(b.to_dict())
    d = a.to_dict()
    assert d["invalid_utf8"]["count"] == 30 and d["invalid_utf8"]["files"] == {"x.txt": 15, "y.txt": 15}
    assert len(d["invalid_utf8"]["examples"]) == corpus.CorpusReport.MAX_EXAMPLES
    assert d["unreadable_file"]["count"] == 2


def test_open_corpus_specs(tmp_path):
    with pytest.raises(ValueError, match="matches no files"):
        corpus.open_corpus(f"{tmp_path}/none-*.txt")
    with pytest.raises(ValueError, match="tfds:NAME"):
        corpus.open_corpus("tfds:a:b:c:d")
    assert corpus._parse_tfds("tfds:wikipedia/20230601.en") == ("wikipedia/20230601.en", "train", "text")
    assert corpus._parse_tfds("tfds:x:validation:body") == ("x", "validation", "body")
    (tmp_path / "one.txt").write_text("A b c.\nD e f.\n\nG h i.\nJ k l.\n")
    c = corpus.open_corpus(str(tmp_path / "one.txt"))
    assert c.total == 2 and c.identity == [[str(tmp_path / "one.txt"), 29]]  # path and size
    assert [d.sentences for d in c.read(corpus.CorpusReport())] == [["A b c.", "D e f."], ["G h i.", "J k l."]]


def test_tfds_dataset_by_name_split_and_field(tmp_path):
    tfds = pytest.importorskip("tensorflow_datasets")

    class AlbertTestArticles(tfds.core.GeneratorBasedBuilder):
        # A one-part module name: for classes in a package module tfds 4.9.10 looks up
        # its code path with importlib_resources, which it only requires on Python < 3.9.
        __module__ = "albert_test_tfds"
        VERSION = tfds.core.Version("1.0.0")

        def _info(self):
            return tfds.core.DatasetInfo(builder=self, features=tfds.features.FeaturesDict(
                {"body": tfds.features.Text(), "title": tfds.features.Text()}))

        def _split_generators(self, dl_manager):
            return {"train": self._generate_examples()}

        def _generate_examples(self):
            for i in range(4):
                body = (f"Article {i} begins here. It has a second sentence.\n"
                        f"A new paragraph starts now. Short.")
                yield i, {"body": body, "title": f"t{i}"}
            yield 4, {"body": "Only one sentence in this one.", "title": "t4"}

    report = corpus.CorpusReport()
    docs = list(corpus.tfds_documents("albert_test_articles", "train", "body", report,
                                      data_dir=str(tmp_path)))
    assert len(docs) == 4 and {d.file for d in docs} == {"tfds:albert_test_articles:train"}
    assert all(d.sentences[1:] == ["It has a second sentence.", "A new paragraph starts now."]
               for d in docs)  # "Short." has too few words to be a sentence
    assert sorted(d.sentences[0] for d in docs) == [f"Article {i} begins here." for i in range(4)]
    assert report.count("one_sentence_document") == 1
    with pytest.raises(ValueError, match="no feature 'text'.*body"):
        list(corpus.tfds_documents("albert_test_articles", "train", "text", report, data_dir=str(tmp_path)))


def test_write_corpus_file_is_atomic_and_round_trips(tmp_path, corpus_documents):
    path = str(tmp_path / "c.txt")
    stats = corpus.write_corpus_file(path, iter(corpus_documents[:10]))
    assert stats["documents"] == 10 and os.listdir(tmp_path) == ["c.txt"]
    got = [s for _, s in corpus.read_text_file(path, corpus.CorpusReport())]
    assert got == corpus_documents[:10]
