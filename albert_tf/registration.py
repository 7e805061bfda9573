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

import importlib
import importlib.abc
import importlib.util
import logging
import sys

__all__ = ["SERIALIZABLE_MODULES", "register_when_keras_loads", "registered"]

logger = logging.getLogger(__name__)

# The modules whose import registers every serializable class: the task models import the
# encoder, its layers and the heads; the preprocessor registers itself when a model's
# config holds one (`AlbertTaskModel.from_config`), as it needs TensorFlow.
SERIALIZABLE_MODULES = ("albert_tf.models",)
KERAS = "keras"


def registered() -> bool:
    """Whether the serializable classes are registered (their modules imported)."""
    return all(name in sys.modules for name in SERIALIZABLE_MODULES)


def _register() -> None:
    for name in SERIALIZABLE_MODULES:
        importlib.import_module(name)


def _register_quietly() -> None:
    # Runs inside the user's `import keras`: a failure here must not break that import.
    try:
        _register()
    except Exception as e:  # noqa: BLE001 - reported, the user's import goes on
        logger.warning("albert_tf could not register its Keras classes: %s", e)


class _AfterKerasImport(importlib.abc.MetaPathFinder):
    """Finds nothing itself: it hands out the real finders' spec for keras with a loader
    that registers the classes once keras's own module has run, then steps aside. (A
    spec only looked up, as TensorFlow's lazy loaders do, loads nothing: it stays.)"""

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
            _register_quietly()

        spec.loader.exec_module = exec_module  # this spec's loader instance only
        return spec


def register_when_keras_loads() -> None:
    """Registers the serializable classes now if Keras is imported, else on its import."""
    if KERAS in sys.modules:
        _register_quietly()
    elif not any(isinstance(finder, _AfterKerasImport) for finder in sys.meta_path):
        sys.meta_path.insert(0, _AfterKerasImport())
