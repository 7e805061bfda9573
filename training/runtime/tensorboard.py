"""TensorBoard scalars for training jobs: a writer helper and a step-interval callback.

`tf.summary.scalar` comes from the `tensorboard` package (a dependency: TensorFlow
2.21 no longer installs it), which also gives users `tensorboard --logdir`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

import keras
import tensorflow as tf


def write_scalars(writer, values: Mapping[str, float], step: int) -> None:
    """Writes `values` as TensorBoard scalars at `step` and flushes."""
    with writer.as_default():
        for name, value in values.items():
            tf.summary.scalar(name, float(value), step=step)
    writer.flush()


class ScalarLogger(keras.callbacks.Callback):
    """Logs the training logs (loss, metrics) and the learning rate every `every` steps.

    Args:
      log_dir: event files go to `log_dir/train`.
      every: steps between two points.
    """

    def __init__(self, log_dir: str, every: int = 50):
        super().__init__()
        self.every = max(1, int(every))
        self.writer = tf.summary.create_file_writer(os.path.join(log_dir, "train"))
        self.step = 0

    def on_train_batch_end(self, batch, logs=None):
        self.step += 1
        if self.step % self.every:
            return
        values = {k: v for k, v in (logs or {}).items() if _is_number(v)}
        optimizer = self.model.optimizer
        values["learning_rate"] = float(keras.ops.convert_to_numpy(optimizer.learning_rate))
        write_scalars(self.writer, values, self.step)


def _is_number(value) -> bool:
    try:
        float(value)
    except (TypeError, ValueError):
        return False
    return True
