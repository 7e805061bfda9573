"""Pretraining-data generation as an Apache Beam pipeline (optional extra `beam`).

The same generation as `albert-tf create-data`, for corpora beyond one
machine: DirectRunner locally, Dataflow, Flink or Spark for real corpora. Every
random choice is seeded by (seed, input, document, dupe) exactly as in the
local command, so for the same corpus, vocabulary and options the pipeline
writes the same set of records (in other shards and another order).

    python -m albert_tf.training.data.beam --input 'gs://bucket/text/*.txt.gz' \\
        --output-dir gs://bucket/albert-data --spm-model gs://bucket/spiece.model \\
        --num-shards 512 -- --runner DataflowRunner --project P --region R \\
        --temp_location gs://bucket/tmp --requirements_file requirements.txt

Text files are read one file per worker task, so a corpus should come as many
files; the embedded corpus and tfds datasets are read by the launching process
and handed to the pipeline (fine for small corpora; for a large tfds dataset
export its text to files first).
"""

from __future__ import annotations

import hashlib
import logging
import os
import sys
import tempfile
import time
import zlib
from collections.abc import Iterator

import apache_beam as beam
import tensorflow as tf
from apache_beam.options.pipeline_options import PipelineOptions

from albert_tf.errors import UserError
from albert_tf.infra import atomic
from albert_tf.tokenizer import kinds

from . import corpus as corpus_lib
from . import create_data, pairs
from .records import write_records
from .stats import DataStats, summarize

logger = logging.getLogger(__name__)

SHARD_NAME = create_data.SHARD_PREFIX + "{:05d}-of-{:05d}" + create_data.SHARD_SUFFIX
NUM_SHARDS = 8


def _shard_of(record: bytes, num_shards: int) -> int:
    # crc32, not hash(): Python salts str/bytes hashes per process.
    return zlib.crc32(record) % num_shards


def _write_shard(item: tuple, output_dir: str, num_shards: int) -> str:
    """Writes one (shard, records) group atomically, ordered by SHA-1 (a fixed shuffle)."""

    shard, records = item
    path = os.path.join(output_dir, SHARD_NAME.format(shard, num_shards))
    write_records(path, sorted(records, key=lambda r: hashlib.sha1(r).digest()))
    return path


def read_file_documents(item: tuple[int, str]) -> Iterator:
    """(source index, path) -> the file's `Document`s, then one tagged `report` of what was skipped."""
    source, path = item
    report = corpus_lib.CorpusReport()
    for index, (line, sentences) in enumerate(corpus_lib.read_text_file(path, report)):
        yield corpus_lib.Document(source, index, sentences, path, line)
    yield beam.pvalue.TaggedOutput("report", report.to_dict())


class DocumentToRecords(beam.DoFn):
    """Document -> its serialized instances (every dupe), plus tagged `stats` (DataStats dicts)."""

    def __init__(self, spm_model_bytes: bytes, do_lower_case: bool, options: pairs.GenerationOptions,
                 kind: str = kinds.SENTENCEPIECE):
        self._model = spm_model_bytes  # shipped with the DoFn: workers need no access to the path
        self._kind = kind  # the vocabulary's kind (`kinds.kind_of_file` of its path)
        self._do_lower_case = do_lower_case
        self._options = options

    def setup(self):

        # The suffix carries the kind: a .txt file is read as a WordPiece vocab.txt.
        suffix = ".txt" if self._kind == kinds.WORDPIECE else ".model"
        with tempfile.NamedTemporaryFile(suffix=suffix, delete=False) as f:
            f.write(self._model)
        try:
            self._tokenizer, self._vocab = create_data.load_vocabulary(f.name, self._do_lower_case)
        finally:
            os.remove(f.name)

    def process(self, document):
        stats = DataStats()
        yield from create_data.document_records(document, self._tokenizer, self._vocab,
                                                     self._options, stats)
        yield beam.pvalue.TaggedOutput("stats", stats.to_dict())


class MergeStats(beam.CombineFn):
    """Sums `DataStats.to_dict()` dicts."""

    def create_accumulator(self):
        return DataStats()

    def add_input(self, accumulator, item):
        accumulator.merge(item)
        return accumulator

    def merge_accumulators(self, accumulators):
        total = DataStats()
        for accumulator in accumulators:
            total.merge(accumulator.to_dict())
        return total

    def extract_output(self, accumulator):
        return accumulator.to_dict()


class MergeReports(beam.CombineFn):
    """Merges `CorpusReport.to_dict()` dicts."""

    def create_accumulator(self):
        return corpus_lib.CorpusReport()

    def add_input(self, accumulator, item):
        accumulator.merge(item)
        return accumulator

    def merge_accumulators(self, accumulators):
        total = corpus_lib.CorpusReport()
        for accumulator in accumulators:
            total.merge(accumulator.to_dict())
        return total

    def extract_output(self, accumulator):
        return accumulator.to_dict()


def _write_summary(stats: dict, report: dict, output_dir: str, name: str,
                   options: pairs.GenerationOptions, start: float, num_shards: int) -> None:
    reader = corpus_lib.CorpusReport()
    reader.merge(report)
    summary = summarize(name, {0: stats}, reader, options, time.time() - start)
    summary["shards"] = num_shards
    path = os.path.join(output_dir, create_data.SUMMARY_FILE)
    atomic.atomic_write_json(path, summary)  # tf.io.gfile for remote paths


def build_pipeline(pipeline: beam.Pipeline, spec: str | None, output_dir: str, spm_model: str,
                   options: pairs.GenerationOptions = pairs.GenerationOptions(),  # noqa: B008 (frozen)
                   *,
                   do_lower_case: bool = True, num_shards: int = NUM_SHARDS) -> None:
    """Adds the generation to `pipeline`: corpus -> records -> TFRecord shards + summary.json.

    Args:
      pipeline: a `beam.Pipeline`.
      spec: the corpus, as for `albert-tf create-data --input`.
      output_dir: where `pretrain-SSSSS-of-NNNNN.tfrecord` and summary.json go.
      spm_model: the SentencePiece model or WordPiece vocab.txt (any path `tf.io.gfile` reads).
      options: generation options; the same as the local command's give the same records.
      num_shards: output shards; each is sorted and written by one worker, so
        choose it to make shards of about 100 MB.
    """
    if num_shards < 1:
        raise UserError(f"num_shards={num_shards} must be at least 1")
    if options.objective == "nsp":
        # NSP negatives come from the other documents of a shard; this pipeline
        # handles each document alone.
        raise UserError("objective=nsp is made by `albert-tf create-data` only (its negatives "
                        "come from other documents of a shard); the pipeline makes sop and none")

    with tf.io.gfile.GFile(spm_model, "rb") as f:
        model_bytes = f.read()
    tf.io.gfile.makedirs(output_dir)
    start = time.time()
    if spec and spec != corpus_lib.EMBEDDED and not spec.startswith(corpus_lib.TFDS_PREFIX):
        files = pipeline | "Files" >> beam.Create(list(enumerate(corpus_lib.expand_patterns(spec))))
        read = (files | "SpreadFiles" >> beam.Reshuffle()
                | "Read" >> beam.FlatMap(read_file_documents).with_outputs("report", main="documents"))
        documents, reports = read.documents, read.report
        name = spec
    else:
        corpus = corpus_lib.open_corpus(spec)
        report = corpus_lib.CorpusReport()
        documents = pipeline | "Documents" >> beam.Create(list(corpus.read(report)))
        reports = pipeline | "Report" >> beam.Create([report.to_dict()])
        name = corpus.name
    made = (documents | "SpreadDocuments" >> beam.Reshuffle()
            | "Instances" >> beam.ParDo(DocumentToRecords(model_bytes, do_lower_case, options,
                                                        kinds.kind_of_file(spm_model)))
            .with_outputs("stats", main="records"))
    _ = (made.records | "Shard" >> beam.Map(lambda record: (_shard_of(record, num_shards), record))
         | "Group" >> beam.GroupByKey()
         | "Write" >> beam.Map(_write_shard, output_dir, num_shards))
    stats = made.stats | "Stats" >> beam.CombineGlobally(MergeStats())
    skipped = reports | "Skipped" >> beam.CombineGlobally(MergeReports())
    _ = (stats | "Summary" >> beam.Map(
        _write_summary, beam.pvalue.AsSingleton(skipped), output_dir, name, options, start, num_shards))


def main(argv: list[str]) -> int:
    """`python -m albert_tf.training.data.beam [generation options] [-- beam options]`."""
    parser = create_data.CommandLineParser(prog="python -m albert_tf.training.data.beam",
                                      description=__doc__.split("\n\n")[0])
    create_data.add_generation_arguments(parser)
    parser.add_argument("--num-shards", type=int, default=NUM_SHARDS,
                        help="output shards, each written by one worker (default %(default)s)")
    own, beam_args = (argv[:argv.index("--")], argv[argv.index("--") + 1:]) if "--" in argv else (argv, [])
    try:
        args = parser.parse_args(own)
        options = create_data.options_from_args(args)
    except (create_data.CommandLineError, ValueError) as e:
        print(f"beam_pipeline: {e}", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.INFO)
    pipeline_options = PipelineOptions(beam_args or ["--runner", "DirectRunner"])
    try:
        with beam.Pipeline(options=pipeline_options) as pipeline:
            build_pipeline(pipeline, args.input, args.output_dir, args.spm_model, options,
                           do_lower_case=not args.cased, num_shards=args.num_shards)
    except ValueError as e:
        print(f"beam_pipeline: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
