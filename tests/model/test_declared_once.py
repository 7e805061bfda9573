"""Decisions declared once and read everywhere: the length rule, the override grammar,
the activation names, the LayerNorm epsilon, the task names."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import typing

import keras
import pytest

from albert_tf import AlbertConfig, ConfigError, arguments, numerics
from albert_tf.activations import get_activation
from albert_tf.checkpoint.task_record import TASKS
from albert_tf.config import MIN_SEQ_LENGTH, check_sequence_length
from albert_tf.errors import UsageError
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
    xla: typing.Optional[bool] = dataclasses.field(default=None,
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
    script = ("import sys, albert_tf.config, albert_tf.numerics, albert_tf.arguments; "
              "print(sorted({m.split('.')[0] for m in sys.modules} & {'keras', 'tensorflow'}))")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "[]"


# ------------------------------------------------------------------ file names
# Each file or directory name a job writes or reads, and the one module that declares it.
DECLARED = {
    "saved_model.pb": "albert_tf/checkpoint/readers.py",
    "albert_config.json": "albert_tf/checkpoint/readers.py",
    "albert_task.json": "albert_tf/checkpoint/task_record.py",
    "model.weights.h5": "albert_tf/checkpoint/ours.py",
    "spiece.model": "albert_tf/tokenizer/kinds.py",
    "vocab.txt": "albert_tf/tokenizer/kinds.py",
    "vocab_chinese.txt": "albert_tf/checkpoint/tokenizer_files.py",
    "pretrain-*.tfrecord": "training/data/create_data.py",
    "create_data_config.json": "training/data/create_data.py",
    "checkpoints": "training/runtime/layout.py",
    "batching_parameters.txt": "serving/layout.py",
}


def _string_constants(path: str):
    """(line, value) of the string constants of a module, docstrings left out."""
    import ast

    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef,
                                       ast.AsyncFunctionDef))
                  and node.body and isinstance(node.body[0], ast.Expr)
                  and isinstance(node.body[0].value, ast.Constant)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) \
                and id(node) not in docstrings:
            yield node.lineno, node.value


def test_file_names_are_declared_once():
    import os

    from tests.helpers.paths import REPO

    found = []
    for room in ("albert_tf", "training", "serving"):
        for parent, _, files in os.walk(os.path.join(REPO, room)):
            for name in files:
                if not name.endswith(".py"):
                    continue
                path = os.path.join(parent, name)
                rel = os.path.relpath(path, REPO)
                for line, value in _string_constants(path):
                    if value in DECLARED and DECLARED[value] != rel:
                        found.append(f"{rel}:{line}: {value!r} (declared in {DECLARED[value]})")
    assert not found, "\n".join(found)


def test_one_rule_gives_the_masked_positions_of_a_sequence_length():
    from albert_tf.training.data import masking

    for seq_length in (16, 64, 128, 512):
        bound = masking.max_predictions_for(seq_length, 0.15)
        # A full instance asks for exactly that many; none asks for more.
        assert masking.num_to_predict(seq_length, 0.15, 10 ** 6) == bound
        assert all(masking.num_to_predict(n, 0.15, 10 ** 6) <= bound
                   for n in range(1, seq_length + 1))
