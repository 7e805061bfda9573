"""What the Python API checks before a batch reaches the graph: labels per task, rows of
raw text, and boolean settings.

A task model's `fit`, `evaluate` and `predict` call these first, so a mistake is one
`UserError` naming the problem (the value, its row, the bound) instead of a deep
TensorFlow error, or a silent cast (float class ids truncated, NaN scores trained on).
In-memory labels only (lists, NumPy arrays, tensors); a `tf.data` pipeline's labels are
its own. NumPy only: no TensorFlow, no Keras.

Labels by task (B rows, T positions, C classes, K choices):
  classification: class ids [B] (or [B, 1]), integers in [0, C); multi-label: [B, C]
    of 0/1;
  regression: finite numbers [B] (or [B, 1]);
  token classification: class ids [B, T] in [0, C), or IGNORED_LABEL (-100);
  multiple choice: the right choice [B] in [0, K).
"""

from __future__ import annotations

import numpy as np

from albert_tf.errors import UserError
from albert_tf.ranges import MINIMUM, check_number
from albert_tf.tasks import IGNORED_LABEL


class LabelError(UserError):
    """Labels a task model cannot train or evaluate on."""


class InputError(UserError):
    """Raw text a task model cannot take: an empty batch, a row that is not a string."""


class SettingError(UserError):
    """A setting of the wrong type (a boolean given as "no")."""


def strict_bool(name: str, value) -> bool:
    """`value` as a boolean, refusing anything but True/False (and NumPy's bool): a
    string "no" is truthy, so `bool("no")` would turn a setting on.

    Raises SettingError naming the setting and the value.
    """
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    raise SettingError(f"{name}={value!r} must be True or False")


def label_name_list(label_names, owner: str) -> list[str] | None:
    """`label_names` as a list of strings (None stays None); SettingError for a bare
    string ("ab" would be the classes 'a' and 'b') or anything but a list of strings."""
    if label_names is None:
        return None
    if not isinstance(label_names, (list, tuple)):
        raise SettingError(f"{owner}: label_names={label_names!r:.80} must be a list of "
                           f"names such as ['neg', 'pos'], not a {type(label_names).__name__}")
    for i, name in enumerate(label_names):
        if not isinstance(name, str):
            raise SettingError(f"{owner}: label_names[{i}]={name!r:.80} is not a string")
    return list(label_names)


def check_batch_size(batch_size, owner: str) -> None:
    """None (Keras' default) or a positive integer; SettingError naming the value."""
    if batch_size is not None:
        try:
            check_number("batch_size", batch_size, int, {MINIMUM: 1})
        except UserError as e:
            raise SettingError(f"{owner}: {e}") from None


def check_text_rows(x, owner: str) -> None:
    """Refuses an empty batch of texts and a row that is not a string (a number, a
    list where a text belongs, a lone surrogate UTF-8 cannot encode), naming the row.

    `x`: texts [B] (a list or a 1-D array), or a tuple of text columns (pairs;
    (contexts, choices)); a token-id dict or a dataset passes untouched.
    """
    if isinstance(x, tuple) and x and all(isinstance(c, (list, tuple)) for c in x):
        for i, column in enumerate(x):
            _check_column(column, f"{owner}: column {i} of the text tuple", choices=True)
    elif isinstance(x, list):
        _check_column(x, f"{owner}: x", choices=False)
    elif isinstance(x, np.ndarray):
        if x.ndim != 1 or x.dtype.kind not in "OUS":
            raise InputError(f"{owner}: x is an array of shape {list(x.shape)} and dtype "
                             f"{x.dtype}; give texts [B] (one string a row), a tuple of text "
                             "columns, or a dict of token ids")
        _check_column(list(x), f"{owner}: x", choices=False)


def _check_column(column, where: str, choices: bool) -> None:
    """Each row a string; with `choices`, a row may be a list of strings (its choices)."""
    if not column:
        raise InputError(f"{where} is empty: give at least one text")
    for row, value in enumerate(column):
        if choices and isinstance(value, (list, tuple)):  # a row of choices
            _check_column(value, f"{where}, row {row},", choices=False)
        elif isinstance(value, str):
            try:
                value.encode("utf-8")
            except UnicodeEncodeError as e:
                raise InputError(f"{where}: row {row} holds {value[e.start]!r} at character "
                                 f"{e.start}, a lone surrogate, which UTF-8 cannot "
                                 "encode") from None
        elif not isinstance(value, bytes):
            shown = "None" if value is None else f"{type(value).__name__} {value!r:.80}"
            raise InputError(f"{where}: row {row} is {shown}, not a string")


def _array(y, owner: str) -> np.ndarray | None:
    """`y` as an array, or None when it is not in-memory labels (None, a dict, a dataset)."""
    if y is None or isinstance(y, dict) or hasattr(y, "element_spec"):
        return None
    try:
        array = np.asarray(y)
    except ValueError:  # rows of different lengths
        raise LabelError(f"{owner}: labels are ragged (rows of different lengths); give "
                         "one label per row, as a list or array") from None
    if array.dtype == object:
        flat = [v for v in array.reshape(-1)]
        for i, value in enumerate(flat):
            if value is None:
                raise LabelError(f"{owner}: label {i} is None")
            if isinstance(value, (str, bytes)):
                break
        else:
            raise LabelError(f"{owner}: labels are ragged or mixed; give numbers, one per row")
    if array.dtype.kind in "SUO":
        sample = next(v for v in array.reshape(-1) if isinstance(v, (str, bytes, np.str_)))
        raise LabelError(f"{owner}: labels must be numbers, not strings such as {str(sample)!r}; "
                         "map label names to class ids 0..C-1 first")
    if array.dtype.kind not in "biuf":
        raise LabelError(f"{owner}: labels must be numbers, not {array.dtype}")
    return array


def _first(mask: np.ndarray) -> tuple[str, object]:
    """(the place, "row 3" or "row 3, position 7", of the first True) for a message."""
    at = tuple(int(i) for i in np.argwhere(mask)[0])
    return ("row " + ", position ".join(map(str, at))), at


def _check_ids(array: np.ndarray, bound: int, what: str, owner: str,
               ignored: bool = False) -> None:
    """Integers in [0, bound) (or IGNORED_LABEL where `ignored`)."""
    if array.dtype.kind == "f":
        bad = ~np.isfinite(array) | (array != np.floor(array))
        if bad.any():
            place, at = _first(bad)
            raise LabelError(f"{owner}: label {array[at].item()!r} at {place} is not an integer; "
                             f"{what} are integer ids in [0, {bound - 1}] (a float id is "
                             "never rounded for you)")
    ids = array.astype(np.int64)
    valid = (ids >= 0) & (ids < bound)
    if ignored:
        valid |= ids == IGNORED_LABEL
    if not valid.all():
        place, at = _first(~valid)
        extra = f" or {IGNORED_LABEL} (ignored)" if ignored else ""
        raise LabelError(f"{owner}: label {int(ids[at])} at {place} is outside [0, {bound - 1}]"
                         f"{extra}: {what}")


def _rows(array: np.ndarray, owner: str, what: str) -> None:
    """[B] or [B, 1]; else the shape is named."""
    if array.ndim == 1 or (array.ndim == 2 and array.shape[1] == 1):
        return
    raise LabelError(f"{owner}: labels of shape {list(array.shape)} are not one {what} per "
                     f"row ([B] or [B, 1])")


def row_count(x) -> int | None:
    """The rows of in-memory inputs (texts, a tuple of columns, a dict or array of token
    ids), or None when not known without reading them (a dataset, a string)."""
    if isinstance(x, tuple) and x:
        x = x[0]
    if isinstance(x, dict) and x:
        x = next(iter(x.values()))
    if isinstance(x, list):
        return len(x)
    shape = getattr(x, "shape", None)
    return int(shape[0]) if shape is not None and len(shape) and shape[0] is not None else None


def choice_count(x) -> int | None:
    """K of (contexts, choices [B, K]) given as lists or an array, else None."""
    if isinstance(x, tuple) and len(x) == 2:
        choices = x[1]
        if isinstance(choices, (list, tuple)) and choices and isinstance(choices[0], (list, tuple)):
            return len(choices[0])
        shape = getattr(choices, "shape", None)
        if shape is not None and len(shape) == 2:
            return int(shape[1])
    return None


def check_labels(model, y, rows: int | None = None, choices: int | None = None) -> None:
    """Refuses labels `model` (a task model) cannot train on, naming the problem.

    Args:
      model: the task model (its `task`, `num_classes`, task record).
      y: the labels; None, a dict or a dataset pass unchecked.
      rows: the inputs' rows (`row_count`), when known: the labels must have as many.
      choices: K of multiple choice's inputs (`choice_count`), when known.

    Raises LabelError.
    """
    owner, kind = type(model).__name__, model.task_spec.labels
    array = _array(y, owner)
    if array is None or kind is None:
        return
    if array.ndim == 0:
        raise LabelError(f"{owner}: labels must be one per row, not the scalar {array.item()!r}")
    if rows is not None and array.shape[0] != rows:
        raise LabelError(f"{owner}: {array.shape[0]} labels for {rows} rows of inputs")
    _LABEL_CHECKS[kind](model, array, owner, choices)


def _scores(model, array, owner: str, choices) -> None:
    _rows(array, owner, "score")
    bad = ~np.isfinite(array.astype(np.float64))
    if bad.any():
        place, at = _first(bad)
        raise LabelError(f"{owner}: label {array[at].item()!r} at {place} is not a "
                         "finite number")


def _class_ids(model, array, owner: str, choices) -> None:
    count = model.num_classes
    if model.task_record.problem_type == "multi_label":
        if array.ndim != 2 or array.shape[1] != count:
            raise LabelError(f"{owner}: multi-label labels are [B, {count}] of 0/1, not "
                             f"shape {list(array.shape)}")
        bad = (array != 0) & (array != 1)
        if bad.any():
            place, at = _first(bad)
            raise LabelError(f"{owner}: label {array[at].item()!r} at {place} is not 0 or 1")
        return
    if array.ndim == 2 and array.shape[1] == count > 1:
        raise LabelError(f"{owner}: labels of shape {list(array.shape)} look one-hot; give "
                         "class ids [B] (np.argmax(y, axis=-1)), or use "
                         "problem_type='multi_label' for several labels per row")
    _rows(array, owner, "class id")
    _check_ids(array, count, f"class ids for num_classes={count}", owner)


def _token_class_ids(model, array, owner: str, choices) -> None:
    if array.ndim != 2:
        raise LabelError(f"{owner}: labels are class ids per token [B, T], not shape "
                         f"{list(array.shape)}")
    count = model.num_classes
    _check_ids(array, count, f"class ids for num_classes={count}", owner, ignored=True)


def _choice_ids(model, array, owner: str, choices) -> None:
    # K is the inputs'; unknown (token ids in a dataset): any index >= 0
    _rows(array, owner, "choice")
    bound = choices or np.iinfo(np.int32).max
    _check_ids(array, bound, "the right choice's index"
               + (f" among {choices} choices" if choices else ""), owner)


# `Task.labels` -> its check (array, owner, choices), one per kind of label array.
_LABEL_CHECKS = {"scores": _scores, "class_ids": _class_ids,
                 "token_class_ids": _token_class_ids, "choice_ids": _choice_ids}
