"""The order the test modules start in: the longest first, so the workers finish together.

`make test` runs the modules on two workers, a module on one worker (`--dist loadfile`),
in the order collected (`--no-loadscope-reorder`). A long module started last keeps one
worker busy after the other has finished, so the modules start longest first, by the
seconds each took in a recent run (MODULE_SECONDS, tests/module_seconds.json; a module it
does not list starts after those it lists). The order decides no verdict, only how long
the suite takes; `tools/module_seconds.py` writes the file anew from a run's JUnit XML.
"""

from __future__ import annotations

import json
import os

MODULE_SECONDS = os.path.join(os.path.dirname(os.path.dirname(__file__)), "module_seconds.json")


def module_seconds() -> dict[str, float]:
    """{module path from the repository root: seconds}; empty without the file."""
    try:
        with open(MODULE_SECONDS, encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError:
        return {}


def longest_first(items: list) -> None:
    """Sorts pytest `items` in place: their modules by recorded seconds, longest first
    (stable: the tests of a module keep their order, unlisted modules theirs)."""
    seconds = module_seconds()
    items.sort(key=lambda item: -seconds.get(item.nodeid.split("::", 1)[0], 0.0))
