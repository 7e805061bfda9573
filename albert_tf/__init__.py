"""albert-tf: ALBERT (A Lite BERT) in Keras 3.

The model package is backend-agnostic (keras.ops only); TensorFlow is imported only by
the in-graph tokenizers (`albert_tf.tokenizer.preprocessor` with its graph helpers, and
`text_inputs`, which feeds raw text to a task model's fit / predict) and by the readers
of TensorFlow's file formats, when they read one. Training and serving live in
`albert_tf.training` and `albert_tf.serving`; what every command shares (the CLI,
argument parsing, atomic writes, text I/O) in `albert_tf.infra`.

Nothing but this module and `albert_tf.infra.lifetime` is imported eagerly: the
configuration, the models (Keras), checkpoint I/O, the tokenizers and the one-call entry
points `albert_tf.create_optimizer` (the original's optimizer and schedule) and
`albert_tf.export` (a SavedModel for TF Serving) load on first use, so
`albert_tf.tokenizer.spm` needs nothing but sentencepiece. The Keras classes are
registered for `keras.saving.load_model` as soon as Keras is imported (before or after
this package: `albert_tf.registration`).
"""

import importlib

from albert_tf.infra import lifetime

# First: a pool worker follows its parent before any heavy import (albert_tf.infra.lifetime).
lifetime.follow_parent_from_environment()

from albert_tf import registration  # noqa: E402 - after the line above

__version__ = "0.1.0"

_LAZY = {
    "AlbertConfig": "albert_tf.config",
    "ConfigError": "albert_tf.config",
    "AlbertEncoder": "albert_tf.encoder",
    "AlbertPretrainer": "albert_tf.models",
    "AlbertSequenceClassifier": "albert_tf.models",
    "AlbertSequenceRegressor": "albert_tf.models",
    "AlbertTokenClassifier": "albert_tf.models",
    "AlbertSpanExtractor": "albert_tf.models",
    "AlbertMultipleChoice": "albert_tf.models",
    "AlbertMaskedLM": "albert_tf.models",
    "AlbertSpanBeamExtractor": "albert_tf.models",
    "AlbertTaskModel": "albert_tf.task_model",
    "load_checkpoint": "albert_tf.checkpoint",
    "save_checkpoint": "albert_tf.checkpoint",
    "open_checkpoint": "albert_tf.checkpoint",
    "CheckpointError": "albert_tf.checkpoint",
    "AlbertPreprocessor": "albert_tf.tokenizer.preprocessor",
    "AlbertTokenizer": "albert_tf.tokenizer.spm",
    # The jobs' entry points a user needs one call away, imported on first use (they
    # need TensorFlow; the model package itself does not import training/ or serving/).
    "create_optimizer": "albert_tf.training.runtime.optimization",
    "export": "albert_tf.serving.export",
}

__all__ = [*_LAZY]


def _register_classes() -> None:
    # Importing the task models imports the encoder, its layers and the heads, each
    # registered with Keras by its decorator. (An import only: when Keras is imported by
    # the models themselves, their module is still running.)
    importlib.import_module(_LAZY["AlbertPretrainer"])


registration.register_when_keras_loads(_register_classes)


def __getattr__(name):
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value  # later look-ups skip this hook
        return value
    raise AttributeError(f"module 'albert_tf' has no attribute {name!r}")


def __dir__():
    return sorted(list(globals()) + list(_LAZY))
