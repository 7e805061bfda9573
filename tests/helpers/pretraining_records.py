"""Pretraining TFRecords written by `albert-tf create-data` from a few corpus documents."""

from __future__ import annotations


def write_pretraining_records(directory, documents, spm_model: str, seq_length: int,
                              max_predictions: int) -> str:
    """Writes `documents` (lists of sentences) as SOP TFRecords under `directory`/records
    (dupe factor 1, one process); returns the records' glob."""
    from albert_tf.training.data import create_data
    from albert_tf.training.data.corpus import write_corpus_file

    corpus = str(directory / "corpus.txt")
    write_corpus_file(corpus, iter(documents))
    code = create_data.main([
        "--input", corpus, "--output-dir", str(directory / "records"),
        "--spm-model", spm_model, "--max-seq-length", str(seq_length),
        "--max-predictions-per-seq", str(max_predictions), "--dupe-factor", "1",
        "--processes", "1"])
    assert code == 0
    return str(directory / "records" / "pretrain-*.tfrecord")
