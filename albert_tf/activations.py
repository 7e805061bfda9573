"""Activation functions by their albert_config.json names."""

from __future__ import annotations

import functools
from typing import Callable

import keras


def _gelu_tanh(x):
    # The original ALBERT/BERT code uses the tanh approximation of GELU.
    return keras.activations.gelu(x, approximate=True)


def _gelu_erf(x):
    return keras.activations.gelu(x, approximate=False)


_ACTIVATIONS: dict[str, Callable] = {
    "gelu": _gelu_tanh,
    "gelu_new": _gelu_tanh,
    "gelu_exact": _gelu_erf,
    "relu": keras.activations.relu,
    "silu": keras.activations.silu,
    "swish": keras.activations.silu,
    "tanh": keras.activations.tanh,
    "linear": keras.activations.linear,
}


@functools.cache
def get_activation(name: str) -> Callable:
    """Returns the activation function for an `AlbertConfig.hidden_act` name."""
    try:
        return _ACTIVATIONS[name]
    except KeyError:
        raise ValueError(f"hidden_act={name!r} is not one of {', '.join(_ACTIVATIONS)}") from None
