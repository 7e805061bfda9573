"""The one door to Keras internals, and the Keras versions albert-tf supports.

Everything albert-tf takes from `keras.src` (Keras' private package) is imported
here, each with the reason no public API serves:

* `scale_loss_for_distribution` / `unscale_loss_for_distribution`
  (keras.src.losses.loss): Keras' trainer expects a custom `compute_loss` to
  return the per-replica loss divided by the replica count (what Keras' own
  losses do internally) and exports no function for that division.
  `AlbertPretrainer.compute_loss` scales; the strategy-safe train step
  in `albert_tf.training.runtime.distribute` unscales for its loss tracker.
* `H5IOStore`, `_save_state` (keras.src.saving.saving_lib, what `save_weights_only`
  runs): `Model.save_weights` writes the optimizer's variables too and has no way to
  skip them; a checkpoint holds the model only. `weights_h5_bytes` builds the
  `.weights.h5` file in memory, so that a write the disk refuses is a plain OSError of
  our own `open()`, never an HDF5 file left open (h5py flushes it at interpreter exit
  and crashes the process on a full disk).

`albert_tf.training.runtime.distribute` also overrides private `keras.Model` members
(`make_train_function`, `make_test_function`, `_maybe_symbolic_build`, and reads
`_compute_loss`, `_symbolic_build` and the instance attributes `_loss_tracker`,
`_compile_metrics`, `_call_has_training_arg`) for the upstream bugs its docstring names
(keras-team/keras#19246, #20585, tensorflow/tensorflow#72388).
`PRIVATE_MODEL_MEMBERS` lists them; a test checks they exist in the installed Keras.

Those internals change between Keras minors, so albert-tf declares the range it
was tested with (`KERAS_REQUIREMENT`, read by setup.py) and importing the models
under another Keras raises `UnsupportedKerasError` naming both versions. Set
ALBERT_TF_ALLOW_ANY_KERAS=1 to try an untested Keras anyway.
"""

from __future__ import annotations

import io
import os
import re

import keras

from albert_tf.errors import UserError

# The lowest and the newest Keras minor the test suite ran on; the upper bound
# moves when a newer minor has been tested.
KERAS_MIN = (3, 10)
KERAS_MAX_TESTED = (3, 15)
KERAS_REQUIREMENT = "keras>=3.10,<3.16"
ALLOW_ENV = "ALBERT_TF_ALLOW_ANY_KERAS"

PRIVATE_MODEL_MEMBERS = ("make_train_function", "make_test_function", "_maybe_symbolic_build",
                         "_symbolic_build", "_compute_loss")


class UnsupportedKerasError(UserError, ImportError):
    """The installed Keras is outside the range albert-tf was tested with."""


def parse_version(text: str) -> tuple[int, int]:
    """"3.15.1" -> (3, 15); ValueError for anything without major.minor."""
    match = re.match(r"(\d+)\.(\d+)", text)
    if not match:
        raise ValueError(f"cannot read a Keras version from {text!r}")
    return int(match.group(1)), int(match.group(2))


def check_keras_version(version: str | None = None) -> None:
    """Raises UnsupportedKerasError unless `version` (default: the installed) is supported."""
    version = keras.__version__ if version is None else version
    if os.environ.get(ALLOW_ENV, "") not in ("", "0"):
        return
    found = parse_version(version)
    if not KERAS_MIN <= found <= KERAS_MAX_TESTED:
        raise UnsupportedKerasError(
            f"albert-tf supports Keras {KERAS_MIN[0]}.{KERAS_MIN[1]} to "
            f"{KERAS_MAX_TESTED[0]}.{KERAS_MAX_TESTED[1]}.x ({KERAS_REQUIREMENT}) but Keras "
            f"{version} is installed; pip install '{KERAS_REQUIREMENT}' (or set {ALLOW_ENV}=1 "
            "to try it anyway)")


check_keras_version()

# Imported after the check (E402): under another Keras these paths may not exist.
from keras.src.losses.loss import scale_loss_for_distribution, unscale_loss_for_distribution  # noqa: E402
from keras.src.saving.saving_lib import _CONFIG_FILENAME as ARCHIVE_CONFIG_ENTRY  # noqa: E402
from keras.src.saving.saving_lib import _METADATA_FILENAME as ARCHIVE_METADATA_ENTRY  # noqa: E402
from keras.src.saving.saving_lib import H5IOStore, _save_state  # noqa: E402


def weights_h5_bytes(model, objects_to_skip=None) -> bytes:
    """The bytes `save_weights_only(model, path, objects_to_skip=...)` writes to a
    `.weights.h5` file, made in memory (the HDF5 file is closed before anything reaches
    the disk)."""
    if not model.built:
        raise ValueError("the model is not built: call it on data or build() it first")
    buffer = io.BytesIO()
    store = H5IOStore(buffer, mode="w")
    try:
        _save_state(model, store, None, "", {id(o) for o in objects_to_skip or ()})
    finally:
        store.close()
    return buffer.getvalue()

__all__ = ["ARCHIVE_CONFIG_ENTRY", "ARCHIVE_METADATA_ENTRY", "KERAS_REQUIREMENT",
           "UnsupportedKerasError", "check_keras_version",
           "scale_loss_for_distribution", "unscale_loss_for_distribution",
           "weights_h5_bytes", "PRIVATE_MODEL_MEMBERS"]
