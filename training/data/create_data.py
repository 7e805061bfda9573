"""`albert-tf create-data`: SOP (or NSP, or no) pairs with whole-word n-gram masking, in sharded TFRecords.

Documents are read in a fixed order and cut into blocks of
`documents_per_shard`; each block becomes one shard, written by a pool of
processes. Every random choice is drawn from a Generator seeded by (seed,
input, document, dupe) (see `pairs.py`), and each shard's records are shuffled
by a Generator seeded by (seed, shard), so the output does not depend on the
number of processes, and the Beam pipeline (`beam.py`) writes the
same records. `--objective nsp` draws its negatives from the other documents
of the same shard (see `pairs.py`).

Output directory:
  pretrain-00000.tfrecord ...   the shards (original ALBERT features, see records.py)
  stats/pretrain-00000.json     per-shard statistics (written before its shard)
  create_data_config.json       the options and input identity, checked on resume
  summary.json                  totals: documents, instances, tokens, masked
                                fraction, n-gram histogram, SOP balance, skipped inputs

A shard is written under a hidden temporary name and renamed when complete, so
rerunning the same command after a crash or kill skips the finished shards. A run
that fails or is interrupted before any shard is finished leaves the directory as it
was (create_data_config.json, stats/ and the directories it created are removed); a
run that made no instances keeps only summary.json, which says why.

Long because the command's checks, its resumable output rule and its shard loop share
the one set of options; split, they would pass them around in pieces.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import dataclasses
import fnmatch
import hashlib
import json
import logging
import os
import time
from collections.abc import Iterable, Iterator, Sequence

import numpy as np
from tqdm import tqdm

from albert_tf import errors
from albert_tf.infra import arguments, atomic, cli
from albert_tf.tokenizer import kinds

from . import create_data_command, workers
from . import pairs as sop
from .corpus import Corpus, CorpusReport, Document, open_corpus
from .create_data_command import (  # noqa: F401 - the command line's names, also here
    DOCUMENTS_PER_SHARD,
    CommandLineError,
    CommandLineParser,
    add_generation_arguments,
    options_from_args,
)
from .records import serialize_instance, write_records
from .stats import DataStats, summarize, warn_skipped

logger = logging.getLogger(__name__)

# A shard's name (create-data numbers them; the Beam pipeline adds "-of-N" before the suffix);
# every reader matches SHARD_GLOB.
SHARD_PREFIX, SHARD_SUFFIX = "pretrain-", ".tfrecord"
SHARD_NAME = SHARD_PREFIX + "{:05d}" + SHARD_SUFFIX
SHARD_GLOB = SHARD_PREFIX + "*" + SHARD_SUFFIX
STATS_DIR = "stats"
DATA_CONFIG_FILE = "create_data_config.json"
SUMMARY_FILE = "summary.json"


def tokenize_sentences(tokenizer, sentences: Sequence[str]) -> list[np.ndarray]:
    """Token ids of each sentence (no special tokens); sentences with no tokens are dropped."""
    ids = (np.asarray(tokenizer.encode(s), np.int32) for s in sentences)
    return [s for s in ids if len(s)]


def document_records(document: Document, tokenizer, vocab: sop.Vocabulary,
                     options: sop.GenerationOptions, stats: DataStats,
                     shard_documents: Sequence[list[np.ndarray]] = (), own: int = 0) -> list[bytes]:
    """All serialized instances (every dupe) of one document; updates `stats`.

    Args:
      shard_documents, own: for objective "nsp", the tokenized documents of the
        shard (this one at index `own`, its sentences taken from there).
    """

    sentences = (shard_documents[own] if shard_documents
                 else tokenize_sentences(tokenizer, document.sentences))
    if len(sentences) < 2:
        stats.skipped.skip("one_sentence_document", document.file,
                           f"line {document.line}: fewer than two sentences with tokens")
        return []
    num_tokens = sum(len(s) for s in sentences)
    if num_tokens < options.max_seq_length - 3:
        stats.short.skip("shorter_than_sequence", document.file,
                         f"line {document.line}: {num_tokens} tokens")
    result = sop.document_instances(sentences, document.source, document.index, vocab, options,
                                    shard_documents, own)
    if result.skipped_chunks:
        reason = "no_other_document" if options.objective == "nsp" else "single_word_chunk"
        stats.skipped.skip(reason, document.file, f"line {document.line}",
                           count=result.skipped_chunks)
    stats.documents += 1
    for instance in result.instances:
        stats.add(instance)
    return [serialize_instance(i, options.max_seq_length, options.max_predictions_per_seq)
            for i in result.instances]


# ---------------------------------------------------------------------------
# Shards: one block of documents each, written by worker processes.

_WORKER: dict = {}  # per-process tokenizer and vocabulary, set by `_init_worker`


def load_vocabulary(spm_model: str, do_lower_case: bool) -> tuple[object, sop.Vocabulary]:
    """The tokenizer and what generation needs of its vocabulary; UserError naming the
    file for one that is not an ALBERT SentencePiece model or a WordPiece vocab.txt (the
    kind is `kinds.kind_of_file`'s; the parent checks it first)."""
    kind = kinds.kind_of_file(spm_model)
    # WordPiece strips accents exactly when it lower-cases (the original's rule);
    # SentencePiece's ALBERT models strip them always.
    keep_accents = kind == kinds.WORDPIECE and not do_lower_case
    tokenizer = kinds.python_tokenizer(spm_model, do_lower_case, keep_accents=keep_accents,
                                       kind=kind)
    return tokenizer, sop.Vocabulary.from_tokenizer(tokenizer)


def _init_worker(spm_model: str, do_lower_case: bool) -> None:
    """A worker's set-up (`workers.executor`; an error reaches the parent in one line)."""
    _WORKER.clear()
    tokenizer, vocab = load_vocabulary(spm_model, do_lower_case)
    _WORKER.update(tokenizer=tokenizer, vocab=vocab)


def shard_path(output_dir: str, shard: int) -> str:
    return os.path.join(output_dir, SHARD_NAME.format(shard))


def stats_path(output_dir: str, shard: int) -> str:
    return os.path.join(output_dir, STATS_DIR, SHARD_NAME.format(shard).replace(".tfrecord", ".json"))


def make_shard(shard: int, documents: list[Document], output_dir: str,
               options: sop.GenerationOptions) -> dict:
    """Generates, shuffles and writes one shard; returns its statistics (`DataStats.to_dict`)."""

    workers.raise_if_failed()  # the worker could not load the vocabulary (_init_worker)
    stats = DataStats()
    records: list[bytes] = []
    tokenized: list[list[np.ndarray]] = []
    if options.objective == "nsp":  # negatives come from the shard's other documents
        tokenized = [tokenize_sentences(_WORKER["tokenizer"], d.sentences) for d in documents]
    for own, document in enumerate(documents):
        records.extend(document_records(document, _WORKER["tokenizer"], _WORKER["vocab"],
                                        options, stats, tokenized, own))
    order = np.random.default_rng([options.seed, sop.SHARD_STREAM, shard]).permutation(len(records))
    result = stats.to_dict()
    # Statistics first, then the shard: a shard on disk always has its statistics.
    atomic.atomic_write_json(stats_path(output_dir, shard), result)
    write_records(shard_path(output_dir, shard), (records[i] for i in order))
    return result


def shard_is_complete(output_dir: str, shard: int) -> bool:
    return os.path.exists(shard_path(output_dir, shard)) and os.path.exists(stats_path(output_dir, shard))


def _blocks(documents: Iterable[Document], size: int) -> Iterator[list[Document]]:
    block: list[Document] = []
    for document in documents:
        block.append(document)
        if len(block) == size:
            yield block
            block = []
    if block:
        yield block


def _shards(output_dir: str) -> list[str]:
    """The finished shards in `output_dir` (hidden temporaries are not)."""
    return sorted(fnmatch.filter(os.listdir(output_dir), SHARD_GLOB))


def _prepare_output(output_dir: str, config: dict) -> list[str]:
    """Creates the directory, or checks that a previous run used the same configuration.

    The configuration binds a directory only once it holds a finished shard: a
    run that failed before writing one (a bad input, a kill) does not stop a
    corrected rerun. Returns what this run created (`_undo_unfinished` removes it).
    """
    atomic.check_writable_directory(output_dir, "--output-dir")
    # Shards and statistics beside no create_data_config.json / summary.json are not ours.
    atomic.check_resumable(output_dir, (SHARD_GLOB, STATS_DIR), (DATA_CONFIG_FILE, SUMMARY_FILE),
                           "--output-dir", "create-data")
    stats = os.path.join(output_dir, STATS_DIR)
    path = os.path.join(output_dir, DATA_CONFIG_FILE)
    created = atomic.missing_parents(stats) + ([] if os.path.isdir(stats) else [stats])
    os.makedirs(stats, exist_ok=True)
    has_shards = bool(_shards(output_dir))
    if os.path.exists(path) and has_shards:
        try:
            with open(path, encoding="utf-8") as f:
                previous = json.load(f)
        except (OSError, json.JSONDecodeError) as e:
            raise errors.UserError(f"{path}: unreadable ({e}); use a new --output") from None
        if previous != config:
            changed = sorted(k for k in set(config) | set(previous) if config.get(k) != previous.get(k))
            raise errors.UserError(f"{output_dir} holds data made with other settings ({', '.join(changed)} "
                             f"differ, see {DATA_CONFIG_FILE}); use a new --output")
    else:
        atomic.atomic_write_json(path, config)
    for directory in (output_dir, os.path.join(output_dir, STATS_DIR)):
        for name in os.listdir(directory):  # temporaries of a killed run
            if atomic.is_temporary(name):
                os.remove(os.path.join(directory, name))
    return created


def _undo_unfinished(output_dir: str, created: list[str], empty_shards: bool = False) -> None:
    """After a run that finished no shard (or, with `empty_shards`, only shards without
    instances, which are removed): removes create_data_config.json, statistics without
    their shard and the directories the run created (`created`, if empty), so that
    nothing of it binds or litters the directory. Finished shards of a failed or
    killed run stay: a rerun resumes them."""
    if _shards(output_dir) and not empty_shards:
        return
    for name in _shards(output_dir):
        os.remove(os.path.join(output_dir, name))
    stats = os.path.join(output_dir, STATS_DIR)
    for name in os.listdir(stats) if os.path.isdir(stats) else []:
        if name.endswith(".json"):  # no shard has them now
            os.remove(os.path.join(stats, name))
    with contextlib.suppress(FileNotFoundError):
        os.remove(os.path.join(output_dir, DATA_CONFIG_FILE))  # binds nothing without shards
    keep = os.path.abspath(output_dir) if empty_shards else None  # summary.json goes there
    for directory in reversed(created):
        if os.path.abspath(directory) != keep:
            with contextlib.suppress(OSError):
                os.rmdir(directory)  # only if empty


def _file_sha256(path: str) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


@dataclasses.dataclass
class _Progress:
    """Shards in flight and done; the bar counts documents (used or skipped by the reader)."""

    bar: object
    pending: dict = dataclasses.field(default_factory=dict)  # future -> (shard, documents read)
    stats: dict = dataclasses.field(default_factory=dict)  # shard -> stats dict
    resumed: int = 0

    def done(self, future) -> None:
        shard, read = self.pending.pop(future)
        self.stats[shard] = workers.result(future, f"shard {shard}")  # one line if one died
        self.bar.update(read)

    def wait(self, at_most: int) -> None:
        """Collects finished shards until at most `at_most` are in flight."""
        while len(self.pending) > at_most:
            finished, _ = concurrent.futures.wait(self.pending, return_when=concurrent.futures.FIRST_COMPLETED)
            for future in finished:
                self.done(future)


def _generate(corpus: Corpus, report: CorpusReport, output_dir: str, options: sop.GenerationOptions,
              documents_per_shard: int, executor, processes: int, progress: _Progress) -> None:
    """Hands each block of documents whose shard is not complete to the executor."""
    reader_skips = 0
    for shard, block in enumerate(_blocks(corpus.read(report), documents_per_shard)):
        skips = report.count() - report.count("unreadable_file")  # documents the reader dropped
        read, reader_skips = len(block) + skips - reader_skips, skips
        if shard_is_complete(output_dir, shard):
            with open(stats_path(output_dir, shard), encoding="utf-8") as f:
                progress.stats[shard] = json.load(f)
            progress.resumed += 1
            progress.bar.update(read)
            continue
        progress.wait(2 * processes - 1)  # bounded: only a few blocks of documents in memory
        progress.pending[executor.submit(make_shard, shard, block, output_dir, options)] = (shard, read)
    progress.wait(0)


def create_pretraining_data(corpus: Corpus, output_dir: str, spm_model: str,
                            options: sop.GenerationOptions = sop.GenerationOptions(),  # noqa: B008 (frozen)
                            *,
                            do_lower_case: bool = True, documents_per_shard: int = DOCUMENTS_PER_SHARD,
                            processes: int | None = None) -> dict:
    """Writes the pretraining shards of a corpus and returns the summary (also saved as summary.json).

    Args:
      corpus: from `corpus.open_corpus`.
      output_dir: the shards, statistics and summary go here.
      spm_model: the vocabulary: a SentencePiece model or a WordPiece vocab.txt
        (`load_vocabulary`).
      options: generation options (the original's defaults).
      do_lower_case: passed to the tokenizer.
      documents_per_shard: documents per output shard.
      processes: worker processes (default: all cores); 1 runs in this process.

    Raises:
      ValueError: the output directory holds data made with other settings.
    """
    start = time.time()
    processes = processes or os.cpu_count() or 1
    load_vocabulary(spm_model, do_lower_case)  # here, before any worker starts or file is written
    config = {"corpus": corpus.name, "input": corpus.identity, "spm_model_sha256": _file_sha256(spm_model),
              "do_lower_case": do_lower_case, "documents_per_shard": documents_per_shard,
              **dataclasses.asdict(options)}
    with atomic.claimed(output_dir):  # one writer per --output-dir at a time
        return _create(corpus, output_dir, spm_model, options, config,
                       documents_per_shard, processes, start)


def _create(corpus: Corpus, output_dir: str, spm_model: str, options: sop.GenerationOptions,
            config: dict, documents_per_shard: int, processes: int, start: float) -> dict:
    do_lower_case = config["do_lower_case"]  # `create_pretraining_data`, claimed
    created = _prepare_output(output_dir, config)
    report = CorpusReport()
    bar = tqdm(total=corpus.total, unit="doc", desc="create-data", dynamic_ncols=True, smoothing=0.1)
    progress = _Progress(bar)
    try:
        with workers.executor(processes, _init_worker, (spm_model, do_lower_case)) as executor, \
                bar:
            try:
                _generate(corpus, report, output_dir, options, documents_per_shard, executor,
                          processes, progress)
            except BaseException:  # a shard failed: the others are not waited for
                executor.shutdown(wait=True, cancel_futures=True)
                raise
    except BaseException:  # a failure or an interrupt: nothing unfinished stays behind
        _undo_unfinished(output_dir, created)
        raise
    if not sum(stats.get("instances", 0) for stats in progress.stats.values()):
        _undo_unfinished(output_dir, created, empty_shards=True)  # summary.json says why
    if progress.resumed:
        logger.info("resumed: %d of %d shards were already complete", progress.resumed, len(progress.stats))
    summary = summarize(corpus.name, progress.stats, report, options, time.time() - start)
    summary["shards_resumed"] = progress.resumed
    atomic.atomic_write_json(os.path.join(output_dir, SUMMARY_FILE), summary)
    return summary


# ---------------------------------------------------------------------------
# Command line (the options: create_data_command.py).

def run_command(args: argparse.Namespace) -> int:
    """`albert-tf create-data` with its parsed arguments (`create_data_command.parser`)."""
    options = options_from_args(args)
    arguments.require_positive("--documents-per-shard", args.documents_per_shard)
    if args.processes is not None:
        arguments.require_positive("--processes", args.processes, " (omit it to use all cores)")
    if not os.path.isfile(args.spm_model):
        raise errors.UserError(f"--spm-model {args.spm_model} is not a file")
    load_vocabulary(args.spm_model, not args.cased)  # a bad vocabulary: one line, no worker
    corpus = open_corpus(args.input)  # explicitly named inputs are checked here, before work
    cli.setup_logging()
    summary = create_pretraining_data(
        corpus, args.output_dir, args.spm_model, options, do_lower_case=not args.cased,
        documents_per_shard=args.documents_per_shard, processes=args.processes)
    logger.info("wrote %d instances from %d documents in %d shards to %s (%.1f s); summary: %s",
                summary["instances"], summary["documents"], summary["shards"], args.output_dir,
                summary["wall_time_s"], os.path.join(args.output_dir, SUMMARY_FILE))
    warn_skipped(summary, logger)
    if summary["instances"] == 0:
        raise errors.UserError(f"no instances were made; see "
                              f"{os.path.join(args.output_dir, SUMMARY_FILE)} for skipped inputs")
    return 0


@cli.command("create-data")
def main(argv: list[str]) -> int:
    return run_command(create_data_command.parse(argv))
