"""Writes tests/module_seconds.json from a pytest run's JUnit XML: the seconds of each
test module (setup, call and teardown of its tests), which `make test` reads to start the
longest modules first (tests/helpers/module_order.py).

Usage (`make test` leaves its run's JUnit XML in .venv/last-test-run.xml):
    make test
    .venv/bin/python tools/module_seconds.py .venv/last-test-run.xml
"""

from __future__ import annotations

import argparse
import collections
import os
import sys
import xml.etree.ElementTree as ElementTree

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from albert_tf.infra.atomic import atomic_write_json  # noqa: E402
from tests.helpers.module_order import MODULE_SECONDS  # noqa: E402


def module_seconds(junit_xml: str) -> dict[str, float]:
    """{module path: seconds} summed over the test cases of a JUnit XML file."""
    totals: dict[str, float] = collections.defaultdict(float)
    for case in ElementTree.parse(junit_xml).iter("testcase"):
        module = case.get("classname", "").split(".")
        # classname is the module's dotted path, then any test class in it
        while module and not module[-1].startswith("test_"):
            module.pop()
        if module:
            totals["/".join(module) + ".py"] += float(case.get("time", 0.0))
    return {name: round(seconds, 1) for name, seconds in
            sorted(totals.items(), key=lambda item: -item[1])}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("junit_xml", nargs="+",
                        help="one run's JUnit XML; a later file's modules replace an earlier's")
    args = parser.parse_args(argv)
    seconds: dict[str, float] = {}
    for path in args.junit_xml:
        seconds.update(module_seconds(path))
    seconds = dict(sorted(seconds.items(), key=lambda item: -item[1]))
    atomic_write_json(MODULE_SECONDS, seconds)
    print(f"{MODULE_SECONDS}: {len(seconds)} modules, {sum(seconds.values()):.0f} s in all")
    return 0


if __name__ == "__main__":
    sys.exit(main())
