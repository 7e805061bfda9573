"""Activation functions by their albert_config.json names (declared in `numerics`)."""

from __future__ import annotations

import functools
from collections.abc import Callable

import keras

from albert_tf.numerics import ACTIVATIONS


def _gelu_tanh(x):
    # The original ALBERT/BERT code uses the tanh approximation of GELU.
    return keras.activations.gelu(x, approximate=True)


def _gelu_erf(x):
    return keras.activations.gelu(x, approximate=False)


# The functions `numerics.ACTIVATIONS` names.
_FUNCTIONS: dict[str, Callable] = {
    "gelu_tanh": _gelu_tanh,
    "gelu_erf": _gelu_erf,
    "relu": keras.activations.relu,
    "silu": keras.activations.silu,
    "tanh": keras.activations.tanh,
    "linear": keras.activations.linear,
}


@functools.cache
def get_activation(name: str) -> Callable:
    """Returns the activation function for an `AlbertConfig.hidden_act` name."""
    if name not in ACTIVATIONS:
        raise ValueError(f"hidden_act={name!r} is not one of {', '.join(ACTIVATIONS)}")
    return _FUNCTIONS[ACTIVATIONS[name]]
