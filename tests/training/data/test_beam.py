"""The Beam pipeline (DirectRunner) writes the same records as `albert-tf create-data`."""

from __future__ import annotations

import glob
import gzip
import json

import pytest

beam = pytest.importorskip("apache_beam")

# Imported once importorskip has found Apache Beam (E402).
from apache_beam.options.pipeline_options import PipelineOptions  # noqa: E402

from albert_tf.training.data import beam as beam_pipeline  # noqa: E402
from albert_tf.training.data import create_data, pairs  # noqa: E402
from albert_tf.training.data import records as tfrecords  # noqa: E402
from albert_tf.training.data.corpus import open_corpus, write_corpus_file  # noqa: E402

OPTIONS = pairs.GenerationOptions(max_seq_length=64, max_predictions_per_seq=10, dupe_factor=3, seed=99)


def _records(pattern: str) -> list[bytes]:
    return sorted(r for f in sorted(glob.glob(pattern)) for r in tfrecords.read_records(f))


@pytest.mark.slow
def test_beam_output_equals_local_output(tmp_path, corpus_documents, spm_model_path):
    write_corpus_file(str(tmp_path / "a.txt"), iter(corpus_documents[:12]))
    with gzip.open(tmp_path / "b.txt.gz", "wt", encoding="utf-8") as f:  # a second, compressed input
        for doc in corpus_documents[12:20]:
            f.write("".join(s + "\n" for s in doc) + "\n")
    (tmp_path / "c.txt").write_bytes(b"Bad \xff byte here.\nSecond line.\n\nOne line.\n")
    spec = f"{tmp_path}/*.txt*"
    local = create_data.create_pretraining_data(
        open_corpus(spec), str(tmp_path / "local"), spm_model_path, OPTIONS, documents_per_shard=5, processes=1)
    with beam.Pipeline(options=PipelineOptions(["--runner", "DirectRunner"])) as pipeline:
        beam_pipeline.build_pipeline(pipeline, spec, str(tmp_path / "beam"), spm_model_path, OPTIONS, num_shards=3)
    ours = _records(f"{tmp_path}/local/pretrain-*.tfrecord")
    theirs = _records(f"{tmp_path}/beam/pretrain-*.tfrecord")
    assert len(ours) == local["instances"] > 300
    assert ours == theirs
    assert len(glob.glob(f"{tmp_path}/beam/pretrain-0000?-of-00003.tfrecord")) == 3
    summary = json.load(open(tmp_path / "beam" / "summary.json"))
    for key in ("documents", "instances", "tokens", "masked_tokens", "ngram_histogram", "sop"):
        assert summary[key] == local[key], key
    counts = lambda skipped: {k: (v["count"], v["files"]) for k, v in skipped.items()}  # noqa: E731
    assert counts(summary["skipped"]) == counts(local["skipped"])
    assert summary["skipped"]["invalid_utf8"]["files"] == {f"{tmp_path}/c.txt": 1}


@pytest.mark.slow
def test_beam_command_line(tmp_path, corpus_documents, spm_model_path):
    write_corpus_file(str(tmp_path / "a.txt"), iter(corpus_documents[:4]))
    argv = ["--input", str(tmp_path / "a.txt"), "--output-dir", str(tmp_path / "out"),
            "--spm-model", spm_model_path, "--max-seq-length", "64", "--dupe-factor", "1", "--num-shards", "2"]
    assert beam_pipeline.main(argv + ["--", "--runner", "DirectRunner"]) == 0
    assert len(_records(f"{tmp_path}/out/pretrain-*.tfrecord")) == json.load(
        open(tmp_path / "out" / "summary.json"))["instances"] > 0
    assert beam_pipeline.main(argv[:-2] + ["--num-shards", "0"]) == 2
