"""`albert-tf serving-check`: does an export load and answer alike in a release's TensorFlow?

The command line, importing no TensorFlow: `parse` reads it, and only then does the CLI
import the check (`serving_check.run_command`). What the check does: `serving_check.py`.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence

from albert_tf.infra import arguments

from .server_releases import NEWEST_RELEASE

DEFAULT_CACHE = os.path.join("~", ".cache", "albert-tf", "serving-check")
DEFAULT_ATOL = 1e-5


def parser() -> argparse.ArgumentParser:
    p = arguments.ArgumentParser(prog="albert-tf serving-check",
                                 description=__doc__.split("\n")[0])
    p.add_argument("export", metavar="EXPORT",
                   help="an exported version directory (BASE/NAME/VERSION, with its warmup file)")
    p.add_argument("--release", default=NEWEST_RELEASE,
                   help="the tensorflow/serving release X.Y.Z whose TensorFlow loads the export "
                   "(default %(default)s, the README's image)")
    p.add_argument("--cache", default=DEFAULT_CACHE,
                   help="where each release's virtualenv is kept (default %(default)s)")
    p.add_argument("--atol", type=float, default=DEFAULT_ATOL,
                   help="largest |difference| allowed in a numeric answer (default %(default)s)")
    return p


def parse(argv: Sequence[str]) -> argparse.Namespace:
    """The command line, parsed (`--help` exits here; a usage error is a UsageError)."""
    return parser().parse_args(list(argv))
