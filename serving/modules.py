"""Which serving module serves a task, and how it is written as a SavedModel.

`build_module(model, preprocessor, task, record)` picks the task's module (`Task.serving`
names it in `SERVING_MODULES`); `save_module` writes its signatures (`write_signatures`,
each traced once) and warmup requests; `served_model` gives the bfloat16 / branched copy the
export serves; `custom_ops` lists the
ops of a written SavedModel that core TensorFlow lacks. `albert-tf export`
(`export.py`) is their command.
"""

from __future__ import annotations

import os

import tensorflow as tf
from tensorflow.core.protobuf import saved_model_pb2
from tensorflow.saved_model.experimental import TrackableResource

from albert_tf import tasks
from albert_tf.checkpoint import task_record_of
from albert_tf.encoder import AlbertEncoder
from albert_tf.errors import UserError
from albert_tf.transformer import Branches

from . import layout, warmup
from .signatures import tasks as signatures
from .signatures.base import PAD_MULTIPLE, Batching
from .signatures.span import SpanModule
from .signatures.span_beam import BeamSpanModule, NullScoreSpanModule
from .signatures.token_labels import TokenClassifierModule

# What export serves: every task a record names, and "encoder" (any checkpoint's features).
TASKS = tuple(tasks.ALL_TASKS)

def _span_module(model, preprocessor, record, pad_multiple):
    if record.null_score_diff_threshold is not None:  # a foreign span head's decision rule
        return NullScoreSpanModule(model, preprocessor, record, pad_multiple)
    return SpanModule(model, preprocessor, record, pad_multiple)


# The serving module of each kind a task's entry names (`Task.serving`), built from the
# model, the preprocessor, the task record and the padding granularity.
SERVING_MODULES = {
    "features": lambda model, pre, record, pad: signatures.PretrainedModule(model, pre, pad),
    "classifier": signatures.ClassifierModule,
    "regressor": lambda model, pre, record, pad: signatures.RegressorModule(model, pre, pad),
    "token_labels": lambda model, pre, record, pad: TokenClassifierModule(
        model, pre, record.label_names, pad),
    "span": _span_module,
    "span_beam": BeamSpanModule,
    "multiple_choice": signatures.MultipleChoiceModule,
}


class ExportError(UserError):
    """A checkpoint/task/option combination that cannot be exported (one-line message)."""


def build_module(model, preprocessor, task: str | None = None, record=None,
                 pad_multiple: int | None = PAD_MULTIPLE, batching: Batching | None = None):
    """The serving tf.Module for `model` (an `albert_tf.models` model).

    Args:
      model: the Keras model; its `.task` picks the module unless `task` is given.
      preprocessor: `AlbertPreprocessor` with the serving sequence length.
      task: one of TASKS; "encoder" serves any model's encoder features.
      record: the model's `TaskRecord`, the only source of label names, problem
        type, query / answer / option lengths, n_best and the no-answer threshold
        (default: `task_record_of(model)`, i.e. the defaults).
      pad_multiple: dynamic padding granularity (None: always `seq_length`).
        Foreign heads read their decision rules from the record too (problem_type,
        null_score_diff_threshold, the beam sizes).
      batching: join concurrent calls into one batch in the graph (`Batching`); for the
        modules whose model call is one row per text (classification, regression,
        multiple choice).
    """

    spec = tasks.ALL_TASKS.get(task or model.task)
    if spec is None:
        raise ExportError(f"cannot serve task {task!r}; export one of {', '.join(TASKS)} "
                          "(--task encoder serves any checkpoint's encoder features)")
    served = model
    if not spec.recorded:  # the encoder: every model holds one
        served = model.encoder
    elif spec is not model.task_spec:
        raise ExportError(f"the checkpoint holds a {model.task} model, not {task}; "
                          f"use --task {model.task} or --task encoder")
    record = record if record is not None else task_record_of(model)
    module = SERVING_MODULES[spec.serving](served, preprocessor, record, pad_multiple)
    if batching is not None:
        if not module.batchable:
            raise ExportError(f"--batching joins one-row-per-text model calls (classification, "
                              f"regression, multiple choice); not {spec.name}'s")
        module.batching = batching
    return module


def save_module(module, directory: str, model_name: str, token_ids_only: bool = False) -> None:
    """Writes `module` as a SavedModel with its signatures and warmup requests into `directory`.

    With `token_ids_only` the SavedModel holds only the `token_ids` signature (also as
    serving_default) and no tensorflow-text op, for servers built without them.
    """

    functions = module.signatures()
    examples = module.warmup_examples()
    resources_of = None
    if token_ids_only:
        functions = {"serving_default": functions["token_ids"], "token_ids": functions["token_ids"]}
        examples = {name: examples["token_ids"] for name in functions}
    else:
        if not module.preprocessor.built:  # signatures may use its methods, not its call
            module.preprocessor.build(None)
        resources_of = module.preprocessor  # its SentencePiece resource goes with the model
    write_signatures(functions, directory, resources_of)
    warmup.write_warmup(directory, warmup.warmup_requests(model_name, examples))


def write_signatures(functions: dict, directory: str, resources_of=None) -> None:
    """Writes `functions` ({signature name: tf.function with an input signature}) as a
    SavedModel: each traced once, and saved both as the signature and as an attribute of
    the root (`loaded.<name>(...)`). The root tracks exactly the variables the traces
    use (not the Keras model: TensorFlow 1's loader, TF Serving's C++ path, would find
    them twice and restore the wrong copy) and the TensorFlow resources found under
    `resources_of` (the preprocessor's SentencePiece model).

    Keras' ExportArchive saves a tf.function attribute, which `tf.saved_model.save`
    traces a second time under its save context: every graph twice in the file, and
    twice the tracing time (benchmarks/bench_export.py). A traced function as the
    attribute is saved as it is.
    """
    traced = {name: function.get_concrete_function() for name, function in functions.items()}
    root = tf.Module()
    for name, concrete in traced.items():
        setattr(root, name, concrete)
    root.variables_used = list({id(v): v for concrete in traced.values()
                                for v in concrete.variables}.values())
    if resources_of is not None:
        root.resources = [t for t in tf.train.TrackableView(resources_of).descendants()
                          if isinstance(t, TrackableResource)]
    tf.saved_model.save(root, directory, signatures=traced)


def served_model(model, dtype: str = "float32", branches: int = 1):
    """`model` as the export serves it: its variables and compute in `dtype`, its encoder
    sublayers as `branches` independent branches. `model` itself when neither changes
    anything ("float32", 1), else one copy: `model` is never changed.

    bfloat16: heads return float32 logits and LayerNorm and the attention softmax compute
    in float32 whatever the policy, so the signatures' outputs keep their dtypes.

    branches (`albert_tf.transformer.Branches`): heads in groups, the feed-forward in
    column blocks. A server with one intra-op thread per op and several inter-op threads
    then runs one request's branches on several cores at once; the outputs equal the
    model's up to float rounding. The copy is built with the count (the encoder's
    `branches` option) and cuts its weights once they are loaded. ExportError unless
    `branches` divides the heads and the intermediate size.
    """
    if dtype == "float32" and branches == 1:
        return model
    config = model.get_config()
    if dtype != "float32":
        config["dtype"] = dtype  # every sublayer is built with its parent's dtype policy
    if branches != 1:
        check_branches(branches, model.config)
        config["branches"] = branches
    clone = type(model).from_config(config)
    clone.set_weights(model.get_weights())  # same construction order; cast on assignment
    (clone if isinstance(clone, AlbertEncoder) else clone.encoder).cut_branches()
    return clone


def check_branches(branches: int, config) -> None:
    """ExportError unless `branches` cuts the model's (its `AlbertConfig`) heads and
    intermediate size: `Branches.check`, the rule its sublayers are built by."""
    try:
        Branches.check(branches, "num_attention_heads", config.num_attention_heads)
        Branches.check(branches, "intermediate_size", config.intermediate_size)
    except ValueError as e:
        raise ExportError(f"--branches {branches}: {e}") from None


def custom_ops(directory: str) -> list[str]:
    """Ops of the SavedModel in `directory` that core TensorFlow lacks (tensorflow-text's)."""

    with open(os.path.join(directory, layout.SAVED_MODEL_FILE), "rb") as f:
        graph = saved_model_pb2.SavedModel.FromString(f.read()).meta_graphs[0].graph_def
    ops = {node.op for node in graph.node}
    ops.update(node.op for function in graph.library.function for node in function.node_def)
    return sorted(op for op in ops if not hasattr(tf.raw_ops, op))
