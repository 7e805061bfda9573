"""Your own data: CSV, TSV or JSON-lines files of single texts or text pairs with a label.

The format follows the extension: `.csv` (comma, standard quoting), `.tsv` / `.tab`
(tab, no quoting, as the GLUE files), `.jsonl` / `.json` (one JSON object per
line). CSV and TSV files need a header row naming the columns. Every problem
raises `DataError` naming the file, the line and the column.

Example:
    >>> examples, labels = read_text_file("train.csv", ["review"], "sentiment")
    >>> dev, _ = read_text_file("dev.csv", ["review"], "sentiment", label_names=labels)
"""

from __future__ import annotations

import csv
import json
import os
from typing import Iterator, Sequence

import numpy as np

from albert_tf.training.finetune.examples import DataError, TextExamples, label_ids

_DELIMITERS = {".csv": ",", ".tsv": "\t", ".tab": "\t"}
_JSON_EXTENSIONS = (".jsonl", ".json")


def read_text_file(path: str, text_columns: Sequence[str], label_column: str | None = None,
                   regression: bool = False,
                   label_names: Sequence[str] | None = None) -> tuple[TextExamples, list[str] | None]:
    """Reads one file of examples.

    Args:
      path: a .csv, .tsv/.tab or .jsonl/.json file.
      text_columns: one column (single text) or two (text pair).
      label_column: the label's column; None for unlabelled (prediction) data.
      regression: labels are numbers (e.g. a similarity score), not classes.
      label_names: the known classes (from the training file); None collects them
        from this file, sorted (numerically when every label is an integer).

    Returns:
      (examples, label names); label names are None for regression or unlabelled data.
    """
    if len(text_columns) not in (1, 2):
        raise DataError(f"{path}: give one or two text columns, got {list(text_columns)}")
    columns = list(text_columns) + ([label_column] if label_column else [])
    rows, places = [], []
    for place, row in _rows(path, columns):
        rows.append(row)
        places.append(place)
    if not rows:
        raise DataError(f"{path}: the file has no examples")
    texts = [[row[c] for row in rows] for c in text_columns]
    labels = None
    if label_column:
        values = [row[label_column] for row in rows]
        if regression:
            labels = _numbers(values, places, label_column)
        else:
            label_names = list(label_names) if label_names else _sorted_labels(values, places)
            labels = label_ids(values, label_names, places)
    examples = TextExamples(texts[0], texts[1] if len(texts) == 2 else None, labels, places)
    return examples, (None if regression or not label_column else list(label_names))


def _rows(path: str, columns: list[str]) -> Iterator[tuple[str, dict[str, str]]]:
    """Yields ("file:line", {column: value}) for the requested columns of every row."""
    if not os.path.isfile(path):
        raise DataError(f"{path}: no such file")
    extension = os.path.splitext(path)[1].lower()
    if extension in _JSON_EXTENSIONS:
        yield from _json_rows(path, columns)
    elif extension in _DELIMITERS:
        yield from _delimited_rows(path, columns, _DELIMITERS[extension])
    else:
        raise DataError(f"{path}: unknown file type {extension!r}; use .csv, .tsv or .jsonl")


def _delimited_rows(path, columns, delimiter):
    quoting = csv.QUOTE_MINIMAL if delimiter == "," else csv.QUOTE_NONE
    with open(path, encoding="utf-8", newline="") as f:
        reader = csv.DictReader(f, delimiter=delimiter, quoting=quoting)
        header = reader.fieldnames
        if not header:
            raise DataError(f"{path}: the file is empty (a header row naming the columns is needed)")
        missing = [c for c in columns if c not in header]
        if missing:
            raise DataError(f"{path}:1: no column {', '.join(map(repr, missing))}; "
                            f"the header has {', '.join(map(repr, header))}")
        line = reader.line_num
        for row in reader:
            place, line = f"{path}:{line + 1}", reader.line_num
            for column in columns:
                if row.get(column) is None:
                    raise DataError(f"{place}: the row has no value for column {column!r}")
            yield place, {c: row[c] for c in columns}


def _json_rows(path, columns):
    with open(path, encoding="utf-8") as f:
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
            missing = [c for c in columns if c not in record or record[c] is None]
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
        try:
            out[i] = float(value)
        except ValueError:
            raise DataError(f"{place}: label {value!r} in column {column!r} is not a number") from None
    return out


def _sorted_labels(values, places) -> list[str]:
    names = set(values)
    if "" in names:
        raise DataError(f"{places[values.index('')]}: the label is empty")
    try:
        return sorted(names, key=int)
    except ValueError:
        return sorted(names)
