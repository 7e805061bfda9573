"""TF Serving's model directory layout: BASE/NAME/VERSION/ with integer versions.

TF Serving watches BASE/NAME (its `--model_base_path`) and serves the numeric
subdirectories it finds there (by default the highest). A version is written into a
hidden staging directory beside them, which the server ignores because its name is
not a number, and renamed into place only when complete, so the server never sees a
half-written SavedModel.
"""

from __future__ import annotations

import contextlib
import logging
import os
from typing import Iterator

from albert_tf import atomic
from albert_tf.errors import UserError

logger = logging.getLogger(__name__)


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
    if isinstance(version, bool) or not isinstance(version, int) or version < 0:
        raise LayoutError(f"version {version!r} must be a non-negative integer")
    path = os.path.join(model_dir, str(version))
    if os.path.exists(path):
        raise LayoutError(f"{path} already exists; pick another --version or remove it "
                          f"(next free version: {next_version(model_dir)})")
    return version, path


@contextlib.contextmanager
def staged_directory(final_path: str) -> Iterator[str]:
    """Yields an empty staging directory that becomes `final_path` when the block succeeds.

    The staging directory sits beside `final_path` (same file system, so the rename
    is atomic) under a dot-name TF Serving ignores; it is removed if the block fails.
    """
    # 0755, not mkdtemp's 0700, which would hide it from a server run as another user.
    # A failure also removes BASE/NAME when this export created it.
    with atomic.staged_directory(final_path, mode=0o755) as staging:
        yield staging
    logger.info("wrote %s", final_path)
