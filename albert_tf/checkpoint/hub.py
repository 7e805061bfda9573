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

import contextlib
import logging
import os
import re
from dataclasses import astuple

import albert_tf.checkpoint.handles as handles
from albert_tf.checkpoint.handles import HF_SCHEME, KAGGLE_SCHEME, check_inside
from albert_tf.checkpoint.kerashub import TASK_WEIGHTS
from albert_tf.checkpoint.ours import WEIGHTS_FILE
from albert_tf.checkpoint.readers import HF_TORCH_FILE, SAVED_MODEL_FILE, CheckpointError
from albert_tf.checkpoint.released import find_released, suggest
from albert_tf.errors import shown
from albert_tf.ranges import EXCLUSIVE_MINIMUM, MAXIMUM, check_number

__all__ = ["HF_SCHEME", "KAGGLE_SCHEME", "HF_FILES", "CHECKPOINT_HELP", "HUB_TIMEOUT_ENV",
           "resolve_checkpoint", "is_handle", "not_found_hint", "hub_timeout"]

logger = logging.getLogger(__name__)

# What the readers open (every format a Hub repository may hold: Hugging Face, KerasHub,
# albert-tf, TF1, Model Garden, TF-Hub) and the tokenizer files; not the TensorFlow,
# Flax or Rust copies of the weights a Hugging Face repository also carries.
HF_FILES = ("*.json", "*.safetensors", "*.model", "*.txt", WEIGHTS_FILE, TASK_WEIGHTS,
            "assets/*", "assets/*/*", "*.ckpt*", "checkpoint", SAVED_MODEL_FILE, "variables/*")
HF_TORCH_WEIGHTS = HF_TORCH_FILE
_WEIGHTS = re.compile(r"(\.safetensors|\.h5|\.index|" + re.escape(SAVED_MODEL_FILE) + ")$")
# Seconds any one connect or read of the Hugging Face Hub may wait (huggingface_hub sets
# no timeout on some calls, such as the repository's info: an endpoint that accepts and
# never answers would hang for ever).
HUB_TIMEOUT_ENV, DEFAULT_HUB_TIMEOUT = "ALBERT_TF_HUB_TIMEOUT", 60.0
_HINT = "pip install 'albert-tf[hub]'"
# What every command's help says a checkpoint argument may be.
CHECKPOINT_HELP = ("a checkpoint directory (albert-tf, Hugging Face, original TF1, KerasHub, "
                   "Model Garden TF2, TF-Hub SavedModel, brightmart/albert_zh), a hub handle (hf://ORG/NAME[@REV], "
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
    return CheckpointError(f"{shown(handle)}: reading this handle needs {module}, which is not "
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
    repo_id, revision = astuple(handles.parse_hf(handle))
    hub = _huggingface_hub(handle)
    errors, name = hub.errors, shown(handle)
    try:
        with bounded_waits(hub):
            directory = hub.snapshot_download(repo_id, revision=revision,
                                              allow_patterns=list(HF_FILES))
            if not _holds_weights(directory):
                directory = hub.snapshot_download(
                    repo_id, revision=revision, allow_patterns=list(HF_FILES) + [HF_TORCH_WEIGHTS])
    except errors.RepositoryNotFoundError:
        raise CheckpointError(f"{name}: the Hugging Face Hub has no repository {repo_id!r} "
                              "(or it is private: log in with `hf auth login`)") from None
    except errors.RevisionNotFoundError:
        raise CheckpointError(f"{name}: {repo_id} has no revision {shown(revision)!r}") from None
    except errors.LocalEntryNotFoundError as e:
        raise CheckpointError(
            f"{name}: not in the Hugging Face cache ({hub.constants.HF_HUB_CACHE}) and the "
            "Hub cannot be reached" + _why_unreachable(hub, e) +
            ": download it once with network access, or pass a local directory") from None
    except errors.HFValidationError as e:
        raise CheckpointError(f"{name}: the Hugging Face Hub refuses this name "
                              f"({shown(str(e).splitlines()[0])})") from None
    except errors.HfHubHTTPError as e:
        raise CheckpointError(f"{name}: the Hugging Face Hub answered "
                              f"{shown(str(e).splitlines()[0])}") from None
    except Exception as e:  # a timeout that reached us unwrapped; anything else is a bug
        if not _is_timeout(e):
            raise
        raise CheckpointError(f"{name}: {_timed_out(hub)} ({type(e).__name__})") from None
    return check_inside(handle, directory, hub.constants.HF_HUB_CACHE, "huggingface_hub")


def hub_timeout() -> float:
    """ALBERT_TF_HUB_TIMEOUT in seconds, in (0, 3600]; 60 when unset."""
    text = os.environ.get(HUB_TIMEOUT_ENV, "").strip()
    if not text:
        return DEFAULT_HUB_TIMEOUT
    try:
        value = float(text)
    except ValueError:
        value = text
    check_number(HUB_TIMEOUT_ENV, value, float, {EXCLUSIVE_MINIMUM: 0, MAXIMUM: 3600},
                 " (seconds a hub connect or read may wait)")
    return value


@contextlib.contextmanager
def bounded_waits(hub):
    """Every request huggingface_hub's shared client sends meanwhile waits at most
    `hub_timeout()` seconds to connect, read, write or get a connection (its own shorter
    timeouts stay). A request hook: some calls pass `timeout=None`, which overrides the
    client's default."""
    seconds = hub_timeout()

    def bound(request):
        given = request.extensions.get("timeout") or {}
        request.extensions["timeout"] = {
            key: seconds if given.get(key) is None else min(given[key], seconds)
            for key in ("connect", "read", "write", "pool")}

    hooks = hub.get_session().event_hooks["request"]
    hooks.append(bound)
    try:
        yield
    finally:
        with contextlib.suppress(ValueError):  # the client was replaced meanwhile
            hooks.remove(bound)


def _is_timeout(error: BaseException | None) -> bool:
    """Whether `error`, or what it was raised from, is a connect or read timeout."""
    while error is not None:
        if isinstance(error, TimeoutError) or any(
                c.__name__ == "TimeoutException" for c in type(error).__mro__):
            return True
        error = error.__cause__ or error.__context__
    return False


def _timed_out(hub) -> str:
    return (f"the Hugging Face Hub at {hub.constants.ENDPOINT} did not answer within "
            f"{hub_timeout():g} s ({HUB_TIMEOUT_ENV} sets the seconds)")


def _why_unreachable(hub, error: BaseException) -> str:
    if hub.constants.HF_HUB_OFFLINE:
        return " (HF_HUB_OFFLINE is set)"
    return f" ({_timed_out(hub)})" if _is_timeout(error) else ""


def _holds_weights(directory: str) -> bool:
    return any(_WEIGHTS.search(name) for _, _, names in os.walk(directory) for name in names)


def _from_kaggle(handle: str) -> str:
    name, version = astuple(handles.parse_kaggle(handle))
    kagglehub = _kagglehub(handle)
    try:
        directory = kagglehub.model_download(name if version is None else f"{name}/{version}")
    except Exception as e:  # kagglehub raises requests', its own and OS errors alike
        cached = None if version is not None else _newest_cached_kaggle(name)
        if cached is not None:
            logger.warning("%s: Kaggle cannot be reached (%s); reading the newest cached "
                           "version, %s", shown(handle), type(e).__name__, cached)
            return check_inside(handle, cached, _kaggle_cache(), "kagglehub")
        raise CheckpointError(
            f"{shown(handle)}: Kaggle Models could not give it ({type(e).__name__}: "
            f"{shown(str(e).splitlines()[0]) if str(e) else 'no detail'}) and it is not in the kagglehub "
            f"cache ({_kaggle_cache()}): download it once with network access, or pass a local "
            "directory") from None
    return check_inside(handle, directory, _kaggle_cache(), "kagglehub")


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
