"""A model's `.keras` file written whole or not at all, replacing only what it may.

Keras' own `Model.save("m.keras")` writes the zip archive in place: a save killed
part-way leaves a broken file under the final name instead of the good one, and
`overwrite=True` (its default) replaces any file there, whatever it holds. The
encoder and the task models save through `save` here instead: the archive is written
under a hidden temporary name (`atomic.atomic_path`) and renamed when complete, and
an existing file is replaced only when it is itself a Keras archive (a model saved
earlier) or `overwrite=True` says so. No TensorFlow here.
"""

from __future__ import annotations

import os
import stat
import zipfile
from collections.abc import Callable

from albert_tf import keras_compat
from albert_tf.errors import UserError
from albert_tf.infra import atomic

KERAS_SUFFIX = ".keras"
# What every Keras 3 archive holds (Keras' own names for its entries).
_ARCHIVE_ENTRIES = {keras_compat.ARCHIVE_METADATA_ENTRY, keras_compat.ARCHIVE_CONFIG_ENTRY}


def is_keras_archive(path: str) -> bool:
    """Whether the regular file `path` is a Keras 3 `.keras` archive."""
    try:
        if not stat.S_ISREG(os.lstat(path).st_mode):
            return False
        with zipfile.ZipFile(path) as archive:
            return _ARCHIVE_ENTRIES <= set(archive.namelist())
    except (OSError, zipfile.BadZipFile):
        return False


def check_replace(path: str, overwrite: bool | None) -> bool:
    """Whether saving to `path` may replace what is there (False: `path` is free).

    Raises:
      UserError: `path` is a directory, or exists and may not be replaced: any file
        with `overwrite=False`; a file that is not a Keras archive (or a link) unless
        `overwrite=True`.
    """
    if not os.path.lexists(path):
        return False
    if os.path.isdir(path) and not os.path.islink(path):
        raise UserError(f"cannot save the model as {path}: it is a directory")
    if overwrite is False:
        raise UserError(f"cannot save the model as {path}: it exists (overwrite=False)")
    if overwrite is None and not is_keras_archive(path):
        raise UserError(f"cannot save the model as {path}: it exists and is not a Keras "
                        "archive; not replacing it (pass overwrite=True to replace it)")
    return True


def save(keras_save: Callable, filepath, overwrite: bool | None = None, zipped=None,
         **kwargs):
    """Saves through `keras_save` (the model's `keras.Model.save`) into a temporary that
    becomes `filepath` when complete; other forms (a remote path, `zipped=False`, a
    legacy `.h5`) go to Keras unchanged, with `overwrite` as Keras reads it."""
    path = os.fspath(filepath) if isinstance(filepath, (str, os.PathLike)) else None
    if (path is None or "://" in path or zipped is False
            or not path.endswith(KERAS_SUFFIX)):
        return keras_save(filepath, overwrite=overwrite is not False, zipped=zipped, **kwargs)
    replace = check_replace(path, overwrite)
    with atomic.atomic_path(path, replace=replace, suffix=KERAS_SUFFIX) as tmp:
        keras_save(tmp, overwrite=True, zipped=zipped, **kwargs)
