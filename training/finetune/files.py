"""Your own data: CSV, TSV or JSON-lines files of single texts or text pairs with a label.

The format follows the extension: `.csv` (comma, standard quoting), `.tsv` / `.tab`
/ `.txt` (tab, no quoting, as the GLUE and MSR paraphrase files), `.jsonl` / `.json`
(one JSON object per line). Files are UTF-8, with or without a byte-order mark
(`albert_tf.infra.textio`: other bytes are an error naming the file, line and byte offset).
Columns are named by a header row, or, in files without one, given as positions
(0 = first cell). Every row must have as many cells as the header (or as the
first row): an unquoted comma in a CSV text would otherwise shift the label.
Every problem raises `DataError` naming the file, the line and the column.

Example:
    >>> examples, labels = read_text_file("train.csv", ["review"], "sentiment")
    >>> dev, _ = read_text_file("dev.csv", ["review"], "sentiment", label_names=labels)
    >>> cola, _ = read_text_file("CoLA/train.tsv", [3], 1)   # no header: positions
"""

from __future__ import annotations

import csv
import io
import json
import os
import sys
from collections.abc import Iterator, Sequence

import numpy as np

from albert_tf.infra import textio

from .examples import DataError, TextExamples, check_label_name, label_ids, regression_target

_DELIMITERS = {".csv": ",", ".tsv": "\t", ".tab": "\t", ".txt": "\t"}
_JSON_EXTENSIONS = (".jsonl", ".json")
# Python's csv module refuses cells over 128 KiB by default; a long document is data.
_FIELD_SIZE_LIMIT = min(sys.maxsize, 2**31 - 1)

Column = str | int


def read_text_file(path: str, text_columns: Sequence[Column], label_column: Column | None = None,
                   regression: bool = False,
                   label_names: Sequence[str] | None = None) -> tuple[TextExamples, list[str] | None]:
    """Reads one file of examples.

    Args:
      path: a .csv, .tsv/.tab/.txt or .jsonl/.json file.
      text_columns: one column (single text) or two (text pair): header names, or
        positions (ints, from 0) for a file without a header row.
      label_column: the label's column (name or position); None for unlabelled data.
      regression: labels are numbers (e.g. a similarity score), not classes.
      label_names: the classes in id order (from the training file, or named by
        the user); a label is one of them, or an integer id 0..K-1 into them.
        None collects the classes from this file, sorted (numerically when every
        label is an integer).

    Returns:
      (examples, label names); label names are None for regression or unlabelled data.
    """
    if len(text_columns) not in (1, 2):
        raise DataError(f"{path}: give one or two text columns, got {list(text_columns)}")
    columns = list(text_columns) + ([label_column] if label_column is not None else [])
    if len({isinstance(c, int) for c in columns}) != 1:
        raise DataError(f"{path}: give all columns as names (a header row) or all as positions "
                        f"(no header), got {columns}")
    rows, places = [], []
    for place, row in _rows(path, columns):
        rows.append(row)
        places.append(place)
    if not rows:
        raise DataError(f"{path}: the file has no examples")
    texts = [[row[c] for row in rows] for c in text_columns]
    labels = None
    if label_column is not None:
        values = [row[label_column] for row in rows]
        if regression:
            labels = _numbers(values, places, label_column)
        else:
            _check_label_kinds(values, places)
            if label_names:
                label_names = list(label_names)
                for name in label_names:
                    check_label_name(name, f"{path}: label_names")
                values = _ids_to_names(values, label_names)
            else:
                label_names = _sorted_labels(values, places)
            labels = label_ids(values, label_names, places)
    examples = TextExamples(texts[0], texts[1] if len(texts) == 2 else None, labels, places)
    return examples, (None if regression or label_column is None else list(label_names))


def _rows(path: str, columns: list[Column]) -> Iterator[tuple[str, dict[Column, str]]]:
    """Yields ("file:line", {column: value}) for the requested columns of every row."""
    try:  # missing, a directory, a FIFO (which would block the read), a device: said which
        textio.check_regular(path)
    except textio.NotRegularFileError as e:
        raise DataError(str(e)) from None
    extension = os.path.splitext(path)[1].lower()
    if extension in _JSON_EXTENSIONS:
        if isinstance(columns[0], int):
            raise DataError(f"{path}: JSON objects name their fields; give columns by name")
        yield from _json_rows(path, columns)
    elif extension in _DELIMITERS:
        yield from _delimited_rows(path, columns, _DELIMITERS[extension])
    else:
        raise DataError(f"{path}: unknown file type {extension!r}; use .csv, .tsv, .txt or .jsonl")


def _delimited_rows(path, columns, delimiter):
    csv.field_size_limit(_FIELD_SIZE_LIMIT)
    quoting = csv.QUOTE_MINIMAL if delimiter == "," else csv.QUOTE_NONE
    text = io.StringIO(textio.read_text(path), newline="")  # not UTF-8: file, line, byte
    reader = csv.reader(text, delimiter=delimiter, quoting=quoting, strict=delimiter == ",")
    try:
        yield from _checked_rows(path, reader, columns)
    except csv.Error as e:
        raise DataError(f"{path}:{reader.line_num}: {e}") from None


def _checked_rows(path, reader, columns):
    """Rows of `reader` as {column: value}, each with exactly the header's cell count."""
    positional = isinstance(columns[0], int)
    header, expected, line = None, None, 0
    for cells in reader:
        place, line = f"{path}:{line + 1}", reader.line_num
        if not cells:  # a blank line
            continue
        if expected is None:
            expected = len(cells)
            if positional:
                _check_positions(place, columns, expected)
            else:
                header = cells
                _check_header(place, columns, header)
                continue
        if len(cells) != expected:
            first = "the header" if header else "the first row"
            raise DataError(f"{place}: {len(cells)} cells, but {first} has {expected}"
                            + (" (an unquoted comma in a text?)" if reader.dialect.delimiter == ","
                               else ""))
        index = columns if positional else [header.index(c) for c in columns]
        yield place, {c: cells[i] for c, i in zip(columns, index)}
    if expected is None:
        raise DataError(f"{path}: the file is empty"
                        + ("" if positional else " (a header row naming the columns is needed)"))


def _check_header(place, columns, header):
    repeated = sorted({c for c in header if header.count(c) > 1})
    if repeated:  # which of the two would be read is a guess: refused
        raise DataError(f"{place}: the header names column {', '.join(map(repr, repeated))} "
                        "more than once; give each column one name")
    missing = [c for c in columns if c not in header]
    if missing:
        raise DataError(f"{place}: no column {', '.join(map(repr, missing))}; "
                        f"the header has {', '.join(map(repr, header))}")


def _check_positions(place, columns, cells):
    outside = [c for c in columns if not 0 <= c < cells]
    if outside:
        raise DataError(f"{place}: no column at position {', '.join(map(str, outside))}; "
                        f"the row has {cells} cells (positions 0..{cells - 1})")


def _json_rows(path, columns):
    with io.StringIO(textio.read_text(path), newline=None) as f:
        for number, text in enumerate(f, start=1):
            if not text.strip():
                continue
            place = f"{path}:{number}"
            try:
                record = json.loads(text)
            except json.JSONDecodeError as e:
                raise DataError(f"{place}: not a JSON object ({e.msg})") from None
            if not isinstance(record, dict):
                raise DataError(f"{place}: expected a JSON object, got {type(record).__name__}")
            null = [c for c in columns if c in record and record[c] is None]
            if null:  # present but null: "no field" would send the user looking for it
                raise DataError(f"{place}: field {', '.join(map(repr, null))} is null; give "
                                "a string (or a number for a label)")
            missing = [c for c in columns if c not in record]
            if missing:
                raise DataError(f"{place}: no field {', '.join(map(repr, missing))}; "
                                f"the object has {', '.join(map(repr, record))}")
            yield place, {c: _as_text(record[c], place, c) for c in columns}


def _as_text(value, place, column) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (str, int, float)):
        return str(value)
    raise DataError(f"{place}: field {column!r} must be a string or a number, got {value!r}")


def _numbers(values, places, column) -> np.ndarray:
    out = np.empty(len(values), np.float32)
    for i, (value, place) in enumerate(zip(values, places)):
        out[i] = regression_target(value, place, "label", column)
    return out


def _is_integer(value: str) -> bool:
    try:
        int(value)
    except ValueError:
        return False
    return True


def _check_label_kinds(values, places) -> None:
    """Labels are all integers or all names: ("positive", "1") is an error naming the odd one."""
    kinds = [_is_integer(v) for v in values]
    numbers = sum(kinds)
    if 0 < numbers < len(values):
        odd = numbers * 2 < len(values)  # the minority kind: True = the numbers
        i = kinds.index(odd)
        j = kinds.index(not odd)
        raise DataError(f"{places[i]}: label {values[i]!r} is a {'number' if odd else 'name'} but "
                        f"others are {'names' if odd else 'numbers'} (e.g. {values[j]!r} at "
                        f"{places[j]}); use names or numbers, not both")


def _ids_to_names(values, label_names) -> list[str]:
    """Labels that are ids 0..K-1 (and not themselves names) -> the names they index."""
    known = set(label_names)
    out = []
    for value in values:
        if value not in known and _is_integer(value) and 0 <= int(value) < len(label_names):
            value = label_names[int(value)]
        out.append(value)
    return out


def _sorted_labels(values, places) -> list[str]:
    first = {}
    for value, place in zip(values, places):
        first.setdefault(value, place)
    for name, place in first.items():  # at its first line: a tab would break the predictions
        check_label_name(name, place)
    names = set(first)
    try:
        return sorted(names, key=int)
    except ValueError:
        return sorted(names)
