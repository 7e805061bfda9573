"""Decisions declared once and read everywhere: the length rule, the override grammar,
the activation names, the LayerNorm epsilon, the task names."""

from __future__ import annotations

import ast
import dataclasses
import os
import re
import subprocess
import sys

import keras
import pytest

from albert_tf import AlbertConfig, ConfigError, numerics
from albert_tf.activations import get_activation
from albert_tf.checkpoint.task_record import TASKS
from albert_tf.config import MIN_SEQ_LENGTH, check_sequence_length
from albert_tf.errors import UsageError
from albert_tf.infra import arguments
from albert_tf.models import TASK_MODELS, AlbertSpanBeamExtractor, AlbertSpanExtractor
from tests.helpers.model_harness import tiny_config


# ------------------------------------------------------------------ the length rule
@pytest.mark.parametrize("value, limit", [(2, 512), (0, None), (-1, 16), (17, 16),
                                          (3.0, 16), (True, 16), ("64", None)])
def test_one_length_rule_one_text(value, limit):
    with pytest.raises(ConfigError) as caught:
        check_sequence_length(value, limit, where="--seq-length")
    limit_text = "the model's max_position_embeddings" if limit is None else \
        f"max_position_embeddings={limit}"
    assert str(caught.value) == (f"seq_length={value!r} must be an integer from "
                                 f"{MIN_SEQ_LENGTH} ([CLS] [SEP] [SEP]) to {limit_text} "
                                 "(--seq-length)")


def test_the_length_rule_accepts_its_bounds():
    assert check_sequence_length(MIN_SEQ_LENGTH) == 3
    assert check_sequence_length(16, 16) == 16
    assert tiny_config().check_sequence_length(16) == 16


# --------------------------------------------------------------- the override grammar
@dataclasses.dataclass
class _Options:
    flag: bool = False
    steps: int = 1
    rate: float = 0.1
    name: str = "x"
    limit: int | None = None
    sizes: list[int] | None = dataclasses.field(default=None,
                                                metadata={arguments.NONE_WORD: "default"})
    xla: bool | None = dataclasses.field(default=None,
                                                   metadata={arguments.NONE_WORD: "auto"})
    extra: dict = dataclasses.field(default_factory=dict)


def test_override_texts_are_read_by_the_field_types():
    texts = {"flag": "Yes", "steps": "12", "rate": "2e-5", "name": " a b", "limit": "none",
             "sizes": "16,32", "xla": "auto", "extra": '{"a": 1}'}
    assert arguments.convert_overrides(_Options, texts) == {
        "flag": True, "steps": 12, "rate": 2e-5, "name": " a b", "limit": None,
        "sizes": [16, 32], "xla": None, "extra": {"a": 1}}
    assert arguments.convert_overrides(_Options(), {"sizes": "none", "limit": "7"}) == {
        "sizes": [], "limit": 7}
    assert arguments.convert_overrides(_Options, {"sizes": "default"}) == {"sizes": None}


@pytest.mark.parametrize("key, text, message", [
    ("rate", "nan", "--set rate='nan': expected a finite number"),
    ("rate", "-inf", "--set rate='-inf': expected a finite number"),
    ("steps", "1.5", "--set steps='1.5': expected an integer"),
    ("flag", "maybe", "--set flag='maybe': expected true or false"),
    ("limit", "null!", "--set limit='null!': expected an integer or none"),
    ("xla", "none", "--set xla='none': expected true or false or auto"),
    ("sizes", "16,x",
     "--set sizes='16,x': expected comma-separated values (each an integer) or default"),
    ("extra", "[1]", "--set extra='[1]': expected a JSON object"),
    ("extra", '{"a": NaN}', "--set extra='{\"a\": NaN}': expected a JSON object"),
    ("stpes", "3", "--set 'stpes': unknown key"),
])
def test_override_errors_name_the_option_the_key_and_the_text(key, text, message):
    with pytest.raises(UsageError) as caught:
        arguments.convert_overrides(_Options, {key: text}, "--set")
    assert str(caught.value) == message


# ------------------------------------------------------- names and numbers declared once
def test_every_activation_name_is_implemented_and_accepted_by_the_config():
    for name in numerics.ACTIVATIONS:
        assert callable(get_activation(name))
        assert AlbertConfig(hidden_act=name).hidden_act == name
    with pytest.raises(ConfigError, match="hidden_act='gelu_fast' is not one of gelu, gelu_new"):
        AlbertConfig(hidden_act="gelu_fast")


def test_every_layer_norm_uses_the_one_epsilon():
    model = AlbertSpanBeamExtractor(tiny_config(), start_n_top=3, end_n_top=2)
    norms = [layer for layer in model._flatten_layers()
             if isinstance(layer, keras.layers.LayerNormalization)]
    assert len(norms) >= 3 and {n.epsilon for n in norms} == {numerics.LAYER_NORM_EPSILON}


def test_every_task_of_the_record_has_one_model_class():
    assert sorted(TASK_MODELS) == sorted(TASKS)
    assert TASK_MODELS["span"] is AlbertSpanExtractor


def test_the_beam_sizes_have_no_default_in_the_model():
    with pytest.raises(TypeError, match="start_n_top"):
        AlbertSpanBeamExtractor(tiny_config())


def test_the_config_and_the_grammar_import_no_keras():
    script = ("import sys, albert_tf.config, albert_tf.numerics, albert_tf.infra.arguments; "
              "print(sorted({m.split('.')[0] for m in sys.modules} & {'keras', 'tensorflow'}))")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "[]"


# ------------------------------------------------------------------ file names
# A file name's home is a module-level constant named *_FILE, *_FILES, *_NAME, *_GLOB,
# *_DIR(S) or *_SUFFIX (a string, or a tuple/list of strings); the names read here are
# what those constants hold, so a new constant is checked without editing this test.
_HOLDER = re.compile(r"^[A-Z][A-Z0-9_]*(FILE|FILES|_NAME|GLOB|_DIR|_DIRS|SUFFIX)$")
_ROOMS = ("albert_tf", "training", "serving")


def _sources():
    from tests.helpers.paths import REPO

    for room in _ROOMS:
        for parent, _, files in os.walk(os.path.join(REPO, room)):
            for name in sorted(files):
                if name.endswith(".py"):
                    path = os.path.join(parent, name)
                    with open(path, encoding="utf-8") as f:
                        yield os.path.relpath(path, REPO), ast.parse(f.read(), path)


def _declared_names(tree) -> dict[int, str]:
    """{id(constant node): value} of the file names a module's holder constants declare:
    names with an extension, not patterns (a `*` or a bare suffix)."""
    found = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and _HOLDER.match(t.id) for t in node.targets):
            values = node.value.elts if isinstance(node.value, (ast.Tuple, ast.List)) \
                else [node.value]
            for value in values:
                if isinstance(value, ast.Constant) and isinstance(value.value, str) \
                        and "." in value.value.strip(".") and "*" not in value.value:
                    found[id(value)] = value.value
    return found


def _string_constants(tree):
    """(node, value) of the string constants of a module, docstrings left out."""
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef,
                                       ast.AsyncFunctionDef))
                  and node.body and isinstance(node.body[0], ast.Expr)
                  and isinstance(node.body[0].value, ast.Constant)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) \
                and id(node) not in docstrings:
            yield node, node.value


def test_file_names_are_declared_once():
    sources = list(_sources())
    homes: dict[str, list[str]] = {}
    declaring = {}
    for rel, tree in sources:
        names = _declared_names(tree)
        declaring[rel] = set(names)
        for value in set(names.values()):
            homes.setdefault(value, []).append(rel)
    # The walk itself: a holder pattern that matched nothing would pass everything below.
    assert homes["albert_task.json"] == ["albert_tf/checkpoint/task_record.py"]
    assert "eval_results.json" in homes and len(homes) >= 30
    twice = {value: rels for value, rels in homes.items() if len(rels) > 1}
    assert not twice, f"declared in more than one module: {twice}"
    found = [f"{rel}:{node.lineno}: {value!r} (declared in {homes[value][0]})"
             for rel, tree in sources for node, value in _string_constants(tree)
             if value in homes and id(node) not in declaring[rel]]
    assert not found, "\n".join(found)


def test_one_rule_gives_the_masked_positions_of_a_sequence_length():
    from albert_tf.training.data import masking

    for seq_length in (16, 64, 128, 512):
        bound = masking.max_predictions_for(seq_length, 0.15)
        # A full instance asks for exactly that many; none asks for more.
        assert masking.num_to_predict(seq_length, 0.15, 10 ** 6) == bound
        assert all(masking.num_to_predict(n, 0.15, 10 ** 6) <= bound
                   for n in range(1, seq_length + 1))
