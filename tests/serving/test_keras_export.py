"""Keras' own `model.export(path)` for the encoder and every task model: no call
first, any batch and length, reloaded by `tf.saved_model.load` in this process and
answering as the Keras model does."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from albert_tf import AlbertEncoder
from albert_tf.checkpoint.opened import build_task_model
from albert_tf.checkpoint.task_record import TaskRecord
from tests.helpers.model_harness import as_numpy, encoder_inputs, tiny_config
from tests.model.test_tasks import RECORDS


def _inputs(model, config, seq):
    spec = model.task_spec
    inputs = encoder_inputs(config, seq=seq, leading=(3,) if spec.choices else ())
    if spec.masked_positions:
        inputs["masked_lm_positions"] = np.array([[1, 3, 5], [0, 2, 3]], np.int32)
    return inputs


@pytest.mark.parametrize("name", ["encoder", *sorted(RECORDS)])
def test_model_export_serves_what_the_model_answers(tmp_path, name):
    config = tiny_config()
    model = AlbertEncoder(config) if name == "encoder" else build_task_model(
        config, TaskRecord.create(name, **RECORDS[name]))
    model.export(str(tmp_path / "exported"), verbose=False)
    served = tf.saved_model.load(str(tmp_path / "exported"))
    for seq in (7, 11):  # the signature takes any length, not the first call's
        inputs = _inputs(model, config, seq)
        expected = as_numpy(model(inputs, training=False))
        got = served.serve(inputs)
        if name != "encoder" and model.task_spec.single_output:  # one array, as KerasHub's
            assert not isinstance(got, dict) and not isinstance(expected, dict)
            got, expected = {"output": got}, {"output": expected}
        got = {k: v.numpy() for k, v in got.items()}
        assert sorted(got) == sorted(expected)
        for key, value in expected.items():
            np.testing.assert_allclose(got[key], value, atol=1e-5, rtol=0, err_msg=key)
