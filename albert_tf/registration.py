"""Keras finds albert-tf's classes in a `.keras` file once `albert_tf` is imported.

Keras resolves a saved class through its registry, which `register_keras_serializable`
fills when the module that defines the class runs; by module name it imports only its
own packages (keras, keras_hub: `serialization_lib._retrieve_class_or_fn` in Keras 3.15),
so `import keras` alone cannot load an albert-tf model. `import albert_tf` stays light
(no Keras, no TensorFlow: `albert-tf --help`, the Python tokenizer), so the classes are
registered when Keras is there: at once when it was imported first, else right after
its own import finishes (a one-shot import hook).
"""

from __future__ import annotations

import importlib.abc
import logging
import sys
from collections.abc import Callable

__all__ = ["register_when_keras_loads"]

logger = logging.getLogger(__name__)

KERAS = "keras"


def _register_quietly(register: Callable[[], None]) -> None:
    # Runs inside the user's `import keras`: a failure here must not break that import.
    try:
        register()
    except Exception as e:  # noqa: BLE001 - reported, the user's import goes on
        logger.warning("albert_tf could not register its Keras classes: %s", e)


class _AfterKerasImport(importlib.abc.MetaPathFinder):
    """Finds nothing itself: it hands out the real finders' spec for keras with a loader
    that registers the classes once keras's own module has run, then steps aside. (A
    spec only looked up, as TensorFlow's lazy loaders do, loads nothing: it stays.)"""

    def __init__(self, register: Callable[[], None]):
        self._register = register

    def find_spec(self, fullname, path=None, target=None):
        if fullname != KERAS:
            return None
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            if finder is self or find is None:
                continue
            spec = find(fullname, path, target)
            if spec is not None:
                break
        else:
            return None
        if spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        run_module = spec.loader.exec_module

        def exec_module(module):
            run_module(module)
            if self in sys.meta_path:
                sys.meta_path.remove(self)
            _register_quietly(self._register)

        spec.loader.exec_module = exec_module  # this spec's loader instance only
        return spec


def register_when_keras_loads(register: Callable[[], None]) -> None:
    """Calls `register` (which imports the modules whose classes Keras must find: the
    package names them, `albert_tf._register_classes`) now if Keras is imported, else
    once its import has finished."""
    if KERAS in sys.modules:
        _register_quietly(register)
    elif not any(isinstance(finder, _AfterKerasImport) for finder in sys.meta_path):
        sys.meta_path.insert(0, _AfterKerasImport(register))
