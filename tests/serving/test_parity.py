"""What fine-tuning decides is what serving does: per task, a tiny model fine-tuned through
`albert-tf finetune` with NON-default settings, exported with `albert-tf export`, and its
raw-text signature called in a process that never imports albert_tf (TensorFlow and
tensorflow-text only, the worker's signature server) equals the fine-tuned model's own
predictions on its dev examples.

The references use the settings as given on the command line (not the saved record), so
an export that read a setting from anywhere but the record would fail here.
"""

from __future__ import annotations

import csv
import hashlib
import json
import os

import numpy as np
import pytest

from albert_tf import AlbertConfig, AlbertPretrainer, load_checkpoint, save_checkpoint
from albert_tf.checkpoint.task_record import TaskRecord
from albert_tf.serving import export
from albert_tf.tokenizer.spm import AlbertTokenizer
from albert_tf.training.finetune import files, race
from albert_tf.training.finetune.examples import encode_texts
from albert_tf.training.finetune.run import main as finetune_main
from albert_tf.training.finetune.train import predict_rows
from tests.helpers.fresh_process import call_signatures
from tests.helpers.squad_files import write_squad_json

pytestmark = pytest.mark.slow

ATOL = 1e-5
LABELS = ["short", "medium", "long"]  # by word count; the CSV holds the names
SEQ = 64
COMMON = ["--epochs", "1", "--batch-size", "8"]
FAST = ["jit_compile=false", "buckets=none"]
# Non-default settings (the defaults: 128 / 64 / 30 / 20 / tuned; RACE 128).
SQUAD_SET = ["doc_stride=24", "max_query_length=12", "max_answer_length=5", "n_best=4"]
THRESHOLD = 0.45
MAX_QA = 10
RACE_SEQ = 48

def _sentences(corpus_documents, tokenizer, lo, hi, count, skip=0):
    """Real sentences of `lo`..`hi` words, each tokenizing to at most 40 pieces."""
    out = []
    for document in corpus_documents:
        for s in document:
            words = s.split()
            if lo <= len(words) <= hi and len(tokenizer.encode(s)) <= 40 and '"' not in s:
                out.append(s)
    return out[skip:skip + count]


def _csv(path, rows, header):
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        writer.writerows(rows)
    return str(path)


def _race_layout(root, articles, questions, options):
    for split, part in (("train", slice(0, 6)), ("dev", slice(6, 10))):
        for level in ("middle", "high"):
            folder = root / split / level
            folder.mkdir(parents=True)
            for i, article in enumerate(articles[part]):
                record = {"id": f"{i}.txt", "article": article,
                          "questions": questions[2 * i:2 * i + 2],
                          "options": [options[(2 * i + k) % len(options)] for k in range(2)],
                          "answers": ["ABCD"[(i + len(level)) % 4], "ABCD"[i % 4]]}
                (folder / f"{i}.txt").write_text(json.dumps(record))
    return str(root)


def _median_threshold_copy(root, out, run):
    """A copy of the SQuAD 2.0 run whose record holds a threshold between its dev
    questions' middle no-answer probabilities (tiny random models all sit near 0.5, so
    no fixed threshold is known to split them), exported, and its reference answers:
    fine-tuning's own best answers (nbest_predictions.json) with that threshold."""
    import shutil

    from albert_tf.training.finetune.metrics import apply_no_answer_threshold

    with open(os.path.join(out, "null_odds.json"), encoding="utf-8") as f:
        odds = json.load(f)
    with open(os.path.join(out, "nbest_predictions.json"), encoding="utf-8") as f:
        best = {q: (entries[0]["text"] if entries else "") for q, entries in json.load(f).items()}
    run["null_odds"] = odds
    values = sorted(odds[q] for q in run["qids"])
    threshold = (values[len(values) // 2 - 1] + values[len(values) // 2]) / 2
    copy = str(root / "runs" / "squad_v2_median")
    shutil.copytree(out, copy)
    TaskRecord.read(copy).replace(no_answer_threshold=threshold).write(copy)
    saved = str(root / "models" / "squad_v2_median")
    assert export.main(["--checkpoint", copy, "--output", saved]) == 0
    return {"out": copy, "saved": os.path.join(saved, "1"), "qids": run["qids"],
            "inputs": run["inputs"], "null_odds": odds, "threshold": threshold,
            "reference": apply_no_answer_threshold(best, odds, threshold)}


def _digest(directory):
    h = hashlib.sha256()
    for root, _, names in sorted(os.walk(directory)):
        for name in sorted(names):
            with open(os.path.join(root, name), "rb") as f:
                h.update(name.encode() + f.read())
    return h.hexdigest()


@pytest.fixture(scope="module")
def runs(tmp_path_factory, spm_model_path, corpus_documents):
    """Fine-tunes and exports every task; {task: dict(out, saved, inputs, reference)}."""
    root = tmp_path_factory.mktemp("parity")
    tok = AlbertTokenizer(spm_model_path)
    config = AlbertConfig(vocab_size=tok.vocab_size, embedding_size=8, hidden_size=12,
                          num_hidden_layers=2, num_attention_heads=3, intermediate_size=20,
                          max_position_embeddings=SEQ, initializer_range=0.2)
    checkpoint = str(root / "pretrained")
    save_checkpoint(AlbertPretrainer(config), checkpoint, spm_model=spm_model_path)
    texts = _sentences(corpus_documents, tok, 3, 22, 48)
    runs = {}

    def finetune(name, argv):
        out = str(root / "runs" / name)
        assert finetune_main(["--checkpoint", checkpoint, "--output", out, *COMMON, *argv]) == 0
        saved = str(root / "models" / name)
        assert export.main(["--checkpoint", out, "--output", saved]) == 0
        runs[name] = {"out": out, "saved": os.path.join(saved, "1")}
        return out

    # Classification with label names, and regression, on CSV files.
    def label(s):
        return LABELS[min(2, len(s.split()) // 8)]

    rows = [(s, label(s)) for s in texts]
    train, dev = _csv(root / "cls_train.csv", rows[:32], ["text", "size"]), \
        _csv(root / "cls_dev.csv", rows[32:], ["text", "size"])
    for name, task, columns, data in (
            ("classification", "classify", "text:size", (train, dev)),
            ("regression", "regress", "text:score",
             (_csv(root / "reg_train.csv", [(s, len(s) / 50) for s in texts[:32]], ["text", "score"]),
              _csv(root / "reg_dev.csv", [(s, len(s) / 50) for s in texts[32:]], ["text", "score"])))):
        out = finetune(name, ["--task", task, "--data", *data, "--columns", columns,
                              "--seq-length", "32", "--set", *FAST])
        examples, _ = files.read_text_file(data[1], ["text"], columns.split(":")[1],
                                           task == "regress",
                                           None if task == "regress" else sorted(LABELS))
        runs[name]["texts"] = examples.texts_a
        outputs = predict_rows(load_checkpoint(out), encode_texts(tok, examples, 32), 8, 32, None)
        values = np.stack(outputs)  # scores [N] or logits [N, C]
        if task != "regress":
            values = np.exp(values - values.max(-1, keepdims=True))
            values /= values.sum(-1, keepdims=True)
        runs[name]["reference"] = values
        runs[name]["inputs"] = {"text": np.array(examples.texts_a, object)}

    # SQuAD 1.1 and 2.0 from the official JSON layout; questions longer than
    # max_query_length, contexts in one window of SEQ.
    contexts = _sentences(corpus_documents, tok, 8, 18, 24, skip=48)
    questions = _sentences(corpus_documents, tok, 14, 22, 24, skip=10)
    squad_rows = []
    for i, (context, question) in enumerate(zip(contexts, questions)):
        words = context.split()
        answer = " ".join(words[i % 3:i % 3 + 2])
        squad_rows.append((f"q{i}", context, question, None if i % 4 == 3 else answer))
    for version, extra in (("v1.1", []), ("v2.0", [f"no_answer_threshold={THRESHOLD}"])):
        data = root / f"squad_{version}"
        data.mkdir()
        rows = squad_rows if version == "v2.0" else [r for r in squad_rows if r[3] is not None]
        write_squad_json(data / f"train-{version}.json", rows[:-8], version == "v2.0")
        write_squad_json(data / f"dev-{version}.json", rows[-8:], version == "v2.0")
        name = f"squad/{version}"
        out = finetune(name, ["--task", name, "--data", str(data), "--seq-length", str(SEQ),
                              "--set", *SQUAD_SET, *extra, *FAST])
        with open(os.path.join(out, "predictions.json"), encoding="utf-8") as f:
            runs[name]["reference"] = json.load(f)  # the fine-tuned model's own answers
        dev_rows = rows[-8:]
        runs[name]["qids"] = [r[0] for r in dev_rows]
        runs[name]["inputs"] = {"question": np.array([r[2] for r in dev_rows], object),
                                "context": np.array([r[1] for r in dev_rows], object)}
        if version == "v2.0":
            runs["squad/v2.0 median"] = _median_threshold_copy(root, out, runs[name])

    # RACE: questions + options longer than max_qa_length, articles cut to fit.
    articles = [" ".join(texts[i:i + 3]) for i in range(0, 30, 3)]
    long_questions = [q if i % 2 else q.rsplit(" ", 3)[0] + " _ ." for i, q in enumerate(
        _sentences(corpus_documents, tok, 10, 16, 20, skip=30))]
    options = [[" ".join(s.split()[k:k + 4]) for k in range(0, 16, 4)] for s in
               _sentences(corpus_documents, tok, 16, 22, 6, skip=5)]
    data = _race_layout(root / "RACE", articles, long_questions, options)
    out = finetune("race", ["--task", "race", "--data", data, "--seq-length", str(RACE_SEQ),
                            "--set", f"max_qa_length={MAX_QA}", *FAST])
    dev = race.read_race(race.find_split(data, "dev"))
    encoded = race.encode_race(tok, dev, RACE_SEQ, MAX_QA)
    logits = np.stack(predict_rows(load_checkpoint(out), encoded, 8, RACE_SEQ, None))
    probabilities = np.exp(logits - logits.max(-1, keepdims=True))
    runs["race"]["reference"] = probabilities / probabilities.sum(-1, keepdims=True)
    runs["race"]["inputs"] = {
        "context": np.array([e.article for e in dev], object),
        "options": np.array([[race.qa_text(e.question, o) for o in e.options] for e in dev], object)}
    runs["race"]["qa_lengths"] = [len(tok.encode(race.qa_text(e.question, o)))
                                  for e in dev for o in e.options]

    # Every task, served from raw text by a process that never imports albert_tf.
    served = call_signatures({name: (run["saved"], "serving_default", run["inputs"])
                              for name, run in runs.items()}, root)
    for name, run in runs.items():
        run["served"] = served[name]
    runs["_checkpoint"] = checkpoint
    runs["_root"] = root
    return runs


def _report(task, **figures):
    print(f"\nparity {task}: " + ", ".join(f"{k}={v}" for k, v in figures.items()))


def test_classification_with_label_names(runs):
    run = runs["classification"]
    record = TaskRecord.read(run["out"])
    assert record.label_names == tuple(sorted(LABELS)) and record.seq_length == 32
    served = run["served"]
    delta = np.abs(served["probabilities"] - run["reference"]).max()
    _report("classification", max_abs_delta=f"{delta:.2e}", examples=len(run["reference"]))
    assert delta <= ATOL
    expected = [record.label_names[i] for i in run["reference"].argmax(-1)]
    assert [x.decode() for x in served["label"]] == expected


def test_regression(runs):
    run = runs["regression"]
    delta = np.abs(run["served"]["score"] - run["reference"]).max()
    _report("regression", max_abs_delta=f"{delta:.2e}", examples=len(run["reference"]))
    assert delta <= ATOL


@pytest.mark.parametrize("version", ["v1.1", "v2.0", "v2.0 median"])
def test_squad_answers_equal_the_fine_tuned_predictions(runs, version):
    run = runs[f"squad/{version}"]
    record = TaskRecord.read(run["out"])
    assert (record.doc_stride, record.max_query_length, record.max_answer_length,
            record.n_best) == (24, 12, 5, 4)
    served = run["served"]
    answers = [a.decode() for a in served["answer"]]
    expected = [run["reference"][q] for q in run["qids"]]
    same = sum(a == e for a, e in zip(answers, expected))
    empty = sum(not e for e in expected)
    figures = {"identical_answers": f"{same}/{len(expected)}", "empty_answers": empty}
    if version.startswith("v2.0"):
        assert record.no_answer_threshold == run.get("threshold", THRESHOLD)
        odds = np.array([run["null_odds"][q] for q in run["qids"]])
        delta = np.abs(served["no_answer_probability"] - odds).max()
        figures["threshold"] = f"{record.no_answer_threshold:.4f}"
        figures["no_answer_max_abs_delta"] = f"{delta:.2e}"
        assert delta <= ATOL
    _report(f"squad/{version}", **figures)
    assert answers == expected
    if version != "v2.0":  # (at 0.45 the near-0.5 no-answer probabilities all say "")
        assert len(expected) - empty >= 3  # real answers were compared
    if version == "v2.0 median":
        assert empty >= len(expected) // 2  # the threshold decided


def test_race_with_short_max_qa_length(runs):
    run = runs["race"]
    assert TaskRecord.read(run["out"]).max_qa_length == MAX_QA
    assert max(run["qa_lengths"]) > MAX_QA  # the setting matters for these inputs
    delta = np.abs(run["served"]["probabilities"] - run["reference"]).max()
    _report("race", max_abs_delta=f"{delta:.2e}", examples=len(run["reference"]))
    assert delta <= ATOL
    assert list(run["served"]["choice"]) == list(run["reference"].argmax(-1))


def test_overwrite_replaces_a_run_only_when_asked(runs, capsys):
    """Without --overwrite an existing run is refused untouched; with it, replaced whole."""
    out, checkpoint = runs["regression"]["out"], runs["_checkpoint"]
    with open(os.path.join(out, "eval_results.json"), encoding="utf-8") as f:
        assert len(json.load(f)["history"]) == 1
    before = _digest(out)
    argv = ["--task", "regress", "--checkpoint", checkpoint, "--output", out,
            "--data", str(runs["_root"] / "reg_train.csv"), "--columns", "text:score",
            "--seq-length", "32", "--set", "train_steps=1", "seed=3", *FAST]
    assert finetune_main(argv) == 2
    error = capsys.readouterr().err.strip().splitlines()
    assert error == [f"albert-tf finetune: --output {out} already holds a fine-tuned model; "
                     "pass --overwrite to replace it"]
    assert _digest(out) == before
    with open(os.path.join(out, "model.weights.h5"), "rb") as f:
        old_weights = f.read()
    assert finetune_main(argv + ["--overwrite"]) == 0
    with open(os.path.join(out, "model.weights.h5"), "rb") as f:
        assert f.read() != old_weights  # another seed, other weights
    assert TaskRecord.read(out).task == "regression"
    with open(os.path.join(out, "eval_results.json"), encoding="utf-8") as f:
        assert json.load(f)["history"] == []  # the new run's (no dev file), not the old one's
    parent = os.path.dirname(out)
    assert sorted(os.listdir(parent)) == sorted(  # no staging or old copy left beside it
        n for n in os.listdir(parent) if not n.startswith("."))
