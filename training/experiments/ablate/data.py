"""The data every configuration of `albert-tf ablate` shares, made once under OUTPUT/data.

    data/corpus/             train / held-out split BY DOCUMENT and the downstream
                             classification task (`corpus_tasks.prepare_corpus_split`)
    data/vocab/spiece.model  SentencePiece vocabulary of the training documents
    data/train-OBJECTIVE/    pretraining TFRecords of the training documents, one set
                             per objective the grid needs (sop, nsp, none)
    data/heldout-sop/        held-out documents as SOP and as NSP records: every
    data/heldout-nsp/        model is scored on both sentence-pair tasks

Each step is skipped when its result is complete (create-data resumes by shard).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os

from ...data import create_data, pairs
from ...data import split as corpus_tasks
from ...data.corpus import open_corpus
from ...data.vocab import train_vocab

logger = logging.getLogger(__name__)

HELDOUT_OBJECTIVES = ("sop", "nsp")
SPLIT_FILE = corpus_tasks.SPLIT_FILE


@dataclasses.dataclass(frozen=True)
class DataOptions:
    """What the shared data depends on."""

    corpus: str | None          # a corpus spec (`corpus.open_corpus`); None: embedded
    vocab_size: int
    seq_length: int
    max_predictions: int
    dupe_factor: int
    heldout_dupe_factor: int
    seed: int


@dataclasses.dataclass(frozen=True)
class AblationData:
    """Paths of the shared data."""

    spm_model: str
    train: dict[str, str]       # objective -> TFRecord glob
    heldout: dict[str, str]     # "sop" / "nsp" -> TFRecord glob
    classify_train: str | None  # JSONL {"text", "label"}; None: corpus without labels
    classify_heldout: str | None
    summaries: dict[str, dict]  # data set -> documents, instances, objective, negative fraction


def _split(opts: DataOptions, out: str):

    path = os.path.join(out, SPLIT_FILE)
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            saved = json.load(f)
        fields = {f.name for f in dataclasses.fields(corpus_tasks.CorpusSplit)}
        split = corpus_tasks.CorpusSplit(**{k: v for k, v in saved.items() if k in fields})
        # The files beside split.json, wherever the output directory has moved since.
        paths = ("train_text", "heldout_text", "classify_train", "classify_heldout")
        return dataclasses.replace(split, **{
            k: os.path.join(out, os.path.basename(getattr(split, k)))
            for k in paths if getattr(split, k)})
    logger.info("data: splitting %s by document -> %s", opts.corpus or "the embedded corpus", out)
    return corpus_tasks.prepare_corpus_split(opts.corpus, out)


def _vocab(opts: DataOptions, train_text: str, out: str) -> str:

    prefix = os.path.join(out, "spiece")
    if not os.path.exists(prefix + ".model"):
        logger.info("data: training a %d-piece vocabulary on %s", opts.vocab_size, train_text)
        os.makedirs(out, exist_ok=True)
        # One thread and all lines: the same vocabulary on every run. The stage's own
        # files: a .vocab without its .model is what a killed run left.
        train_vocab([train_text], prefix, opts.vocab_size, input_sentence_size=0, num_threads=1,
                    overwrite=True)
    return prefix + ".model"


def _records(opts: DataOptions, text: str, spm_model: str, out: str, objective: str,
             dupe_factor: int) -> tuple[str, dict]:

    summary_path = os.path.join(out, create_data.SUMMARY_FILE)
    if os.path.exists(summary_path):
        with open(summary_path, encoding="utf-8") as f:
            summary = json.load(f)
    else:
        logger.info("data: %s records of %s -> %s", objective, text, out)
        options = pairs.GenerationOptions(
            max_seq_length=opts.seq_length, max_predictions_per_seq=opts.max_predictions,
            dupe_factor=dupe_factor, seed=opts.seed, objective=objective)
        summary = create_data.create_pretraining_data(
            open_corpus(text), out, spm_model, options, processes=1)
        if summary["instances"] == 0:
            raise ValueError(f"{text}: no pretraining instances were made (see {summary_path})")
    keep = ("documents", "instances", "objective", "negative_fraction", "masked_fraction")
    return os.path.join(out, create_data.SHARD_GLOB), {k: summary.get(k) for k in keep}


def prepare_data(opts: DataOptions, output: str, objectives: list[str]) -> AblationData:
    """Makes (or finds) the shared data under `output`/data for the given training objectives."""
    root = os.path.join(output, "data")
    split = _split(opts, os.path.join(root, "corpus"))
    spm_model = _vocab(opts, split.train_text, os.path.join(root, "vocab"))
    train, heldout, summaries = {}, {}, {}
    for objective in objectives:
        name = f"train-{objective}"
        train[objective], summaries[name] = _records(
            opts, split.train_text, spm_model, os.path.join(root, name), objective,
            opts.dupe_factor)
    for objective in HELDOUT_OBJECTIVES:
        name = f"heldout-{objective}"
        heldout[objective], summaries[name] = _records(
            opts, split.heldout_text, spm_model, os.path.join(root, name), objective,
            opts.heldout_dupe_factor)
    return AblationData(spm_model, train, heldout, split.classify_train, split.classify_heldout,
                        summaries)
