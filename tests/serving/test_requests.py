"""REST / gRPC request conversion, warmup records, version layout, model config example.

These need no model: they check that what the client builds is what TF Serving's
documented JSON mapping and TensorProto decoding turn back into the same arrays.
The end-to-end checks against an exported model are in test_export.py.
"""

import base64
import json
import os

import numpy as np
import pytest

from albert_tf.serving import layout
from albert_tf.serving import requests as rq
from tests.helpers import tf_serving

TEXTS = [b"plain ascii", "caf\u00e9 \U0001F600".encode(), b"", b"bad \xff\xfe utf-8"]
STRING_INPUTS = {"question": object, "context": object}


def _pair_inputs():
    return {"question": np.array(TEXTS, dtype=object),
            "context": np.array(TEXTS[::-1], dtype=object)}


@pytest.mark.parametrize("fmt", rq.REST_FORMATS)
def test_rest_body_round_trips_through_json_and_tf_serving_mapping(fmt):
    inputs = _pair_inputs()
    body = json.loads(json.dumps(rq.rest_body(inputs, "squad", fmt)))
    signature, parsed = tf_serving.parse_rest_body(body, STRING_INPUTS)
    assert signature == "squad"
    assert set(parsed) == set(inputs)
    for name in inputs:
        assert parsed[name].dtype == object and parsed[name].shape == (4,)
        assert list(parsed[name]) == list(inputs[name])


def test_invalid_utf8_travels_as_b64_and_valid_text_as_json_strings():
    body = rq.rest_body({"text": np.array(TEXTS, dtype=object)}, fmt="inputs")
    values = body["inputs"]["text"]
    assert values[:3] == ["plain ascii", "caf\u00e9 \U0001F600", ""]
    assert base64.b64decode(values[3]["b64"]) == b"bad \xff\xfe utf-8"


def test_documented_single_input_forms_are_accepted():
    dtypes = {"text": object}
    row = {"instances": ["a", {"b64": base64.b64encode(b"\xff").decode()}]}
    column = {"inputs": ["a", {"b64": base64.b64encode(b"\xff").decode()}]}
    for body in (row, column):
        signature, parsed = tf_serving.parse_rest_body(body, dtypes)
        assert signature == "serving_default"
        assert list(parsed["text"]) == [b"a", b"\xff"]


def test_nested_string_inputs_and_int_inputs_keep_shape_and_dtype():
    dtypes = {"question": object, "options": object, "ids": np.int32}
    inputs = {"question": np.array([b"q1", b"q2"], dtype=object),
              "options": np.array([[b"a", b"b", b"c"], [b"d", b"e", b"\xff"]], dtype=object),
              "ids": np.array([[2, 5, 3], [2, 7, 3]], dtype=np.int32)}
    for fmt in rq.REST_FORMATS:
        _, parsed = tf_serving.parse_rest_body(json.loads(json.dumps(rq.rest_body(inputs, fmt=fmt))),
                                       dtypes)
        assert parsed["options"].shape == (2, 3)
        assert parsed["options"][1, 2] == b"\xff"
        assert parsed["ids"].dtype == np.int32
        np.testing.assert_array_equal(parsed["ids"], inputs["ids"])


@pytest.mark.parametrize("body, message", [
    ({"instances": [{"question": "q"}]}, "'context' is missing"),
    ({"instances": ["q"]}, "objects naming the inputs"),
    ({"inputs": {"question": ["q"], "context": ["c"], "extra": ["x"]}}, "do not match"),
    ({"instances": [], }, "non-empty list"),
    ({"instances": [{"question": "q", "context": "c"}], "inputs": {}}, "exactly one"),
    ({"inputs": {"question": [{"b64": "!!"}], "context": ["c"]}}, None),
])
def test_bad_bodies_are_refused_with_a_reason(body, message):
    with pytest.raises((rq.RequestError, ValueError)) as info:
        tf_serving.parse_rest_body(body, STRING_INPUTS)
    if message:
        assert message in str(info.value)


def test_rest_responses_in_both_forms_give_the_same_rows():
    outputs = {"probabilities": np.array([[0.25, 0.75], [0.5, 0.5]], dtype=np.float32),
               "label": np.array([b"pos", b"neg"], dtype=object),
               "label_id": np.array([1, 0], dtype=np.int64)}
    rows = [rq.rows_from_rest_response(json.loads(json.dumps(tf_serving.rest_response(outputs, fmt))),
                                       sorted(outputs)) for fmt in rq.REST_FORMATS]
    assert rows[0] == rows[1] == [
        {"probabilities": [0.25, 0.75], "label": "pos", "label_id": 1},
        {"probabilities": [0.5, 0.5], "label": "neg", "label_id": 0}]


def test_single_output_responses_are_named_from_the_metadata():
    outputs = {"score": np.array([1.5, -2.0], dtype=np.float32)}
    for fmt in rq.REST_FORMATS:
        response = tf_serving.rest_response(outputs, fmt)
        assert "score" not in json.dumps(response)  # TF Serving drops a lone output's name
        assert rq.rows_from_rest_response(response, ["score"]) == [{"score": 1.5},
                                                                   {"score": -2.0}]
    with pytest.raises(rq.RequestError, match="server error: boom"):
        rq.rows_from_rest_response({"error": "boom"}, ["score"])


def test_rest_url_forms():
    assert rq.rest_url("http://h:8501/", "m") == "http://h:8501/v1/models/m:predict"
    assert rq.rest_url("http://h:8501", "m", 3) == "http://h:8501/v1/models/m/versions/3:predict"
    assert rq.rest_url("http://h:8501", "m", verb="metadata") == \
        "http://h:8501/v1/models/m/metadata"


def test_rest_metadata_is_read_into_input_dtypes_and_output_names():
    metadata = {"model_spec": {"name": "m"}, "metadata": {"signature_def": {"signature_def": {
        "serving_default": {
            "inputs": {"text": {"dtype": "DT_STRING", "tensor_shape": {"dim": [{"size": "-1"}]}}},
            "outputs": {"score": {"dtype": "DT_FLOAT"}, "label": {"dtype": "DT_STRING"}}},
        "token_ids": {"inputs": {"input_word_ids": {"dtype": "DT_INT32"}},
                      "outputs": {"score": {"dtype": "DT_FLOAT"}}}}}}}
    signatures = rq.signatures_from_rest_metadata(metadata)
    assert signatures["serving_default"] == {
        "inputs": {"text": object}, "outputs": ["label", "score"],
        "output_specs": {"label": (object, None), "score": (np.float32, None)}}
    assert signatures["token_ids"]["inputs"] == {"input_word_ids": np.int32}
    with pytest.raises(rq.ReplyError, match="unexpected model metadata"):
        rq.signatures_from_rest_metadata({"metadata": {}})


def test_grpc_predict_request_carries_the_arrays():
    inputs = {**_pair_inputs(), "ids": np.array([[2, 9, 3]], dtype=np.int32)}
    request = rq.predict_request("albert_squad", "squad", inputs, version=7)
    request = type(request).FromString(request.SerializeToString())
    assert request.model_spec.name == "albert_squad"
    assert request.model_spec.signature_name == "squad"
    assert request.model_spec.version.value == 7
    decoded = tf_serving.inputs_from_predict_request(request)
    assert list(decoded["context"]) == TEXTS[::-1]
    assert decoded["ids"].dtype == np.int32 and decoded["ids"].tolist() == [[2, 9, 3]]


def test_columns_from_rows_names_the_input_that_does_not_stack():
    rows = [{"question": "q", "options": ["a", "b"]}, {"question": "q", "options": ["a"]}]
    with pytest.raises(rq.RequestError, match="'options'"):
        rq.columns_from_rows(rows, {"question": object, "options": object})
    columns = rq.columns_from_rows(rows[:1] * 2, {"question": object, "options": object})
    assert columns["options"].shape == (2, 2) and columns["options"][0, 1] == b"b"


# ---------------------------------------------------------------- warmup file
def test_warmup_file_round_trips_prediction_logs(tmp_path):
    from albert_tf.serving import warmup

    examples = {"serving_default": [{"text": np.array(TEXTS, dtype=object)}],
                "text_pair": [{"text_a": np.array([b"a"], dtype=object),
                               "text_b": np.array([b"\xff"], dtype=object)}]}
    path = warmup.write_warmup(str(tmp_path), warmup.warmup_requests("m", examples))
    assert path == os.path.join(str(tmp_path), "assets.extra", "tf_serving_warmup_requests")
    assert os.listdir(os.path.dirname(path)) == ["tf_serving_warmup_requests"]  # no temp left
    requests = warmup.read_warmup(str(tmp_path))
    assert [r.model_spec.signature_name for r in requests] == ["serving_default", "text_pair"]
    assert list(tf_serving.inputs_from_predict_request(requests[0])["text"]) == TEXTS
    assert tf_serving.inputs_from_predict_request(requests[1])["text_b"].tolist() == [b"\xff"]


def test_warmup_reader_names_a_record_that_is_not_a_prediction_log(tmp_path):
    import tensorflow as tf

    from albert_tf.serving import warmup

    os.makedirs(tmp_path / "assets.extra")
    with tf.io.TFRecordWriter(warmup.warmup_path(str(tmp_path))) as writer:
        writer.write(b"\xff\xff not a proto")
    with pytest.raises(ValueError, match="record 0"):
        warmup.read_warmup(str(tmp_path))


# ------------------------------------------------------------ version layout
def test_versions_count_up_and_are_never_overwritten(tmp_path):
    model_dir = str(tmp_path / "models" / "albert")
    assert layout.next_version(model_dir) == 1
    for name in ("1", "3", "notes", ".3.tmp-x"):
        os.makedirs(os.path.join(model_dir, name))
    open(os.path.join(model_dir, "7"), "w").close()  # a file is not a version
    assert layout.existing_versions(model_dir) == [1, 3]
    assert layout.resolve_version(model_dir) == (4, os.path.join(model_dir, "4"))
    assert layout.resolve_version(model_dir, 2)[0] == 2
    with pytest.raises(layout.LayoutError, match="already exists.*next free version: 4"):
        layout.resolve_version(model_dir, 3)
    with pytest.raises(layout.LayoutError, match="must be an integer from 0 to"):
        layout.resolve_version(model_dir, -1)


def test_staged_directory_appears_only_when_complete(tmp_path):
    final = str(tmp_path / "m" / "1")
    with pytest.raises(RuntimeError):
        with layout.staged_directory(final) as staging:
            open(os.path.join(staging, "half_written"), "w").close()
            assert not os.path.exists(final)
            raise RuntimeError("export failed")
    # Staging removed, nothing published, and BASE/NAME (created by it) removed too.
    assert os.listdir(tmp_path) == []
    with layout.staged_directory(final) as staging:
        open(os.path.join(staging, "saved_model.pb"), "w").close()
    assert os.listdir(final) == ["saved_model.pb"]
    assert os.listdir(tmp_path / "m") == ["1"]
    assert oct(os.stat(final).st_mode & 0o777) == "0o755"


def test_model_config_example_parses_as_a_model_server_config():
    from google.protobuf import text_format
    from tensorflow_serving.config import model_server_config_pb2

    path = os.path.join(os.path.dirname(rq.__file__), "models.config.example")
    with open(path, encoding="utf-8") as f:
        config = text_format.Parse(f.read(), model_server_config_pb2.ModelServerConfig())
    configs = config.model_config_list.config
    assert len(configs) >= 2
    for model in configs:
        assert model.base_path == f"/models/{model.name}"
        assert model.model_platform == "tensorflow"
