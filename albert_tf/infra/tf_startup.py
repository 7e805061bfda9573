"""TensorFlow's start-up lines, kept from command-line users (shown with `--debug`).

Importing TensorFlow 2.21 prints, from C++ static initializers and before any log
level is read, "WARNING: All log messages before absl::InitializeLog() ...", the oneDNN
notice (port.cc) and the CUDA probe (cudart_stub.cc) -- twice, because two of its
libraries (libtensorflow_framework.so.2 and the profiler's _pywrap_profiler_plugin.so)
each carry a copy of that logging code. TF_CPP_MIN_LOG_LEVEL silences what is logged
later (cpu_feature_guard's line) but not these. `quiet_tensorflow_import` therefore
holds back what the first `import tensorflow` writes to the stderr file descriptor and
passes on every line but absl's INFO and WARNING ones: errors still show.

No TensorFlow here: the hook runs only when something imports it.
"""

from __future__ import annotations

import contextlib
import importlib.abc
import importlib.util
import os
import re
import sys
import tempfile
from collections.abc import Iterator

# absl's prefix (severity, MMDD, time, thread id, file:line]), its preamble line, and
# the second line of cpu_feature_guard's notice (TF_CPP_MIN_LOG_LEVEL=0).
_NOISE = re.compile(rb"^([IW]\d{4} [\d:.]+\s+\d+ [\w.]+:\d+\] "
                    rb"|WARNING: All log messages before absl::InitializeLog\(\)"
                    rb"|To enable the following instructions: )")


def is_noise(line: bytes) -> bool:
    """Whether `line` (one stderr line, bytes) is one of TensorFlow's start-up notices."""
    return bool(_NOISE.match(line))


@contextlib.contextmanager
def _filtered_stderr() -> Iterator[None]:
    """Holds back what is written to file descriptor 2 inside the block; then writes it
    out again without the start-up notices (also when the block raises)."""
    sys.stderr.flush()
    with tempfile.TemporaryFile() as held:
        saved = os.dup(2)
        os.dup2(held.fileno(), 2)
        try:
            yield
        finally:
            with contextlib.suppress(Exception):
                sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            held.seek(0)
            kept = b"".join(line for line in held if not is_noise(line))
            if kept:
                os.write(2, kept)


class _QuietLoader(importlib.abc.Loader):
    """Runs TensorFlow's own loader with its start-up notices held back."""

    def __init__(self, loader):
        self._loader = loader

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        with _filtered_stderr():
            self._loader.exec_module(module)

    def __getattr__(self, name):  # the rest of the loader's interface (resource readers)
        return getattr(self._loader, name)


class _QuietTensorFlowFinder(importlib.abc.MetaPathFinder):
    """Finds `tensorflow` once, as the other finders would, and gives it `_QuietLoader`."""

    def find_spec(self, name, path=None, target=None):
        if name != "tensorflow":
            return None
        sys.meta_path.remove(self)  # once: the spec below comes from the usual finders
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.loader is not None:
            spec.loader = _QuietLoader(spec.loader)
        return spec


def quiet_tensorflow_import() -> None:
    """The first `import tensorflow` from now on keeps its start-up notices off stderr
    (nothing to do when it is imported already)."""
    if "tensorflow" in sys.modules:
        return
    if not any(isinstance(f, _QuietTensorFlowFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _QuietTensorFlowFinder())
