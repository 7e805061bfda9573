"""Which task a foreign (Hugging Face or original TF1) checkpoint was fine-tuned for.

A Hugging Face directory says it in `config.json`: `architectures` names the head,
`id2label` the classes, `problem_type` single-label, multi-label or regression;
`tokenizer_config.json` (when present) says `do_lower_case` and `keep_accents`
(`tokenizer_files.hf_tokenizer_options`, the one reader of that file).
An original google-research checkpoint says it by its variable names only:

| original script | variables | task |
|---|---|---|
| run_classifier | `output_weights` [C,H], `output_bias` [C] | classification (C > 1), regression (C = 1) |
| run_race | `output_weights` [1,H], `output_bias` [1] | multiple_choice |
| run_squad_v1 | `cls/squad/output_weights` [2,H], `cls/squad/output_bias` [2] | span |
| run_squad_v2 | `start_logits/...`, `end_logits/...`, `answer_class/...` | span_beam |
| run_pretraining | `cls/predictions/...`, `cls/seq_relationship/...` | pretraining |

run_classifier's regression (STS-B) and run_race's scorer have the same variables;
such a checkpoint needs the task named (`task="regression"` or
`task="multiple_choice"`). The result is the task record, a plain dict with the
keys of our albert_task.json; `OpenedCheckpoint.task_record` validates it and checks
that it is the task the caller named, as for every format.
"""

from __future__ import annotations

import os
from typing import Any

from albert_tf import tasks
from albert_tf.checkpoint.readers import HF_CONFIG_FILE, CheckpointError
from albert_tf.checkpoint.tokenizer_files import DEFAULT_OPTIONS, hf_tokenizer_options
from albert_tf.infra.textio import json_type, read_json_object
from albert_tf.tasks import BEAM_DEFAULTS, NULL_SCORE_DIFF_THRESHOLD

# Hugging Face architectures -> our task, each task's entry naming its class (a class
# several tasks share, AlbertForSequenceClassification, is refined by problem_type);
# HF's bare encoder loads into the pretrainer, its heads left initialised.
HF_ARCHITECTURES = {}
for _spec in tasks.TASKS.values():
    if _spec.hf_architecture and _spec.hf_problem_type is None:
        HF_ARCHITECTURES.setdefault(_spec.hf_architecture, _spec.name)
HF_ARCHITECTURES["AlbertModel"] = tasks.get("pretraining").name
# HF's problem types: the classification record's, or the task that HF writes under one.
_PROBLEM_TYPES = {hf: ours for ours, hf in tasks.get("classification").hf_problem_types.items()}
_PROBLEM_TASKS = {spec.hf_problem_type: spec for spec in tasks.TASKS.values()
                  if spec.hf_problem_type}
HF_PROBLEM_TYPES = (*_PROBLEM_TYPES, *_PROBLEM_TASKS)



def _record(task: str, **fields) -> dict[str, Any]:
    record = {"task": task, "num_classes": None, "label_names": None, "seq_length": None,
              **DEFAULT_OPTIONS}
    record.update(fields)
    return record


def _read_json(path: str) -> dict:
    return read_json_object(path, CheckpointError)


def _hf_label_names(config: dict, path: str, shapes) -> list[str]:
    id2label = config.get("id2label")
    if not id2label:
        count = config.get("num_labels", 2)
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise CheckpointError(f"{path}: num_labels={count!r} must be a positive integer")
        _check_label_count(path, config, count, shapes)  # before a name is made for each
        return [f"LABEL_{i}" for i in range(count)]  # what HF names unnamed classes
    if not isinstance(id2label, dict):
        raise CheckpointError(f"{path}: id2label must be an object, got {json_type(id2label)}")
    try:
        ids = sorted(int(k) for k in id2label)
    except ValueError:
        raise CheckpointError(f"{path}: id2label keys must be class ids, got "
                              f"{sorted(id2label)}") from None
    if ids != list(range(len(ids))):
        raise CheckpointError(f"{path}: id2label must name classes 0..{len(ids) - 1}, got "
                              f"ids {ids}")
    names = [id2label[key] for key in sorted(id2label, key=int)]
    wrong = next((key for key in sorted(id2label, key=int)
                  if not isinstance(id2label[key], str)), None)
    if wrong is not None:
        raise CheckpointError(f"{path}: id2label[{wrong!r}] must be a string (a class name), "
                              f"got {json_type(id2label[wrong])}")
    _check_label_count(path, config, names, shapes)
    return names


def _check_label_count(path: str, config: dict, names: list | int, shapes) -> None:
    """Refuses labels (id2label's names, or num_labels without it) that do not count
    the classes of the head's weights (`classifier.bias` [C]), naming both."""
    count = names if isinstance(names, int) else len(names)
    shape = shapes.get("classifier.bias") if hasattr(shapes, "get") else None
    if shape is not None and len(shape) == 1 and shape[0] != count:
        shown = "" if isinstance(names, int) else \
            ", ".join(map(str, names[:8])) + (", ..." if len(names) > 8 else "")
        given = (f"id2label names {count} labels ({shown})"
                 if config.get("id2label") else f"num_labels={count}")
        raise CheckpointError(f"{path}: {given} but the classifier head has {shape[0]} "
                              "classes (classifier.bias); make them agree in config.json")


def hf_task_record(directory: str, tensor_names) -> dict:
    """The task record of a Hugging Face ALBERT directory.

    Args:
      directory: the HF directory.
      tensor_names: its tensors' names; a {name: shape} mapping also lets the labels
        be checked against the head's class count.
    """
    path = os.path.join(directory, HF_CONFIG_FILE)
    config = _read_json(path)
    architectures = config.get("architectures") or []
    if not isinstance(architectures, list) or not all(isinstance(a, str) for a in architectures):
        raise CheckpointError(f"{path}: architectures must be an array of class names, got "
                              f"{architectures!r}")
    known = [a for a in architectures if a in HF_ARCHITECTURES]
    if known:
        task = HF_ARCHITECTURES[known[0]]
    elif architectures:
        raise CheckpointError(f"{path}: architectures={architectures} names no ALBERT head "
                              f"albert-tf knows ({', '.join(HF_ARCHITECTURES)})")
    elif any(n.startswith("qa_outputs.") for n in tensor_names):
        task = "span"
    elif any(n.startswith("classifier.") for n in tensor_names):
        raise CheckpointError(f"{path}: has a classifier.* head but no 'architectures' saying "
                              f"whether it classifies sequences, tokens or choices")
    elif any(n.startswith("predictions.") for n in tensor_names) and not any(
            n.startswith("sop_classifier.") for n in tensor_names):
        task = "masked_lm"
    else:
        task = "pretraining"
    spec = tasks.get(task)
    record = _record(spec.name, **hf_tokenizer_options(directory), **spec.hf_fields)
    if not spec.classes:
        return record
    names = _hf_label_names(config, path, tensor_names)  # checked against the head's classes
    if "problem_type" not in spec.fields:
        record.update(num_classes=len(names), label_names=names)
        return record
    # HF's default: one label is regression, more are single-label classification.
    problem = config.get("problem_type") or (
        "regression" if len(names) == 1 else "single_label_classification")
    if problem not in HF_PROBLEM_TYPES:
        raise CheckpointError(f"{path}: problem_type={problem!r} is not one of "
                              f"{', '.join(HF_PROBLEM_TYPES)}")
    if problem in _PROBLEM_TASKS:
        if len(names) != 1:
            raise CheckpointError(f"{path}: problem_type {problem!r} with "
                                  f"{len(names)} labels; albert-tf regresses one score")
        return _record(_PROBLEM_TASKS[problem].name, **hf_tokenizer_options(directory))
    record.update(num_classes=len(names), label_names=names,
                  problem_type=_PROBLEM_TYPES[problem])
    return record


def tf1_task_record(prefix: str, shapes: dict[str, tuple[int, ...]],
                    task_hint: str | None = None) -> dict:
    """The task record of an original TF1 checkpoint, from its variable names."""
    if "start_logits/dense/kernel" in shapes:  # run_squad_v2's beam, at its default sizes
        record = _record("span_beam", **BEAM_DEFAULTS,
                         null_score_diff_threshold=NULL_SCORE_DIFF_THRESHOLD)
    elif "cls/squad/output_weights" in shapes:  # run_squad_v1: SQuAD 1.1, always answers
        record = _record("span", answerability=False, null_score_diff_threshold=None)
    elif "output_weights" in shapes:
        classes = shapes["output_weights"][0]
        if classes > 1:
            record = _record("classification", num_classes=classes, problem_type="single_label")
        elif task_hint in tasks.TF1_ONE_OUTPUT_TASKS:
            record = _record(task_hint)
        else:
            raise CheckpointError(
                f"{prefix}: output_weights {shapes['output_weights']} fits both run_classifier's "
                f"regression (STS-B) and run_race's choice scorer; name the task "
                f"(--task regression or --task multiple_choice)")
    elif any(n.startswith("cls/predictions/") for n in shapes):
        record = _record("pretraining")
    else:
        record = _record("pretraining")  # an encoder alone
    return record

