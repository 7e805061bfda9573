"""Reading your own CSV / TSV / JSONL files, and the errors that name file, line and column."""

import json

import numpy as np
import pytest

from albert_tf.tokenizer import AlbertTokenizer
from albert_tf.training.finetune.examples import DataError, TextExamples, encode_texts
from albert_tf.training.finetune.files import read_text_file


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
    ("t.tsv", "a\tlabel\nhi\t1\nlonely\n", ["a"], "label", r"t\.tsv:3: the row has no value for column 'label'"),
    ("t.csv", "text,label\nhi,\n", ["text"], "label", r"t\.csv:2: the label is empty"),
    ("t.jsonl", '{"text": "a", "label": 1}\n{"text": "b"}\n', ["text"], "label",
     r"t\.jsonl:2: no field 'label'"),
    ("t.jsonl", '{"text": "a", "label": 1}\n{oops\n', ["text"], "label", r"t\.jsonl:2: not a JSON object"),
    ("t.jsonl", '["text"]\n', ["text"], "label", r"t\.jsonl:1: expected a JSON object"),
    ("t.txt", "x", ["text"], "label", r"unknown file type '\.txt'"),
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
