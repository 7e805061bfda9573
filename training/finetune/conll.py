"""Tagged sentences for NER: CoNLL-2003 files as distributed, their variants, and JSONL.

CoNLL layout (any extension but .jsonl / .json): one word per line, columns
separated by tabs (when the line holds one) or spaces, the word first and the tag
last (`WORD POS CHUNK TAG` in CoNLL-2003, `WORD TAG` in many copies); blank lines
between sentences; `-DOCSTART-` lines between documents. Every word line of a file
has the column count of its first one. JSONL: one object per line,
`{"tokens": [...], "tags": [...]}`.

Tags are O or PREFIX-TYPE (`albert_tf.tagging`); the scheme (iob1, iob2, bioes) is
read from the training file unless given, and every file is checked against it.
Every problem raises `DataError` naming the file and line.

Without files, `tfds_tagged(split)` reads TensorFlow Datasets' `conll2003` (where it is
installed and prepared; TFDS downloads nothing into a user's directory unasked): its
`tokens` and `ner` features, the tag names as the dataset declares them.

Example:
    >>> train = read_tagged("eng.train")
    >>> train.sentences[0].words, train.sentences[0].tags
    (['EU', 'rejects', 'German', 'call', ...], ['I-ORG', 'O', 'I-MISC', 'O', ...])
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable

from albert_tf import tagging
from albert_tf.infra import textio

from .examples import DataError

DOCSTART = "-DOCSTART-"
_JSON_EXTENSIONS = (".jsonl", ".json")


@dataclasses.dataclass(frozen=True)
class Sentence:
    """One tagged sentence: its words, their tags, and where it starts ("file:line")."""

    words: list[str]
    tags: list[str]
    where: str


@dataclasses.dataclass(frozen=True)
class TaggedFile:
    """The sentences of one file, and each word's line ("file:line") for messages."""

    path: str
    sentences: list[Sentence]
    places: list[list[str]]

    def __len__(self) -> int:
        return len(self.sentences)


def read_tagged(path: str, is_separator: Callable[[str], bool] = str.isspace) -> TaggedFile:
    """The sentences of a CoNLL-layout or JSONL file (see the module docstring).

    Lines end at "\\n" alone (a "\\r" before it is dropped), not at the other line breaks
    `str.splitlines` knows (U+2028, \\x85, \\x1c, ...). Words end where the model's
    tokenizer ends them (`is_separator`: the tokenizer's `is_word_separator`), so a word
    of the file is a word of the served model's raw text.

    Raises:
      DataError: naming the file and line of a ragged column count, a word or tag
        that is empty, a JSONL record that is not {"tokens", "tags"} of equal
        lengths, a token holding whitespace, an empty sentence, or no sentence at all.
    """
    text = textio.read_text(path)
    reader = _read_jsonl if path.lower().endswith(_JSON_EXTENSIONS) else _read_columns
    lines = [line[:-1] if line.endswith("\r") else line for line in text.split("\n")]
    if lines and lines[-1] == "":
        lines.pop()  # the final "\n" ends the last line
    sentences, places = reader(path, lines, is_separator)
    if not sentences:
        raise DataError(f"{path}: no tagged sentences (expected {reader.__doc__})")
    for sentence, where in zip(sentences, places):
        for tag, place in zip(sentence.tags, where):
            try:
                tagging.split_tag(tag)
            except ValueError as e:
                raise DataError(f"{place}: {e}") from None
    return TaggedFile(path, sentences, places)


def _split(line: str, is_separator: Callable[[str], bool]) -> list[str]:
    """`line`'s non-empty runs of characters that are not separators."""
    cells, cell = [], []
    for char in line + " ":
        if is_separator(char):
            if cell:
                cells.append("".join(cell))
                cell = []
        else:
            cell.append(char)
    return cells


def _strip(cell: str, is_separator: Callable[[str], bool]) -> str:
    """`cell` without the separators at its ends."""
    start, end = 0, len(cell)
    while start < end and is_separator(cell[start]):
        start += 1
    while end > start and is_separator(cell[end - 1]):
        end -= 1
    return cell[start:end]


def _read_columns(path: str, lines: list[str], is_separator: Callable[[str], bool]):
    """CoNLL columns: WORD ... TAG per line, blank lines between sentences"""
    sentences, places, words, tags, where = [], [], [], [], []
    columns = None

    def close():
        if words:
            sentences.append(Sentence(list(words), list(tags), where[0]))
            places.append(list(where))
            words.clear(), tags.clear(), where.clear()

    for number, line in enumerate(lines, 1):
        place = f"{path}:{number}"
        cells = ([_strip(c, is_separator) for c in line.split("\t")] if "\t" in line
                 else _split(line, is_separator))
        if not _split(line, is_separator):
            close()
            continue
        if cells[0] == DOCSTART:  # a document boundary, not a word
            close()
            continue
        if columns is None:
            if len(cells) < 2:
                raise DataError(f"{place}: {len(cells)} column ({line.strip()!r}); a word line "
                                "is WORD ... TAG (the tag in the last column)")
            columns = len(cells)
        if len(cells) != columns:
            raise DataError(f"{place}: {len(cells)} columns ({line.strip()!r}), but the file's "
                            f"word lines have {columns} (WORD ... TAG, the first at line "
                            f"{_first_word_line(lines)})")
        if not cells[0] or not cells[-1]:
            raise DataError(f"{place}: the {'word' if not cells[0] else 'tag'} is empty")
        if any(is_separator(c) for c in cells[0]):
            raise DataError(f"{place}: word {cells[0]!r} holds whitespace (words are "
                            "whitespace-separated, as the served model splits raw text)")
        words.append(cells[0])
        tags.append(cells[-1])
        where.append(place)
    close()
    return sentences, places


def _first_word_line(lines: list[str]) -> int:
    return next(i for i, line in enumerate(lines, 1)
                if line.split() and line.split()[0] != DOCSTART)


def _read_jsonl(path: str, lines: list[str], is_separator: Callable[[str], bool]):
    """JSON lines: {"tokens": [...], "tags": [...]} per sentence"""
    sentences, places = [], []
    for number, line in enumerate(lines, 1):
        place = f"{path}:{number}"
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as e:
            raise DataError(f"{place}: not JSON ({e.msg})") from None
        if not isinstance(record, dict) or not all(
                isinstance(record.get(k), list) for k in ("tokens", "tags")):
            raise DataError(f"{place}: expected {{\"tokens\": [...], \"tags\": [...]}}")
        words, tags = record["tokens"], record["tags"]
        if len(words) != len(tags):
            raise DataError(f"{place}: {len(words)} tokens but {len(tags)} tags")
        if not words:
            raise DataError(f"{place}: an empty sentence (no tokens)")
        for i, (word, tag) in enumerate(zip(words, tags)):
            if not isinstance(word, str) or not word or any(is_separator(c) for c in word):
                raise DataError(f"{place}: token {i} {word!r} is not a word (a non-empty "
                                "string without whitespace: words are whitespace-separated)")
            if not isinstance(tag, str):
                raise DataError(f"{place}: tag {i} {tag!r} is not a string")
        sentences.append(Sentence(list(words), list(tags), place))
        places.append([place] * len(words))
    return sentences, places


def check_scheme(data: TaggedFile, scheme: str) -> None:
    """DataError naming the line of the first tag that does not belong to `scheme`
    (a prefix it lacks; in iob2 / bioes, an I- or E- that starts an entity)."""
    for sentence, where in zip(data.sentences, data.places):
        previous = None
        for tag, place in zip(sentence.tags, where):
            problem = tagging.check_tag(previous, tag, scheme)
            if problem:
                raise DataError(f"{place}: {problem}")
            previous = tag


def check_detected_bioes(data: TaggedFile) -> None:
    """DataError when `data`'s E- / S- tags made its scheme BIOES but an entity is left
    unended as IOB2 leaves them (a stray S-LOC in IOB2 data would switch the whole run):
    names the line of the first E-/S- tag and of the first unended entity."""
    first_es, open_at = None, None
    for sentence, where in zip(data.sentences, data.places):
        previous, previous_place = None, None
        for tag, place in zip([*sentence.tags, None], [*where, None]):
            if tag is not None and first_es is None and tagging.split_tag(tag)[0] in "ES":
                first_es = (place, tag)
            if open_at is None and tagging.left_open(previous, tag):
                open_at = (previous_place, previous)
            previous, previous_place = tag, place
    if first_es and open_at:
        raise DataError(f"{first_es[0]}: tag {first_es[1]!r} makes the tags BIOES, but "
                        f"{open_at[0]}: the entity of {open_at[1]!r} is not ended by an E- tag "
                        "(IOB2 leaves entities so); fix the tags, or give --set "
                        "tag_scheme=iob2 (or bioes) to say how to read them")


def check_labels(data: TaggedFile, label_names: list[str]) -> None:
    """DataError naming the line of the first tag not among `label_names`."""
    known = set(label_names)
    for sentence, where in zip(data.sentences, data.places):
        for tag, place in zip(sentence.tags, where):
            if tag not in known:
                raise DataError(f"{place}: tag {tag!r} is not one of the labels "
                                f"({', '.join(label_names)})")


TFDS_DATASET = "conll2003"
TFDS_SPLITS = ("train", "dev", "test")


def tfds_tagged(split: str, load=None) -> TaggedFile:
    """TFDS conll2003's `split` as a TaggedFile ("tfds:conll2003/SPLIT:ROW" in messages).

    `load(dataset, split)` -> NumPy records (default: `glue.load_tfds`, whose failure, e.g.
    the dataset not prepared and no network, is one DataError).
    """
    import tensorflow_datasets as tfds

    from .glue import load_tfds

    names = tfds.builder(TFDS_DATASET).info.features["ner"].feature.names
    records = (load or (lambda d, s: load_tfds(d, s, None)))(TFDS_DATASET, split)
    sentences, places = [], []
    for row, record in enumerate(records):
        words = [w.decode("utf-8") if isinstance(w, bytes) else str(w) for w in record["tokens"]]
        if not words:
            continue
        where = f"tfds:{TFDS_DATASET}/{split}:{row}"
        sentences.append(Sentence(words, [names[int(i)] for i in record["ner"]], where))
        places.append([where] * len(words))
    if not sentences:
        raise DataError(f"tfds:{TFDS_DATASET}/{split}: no tagged sentences")
    return TaggedFile(f"tfds:{TFDS_DATASET}/{split}", sentences, places)
