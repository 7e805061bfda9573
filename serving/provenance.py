"""What an export is, written inside it: VERSION/assets/albert_tf_export.json.

A serving engineer holding only the SavedModel can read which task it serves (the task
record, label names included), how it tokenizes, what made it (albert-tf, TensorFlow,
tensorflow-text versions), which checkpoint and weights it came from (a SHA-256 of the
weights as loaded, so two exports of the same weights match whatever their file format),
the custom ops its graph needs and the oldest tensorflow/serving release that links them.
"""

from __future__ import annotations

import hashlib
import os
from typing import Any

import numpy as np

from albert_tf.infra import atomic

from . import server_releases

__all__ = ["PROVENANCE_FILE", "weights_sha256", "provenance", "write_provenance"]

# Under the version's assets/ (TF Serving ignores files the graph does not reference).
PROVENANCE_FILE = os.path.join("assets", "albert_tf_export.json")


def weights_sha256(model) -> str:
    """SHA-256 over the model's weights in their order: shape, dtype and float32 bytes each."""
    digest = hashlib.sha256()
    for weight in model.get_weights():
        array = np.ascontiguousarray(weight)
        digest.update(f"{array.shape}{array.dtype}".encode())
        digest.update(array.tobytes())
    return digest.hexdigest()


def provenance(record, checkpoint: str, model, custom_ops, versions: dict[str, str],
               task: str, seq_length: int, precision: str, tokenizer_kind: str,
               batching: dict[str, Any] | None = None, branches: int = 1) -> dict[str, Any]:
    """The record written beside the graph (see the module docstring); `checkpoint` is
    the source as it is to be named (an absolute path), `tokenizer_kind` the vocabulary's
    as the graph reads it, `batching` the in-graph batching's parameters (None: off),
    `branches` the branches each encoder sublayer runs as (`export --branches`)."""
    oldest = server_releases.oldest_release(custom_ops, precision)
    return {
        "task": task,
        "task_record": record.to_dict(),
        "label_names": list(record.class_names()) if record.spec.classes else None,
        "tokenizer": {"kind": tokenizer_kind, "do_lower_case": record.do_lower_case,
                      "keep_accents": record.keep_accents,
                      "tokenize_chinese_chars": record.tokenize_chinese_chars,
                      "split_characters": record.split_characters,
                      "seq_length": seq_length},
        "precision": precision,
        "batching": batching,
        "branches": branches,
        "versions": dict(versions),
        "source_checkpoint": checkpoint,
        "weights_sha256": weights_sha256(model),
        "custom_ops": sorted(custom_ops),
        "oldest_tensorflow_serving": oldest,
        # Empty when a release links them all; else what keeps every release from loading it.
        "ops_no_release_links": server_releases.unlinked_ops(custom_ops),
        "tensorflow_serving_image": server_releases.image(
            server_releases.NEWEST_RELEASE),
    }


def write_provenance(directory: str, data: dict[str, Any]) -> str:
    """Writes `data` as `directory`/assets/albert_tf_export.json (atomically); its path."""
    path = os.path.join(directory, PROVENANCE_FILE)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    atomic.atomic_write_json(path, data)
    return path
