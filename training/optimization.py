"""Kept so that `albert_tf.training.optimization`, the path release 0.1 documented,
still imports: the optimizers live in `albert_tf.training.runtime.optimization`."""

from .runtime.optimization import AdamW, Lamb, WarmupPolynomialDecay, create_optimizer

__all__ = ["AdamW", "Lamb", "WarmupPolynomialDecay", "create_optimizer"]
