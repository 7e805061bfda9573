"""Your own CSV / TSV / TXT / JSONL files: reading, the errors that name file, line and
column, and classify / regress through the CLI with metrics recomputed by scikit-learn / scipy."""

import csv
import json
import os

import numpy as np
import pytest
from scipy import special, stats
from sklearn import metrics as sklearn_metrics

from albert_tf import load_checkpoint
from albert_tf.checkpoint import open_checkpoint
from albert_tf.tokenizer.spm import AlbertTokenizer
from albert_tf.training.finetune.examples import DataError, TextExamples, encode_texts
from albert_tf.training.finetune.files import read_text_file
from albert_tf.training.finetune.run import main
from albert_tf.training.finetune.train import predict_rows


def _write(path, text):
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_csv_single_text_classes_sorted_and_reused(tmp_path):
    train = _write(tmp_path / "train.csv",
                   'id,review,sentiment\n1,"Great, really",pos\n2,bad,neg\n3,"multi\nline",pos\n')
    examples, labels = read_text_file(train, ["review"], "sentiment")
    assert labels == ["neg", "pos"]
    assert examples.texts_a == ["Great, really", "bad", "multi\nline"]
    assert examples.texts_b is None
    np.testing.assert_array_equal(examples.labels, [1, 0, 1])
    assert examples.ids == [f"{train}:2", f"{train}:3", f"{train}:4"]
    dev = _write(tmp_path / "dev.csv", "review,sentiment\nok,neg\nfine,meh\n")
    with pytest.raises(DataError, match=r"dev\.csv:3: unknown label 'meh'"):
        read_text_file(dev, ["review"], "sentiment", label_names=labels)


def test_tsv_pair_numeric_labels_sort_numerically(tmp_path):
    path = _write(tmp_path / "pairs.tsv",
                  "a\tb\tlabel\nx \"quoted\"\ty\t10\np\tq\t2\nm\tn\t2\n")
    examples, labels = read_text_file(path, ["a", "b"], "label")
    assert labels == ["2", "10"]
    assert examples.texts_a[0] == 'x "quoted"'  # TSV: quotes are text
    assert examples.texts_b == ["y", "q", "n"]
    np.testing.assert_array_equal(examples.labels, [1, 0, 0])


def test_jsonl_regression_and_unlabelled(tmp_path):
    rows = [{"s1": "a", "s2": "b", "score": 4.5}, {"s1": "c", "s2": "d", "score": "1"}]
    path = _write(tmp_path / "sts.jsonl", "\n".join(json.dumps(r) for r in rows) + "\n\n")
    examples, labels = read_text_file(path, ["s1", "s2"], "score", regression=True)
    assert labels is None
    np.testing.assert_allclose(examples.labels, [4.5, 1.0])
    unlabelled, _ = read_text_file(path, ["s1"])
    assert unlabelled.labels is None and unlabelled.texts_a == ["a", "c"]


@pytest.mark.parametrize("name, text, columns, label, message", [
    ("t.csv", "text,label\n", ["text"], "label", r"t\.csv: the file has no examples"),
    ("t.csv", "", ["text"], "label", r"t\.csv: the file is empty"),
    ("t.csv", "text,lab\nhi,1\n", ["text"], "label", r"t\.csv:1: no column 'label'; the header has 'text', 'lab'"),
    ("t.tsv", "a\tlabel\nhi\t1\nlonely\n", ["a"], "label", r"t\.tsv:3: 1 cells, but the header has 2$"),
    ("t.csv", "text,label\nGreat, really,1\n", ["text"], "label",
     r"t\.csv:2: 3 cells, but the header has 2 \(an unquoted comma in a text\?\)"),
    ("t.csv", "text,label\n\"fine\",1\n\"He said \"\"no,0\nok,1\n", ["text"], "label",
     r"t\.csv:\d: unexpected end of data"),
    ("t.tsv", "a\tb\t0\nc\t1\n", [0], 2, r"t\.tsv:2: 2 cells, but the first row has 3"),
    ("t.tsv", "a\t0\n", [2], 1, r"t\.tsv:1: no column at position 2; the row has 2 cells"),
    ("t.tsv", "a\t0\n", [0], "label", r"all columns as names \(a header row\) or all as positions"),
    ("t.jsonl", '{"text": "a"}\n', [0], 1, r"give columns by name"),
    ("t.csv", "text,label\na,positive\nb,negative\nc,1\n", ["text"], "label",
     r"t\.csv:4: label '1' is a number but others are names \(e\.g\. 'positive' at .*t\.csv:2\)"),
    ("t.csv", "text,label\na,0\nb,pos\nc,1\n", ["text"], "label",
     r"t\.csv:3: label 'pos' is a name but others are numbers"),
    ("t.csv", "text,label\nhi,\n", ["text"], "label", r"t\.csv:2: the label is empty"),
    ("t.jsonl", '{"text": "a", "label": 1}\n{"text": "b"}\n', ["text"], "label",
     r"t\.jsonl:2: no field 'label'"),
    ("t.jsonl", '{"text": "a", "label": 1}\n{oops\n', ["text"], "label", r"t\.jsonl:2: not a JSON object"),
    ("t.jsonl", '["text"]\n', ["text"], "label", r"t\.jsonl:1: expected a JSON object"),
    ("t.xlsx", "x", ["text"], "label", r"unknown file type '\.xlsx'"),
])
def test_errors_name_file_line_and_column(tmp_path, name, text, columns, label, message):
    path = _write(tmp_path / name, text)
    with pytest.raises(DataError, match=message):
        read_text_file(path, columns, label)


def test_regression_label_must_be_a_number(tmp_path):
    path = _write(tmp_path / "r.csv", "t,y\na,1.5\nb,high\n")
    with pytest.raises(DataError, match=r"r\.csv:3: label 'high' in column 'y' is not a number"):
        read_text_file(path, ["t"], "y", regression=True)


def test_missing_file(tmp_path):
    with pytest.raises(DataError, match="no such file"):
        read_text_file(str(tmp_path / "nope.csv"), ["t"], "y")


def test_encode_texts_matches_the_tokenizer_unpadded(spm_model_path):
    tokenizer = AlbertTokenizer(spm_model_path)
    examples = TextExamples(["A first sentence here.", "Short"], ["and its pair", "x"],
                            np.array([1, 0]), ["0", "1"])
    encoded = encode_texts(tokenizer, examples, 12, "logits")
    for i, (a, b) in enumerate(zip(examples.texts_a, examples.texts_b)):
        packed = tokenizer.encode_pair(a, b, seq_length=12)
        length = sum(packed["input_mask"])
        assert len(encoded.features["input_word_ids"][i]) == length <= 12
        for name in encoded.features:
            np.testing.assert_array_equal(encoded.features[name][i], packed[name][:length])
    np.testing.assert_array_equal(encoded.labels["logits"], [1, 0])


@pytest.mark.parametrize("name, text", [
    ("bom.csv", "\ufefftext,label\nhello,1\nbye,0\n"),
    ("bom.tsv", "\ufefftext\tlabel\nhello\t1\nbye\t0\n"),
    ("bom.jsonl", '\ufeff{"text": "hello", "label": 1}\n{"text": "bye", "label": 0}\n'),
    ("plain.txt", "text\tlabel\nhello\t1\r\nbye\t0\r\n"),
])
def test_byte_order_mark_and_line_endings(tmp_path, name, text):
    examples, labels = read_text_file(_write(tmp_path / name, text), ["text"], "label")
    assert examples.texts_a == ["hello", "bye"] and labels == ["0", "1"]
    np.testing.assert_array_equal(examples.labels, [1, 0])


def test_headerless_file_by_positions_as_cola(tmp_path):
    # CoLA's train.tsv: source, label, original label, sentence; no header.
    path = _write(tmp_path / "train.tsv", 'gj04\t1\t\tOur friends won\'t buy " this .\n'
                                          "gj04\t0\t*\tThey drank the pub .\n")
    examples, labels = read_text_file(path, [3], 1)
    assert examples.texts_a == ["Our friends won't buy \" this .", "They drank the pub ."]
    assert labels == ["0", "1"] and examples.ids == [f"{path}:1", f"{path}:2"]
    np.testing.assert_array_equal(examples.labels, [1, 0])


def test_msr_paraphrase_txt_with_its_byte_order_mark(tmp_path):
    path = _write(tmp_path / "msr_paraphrase_train.txt",
                  "\ufeffQuality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"
                  '1\t702876\t702977\tHe called " the witness " .\tHe said " witness .\n'
                  "0\t2108705\t2108831\tYucaipa owned it .\tIt was sold .\n")
    examples, labels = read_text_file(path, ["#1 String", "#2 String"], "Quality")
    assert examples.texts_a == ['He called " the witness " .', "Yucaipa owned it ."]
    assert examples.texts_b == ['He said " witness .', "It was sold ."]
    np.testing.assert_array_equal(examples.labels, [1, 0])


def test_label_names_name_ids_or_match_names(tmp_path):
    names = ["negative", "positive"]
    ids_file = _write(tmp_path / "ids.csv", "text,label\nawful,0\ngreat,1\nfine,1\n")
    examples, labels = read_text_file(ids_file, ["text"], "label", label_names=names)
    assert labels == names
    np.testing.assert_array_equal(examples.labels, [0, 1, 1])
    named = _write(tmp_path / "named.csv", "text,label\ngreat,positive\nawful,negative\n")
    examples, _ = read_text_file(named, ["text"], "label", label_names=names)
    np.testing.assert_array_equal(examples.labels, [1, 0])
    bad = _write(tmp_path / "bad.csv", "text,label\nhmm,2\n")
    with pytest.raises(DataError, match=r"bad\.csv:2: unknown label '2'; the labels are 'negative', 'positive'"):
        read_text_file(bad, ["text"], "label", label_names=names)


def test_a_one_megabyte_cell_is_read(tmp_path):
    long_text = "word " * 210_000  # 1.05 MB, beyond csv's default 128 KiB field limit
    path = _write(tmp_path / "long.csv", f'text,label\n"{long_text}",1\nshort,0\n')
    examples, _ = read_text_file(path, ["text"], "label")
    assert examples.texts_a[0] == long_text


def _sentences(corpus_documents, n):
    return [s.replace("\t", " ") for d in corpus_documents for s in d if 3 <= len(s.split()) <= 20][:n]


def _predictions(path, classes=()):
    """The rows of a predictions file, its header checked: a probability column per class."""
    with open(path, newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    assert rows[0] == ["id", "label", "prediction", *(f"prob_{c}" for c in classes)]
    return rows[1:]


def test_cli_classify_headerless_with_label_names(tiny_checkpoint, corpus_documents, tmp_path):
    sentences = _sentences(corpus_documents, 20)
    # CoLA-like: no header, label in cell 1 as 0/1, text in cell 3; BOM on the dev file.
    rows = [f"src\t{i % 2}\t\t{s}\n" for i, s in enumerate(sentences)]
    train = _write(tmp_path / "train.tsv", "".join(rows[:12]))
    dev = _write(tmp_path / "dev.tsv", "\ufeff" + "".join(rows[12:]))
    out = str(tmp_path / "out")
    assert main(["--task", "classification", "--data", train, dev, "--columns", "3:1",
                 "--label-names", "negative,positive", "--checkpoint", tiny_checkpoint,
                 "--output", out, "--epochs", "1", "--batch-size", "4", "--seq-length", "32",
                 "--set", "jit_compile=false", "buckets=none"]) == 0
    with open(os.path.join(out, "eval_results.json")) as f:
        best = json.load(f)["best"]
    predictions = _predictions(os.path.join(out, "predictions_eval.tsv"),
                               ["negative", "positive"])
    assert [r[0] for r in predictions] == [f"{dev}:{i}" for i in range(1, 9)]
    # The probabilities are scipy's softmax of the saved model's logits.
    saved = open_checkpoint(out)
    tokenizer = saved.tokenizer_files().load()
    texts = [line.split("\t")[3].rstrip("\n") for line in rows[12:]]
    data = encode_texts(tokenizer, TextExamples(texts, None, np.zeros(8, int), [""] * 8), 32)
    logits = np.stack(predict_rows(load_checkpoint(out), data, 8, 32, None))
    probabilities = np.array([[float(p) for p in r[3:]] for r in predictions])
    np.testing.assert_allclose(probabilities, special.softmax(logits, axis=-1), atol=1e-6)
    assert [r[2] for r in predictions] == [["negative", "positive"][i]
                                           for i in probabilities.argmax(-1)]
    assert [r[1] for r in predictions] == ["negative", "positive"] * 4
    gold = [["negative", "positive"].index(r[1]) for r in predictions]
    predicted = [["negative", "positive"].index(r[2]) for r in predictions]
    assert best["accuracy"] == pytest.approx(sklearn_metrics.accuracy_score(gold, predicted))
    assert best["f1"] == pytest.approx(sklearn_metrics.f1_score(gold, predicted, zero_division=0.0))
    assert best["matthews_corrcoef"] == pytest.approx(sklearn_metrics.matthews_corrcoef(gold, predicted))
    # The served model answers with the names.
    assert open_checkpoint(out).task_record.to_dict()["label_names"] == ["negative", "positive"]


@pytest.mark.slow
def test_cli_regress_on_a_txt_file(tiny_checkpoint, corpus_documents, tmp_path):
    sentences = _sentences(corpus_documents, 24)
    lines = [f"{a}\t{b}\t{(i * 0.37) % 5:.2f}\n" for i, (a, b) in enumerate(zip(sentences, sentences[1:]))]
    train = _write(tmp_path / "train.txt", "s1\ts2\tscore\n" + "".join(lines[:14]))
    dev = _write(tmp_path / "dev.txt", "s1\ts2\tscore\n" + "".join(lines[14:]))
    out = str(tmp_path / "out")
    assert main(["--task", "regression", "--data", train, dev, "--columns", "s1,s2:score",
                 "--checkpoint", tiny_checkpoint, "--output", out, "--epochs", "1",
                 "--batch-size", "4", "--seq-length", "32", "--set", "jit_compile=false",
                 "buckets=none"]) == 0
    with open(os.path.join(out, "eval_results.json")) as f:
        best = json.load(f)["best"]
    predictions = _predictions(os.path.join(out, "predictions_eval.tsv"))
    gold = np.array([float(r[1]) for r in predictions])
    predicted = np.array([float(r[2]) for r in predictions])
    np.testing.assert_allclose(gold, [float(line.split("\t")[2]) for line in lines[14:]], rtol=1e-6)
    assert best["pearson"] == pytest.approx(stats.pearsonr(gold, predicted)[0], abs=1e-6)
    assert best["spearman"] == pytest.approx(stats.spearmanr(gold, predicted)[0], abs=1e-6)


@pytest.mark.parametrize("args, message", [
    (["--columns", "3:label"], "positions need the label's position too"),
    (["--columns", "text:1"], "all columns as header names or all as positions"),
    (["--columns", "3"], "positions need the label's position too"),
    (["--columns", "text", "--label-names", "a"], "give two or more distinct names"),
])
def test_cli_column_and_label_name_errors(tiny_checkpoint, tmp_path, capsys, args, message):
    train = _write(tmp_path / "t.tsv", "x\t0\ny\t1\n")
    assert main(["--task", "classify", "--data", train, "--checkpoint", tiny_checkpoint,
                 "--output", str(tmp_path / "out"), "--seq-length", "32", *args]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
