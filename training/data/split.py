"""Held-out documents and a labelled task, both drawn from a corpus itself.

Two things every honest small-budget experiment needs and no download provides:

  * a split BY DOCUMENT into training and held-out documents (`split_documents`),
    deterministic (a hash of each document's name and a seed, no RNG state) and
    stratified by a group, so that every area of the corpus has held-out documents;
  * for the embedded corpus, a sentence-classification task whose labels come from
    WHERE each sentence was written (`source_label`): the language reference, one
    area of the standard library (a package, or a few packages of one subject), or
    one installed package (NumPy, Keras, TensorFlow, Matplotlib). No label is
    derived from the words of a sentence.

`prepare_corpus_split` writes both as files the other commands read:

    OUT/train.txt, OUT/heldout.txt      the corpus in the original ALBERT layout
                                        (`albert-tf create-data` input)
    OUT/classify-train.jsonl,           {"text", "label", "document"} per line
    OUT/classify-heldout.jsonl          (`albert-tf finetune --task classify
                                        --columns text:label`), embedded corpus only
    OUT/split.json                      the held-out document names and all counts
                                        (for the embedded corpus, under "sources",
                                        what each source gave before and after
                                        de-duplication, with its version)

Example:
    >>> split = prepare_corpus_split("embedded", "out/corpus")
    >>> split.heldout_text, split.classify_heldout
    ('out/corpus/heldout.txt', 'out/corpus/classify-heldout.jsonl')
"""

from __future__ import annotations

import collections
import dataclasses
import hashlib
import json
import logging
import os
from collections.abc import Iterable, Sequence

from albert_tf.infra import atomic, textio

from . import corpus, embedded

# What a corpus split writes beside its files (paths, held-out documents, counts).
SPLIT_FILE = "split.json"

HELD_OUT_FRACTION = 0.1
SPLIT_SEED = "albert-tf-split-1"

logger = logging.getLogger(__name__)

# The classes of the embedded task: the language reference, areas of the standard
# library named after the packages their docstrings live in, and installed packages.
# Each class has many documents (files), so a split by document leaves some in every
# class.
REFERENCE_LABEL = "language"
LIBRARY_AREAS: dict[str, tuple[str, ...]] = {
    "asyncio": ("asyncio",),
    "email": ("email",),
    "importlib": ("importlib",),
    "internet": ("http", "urllib", "wsgiref", "xmlrpc"),
    "xml": ("xml",),
}
# Installed packages (`embedded.PACKAGES` names) -> their class. The other packages
# (tensorflow_datasets, tensorboard, absl, h5py) are corpus text in no class.
PACKAGE_AREAS: dict[str, tuple[str, ...]] = {
    "numpy": ("numpy",),
    "keras": ("keras",),
    "tensorflow": ("tensorflow",),
    "matplotlib": ("matplotlib",),
}
LABELS: tuple[str, ...] = (REFERENCE_LABEL, *LIBRARY_AREAS, *PACKAGE_AREAS)
TEXT_COLUMN, LABEL_COLUMN, DOCUMENT_COLUMN = "text", "label", "document"
MIN_CLASSIFY_WORDS = 6       # shorter sentences ("Return the value.") say nothing of their area
MAX_TRAIN_PER_CLASS = 300    # balances the classes (TensorFlow alone has ~45,000 sentences)
MAX_HELDOUT_PER_CLASS = 100  # a held-out set near balance: the majority baseline is weak


@dataclasses.dataclass(frozen=True)
class NamedDocument:
    """A document with a stable name (what identifies it across runs) and its group.

    Attributes:
      name: e.g. "library/email/message.py", or "FILE#INDEX" for text-file corpora.
      sentences: its sentences, in order.
      group: the stratum of the split (the class label, "other", or "" for one stratum).
    """

    name: str
    sentences: list[str]
    group: str = ""


@dataclasses.dataclass(frozen=True)
class CorpusSplit:
    """What `prepare_corpus_split` wrote (paths) and counted."""

    train_text: str
    heldout_text: str
    classify_train: str | None
    classify_heldout: str | None
    heldout_documents: list[str]
    counts: dict


def source_label(name: str) -> str | None:
    """The class of an embedded document from its name, or None if it is in no class.

    "reference/..." -> "language"; "library/PKG/..." -> the area holding PKG;
    "package/NAME/..." -> the class of the installed package NAME. Top-level
    standard-library modules ("library/os.py") and other packages belong to no class.
    """
    if name.startswith(embedded.REFERENCE_PREFIX):
        return REFERENCE_LABEL
    for prefix, areas in ((embedded.LIBRARY_PREFIX, LIBRARY_AREAS),
                          (embedded.PACKAGE_PREFIX, PACKAGE_AREAS)):
        if name.startswith(prefix):
            parts = name[len(prefix):].split("/")
            if len(parts) > 1:
                for label, packages in areas.items():
                    if parts[0] in packages:
                        return label
    return None


def _rank(name: str, seed: str) -> str:
    return hashlib.sha256(f"{seed}\0{name}".encode()).hexdigest()


def split_documents(documents: Iterable[NamedDocument], fraction: float = HELD_OUT_FRACTION,
                    seed: str = SPLIT_SEED) -> tuple[list[NamedDocument], list[NamedDocument]]:
    """Splits documents into (train, held-out), deterministically and per group.

    Within each group the documents are ordered by a hash of (seed, name) and held
    out in that order until they hold `fraction` of the group's sentences (at least
    one document when the group has two or more, never all of them): a group's share
    of held-out text follows its share of the corpus even when its documents differ
    in length. The split depends only on the names and lengths, never on the input
    order. Both lists keep the input order.

    Raises:
      ValueError: fraction outside (0, 1), or two documents with the same name.
    """
    if not 0.0 < fraction < 1.0:
        raise ValueError(f"held-out fraction={fraction} must be in (0, 1)")
    documents = list(documents)
    groups: dict[str, list[NamedDocument]] = collections.defaultdict(list)
    seen = set()
    for doc in documents:
        if doc.name in seen:
            raise ValueError(f"two documents are named {doc.name!r}: names must be unique")
        seen.add(doc.name)
        groups[doc.group].append(doc)
    held = set()
    for members in groups.values():
        target = fraction * sum(len(d.sentences) for d in members)
        taken = 0
        for doc in sorted(members, key=lambda d: _rank(d.name, seed))[:len(members) - 1]:
            if taken >= target:
                break
            held.add(doc.name)
            taken += len(doc.sentences)
    return ([d for d in documents if d.name not in held], [d for d in documents if d.name in held])


def corpus_documents(spec: str | None) -> list[NamedDocument]:
    """The documents of a corpus spec (see `corpus.open_corpus`) with names and groups.

    The embedded corpus is grouped by `source_label` ("other" for unlabelled
    documents); any other corpus is one group, its documents named "FILE#INDEX".
    """
    return _documents_and_sources(spec)[0]


def _documents_and_sources(spec: str | None) -> tuple[list[NamedDocument], dict | None]:
    """`corpus_documents`, and the embedded corpus's per-source summary (else None)."""
    if not spec or spec == corpus.EMBEDDED:
        read = embedded.embedded_corpus()
        return ([NamedDocument(name, sentences, source_label(name) or "other")
                 for name, sentences in read.documents], read.summary)
    source = corpus.open_corpus(spec)
    return [NamedDocument(f"{d.file}#{d.index}", d.sentences)
            for d in source.read(corpus.CorpusReport())], None


def classification_examples(documents: Sequence[NamedDocument], max_per_class: int,
                            exclude: set[str] = frozenset(),
                            seed: str = SPLIT_SEED) -> list[dict[str, str]]:
    """Labelled sentences of the documents that have a class, at most `max_per_class` each.

    A sentence is kept if it has at least MIN_CLASSIFY_WORDS words, is not in
    `exclude` (the training sentences, when building the held-out set) and was not
    seen before; a class over the cap keeps a hash-chosen subset. Returns
    `{"text", "label", "document"}` dicts in document order.
    """
    by_label: dict[str, list[dict[str, str]]] = collections.defaultdict(list)
    seen = set(exclude)
    for doc in documents:
        label = source_label(doc.name)
        if label is None:
            continue
        for sentence in doc.sentences:
            if len(sentence.split()) < MIN_CLASSIFY_WORDS or sentence in seen:
                continue
            seen.add(sentence)
            by_label[label].append({TEXT_COLUMN: sentence, LABEL_COLUMN: label,
                                    DOCUMENT_COLUMN: doc.name})
    kept = []
    for label in LABELS:
        rows = by_label.get(label, [])
        chosen = {id(r) for r in sorted(rows, key=lambda r: _rank(r[TEXT_COLUMN], seed))
                  [:max_per_class]}
        kept.extend(r for r in rows if id(r) in chosen)
    return kept


def _write_jsonl(path: str, rows: list[dict]) -> None:
    with atomic.atomic_write(path) as f:
        f.write("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))


def label_counts(rows: Iterable[dict]) -> dict[str, int]:
    """{label: count} in LABELS order (labels with no rows included as 0)."""
    counts = collections.Counter(r[LABEL_COLUMN] for r in rows)
    return {label: counts.get(label, 0) for label in LABELS}


def prepare_corpus_split(spec: str | None, out_dir: str,
                         fraction: float = HELD_OUT_FRACTION,
                         seed: str = SPLIT_SEED) -> CorpusSplit:
    """Writes the train / held-out corpus files (and, for the embedded corpus, the task).

    Args:
      spec: a corpus spec (`corpus.open_corpus`); None or "embedded": the embedded corpus.
      out_dir: where the files go (created); existing files of these names are replaced.
      fraction: the share of documents held out, per group.
      seed: changes which documents are held out.

    Returns:
      A `CorpusSplit`; `classify_*` are None for corpora without source labels.

    Raises:
      ValueError: a bad spec or fraction, or a corpus with fewer than two documents.
    """
    documents, sources = _documents_and_sources(spec)
    if sources is not None:
        for line in embedded.summary_lines(sources):
            logger.info("corpus: %s", line)
    if len(documents) < 2:
        raise ValueError(f"corpus {spec or corpus.EMBEDDED!r} has {len(documents)} usable "
                         "document(s); a held-out split needs at least 2")
    train, held = split_documents(documents, fraction, seed)
    os.makedirs(out_dir, exist_ok=True)
    paths = {name: os.path.join(out_dir, f"{name}.txt") for name in ("train", "heldout")}
    counts: dict = {"sources": sources} if sources is not None else {}
    for name, docs in (("train", train), ("heldout", held)):
        counts[name] = corpus.write_corpus_file(paths[name], (d.sentences for d in docs))
    classify = {"train": None, "heldout": None}
    if any(source_label(d.name) for d in documents):
        rows_train = classification_examples(train, MAX_TRAIN_PER_CLASS, seed=seed)
        rows_held = classification_examples(held, MAX_HELDOUT_PER_CLASS,
                                            exclude={r[TEXT_COLUMN] for r in rows_train},
                                            seed=seed)
        for name, rows in (("train", rows_train), ("heldout", rows_held)):
            classify[name] = os.path.join(out_dir, f"classify-{name}.jsonl")
            _write_jsonl(classify[name], rows)
            counts[f"classify_{name}"] = label_counts(rows)
    split = CorpusSplit(paths["train"], paths["heldout"], classify["train"],
                        classify["heldout"], sorted(d.name for d in held), counts)
    atomic.atomic_write_json(os.path.join(out_dir, SPLIT_FILE),
                            {"corpus": spec or corpus.EMBEDDED, "fraction": fraction,
                             "seed": seed, **dataclasses.asdict(split)})
    return split


def majority_baseline(train_labels: Sequence[str], heldout_labels: Sequence[str]) -> dict:
    """The constant predictors' accuracy on the held-out labels.

    Returns {"train_majority": label, "train_majority_accuracy": accuracy on held-out of
    always answering the most frequent training label, "best_constant_accuracy": the
    most frequent held-out label's share (the strongest constant answer)}.
    """
    if not heldout_labels:
        raise ValueError("no held-out labels")
    train_top = collections.Counter(train_labels).most_common(1)[0][0]
    held = collections.Counter(heldout_labels)
    return {"train_majority": train_top,
            "train_majority_accuracy": held.get(train_top, 0) / len(heldout_labels),
            "best_constant_accuracy": max(held.values()) / len(heldout_labels)}


def split_rows_by_document(rows: Sequence[dict[str, str]], fraction: float,
                           seed: str = SPLIT_SEED) -> tuple[list[dict], list[dict]]:
    """Splits labelled rows into (fit, dev) by their "document", stratified by label.

    For choosing a fine-tuning epoch on documents that are neither trained on nor
    the held-out test documents. Documents are weighted by their number of rows.
    """
    by_doc: dict[str, list[dict]] = collections.defaultdict(list)
    for row in rows:
        by_doc[row[DOCUMENT_COLUMN]].append(row)
    docs = [NamedDocument(name, [r[TEXT_COLUMN] for r in items], items[0][LABEL_COLUMN])
            for name, items in by_doc.items()]
    _, dev_docs = split_documents(docs, fraction, seed + "-dev")
    dev_names = {d.name for d in dev_docs}
    return ([r for r in rows if r[DOCUMENT_COLUMN] not in dev_names],
            [r for r in rows if r[DOCUMENT_COLUMN] in dev_names])


def read_rows(path: str) -> list[dict[str, str]]:
    """The rows of a classify-*.jsonl file written by `prepare_corpus_split`."""
    return [json.loads(line) for line in textio.read_text(path).split("\n") if line.strip()]


def write_rows(path: str, rows: Sequence[dict]) -> None:
    """Writes rows as JSON lines, atomically (what `albert-tf finetune --task classify` reads)."""
    _write_jsonl(path, list(rows))
