"""Fine-tuned task checkpoints (Hugging Face and original TF1) load with their heads.

The fixtures (tests/fixtures/tasks/, made by tools/make_reference_fixtures.py) hold
randomly initialised Hugging Face task models, the same weights as the original
scripts' fine-tuned TF1 checkpoints, and reference outputs: HF's (float64) for the HF
heads, a NumPy transcription of run_squad_v2's equations for its beam head. No torch.
"""

from __future__ import annotations

import logging
import os

import keras
import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

from albert_tf import load_checkpoint
from albert_tf.checkpoint import CheckpointError, open_checkpoint
from albert_tf.models import (
    AlbertMaskedLM,
    AlbertMultipleChoice,
    AlbertSequenceClassifier,
    AlbertSequenceRegressor,
    AlbertSpanBeamExtractor,
    AlbertSpanExtractor,
    AlbertTokenClassifier,
)
from tests.helpers.paths import TASK_FIXTURES as TASKS

INPUT_NAMES = ("input_word_ids", "input_mask", "input_type_ids")
TOLERANCE = 1e-4  # max |delta| in float32 against the float64 references

# (fixture, format, model class, task hint or None)
CASES = [
    ("seq_single", "hf", AlbertSequenceClassifier, None),
    ("seq_single", "tf1", AlbertSequenceClassifier, None),
    ("seq_multi", "hf", AlbertSequenceClassifier, None),
    ("seq_regression", "hf", AlbertSequenceRegressor, None),
    ("seq_regression", "tf1", AlbertSequenceRegressor, "regression"),
    ("token", "hf", AlbertTokenClassifier, None),
    ("qa", "hf", AlbertSpanExtractor, None),
    ("qa", "tf1", AlbertSpanExtractor, None),
    ("choice", "hf", AlbertMultipleChoice, None),
    ("choice", "tf1", AlbertMultipleChoice, "multiple_choice"),
    ("mlm", "hf", AlbertMaskedLM, None),
    ("squad_v2_beam", "tf1", AlbertSpanBeamExtractor, None),
]


def reference(name: str) -> dict[str, np.ndarray]:
    with np.load(os.path.join(TASKS, name, "reference.npz")) as data:
        return dict(data)


def max_delta(model, name: str) -> dict[str, float]:
    """max |ours - reference| per output (on real tokens for per-token outputs)."""
    ref = reference(name)
    inputs = {k: ref[k] for k in (*INPUT_NAMES, "masked_lm_positions") if k in ref}
    out = model(inputs)
    if model.task_spec.single_output:  # one array, named as the task's output
        out = {model.task_spec.label_output: out}
    out = {k: keras.ops.convert_to_numpy(v) for k, v in out.items()}
    mask = ref["input_mask"].astype(bool)
    deltas = {}
    if "logits" in ref and ref["logits"].ndim == 3 and name == "token":
        deltas["logits"] = np.abs(out["logits"] - ref["logits"])[mask].max()
    elif "logits" in ref and name == "seq_regression":
        deltas["score"] = np.abs(out["score"] - ref["logits"][:, 0]).max()
    elif "logits" in ref:
        deltas["logits"] = np.abs(out["logits"] - ref["logits"]).max()
    for key in ("start_logits", "end_logits"):
        if key in ref:  # ours puts -10000 on padding, where HF does not mask
            deltas[key] = np.abs(out[key] - ref[key])[mask].max()
    if "mlm_logits" in ref:
        deltas["mlm_logits"] = np.abs(out["mlm_logits"] - ref["mlm_logits"]).max()
    if "cls_logits" in ref:
        for key in ("start_top_index", "end_top_index"):
            np.testing.assert_array_equal(out[key], ref[key], err_msg=key)
        for key in ("start_top_log_probs", "end_top_log_probs", "cls_logits"):
            deltas[key] = np.abs(out[key] - ref[key]).max()
    assert deltas
    return {k: float(v) for k, v in deltas.items()}


@pytest.mark.parametrize("name,fmt,cls,hint", CASES, ids=[f"{c[0]}-{c[1]}" for c in CASES])
def test_task_checkpoint_matches_reference(name, fmt, cls, hint):
    model = load_checkpoint(os.path.join(TASKS, name, fmt), task=hint)
    assert type(model) is cls
    for key, delta in max_delta(model, name).items():
        assert delta <= TOLERANCE, f"{name}/{fmt} {key}: max |delta| = {delta:.3g}"


def test_hf_records_carry_label_names_and_problem_type():
    single = open_checkpoint(os.path.join(TASKS, "seq_single", "hf")).task_record.to_dict()
    assert single["task"] == "classification" and single["num_classes"] == 3
    assert single["label_names"] == ["negative", "neutral", "positive"]
    assert single["problem_type"] == "single_label"
    multi = open_checkpoint(os.path.join(TASKS, "seq_multi", "hf")).task_record.to_dict()
    assert multi["problem_type"] == "multi_label"
    assert multi["label_names"] == ["sports", "politics", "science", "art"]
    regression = open_checkpoint(os.path.join(TASKS, "seq_regression", "hf"))
    assert regression.task_record.task == "regression"
    token = open_checkpoint(os.path.join(TASKS, "token", "hf")).task_record.to_dict()
    assert token["label_names"] == ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
    qa = open_checkpoint(os.path.join(TASKS, "qa", "hf")).task_record.to_dict()
    assert (qa["task"], qa["null_score_diff_threshold"]) == ("span", 0.0)
    squad_v1 = open_checkpoint(os.path.join(TASKS, "qa", "tf1")).task_record
    assert squad_v1.null_score_diff_threshold is None
    beam = open_checkpoint(os.path.join(TASKS, "squad_v2_beam", "tf1")).task_record.to_dict()
    assert (beam["task"], beam["start_n_top"], beam["end_n_top"]) == ("span_beam", 5, 5)
    assert open_checkpoint(os.path.join(TASKS, "mlm", "hf")).task_record.task == "masked_lm"


def test_tokenizer_config_sets_casing(tmp_path):
    import shutil

    directory = tmp_path / "cased"
    shutil.copytree(os.path.join(TASKS, "seq_single", "hf"), directory)
    (directory / "tokenizer_config.json").write_text(
        '{"do_lower_case": false, "keep_accents": true}', encoding="utf-8")
    record = open_checkpoint(directory).task_record.to_dict()
    assert (record["do_lower_case"], record["keep_accents"]) == (False, True)


def test_tf1_one_output_head_needs_the_task_named():
    with pytest.raises(CheckpointError, match="regression.*multiple_choice"):
        load_checkpoint(os.path.join(TASKS, "choice", "tf1"))
    with pytest.raises(CheckpointError, match="holds a classification model, not span"):
        load_checkpoint(os.path.join(TASKS, "seq_single", "tf1"), task="span")


def test_head_problems_are_listed_together(tmp_path):
    import shutil

    directory = tmp_path / "broken"
    shutil.copytree(os.path.join(TASKS, "seq_single", "hf"), directory)
    tensors = load_file(str(directory / "model.safetensors"))
    tensors["classifier.weight"] = tensors["classifier.weight"][:2]  # 2 rows for 3 labels
    del tensors["classifier.bias"]
    tensors["extra.weight"] = np.zeros(3, np.float32)
    save_file(tensors, str(directory / "model.safetensors"))
    with pytest.raises(CheckpointError) as err:
        load_checkpoint(directory)
    message = str(err.value)
    assert "3 tensor(s)" in message
    for part in ("mis-shaped: classifier.weight", "missing: classifier.bias",
                 "unexpected: extra.weight"):
        assert part in message


def test_hf_span_model_has_no_pooler_and_loads_without_one(caplog):
    tensors = load_file(os.path.join(TASKS, "qa", "hf", "model.safetensors"))
    assert not any(k.startswith("albert.pooler") for k in tensors)
    with caplog.at_level(logging.INFO, logger="albert_tf.checkpoint"):
        assert type(load_checkpoint(os.path.join(TASKS, "qa", "hf"))) is AlbertSpanExtractor
    # The model never reads a pooler: its absence is said, not warned of.
    pooler = [r for r in caplog.records if "has no encoder.pooler weights" in r.getMessage()]
    assert [r.levelno for r in pooler] == [logging.INFO]
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_beam_head_survives_our_format(tmp_path):
    from albert_tf import save_checkpoint

    model = load_checkpoint(os.path.join(TASKS, "squad_v2_beam", "tf1"))
    out = save_checkpoint(model, tmp_path / "beam")
    assert open_checkpoint(out).task_record.task == "span_beam"
    reloaded = load_checkpoint(out)
    assert type(reloaded) is AlbertSpanBeamExtractor
    assert max(max_delta(reloaded, "squad_v2_beam").values()) <= TOLERANCE


def test_convert_keeps_head_and_record(tmp_path):
    from albert_tf.checkpoint import convert

    out = str(tmp_path / "sst")
    assert convert.main([os.path.join(TASKS, "seq_multi", "hf"), out]) == 0
    record = open_checkpoint(out).task_record.to_dict()
    assert record["label_names"] == ["sports", "politics", "science", "art"]
    assert record["problem_type"] == "multi_label"
    assert os.path.isfile(os.path.join(out, "spiece.model"))
    model = load_checkpoint(out)
    assert type(model) is AlbertSequenceClassifier
    assert max_delta(model, "seq_multi")["logits"] <= TOLERANCE
    assert convert.main([os.path.join(TASKS, "choice", "tf1"), str(tmp_path / "race")]) == 2


# ------------------------------------------------------- the new models, as the harness
def test_new_models_serialize(tmp_path):
    from tests.helpers.model_harness import (
        check_serialization,
        encoder_inputs,
        pretrainer_inputs,
        tiny_config,
    )

    config = tiny_config()
    check_serialization(AlbertMaskedLM(config), pretrainer_inputs(config), tmp_path / "mlm")
    check_serialization(AlbertSpanBeamExtractor(config, start_n_top=3, end_n_top=2),
                        encoder_inputs(config), tmp_path / "beam")


def test_beam_head_shapes_and_candidates():
    from albert_tf.heads import answer_candidates_mask
    from tests.helpers.model_harness import BATCH, SEQ, encoder_inputs, tiny_config

    config = tiny_config()
    inputs = encoder_inputs(config, seq=SEQ, batch=BATCH)
    model = AlbertSpanBeamExtractor(config, start_n_top=3, end_n_top=2)
    out = model(inputs)
    if model.task_spec.single_output:  # one array, named as the task's output
        out = {model.task_spec.label_output: out}
    out = {k: keras.ops.convert_to_numpy(v) for k, v in out.items()}
    assert out["start_top_index"].shape == (BATCH, 3) and out["start_top_index"].dtype == np.int32
    assert out["end_top_index"].shape == (BATCH, 6) and out["end_top_index"].dtype == np.int32
    assert out["end_top_log_probs"].dtype == out["cls_logits"].dtype == np.float32
    assert out["cls_logits"].shape == (BATCH,)
    p_mask = keras.ops.convert_to_numpy(answer_candidates_mask(inputs["input_mask"],
                                                               inputs["input_type_ids"]))
    # Row 0 (7 tokens, second segment from position 3): [CLS] and the second segment
    # less its closing [SEP] are the candidates.
    assert list(np.flatnonzero(p_mask[0] == 0)) == [0, 3, 4, 5]
    starts = set(out["start_top_index"][0])
    assert len(starts) == 3 and starts <= {0, 3, 4, 5}  # the beam keeps to the candidates
    assert np.all(np.diff(out["start_top_log_probs"], axis=1) <= 0)  # best first
