"""docs/transformers-users.md, claim by claim: its Python blocks run on the test fixture with
each shown result compared, its commands parse (and `convert --to hf` writes what it says),
its tables name classes, methods, options and defaults that exist and do what the rows say,
and its doc_stride formula gives the windows transformers' tokenizer cuts
(tests/fixtures/tasks/qa/pipeline_options.json, tools/make_qa_pipeline_reference.py).
The pipeline comparisons it states are tests/serving/test_qa_options.py's."""

from __future__ import annotations

import ast
import json
import os
import re
import shlex

import numpy as np
import pytest

import albert_tf
from albert_tf.checkpoint.task_record import TaskRecord
from albert_tf.models import TASK_MODELS
from albert_tf.span_decoding import align_context, context_room, window_spans
from tests.helpers.paths import TASK_FIXTURES

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAGE = os.path.join(REPO, "docs", "transformers-users.md")
HF_QA = os.path.join(TASK_FIXTURES, "qa", "hf")


@pytest.fixture(scope="module")
def page() -> str:
    with open(PAGE, encoding="utf-8") as f:
        return f.read()


@pytest.fixture(scope="module")
def reference():
    with open(os.path.join(TASK_FIXTURES, "qa", "pipeline_options.json"), encoding="utf-8") as f:
        return json.load(f)


def _blocks(page: str, language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", page, re.S)


def _rounded(value):
    """Floats to 2 decimals (the page shows scores so), inside lists and dicts."""
    if isinstance(value, float):
        return round(value, 2)
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_rounded(v) for v in value]
    return value


def test_the_python_blocks_give_what_they_show(page):
    """Each block runs in one namespace; a line followed by a `# <literal>` comment is
    evaluated and must equal it (floats to 2 decimals)."""
    namespace = {"HF_QA_DIR": HF_QA}
    shown = 0
    for block in _blocks(page, "python"):
        lines = block.splitlines()
        pending = []
        for i, line in enumerate(lines):
            following = lines[i + 1] if i + 1 < len(lines) else ""
            try:
                expected = ast.literal_eval(following[2:]) if following.startswith("# ") else None
            except (ValueError, SyntaxError):
                expected = None
            if expected is None or line.startswith("#"):
                pending.append(line)
                continue
            exec("\n".join(pending), namespace)  # noqa: S102 - the page's own code
            pending = []
            got = eval(line, namespace)  # noqa: S307
            assert _rounded(got) == _rounded(expected), line
            shown += 1
        exec("\n".join(pending), namespace)  # noqa: S102
    assert shown >= 3


def _commands(page: str, command: str) -> list[list[str]]:
    return [shlex.split(line)[2:] for block in _blocks(page, "bash")
            for line in block.splitlines() if line.startswith(f"albert-tf {command} ")]


def test_the_export_command_parses_to_the_options_named(page):
    from albert_tf.serving import export_command

    (argv,) = _commands(page, "export")
    args = export_command.parse(argv)
    assert (args.top_k, args.max_answer_len, args.handle_impossible_answer) == (3, 15, False)
    # align_to_words is Python's only; the beam head serves its best answer only
    assert "--align-to-words" not in export_command.parser()._option_string_actions
    from albert_tf.serving.export_plan import with_answer_options
    from albert_tf.span_answers import QaOptions

    beam = TaskRecord.create("span_beam")
    with pytest.raises(ValueError, match="--top-k is for start/end span heads"):
        with_answer_options(beam, QaOptions(top_k=3))
    names = re.findall(r"`(answers\w*)`", page)
    assert set(names) == {"answers", "answers_start_char", "answers_end_char",
                          "answers_score", "answers_count"}  # tests/serving/test_qa_options.py


def test_convert_to_hf_writes_the_files_named(page, tmp_path):
    from albert_tf.checkpoint import convert

    (argv,) = _commands(page, "convert")
    assert argv[2:] == ["--to", "hf"]
    named = re.search(r"# squad_hf/: (.*)", page).group(1).split(", ")
    assert convert.main([HF_QA, str(tmp_path / "hf"), "--to", "hf"]) == 0
    assert set(named) <= set(os.listdir(tmp_path / "hf"))
    with open(tmp_path / "hf" / "config.json", encoding="utf-8") as f:
        assert json.load(f)["architectures"] == ["AlbertForQuestionAnswering"]
    assert convert.main([HF_QA, str(tmp_path / "enc"), "--to", "hf", "--encoder-only"]) == 0
    with open(tmp_path / "enc" / "config.json", encoding="utf-8") as f:
        assert json.load(f)["architectures"] == ["AlbertModel"]


def _table(page: str, header: str) -> list[list[str]]:
    lines = page[page.index(header):].splitlines()
    rows = [line for line in lines[2:] if line.startswith("|")]
    end = next((i for i, line in enumerate(lines[2:]) if not line.startswith("|")), None)
    rows = lines[2:2 + end] if end is not None else rows
    return [[cell.strip() for cell in row.strip("|").split("|")] for row in rows]


def _names(cell: str) -> list[str]:
    return re.findall(r"`([^`]+)`", cell)


def test_the_class_table(page):
    """Each transformers class maps to the albert-tf class whose task entry names it; the
    methods named exist; the commands' tasks are finetune's and export's."""
    from albert_tf.serving import export_command
    from albert_tf.training.finetune import families

    rows = _table(page, "| transformers | albert-tf class |")
    assert len(rows) == 7
    for hf, ours, python, command in rows:
        (hf_class,) = _names(hf)
        classes = [getattr(albert_tf, name) for name in _names(ours)]
        if hf_class == "AlbertModel":
            assert classes == [albert_tf.AlbertEncoder]
        else:
            by_task = [cls for cls in TASK_MODELS.values()
                       if cls.task_spec.hf_architecture == hf_class]
            assert set(classes) == set(by_task), hf_class
        for method in re.findall(r"`(?:model\()?(\w+)\(", python) or _names(python):
            assert hasattr(classes[0], method.split("(")[0]), (classes[0], method)
        for task in re.findall(r"finetune --task ([\w/.]+)", command):
            assert task in families.FAMILIES or task in families.SQUAD_TASKS or \
                f"{task.split('/')[0]}{families.PER_TASK}" in families.FAMILIES, task
        for task in re.findall(r"export --task (\w+)", command):
            assert task in export_command.parser()._option_string_actions["--task"].choices
        for flag in re.findall(r"(--[\w-]+)", command):
            parser = (export_command.parser() if "export" in command.split(flag)[0]
                      else None)
            if parser is not None:
                assert flag in parser._option_string_actions, flag


def test_load_checkpoint_builds_the_architectures_class():
    model = albert_tf.load_checkpoint(HF_QA)
    with open(os.path.join(HF_QA, "config.json"), encoding="utf-8") as f:
        assert json.load(f)["architectures"] == ["AlbertForQuestionAnswering"]
    assert type(model) is albert_tf.AlbertSpanExtractor
    assert set(os.listdir(HF_QA)) >= {"config.json", "model.safetensors", "spiece.model"}


def test_the_options_table_and_defaults(page):
    rows = {_names(row[0])[0]: row for row in _table(page, "| option | here | default here |")}
    assert set(rows) == {"top_k", "max_answer_len", "handle_impossible_answer",
                         "align_to_words", "max_seq_len", "doc_stride"}
    import inspect

    signature = inspect.signature(albert_tf.AlbertSpanExtractor.answer).parameters
    for name in ("top_k", "max_answer_len", "handle_impossible_answer", "align_to_words"):
        shown = rows[name][2].split(":")[0].strip()
        assert repr(signature[name].default) == shown, name
    record = TaskRecord.create("span")
    assert "(30 unless" in rows["max_answer_len"][2] and record.max_answer_length == 30
    assert "(128)" in rows["doc_stride"][2] and record.doc_stride == 128
    assert "(20)" in page and record.n_best == 20
    assert "`--max-windows` (32 by default)" in page and record.max_windows == 32


def test_handle_impossible_answer_as_the_page_says(reference):
    """A Hugging Face head loads with null_score_diff_threshold 0 (the empty answer
    competes); False never answers ""; an answerability head: "" first with P(no answer)
    as its score when the head says so, the best span when False."""
    model = albert_tf.AlbertSpanExtractor.from_preset(HF_QA, seq_length=64)
    assert model.task_record.null_score_diff_threshold == 0.0
    questions = [c["question"] for c in reference["cases"]]
    contexts = [c["context"] for c in reference["cases"]]
    listed = model.answer(questions, contexts, top_k=60, max_answer_len=2)
    assert all(any(a["answer"] == "" for a in row) for row in listed)  # it competes
    never = model.answer(questions, contexts, top_k=60, max_answer_len=2,
                         handle_impossible_answer=False)
    assert not any(a["answer"] == "" for row in never for a in row)

    ours = albert_tf.AlbertSpanExtractor(model.config, answerability=True)
    ours.preprocessor = model.preprocessor
    ours.task_record = TaskRecord.create("span", seq_length=64, answerability=True,
                                         no_answer_threshold=0.0)  # every question: none
    kept = ours.answer(questions[:4], contexts[:4], top_k=2, handle_impossible_answer=True)
    probability = ours.predict((questions[:4], contexts[:4]), verbose=0)["no_answer_probability"]
    for row, p in zip(kept, probability):
        assert row[0]["answer"] == "" and abs(row[0]["score"] - p) < 1e-6 and row[1]["answer"]
    best = ours.answer(questions[:4], contexts[:4], handle_impossible_answer=False)
    assert all(a["answer"] for a in best)


def test_doc_stride_is_the_step_and_the_formula_gives_transformers_windows(reference, page):
    """overlap = room - step, room = seq_length - 3 - question pieces: our windows with
    doc_stride = room - overlap are the ones transformers' tokenizer cuts with stride=overlap."""
    assert "overlap = room - step" in page and "room = seq_length - 3 - question" in page
    tokenizer = albert_tf.AlbertSpanExtractor.from_preset(HF_QA, seq_length=64).preprocessor.tokenizer
    seq_length = reference["settings"]["seq_length"]
    for case in reference["windows"]:
        question = len(tokenizer.encode(case["question"]))
        assert question == case["question_pieces"]
        pieces = len(align_context(tokenizer, case["context"]).ids)
        assert pieces == case["context_pieces"]
        room = context_room(seq_length, question)
        step = room - case["overlap"]
        windows = window_spans(pieces, room, step)
        assert [list(w) for w in windows] == case["windows"], case["overlap"]
        assert all(b[0] - a[0] == step for a, b in zip(windows, windows[1:]))
    assert len({c["overlap"] for c in reference["windows"]}) >= 3


def test_python_answers_past_the_serving_cap():
    model = albert_tf.AlbertSpanExtractor.from_preset(HF_QA, seq_length=64)
    context = " ".join(["the river flows to the sea in spring."] * 200)
    pieces = len(align_context(model.preprocessor.tokenizer, context).ids)
    room = context_room(64, len(model.preprocessor.tokenizer.encode("where does the river go?")))
    windows = len(window_spans(pieces, room, model.task_record.doc_stride))
    assert windows > model.task_record.max_windows == 32
    got = model.predict((["where does the river go?"], [context]), verbose=0)
    assert got["start_char"][0] >= -1 and np.isfinite(got["score"][0])


def test_the_page_is_linked(page):
    for path in ("README.md", os.path.join("docs", "model.md")):
        with open(os.path.join(REPO, path), encoding="utf-8") as f:
            assert "transformers-users.md" in f.read(), path
