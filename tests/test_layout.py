"""The rooms and the arrows between them, read from the code's own imports.

Every import statement of every module (function-level ones included) is an
arrow from its file to the file it names. The rules (docs/ARCHITECTURE.md):
  * no circle between files;
  * `albert_tf/` never imports `albert_tf.training` or `albert_tf.serving`;
  * `serving/` never imports `albert_tf.training`;
  * inside `training/`, only `experiments/` imports `albert_tf.serving`;
  * `albert_tf/` imports no TensorFlow at module level, except the in-graph
    preprocessor (`albert_tf/tokenizer/preprocessor.py` with its `normalize_graph.py` and
    `wordpiece_graph.py`, and `text_inputs.py`, which
    feeds raw text through it to a task model's fit / predict; the models import it
    only when given text);
  * a module past 400 lines says why in its docstring ("Long because ...").
"""

from __future__ import annotations

import ast
import os

import pytest

from tests.helpers.paths import REPO

ROOMS = {"albert_tf": "albert_tf", "training": "albert_tf.training", "serving": "albert_tf.serving"}
MAX_LINES = 400
TENSORFLOW = ("tensorflow", "tensorflow_text")
TF_AT_MODULE_LEVEL_ALLOWED = {"albert_tf/tokenizer/preprocessor.py",
                              "albert_tf/tokenizer/normalize_graph.py",
                              "albert_tf/tokenizer/wordpiece_graph.py",
                              "albert_tf/tokenizer/text_inputs.py"}


def _modules() -> dict[str, str]:
    """Dotted module name -> path relative to the repository, for every source file."""
    modules = {}
    for folder, package in ROOMS.items():
        for parent, _, files in os.walk(os.path.join(REPO, folder)):
            for name in files:
                if not name.endswith(".py"):
                    continue
                rel = os.path.relpath(os.path.join(parent, name), REPO).replace(os.sep, "/")
                parts = rel[:-3].split("/")[1:]
                if parts and parts[-1] == "__init__":
                    parts = parts[:-1]
                modules[".".join([package, *parts])] = rel
    return modules


MODULES = _modules()
BY_PATH = {path: name for name, path in MODULES.items()}


def _package_of(path: str) -> str:
    name = BY_PATH[path]
    return name if path.endswith("__init__.py") else name.rpartition(".")[0]


def _resolve(path: str, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = _package_of(path).split(".")
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _targets(path: str, node: ast.AST) -> list[str]:
    """The project modules one import statement reaches (the package, and each
    imported name that is itself a module)."""
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    else:
        base = _resolve(path, node)
        names = [base] + [f"{base}.{alias.name}" for alias in node.names]
    found = []
    for name in names:
        while name and name not in MODULES:
            name = name.rpartition(".")[0]
        if name:
            found.append(name)
    return found


def _arrows() -> dict[str, set[str]]:
    arrows: dict[str, set[str]] = {}
    for name, path in MODULES.items():
        with open(os.path.join(REPO, path), encoding="utf-8") as f:
            tree = ast.parse(f.read(), path)
        targets = set()
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                targets.update(t for t in _targets(path, node) if t != name)
        arrows[name] = targets
    return arrows


ARROWS = _arrows()


def _room(module: str) -> str:
    if module.startswith("albert_tf.training"):
        return "training"
    if module.startswith("albert_tf.serving"):
        return "serving"
    return "albert_tf"


def test_the_walk_sees_the_packages_and_their_arrows():
    # Guards the walk itself: a resolver that found nothing would pass every rule below.
    assert "albert_tf.checkpoint" in MODULES and "albert_tf.training.pretrain.run" in MODULES
    assert "albert_tf.training.pretrain.pipeline" in ARROWS["albert_tf.training.pretrain.run"]
    assert "albert_tf.serving.export" in ARROWS["albert_tf.training.experiments.demo.run"]


def test_no_circle_between_files():
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(ARROWS[node]):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state:
                circle = visit(nxt)
                if circle:
                    return circle
        stack.pop()
        state[node] = 2
        return None

    for module in sorted(ARROWS):
        if module not in state:
            circle = visit(module)
            assert circle is None, "import circle: " + " -> ".join(circle)


@pytest.mark.parametrize("room,forbidden", [("albert_tf", {"training", "serving"}),
                                            ("serving", {"training"})])
def test_arrows_point_down(room, forbidden):
    wrong = sorted(f"{MODULES[src]} -> {dst}" for src, dsts in ARROWS.items() if _room(src) == room
                   for dst in dsts if _room(dst) in forbidden)
    assert not wrong, "\n".join(wrong)


def test_only_experiments_import_serving_from_training():
    wrong = sorted(f"{MODULES[src]} -> {dst}" for src, dsts in ARROWS.items()
                   if _room(src) == "training" and ".experiments" not in src
                   for dst in dsts if _room(dst) == "serving")
    assert not wrong, "\n".join(wrong)


def test_the_model_package_imports_no_tensorflow_at_module_level():
    wrong = []
    for name, path in MODULES.items():
        if _room(name) != "albert_tf" or path in TF_AT_MODULE_LEVEL_ALLOWED:
            continue
        with open(os.path.join(REPO, path), encoding="utf-8") as f:
            tree = ast.parse(f.read(), path)
        for node in tree.body:  # module level only: a deferred import to read a TF file is fine
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            wrong += [f"{path}:{node.lineno}: {n}" for n in names if n.split(".")[0] in TENSORFLOW]
    assert not wrong, "\n".join(wrong)


def test_long_modules_say_why():
    wrong = []
    for path in MODULES.values():
        with open(os.path.join(REPO, path), encoding="utf-8") as f:
            text = f.read()
        lines = text.count("\n")
        docstring = ast.get_docstring(ast.parse(text)) or ""
        if lines > MAX_LINES and "Long because" not in docstring:
            wrong.append(f"{path}: {lines} lines")
    assert not wrong, "\n".join(wrong)
