"""GLUE read straight from its distribution directory, as GLUE's download_glue_data.py writes it.

    glue_data/CoLA/{train,dev,test}.tsv        MNLI/train.tsv, dev_matched.tsv, dev_mismatched.tsv,
    glue_data/SST-2/{train,dev,test}.tsv            test_matched.tsv, test_mismatched.tsv
    glue_data/MRPC/{train,dev,test}.tsv        QNLI/, RTE/, WNLI/{train,dev,test}.tsv
      (or msr_paraphrase_{train,test}.txt      diagnostic/diagnostic.tsv (AX, predicted
       with dev_ids.tsv)                            with the MNLI model)
    glue_data/QQP/, STS-B/{train,dev,test}.tsv

Every file is tab-separated UTF-8 with quoting off: texts hold unbalanced quotes,
so a quote is text, never a delimiter. Each file is read by one `Layout` (below):
its cell count, whether a header row comes first, the cells holding the texts,
the label and the example index. A row with the wrong cell count is an error
naming file, line and count, except QQP's train and dev files, which contain
rows with missing fields: those are skipped, counted and reported, as the
original processors skip them. MRPC's train and dev headers begin with a
byte-order mark (copied from msr_paraphrase_train.txt); it is dropped.
"""

from __future__ import annotations

import dataclasses
import logging
import os

import numpy as np

from albert_tf.infra import textio

from .examples import DataError, TextExamples, regression_target
from .glue import GlueTask

logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class Layout:
    """How one GLUE file is laid out (positions count from 0).

    Attributes:
      cells: cells in every row.
      header: the first row names the columns.
      texts: the cells of text a (and text b).
      label: the label's cell; None in test files.
      index: the cell holding the example's index; None numbers rows from 0.
      skip_short: rows with fewer cells are skipped and counted (QQP), not an error.
    """

    cells: int
    header: bool
    texts: tuple[int, ...]
    label: int | None = None
    index: int | None = None
    skip_short: bool = False


@dataclasses.dataclass(frozen=True)
class TaskFiles:
    """Where one task lives in glue_data/ and how its files are laid out.

    Attributes:
      directory: the task's folder under glue_data/.
      train, evals, tests: file name -> layout; `evals` maps the evaluation set
        names of `glue.GlueTask.eval_splits`, `tests` the submission file stems.
      test_directories: a test file's folder when not `directory` (AX: diagnostic).
      sources: the files it is split from when train.tsv is absent (MRPC's
        msr_paraphrase_*.txt and dev_ids.tsv, as download_glue_data.py splits them).
    """

    directory: str
    train: tuple[str, Layout]
    evals: dict[str, tuple[str, Layout]]
    tests: dict[str, tuple[str, Layout]]
    test_directories: dict[str, tuple[str, ...]] = dataclasses.field(default_factory=dict)
    sources: tuple[str, ...] = ()


def _pair_task(directory, stem, labelled: Layout, test: Layout) -> TaskFiles:
    return TaskFiles(directory, ("train.tsv", labelled), {"validation": ("dev.tsv", labelled)},
                     {stem: ("test.tsv", test)})


# index<TAB>sentence1<TAB>sentence2 (QNLI: question, sentence), label last.
_INDEXED_PAIR = Layout(4, True, (1, 2), label=3, index=0)
_INDEXED_PAIR_TEST = Layout(3, True, (1, 2), index=0)
# MRPC: Quality, #1 ID, #2 ID, #1 String, #2 String (also msr_paraphrase_*.txt).
MRPC_LAYOUT = Layout(5, True, (3, 4), label=0)
# MRPC as Microsoft distributes it, split by download_glue_data.py's dev ids.
MRPC_SOURCES = ("msr_paraphrase_train.txt", "msr_paraphrase_test.txt", "dev_ids.tsv")
_MNLI_DEV = Layout(16, True, (8, 9), label=15, index=0)  # label1..label5, gold_label
_MNLI_TEST = Layout(10, True, (8, 9), index=0)
_AX = ("diagnostic.tsv", Layout(3, True, (1, 2), index=0))

GLUE_FILES: dict[str, TaskFiles] = {
    # CoLA train/dev: source, label, original label, sentence; no header.
    "cola": _pair_task("CoLA", "CoLA", Layout(4, False, (3,), label=1), Layout(2, True, (1,), index=0)),
    "sst2": _pair_task("SST-2", "SST-2", Layout(2, True, (0,), label=1), Layout(2, True, (1,), index=0)),
    "mrpc": dataclasses.replace(_pair_task("MRPC", "MRPC", MRPC_LAYOUT,
                                           Layout(5, True, (3, 4), index=0)),
                                sources=MRPC_SOURCES),
    # id, qid1, qid2, question1, question2, is_duplicate
    "qqp": _pair_task("QQP", "QQP", Layout(6, True, (3, 4), label=5, index=0, skip_short=True),
                      Layout(3, True, (1, 2), index=0)),
    # index, genre, filename, year, old_index, source1, source2, sentence1, sentence2, score
    "stsb": _pair_task("STS-B", "STS-B", Layout(10, True, (7, 8), label=9, index=0), Layout(9, True, (7, 8), index=0)),
    "mnli": TaskFiles(
        "MNLI", ("train.tsv", Layout(12, True, (8, 9), label=11, index=0)),
        {"matched": ("dev_matched.tsv", _MNLI_DEV), "mismatched": ("dev_mismatched.tsv", _MNLI_DEV)},
        {"MNLI-m": ("test_matched.tsv", _MNLI_TEST), "MNLI-mm": ("test_mismatched.tsv", _MNLI_TEST),
         "AX": _AX},
        {"AX": ("diagnostic", "AX")}),
    "qnli": _pair_task("QNLI", "QNLI", _INDEXED_PAIR, _INDEXED_PAIR_TEST),
    "rte": _pair_task("RTE", "RTE", _INDEXED_PAIR, _INDEXED_PAIR_TEST),
    "wnli": _pair_task("WNLI", "WNLI", _INDEXED_PAIR, _INDEXED_PAIR_TEST),
}


def _key(name: str) -> str:
    return name.lower().replace("-", "").replace("_", "")


def _subdirectory(root: str, names: tuple[str, ...]) -> str | None:
    """The folder of `root` called one of `names` (case, dashes and underscores ignored)."""
    wanted = {_key(n) for n in names}
    if not os.path.isdir(root):
        return None
    for entry in sorted(os.listdir(root)):
        if _key(entry) in wanted and os.path.isdir(os.path.join(root, entry)):
            return os.path.join(root, entry)
    return None


def task_directory(data: str, task: str) -> str:
    """The task's folder: `data` itself when it holds the task's files, else data/<Task>."""
    files = GLUE_FILES[task]
    if not os.path.isdir(data):
        raise DataError(f"{data}: no such directory (give glue_data/ as written by "
                        "download_glue_data.py, or its task folder)")
    firsts = (files.train[0], *files.sources[:1])
    candidates = [_subdirectory(data, (files.directory, task)), data]
    for candidate in candidates:
        if candidate and any(os.path.isfile(os.path.join(candidate, f)) for f in firsts):
            return candidate
    raise DataError(f"{data}: no GLUE {files.directory} data (expected "
                    f"{os.path.join(data, files.directory, files.train[0])} or "
                    f"{os.path.join(data, files.train[0])}, as download_glue_data.py writes them)")


def read_rows(path: str, layout: Layout) -> tuple[list[tuple[int, list[str]]], list[int]]:
    """The rows of one GLUE file as (line number, cells), and the lines skipped as short.

    Lines end at "\\n" only (a stray "\\r" inside a text stays text); cells are split
    at tabs with no quoting; empty lines are ignored.
    """
    try:  # missing, a directory, a FIFO (which would block the read), a device: said which
        textio.check_regular(path)
    except textio.NotRegularFileError as e:
        raise DataError(str(e)) from None
    rows, skipped, header_pending = [], [], layout.header
    lines = textio.read_text(path).split("\n")  # not UTF-8: file, line and byte offset
    for number, line in enumerate(lines, start=1):
        line = line.rstrip("\r")
        if not line:
            continue
        cells = line.split("\t")
        if header_pending:
            header_pending = False
            if len(cells) != layout.cells:
                raise DataError(f"{path}:{number}: the header has {len(cells)} cells; "
                                f"this GLUE file has {layout.cells}")
            continue
        if len(cells) < layout.cells and layout.skip_short:
            skipped.append(number)
            continue
        if len(cells) != layout.cells:
            raise DataError(f"{path}:{number}: {len(cells)} cells, expected {layout.cells} "
                            "(tab-separated, quoting off)")
        rows.append((number, cells))
    return rows, skipped


def read_file(path: str, layout: Layout, label_values: tuple[str, ...] | None,
              labelled: bool = True, rows=None) -> TextExamples:
    """One GLUE file as `TextExamples`.

    Args:
      path: the file.
      layout: its layout.
      label_values: the label strings in class-id order as the files write them
        (e.g. ("0", "1") or ("entailment", ...)); None for a regression score.
      labelled: read the label (False for test files, or to ignore it).
      rows: rows already read (`read_rows`); None reads `path`.

    Ids are the file's index cell, else the row number from 0 (the GLUE site's
    index for files without one).
    """
    skipped = []
    if rows is None:
        rows, skipped = read_rows(path, layout)
    if skipped:
        lines = ", ".join(map(str, skipped[:5])) + (", ..." if len(skipped) > 5 else "")
        logger.warning("%s: skipped %d rows with missing fields (lines %s)", path, len(skipped), lines)
    if not rows:
        raise DataError(f"{path}: the file has no examples")
    texts = [[cells[i] for _, cells in rows] for i in layout.texts]
    if layout.index is None:
        ids = [str(i) for i in range(len(rows))]
    else:
        ids = [cells[layout.index] for _, cells in rows]
    labels = None
    if labelled and layout.label is not None:
        labels = _labels(path, rows, layout.label, label_values)
    return TextExamples(texts[0], texts[1] if len(texts) == 2 else None, labels, ids)


def _labels(path, rows, position, label_values) -> np.ndarray:
    if label_values is None:
        values = np.empty(len(rows), np.float32)
        for i, (number, cells) in enumerate(rows):
            values[i] = regression_target(cells[position], f"{path}:{number}", "score")
        return values
    index = {value: i for i, value in enumerate(label_values)}
    ids = np.empty(len(rows), np.int64)
    for i, (number, cells) in enumerate(rows):
        if cells[position] not in index:
            raise DataError(f"{path}:{number}: unknown label {cells[position]!r}; this task's labels "
                            f"are {', '.join(map(repr, label_values))}")
        ids[i] = index[cells[position]]
    return ids


def mrpc_from_sources(directory: str, label_values) -> dict[str, TextExamples]:
    """MRPC train / validation from msr_paraphrase_train.txt split by dev_ids.tsv (as
    download_glue_data.py splits it), and test from msr_paraphrase_test.txt."""
    train_txt, test_txt, dev_ids = (os.path.join(directory, n) for n in MRPC_SOURCES)
    if not os.path.isfile(dev_ids):
        raise DataError(f"{directory}: no train.tsv, and no {MRPC_SOURCES[2]} to split "
                        f"{MRPC_SOURCES[0]} into train and dev as download_glue_data.py does")
    dev_pairs = {tuple(line.strip().split("\t"))
                 for line in textio.read_text(dev_ids).splitlines() if line.strip()}
    rows, _ = read_rows(train_txt, MRPC_LAYOUT)
    parts = {"train": [], "validation": []}
    for number, cells in rows:
        parts["validation" if (cells[1], cells[2]) in dev_pairs else "train"].append((number, cells))
    out = {}
    for name, part in parts.items():
        if not part:
            raise DataError(f"{train_txt}: no {name} rows after the split by {dev_ids}")
        out[name] = read_file(train_txt, MRPC_LAYOUT, label_values, rows=part)
    if os.path.isfile(test_txt):  # the GLUE test set; its index is the row number
        out["MRPC"] = read_file(test_txt, MRPC_LAYOUT, label_values, labelled=False)
    return out


def find_test_file(task: str, directory: str, stem: str) -> str | None:
    """The path of test set `stem`, or None when the distribution lacks it."""
    files = GLUE_FILES[task]
    name = files.tests[stem][0]
    folders = [directory]
    if stem in files.test_directories:  # AX sits in glue_data/diagnostic/
        parent = os.path.dirname(os.path.abspath(directory))
        folders = [f for f in (_subdirectory(parent, files.test_directories[stem]),
                               _subdirectory(directory, files.test_directories[stem])) if f]
    for folder in folders:
        for candidate in (name, f"{stem}.tsv"):
            if os.path.isfile(os.path.join(folder, candidate)):
                return os.path.join(folder, candidate)
    return None


def read_task(task: GlueTask, data: str, with_test: bool = True
              ) -> tuple[TextExamples, dict[str, TextExamples], dict[str, TextExamples]]:
    """Reads a task from glue_data/ (or its task folder).

    Returns:
      (train, evaluation set name -> labelled examples, submission stem -> test
      examples); a test file the directory lacks is left out with a warning.
    """
    files = GLUE_FILES[task.name]
    directory = task_directory(data, task.name)
    values = task.file_labels
    if files.sources and not os.path.isfile(os.path.join(directory, files.train[0])):
        parts = mrpc_from_sources(directory, values)
        tests = {"MRPC": parts["MRPC"]} if with_test and "MRPC" in parts else {}
        return parts["train"], {"validation": parts["validation"]}, tests
    train = read_file(os.path.join(directory, files.train[0]), files.train[1], values)
    evals = {name: read_file(os.path.join(directory, file), layout, values)
             for name, (file, layout) in files.evals.items()}
    tests = {}
    for stem, (file, layout) in (files.tests.items() if with_test else ()):
        path = find_test_file(task.name, directory, stem)
        if path is None:
            logger.warning("%s: no %s (GLUE's %s test set): %s.tsv will not be written",
                           directory, file, stem, stem)
            continue
        tests[stem] = read_file(path, layout, values, labelled=False)
    return train, evals, tests
