"""Kept so that `albert_tf.training.input_pipeline`, the path release 0.1 documented,
still imports: the tf.data pipeline lives in `albert_tf.training.pretrain.pipeline`."""

from .pretrain.pipeline import pretraining_dataset

__all__ = ["pretraining_dataset"]
