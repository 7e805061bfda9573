"""TF Serving's model directory layout: BASE/NAME/VERSION/ with integer versions.

TF Serving watches BASE/NAME (its `--model_base_path`) and serves the numeric
subdirectories it finds there (by default the highest). A version is written into a
hidden staging directory beside them, which the server ignores because its name is
not a number, and renamed into place only when complete, so the server never sees a
half-written SavedModel.

Beside the versions, `write_batching_parameters` leaves BASE/NAME/batching_parameters.txt,
the file for `tensorflow_model_server --enable_batching --batching_parameters_file=...`
(the server ignores it as a model version: its name is not a number).
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator

from albert_tf.checkpoint import readers
from albert_tf.errors import UserError
from albert_tf.infra import atomic

logger = logging.getLogger(__name__)


BATCHING_FILE = "batching_parameters.txt"
MAX_VERSION = 2**63 - 1  # TF Serving reads a version directory's name as an int64
# The file that makes a directory a SavedModel version.
SAVED_MODEL_FILE = readers.SAVED_MODEL_FILE
# TF Serving's BatchingParameters (text protobuf). Every signature takes a batch of rows
# and pads each length group only to its own longest text, so any batch size runs
# without padding rows: no allowed_batch_sizes (padded rows, copies of a request's first
# row, would only add work). pad_variable_length_inputs stays false: the server pads
# with each tensor's FIRST value (1 in input_mask, a real option in multiple choice),
# which would turn padding into tokens; requests batched together must then agree on
# every dimension but the first (token_ids padded to seq_length, the same number of
# options).
BATCHING_PARAMETERS = """\
# albert-tf: parameters for tensorflow_model_server --enable_batching
#   --batching_parameters_file=<this file>; see docs/serving.md ("Batching").
max_batch_size { value: 32 }
# How long a request waits for others before a smaller batch runs (1 ms).
batch_timeout_micros { value: 1000 }
max_enqueued_batches { value: 64 }
# Batches run at once: the cores / --tensorflow_intra_op_parallelism.
num_batch_threads { value: 1 }
pad_variable_length_inputs: false
"""


class LayoutError(UserError):
    """A model directory or version that cannot be used."""


def existing_versions(model_dir: str) -> list[int]:
    """The numeric version subdirectories of `model_dir`, ascending ([] if it does not exist)."""
    if not os.path.isdir(model_dir):
        if os.path.exists(model_dir):
            raise LayoutError(f"{model_dir} exists and is not a directory")
        return []
    return sorted(int(name) for name in os.listdir(model_dir)
                  if name.isdigit() and os.path.isdir(os.path.join(model_dir, name)))


def next_version(model_dir: str) -> int:
    """One more than the highest existing version, or 1 for a new model directory."""
    versions = existing_versions(model_dir)
    return versions[-1] + 1 if versions else 1


def resolve_version(model_dir: str, version: int | None = None) -> tuple[int, str]:
    """(version, BASE/NAME/VERSION) for a new export; `version=None` takes the next free one.

    Raises:
      LayoutError: the version is negative or already exists (we never overwrite a
        version a server may be serving).
    """
    if version is None:
        version = next_version(model_dir)
    if isinstance(version, bool) or not isinstance(version, int) or not 0 <= version <= MAX_VERSION:
        raise LayoutError(f"--version={version!r} must be an integer from 0 to {MAX_VERSION} "
                          "(TF Serving's versions are int64)")
    path = os.path.join(model_dir, str(version))
    if os.path.exists(path):
        raise LayoutError(f"{path} already exists; pick another --version or remove it "
                          f"(next free version: {next_version(model_dir)})")
    return version, path


def remove_stale_staging(model_dir: str) -> list[str]:
    """Removes what killed exports left in BASE/NAME: the hidden staging directories of
    versions whose process is gone (`atomic.remove_stale_temporaries`); a running export's are kept.
    Returns the names removed."""
    if not os.path.isdir(model_dir):
        return []
    versions = {name[1:].split(atomic.TMP_MARK)[0] for name in os.listdir(model_dir)
                if atomic.is_temporary(name)}
    return [removed for version in sorted(versions) if version.isdigit()
            for removed in atomic.remove_stale_temporaries(os.path.join(model_dir, version))]


@contextlib.contextmanager
def staged_directory(final_path: str) -> Iterator[str]:
    """Yields an empty staging directory that becomes `final_path` when the block succeeds.

    The staging directory sits beside `final_path` (same file system, so the rename
    is atomic) under a dot-name TF Serving ignores; it is removed if the block fails.
    """
    # 0755, not mkdtemp's 0700, which would hide it from a server run as another user.
    # A failure also removes BASE/NAME when this export created it; what killed exports
    # left beside the versions goes first.
    removed = remove_stale_staging(os.path.dirname(os.path.abspath(final_path)))
    if removed:
        logger.info("removed what killed exports left: %s", ", ".join(removed))
    with atomic.staged_directory(final_path, mode=0o755) as staging:
        yield staging
    logger.info("wrote %s", final_path)


def write_batching_parameters(model_dir: str) -> str:
    """Writes BASE/NAME/batching_parameters.txt (atomically) unless it exists; returns its path.

    An existing file is the user's (edited for their server) and is left as it is.
    """
    path = os.path.join(model_dir, BATCHING_FILE)
    if os.path.exists(path):
        logger.info("kept %s as it is", path)
        return path
    with atomic.atomic_write(path) as f:
        f.write(BATCHING_PARAMETERS)
    logger.info("wrote %s (for --enable_batching --batching_parameters_file)", path)
    return path
