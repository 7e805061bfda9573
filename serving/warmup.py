"""TF Serving warmup records: `assets.extra/tf_serving_warmup_requests`.

TF Serving replays the records of this TFRecord file (PredictionLog protos from
tensorflow-serving-api, a core dependency of albert-tf) when it loads a version, before marking it available, so
the first real request does not pay for graph initialisation. We write a few real
requests per signature, built with the same `predict_request` the gRPC client uses.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import tensorflow as tf

from albert_tf import errors
from albert_tf.infra import atomic

from .requests import predict_request

WARMUP_DIR = "assets.extra"
WARMUP_FILE = "tf_serving_warmup_requests"
# TF Serving reads at most this many warmup records.
MAX_WARMUP_RECORDS = 1000

logger = logging.getLogger(__name__)


def require_serving_api() -> None:
    """Raises UserError (before anything is written) when tensorflow-serving-api is missing.

    It is an install requirement; this catches an environment installed without
    dependencies (pip --no-deps) with one line instead of a failure mid-export.
    """
    try:
        import tensorflow_serving.apis.prediction_log_pb2  # noqa: F401
    except ImportError as e:
        raise errors.UserError(
            f"export writes TF Serving warmup requests and needs tensorflow-serving-api "
            f"(a dependency of albert-tf; {e}); pip install "
            f"'tensorflow-serving-api=={tf.__version__.rsplit('.', 1)[0]}.*'") from None


def warmup_path(saved_model_dir: str) -> str:
    return os.path.join(saved_model_dir, WARMUP_DIR, WARMUP_FILE)


def warmup_requests(model_name: str,
                    examples: Mapping[str, Sequence[Mapping[str, np.ndarray]]]
                    ) -> list:
    """PredictRequests for `examples`: {signature name: [input arrays, ...]}."""
    return [predict_request(model_name, signature, inputs)
            for signature, batches in examples.items() for inputs in batches]


def write_warmup(saved_model_dir: str,
                 requests: Iterable) -> str:
    """Writes the requests as PredictionLog records into the SavedModel's assets.extra/.

    The file is written under a temporary name and renamed when complete.

    Returns:
      The path of the warmup file.
    """
    # Deferred: a missing tensorflow-serving-api is one line from require_serving_api.
    from tensorflow_serving.apis import prediction_log_pb2

    records = [prediction_log_pb2.PredictionLog(
        predict_log=prediction_log_pb2.PredictLog(request=request)) for request in requests]
    if not records or len(records) > MAX_WARMUP_RECORDS:
        raise ValueError(f"{len(records)} warmup requests; TF Serving takes 1 to "
                         f"{MAX_WARMUP_RECORDS}")
    path = warmup_path(saved_model_dir)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with atomic.atomic_path(path) as tmp, tf.io.TFRecordWriter(tmp) as writer:
        for record in records:
            writer.write(record.SerializeToString())
    logger.info("wrote %d warmup requests to %s", len(records), path)
    return path


def read_warmup(saved_model_dir: str) -> list:
    """The PredictRequests stored in a SavedModel's warmup file, in order.

    Raises:
      ValueError: a record is not a PredictionLog holding a predict request (the
        message names the file and the record number).
    """
    path = warmup_path(saved_model_dir)
    # Deferred: a missing tensorflow-serving-api is one line from require_serving_api.
    from tensorflow_serving.apis import prediction_log_pb2

    requests = []
    for index, record in enumerate(tf.data.TFRecordDataset(path).as_numpy_iterator()):
        log = prediction_log_pb2.PredictionLog()
        try:
            log.ParseFromString(record)
        except Exception as e:  # protobuf's DecodeError
            raise ValueError(f"{path}: record {index} is not a PredictionLog ({e})") from None
        if log.WhichOneof("log_type") != "predict_log":
            raise ValueError(f"{path}: record {index} holds {log.WhichOneof('log_type')}, "
                             "not a predict_log")
        requests.append(log.predict_log.request)
    return requests
