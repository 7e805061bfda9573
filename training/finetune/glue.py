"""GLUE: task specs, the original defaults, tensorflow-datasets loading, submission files.

The GLUE distribution directory (glue_data/ from download_glue_data.py) is read by
`glue_files`; without it the data come from tensorflow-datasets (`load_split`).
Each `GlueTask` names its TFDS config (`glue/<name>`), text features, classes,
official metrics, evaluation and test splits, and the fine-tuning defaults of the
original `run_glue.sh` (google-research/albert): warmup steps, learning rate,
training steps and batch size, with AdamW. The GLUE site's submission format is
one `<Task>.tsv` per test split with an `index<TAB>prediction` header.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from .examples import DataError, TextExamples, write_tsv


@dataclasses.dataclass(frozen=True)
class GlueTask:
    """One GLUE task as tensorflow-datasets serves it.

    Attributes:
      name: the TFDS config ("cola", "mnli", ...).
      text_features: one or two TFDS text features.
      label_names: the classes in TFDS order (their ids); None for regression (STS-B).
      metrics: the official metrics; `main_metric` picks the best checkpoint.
      eval_splits: evaluation name -> TFDS split (MNLI has matched and mismatched).
      test_splits: submission file stem -> (TFDS dataset, split).
      numeric_submission: the GLUE site wants class ids (0/1), not names.
      warmup_steps, learning_rate, train_steps, batch_size: run_glue.sh defaults.
    """

    name: str
    text_features: tuple[str, ...]
    label_names: tuple[str, ...] | None
    metrics: tuple[str, ...]
    main_metric: str
    eval_splits: dict[str, str]
    test_splits: dict[str, tuple[str, str]]
    numeric_submission: bool
    warmup_steps: int
    learning_rate: float
    train_steps: int
    batch_size: int

    @property
    def regression(self) -> bool:
        return self.label_names is None

    @property
    def file_labels(self) -> tuple[str, ...] | None:
        """The labels as GLUE's files and submission site write them, in class-id order:
        "0", "1" (CoLA, SST-2, MRPC, QQP, WNLI) or the class names (MNLI, QNLI, RTE)."""
        if self.regression:
            return None
        if self.numeric_submission:
            return tuple(str(i) for i in range(len(self.label_names)))
        return self.label_names


def _task(name, features, labels, metrics, file_stem, numeric, defaults, main=None, evals=None,
          tests=None):
    warmup, lr, steps, batch = defaults
    return GlueTask(name, features, labels, metrics, main or metrics[0],
                    evals or {"validation": "validation"},
                    tests or {file_stem: (f"glue/{name}", "test")}, numeric, warmup, lr, steps, batch)


_NLI = ("entailment", "not_entailment")
# (warmup_steps, learning_rate, train_steps, batch_size) from run_glue.sh. WNLI is
# not in run_glue.sh; it gets RTE's values (both are small entailment sets).
GLUE_TASKS: dict[str, GlueTask] = {t.name: t for t in (
    _task("cola", ("sentence",), ("unacceptable", "acceptable"), ("matthews_corrcoef", "accuracy"),
          "CoLA", True, (320, 1e-5, 5336, 16)),
    _task("sst2", ("sentence",), ("negative", "positive"), ("accuracy",),
          "SST-2", True, (1256, 1e-5, 20935, 32)),
    _task("mrpc", ("sentence1", "sentence2"), ("not_equivalent", "equivalent"), ("accuracy", "f1"),
          "MRPC", True, (200, 2e-5, 800, 32)),
    _task("qqp", ("question1", "question2"), ("not_duplicate", "duplicate"), ("accuracy", "f1"),
          "QQP", True, (1000, 5e-5, 14000, 128)),
    _task("stsb", ("sentence1", "sentence2"), None, ("pearson", "spearman"),
          "STS-B", False, (214, 2e-5, 3598, 16)),
    _task("mnli", ("premise", "hypothesis"), ("entailment", "neutral", "contradiction"),
          ("accuracy",), "", False, (1000, 3e-5, 10000, 128), main="accuracy_matched",
          evals={"matched": "validation_matched", "mismatched": "validation_mismatched"},
          tests={"MNLI-m": ("glue/mnli", "test_matched"), "MNLI-mm": ("glue/mnli", "test_mismatched"),
                 "AX": ("glue/ax", "test")}),
    _task("qnli", ("question", "sentence"), _NLI, ("accuracy",), "QNLI", False,
          (1986, 1e-5, 33112, 32)),
    _task("rte", ("sentence1", "sentence2"), _NLI, ("accuracy",), "RTE", False,
          (200, 3e-5, 800, 32)),
    _task("wnli", ("sentence1", "sentence2"), ("not_entailment", "entailment"), ("accuracy",),
          "WNLI", True, (200, 3e-5, 800, 32)),
)}


# The submission files a GLUE run may write (`write_submission`), over every task.
SUBMISSION_FILES = tuple(f"{stem}.tsv" for task in GLUE_TASKS.values() for stem in task.test_splits)


def get_task(name: str) -> GlueTask:
    """The task for "cola", "glue/cola", "SST-2", "sts-b", ... (case and dashes ignored)."""
    key = name.lower().removeprefix("glue/").replace("-", "")
    if key not in GLUE_TASKS:
        raise DataError(f"unknown GLUE task {name!r}; the tasks are "
                        f"{', '.join('glue/' + t for t in GLUE_TASKS)}")
    return GLUE_TASKS[key]


def load_split(task: GlueTask, split: str, data_dir: str | None = None,
               dataset: str | None = None, labelled: bool = True) -> TextExamples:
    """Reads one TFDS split of a GLUE task (downloaded and prepared on first use).

    Args:
      task: the task spec.
      split: a TFDS split, e.g. "train", "validation_matched", "test".
      data_dir: TFDS data directory (None: TFDS's default, or $TFDS_DATA_DIR).
      dataset: TFDS name when not `glue/<task>`: the MNLI diagnostic `glue/ax`,
        whose features are named as MNLI's.
      labelled: keep the labels (GLUE test splits have none: label -1).
    """
    dataset = dataset or f"glue/{task.name}"
    records = load_tfds(dataset, split, data_dir)
    texts = {f: [] for f in task.text_features}
    labels, ids = [], []
    for record in records:
        for feature in task.text_features:
            texts[feature].append(record[feature].decode("utf-8"))
        labels.append(record["label"])
        ids.append(str(int(record["idx"])))
    if not ids:
        raise DataError(f"{dataset} split {split!r} has no examples")
    columns = [texts[f] for f in task.text_features]
    label_array = None
    if labelled:
        label_array = np.asarray(labels, np.float32 if task.regression else np.int64)
        if not task.regression and (label_array.min() < 0 or label_array.max() >= len(task.label_names)):
            raise DataError(f"{dataset} split {split!r} has labels outside 0..{len(task.label_names) - 1}")
    return TextExamples(columns[0], columns[1] if len(columns) == 2 else None, label_array, ids)


def load_tfds(dataset: str, split: str, data_dir: str | None):
    """`tfds.load` as NumPy records; a failure (no download, unknown split) becomes DataError."""
    import tensorflow_datasets as tfds

    try:
        return tfds.as_numpy(tfds.load(dataset, split=split, data_dir=data_dir, shuffle_files=False))
    except Exception as e:  # tfds raises many kinds; the user needs one clear line
        first = str(e).splitlines()[0] if str(e) else ""
        # requests' ConnectionError is an OSError: no network to download the data.
        cause = ("it needs the network to download the data" if isinstance(e, OSError)
                 else "cannot load it")
        raise DataError(f"{dataset} split {split!r} from tensorflow-datasets: {cause} "
                        f"({type(e).__name__}: {first}); or give --data glue_data/ as "
                        "download_glue_data.py writes it") from e


def submission_values(task: GlueTask, outputs: np.ndarray) -> list[str]:
    """The GLUE site's prediction strings: class id, class name, or a 0..5 score (STS-B)."""
    if task.regression:
        return [f"{v:.3f}" for v in np.clip(np.asarray(outputs, np.float64), 0.0, 5.0)]
    return [task.file_labels[i] for i in np.asarray(outputs).astype(np.int64)]


def write_submission(path: str, ids: list[str], predictions: list[str]) -> None:
    """Writes `index<TAB>prediction` rows (with that header) atomically."""
    if len(ids) != len(predictions):
        raise ValueError(f"{len(ids)} ids but {len(predictions)} predictions")
    write_tsv(path, ("index", "prediction"), zip(ids, predictions))
