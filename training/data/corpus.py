"""Corpora: the embedded default one, text files, tensorflow-datasets; one `open_corpus`.

`open_corpus` picks a reader from a spec string:
  * "embedded" (or nothing): Python's own documentation (`embedded.py`);
  * text files in the original layout (one sentence per line, a blank line
    between documents), given as comma-separated paths or globs, plain or
    gzip-compressed (`.gz`), local or on any filesystem `tf.io.gfile` knows;
  * `tfds:NAME[:SPLIT[:FIELD]]`, a tensorflow-datasets dataset, its text cut
    into paragraphs at line breaks and into sentences by `split_sentences`.
Bad input inside a corpus never stops a reader: unreadable and binary files,
lines that are not UTF-8 (decoded by `albert_tf.infra.textio`, the one decoder; the
detail names the line and the byte offset) or longer than `MAX_LINE_BYTES` (the
document holding one is dropped), empty and one-sentence documents are counted
per reason and per file in a `CorpusReport`. A file named explicitly (not through a glob) that
is missing or binary is refused by `open_corpus` before any work.

Long because the three readers share one accounting (`CorpusReport`, `Document`,
`_usable`) and one size estimate for the progress bar; split apart they would
import each other.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import glob
import gzip
import io
import os
import re
import sys
import zlib
from collections.abc import Callable, Iterable, Iterator

from albert_tf import errors
from albert_tf.errors import UserError
from albert_tf.infra import atomic, textio

from .embedded import MIN_SENTENCES, embedded_documents, split_sentences

# A "sentence" line longer than this is not prose (a dump, a minified file): its
# document is skipped and counted as "overlong_line", and the line is never held
# in memory whole.
MAX_LINE_BYTES = 1 << 20
_SNIFF_BYTES = 8192  # a NUL byte among the first 8 KiB marks a binary file (as git does)


def write_corpus_file(path: str, documents: Iterator[list[str]]) -> dict[str, int]:
    """Writes documents in the original text layout (atomically) and returns counts."""
    stats = {"documents": 0, "sentences": 0, "characters": 0}
    with atomic.atomic_write(path) as f:
        for doc in documents:
            for sentence in doc:
                f.write(sentence + "\n")
                stats["sentences"] += 1
                stats["characters"] += len(sentence)
            f.write("\n")
            stats["documents"] += 1
    return stats


# ---------------------------------------------------------------------------
# Readers of user corpora, with per-file accounting of what was skipped.

EMBEDDED = "embedded"
TFDS_PREFIX = "tfds:"
_GLOB_CHARS = re.compile(r"[*?\[]")


class CorpusReport:
    """Counts skipped inputs per reason and per file, with a few examples of each.

    Reasons used by the readers: "unreadable_file", "binary_file", "invalid_utf8",
    "overlong_line", "empty_document", "one_sentence_document"; generation adds its own.
    """

    MAX_EXAMPLES = 20

    def __init__(self):
        self._counts: collections.Counter = collections.Counter()
        self._files: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
        self._examples: dict[str, list[str]] = collections.defaultdict(list)

    def skip(self, reason: str, file: str, detail: str = "", count: int = 1) -> None:
        """Records `count` skipped items of `reason` in `file` (detail: where, why)."""
        self._counts[reason] += count
        self._files[reason][file] += count
        if len(self._examples[reason]) < self.MAX_EXAMPLES:
            self._examples[reason].append(f"{file}: {detail}" if detail else file)

    def count(self, reason: str | None = None) -> int:
        """Skipped items of one reason, or of all reasons."""
        return self._counts[reason] if reason else sum(self._counts.values())

    def merge(self, other: dict) -> None:
        """Adds a report given as `to_dict()` output (from another process)."""
        for reason, entry in other.items():
            self._counts[reason] += entry["count"]
            self._files[reason].update(entry["files"])
            room = self.MAX_EXAMPLES - len(self._examples[reason])
            self._examples[reason].extend(entry["examples"][:max(room, 0)])

    def to_dict(self) -> dict:
        """`{reason: {"count", "files": {file: count}, "examples": [...]}}`, JSON-ready."""
        return {reason: {"count": self._counts[reason], "files": dict(self._files[reason]),
                         "examples": list(self._examples[reason])}
                for reason in sorted(self._counts)}


@dataclasses.dataclass(frozen=True)
class Document:
    """One document and where it came from.

    Attributes:
      source: index of its input (a file in `expand_patterns` order; 0 for a
        single stream such as the embedded corpus or a tfds split).
      index: position of the document within its source.
      sentences: its sentences, in order.
      file: the input's name (for messages and accounting).
      line: its first line in the file (1-based), or the example index.
    """

    source: int
    index: int
    sentences: list[str]
    file: str
    line: int

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"


def _usable(sentences: list[str], file: str, line: int, report: CorpusReport) -> bool:
    if not sentences:
        report.skip("empty_document", file, f"line {line}")
        return False
    if len(sentences) < MIN_SENTENCES:
        report.skip("one_sentence_document", file, f"line {line}")
        return False
    return True


def _gfile():
    """`tf.io.gfile`, imported when first needed: remote paths (gs://, hdfs://, ...) alone
    need TensorFlow, so local patterns are checked before it loads (the demo's --corpus)."""
    import tensorflow as tf

    return tf.io.gfile


def expand_patterns(spec: str) -> list[str]:
    """Expands comma-separated paths and globs into files, in a fixed order.

    Each glob's matches are sorted; the patterns keep the given order;
    duplicates are dropped. Plain paths are kept even if missing (the reader
    reports them as unreadable).

    Raises:
      ValueError: a glob matches nothing.
    """
    paths: list[str] = []
    for pattern in filter(None, (p.strip() for p in spec.split(","))):
        if not _GLOB_CHARS.search(pattern):
            matches = [pattern]
        elif "://" in pattern:
            matches = sorted(_gfile().glob(pattern))
        else:
            matches = sorted(glob.glob(pattern))
        if not matches:
            raise errors.UserError(f"input pattern {pattern!r} matches no files")
        paths.extend(m for m in matches if m not in paths)
    return paths


def _open_lines(path: str, stack) -> Iterable[bytes]:
    """Opens a (possibly gzipped, possibly remote) file for binary line iteration."""
    if "://" in path:
        raw = stack.enter_context(_gfile().GFile(path, "rb"))
    else:
        raw = stack.enter_context(textio.open_regular(path))  # a FIFO refused, not waited on
    if path.endswith(".gz"):
        return stack.enter_context(gzip.GzipFile(fileobj=raw))
    return raw


def _lines(stream) -> Iterator[bytes | None]:
    """The lines of a binary stream; None for a line longer than MAX_LINE_BYTES,
    which is skipped in pieces rather than read whole (local and gzip streams;
    tf.io.gfile's remote files read lines whole)."""

    if not isinstance(stream, io.BufferedIOBase):
        yield from stream
        return
    while True:
        raw = stream.readline(MAX_LINE_BYTES + 1)
        if not raw:
            return
        if len(raw) > MAX_LINE_BYTES and not raw.endswith(b"\n"):
            while raw and not raw.endswith(b"\n"):  # the rest of the line, piece by piece
                raw = stream.readline(MAX_LINE_BYTES)
            yield None
        else:
            yield raw


def binary_offset(path: str) -> int | None:
    """The offset of a NUL byte among the first 8 KiB of the (decompressed) file, or None."""

    with contextlib.ExitStack() as stack:
        head = _open_lines(path, stack).read(_SNIFF_BYTES)
    offset = head.find(b"\0")
    return None if offset < 0 else offset


def _read_errors() -> tuple[type[BaseException], ...]:

    # FileSizeError: a glob matched a FIFO or device, skipped with a count like a missing file
    errors: tuple[type[BaseException], ...] = (OSError, EOFError, zlib.error,
                                              textio.FileSizeError)
    tf = sys.modules.get("tensorflow")  # loaded when a remote file was opened
    if tf is not None:
        errors += (tf.errors.OpError,)
    return errors


def read_text_file(path: str, report: CorpusReport) -> Iterator[tuple[int, list[str]]]:
    """Yields `(first_line, sentences)` per usable document of one file in the original layout.

    One sentence per line, blank lines between documents; `.gz` files are
    decompressed. A document holding a line that is not valid UTF-8 is dropped;
    an unreadable file (missing, no permission, corrupt gzip) is reported and
    the documents read before the error are kept.
    """

    sentences: list[str] = []
    first, number, bad = 1, 0, None  # bad: (reason, detail) of the document's first bad line
    try:
        offset = binary_offset(path)
        if offset is not None:
            report.skip("binary_file", path, f"NUL byte at byte {offset}: not a text file")
            return
        with contextlib.ExitStack() as stack:
            position = 0  # byte offset of the line in the (decompressed) file
            for number, raw in enumerate(_lines(_open_lines(path, stack)), start=1):
                if raw is None:
                    bad = bad or ("overlong_line", f"line {number}")
                    continue  # the document stays open until its blank line
                try:
                    line = textio.decode(raw, path, number, position).strip()
                except textio.EncodingError as e:
                    bad = bad or ("invalid_utf8", f"line {number}: {e.detail}")
                    line = "\ufffd"  # keeps the document open until its blank line
                position += len(raw)
                if line:
                    if not sentences:
                        first = number
                    sentences.append(line)
                    continue
                if bad:
                    report.skip(bad[0], path, bad[1])
                elif sentences and _usable(sentences, path, first, report):
                    yield first, sentences
                sentences, bad = [], None
    except _read_errors() as e:
        report.skip("unreadable_file", path, f"after line {number}: {type(e).__name__}: {e}")
        return
    if bad:
        report.skip(bad[0], path, bad[1])
    elif sentences and _usable(sentences, path, first, report):
        yield first, sentences


def count_text_documents(paths: Iterable[str]) -> int:
    """Counts blank-line-separated documents in files (for a progress total); unreadable ones count 0."""

    total = 0
    for path in paths:
        try:
            with contextlib.ExitStack() as stack:
                in_document = False
                for raw in _lines(_open_lines(path, stack)):
                    blank = raw is not None and not raw.strip()
                    total += int(in_document and blank)
                    in_document = not blank
                total += int(in_document)
        except _read_errors():
            continue
    return total


def text_file_documents(paths: list[str], report: CorpusReport) -> Iterator[Document]:
    """Documents of text files, keyed by (file index in `paths`, document index in the file)."""
    for source, path in enumerate(paths):
        for index, (line, sentences) in enumerate(read_text_file(path, report)):
            yield Document(source, index, sentences, path, line)


def tfds_documents(name: str, split: str, text_field: str, report: CorpusReport,
                   data_dir: str | None = None) -> Iterator[Document]:
    """Documents of a tensorflow-datasets split, one per example, in the split's order.

    The text is cut into paragraphs at line breaks and each paragraph into
    sentences. The dataset is downloaded and prepared by tfds if needed.

    Raises:
      ValueError: the dataset has no feature `text_field`.
    """
    import tensorflow_datasets as tfds

    builder = tfds.builder(name, data_dir=data_dir)
    builder.download_and_prepare()
    if text_field not in builder.info.features:
        raise UserError(f"tfds dataset {name!r} has no feature {text_field!r}; "
                         f"it has {sorted(builder.info.features)}")
    file = f"{TFDS_PREFIX}{name}:{split}"
    dataset = builder.as_dataset(split=split, shuffle_files=False)
    for index, example in enumerate(tfds.as_numpy(dataset)):
        raw = example[text_field]
        try:
            text = textio.decode(raw, file) if isinstance(raw, bytes) else str(raw)
        except textio.EncodingError as e:
            report.skip("invalid_utf8", file, f"example {index}: {e.detail}")
            continue
        sentences = [s for paragraph in text.splitlines() for s in split_sentences(paragraph)]
        if _usable(sentences, file, index, report):
            yield Document(0, index, sentences, file, index)


@dataclasses.dataclass
class Corpus:
    """A corpus chosen by `open_corpus`.

    Attributes:
      name: what it is, for logs and the summary.
      read: `read(report)` yields its `Document`s (can be called again).
      total: the number of documents when known in advance (progress bars).
      identity: what identifies the input (paths and sizes), for resuming.
    """

    name: str
    read: Callable[[CorpusReport], Iterator[Document]]
    total: int | None
    identity: list


def _parse_tfds(spec: str) -> tuple[str, str, str]:
    parts = spec[len(TFDS_PREFIX):].split(":")
    if not parts[0] or len(parts) > 3:
        raise errors.UserError(f"bad tfds input {spec!r}; expected tfds:NAME[:SPLIT[:TEXT_FIELD]]")
    name, split, field = (parts + ["train", "text"][len(parts) - 1:])[:3]
    return name, split, field


def open_corpus(spec: str | None) -> Corpus:
    """Chooses a corpus from a spec string.

    Args:
      spec: None or "embedded" (the embedded default corpus);
        "tfds:NAME[:SPLIT[:TEXT_FIELD]]" (defaults train, text), e.g.
        "tfds:wikipedia/20230601.en:train:text";
        otherwise comma-separated text files or globs (".gz" allowed).

    Raises:
      ValueError: a malformed spec or a glob that matches nothing.
    """
    if not spec or spec == EMBEDDED:
        documents = list(embedded_documents())
        return Corpus(EMBEDDED, lambda report: (
            Document(0, i, d, EMBEDDED, i) for i, d in enumerate(documents)),
            len(documents), [EMBEDDED, len(documents)])
    if spec.startswith(TFDS_PREFIX):
        name, split, field = _parse_tfds(spec)
        return Corpus(spec, lambda report: tfds_documents(name, split, field, report),
                      _tfds_size(name, split), [spec])
    paths = expand_patterns(spec)
    _check_named_files(spec)
    sizes = [_file_size(p) for p in paths]
    return Corpus(spec, lambda report: text_file_documents(paths, report),
                  count_text_documents(paths), [list(pair) for pair in zip(paths, sizes)])


def _check_named_files(spec: str) -> None:
    """Files named explicitly (not matched by a glob) must exist and hold text.

    Raises:
      UserError: naming the file (before any work is done).
    """
    for path in filter(None, (p.strip() for p in spec.split(","))):
        if _GLOB_CHARS.search(path):
            continue  # a glob's matches are checked, and skipped with a count, when read
        if "://" in path:

            if not _gfile().exists(path):
                raise errors.UserError(f"--input {path}: no such file")
            continue
        if not os.path.exists(path):
            raise errors.UserError(f"--input {path}: no such file")
        if os.path.isdir(path):
            raise errors.UserError(f"--input {path} is a directory; give files or a glob "
                                  f"such as {os.path.join(path, '*.txt')}")
        try:  # a FIFO would block the reads below for ever; a device never ends
            textio.check_regular(path)
        except textio.NotRegularFileError as e:
            raise errors.UserError(f"--input {e}") from None
        try:
            offset = binary_offset(path)
        except _read_errors():
            continue  # unreadable (e.g. a corrupt .gz): counted per file by the reader
        if offset is not None:
            raise errors.UserError(f"--input {path} is not a text file (NUL byte at byte "
                                  f"{offset}); give one-sentence-per-line text (.txt or .gz)")


def _file_size(path: str) -> int:
    try:
        if "://" in path:

            return int(_gfile().stat(path).length)
        return os.path.getsize(path)
    except Exception:  # an unreadable file is reported by the reader, not here
        return -1


def _tfds_size(name: str, split: str) -> int | None:
    try:
        import tensorflow_datasets as tfds

        return int(tfds.builder(name).info.splits[split].num_examples) or None
    except Exception:  # unknown until prepared: the progress bar shows no ETA
        return None
