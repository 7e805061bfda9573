"""The embedded default corpus: real English prose that every Python installation ships.

Two sources, both read without importing anything that could have side effects:
  * `pydoc_data.topics`: the text of the Python language reference and library
    topics that `help()` shows (about 465k characters);
  * the docstrings of the standard library's own modules, classes and functions,
    read from the source files with `ast` (several million characters).

Documents come back as lists of sentences, the layout of the original ALBERT
pretraining input (one sentence per line, a blank line between documents). The
prose rules (`split_sentences`, what counts as prose, `MIN_SENTENCES`) live here and
are shared with the readers of user corpora in `corpus.py`.
"""

from __future__ import annotations

import ast
import os
import re
import sysconfig
from typing import Iterator

# Sentence ends: ., ! or ? followed by whitespace and an upper-case letter or quote.
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[\"'(\[A-Z])")
# Lines that are code, tables or markup rather than prose.
_NON_PROSE = re.compile(r"^\s*(>>>|\.\.\.|\$ |[-=*~^+|]{3,}|\.\. |::|[{}\[\]()<>]*$)")
_MIN_WORDS = 3
MIN_SENTENCES = 2


def split_sentences(paragraph: str) -> list[str]:
    """Splits one paragraph of prose into sentences (whitespace collapsed)."""
    text = " ".join(paragraph.split())
    return [s for s in _SENTENCE_END.split(text) if len(s.split()) >= _MIN_WORDS]


def _prose_paragraphs(text: str) -> Iterator[str]:
    """Yields the prose paragraphs of a docstring or reference topic."""
    lines: list[str] = []
    for line in text.splitlines() + [""]:
        if not line.strip() or _NON_PROSE.match(line) or line.startswith(("    ", "\t")):
            if lines:
                yield " ".join(lines)
                lines = []
            continue
        lines.append(line.strip())


def _document(text: str) -> list[str]:
    sentences: list[str] = []
    for paragraph in _prose_paragraphs(text):
        sentences.extend(split_sentences(paragraph))
    return sentences


def _module_docstrings(path: str) -> list[str]:
    try:
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), filename=path)
    except (SyntaxError, UnicodeDecodeError, OSError, ValueError):
        return []
    texts = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node, clean=True)
            if doc:
                texts.append(doc)
    return _document("\n\n".join(texts))


def _stdlib_sources() -> list[str]:
    root = sysconfig.get_paths()["stdlib"]
    skip = {"test", "idlelib", "tkinter", "turtledemo", "lib2to3", "site-packages",
            "ensurepip", "pydoc_data", "__pycache__"}
    paths = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in skip and not d.startswith("."))
        paths.extend(os.path.join(dirpath, f) for f in sorted(filenames) if f.endswith(".py"))
    return paths


REFERENCE_PREFIX = "reference/"  # a topic of the language reference (pydoc_data.topics)
LIBRARY_PREFIX = "library/"      # a standard-library source file, by its path in the stdlib


def embedded_sources() -> Iterator[tuple[str, list[str]]]:
    """Yields `(name, sentences)` per document of the embedded corpus, in a fixed order.

    The name says where the text came from: "reference/TOPIC" for a topic of the
    language reference, "library/PATH" for the docstrings of one standard-library
    file (PATH relative to the stdlib, "/"-separated, e.g. "library/email/message.py").
    Documents with fewer than two sentences are left out: they cannot form a
    sentence-order pair.
    """
    # Deferred: a dict of several hundred kB of strings, needed only for this corpus.
    from pydoc_data import topics

    for name in sorted(topics.topics):
        doc = _document(topics.topics[name])
        if len(doc) >= MIN_SENTENCES:
            yield REFERENCE_PREFIX + name, doc
    root = sysconfig.get_paths()["stdlib"]
    for path in _stdlib_sources():
        doc = _module_docstrings(path)
        if len(doc) >= MIN_SENTENCES:
            yield LIBRARY_PREFIX + os.path.relpath(path, root).replace(os.sep, "/"), doc


def embedded_documents(max_documents: int | None = None) -> Iterator[list[str]]:
    """Yields the embedded corpus as documents (lists of sentences), in a fixed order.

    The sentences of `embedded_sources`, without their names.

    Args:
      max_documents: stop after this many documents (None: all, about 480).
    """
    for count, (_, doc) in enumerate(embedded_sources(), start=1):
        yield doc
        if max_documents is not None and count >= max_documents:
            return
