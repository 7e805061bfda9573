"""albert-tf: ALBERT (A Lite BERT) in Keras 3.

The model package is backend-agnostic (keras.ops only); TensorFlow is imported only
by `albert_tf.tokenizer`. Training and serving live in `albert_tf.training` and
`albert_tf.serving`.
"""

from albert_tf.config import AlbertConfig, ConfigError
from albert_tf.encoder import AlbertEncoder
from albert_tf.models import (AlbertMultipleChoice, AlbertPretrainer, AlbertSequenceClassifier,
                              AlbertSequenceRegressor, AlbertSpanExtractor, AlbertTokenClassifier)

__version__ = "0.1.0"

__all__ = [
    "AlbertConfig", "ConfigError", "AlbertEncoder", "AlbertPretrainer",
    "AlbertSequenceClassifier", "AlbertSequenceRegressor", "AlbertTokenClassifier",
    "AlbertSpanExtractor", "AlbertMultipleChoice", "load_checkpoint", "save_checkpoint",
]


def __getattr__(name):
    # Checkpoint I/O pulls in h5py and safetensors; load it on first use.
    if name in ("load_checkpoint", "save_checkpoint", "CheckpointError"):
        from albert_tf import checkpoint

        return getattr(checkpoint, name)
    raise AttributeError(f"module 'albert_tf' has no attribute {name!r}")
