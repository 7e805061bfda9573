"""Reading tensors out of checkpoint files: original TF1, Hugging Face, Keras .weights.h5.

The heavy readers are imported inside the function that needs them, on purpose:
TensorFlow (TF1 bundles), torch (pytorch_model.bin), safetensors and h5py are needed
only for the format at hand, and `albert_tf` imports no TensorFlow at module level.

Each reader returns a `TensorSource`: the canonical names a checkpoint holds, their
shapes, and a function that reads one tensor (lazily: a TF1 file may hold optimizer
slots, a large model need not be read twice). Where the tensors go is decided by
`albert_tf.checkpoint.names.NAME_TABLE`; here the names are only normalised:

* TF1: a TF-Hub `module/` prefix is dropped; `global_step` and the optimizer slots
  (`.../adam_m`, `.../adam_v`) are not weights and are left out.
* Hugging Face: keys of an `AlbertModel` saved on its own (no "albert." prefix) get
  the prefix; the `position_ids` buffer older files store is left out.
"""

from __future__ import annotations

import dataclasses
import glob
import os
import pickle
import re
from collections.abc import Callable

import numpy as np

from albert_tf.errors import UserError
from albert_tf.infra.textio import json_type, read_json_object, read_text


class CheckpointError(UserError):
    """A checkpoint that cannot be read or does not fit the model."""


# The files that tell the formats apart (`albert_tf.checkpoint.formats` holds the rules).
CONFIG_FILE = "albert_config.json"  # the model config of ours and of the original releases
HF_CONFIG_FILE = "config.json"
HF_SAFETENSORS = "model.safetensors"
HF_SAFETENSORS_INDEX = "model.safetensors.index.json"
HF_TORCH_FILE = "pytorch_model.bin"
HF_WEIGHT_FILES = (HF_SAFETENSORS, HF_SAFETENSORS_INDEX, HF_TORCH_FILE)
# A SavedModel's graph: TF-Hub's releases, and what `albert-tf export` writes.
SAVED_MODEL_FILE = "saved_model.pb"

_TF1_PREFIX = "module/"  # TF-Hub modules
_TF1_NOT_WEIGHTS = re.compile(r"^global_step$|/adam_[mv]$")  # step counter, optimizer slots
_HF_NOT_WEIGHTS = frozenset({"albert.embeddings.position_ids"})  # a buffer in older files
_HF_ENCODER_PARTS = ("embeddings.", "encoder.", "pooler.")  # AlbertModel saved standalone


@dataclasses.dataclass(frozen=True)
class TensorSource:
    """Named tensors of one checkpoint file: `shapes[name]` and `read(name) -> ndarray`."""

    path: str
    kind: str  # "tf1" or "hf": which column of the name table applies
    shapes: dict[str, tuple[int, ...]]
    read: Callable[[str], np.ndarray]


def weight_problem(value: np.ndarray) -> str | None:
    """What makes `value` unfit to be a weight, or None: values that are not floating
    point (an int32 tensor would be cast to weights such as 1e9), or any NaN or
    infinity (a model that answers NaN). The one check of a checkpoint's values,
    made on every tensor placed in a model and on every weight of our own format."""
    value = np.asarray(value)
    if not np.issubdtype(value.dtype, np.floating):
        return f"{value.dtype} values, not floating point"
    nan = int(np.count_nonzero(np.isnan(value)))
    infinite = int(np.count_nonzero(np.isinf(value)))
    if nan or infinite:
        counts = ", ".join(f"{n} {what}" for n, what in ((nan, "NaN"), (infinite, "infinite"))
                           if n)
        return f"{counts} of {value.size} values"
    return None


def refuse_weight_problems(problems: list[str], path: str) -> None:
    """Raises one CheckpointError, one line, naming the tensors `weight_problem` found
    fault with ("NAME (3 NaN of 96 values)"; the first 8, then how many more)."""
    if problems:
        shown = "; ".join(problems[:8]) + (f"; and {len(problems) - 8} more"
                                           if len(problems) > 8 else "")
        raise CheckpointError(f"{path}: {len(problems)} tensor(s) are not finite floating-point "
                              f"weights: {shown}")


# ---------------------------------------------------------------------------- TF1
def tf1_prefix(path: str) -> str | None:
    """The checkpoint prefix `path` names (prefix, .index file or directory), or None."""
    if os.path.isfile(path + ".index"):
        return path
    if path.endswith(".index") and os.path.isfile(path):
        return path[: -len(".index")]
    if not os.path.isdir(path):
        return None
    prefixes = sorted(p[: -len(".index")] for p in glob.glob(os.path.join(path, "*.index")))
    if len(prefixes) <= 1:
        return prefixes[0] if prefixes else None
    state = os.path.join(path, "checkpoint")  # tf.train's record of the latest checkpoint
    if os.path.lexists(state):
        try:
            text = read_text(state)  # a regular file of bounded size
        except (UserError, OSError) as e:
            raise CheckpointError(f"{state}: cannot read tf.train's record of the latest "
                                  f"checkpoint: {getattr(e, 'strerror', None) or e}") from None
        match = re.search(r'^model_checkpoint_path:\s*"(.*)"', text, re.M)
        if match:
            return os.path.join(path, os.path.basename(match.group(1)))
    steps = {p: re.search(r"-(\d+)$", p) for p in prefixes}
    if all(steps.values()):
        return max(prefixes, key=lambda p: int(steps[p].group(1)))  # the newest step
    raise CheckpointError(f"{path}: several checkpoints and no 'checkpoint' file naming one; "
                          f"pass a prefix: {', '.join(prefixes)}")


def find_model_config(directory: str) -> str:
    """The model config beside a TF1 checkpoint: albert_config.json, else the one
    albert_config*.json there, as brightmart/albert_zh names its releases' configs
    (albert_config_tiny.json, and albert_config_tiny_google.json,
    albert_config_base_google_fast.json, ... beside its `*_google` checkpoints, which are
    in google-research's layout).

    Raises:
      CheckpointError: none, or several to choose from (naming them).
    """
    named = os.path.join(directory, CONFIG_FILE)
    if os.path.lexists(named):
        return named
    found = sorted(glob.glob(os.path.join(glob.escape(directory), "albert_config*.json")))
    if len(found) == 1:
        return found[0]
    if not found:
        raise CheckpointError(f"{named}: not found, nor any albert_config_*.json beside the "
                              "checkpoint (the checkpoint's model config)")
    names = ", ".join(os.path.basename(f) for f in found)
    raise CheckpointError(f"{directory}: several model configs ({names}); keep the "
                          f"checkpoint's own as {CONFIG_FILE}")


def check_bundle_size(prefix: str, reader) -> None:
    """Refuses a TensorFlow checkpoint (tensor bundle) whose index declares more tensor
    bytes than its data files hold: a truncated or lying file, whose tensors would be
    allocated at their declared size before the read fails.

    Args:
      reader: `tf.train.load_checkpoint(prefix)`.
    """
    declared = 0
    dtypes = reader.get_variable_to_dtype_map()
    for name, shape in reader.get_variable_to_shape_map().items():
        dtype = dtypes.get(name)
        if dtype is not None and dtype.is_numpy_compatible and dtype.name != "string":
            declared += int(np.prod(shape, dtype=np.float64)) * dtype.size
    held = sum(os.path.getsize(f) for f in glob.glob(glob.escape(prefix) + ".data-*"))
    if declared > held:
        raise CheckpointError(f"{prefix}: its index declares {declared:,} bytes of tensors but "
                              f"its data files hold {held:,} (truncated, or not its data)")


def read_tf1(prefix: str) -> TensorSource:
    """An original (TF1, tensor-bundle) checkpoint. Needs TensorFlow, imported only here."""
    try:
        # Deferred: the bundle format is TensorFlow's (it reads it best), and albert_tf
        # imports no TensorFlow at module level.
        import tensorflow as tf
    except ImportError:
        raise CheckpointError(f"{prefix}: reading an original TF1 checkpoint needs TensorFlow, "
                              f"which is not installed; convert it where TensorFlow is "
                              f"(albert-tf convert) and load the result") from None

    try:
        reader = tf.train.load_checkpoint(prefix)
    except (tf.errors.OpError, ValueError) as e:
        raise CheckpointError(f"{prefix}: not a readable TF checkpoint: {e}") from None
    check_bundle_size(prefix, reader)
    shapes, stored_names = {}, {}
    for stored, shape in reader.get_variable_to_shape_map().items():
        name = stored[len(_TF1_PREFIX):] if stored.startswith(_TF1_PREFIX) else stored
        if not _TF1_NOT_WEIGHTS.search(name):
            shapes[name], stored_names[name] = tuple(shape), stored

    def read(name: str) -> np.ndarray:
        try:
            return reader.get_tensor(stored_names[name])
        except (tf.errors.OpError, IndexError, RuntimeError) as e:  # e.g. a truncated file
            raise CheckpointError(f"{prefix}: cannot read {stored_names[name]}: {e}") from None

    return TensorSource(prefix, "tf1", shapes, read)


# ---------------------------------------------------------------------- Hugging Face
def _read_safetensors(files: list[str], index: str | None = None,
                      weight_map: dict[str, str] | None = None):
    """The tensors of safetensors `files`; the `weight_map` of a sharded `index`
    (tensor -> file) must say where each is, and no tensor may be in two files."""
    # Deferred: only Hugging Face checkpoints need safetensors (its numpy API: no torch).
    from safetensors import SafetensorError, safe_open

    handles, where = {}, {}
    for file in files:
        try:
            handle = safe_open(file, framework="numpy")
            keys = list(handle.keys())
        except (SafetensorError, OSError) as e:
            raise CheckpointError(f"{file}: not a readable safetensors file: {e}") from None
        for key in keys:
            if key in where:
                raise CheckpointError(f"{file}: {key} is also in {where[key]}")
            where[key] = file
            handles[key] = handle
    if weight_map is not None:
        moved = sorted(k for k in set(where) | set(weight_map)
                       if os.path.basename(where.get(k, "")) != weight_map.get(k))
        if moved:
            raise CheckpointError(f"{index}: weight_map does not say where {len(moved)} "
                                  f"tensor(s) are: {', '.join(moved[:8])}")
    shapes = {k: tuple(h.get_slice(k).get_shape()) for k, h in handles.items()}
    return shapes, lambda key: handles[key].get_tensor(key)


def _shard_map(index: str) -> dict[str, str]:
    """A sharded checkpoint's weight_map (tensor -> shard file name), each shard a
    file beside the index (no path: a shard elsewhere is refused, not read)."""
    weight_map = read_json_object(index, CheckpointError).get("weight_map")
    if not isinstance(weight_map, dict) or not weight_map:
        shown = "absent" if weight_map is None else json_type(weight_map)
        raise CheckpointError(f"{index}: weight_map must be an object of tensor name -> shard "
                              f"file, got {shown}")
    for name, shard in weight_map.items():
        if not isinstance(shard, str) or shard in ("", ".", "..") or \
                os.path.basename(shard) != shard or "\\" in shard:
            raise CheckpointError(f"{index}: weight_map[{name!r}] = {shard!r} is not the name "
                                  "of a file beside the index")
    return weight_map


def _read_torch_bin(path: str):
    try:
        import torch  # deferred: optional, and only this file format needs it
    except ImportError:
        raise CheckpointError(f"{path}: reading pytorch_model.bin needs torch, which is not "
                              f"installed; install torch, or use a model.safetensors") from None
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except (RuntimeError, OSError, EOFError, pickle.UnpicklingError) as e:
        raise CheckpointError(f"{path}: not a readable PyTorch state dict: {e}") from None
    if not isinstance(state, dict):
        raise CheckpointError(f"{path}: holds a {type(state).__name__}, not a state dict "
                              "(tensor name -> tensor)")
    not_tensors = [str(k) for k, v in state.items()
                   if not isinstance(k, str) or not isinstance(v, torch.Tensor)]
    if not_tensors:
        raise CheckpointError(f"{path}: {len(not_tensors)} entries are not named tensors: "
                              f"{', '.join(sorted(not_tensors)[:8])}")
    # Integers stay integers: `names.place` refuses them as weights, naming them.
    arrays = {k: (v.float() if v.is_floating_point() else v).numpy() for k, v in state.items()}
    return {k: tuple(v.shape) for k, v in arrays.items()}, arrays.__getitem__


def read_hf(directory: str) -> TensorSource:
    """A Hugging Face ALBERT directory: model.safetensors (or its sharded index) or
    pytorch_model.bin."""
    single = os.path.join(directory, HF_SAFETENSORS)
    index = os.path.join(directory, HF_SAFETENSORS_INDEX)
    if os.path.isfile(single):
        path, (shapes, read) = single, _read_safetensors([single])
    elif os.path.isfile(index):
        weight_map = _shard_map(index)
        shards = [os.path.join(directory, s) for s in sorted(set(weight_map.values()))]
        path, (shapes, read) = index, _read_safetensors(shards, index, weight_map)
    else:
        path = os.path.join(directory, HF_TORCH_FILE)
        shapes, read = _read_torch_bin(path)
    if "albert.embeddings.word_embeddings.weight" not in shapes:
        stored = {("albert." + k if k.startswith(_HF_ENCODER_PARTS) else k): k for k in shapes}
        shapes = {name: shapes[key] for name, key in stored.items()}
        read = (lambda read_stored: lambda name: read_stored(stored[name]))(read)
    shapes = {k: v for k, v in shapes.items() if k not in _HF_NOT_WEIGHTS}
    return TensorSource(path, "hf", shapes, read)


# ---------------------------------------------------------------------- Keras .h5
def _h5_model_datasets(path: str) -> list:
    """(name, dataset attributes: shape, dtype, attrs) of every model dataset of a Keras
    `.weights.h5` file; optimizer state (`optimizer/...`, written by `save_weights` of a
    compiled model) is left out: like the TF1 Adam slots, it is not part of the model."""
    import h5py  # deferred: only Keras weights files need it

    found = []

    def visit(name, obj):
        if isinstance(obj, h5py.Dataset) and not name.startswith("optimizer/"):
            found.append((name, tuple(obj.shape), obj.dtype, dict(obj.attrs)))

    try:
        with h5py.File(path, "r") as f:
            f.visititems(visit)
    except OSError as e:
        raise CheckpointError(f"{path}: not a readable HDF5 weights file: {e}") from None
    return found


def h5_shapes(path: str) -> dict[str, tuple[int, ...]]:
    """Every model dataset in a Keras `.weights.h5` file: its path and shape."""
    return {name: shape for name, shape, _, _ in _h5_model_datasets(path)}


def h5_not_float(path: str) -> list[str]:
    """The model datasets of a Keras `.weights.h5` file that do not hold floating-point
    values (a bfloat16 variable, stored as marked 2-byte integers, does), as
    `weight_problem` words them."""
    return [f"{name} ({dtype} values, not floating point)"
            for name, _, dtype, attrs in _h5_model_datasets(path)
            if dtype.kind != "f" and attrs.get("dtype") not in ("bfloat16", b"bfloat16")]


def read_keras_h5(files: dict[str, str], kind: str, path: str) -> TensorSource:
    """The datasets of Keras `.weights.h5` files as one source named `path`, each name
    prefixed with its file's key (`{"backbone": "model.weights.h5", ...}` ->
    "backbone/layers/...").

    Optimizer state (`optimizer/...`) is left out, as in `h5_shapes`. Keras stores a
    bfloat16 variable as raw 2-byte values marked `dtype="bfloat16"`: it is read as
    float32 (exactly: bfloat16 is float32's upper half). Other values are read as
    float32 too; a dataset that is not floating point (a quantized int8 kernel) is
    refused, naming it.
    """
    import h5py  # deferred: only Keras weights files need it

    shapes, stored = {}, {}
    for key, file in files.items():
        def visit(name, obj, key=key, file=file):
            if isinstance(obj, h5py.Dataset) and not name.startswith("optimizer/"):
                shapes[f"{key}/{name}"] = tuple(obj.shape)
                stored[f"{key}/{name}"] = (file, name)

        try:
            with h5py.File(file, "r") as f:
                f.visititems(visit)
        except OSError as e:
            raise CheckpointError(f"{file}: not a readable HDF5 weights file: {e}") from None

    def read(name: str) -> np.ndarray:
        file, dataset = stored[name]
        try:
            with h5py.File(file, "r") as f:
                data = f[dataset]
                value, marked = data[()], data.attrs.get("dtype")
        except (OSError, KeyError) as e:
            raise CheckpointError(f"{file}: cannot read {dataset}: {e}") from None
        if marked in ("bfloat16", b"bfloat16"):
            bits = np.frombuffer(np.ascontiguousarray(value).tobytes(), np.uint16)
            return (bits.astype(np.uint32) << 16).view(np.float32).reshape(np.shape(value))
        if not np.issubdtype(np.asarray(value).dtype, np.floating):
            raise CheckpointError(f"{file}: {dataset} holds {np.asarray(value).dtype} values, "
                                  "not floating-point weights (a quantized model?)")
        return np.asarray(value, np.float32)

    return TensorSource(path, kind, shapes, read)
