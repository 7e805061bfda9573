"""The input side of `albert-tf vocab` (both model types): the files a pattern names, and
their sentences decoded and normalized; `VocabError`, the command's one error."""

from __future__ import annotations

import glob
import gzip
import io
import logging
import os
from collections.abc import Callable, Iterator, Sequence

from tqdm import tqdm

from albert_tf.errors import UserError
from albert_tf.infra import textio
from albert_tf.tokenizer.spm import normalize_text

logger = logging.getLogger("albert_tf.training.data.vocab")


class VocabError(UserError):
    """A bad input path, an empty corpus or impossible training options."""


def expand_inputs(patterns: Sequence[str]) -> list[str]:
    """Resolves paths and globs (each sorted) to de-duplicated files; raises if one matches none."""
    if not patterns:
        raise VocabError("no input given: pass at least one text file or glob")
    files: list[str] = []
    for pattern in patterns:
        if glob.has_magic(pattern):
            matches = sorted(m for m in glob.glob(pattern) if os.path.isfile(m))
            if not matches:
                raise VocabError(f"input {pattern!r} matches no file")
        elif os.path.isdir(pattern):
            raise VocabError(f"input {pattern!r} is a directory; give files or a glob such as "
                             f"'{os.path.join(pattern, '*.txt')}'")
        elif not os.path.isfile(pattern):  # missing, a FIFO, a device: said which
            try:
                textio.check_regular(pattern)
            except textio.NotRegularFileError as e:
                raise VocabError(f"input {e}") from None
            raise VocabError(f"input file {pattern!r} cannot be examined")
        else:
            matches = [pattern]
        files.extend(m for m in matches if m not in files)
    return files


def _open_lines(path: str) -> tuple[io.BufferedReader, io.BufferedIOBase]:
    """(the file, its lines as bytes: decompressed for .gz)."""
    raw = textio.open_regular(path)
    return raw, gzip.GzipFile(fileobj=raw, mode="rb") if path.endswith(".gz") else raw


def _decoded(path: str, lines, stats: dict) -> Iterator[tuple[int, str]]:
    """(number, text) of each line that is UTF-8 (`albert_tf.infra.textio`, the one decoder);
    the others are skipped, counted in stats["skipped_lines"] and named on stderr."""
    position, skipped, first = 0, 0, None
    for number, raw in enumerate(lines, 1):
        try:
            yield number, textio.decode(raw, path, number, position)
        except textio.EncodingError as e:
            skipped, first = skipped + 1, first or e
        position += len(raw)
    if skipped:
        stats["skipped_lines"] = stats.get("skipped_lines", 0) + skipped
        logger.warning("skipped %d lines of %s that are not UTF-8 (first: line %d: %s)",
                       skipped, path, first.line, first.detail)


def read_sentences(files: Sequence[str], do_lower_case: bool = True,
                   keep_accents: bool = False, stats: dict | None = None,
                   normalize: Callable[[str], str] | None = None) -> Iterator[str]:
    """Yields the normalised non-empty lines of `files`, with a byte-progress bar.

    `normalize`: each line's normalisation; None: SentencePiece's (`normalize_text`
    with `do_lower_case` and `keep_accents`).

    `stats`, if given, receives "lines" and "characters" as reading proceeds, and
    "skipped_lines": lines that are not UTF-8 (skipped, and named on stderr per file).
    """
    stats = {} if stats is None else stats
    stats.update(lines=0, characters=0, skipped_lines=0)
    total = sum(os.path.getsize(f) for f in files)
    with tqdm(total=total, unit="B", unit_scale=True, desc="reading corpus",
              disable=None, mininterval=1.0) as bar:
        for path in files:
            raw, lines = _open_lines(path)
            with raw, lines:
                position = 0
                try:
                    for line_number, line in _decoded(path, lines, stats):
                        sentence = (normalize(line) if normalize else
                                    normalize_text(line, do_lower_case, keep_accents))
                        if sentence:
                            stats["lines"] += 1
                            stats["characters"] += len(sentence)
                            yield sentence
                        if line_number % 4096 == 0:
                            bar.update(raw.tell() - position)
                            position = raw.tell()
                except (OSError, EOFError) as err:  # e.g. a truncated or non-gzip .gz file
                    raise VocabError(f"cannot read {path}: {err}") from None
                bar.update(raw.tell() - position)
