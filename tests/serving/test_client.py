"""`albert-tf predict` and the request conversions against exported models.

REST bodies in both forms and gRPC PredictRequests go through TF Serving's decoding
(re-derived in `tf_serving.parse_rest_body` / the TensorProto codec) into the loaded
SavedModel and must give the answers of a direct call. The client is then run end
to end over real HTTP and gRPC transports, against stand-in servers that answer
from the loaded SavedModel, and locally.
"""

from __future__ import annotations

import json
import os
import threading
from concurrent import futures
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest
import tensorflow as tf

from albert_tf import AlbertConfig, AlbertSequenceClassifier, AlbertSpanExtractor
from albert_tf.checkpoint import task_record_of
from albert_tf.serving import export
from albert_tf.serving import requests as rq
from albert_tf.serving.client import run as client
from albert_tf.tokenizer import AlbertPreprocessor
from tests.helpers import tf_serving
from tests.helpers.local_server import send_json

pytestmark = pytest.mark.slow

TEXTS = [b"Hello, World!", b"", "Caf\u00e9 \U0001F600".encode(), b"bad \xff bytes", b"a " * 50]
LABELS = ["no", "yes"]


@pytest.fixture(scope="module")
def models(tmp_path_factory, spm_model_path):
    """{name: (SavedModel path, loaded model)} for a classifier and a SQuAD 1.1 model."""
    pre = AlbertPreprocessor(spm_model_path, 32)
    config = AlbertConfig(vocab_size=pre.tokenizer.vocab_size, embedding_size=8, hidden_size=12,
                          num_hidden_layers=2, num_attention_heads=3, intermediate_size=20,
                          max_position_embeddings=32, initializer_range=0.2)
    root = tmp_path_factory.mktemp("client")
    out = {}
    for name, model, labels in [("albert_cls", AlbertSequenceClassifier(config, 2), LABELS),
                                ("albert_qa", AlbertSpanExtractor(config), None)]:
        path = str(root / name / "1")
        record = task_record_of(model, label_names=labels)
        export.save_module(export.build_module(model, pre, record=record), path, name)
        out[name] = (path, tf.saved_model.load(path))
    return out


def _call(model, signature, inputs):
    outputs = model.signatures[signature](**{k: tf.constant(v) for k, v in inputs.items()})
    return {k: v.numpy() for k, v in outputs.items()}


def _dtypes(model, signature):
    specs = model.signatures[signature].structured_input_signature[1]
    return {n: object if s.dtype == tf.string else s.dtype.as_numpy_dtype for n, s in specs.items()}


CASES = [("albert_cls", "serving_default", {"text": np.array(TEXTS, object)}),
         ("albert_cls", "text_pair", {"text_a": np.array(TEXTS, object),
                                      "text_b": np.array(TEXTS[::-1], object)}),
         ("albert_qa", "serving_default", {"question": np.array(TEXTS, object),
                                           "context": np.array([b"Paris is in France."] * 5,
                                                               object)})]


@pytest.mark.parametrize("name, signature, inputs", CASES)
def test_rest_forms_and_grpc_requests_reach_the_signature_unchanged(models, name, signature,
                                                                    inputs):
    from tensorflow_serving.apis import predict_pb2

    _, model = models[name]
    direct = rq.rows_from_columns(_call(model, signature, inputs))
    outputs = sorted(direct[0])
    for fmt in rq.REST_FORMATS:
        body = json.loads(json.dumps(rq.rest_body(inputs, signature, fmt)))
        parsed_signature, parsed = tf_serving.parse_rest_body(body, _dtypes(model, signature))
        assert parsed_signature == signature
        response = json.loads(json.dumps(tf_serving.rest_response(_call(model, signature, parsed), fmt)))
        assert rq.rows_from_rest_response(response, outputs) == direct, fmt
    request = predict_pb2.PredictRequest.FromString(
        rq.predict_request(name, signature, inputs, version=1).SerializeToString())
    assert (request.model_spec.name, request.model_spec.signature_name) == (name, signature)
    got = _call(model, signature, tf_serving.inputs_from_predict_request(request))
    response = predict_pb2.PredictResponse()
    for key, value in got.items():
        response.outputs[key].CopyFrom(tf.make_tensor_proto(value))
    assert rq.rows_from_predict_response(
        predict_pb2.PredictResponse.FromString(response.SerializeToString())) == direct


# ------------------------------------------------------- stand-in servers
def _signature_defs(path):
    from tensorflow.core.protobuf import saved_model_pb2

    with open(f"{path}/saved_model.pb", "rb") as f:
        return saved_model_pb2.SavedModel.FromString(f.read()).meta_graphs[0].signature_def


def _rest_server(models):
    """TF Serving's REST predict and metadata verbs, answered from the loaded models."""
    from google.protobuf import json_format
    from tensorflow_serving.apis import get_model_metadata_pb2

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def _reply(self, code, body):
            send_json(self, code, body)

        def do_GET(self):  # /v1/models/NAME[/versions/N]/metadata
            name = self.path.split("/")[3]
            if name not in models:
                return self._reply(404, {"error": f"Servable not found for request: {name}"})
            defs = get_model_metadata_pb2.SignatureDefMap(
                signature_def=_signature_defs(models[name][0]))
            self._reply(200, {"model_spec": {"name": name}, "metadata": {
                "signature_def": json_format.MessageToDict(defs, preserving_proto_field_name=True)}})

        def do_POST(self):  # /v1/models/NAME[/versions/N]:predict
            name = self.path.split("/")[3].split(":")[0]
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            model = models[name][1]
            try:
                signature, inputs = tf_serving.parse_rest_body(body, _dtypes(model, body.get(
                    "signature_name", "serving_default")))
                fmt = "instances" if "instances" in body else "inputs"
                self._reply(200, tf_serving.rest_response(_call(model, signature, inputs), fmt))
            except (rq.RequestError, KeyError) as e:
                self._reply(400, {"error": str(e)})

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def _grpc_server(models):
    """TF Serving's PredictionService (Predict, GetModelMetadata) from the loaded models."""
    import grpc
    from tensorflow_serving.apis import (
        get_model_metadata_pb2,
        predict_pb2,
        prediction_service_pb2_grpc,
    )

    class Servicer(prediction_service_pb2_grpc.PredictionServiceServicer):
        def Predict(self, request, context):
            model = models[request.model_spec.name][1]
            out = _call(model, request.model_spec.signature_name or "serving_default",
                        tf_serving.inputs_from_predict_request(request))
            response = predict_pb2.PredictResponse()
            for key, value in out.items():
                response.outputs[key].CopyFrom(tf.make_tensor_proto(value))
            return response

        def GetModelMetadata(self, request, context):
            response = get_model_metadata_pb2.GetModelMetadataResponse()
            response.metadata["signature_def"].Pack(get_model_metadata_pb2.SignatureDefMap(
                signature_def=_signature_defs(models[request.model_spec.name][0])))
            return response

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    prediction_service_pb2_grpc.add_PredictionServiceServicer_to_server(Servicer(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    return server, port


@pytest.fixture(scope="module")
def servers(models):
    rest = _rest_server(models)
    grpc_server, grpc_port = _grpc_server(models)
    yield f"http://127.0.0.1:{rest.server_address[1]}", f"127.0.0.1:{grpc_port}"
    rest.shutdown()
    grpc_server.stop(None)


def _read_jsonl(path):
    """The output rows without their "index", which must count the input rows from 0."""
    with open(path, encoding="utf-8") as f:
        rows = [json.loads(line) for line in f]
    assert [row.pop("index") for row in rows] == list(range(len(rows)))
    return rows


def test_predict_gives_the_same_rows_over_rest_grpc_and_locally(models, servers, tmp_path):
    rest, grpc_target = servers
    text_file = tmp_path / "texts.txt"
    texts = [t for t in TEXTS if t != b"bad \xff bytes"]  # predict reads UTF-8 files only
    text_file.write_bytes(b"\n".join(texts) + b"\n")
    path, model = models["albert_cls"]
    want = rq.rows_from_columns(_call(model, "serving_default", {"text": np.array(texts, object)}))
    assert [row["label"] for row in want] == [LABELS[row["label_id"]] for row in want]
    routes = [["--server", rest, "--rest-format", "instances"],
              ["--server", rest, "--rest-format", "inputs", "--version", "1"],
              ["--grpc", grpc_target], ["--saved-model", path],
              ["--saved-model", os.path.dirname(path)]]  # BASE/NAME: its latest version
    for index, route in enumerate(routes):
        out = tmp_path / f"out{index}.jsonl"
        argv = [*route, "--model", "albert_cls", "--input", str(text_file), "--output", str(out),
                "--batch-size", "2"]
        assert client.main(argv) == 0, route
        got = _read_jsonl(out)
        # Batches of 2 rows run other matrix shapes than one call on every text: the same
        # labels, probabilities equal to float32 rounding.
        assert [{k: v for k, v in row.items() if k != "probabilities"} for row in got] == [
            {k: v for k, v in row.items() if k != "probabilities"} for row in want], route
        np.testing.assert_allclose([row["probabilities"] for row in got],
                                   [row["probabilities"] for row in want], atol=1e-6, rtol=0)


def test_predict_reads_jsonl_for_two_input_signatures(models, servers, tmp_path):
    rest, grpc_target = servers
    rows = [{"question": "Where is Paris?", "context": "Paris is in France."},
            {"question": "", "context": ""}, {"question": "Caf\u00e9?", "context": "\ud800 x"}]
    source = tmp_path / "qa.jsonl"
    source.write_text("\n".join(json.dumps(r) for r in rows) + "\n\n", encoding="utf-8")
    outputs = []
    for route in (["--server", rest], ["--grpc", grpc_target]):
        out = tmp_path / f"qa_out_{route[0].lstrip('-')}.jsonl"
        assert client.main([*route, "--model", "albert_qa", "--input", str(source),
                            "--output", str(out)]) == 0
        outputs.append(_read_jsonl(out))
    assert outputs[0] == outputs[1] and len(outputs[0]) == 3
    assert set(outputs[0][0]) == {"answer", "start_char", "end_char", "score", "has_answer"}
    answered = outputs[0][0]
    assert rows[0]["context"][answered["start_char"]:answered["end_char"]] == answered["answer"]
    assert outputs[0][1]["has_answer"] is False


def test_predict_reports_bad_input_and_servers_in_one_line(models, servers, tmp_path, capsys):
    rest, _ = servers
    path, _ = models["albert_qa"]
    source = tmp_path / "bad.jsonl"
    source.write_text('{"question": "q", "context": "c"}\n{"question": "q"}\n', encoding="utf-8")
    cases = [
        (["--saved-model", path, "--input", str(source)], 2, "bad.jsonl:2: expected an object "
                                                             "with keys ['context', 'question']"),
        (["--saved-model", path, "--input", str(source), "--signature", "nope"], 2,
         "no signature 'nope'"),
        (["--saved-model", path, "--input", str(tmp_path / "bad.txt")], 2,
         "JSON Lines with those keys"),
        (["--saved-model", str(tmp_path), "--input", str(source)], 2, "not a SavedModel"),
        (["--server", rest, "--model", "missing", "--input", str(source)], 1, "HTTP 404"),
        (["--server", "http://127.0.0.1:9", "--input", str(source)], 1, "127.0.0.1:9"),
    ]
    (tmp_path / "bad.txt").write_text("one text\n", encoding="utf-8")
    for argv, code, message in cases:
        assert client.main([*argv, "--output", str(tmp_path / "o.jsonl")]) == code, argv
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) >= 1 and message in err[-1], (argv, err)
        assert not (tmp_path / "o.jsonl").exists()  # nothing half-written
