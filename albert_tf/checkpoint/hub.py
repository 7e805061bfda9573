"""Checkpoints named by a hub handle or a released model's name, resolved to a directory.

`resolve_checkpoint(path)` is applied by `open_checkpoint` (so by `from_preset`,
`export --checkpoint`, `finetune --checkpoint`, `convert SRC` and
`pretrain --init-checkpoint`) before a format is detected:

  hf://ORG/NAME[@REVISION]   the Hugging Face Hub, through huggingface_hub's
                             `snapshot_download`: only the files a reader needs
                             (`HF_FILES`; pytorch_model.bin only when the repository has
                             no other weights), into its cache (HF_HOME / HF_HUB_CACHE);
                             HF_HUB_OFFLINE=1 reads the cache alone
  kaggle://OWNER/MODEL/FRAMEWORK/VARIATION[/VERSION]
                             Kaggle Models, through kagglehub's `model_download`, into its
                             cache (KAGGLEHUB_CACHE); without a version and without network,
                             the newest version in that cache
  NAME                       a released checkpoint of `released.RELEASED` (albert_base_v2,
                             albert_base_en_uncased, ...), read from its first handle,
                             unless a file or directory of that name exists

Anything else is returned unchanged. The clients are an optional extra
(`pip install 'albert-tf[hub]'`), imported only for a handle; without one, or offline
with nothing cached, the error names the handle and what to do.
"""

from __future__ import annotations

import logging
import os
import re

from albert_tf.checkpoint.kerashub import TASK_WEIGHTS
from albert_tf.checkpoint.ours import WEIGHTS_FILE
from albert_tf.checkpoint.readers import HF_TORCH_FILE, SAVED_MODEL_FILE, CheckpointError
from albert_tf.checkpoint.released import find_released, suggest

__all__ = ["HF_SCHEME", "KAGGLE_SCHEME", "HF_FILES", "CHECKPOINT_HELP", "resolve_checkpoint",
           "is_handle", "not_found_hint"]

logger = logging.getLogger(__name__)

HF_SCHEME, KAGGLE_SCHEME = "hf://", "kaggle://"
# What the readers open (every format a Hub repository may hold: Hugging Face, KerasHub,
# albert-tf, TF1, Model Garden, TF-Hub) and the tokenizer files; not the TensorFlow,
# Flax or Rust copies of the weights a Hugging Face repository also carries.
HF_FILES = ("*.json", "*.safetensors", "*.model", "*.txt", WEIGHTS_FILE, TASK_WEIGHTS,
            "assets/*", "assets/*/*", "*.ckpt*", "checkpoint", SAVED_MODEL_FILE, "variables/*")
HF_TORCH_WEIGHTS = HF_TORCH_FILE
_WEIGHTS = re.compile(r"(\.safetensors|\.h5|\.index|" + re.escape(SAVED_MODEL_FILE) + ")$")
_HF_HANDLE = re.compile(r"^hf://([\w.-]+/[\w.-]+)(?:@([\w./-]+))?$")
_KAGGLE_HANDLE = re.compile(r"^kaggle://([\w.-]+/[\w.-]+/[\w.-]+/[\w.-]+)(?:/(\d+))?$")
_HINT = "pip install 'albert-tf[hub]'"
# What every command's help says a checkpoint argument may be.
CHECKPOINT_HELP = ("a checkpoint directory (albert-tf, Hugging Face, original TF1, KerasHub, "
                   "Model Garden TF2, TF-Hub SavedModel), a hub handle (hf://ORG/NAME[@REV], "
                   "kaggle://OWNER/MODEL/FRAMEWORK/VARIATION[/VERSION]) or a released name "
                   "(albert-tf presets)")


def is_handle(path: str) -> bool:
    return path.startswith((HF_SCHEME, KAGGLE_SCHEME))


def resolve_checkpoint(path: str | os.PathLike) -> str:
    """The local path `path` names: a handle's downloaded (or cached) directory, a
    released name's, or `path` itself.

    Raises:
      CheckpointError: a malformed handle, a missing client, a repository the hub does
        not have, or offline with nothing cached (naming the handle and the cache).
    """
    path = os.fspath(path)
    if path.startswith(HF_SCHEME):
        return _from_hugging_face(path)
    if path.startswith(KAGGLE_SCHEME):
        return _from_kaggle(path)
    if os.path.lexists(path) or os.path.lexists(path + ".index"):
        return path
    entry = find_released(path)
    if entry is not None:
        logger.info("%s: the released checkpoint %s, read from %s", path, entry.name,
                    entry.handle)
        return resolve_checkpoint(entry.handle)
    return path


def not_found_hint(path: str) -> str:
    """What to add to "no such file or directory" for `path`: the released names it may
    have meant."""
    close = suggest(os.path.basename(os.path.normpath(path)))
    if close:
        return f" (did you mean {' or '.join(close)}? `albert-tf presets` lists the released names)"
    return ""


def _missing_client(module: str, handle: str) -> CheckpointError:
    return CheckpointError(f"{handle}: reading this handle needs {module}, which is not "
                           f"installed: {_HINT}")


# The hub clients are optional extras, imported only when a handle needs one.
def _huggingface_hub(handle: str):
    try:
        import huggingface_hub
        import huggingface_hub.errors
    except ImportError:
        raise _missing_client("huggingface_hub", handle) from None
    return huggingface_hub


def _kagglehub(handle: str):
    try:
        import kagglehub
        import kagglehub.config
    except ImportError:
        raise _missing_client("kagglehub", handle) from None
    return kagglehub


def _from_hugging_face(handle: str) -> str:
    match = _HF_HANDLE.match(handle)
    if not match:
        raise CheckpointError(f"{handle}: not a Hugging Face handle: expected "
                              "hf://ORG/NAME or hf://ORG/NAME@REVISION")
    repo_id, revision = match.groups()
    hub = _huggingface_hub(handle)
    errors = hub.errors
    try:
        directory = hub.snapshot_download(repo_id, revision=revision, allow_patterns=list(HF_FILES))
        if not _holds_weights(directory):
            directory = hub.snapshot_download(repo_id, revision=revision,
                                              allow_patterns=list(HF_FILES) + [HF_TORCH_WEIGHTS])
    except errors.RepositoryNotFoundError:
        raise CheckpointError(f"{handle}: the Hugging Face Hub has no repository {repo_id!r} "
                              "(or it is private: log in with `hf auth login`)") from None
    except errors.RevisionNotFoundError:
        raise CheckpointError(f"{handle}: {repo_id} has no revision {revision!r}") from None
    except errors.LocalEntryNotFoundError:
        raise CheckpointError(
            f"{handle}: not in the Hugging Face cache ({hub.constants.HF_HUB_CACHE}) and the "
            "Hub cannot be reached" + (" (HF_HUB_OFFLINE is set)" if hub.constants.HF_HUB_OFFLINE
                                       else "") +
            ": download it once with network access, or pass a local directory") from None
    except errors.HfHubHTTPError as e:
        raise CheckpointError(f"{handle}: the Hugging Face Hub answered {e}") from None
    return directory


def _holds_weights(directory: str) -> bool:
    return any(_WEIGHTS.search(name) for _, _, names in os.walk(directory) for name in names)


def _from_kaggle(handle: str) -> str:
    match = _KAGGLE_HANDLE.match(handle)
    if not match:
        raise CheckpointError(f"{handle}: not a Kaggle Models handle: expected "
                              "kaggle://OWNER/MODEL/FRAMEWORK/VARIATION[/VERSION]")
    name, version = match.groups()
    kagglehub = _kagglehub(handle)
    try:
        return kagglehub.model_download(name if version is None else f"{name}/{version}")
    except Exception as e:  # kagglehub raises requests', its own and OS errors alike
        cached = None if version is not None else _newest_cached_kaggle(name)
        if cached is not None:
            logger.warning("%s: Kaggle cannot be reached (%s); reading the newest cached "
                           "version, %s", handle, type(e).__name__, cached)
            return cached
        raise CheckpointError(
            f"{handle}: Kaggle Models could not give it ({type(e).__name__}: "
            f"{str(e).splitlines()[0] if str(e) else 'no detail'}) and it is not in the kagglehub "
            f"cache ({_kaggle_cache()}): download it once with network access, or pass a local "
            "directory") from None


def _kaggle_cache() -> str:
    import kagglehub.config  # imported by _kagglehub before any download

    return kagglehub.config.get_cache_folder()


def _newest_cached_kaggle(name: str) -> str | None:
    """The newest complete version of model `name` in kagglehub's cache (its layout:
    models/OWNER/MODEL/FRAMEWORK/VARIATION/VERSION, marked by VERSION.complete)."""
    folder = os.path.join(_kaggle_cache(), "models", *name.split("/"))
    if not os.path.isdir(folder):
        return None
    versions = sorted((int(n[:-len(".complete")]) for n in os.listdir(folder)
                       if re.fullmatch(r"\d+\.complete", n)), reverse=True)
    for version in versions:
        directory = os.path.join(folder, str(version))
        if os.path.isdir(directory):
            return directory
    return None
