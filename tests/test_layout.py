"""The rooms and the arrows between them, read from the code's own imports.

Every import statement of every module (function-level ones included) is an
arrow from its file to the file it names. The rules (docs/ARCHITECTURE.md):
  * no circle between files;
  * `albert_tf/` never imports `albert_tf.training` or `albert_tf.serving`;
  * `serving/` never imports `albert_tf.training`;
  * inside `training/`, only `experiments/` imports `albert_tf.serving`;
  * `albert_tf/` imports no TensorFlow at module level, except the in-graph
    preprocessor (`albert_tf/tokenizer/preprocessor.py` with its `normalize_graph.py`,
    `wordpiece_graph.py`, `json_graph.py` and `ragged_rows.py`, `offsets.py` and
    `entity_graph.py` (token offsets and entities, served and answered in Python), and
    `text_inputs.py` and `text_answers.py`, which feed raw text through it to a task
    model's fit / predict / predict_entities; the models import them only when given text);
  * a module past 400 lines says why in its docstring ("Long because ...");
  * the layers (the model itself) import nothing of `albert_tf/checkpoint/` (presets
    among it) or `albert_tf/infra/` (CLI, arguments, atomic writes, text I/O, ...) at
    module level; inside a function, on first use, only the loading modules (LOADING):
    `from_preset` imports `albert_tf.checkpoint.presets` as KerasHub's
    `Backbone.from_preset` imports its preset loader. Those arrows point up, to modules
    that import the layers, so the circle rule leaves out that kind of import alone;
  * no module is imported by string (`importlib.import_module`, `__import__`) and no
    name looked up in `globals()` outside the package's lazy attribute loaders and the
    CLI's command table, so the arrows above are every arrow there is.
"""

from __future__ import annotations

import ast
import os
from typing import NamedTuple

import pytest

from tests.helpers.paths import REPO

ROOMS = {"albert_tf": "albert_tf", "training": "albert_tf.training", "serving": "albert_tf.serving"}
MAX_LINES = 400
TENSORFLOW = ("tensorflow", "tensorflow_text")
# The model: its layers, models, configuration and task table.
LAYERS = {f"albert_tf.{name}" for name in (
    "embedding", "transformer", "encoder", "heads", "models", "activations", "numerics", "inputs",
    "tasks", "task_model", "config", "config_keys", "api_inputs", "span_decoding", "tagging",
    "ranges", "pipeline_answers")}
NOT_FOR_THE_LAYERS = ("albert_tf.checkpoint", "albert_tf.infra")
# What the model (the layers, and the in-graph preprocessor's .keras vocabulary check)
# imports of loading and file I/O inside a function, on first use: each of these imports
# the layers, directly or through its package.
LOADING = {
    "albert_tf.checkpoint.presets",      # from_preset
    "albert_tf.checkpoint.task_record",  # a task model's record and its .keras asset
    "albert_tf.checkpoint.opened",       # a .keras file's vocabulary, sized as the model's
    "albert_tf.infra.keras_files",       # model.save("x.keras"), whole
    "albert_tf.infra.textio",            # AlbertConfig.from_json_file
    "albert_tf.infra.atomic",            # AlbertConfig.to_json_file
}
# (file, function) where a module may be named by string: the package's lazy attribute
# loaders (`albert_tf.__getattr__` and the Keras registration, which import the modules
# of its table) and the CLI's command table.
STRING_IMPORTS_ALLOWED = {("albert_tf/__init__.py", "__getattr__"),
                          ("albert_tf/__init__.py", "_register_classes"),
                          ("albert_tf/tokenizer/__init__.py", "__getattr__"),
                          ("albert_tf/infra/cli.py", "_run")}
TF_AT_MODULE_LEVEL_ALLOWED = {"albert_tf/tokenizer/preprocessor.py",
                              "albert_tf/tokenizer/normalize_graph.py",
                              "albert_tf/tokenizer/wordpiece_graph.py",
                              "albert_tf/tokenizer/json_graph.py",
                              "albert_tf/tokenizer/ragged_rows.py",
                              "albert_tf/tokenizer/offsets.py",
                              "albert_tf/tokenizer/entity_graph.py",
                              "albert_tf/tokenizer/text_answers.py",
                              "albert_tf/tokenizer/text_inputs.py",
                              "albert_tf/tokenizer/traced.py"}


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


def _targets(path: str, node: ast.AST) -> tuple[set[str], set[str]]:
    """The project modules one import statement reaches (the package, and each
    imported name that is itself a module), and those it names: each imported module,
    or the package for an imported name that is not one."""
    if isinstance(node, ast.Import):
        package, names = [], [alias.name for alias in node.names]
    else:
        base = _resolve(path, node)
        package, names = [base], [f"{base}.{alias.name}" for alias in node.names]

    def found(name):
        while name and name not in MODULES:
            name = name.rpartition(".")[0]
        return name

    named = {found(name) for name in names} - {""}
    return named | ({found(name) for name in package} - {""}), named


class Import(NamedTuple):
    """One import statement of module `source`: the modules it reaches and names, and
    whether it runs inside a function (on first use) rather than at import."""
    source: str
    targets: frozenset
    named: frozenset
    deferred: bool


def _imports_of(name: str, path: str, tree: ast.AST) -> list[Import]:
    found = []

    def visit(node: ast.AST, deferred: bool) -> None:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            targets, named = _targets(path, node)
            found.append(Import(name, frozenset(targets - {name}), frozenset(named - {name}),
                                deferred))
        deferred = deferred or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        for child in ast.iter_child_nodes(node):
            visit(child, deferred)

    visit(tree, False)
    return found


def _imports() -> list[Import]:
    found = []
    for name, path in MODULES.items():
        with open(os.path.join(REPO, path), encoding="utf-8") as f:
            found += _imports_of(name, path, ast.parse(f.read(), path))
    return found


def _loads_on_first_use(statement: Import) -> bool:
    """A deferred import of loading modules only (LOADING): an arrow up, to a module
    that imports the one importing it."""
    return statement.deferred and bool(statement.named) and statement.named <= LOADING


def _arrows(imports: list[Import], leave_out=lambda statement: False) -> dict[str, set[str]]:
    arrows: dict[str, set[str]] = {name: set() for name in MODULES}
    for statement in imports:
        if not leave_out(statement):
            arrows[statement.source].update(statement.targets)
    return arrows


IMPORTS = _imports()
ARROWS = _arrows(IMPORTS)


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
    # Every arrow but the loading modules' on first use (LOADING): from_preset's import of
    # presets, which imports the models, is the one way back up.
    arrows = _arrows(IMPORTS, leave_out=_loads_on_first_use)
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(arrows[node]):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state:
                circle = visit(nxt)
                if circle:
                    return circle
        stack.pop()
        state[node] = 2
        return None

    for module in sorted(arrows):
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


def _layer_violations(imports: list[Import]) -> list[str]:
    return sorted(f"{s.source} -> {dst}" for s in imports
                  if s.source in LAYERS and not _loads_on_first_use(s)
                  for dst in s.targets if dst.startswith(NOT_FOR_THE_LAYERS))


def test_the_layers_import_no_checkpoint_io_and_no_infrastructure():
    assert LAYERS <= set(MODULES), sorted(LAYERS - set(MODULES))
    assert LOADING <= set(MODULES), sorted(LOADING - set(MODULES))
    wrong = _layer_violations(IMPORTS)
    assert not wrong, "\n".join(wrong)


def test_the_layer_rule_sees_a_violation():
    source = ("from albert_tf import tasks\n"
              "from albert_tf.checkpoint import presets\n"            # at import: refused
              "def from_preset():\n"
              "    from albert_tf.checkpoint import presets\n"        # on first use: allowed
              "    from albert_tf.infra import atomic, cli\n"         # cli is not loading
              "    from albert_tf.checkpoint import open_checkpoint\n"  # the package's name
              "    import albert_tf.checkpoint.formats\n")
    imports = _imports_of("albert_tf.encoder", "albert_tf/encoder.py", ast.parse(source))
    assert [s.deferred for s in imports] == [False, False, True, True, True, True]
    assert _layer_violations(imports) == [
        "albert_tf.encoder -> albert_tf.checkpoint",  # with presets, at import
        "albert_tf.encoder -> albert_tf.checkpoint",  # open_checkpoint
        "albert_tf.encoder -> albert_tf.checkpoint.formats",
        "albert_tf.encoder -> albert_tf.checkpoint.presets",
        "albert_tf.encoder -> albert_tf.infra",
        "albert_tf.encoder -> albert_tf.infra.atomic",
        "albert_tf.encoder -> albert_tf.infra.cli"]
    # Not a layer: allowed anywhere.
    other = _imports_of("albert_tf.checkpoint.opened", "albert_tf/checkpoint/opened.py",
                        ast.parse("from albert_tf.infra import atomic\n"))
    assert _layer_violations(other) == []


def _string_lookups(tree: ast.AST) -> list[tuple[int, str | None]]:
    """(line, enclosing function) of every `import_module(...)`, `__import__(...)` and
    `globals()[...]` read in `tree`."""
    found = []

    def visit(node: ast.AST, function: str | None) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            function = node.name
        if isinstance(node, ast.Call):
            called = node.func
            name = called.attr if isinstance(called, ast.Attribute) else \
                called.id if isinstance(called, ast.Name) else None
            if name in ("import_module", "__import__"):
                found.append((node.lineno, function))
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) and \
                isinstance(node.value, ast.Call) and isinstance(node.value.func, ast.Name) and \
                node.value.func.id == "globals":
            found.append((node.lineno, function))
        for child in ast.iter_child_nodes(node):
            visit(child, function)

    visit(tree, None)
    return found


def test_no_module_or_class_is_looked_up_by_string():
    wrong = []
    for path in MODULES.values():
        with open(os.path.join(REPO, path), encoding="utf-8") as f:
            tree = ast.parse(f.read(), path)
        wrong += [f"{path}:{line} (in {function or 'the module'})"
                  for line, function in _string_lookups(tree)
                  if (path, function) not in STRING_IMPORTS_ALLOWED]
    assert not wrong, "\n".join(wrong)


def test_the_string_lookup_rule_sees_each_form():
    probe = ast.parse("import importlib\n"
                      "def model_type():\n"
                      "    return importlib.import_module('albert_tf.models')\n"
                      "x = __import__('albert_tf.encoder')\n"
                      "y = globals()['AlbertEncoder']\n"
                      "globals()['cached'] = 1\n")  # a store caches; it looks nothing up
    assert _string_lookups(probe) == [(3, "model_type"), (4, None), (5, None)]


def test_the_loaders_name_modules_that_exist():
    # A module renamed under the lazy table would fail only when first used.
    import albert_tf

    missing = sorted(f"{name}: {module}" for name, module in albert_tf._LAZY.items()
                     if module not in MODULES)
    assert not missing, "\n".join(missing)
