"""Hub handles parsed into names, never paths: the rules every part of a handle obeys.

A handle's parts become parts of a path inside a client's cache (huggingface_hub's
models--ORG--NAME/refs/REVISION, kagglehub's models/OWNER/MODEL/FRAMEWORK/VARIATION), so
each is checked before any client is called: no empty, `.` or `..` part, no absolute
part, no `\\`, no `/` where the form has none, no control character, ASCII names. What a
message echoes of the user's text is capped (`shown`), so a 10 KB handle is one short line.
"""

from __future__ import annotations

import os
import re
import unicodedata
from dataclasses import dataclass

from albert_tf.checkpoint.readers import CheckpointError
from albert_tf.errors import shown

__all__ = ["HfHandle", "KaggleHandle", "parse_hf", "parse_kaggle", "check_inside"]

HF_SCHEME, KAGGLE_SCHEME = "hf://", "kaggle://"
# The Hub's own limit for ORG/NAME is 96 characters; a revision (branch, tag, commit) 256.
_NAME = re.compile(r"[A-Za-z0-9_.-]{1,96}")
_REVISION_CHARS = 256
_NAME_RULE = ("ASCII letters, digits, '-', '_' and '.' (at most 96), not '.' or '..' alone")
HF_FORM = "expected hf://ORG/NAME or hf://ORG/NAME@REVISION"
KAGGLE_FORM = "expected kaggle://OWNER/MODEL/FRAMEWORK/VARIATION[/VERSION]"


@dataclass(frozen=True)
class HfHandle:
    repo_id: str            # ORG/NAME
    revision: str | None    # a branch, tag or commit; None: the default branch


@dataclass(frozen=True)
class KaggleHandle:
    name: str               # OWNER/MODEL/FRAMEWORK/VARIATION
    version: int | None     # None: the newest



def _check_name(handle: str, what: str, part: str) -> None:
    if part in (".", "..") or not _NAME.fullmatch(part):
        raise CheckpointError(f"{shown(handle)}: {what} {shown(part)!r} is not a name: "
                              f"give {_NAME_RULE}")


def _check_revision(handle: str, revision: str) -> None:
    """A revision may hold `/` (refs/pr/1) between names; nothing that walks a path."""
    segments = revision.split("/")
    bad = (len(revision) > _REVISION_CHARS or "\\" in revision
           or any(unicodedata.category(c)[0] == "C" or c.isspace() for c in revision)
           or any(s in ("", ".", "..") for s in segments))
    if bad:
        raise CheckpointError(
            f"{shown(handle)}: REVISION {shown(revision)!r} is not a revision: give a branch, "
            f"tag or commit (at most {_REVISION_CHARS} characters; no '\\', no whitespace or "
            "control character, no empty, '.' or '..' part between '/')")


def parse_hf(handle: str) -> HfHandle:
    """hf://ORG/NAME[@REVISION] -> HfHandle, every part checked; CheckpointError else."""
    rest = handle[len(HF_SCHEME):]
    repo_id, at, revision = rest.partition("@")
    parts = repo_id.split("/")
    if len(parts) != 2 or (at and not revision):
        raise CheckpointError(f"{shown(handle)}: not a Hugging Face handle: {HF_FORM}")
    for what, part in zip(("ORG", "NAME"), parts):
        _check_name(handle, what, part)
    if at:
        _check_revision(handle, revision)
    return HfHandle(repo_id, revision if at else None)


def parse_kaggle(handle: str) -> KaggleHandle:
    """kaggle://OWNER/MODEL/FRAMEWORK/VARIATION[/VERSION] -> KaggleHandle, every part
    checked; CheckpointError else."""
    parts = handle[len(KAGGLE_SCHEME):].split("/")
    version = None
    if len(parts) == 5 and re.fullmatch(r"[0-9]{1,9}", parts[-1]):
        version = int(parts.pop())
    if len(parts) != 4:
        raise CheckpointError(f"{shown(handle)}: not a Kaggle Models handle: {KAGGLE_FORM}")
    for what, part in zip(("OWNER", "MODEL", "FRAMEWORK", "VARIATION"), parts):
        _check_name(handle, what, part)
    return KaggleHandle("/".join(parts), version)


def check_inside(handle: str, path: str, cache: str, client: str) -> str:
    """`path` if it lies inside `cache` once links are resolved; CheckpointError else."""
    real, root = os.path.realpath(path), os.path.realpath(cache)
    if os.path.commonpath([real, root]) != root:
        raise CheckpointError(f"{shown(handle)}: {client} gave {shown(path)}, which is outside "
                              f"its cache {shown(cache)}; refusing to read it")
    return path
