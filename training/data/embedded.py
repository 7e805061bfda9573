"""The embedded default corpus: real English prose that the installed Python stack ships.

Three kinds of source, all read without importing anything that could have side effects:
  * `pydoc_data.topics`: the text of the Python language reference and library
    topics that `help()` shows ("reference/TOPIC");
  * the docstrings of the standard library's modules, classes and functions
    ("library/PATH", PATH relative to the standard library);
  * the docstrings of the installed packages albert-tf depends on (`PACKAGES`:
    TensorFlow, Keras, NumPy, ...), one document per source file
    ("package/PACKAGE/PATH", PATH inside the package's folder). Their files are
    found with `importlib.util.find_spec`, which locates a package without
    importing it, and parsed with `ast`; tests, generated API re-export trees and
    vendored copies of other code are skipped (`PackageSource.skip`).

The documents are de-duplicated in their fixed order (`dedup.py`: near-duplicate
documents, then exact duplicate sentences), so the corpus is the same for a given
Python and given package versions; `embedded_corpus()` returns it with a summary
per source (counts before and after de-duplication, versions: `summary_lines`).

Documents come back as lists of sentences, the layout of the original ALBERT
pretraining input (one sentence per line, a blank line between documents). The
prose rules (`split_sentences`, what counts as prose, `MIN_SENTENCES`) live here and
are shared with the readers of user corpora in `corpus.py`.
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import functools
import gc
import importlib.metadata
import importlib.util
import inspect
import os
import platform
import re
import sysconfig
import time
from collections.abc import Iterator, Sequence

from .dedup import Deduplicator

# Sentence ends: ., ! or ? followed by whitespace and an upper-case letter or quote.
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[\"'(\[A-Z])")
# Lines that are code, tables or markup rather than prose.
_NON_PROSE = re.compile(r"^\s*(>>>|\.\.\.|\$ |[-=*~^+|]{3,}|\.\. |::|[{}\[\]()<>]*$)")
# A line that only names a docstring section whose entries are prose ("Args:").
_SECTION = re.compile(r"^\s*(Args|Arguments|Parameters|Returns?|Yields?|Raises|Attributes|Notes?|"
                      r"Warnings?|Input shape|Output shapes?|Call arguments|Keyword arguments|"
                      r"Properties|References?)\s*:\s*$")
# An entry of such a section: "name: text", "name (type): text", "*args: text".
_ENTRY = re.compile(r"^\s*\**[A-Za-z_][\w.]*( \([^)]*\))?: (?=\S)")
# A NumPy-style parameter line ("x : array_like", "a, b : int").
_NUMPY_PARAMETER = re.compile(r"^\s*\**[A-Za-z_][\w.]*(, \**[A-Za-z_][\w.]*)* :( |$)")
_MIN_WORDS = 3
MIN_SENTENCES = 2


def split_sentences(paragraph: str) -> list[str]:
    """Splits one paragraph of prose into sentences (whitespace collapsed)."""
    text = " ".join(paragraph.split())
    return [s for s in _SENTENCE_END.split(text) if len(s.split()) >= _MIN_WORDS]


def _prose_paragraphs(text: str) -> Iterator[str]:
    """Yields the prose paragraphs of a docstring or reference topic.

    Prose is unindented text, and the indented entries of docstring sections such
    as "Args:" (each its own paragraph, without the "name:" that starts it). Left
    out: other indented blocks, doctest sessions with their output, fenced code,
    tables, markup, NumPy-style parameter lines and section names.
    """
    lines: list[str] = []
    fence = doctest = in_section = False
    for line in text.splitlines() + [""]:
        stripped = line.strip()
        indented = bool(stripped) and line[0] in " \t"
        keep, starts_paragraph = None, False
        if stripped.startswith("```"):
            fence = not fence
        elif fence:
            pass
        elif not stripped:
            doctest = False
        elif doctest or stripped.startswith(">>>"):
            doctest = True
        elif _SECTION.match(line):
            in_section = True
        elif in_section and indented:
            entry = _ENTRY.match(line)
            keep = line[entry.end():].strip() if entry else stripped
            starts_paragraph = entry is not None
        else:
            in_section = False
            if not (line.startswith(("    ", "\t")) or _NON_PROSE.match(line)
                    or _NUMPY_PARAMETER.match(line)):
                keep = stripped
        if (keep is None or starts_paragraph) and lines:
            yield " ".join(lines)
            lines = []
        if keep is not None:
            lines.append(keep)


def _document(text: str) -> list[str]:
    sentences: list[str] = []
    for paragraph in _prose_paragraphs(text):
        sentences.extend(split_sentences(paragraph))
    return sentences


_DEFINITIONS = (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
_BLOCKS = (ast.If, ast.Try, ast.With, ast.For, ast.While,
           *([ast.TryStar] if hasattr(ast, "TryStar") else []))


def _definitions(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """The classes and functions defined in a body, also inside `if`, `try`, `with` and loops."""
    for node in body:
        if isinstance(node, _DEFINITIONS):
            yield node
        elif isinstance(node, _BLOCKS):
            for field in ("body", "orelse", "finalbody"):
                yield from _definitions(getattr(node, field, []))
            for handler in getattr(node, "handlers", []):
                yield from _definitions(handler.body)


def _docstrings(body: list[ast.stmt], out: list[str]) -> None:
    """Appends the docstrings of a body and of the definitions in it, depth first.

    Walks statements only, not expressions: `ast.walk` over every node would cost
    more than the parse itself.
    """
    first = body[0] if body else None
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) \
            and isinstance(first.value.value, str):
        out.append(inspect.cleandoc(first.value.value))
    for node in _definitions(body):
        _docstrings(node.body, out)


@contextlib.contextmanager
def _cycle_collection_paused() -> Iterator[None]:
    """Pauses Python's cycle collector: a syntax tree holds no cycles (reference
    counting frees it), and the collector's passes over a heap that already holds
    TensorFlow cost more than the parse (half the time of the whole corpus)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def file_document(path: str) -> list[str]:
    """The prose sentences of one Python source file's docstrings (parsed, never imported)."""
    texts: list[str] = []
    with _cycle_collection_paused():
        try:
            with open(path, "rb") as f:
                tree = ast.parse(f.read(), filename=path)
        except (SyntaxError, UnicodeDecodeError, OSError, ValueError):
            return []
        _docstrings(tree.body, texts)
        del tree
    return _document("\n\n".join(texts))


REFERENCE_PREFIX = "reference/"  # a topic of the language reference (pydoc_data.topics)
LIBRARY_PREFIX = "library/"      # a standard-library source file, by its path in the stdlib
PACKAGE_PREFIX = "package/"      # an installed package's source file: "package/NAME/PATH"
REFERENCE_SOURCE, LIBRARY_SOURCE = "reference", "library"

# Never documents: test suites, caches, and copies of other projects' code.
_SKIP_DIRS = frozenset({"test", "tests", "testing", "__pycache__", "_vendor", "vendor",
                        "third_party", "benchmarks"})
_STDLIB_SKIP = frozenset({"idlelib", "tkinter", "turtledemo", "lib2to3", "site-packages",
                          "ensurepip", "pydoc_data"})


def _is_test_file(filename: str) -> bool:
    return filename.startswith("test_") or filename.endswith("_test.py") \
        or filename == "conftest.py"


@dataclasses.dataclass(frozen=True)
class PackageSource:
    """An installed package whose docstrings join the corpus.

    Attributes:
      name: the import name ("tensorflow"): its folder is found with `find_spec`.
      distribution: the name `importlib.metadata` knows its version by ("absl-py").
      skip: folders (paths inside the package, "/"-separated) left out beside
        `_SKIP_DIRS`: generated re-export trees, bundled copies of other packages.
    """

    name: str
    distribution: str
    skip: tuple[str, ...] = ()

    def root(self) -> str | None:
        """The package's folder, found without importing it (None: not installed, or a
        single module rather than a package)."""
        try:
            spec = importlib.util.find_spec(self.name)
        except (ImportError, ValueError):
            return None
        locations = list(spec.submodule_search_locations or []) if spec else []
        return locations[0] if locations else None

    def version(self) -> str | None:
        try:
            return importlib.metadata.version(self.distribution)
        except importlib.metadata.PackageNotFoundError:
            return None


# In this order: a sentence or document repeated across packages stays with the first.
# Skipped beside tests: generated API re-export trees (keras/api, keras/_tf_keras,
# tensorflow/_api), TensorFlow's C++ headers (no Python; a long walk), and copies of
# other code: TensorFlow's frozen Keras 2 (tensorflow/python/keras, 383k
# more characters after de-duplication, Keras prose under the TensorFlow label),
# TensorBoard's stand-in for TensorFlow, NumPy's copy of distutils.
PACKAGES: tuple[PackageSource, ...] = (
    PackageSource("numpy", "numpy", skip=("distutils",)),
    PackageSource("keras", "keras", skip=("api", "_tf_keras")),
    PackageSource("tensorflow", "tensorflow", skip=("_api", "include", "python/keras")),
    PackageSource("tensorflow_datasets", "tensorflow-datasets"),
    PackageSource("tensorboard", "tensorboard", skip=("compat/tensorflow_stub",)),
    PackageSource("absl", "absl-py"),
    PackageSource("h5py", "h5py"),
    PackageSource("matplotlib", "matplotlib"),
)


def _python_files(root: str, skip: frozenset[str] | set[str] = frozenset(),
                  skip_paths: Sequence[str] = ()) -> list[str]:
    """The .py files under root in a fixed order (sorted names, files before subfolders)."""
    paths = []
    skip_paths = {os.path.join(root, *p.split("/")) for p in skip_paths}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in skip and not d.startswith(".")
                             and os.path.join(dirpath, d) not in skip_paths)
        paths.extend(os.path.join(dirpath, f) for f in sorted(filenames)
                     if f.endswith(".py") and not _is_test_file(f))
    return paths


def _relative_name(path: str, root: str) -> str:
    return os.path.relpath(path, root).replace(os.sep, "/")


def _raw_documents(packages: Sequence[PackageSource], python: bool
                   ) -> Iterator[tuple[str, str, list[str]]]:
    """Yields `(source, name, sentences)` for every document before de-duplication."""
    if python:
        # Deferred: a dict of several hundred kB of strings, needed only for this corpus.
        from pydoc_data import topics

        for name in sorted(topics.topics):
            yield REFERENCE_SOURCE, REFERENCE_PREFIX + name, _document(topics.topics[name])
        root = sysconfig.get_paths()["stdlib"]
        for path in _python_files(root, _SKIP_DIRS | _STDLIB_SKIP):
            yield LIBRARY_SOURCE, LIBRARY_PREFIX + _relative_name(path, root), file_document(path)
    for package in packages:
        root = package.root()
        if root is None:
            continue
        prefix = f"{PACKAGE_PREFIX}{package.name}/"
        for path in _python_files(root, _SKIP_DIRS, package.skip):
            yield package.name, prefix + _relative_name(path, root), file_document(path)


def _deduplicated(packages: Sequence[PackageSource], python: bool, dedup: Deduplicator
                  ) -> Iterator[tuple[str, list[str]]]:
    for source, name, sentences in _raw_documents(packages, python):
        if len(sentences) < MIN_SENTENCES:
            continue  # never a document, before or after de-duplication
        kept = dedup.add(source, sentences)
        if kept is not None:
            yield name, kept


def embedded_sources(packages: Sequence[PackageSource] = PACKAGES, python: bool = True
                     ) -> Iterator[tuple[str, list[str]]]:
    """Yields `(name, sentences)` per document of the embedded corpus, in a fixed order.

    The name says where the text came from: "reference/TOPIC" for a topic of the
    language reference, "library/PATH" for the docstrings of one standard-library
    file (PATH relative to the stdlib, "/"-separated, e.g. "library/email/message.py"),
    "package/NAME/PATH" for one file of an installed package (e.g.
    "package/tensorflow/python/ops/array_ops.py"). De-duplicated as it goes, so
    reading only the first documents reads only their files. Documents with fewer
    than `MIN_SENTENCES` sentences are left out: they cannot form a sentence-order pair.

    Args:
      packages: the installed packages to read, in order (missing ones are skipped).
      python: whether to start with the language reference and the standard library.
    """
    if tuple(packages) == PACKAGES and python and embedded_corpus.cache_info().currsize:
        # Already read whole in this process: the same documents, copied.
        yield from ((name, list(doc)) for name, doc in embedded_corpus().documents)
        return
    yield from _deduplicated(packages, python, Deduplicator(MIN_SENTENCES))


def embedded_documents(max_documents: int | None = None,
                       packages: Sequence[PackageSource] = PACKAGES) -> Iterator[list[str]]:
    """Yields the embedded corpus as documents (lists of sentences), in a fixed order.

    The sentences of `embedded_sources`, without their names.

    Args:
      max_documents: stop after this many documents (None: all, read once per
        process with the default packages, see `embedded_corpus`).
      packages: as for `embedded_sources`.
    """
    if max_documents is None and tuple(packages) == PACKAGES:
        embedded_corpus()
    for count, (_, doc) in enumerate(embedded_sources(packages), start=1):
        yield doc
        if max_documents is not None and count >= max_documents:
            return


@dataclasses.dataclass(frozen=True)
class EmbeddedCorpus:
    """The whole embedded corpus and where it came from.

    Attributes:
      documents: `(name, sentences)` pairs, in order (what `embedded_sources` yields).
      summary: per source ("reference", "library", then each package's name), its
        `version` (the Python version for the first two, the package version for
        the others), and its counts before ("documents_in", "sentences_in",
        "characters_in") and after de-duplication ("documents", "sentences",
        "characters"), with the documents dropped as near-duplicates or as too
        short once their repeated sentences were removed; under "total", the sums
        and "seconds", the time the reading took.
    """

    documents: list[tuple[str, list[str]]]
    summary: dict


def read_embedded_corpus(packages: Sequence[PackageSource] = PACKAGES,
                         python: bool = True) -> EmbeddedCorpus:
    """Reads the whole embedded corpus with its per-source summary (see `EmbeddedCorpus`)."""
    start = time.perf_counter()
    dedup = Deduplicator(MIN_SENTENCES)
    documents = list(_deduplicated(packages, python, dedup))
    versions = {REFERENCE_SOURCE: platform.python_version(),
                LIBRARY_SOURCE: platform.python_version(),
                **{p.name: p.version() for p in packages}}
    summary = {source: {"version": versions.get(source), **stats.to_dict()}
               for source, stats in dedup.stats.items()}
    total = {key: sum(s[key] for s in summary.values())
             for key in next(iter(dedup.stats.values())).to_dict()} if summary else {}
    summary["total"] = {**total, "seconds": round(time.perf_counter() - start, 2)}
    return EmbeddedCorpus(documents, summary)


@functools.lru_cache(maxsize=1)
def embedded_corpus() -> EmbeddedCorpus:
    """`read_embedded_corpus()` with the default sources, read once per process.

    Do not mutate what it returns.
    """
    return read_embedded_corpus()


def summary_lines(summary: dict) -> list[str]:
    """The summary of an `EmbeddedCorpus` as aligned lines of text, one per source."""
    lines = [f"{'source':<20} {'version':<9} {'documents':>15} {'sentences':>17} "
             f"{'characters':>21}"]
    for source, s in summary.items():
        if source == "total":
            continue
        lines.append(f"{source:<20} {s['version'] or '-':<9} "
                     f"{s['documents_in']:>7} -> {s['documents']:>5} "
                     f"{s['sentences_in']:>8} -> {s['sentences']:>6} "
                     f"{s['characters_in']:>10} -> {s['characters']:>8}")
    t = summary.get("total")
    if t:
        lines.append(f"{'total':<20} {'':<9} {t['documents_in']:>7} -> {t['documents']:>5} "
                     f"{t['sentences_in']:>8} -> {t['sentences']:>6} "
                     f"{t['characters_in']:>10} -> {t['characters']:>8}  "
                     f"({t['seconds']:.1f} s)")
    return lines
