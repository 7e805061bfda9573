"""The task table: one entry per task owns its head arguments, record fields, loss,
serving module and foreign heads; the rest of the code asks it instead of comparing
task names."""

from __future__ import annotations

import ast
import inspect
import os

import pytest

from albert_tf import tasks
from albert_tf.checkpoint import task_record_of
from albert_tf.checkpoint.opened import build_task_model
from albert_tf.checkpoint.task_record import TaskRecord
from albert_tf.encoder import AlbertEncoder
from albert_tf.models import TASK_MODELS
from tests.helpers.model_harness import tiny_config
from tests.helpers.paths import REPO

# One record per task whose head arguments differ from the defaults, so a head argument
# dropped or swapped on the way record -> model -> record fails.
RECORDS = {
    "pretraining": {},
    "masked_lm": {"mlm_layer_norm_epsilon": 1e-5},
    "classification": {"num_classes": 3, "label_names": ["a", "b", "c"]},
    "regression": {},
    "token_classification": {"num_classes": 4},
    "span": {"answerability": True},
    "span_beam": {"start_n_top": 3, "end_n_top": 2},
    "multiple_choice": {},
}


def test_every_entry_names_its_model_class_and_the_class_names_its_entry():
    assert set(RECORDS) == set(tasks.TASKS) == set(TASK_MODELS)
    for name, spec in tasks.TASKS.items():
        cls = TASK_MODELS[name]
        assert cls.__name__ == spec.model_class and cls.task == name
        arguments = inspect.signature(cls.__init__).parameters
        assert set(spec.head_args) <= set(arguments), name
        assert set(spec.head_args) <= set(spec.fields), name  # the record holds each one
    assert tasks.ENCODER.model_class == AlbertEncoder.__name__ and not tasks.ENCODER.recorded


@pytest.mark.parametrize("name", sorted(RECORDS))
def test_record_to_model_to_record_keeps_the_head(name):
    record = TaskRecord.create(name, **RECORDS[name])
    model = build_task_model(tiny_config(), record)
    assert model.task_spec is record.spec is tasks.get(name)
    back = task_record_of(model, label_names=record.label_names)
    for field in record.spec.head_args:
        assert getattr(back, field) == getattr(record, field), field
    assert back.num_classes == record.num_classes


def test_record_fields_follow_the_entry():
    for name, spec in tasks.TASKS.items():
        record = TaskRecord.create(name, **RECORDS[name])
        assert tuple(record.to_dict()) == spec.record_fields
        for field, value in spec.defaults.items():
            if field not in RECORDS[name]:
                assert getattr(record, field) == value, (name, field)


def test_losses_metrics_and_serving_name_outputs_the_model_has():
    config = tiny_config()
    for name, spec in tasks.TASKS.items():
        model = build_task_model(config, TaskRecord.create(name, **RECORDS[name]))
        outputs = model.compute_output_spec(_spec_inputs(spec, config))
        # A single-output task returns its array (KerasHub's convention), which goes by
        # label_output outside the model; the others a dict.
        assert isinstance(outputs, dict) != spec.single_output, name
        outputs = {spec.label_output} if spec.single_output else set(outputs)
        assert set(spec.metrics) <= outputs, name
        assert spec.label_output is None or spec.label_output in outputs, name
        # span's answerable_logits exists only with answerability (RECORDS turns it on).
        assert set(spec.losses) <= outputs, name


def _spec_inputs(spec, config):
    import keras

    shape = (2, 3, 7) if spec.choices else (2, 7)
    inputs = {n: keras.KerasTensor(shape, "int32")
              for n in ("input_word_ids", "input_mask", "input_type_ids")}
    if spec.masked_positions:
        inputs["masked_lm_positions"] = keras.KerasTensor((2, 3), "int32")
    return inputs


def test_get_names_the_known_tasks():
    assert tasks.get("span") is tasks.TASKS["span"] and tasks.get(tasks.ENCODER) is tasks.ENCODER
    with pytest.raises(KeyError, match="task='spam' is not one of pretraining, masked_lm"):
        tasks.get("spam")


# The comparisons the table replaces: a task name compared with ==, !=, in (...),
# not in (...), or a prefix of one tested with startswith, read from the syntax tree.
# Only the task table may: the fine-tuning family table (`--task` values: glue/<name>,
# squad/v1.1, classification, ...) looks its names up instead.
ALLOWED_TO_NAME_TASKS = {"albert_tf/tasks.py"}


def _names(node) -> list[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [name for element in node.elts for name in _names(element)]
    return []


def _task_comparisons(tree, known: set[str]) -> list[int]:
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare) and any(
                isinstance(op, (ast.Eq, ast.NotEq, ast.In, ast.NotIn)) for op in node.ops):
            found = [n for side in (node.left, *node.comparators) for n in _names(side)]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr == "startswith":
            found = [n for argument in node.args for n in _names(argument)]
        else:
            continue
        if found and set(found) <= known:
            lines.append(node.lineno)
    return lines


def test_only_the_tables_compare_task_names():
    from albert_tf.training.finetune import families

    prefixes = {name.partition("/")[0] for name in families.FAMILIES}
    known = (set(tasks.ALL_TASKS) | set(tasks.ALIASES) | set(families.FAMILIES) | prefixes
             | {prefix + "/" for prefix in prefixes})
    # The reader itself: it sees the comparisons this test exists to forbid.
    probe = ast.parse('a = task in ("span", "span_beam")\nb = t.startswith("glue/")\n'
                      'c = spec.task != "regression"\nd = name.startswith("masked_lm")')
    assert _task_comparisons(probe, known) == [1, 2, 3, 4]
    found = {}
    for room in ("albert_tf", "training", "serving"):
        for parent, _, files in os.walk(os.path.join(REPO, room)):
            for name in files:
                if name.endswith(".py"):
                    path = os.path.join(parent, name)
                    rel = os.path.relpath(path, REPO)
                    with open(path, encoding="utf-8") as f:
                        hits = _task_comparisons(ast.parse(f.read(), path), known)
                    if hits and rel not in ALLOWED_TO_NAME_TASKS:
                        found[rel] = hits
    assert not found, found


def test_every_kind_of_label_array_has_its_check():
    """The checks `fit` runs on a plain label array are keyed by `Task.labels`: a kind the
    table names without a check (or a misspelt one) fails here, not as a KeyError at fit."""
    from albert_tf import api_inputs

    used = {spec.labels for spec in tasks.ALL_TASKS.values() if spec.labels is not None}
    assert used and set(api_inputs._LABEL_CHECKS) == used
